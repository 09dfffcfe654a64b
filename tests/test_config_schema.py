"""Typed configs (archsim.schema): every system's dataclass schema is the one source of its defaults, its
--help, the `archsim run` flags and the checks of --set / --config / sweep values. Resolved configs are
byte-identical to those of the dict-based resolvers they replaced (results are cached by config hash)."""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim import registry, schema
from archsim.cli import main
from archsim.errors import ConfigError

FIXTURE = Path(__file__).parent / "fixtures" / "resolved_configs.json"
# archsim's own systems (a test module may register a toy system of its own, e.g. tests/sweep_fixtures.py's
# toy-roofline, which would otherwise join this list when that module is imported first)
SYSTEMS = [name for name in registry.names() if registry.get(name).__module__.startswith("archsim.")]


def _cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str) -> str:
    assert err.startswith("archsim: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _words(text: str) -> str:
    """Whitespace collapsed; argparse wraps help lines after a hyphen ("reduce-\\nscatter"), so none after one."""
    import re

    return re.sub(r"-\s+", "-", " ".join(text.split()))


# -- compatibility: the resolved dict of every system is unchanged -----------------------------------------
def test_resolved_configs_byte_identical_to_the_dict_resolvers():
    # resolved_configs.json was written by the DEFAULTS-dict resolvers (commit ae750ab) for these inputs; its two
    # t3 entries were rewritten when t3's defaults changed (mca_threshold dynamic, new key nmc_update; issue 22:
    # mca_threshold auto, new keys mca_gate and memory_mapping; issue 34: mca_threshold dynamic, mca_gate yield,
    # window_cycles 0, new key ring_directions), the NeuPIMs family's when issue 23 added
    # npu_attention, gpu_roofline and per-system mappings (npu_pim: the naive baseline), and again when issue 33
    # added kv_layout (default head_rows, the layout before it) and gave npu_only its own mapping (npu_only). A change of defaults that is meant:
    # `tests/fixtures/make_resolved_configs.py` rewrites the fixture (review its diff)
    cases = json.loads(FIXTURE.read_text())
    assert {c["input"]["system"] for c in cases} == set(SYSTEMS)
    for case in cases:
        got = json.dumps(registry.resolve_config(copy.deepcopy(case["input"])), default=str)
        assert got == case["resolved_json"], case["input"]


@pytest.mark.parametrize("system", SYSTEMS)
def test_schema_defaults_are_valid_and_resolving_is_idempotent(system):
    cls = registry.schema_of(system)
    assert cls is not None, f"{system} has no typed config"
    for key in schema.keys(cls):
        if key.default is not None and schema.section_of(key.type) is None:
            assert key.problem(key.default) is None, (key.path, key.default)
        assert key.help, key.path
    base = {"system": system}
    if system == "dram-trace":
        base["trace"] = {"kind": "random", "requests": 10}
    once = registry.resolve_config(copy.deepcopy(base))
    assert registry.resolve_config(copy.deepcopy(once)) == once


# -- help lists every key ----------------------------------------------------------------------------------
@pytest.mark.parametrize("system", SYSTEMS)
def test_run_help_lists_every_key_with_type_default_and_help(capsys, system):
    code, out, err = _cli(capsys, "run", "--system", system, "--help")
    assert code == 0, err
    text = _words(out)
    assert f"config keys of system {system}" in text
    for key in schema.keys(registry.schema_of(system)):
        flag = "--" + key.path.replace("_", "-")
        if "." not in key.path and key.scalar() and key.flag:
            assert re.search(rf"{flag}\b", text), (system, flag)
        else:
            assert f"{key.path}:" in text, (system, key.path)
        assert _words(key.help) in text, (system, key.path)
        assert _words(key.describe()) in text, (system, key.path)
    # flags of other systems' keys are hidden, the pimgpt-only shortcuts too
    if system != "pimgpt":
        assert "--layout" not in text and "--no-baselines" not in text


def test_help_names_allowed_values_and_ranges(capsys):
    _, out, _ = _cli(capsys, "run", "--system", "t3", "--help")
    text = _words(out)
    assert "one of op_fwd, fc2_fwd, fc1_bwd, ip_bwd; default fc2_fwd" in text
    assert "an integer >= 2 and <= 64; default 8" in text
    assert "one of dynamic, auto or an integer >= 1; default dynamic" in text


# -- generated flags are --set ------------------------------------------------------------------------------
def _value_for(key: schema.Key):
    """A valid value other than the default where one is easy to name."""
    allowed = key.allowed()
    if key.bool_only():
        return not key.default
    if allowed:
        return allowed[-1]
    if key.default is not None:
        return key.default
    members = schema._members(key.type)
    if int in members:
        return 2 if key.power_of_two else int(key.minimum or 1)
    if float in members:
        return max(2.5, key.minimum or 0)
    # a value the system checks with the config must be a valid one (t3's memory_mapping is parsed at once)
    return {"preset": "NeuPIMs_HBM2_Single", "mapping": "npu_pim",
            "memory_mapping": "RoRaBgBaChCo"}.get(key.path, "x")


def _flag_cases():
    from archsim.commands.common import schema_keys_by_name

    cases = []
    for name, by_system in schema_keys_by_name().items():
        for system, key in by_system.items():
            cases.append((system, name, key))
    return cases


@pytest.mark.parametrize("system,name,key", _flag_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_generated_flag_equals_set(capsys, system, name, key):
    from archsim.cli import build_parser
    from archsim.commands.run import build_config

    value = _value_for(key)
    text = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
    flag = "--" + name.replace("_", "-")
    if isinstance(value, bool):
        via_flag = [flag] if value else ["--no-" + name.replace("_", "-")]
    else:
        via_flag = [flag, text]
    extra = ["--set", "trace.kind=random", "--set", "trace.requests=10"] if system == "dram-trace" else []
    parser = build_parser()
    a = build_config(parser.parse_args(["run", "--system", system, *extra, *via_flag]))
    b = build_config(parser.parse_args(["run", "--system", system, *extra, "--set", f"{name}={text}"]))
    assert a == b
    assert a[0][name] == value


def test_flag_of_another_systems_key_is_an_error(capsys):
    code, _, err = _cli(capsys, "run", "--system", "neupims", "--tokens", "3")
    assert code == 2
    assert "--tokens is an option of systems pimgpt, t3, not neupims" in _one_line(err)


def test_number_written_with_an_exponent_is_a_number():
    # YAML 1.1 reads 64e9 as text; the schema says the key is a number, so --set / the flag make it one
    from archsim.cli import build_parser
    from archsim.commands.run import build_config

    parser = build_parser()
    for argv in (["--link-bytes-per-s", "64e9"], ["--set", "link_bytes_per_s=64e9"]):
        config, _ = build_config(parser.parse_args(["run", "--system", "neupims", *argv]))
        assert config["link_bytes_per_s"] == 64e9 and isinstance(config["link_bytes_per_s"], float)


# -- bad input: --set, flags, --config, sweep files ---------------------------------------------------------
@pytest.mark.parametrize("argv,needles", [
    (["--system", "neupims", "--set", "batch=abc"], ["--set batch=abc: batch:", "must be an integer >= 1", "'abc'"]),
    (["--system", "neupims", "--batch", "0"], ["--batch 0: batch:", "must be an integer >= 1 and <= 65536, got 0"]),
    (["--system", "neupims", "--set", "mode=fast"], ["mode:", "must be one of iteration, serving", "'fast'"]),
    (["--system", "neupims", "--set", "batchh=3"], ["batchh: unknown key path", "did you mean batch"]),
    (["--system", "t3", "--set", "configs=[t3, bogus]"], ["configs:", "one of sequential, t3, t3-mca"]),
    (["--system", "t3", "--tp", "65"], ["--tp 65: tp:", "an integer >= 2 and <= 64"]),
    (["--system", "t3", "--mca-threshold", "fast"], ["mca_threshold:", "one of dynamic, auto or an integer >= 1"]),
    (["--system", "duplex", "--set", "length_std=1.5"], ["length_std:", "a number >= 0 and < 1"]),
    (["--system", "pimgpt", "--channels", "3"], ["channels:", "a power of two"]),
    (["--system", "pimgpt", "--memo", "--set", "refresh=maybe"], ["refresh:", "must be true or false"]),
    (["--system", "dram-trace", "--set", "trace.kind=zigzag"], ["trace.kind:", "one of random, stream, mixed"]),
    (["--system", "dram-trace", "--set", "controller.read_queue=-1"], ["controller.read_queue:", ">= 1"]),
])
def test_bad_set_or_flag_value_is_one_line_error(capsys, argv, needles):
    code, _, err = _cli(capsys, "run", *argv)
    assert code == 2
    _one_line(err)
    for needle in needles:
        assert needle in err, (needle, err)


@pytest.mark.parametrize("text,needles", [
    ("batch: 64\nmode: fast\n", [":2: mode:", "must be one of iteration, serving, got 'fast'"]),
    ("batch: 64\nlayers: two\n", [":2: layers:", "an integer >= 1, or null"]),
    ("system: neupims\nbatchh: 64\n", [":2: batchh: unknown key path", "did you mean batch"]),
])
def test_bad_config_file_names_file_line_and_key(capsys, tmp_path, text, needles):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    code, _, err = _cli(capsys, "run", "--system", "neupims", "--config", str(path))
    assert code == 2
    _one_line(err)
    assert str(path) in err
    for needle in needles:
        assert needle in err, (needle, err)


@pytest.mark.parametrize("axis,needles", [
    ("{grid: {mode: [iteration, fast]}}", ["s.yaml:4: mode:", "must be one of iteration, serving", "'fast'"]),
    ("{grid: {batch: [64, many]}}", ["s.yaml:4: batch:", "must be an integer >= 1", "'many'"]),
    ("{grid: {batchh: [1, 2]}}", ["s.yaml:4: batchh: unknown key path", "did you mean batch",
                                  "archsim run --system neupims --help"]),
])
def test_bad_sweep_axis_rejected_before_any_point_runs(capsys, tmp_path, axis, needles):
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"name: s\nbase: {{system: neupims}}\naxes:\n  - {axis}\n")
    out = tmp_path / "out"
    code, _, err = _cli(capsys, "sweep", str(sweep), "-o", str(out))
    assert code == 2
    _one_line(err)
    for needle in needles:
        assert needle in err, (needle, err)
    assert not out.exists()


def test_check_names_unknown_keys_and_allowed_ones():
    from archsim.systems.t3.system import T3Config

    with pytest.raises(ConfigError, match=r"tpp: unknown key for system t3; allowed: configs, devices"):
        schema.check(T3Config, {"tpp": 2}, "t3")


# -- config show ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("system", SYSTEMS)
def test_config_show_is_the_resolved_config_with_help(capsys, system):
    extra = ["--set", "trace.kind=random", "--set", "trace.requests=10"] if system == "dram-trace" else []
    code, out, err = _cli(capsys, "config", "show", "--system", system, *extra)
    assert code == 0, err
    from archsim.cli import build_parser
    from archsim.commands.run import build_config

    config, _ = build_config(build_parser().parse_args(["run", "--system", system, *extra]))
    resolved = registry.resolve_config(config)
    assert yaml.safe_load(out) == resolved
    for key in schema.keys(registry.schema_of(system)):
        node = resolved
        for part in key.path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None:   # every key the config holds is preceded by its help
            assert f"# {key.help}\n" in out, key.path


# -- schema types: a property check against an independent statement of each type --------------------------
def _expected_ok(kind: str, value) -> bool:
    if kind == "int":
        return type(value) is int
    if kind == "float":
        return type(value) in (int, float)
    if kind == "str":
        return type(value) is str
    if kind == "bool":
        return type(value) is bool
    raise AssertionError(kind)


values = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(-5, 5, allow_nan=False),
                   st.text(max_size=3), st.lists(st.integers(0, 2), max_size=2))


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(["int", "float", "str", "bool"]), nullable=st.booleans(), value=values,
       minimum=st.one_of(st.none(), st.integers(-2, 2)))
def test_key_problem_matches_type_nullability_and_minimum(kind, nullable, value, minimum):
    tp = {"int": int, "float": float, "str": str, "bool": bool}[kind]
    key = schema.Key(path="k", type=(tp | None) if nullable else tp, default=None, help="h",
                     minimum=minimum if kind in ("int", "float") else None)
    ok = (value is None and nullable) or (_expected_ok(kind, value) and not (
        minimum is not None and kind in ("int", "float") and value < minimum))
    problem = key.problem(value)
    assert (problem is None) == ok, (kind, nullable, value, minimum, problem)
    if problem:
        assert problem.startswith("must be ") and repr(value) in problem


# -- every subcommand that builds a system config has the same options --------------------------------------
def test_compile_takes_the_run_options_for_pimgpt(capsys, tmp_path):
    from archsim.cli import build_parser, subparsers

    parsers = dict(subparsers(build_parser()))
    run_opts = {s for a in parsers["run"]._actions for s in a.option_strings}
    for command in ("compile", "config show"):
        opts = {s for a in parsers[command]._actions for s in a.option_strings}
        for flag in ("--system", "--config", "--set", "--from-json", "--tokens", "--no-memo", "--layout"):
            assert flag in opts and flag in run_opts, (command, flag)
    code, _, err = _cli(capsys, "compile", "--system", "t3", "-o", str(tmp_path / "o"))
    assert code == 2 and "takes pimgpt configs" in _one_line(err)
    code, _, err = _cli(capsys, "compile", "--channels", "3", "-o", str(tmp_path / "o"))
    assert code == 2 and "--channels 3: channels:" in _one_line(err) and "a power of two" in err
    assert not (tmp_path / "o").exists()
    code, out, _ = _cli(capsys, "compile", "--help")
    assert code == 0 and "config keys of system pimgpt" in out
