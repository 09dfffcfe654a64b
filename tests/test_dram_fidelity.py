"""Issue 24: archsim under `controller.convention=ramulator2` reproduces Ramulator 2.1 on the same trace files.

The reference figures are constants measured with Ramulator 2.1 (CMU-SAFARI/ramulator2 @c5b1c3a478b6, built as
reports/dram_fidelity/README.md says) by `reports/dram_fidelity/run_cases.py` on the traces that script writes
(archsim.dram.trace.synthetic_trace, seed 0, 64 B lines over 4 GiB, as Ramulator load/store files): its
`cycles`, row-hit rate and mean read latency. Configurations: reports/dram_fidelity/run_cases.py (DEVICES). A
change that moves archsim away from them beyond the issue's tolerances (2 % of cycles, 1 point of row-hit rate,
10 % of mean read latency) fails here. 20 K-request traces by default; the 200 K-request ones are slow.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "reports" / "dram_fidelity"))

from run_cases import DEVICES, RAM_MAPPING, write_traces  # noqa: E402

from archsim.dram.controller import ControllerConfig  # noqa: E402
from archsim.errors import ConfigError  # noqa: E402
from archsim.systems.dram_trace.system import run_trace  # noqa: E402

# (device, trace) -> Ramulator 2.1's (cycles, row-hit rate, mean read latency in cycles)
RAMULATOR_20K = {
    ("DDR4-3200 1R", "stream"): (123062, 0.99113, 272.86),
    ("DDR4-3200 1R", "random"): (181603, 0.00005, 412.59),
    ("DDR4-3200 1R", "mixed"): (185678, 0.00000, 649.42),
    ("DDR4-3200 1R", "conflict"): (1543933, 0.02553, 3191.60),
    ("DDR4-3200 2R", "stream"): (139852, 0.99093, 306.52),
    ("DDR4-3200 2R", "random"): (99815, 0.00005, 261.61),
    ("DDR4-3200 2R", "mixed"): (109648, 0.00000, 415.35),
    ("DDR4-3200 2R", "conflict"): (1543933, 0.02553, 3191.60),
    ("HBM2 8ch", "stream"): (21278, 0.96588, 46.43),
    ("HBM2 8ch", "random"): (21849, 0.00010, 94.31),
    ("HBM2 8ch", "mixed"): (21831, 0.00005, 126.71),
    ("HBM2 8ch", "conflict"): (1014591, 0.02543, 2096.20),
}
RAMULATOR_200K = {
    ("DDR4-3200 1R", "stream"): (1235361, 0.99124, 272.73),
    ("DDR4-3200 1R", "random"): (1825372, 0.00007, 412.73),
    ("DDR4-3200 1R", "mixed"): (1870416, 0.00003, 646.54),
    ("DDR4-3200 1R", "conflict"): (15478035, 0.02448, 3182.82),
    ("DDR4-3200 2R", "stream"): (1401683, 0.99106, 305.90),
    ("DDR4-3200 2R", "random"): (1006018, 0.00008, 262.67),
    ("DDR4-3200 2R", "mixed"): (1100485, 0.00006, 412.30),
    ("DDR4-3200 2R", "conflict"): (15478035, 0.02448, 3182.82),
    ("HBM2 8ch", "stream"): (214009, 0.96590, 47.27),
    ("HBM2 8ch", "random"): (220707, 0.00007, 96.35),
    ("HBM2 8ch", "mixed"): (220263, 0.00008, 125.18),
    ("HBM2 8ch", "conflict"): (10174289, 0.02445, 2091.67),
}
TOL_CYCLES, TOL_HIT_POINTS, TOL_LATENCY = 0.02, 1.0, 0.10


@pytest.fixture(scope="module")
def traces_20k(tmp_path_factory):
    return write_traces(tmp_path_factory.mktemp("fidelity"), 20000, 0)


def _archsim(device: str, trace: Path) -> dict:
    dev = DEVICES[device]
    r = run_trace(str(trace), preset=dev["preset_ramulator2"], channels=dev["channels"],
                  mapping=RAM_MAPPING[dev["ram"]["standard"]], controller={"convention": "ramulator2"},
                  overrides=dev["overrides"])
    return r.stats


def _check(device: str, kind: str, stats: dict, ref: tuple) -> None:
    cycles, hit, lat = ref
    got = (stats["cycles"], stats["row_hit_rate"], stats["read_latency_mean_cycles"])
    msg = (f"{device} {kind}: archsim (ramulator2 convention) cycles {got[0]}, row hits {100 * got[1]:.2f} %, "
           f"read latency {got[2]:.1f}; Ramulator 2.1 {cycles}, {100 * hit:.2f} %, {lat:.1f}")
    assert abs(got[0] / cycles - 1) <= TOL_CYCLES, msg
    assert abs(100 * (got[1] - hit)) <= TOL_HIT_POINTS, msg
    assert abs(got[2] / lat - 1) <= TOL_LATENCY, msg


@pytest.mark.parametrize("device,kind", list(RAMULATOR_20K))
def test_ramulator2_convention_matches_ramulator(traces_20k, device, kind):
    _check(device, kind, _archsim(device, traces_20k[kind]["ramulator"]), RAMULATOR_20K[(device, kind)])


@pytest.mark.slow
@pytest.mark.parametrize("device,kind", list(RAMULATOR_200K))
def test_ramulator2_convention_matches_ramulator_200k(tmp_path, device, kind):
    traces = write_traces(tmp_path, 200000, 0)
    _check(device, kind, _archsim(device, traces[kind]["ramulator"]), RAMULATOR_200K[(device, kind)])


def test_default_controller_is_measurably_different(traces_20k):
    """The convention is what closes the gap: archsim's own controller on the 2-rank random trace is > 5 %
    slower than Ramulator 2.1 (the issue's report), so the test above can fail."""
    dev = DEVICES["DDR4-3200 2R"]
    s = run_trace(str(traces_20k["random"]["ramulator"]), preset=dev["preset"], mapping="RoBaRaCoCh",
                  overrides=dev["overrides"]).stats
    ref = RAMULATOR_20K[("DDR4-3200 2R", "random")][0]
    assert s["cycles"] / ref - 1 > 0.05, f"default controller {s['cycles']} cycles vs Ramulator 2.1 {ref}"


def test_convention_sets_keys_left_at_defaults_and_keeps_explicit_ones():
    c = ControllerConfig.from_dict({"convention": "ramulator2"})
    assert c.active_buffer and c.pinned_leave_queue and c.run_end == "last_accept", c
    c = ControllerConfig.from_dict({"convention": "ramulator2", "read_queue": 8})
    assert c.read_queue == 8 and c.active_buffer, c
    d = ControllerConfig.from_dict({})
    assert not d.active_buffer and d.run_end == "last_done", d
    # configs that name no convention keep their keys (and so their hashes)
    assert "convention" not in d.to_dict() and "pinned_leave_queue" not in d.to_dict(), d.to_dict()
    assert ControllerConfig.from_dict(c.to_dict()) == c


def test_unknown_and_unbuilt_conventions():
    with pytest.raises(ConfigError, match="controller.convention"):
        ControllerConfig.from_dict({"convention": "ramulator3"})
    with pytest.raises(NotImplementedError, match="issue 24"):
        ControllerConfig.from_dict({"convention": "dramsim3"})


def test_run_end_convention_reports_the_last_hand_over(traces_20k):
    dev = DEVICES["DDR4-3200 1R"]
    s = run_trace(str(traces_20k["random"]["ramulator"]), preset=dev["preset_ramulator2"], mapping="RoBaRaCoCh",
                  controller={"convention": "ramulator2"}).stats
    assert s["cycles"] == s["last_accept_cycle"] < s["last_done_cycle"], s
