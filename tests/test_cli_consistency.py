"""The CLI's subcommands agree with each other: --set/--config everywhere (checked against the same key
paths sweeps use), `run` drives every system, compile has --json/--quiet, --help shows defaults, one
meaning of --mapping, no engine choices that cannot work, and a run's manifest config re-runs."""
from __future__ import annotations

import argparse
import json
import re

import pytest
import yaml

from archsim.cli import build_parser, main, subparsers

PIM = ["--model", "gpt2-small", "--tokens", "2", "--no-baselines"]
TRACE_SET = ["--set", "trace.kind=random", "--set", "trace.requests=2000"]


def _cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _json_stdout(capsys, *argv) -> dict:
    code, out, err = _cli(capsys, *argv, "--json", "-")
    assert code == 0, err
    return json.loads(out)


def _one_line_error(err: str) -> str:
    assert err.startswith("archsim: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


# -- 1. --set / --config on run, compile, sweep -------------------------------------------------------------
def test_run_set_dram_timing_changes_result(capsys):
    base = _json_stdout(capsys, "run", "--system", "pimgpt", *PIM)
    slow = _json_stdout(capsys, "run", "--system", "pimgpt", *PIM, "--set", "dram.timing.nRCDRDMAC=90")
    assert slow["stats"]["cycles"] > base["stats"]["cycles"]
    assert slow["manifest"]["config"]["dram"] == {"timing": {"nRCDRDMAC": 90}}
    # the example from the docs changes the result too
    fast = _json_stdout(capsys, "run", "--system", "pimgpt", *PIM, "--set", "dram.timing.nRCDRD=20")
    assert fast["stats"]["cycles"] != base["stats"]["cycles"]


def test_run_config_file_equals_set(capsys, tmp_path):
    cfg = tmp_path / "over.yaml"
    cfg.write_text("dram:\n  timing:\n    nRCDRDMAC: 90\n")
    a = _json_stdout(capsys, "run", *PIM, "--config", str(cfg))
    b = _json_stdout(capsys, "run", *PIM, "--set", "dram.timing.nRCDRDMAC=90")
    assert a["stats"]["cycles"] == b["stats"]["cycles"]
    assert a["manifest"]["config_hash"] == b["manifest"]["config_hash"]


@pytest.mark.parametrize("argv,key,hint", [
    (["run", *PIM, "--set", "dram.timing.nRCDRDX=20"], "dram.timing.nRCDRDX", "dram.timing.nRCDRD"),
    (["run", *PIM, "--set", "tokenz=3"], "tokenz", "tokens"),
    (["run", "--system", "dram-trace", "--set", "trace.kind=random", "--set", "trace.requestz=5"],
     "trace.requestz", "trace.requests"),
    (["compile", "--model", "gpt2-small", "-o", "OUT", "--set", "dram.org.rowz=3"], "dram.org.rowz", "dram.org.rows"),
    (["sweep", "SWEEP", "--set", "controller.row_polcy=closed"], "controller.row_polcy", "controller.row_policy"),
    (["trace", "synthetic:random:100", "--set", "controller.row_polcy=closed"], "controller.row_polcy",
     "controller.row_policy"),
    (["check-log", "OUT", "--preset", "DDR4_3200AA_x8_8Gb", "--set", "dram.timing.nRCDX=3"], "dram.timing.nRCDX",
     "dram.timing.nRCD"),
])
def test_misspelt_key_is_one_line_error_with_nearest(capsys, tmp_path, argv, key, hint):
    sweep = tmp_path / "s.yaml"
    sweep.write_text("base: {system: dram-trace, trace: {kind: random, requests: 500}}\n"
                     "axes: [{grid: {controller.read_queue: [8, 16]}}]\n")
    argv = [str(sweep) if a == "SWEEP" else str(tmp_path / "out") if a == "OUT" else a for a in argv]
    code, _, err = _cli(capsys, *argv)
    assert code == 2
    _one_line_error(err)
    assert f"{key}: unknown key path" in err and hint in err
    assert not (tmp_path / "out").exists()


def test_bad_value_type_and_bad_config_file(capsys, tmp_path):
    code, _, err = _cli(capsys, "run", *PIM, "--set", "dram.timing.nRCDRD=fast")
    assert code == 2 and "dram.timing.nRCDRD" in _one_line_error(err) and "integer" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("dram:\n  timing:\n    nRCDRDD: 3\n")
    code, _, err = _cli(capsys, "run", *PIM, "--config", str(bad))
    assert code == 2 and f"{bad}:3: dram.timing.nRCDRDD" in _one_line_error(err)


def test_sweep_set_and_config_override_base(capsys, tmp_path):
    sweep = tmp_path / "s.yaml"
    sweep.write_text("name: q\nbase: {system: dram-trace, trace: {kind: random, requests: 500}}\n"
                     "axes: [{grid: {controller.read_queue: [8, 16]}}]\n")
    from archsim.sweep import load_results

    runs = {}
    for tag, extra in (("base", []), ("set", ["--set", "dram.timing.nRCD=40"]), ("cfg", ["--config", "CFG"])):
        cfg = tmp_path / "over.yaml"
        cfg.write_text("dram: {timing: {nRCD: 40}}\n")
        extra = [str(cfg) if a == "CFG" else a for a in extra]
        out = tmp_path / tag
        code, _, err = _cli(capsys, "sweep", str(sweep), "-o", str(out), "-j", "1", "-q", *extra)
        assert code == 0, err
        stats, _ = load_results(out)
        runs[tag] = sorted(stats["cycles"])
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["base_overrides"] == ([] if tag == "base" else ["dram.timing.nRCD=40"])
    assert runs["set"] == runs["cfg"] and runs["set"] != runs["base"]


def test_sweep_file_may_now_sweep_preset_timings_without_naming_them_in_base(tmp_path):
    # one source of truth: the keys --set accepts are the keys an axis may sweep
    from archsim.sweep import load_sweep

    sweep = load_sweep({"base": {"system": "pimgpt", "model": "gpt2-small", "tokens": 2},
                        "axes": [{"grid": {"dram.timing.nRCDRDMAC": [56, 90]}}]})
    assert [p.config["dram"] for p in sweep.points] == [{"timing": {"nRCDRDMAC": 56}}, {"timing": {"nRCDRDMAC": 90}}]


# -- 2. run drives every registered system ------------------------------------------------------------------
def test_run_dram_trace_summary_and_json(capsys, tmp_path):
    code, out, err = _cli(capsys, "run", "--system", "dram-trace", *TRACE_SET)
    assert code == 0, err
    assert "DDR4_3200AA_x8_8Gb" in out and "row hits/misses/conflicts" in out and "bandwidth" in out
    data = _json_stdout(capsys, "run", "--system", "dram-trace", *TRACE_SET, "--preset", "HBM2_2Gbps_PC")
    assert data["stats"]["requests"] == 2000 and data["stats"]["preset"] == "HBM2_2Gbps_PC"
    # the same run from a config file
    cfg = tmp_path / "t.yaml"
    cfg.write_text("system: dram-trace\npreset: HBM2_2Gbps_PC\ntrace: {kind: random, requests: 2000}\n")
    again = _json_stdout(capsys, "run", "--config", str(cfg))
    assert again["stats"]["cycles"] == data["stats"]["cycles"]
    # and from its --json output
    out = tmp_path / "d.json"
    out.write_text(json.dumps(data))
    rerun = _json_stdout(capsys, "run", "--from-json", str(out))
    assert rerun["stats"]["cycles"] == data["stats"]["cycles"]
    assert rerun["manifest"]["config_hash"] == data["manifest"]["config_hash"]


@pytest.mark.parametrize("flag", [["--tokens", "3"], ["--model", "gpt2-small"], ["--mapping", "pimgpt"],
                                  ["--layout", "packed"], ["--no-baselines"]])
def test_pimgpt_only_flags_rejected_for_other_systems(capsys, flag):
    code, _, err = _cli(capsys, "run", "--system", "dram-trace", *TRACE_SET, *flag)
    assert code == 2
    # a flag belongs to every system whose typed config has the key (--tokens: pimgpt and t3)
    assert re.search(rf"{flag[0]} is an option of systems? (\S+, )*pimgpt(, \S+)*, not dram-trace",
                     _one_line_error(err)), err


def test_run_unknown_system_and_mismatched_config(capsys, tmp_path):
    code, _, err = _cli(capsys, "run", "--system", "pimgtp")
    assert code == 2 and "did you mean pimgpt" in _one_line_error(err)
    cfg = tmp_path / "t.yaml"
    cfg.write_text("system: dram-trace\ntrace: {kind: random, requests: 100}\n")
    code, _, err = _cli(capsys, "run", "--system", "pimgpt", "--config", str(cfg))
    assert code == 2 and "dram-trace" in _one_line_error(err)


def test_run_help_documents_the_design():
    text = _help("run")
    for needle in ("--set", "--config", "--from-json", "dram-trace", "[pimgpt]", "later steps win"):
        assert needle in text


# -- 3. compile --json / --quiet ----------------------------------------------------------------------------
def test_compile_json_and_quiet(capsys, tmp_path):
    out = tmp_path / "c"
    data = _json_stdout(capsys, "compile", "--model", "gpt2-small", "--layers", "1", "-o", str(out))
    files = data["stats"]["files"]
    assert len(files) == 9 and all((tmp_path / "c" / f.rsplit("/", 1)[-1]).exists() for f in files)
    assert data["stats"]["pim_commands"] > 0 and data["manifest"]["config"]["model"] == "gpt2-small"
    code, printed, _ = _cli(capsys, "compile", "--model", "gpt2-small", "--layers", "1", "-o", str(tmp_path / "q"),
                            "--quiet", "--json", str(tmp_path / "q.json"))
    assert code == 0 and printed == ""
    assert json.loads((tmp_path / "q.json").read_text())["stats"]["files"]
    # --set reaches the compiler: a row-aligned layout emits different streams
    row = _json_stdout(capsys, "compile", "--model", "gpt2-small", "--layers", "1", "-o", str(tmp_path / "r"),
                       "--set", "mapping_overrides.weights.layout=row_aligned")
    assert row["manifest"]["config"]["mapping_overrides"] == {"weights": {"layout": "row_aligned"}}
    assert row["stats"]["pim_commands"] != data["stats"]["pim_commands"]


# -- 4. --help shows defaults -------------------------------------------------------------------------------
def _help(command: str) -> str:
    parser = dict(subparsers(build_parser()))[command]
    return parser.format_help()


def _all_commands() -> list[str]:
    return [name for name, _ in subparsers(build_parser())]


@pytest.mark.parametrize("command", _all_commands())
def test_help_shows_every_default(command):
    parser = dict(subparsers(build_parser()))[command]
    text = " ".join(parser.format_help().split())
    for action in parser._actions:
        if (not action.option_strings or action.help == argparse.SUPPRESS
                or action.default in (None, False, [], argparse.SUPPRESS)):
            continue
        assert f"default: {action.default}" in text or f"default {action.default}" in text, \
            (command, action.option_strings, action.default)


def test_help_defaults_named_for_system_specific_shortcuts():
    text = " ".join(_help("run").split())
    assert "default gpt2-xl" in text and "default 1024" in text and "default GDDR6_AiM_16Gbps" in text


# -- 5. one meaning of --mapping ----------------------------------------------------------------------------
def test_trace_address_mapping_and_deprecated_alias(capsys):
    new = _json_stdout(capsys, "trace", "synthetic:random:2000", "--address-mapping", "RoCoBaRaCh", "--quiet")
    code, out, err = _cli(capsys, "trace", "synthetic:random:2000", "--mapping", "RoCoBaRaCh", "--quiet",
                          "--json", "-")
    assert code == 0
    assert err.count("\n") == 1 and "deprecated" in err and "--address-mapping" in err
    old = json.loads(out)
    assert old["stats"]["mapping"] == new["stats"]["mapping"] == "RoCoBaRaCh"
    assert old["stats"]["cycles"] == new["stats"]["cycles"]
    assert "--address-mapping" in _help("trace") and "--mapping" not in _help("trace")
    for command in ("run", "compile"):
        assert "mapping policy file" in " ".join(_help(command).split())
    code, _, err = _cli(capsys, "trace", "synthetic:random:100", "--mapping", "RoCoBaRaCh",
                        "--address-mapping", "RoCoBaRaCh")
    assert code == 2


def test_readme_cli_tour_uses_the_new_spelling():
    from pathlib import Path

    root = Path(__file__).parent.parent
    for doc in ("README.md", "docs/cli.md"):           # the short tour and the full one
        for line in (root / doc).read_text().splitlines():
            if "archsim trace" in line:
                assert "--mapping" not in line, (doc, line)


# -- 6. no engine choices that cannot work ------------------------------------------------------------------
@pytest.mark.parametrize("command", ["run", "trace"])
def test_engine_offers_only_numba(capsys, command):
    parser = dict(subparsers(build_parser()))[command]
    (engine,) = [a for a in parser._actions if "--engine" in a.option_strings]
    assert list(engine.choices) == ["numba"]
    with pytest.raises(SystemExit) as exc:
        main([command, *(["synthetic:random:10"] if command == "trace" else []), "--engine", "python"])
    assert exc.value.code == 2


# -- 7. a PIM-GPT run's manifest config re-runs -------------------------------------------------------------
def test_pimgpt_manifest_config_reruns(capsys, tmp_path):
    first = tmp_path / "first.json"
    code, _, err = _cli(capsys, "run", "--model", "gpt2-small", "--tokens", "4", "--set", "dram.timing.nRCDRD=20",
                        "--channels", "4", "--json", str(first), "--quiet")
    assert code == 0, err
    data = json.loads(first.read_text())
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(data["manifest"]["config"]))
    via_config = _json_stdout(capsys, "run", "--config", str(cfg), "--quiet")
    via_json = _json_stdout(capsys, "run", "--from-json", str(first), "--quiet")
    drop = ("sim_wall_s", "sim_kernel_s", "sim_compile_s")
    want = {k: v for k, v in data["stats"].items() if k not in drop}
    for again in (via_config, via_json):
        assert {k: v for k, v in again["stats"].items() if k not in drop} == want
        assert again["manifest"]["config_hash"] == data["manifest"]["config_hash"]
    # the expanded preset and policy are still recorded, beside the config
    assert data["manifest"]["dram"]["name"] == "GDDR6_AiM_16Gbps" and data["manifest"]["policy"]
    # --from-json then overrides: the recorded config is the base
    more = _json_stdout(capsys, "run", "--from-json", str(first), "--tokens", "2", "--quiet")
    assert more["stats"]["tokens"] == 2 and more["manifest"]["config"]["dram"] == {"timing": {"nRCDRD": 20}}
