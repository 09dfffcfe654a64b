"""Issue #8.7: points that differ only in hardware see the same workload (same derived seed) by default."""
from __future__ import annotations

from pathlib import Path

import pytest
import sweep_fixtures  # noqa: F401  (registers toy-roofline)
from sweep_fixtures import write_sweep

from archsim.errors import UserError
from archsim.sweep import load_sweep

SHIPPED = Path(__file__).resolve().parent.parent / "sweeps" / "dram_presets_x_mapping.yaml"


def _dram(tmp_path, **top):
    body = {"name": "s", "base": {"system": "dram-trace", "preset": "DDR4_3200AA_x8_8Gb", "channels": 1,
                                  "mapping": "RoBaRaCoCh",
                                  "trace": {"kind": "random", "requests": 100}},
            "seed": 1,
            "axes": [{"grid": {"mapping": ["RoBaRaCoCh", "ChRaBaRoCo"], "controller.row_policy": ["open", "closed"],
                               "trace.requests": [100, 200]}}], **top}
    return load_sweep(write_sweep(tmp_path, body))


def test_shipped_sweep_baseline_sees_the_same_trace():
    sweep = load_sweep(SHIPPED)
    by_trace: dict[str, set[int]] = {}
    for p in sweep.points:
        by_trace.setdefault(p.axes["trace.kind"], set()).add(p.seed)
    # one seed per trace, shared by every preset x mapping point
    assert all(len(seeds) == 1 for seeds in by_trace.values()), by_trace
    assert len({s for seeds in by_trace.values() for s in seeds}) == 2


def test_hardware_keys_do_not_change_the_seed(tmp_path):
    sweep = _dram(tmp_path)
    seeds = {}
    for p in sweep.points:
        seeds.setdefault(p.axes["trace.requests"], set()).add(p.seed)
    assert [len(v) for v in seeds.values()] == [1, 1] and seeds[100] != seeds[200]
    assert len({p.point_hash for p in sweep.points}) == 8      # still eight distinct runs


def test_seed_by_point_is_the_old_behaviour(tmp_path):
    sweep = _dram(tmp_path, seed_by="point")
    assert len({p.seed for p in sweep.points}) == 8


def test_seed_by_key_list(tmp_path):
    sweep = _dram(tmp_path, seed_by=["trace.kind"])
    assert len({p.seed for p in sweep.points}) == 1
    sweep = _dram(tmp_path, seed_by=["mapping"])
    assert len({p.seed for p in sweep.points}) == 2


def test_explicit_seed_axis_still_wins(tmp_path):
    body = {"name": "s", "base": {"system": "dram-trace", "mapping": "RoBaRaCoCh",
                                  "trace": {"kind": "random", "requests": 10}},
            "axes": [{"grid": {"seed": [5, 6], "mapping": ["RoBaRaCoCh", "ChRaBaRoCo"]}}]}
    assert sorted(p.seed for p in load_sweep(write_sweep(tmp_path, body)).points) == [5, 5, 6, 6]


@pytest.mark.parametrize("value, message", [
    ("sometimes", "seed_by: must be workload, point or a list of config key paths"),
    (["trace.kinds"], r"seed_by\[0\]: 'trace.kinds' is not a key path .*did you mean trace.kind"),
])
def test_bad_seed_by(tmp_path, value, message):
    with pytest.raises(UserError, match=message):
        _dram(tmp_path, seed_by=value)


def test_neupims_and_duplex_hardware_keys_share_the_workload_seed(tmp_path):
    """Comparing NeuPIMs with its baselines (system, scheduling policy) or Duplex devices must draw the same
    requests for every point; only the batch (a workload key) changes the seed."""
    body = {"name": "np", "base": {"system": "neupims", "model": "gpt3-7b", "batch": 64}, "seed": 3,
            "axes": [{"grid": {"system": ["neupims", "npu_pim"], "sub_batch": [True, False],
                               "batch": [64, 256]}}]}
    sweep = load_sweep(write_sweep(tmp_path, body))
    seeds: dict[int, set[int]] = {}
    for p in sweep.points:
        seeds.setdefault(p.axes["batch"], set()).add(p.seed)
    assert [len(v) for v in seeds.values()] == [1, 1] and seeds[64] != seeds[256]
    body = {"name": "dx", "base": {"system": "duplex", "model": "mixtral-8x7b"}, "seed": 3,
            "axes": [{"grid": {"device": ["duplex", "gpu", "bank_pim"], "pim_timing": ["engine", "roofline"]}}]}
    sweep = load_sweep(write_sweep(tmp_path, body, name="dx.yaml"))
    assert len({p.seed for p in sweep.points}) == 1
