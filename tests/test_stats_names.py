"""Every system declares its stats names (archsim.registry.System.stats, read from the code that builds them by
archsim.stats_names), and a sweep checks its metrics against them before the first point runs (issue 27)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from archsim import api, registry
from archsim.errors import UserError
from archsim.stats_names import names_in

# one small run per system (and per mode where a system builds its stats in another function)
SMALL: dict[str, dict] = {
    "dram-trace": {"system": "dram-trace", "preset": "DDR4_3200AA_x8_8Gb", "trace": {"kind": "random", "requests": 200}},
    "pimgpt": {"system": "pimgpt", "model": "gpt2-small", "tokens": 1},
    "gemm": {"system": "gemm", "m": 8, "k": 16, "n": 8},
    "gemm-dram": {"system": "gemm", "m": 8, "k": 16, "n": 8, "memory": "dram"},
    "duplex": {"system": "duplex", "device": "gpu", "requests": 2, "input_len": 64, "output_len": 4, "max_batch": 2},
    "t3": {"system": "t3", "model": "mega-gpt2", "sublayer": "op_fwd", "tp": 16, "tokens": 256},
    "t3_decode": {"system": "t3_decode", "model": "mega-gpt2", "tp": 16, "batch": 2, "context": 64},
    "neupims": {"system": "neupims", "model": "gpt3-small", "layers": 1, "batch": 2, "samples": 1},
    "neupims-serving": {"system": "neupims", "model": "gpt3-small", "layers": 1, "mode": "serving", "requests": 2,
                        "batch": 2, "refresh": False},
    "duplex-coprocessing": {"system": "duplex", "device": "duplex", "requests": 2, "input_len": 64, "output_len": 2,
                            "max_batch": 2},
    "gpu_only": {"system": "gpu_only", "model": "gpt3-small", "layers": 1, "batch": 2, "samples": 1},
}


def test_every_shipped_system_declares_its_stats():
    """(A system registered from outside archsim, such as the tests' toy-roofline, may leave it out: its
    sweeps check metrics at the first finished point, tests/test_sweep.py.)"""
    shipped = [name for name in registry.names() if registry.get(name).__module__.startswith("archsim.")]
    missing = [name for name in shipped if registry.stats_names(name) is None]
    assert not missing, f"systems without a stats declaration (System.stats): {missing}"
    # each one's run function has a small run below (the NeuPIMs variants inherit one run function)
    tested = {registry.get(system).run.__func__ for system in SMALL_SYSTEMS}
    untested = [name for name in shipped if registry.get(name).run.__func__ not in tested]
    assert not untested, f"systems without a small run in SMALL: {untested}"


SMALL_SYSTEMS = {config["system"] for config in SMALL.values()}


@pytest.mark.parametrize("case", list(SMALL))
def test_declaration_covers_what_a_small_run_returns(case):
    config = SMALL[case]
    declared = registry.stats_names(config["system"])
    stats = api.run(config).stats
    undeclared = sorted(k for k in stats if not registry.declares(declared, k))
    assert not undeclared, f"{case}: stats not in the declaration {declared}: {undeclared}"
    assert not registry.declares(declared, "no_such_stat_typo"), declared     # not a catch-all


def test_names_are_read_from_dict_literals_subscripts_updates_and_fstrings():
    def build(configs):
        stats = {"a": 1, **{}}
        stats["b"] = 2
        stats.update(c=3)
        stats.update({"d": 4})
        for c in configs:
            stats[f"speedup_{c}"] = 1.0
        other = {"not_stats": 0}
        return stats, other

    def returned():
        return {"x": 1, "y": 2}

    assert names_in(build, "stats") == ["a", "b", "c", "d", "speedup_*"]
    assert names_in(returned, None) == ["x", "y"]
    assert registry.declares(("speedup_*",), "speedup_t3") and not registry.declares(("speedup_*",), "speed")


SWEEP = """\
name: m
base: {system: dram-trace, preset: DDR4_3200AA_x8_8Gb, trace: {kind: random, requests: 100}}
axes:
  - grid: {controller.row_policy: [open, closed]}
metrics:
"""


def test_a_metric_naming_an_unknown_column_stops_the_sweep_before_any_point(tmp_path):
    from archsim.sweep import run_sweep

    path = tmp_path / "s.yaml"
    path.write_text(SWEEP + "  m: bandwidth_GBs / peak_bandwidth_GBps\n")
    t0 = time.monotonic()
    with pytest.raises(UserError) as exc:
        run_sweep(path, tmp_path / "res", jobs=1, progress=False)
    msg = str(exc.value)
    assert "metrics.m.expr" in msg and "'bandwidth_GBs'" in msg and "bandwidth_GBps" in msg, msg
    assert not list((tmp_path / "res").glob("points/*")), "a point ran before the metric was checked"
    assert time.monotonic() - t0 < 5, f"rejected only after {time.monotonic() - t0:.1f} s"


def test_metrics_over_declared_names_axis_keys_and_baselines_pass_the_check(tmp_path):
    from archsim.sweep.runner import _check_declared_metric_columns
    from archsim.sweep.spec import load_sweep

    path = tmp_path / "s.yaml"
    path.write_text(SWEEP + "  m: row_hit_rate * sim_compile_s + seed\n"
                    "  b: {expr: bandwidth_GBps / baseline.bandwidth_GBps, baseline: {controller.row_policy: open}}\n")
    assert _check_declared_metric_columns(load_sweep(path)) is True


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parent.parent / "sweeps").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_the_shipped_sweeps_metrics_name_declared_columns(path):
    from archsim.sweep.runner import _check_declared_metric_columns
    from archsim.sweep.spec import load_sweep

    sweep = load_sweep(path)
    assert not sweep.metrics or _check_declared_metric_columns(sweep) is True
