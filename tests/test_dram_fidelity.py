"""Issue 24: archsim under `controller.convention=ramulator2` reproduces Ramulator 2.1 on the same trace files
(DDR4 1 and 2 ranks, HBM2, GDDR6, HBM3; issue 39: DDR5, GDDR7, HBM4, LPDDR5, DDR5 with RFM), and its measured gaps to DRAMsim3 are pinned.

The reference figures are constants measured with Ramulator 2.1 (CMU-SAFARI/ramulator2 @c5b1c3a478b6) and DRAMsim3
(umd-memsys/DRAMsim3 @29817593), built as reports/dram_fidelity/README.md says, by
`reports/dram_fidelity/run_cases.py` on the traces that script writes (archsim.dram.trace.synthetic_trace, seed 0,
64 B lines over 4 GiB, as Ramulator load/store and DRAMsim3 files): cycles, row-hit rate and mean read latency.
Configurations: reports/dram_fidelity/run_cases.py (DEVICES, D3_DEVICE). A change that moves archsim away from
them beyond the issue's tolerances (2 % of cycles, 1 point of row-hit rate, 10 % of mean read latency) fails
here. 20 K-request traces by default; the 200 K-request ones are slow."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "reports" / "dram_fidelity"))

from run_cases import D3_DEVICE, D3_MAPPING, DEVICES, d3_keys, ram_mapping, write_traces  # noqa: E402

from archsim.dram.controller import ControllerConfig, conventions  # noqa: E402
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
    # issue 39: Ramulator's CacheLineInterleave(interleave_bits=1), archsim's split mapping RoBaPcCoChCo1
    ("HBM2 8ch il1", "stream"): (20420, 0.93502, 41.10),
    ("HBM2 8ch il1", "random"): (20733, 0.00005, 70.74),
    ("HBM2 8ch il1", "mixed"): (20546, 0.00000, 78.86),
    ("HBM2 8ch il1", "conflict"): (1014591, 0.02543, 2096.20),
    ("GDDR6 8ch", "stream"): (21134, 0.98123, 72.79),
    ("GDDR6 8ch", "random"): (47591, 0.00015, 298.21),
    ("GDDR6 8ch", "mixed"): (49183, 0.00010, 460.60),
    ("GDDR6 8ch", "conflict"): (1636065, 0.02538, 3384.03),
    # HBM3: Ramulator's half-CK ticks halved to CK (run_cases.run_ramulator)
    ("HBM3 16ch", "stream"): (10531.5, 0.96699, 59.39),
    ("HBM3 16ch", "random"): (11551.5, 0.00040, 127.07),
    ("HBM3 16ch", "mixed"): (11622, 0.00045, 182.13),
    ("HBM3 16ch", "conflict"): (1580615.5, 0.02538, 3271.66),
    # issue 39 (HBM4: half-CK ticks halved to CK, as HBM3)
    ("DDR5-4800 1R", "stream"): (226022, 0.98096, 495.21),
    ("DDR5-4800 1R", "random"): (265349, 0.00000, 611.73),
    ("DDR5-4800 1R", "mixed"): (270049, 0.00000, 962.25),
    ("DDR5-4800 1R", "conflict"): (2595676, 0.02548, 5361.59),
    ("GDDR7 8ch", "stream"): (21628, 0.98184, 74.98),
    ("GDDR7 8ch", "random"): (46094, 0.00015, 299.50),
    ("GDDR7 8ch", "mixed"): (47381, 0.00010, 458.11),
    ("GDDR7 8ch", "conflict"): (1904761, 0.02528, 3934.92),
    ("HBM4 32ch", "stream"): (10716.5, 0.96698, 56.83),
    ("HBM4 32ch", "random"): (10909, 0.00025, 134.56),
    ("HBM4 32ch", "mixed"): (10867, 0.00025, 149.72),
    ("HBM4 32ch", "conflict"): (2024831.5, 0.02538, 4184.66),
    # LPDDR5 under Ramulator's wck_sync_mode=always_on (run_cases.DEVICES)
    ("LPDDR5-6400 2ch", "stream"): (26644, 0.96406, 95.30),
    ("LPDDR5-6400 2ch", "random"): (54537, 0.00000, 205.47),
    ("LPDDR5-6400 2ch", "mixed"): (62838, 0.00000, 347.52),
    ("LPDDR5-6400 2ch", "conflict"): (1096391, 0.02543, 2266.48),
    # DDR5 with RFM (DDR5_RFM, RFMManager rfm_thresh 80; periodic refresh off in both: run_cases.DEVICES)
    ("DDR5-4800 1R RFM", "stream"): (207925, 0.98356, 459.60),
    ("DDR5-4800 1R RFM", "random"): (248549, 0.00000, 578.03),
    ("DDR5-4800 1R RFM", "mixed"): (251971, 0.00000, 903.79),
    ("DDR5-4800 1R RFM", "conflict"): (2512362, 0.02523, 5191.80),
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
    ("HBM2 8ch il1", "stream"): (204495, 0.93528, 42.27),
    ("HBM2 8ch il1", "random"): (208293, 0.00007, 72.13),
    ("HBM2 8ch il1", "mixed"): (205643, 0.00007, 78.81),
    ("HBM2 8ch il1", "conflict"): (10174289, 0.02445, 2091.67),
    ("GDDR6 8ch", "stream"): (212265, 0.98139, 72.67),
    ("GDDR6 8ch", "random"): (478320, 0.00006, 300.79),
    ("GDDR6 8ch", "mixed"): (495023, 0.00008, 461.49),
    ("GDDR6 8ch", "conflict"): (16411183, 0.02426, 3376.76),
    ("HBM3 16ch", "stream"): (109177.5, 0.96631, 65.85),
    ("HBM3 16ch", "random"): (121830.5, 0.00024, 135.42),
    ("HBM3 16ch", "mixed"): (122039, 0.00022, 191.34),
    ("HBM3 16ch", "conflict"): (15839897.5, 0.02448, 3261.83),
    # issue 39
    ("DDR5-4800 1R", "stream"): (2245901, 0.98082, 491.08),
    ("DDR5-4800 1R", "random"): (2658014, 0.00005, 610.21),
    ("DDR5-4800 1R", "mixed"): (2716007, 0.00003, 957.03),
    ("DDR5-4800 1R", "conflict"): (25985917, 0.02446, 5339.15),
    ("GDDR7 8ch", "stream"): (217724, 0.98145, 75.66),
    ("GDDR7 8ch", "random"): (458149, 0.00011, 304.14),
    ("GDDR7 8ch", "mixed"): (477196, 0.00008, 462.72),
    ("GDDR7 8ch", "conflict"): (19103086, 0.02431, 3926.00),
    ("HBM4 32ch", "stream"): (109235, 0.96732, 65.43),
    ("HBM4 32ch", "random"): (112338.5, 0.00042, 145.70),
    ("HBM4 32ch", "mixed"): (112333.5, 0.00041, 162.06),
    ("HBM4 32ch", "conflict"): (20297929.5, 0.02441, 4172.67),
    ("LPDDR5-6400 2ch", "stream"): (268291, 0.96401, 96.03),
    ("LPDDR5-6400 2ch", "random"): (550308, 0.00003, 205.92),
    ("LPDDR5-6400 2ch", "mixed"): (629311, 0.00003, 350.37),
    ("LPDDR5-6400 2ch", "conflict"): (10982588, 0.02440, 2258.38),
    ("DDR5-4800 1R RFM", "stream"): (2071554, 0.98358, 456.13),
    ("DDR5-4800 1R RFM", "random"): (2483662, 0.00005, 575.43),
    ("DDR5-4800 1R RFM", "mixed"): (2531329, 0.00002, 898.12),
    ("DDR5-4800 1R RFM", "conflict"): (25148583, 0.02430, 5169.44),
}
TOL_CYCLES, TOL_HIT_POINTS, TOL_LATENCY = 0.02, 1.0, 0.10


@pytest.fixture(scope="module")
def traces_20k(tmp_path_factory):
    return write_traces(tmp_path_factory.mktemp("fidelity"), 20000, 0)


def _archsim(device: str, trace: Path, preset_key: str = "preset_ramulator2") -> dict:
    dev = DEVICES[device]
    # the preset of Ramulator's device files where archsim has one (GDDR6_14Gbps has its timings already); the
    # convention sets the front end (HBM3: two requests per CK)
    r = run_trace(str(trace), preset=dev.get(preset_key, dev["preset"]), channels=dev["channels"],
                  mapping=ram_mapping(dev), controller={**dev.get("controller", {}), "convention": "ramulator2"},
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


# DRAMsim3 (umd-memsys/DRAMsim3 @29817593, unmodified library, run by reports/dram_fidelity/run_cases.py
# --dramsim3 through dramsim3_driver.cc until every read returned and every write was acknowledged) on its own
# config files (run_cases.DEVICES "d3"), on the same traces written as DRAMsim3 files:
# (device, trace) -> its (cycles, row-hit rate, mean read latency in cycles), and the gaps archsim's default
# controller showed on DRAMsim3's layout and the closest archsim device (run_cases.D3_DEVICE, D3_MAPPING) when
# they were measured: (cycles / DRAMsim3's - 1, row hits minus DRAMsim3's in points, latency / DRAMsim3's).
# The default controller is not DRAMsim3's (its convention is further below), so the gaps are not zero; they are
# pinned, so a change that moves archsim relative to DRAMsim3 is seen here. Re-measured (run_cases.py --dramsim3,
# DRAMsim3's figures unchanged) when D3_DEVICE became DDR4_3200AA_x8_8Gb_DRAMsim3 and HBM2_2Gbps_DRAMsim3 took
# DRAMsim3's resolved HBM2 device (one rank of 2 KB rows, tRTP 5, tRTRS 2).
DRAMSIM3_20K = {
    ("DDR4-3200 1R", "stream"): (113993, 0.99134, 322.21, (+0.0784, -0.02, 0.840)),
    ("DDR4-3200 1R", "random"): (181908, 0.00010, 987.43, (+0.0422, -0.01, 0.408)),
    ("DDR4-3200 1R", "mixed"): (185891, 0.00015, 1276.30, (+0.0945, -0.01, 0.531)),
    ("DDR4-3200 1R", "conflict"): (1537677, 0.00000, 3766.24, (+0.0191, +2.80, 0.839)),
    ("DDR4-3200 2R", "stream"): (114990, 0.99134, 324.69, (+0.0709, -0.01, 0.835)),
    ("DDR4-3200 2R", "random"): (107126, 0.00030, 772.04, (-0.0013, -0.03, 0.309)),
    ("DDR4-3200 2R", "mixed"): (108458, 0.00030, 950.11, (+0.1682, -0.02, 0.453)),
    ("DDR4-3200 2R", "conflict"): (1538492, 0.00000, 3771.16, (+0.0185, +2.80, 0.838)),
    ("HBM2 8ch", "stream"): (20258, 0.96689, 55.77, (+0.0064, +0.13, 0.928)),
    ("HBM2 8ch", "random"): (21738, 0.00015, 313.57, (+0.0591, -0.00, 0.474)),
    ("HBM2 8ch", "mixed"): (21830, 0.00030, 412.09, (+0.0672, -0.02, 0.527)),
    ("HBM2 8ch", "conflict"): (992737, 0.00000, 2441.57, (+0.0191, +2.79, 0.835)),
}
DRAMSIM3_200K = {
    ("DDR4-3200 1R", "stream"): (1136530, 0.99131, 321.65, (+0.0842, -0.01, 0.842)),
    ("DDR4-3200 1R", "random"): (1821651, 0.00014, 980.76, (+0.0394, -0.01, 0.410)),
    ("DDR4-3200 1R", "mixed"): (1859103, 0.00017, 1266.76, (+0.0935, -0.01, 0.531)),
    ("DDR4-3200 1R", "conflict"): (15379217, 0.00000, 3756.51, (+0.0193, +2.73, 0.839)),
    ("DDR4-3200 2R", "stream"): (1142586, 0.99136, 322.78, (+0.0794, -0.01, 0.840)),
    ("DDR4-3200 2R", "random"): (1065912, 0.00026, 747.01, (+0.0063, -0.02, 0.320)),
    ("DDR4-3200 2R", "mixed"): (1083278, 0.00027, 928.82, (+0.1589, -0.02, 0.458)),
    ("DDR4-3200 2R", "conflict"): (15382886, 0.00000, 3757.41, (+0.0191, +2.73, 0.839)),
    ("HBM2 8ch", "stream"): (201681, 0.96701, 56.55, (+0.0090, +0.11, 0.928)),
    ("HBM2 8ch", "random"): (211877, 0.00018, 341.52, (+0.0802, -0.01, 0.457)),
    ("HBM2 8ch", "mixed"): (211678, 0.00018, 419.25, (+0.0892, -0.01, 0.546)),
    ("HBM2 8ch", "conflict"): (9936749, 0.00000, 2434.34, (+0.0191, +2.74, 0.836)),
}


def _check_dramsim3(device: str, trace: Path, ref: tuple, gaps: tuple | None = None,
                    controller: dict | None = None) -> None:
    """archsim (default controller, or `controller`) against DRAMsim3's figures `ref`, around the gaps measured
    (those of `ref`, or `gaps`)."""
    preset, overrides = D3_DEVICE[device]
    s = run_trace(str(trace), preset=preset, channels=DEVICES[device]["channels"], mapping=D3_MAPPING[device],
                  overrides=overrides, controller=controller).stats
    cycles, hit, lat, (gap_cycles, gap_hit, lat_ratio) = ref
    if gaps is not None:
        gap_cycles, gap_hit, lat_ratio = gaps
    got = (s["cycles"] / cycles - 1, 100 * (s["row_hit_rate"] - hit), s["read_latency_mean_cycles"] / lat)
    msg = (f"{device} {trace.name}: archsim ({controller or 'default controller'}) {s['cycles']} cycles, row hits "
           f"{100 * s['row_hit_rate']:.2f} %, read latency {s['read_latency_mean_cycles']:.1f}; DRAMsim3 {cycles}, "
           f"{100 * hit:.2f} %, {lat:.1f}: gaps {100 * got[0]:+.2f} %, {got[1]:+.2f} points, x{got[2]:.3f} where "
           f"{100 * gap_cycles:+.2f} %, {gap_hit:+.2f} points, x{lat_ratio:.3f} were measured")
    # the tolerances, around the gaps measured
    assert abs(got[0] - gap_cycles) <= TOL_CYCLES, msg
    assert abs(got[1] - gap_hit) <= TOL_HIT_POINTS, msg
    assert abs(got[2] / lat_ratio - 1) <= TOL_LATENCY, msg


@pytest.mark.parametrize("device,kind", list(DRAMSIM3_20K))
def test_archsim_against_dramsim3_gaps_pinned(traces_20k, device, kind):
    _check_dramsim3(device, traces_20k[kind]["dramsim3"], DRAMSIM3_20K[(device, kind)])


@pytest.mark.slow
@pytest.mark.parametrize("device,kind", list(DRAMSIM3_200K))
def test_archsim_against_dramsim3_gaps_pinned_200k(tmp_path, device, kind):
    traces = write_traces(tmp_path, 200000, 0)
    _check_dramsim3(device, traces[kind]["dramsim3"], DRAMSIM3_200K[(device, kind)])


# The same with the DRAMsim3 keys built so far (run_cases.d3_keys "d3/keys": archsim's default controller with
# controller_conventions.yaml's dramsim3 `controller:` keys, row_hit_cap 4 and refresh_stagger), measured by
# run_cases.py --dramsim3 (reports/dram_fidelity/README.md, "The DRAMsim3 keys built so far"): the gaps
# (cycles / DRAMsim3's - 1, row hits minus DRAMsim3's in points, latency / DRAMsim3's).
DRAMSIM3_KEYS_GAPS_20K = {
    ("DDR4-3200 1R", "stream"): (+0.0784, -0.02, 0.840),
    ("DDR4-3200 1R", "random"): (+0.0422, -0.01, 0.408),
    ("DDR4-3200 1R", "mixed"): (+0.0945, -0.01, 0.531),
    ("DDR4-3200 1R", "conflict"): (+0.0191, +2.80, 0.839),
    ("DDR4-3200 2R", "stream"): (+0.0735, -0.00, 0.837),
    ("DDR4-3200 2R", "random"): (+0.0430, -0.03, 0.321),
    ("DDR4-3200 2R", "mixed"): (+0.2167, -0.02, 0.469),
    ("DDR4-3200 2R", "conflict"): (+0.0192, +2.80, 0.838),
    ("HBM2 8ch", "stream"): (+0.0064, +0.13, 0.928),
    ("HBM2 8ch", "random"): (+0.0591, -0.00, 0.474),
    ("HBM2 8ch", "mixed"): (+0.0672, -0.02, 0.527),
    ("HBM2 8ch", "conflict"): (+0.0191, +2.79, 0.835),
}
DRAMSIM3_KEYS_GAPS_200K = {
    ("DDR4-3200 1R", "stream"): (+0.0842, -0.01, 0.842),
    ("DDR4-3200 1R", "random"): (+0.0394, -0.01, 0.410),
    ("DDR4-3200 1R", "mixed"): (+0.0935, -0.01, 0.531),
    ("DDR4-3200 1R", "conflict"): (+0.0193, +2.73, 0.839),
    ("DDR4-3200 2R", "stream"): (+0.0806, -0.01, 0.840),
    ("DDR4-3200 2R", "random"): (+0.0494, -0.02, 0.332),
    ("DDR4-3200 2R", "mixed"): (+0.2037, -0.02, 0.474),
    ("DDR4-3200 2R", "conflict"): (+0.0192, +2.73, 0.839),
    ("HBM2 8ch", "stream"): (+0.0090, +0.11, 0.928),
    ("HBM2 8ch", "random"): (+0.0802, -0.01, 0.457),
    ("HBM2 8ch", "mixed"): (+0.0892, -0.01, 0.546),
    ("HBM2 8ch", "conflict"): (+0.0191, +2.74, 0.836),
}


# the cases where the keys move a figure by more than the tolerance (2-rank DDR4 random and mixed), the HBM2
# stream, and one where they must not (1 rank), in the default run; all of them slow
@pytest.mark.parametrize("device,kind", [("DDR4-3200 2R", "random"), ("DDR4-3200 2R", "mixed"),
                                         ("HBM2 8ch", "stream"), ("DDR4-3200 1R", "mixed")])
def test_archsim_dramsim3_keys_against_dramsim3_gaps_pinned(traces_20k, device, kind):
    _check_dramsim3(device, traces_20k[kind]["dramsim3"], DRAMSIM3_20K[(device, kind)],
                    DRAMSIM3_KEYS_GAPS_20K[(device, kind)], d3_keys()["d3/keys"])


@pytest.mark.slow
@pytest.mark.parametrize("device,kind", list(DRAMSIM3_KEYS_GAPS_20K))
def test_archsim_dramsim3_keys_against_dramsim3_gaps_pinned_all(traces_20k, device, kind):
    _check_dramsim3(device, traces_20k[kind]["dramsim3"], DRAMSIM3_20K[(device, kind)],
                    DRAMSIM3_KEYS_GAPS_20K[(device, kind)], d3_keys()["d3/keys"])


@pytest.mark.slow
@pytest.mark.parametrize("device,kind", list(DRAMSIM3_KEYS_GAPS_200K))
def test_archsim_dramsim3_keys_against_dramsim3_gaps_pinned_200k(tmp_path, device, kind):
    traces = write_traces(tmp_path, 200000, 0)
    _check_dramsim3(device, traces[kind]["dramsim3"], DRAMSIM3_200K[(device, kind)],
                    DRAMSIM3_KEYS_GAPS_200K[(device, kind)], d3_keys()["d3/keys"])


# Under controller.convention=dramsim3 (run_cases.d3_convention "d3/dramsim3"; reports/dram_fidelity/README.md,
# "controller.convention=dramsim3"): the gaps to DRAMsim3 measured (cycles / DRAMsim3's - 1, row hits minus
# DRAMsim3's in points, latency / DRAMsim3's), on D3_DEVICE's presets as DRAMsim3 resolves its config files
# (DDR4_3200AA_x8_8Gb_DRAMsim3: no rank-switch bubble between writes; HBM2_2Gbps_DRAMsim3: one rank of 2 KB rows,
# tRTP 5; docs/presets.md). Every case is within the tolerances of DRAMsim3 itself, and is checked both
# against DRAMsim3 directly and around the measured gap.
DRAMSIM3_CONVENTION_GAPS_20K = {
    ("DDR4-3200 1R", "stream"): (+0.0000, -0.00, 1.000),
    ("DDR4-3200 1R", "random"): (+0.0014, +0.11, 1.007),
    ("DDR4-3200 1R", "mixed"): (+0.0005, +0.09, 0.998),
    ("DDR4-3200 1R", "conflict"): (+0.0001, +0.08, 1.000),
    ("DDR4-3200 2R", "stream"): (-0.0002, +0.01, 0.999),
    ("DDR4-3200 2R", "random"): (-0.0032, +0.11, 1.000),
    ("DDR4-3200 2R", "mixed"): (-0.0031, +0.09, 1.017),
    ("DDR4-3200 2R", "conflict"): (-0.0002, +0.08, 1.000),
    ("HBM2 8ch", "stream"): (-0.0015, +0.01, 0.987),
    ("HBM2 8ch", "random"): (-0.0006, +0.13, 1.011),
    ("HBM2 8ch", "mixed"): (+0.0017, +0.12, 0.967),
    ("HBM2 8ch", "conflict"): (+0.0000, +0.08, 1.000),
}


def _check_dramsim3_convention(traces: dict, device: str, kind: str) -> None:
    ref = DRAMSIM3_20K[(device, kind)]
    # within the tolerances of DRAMsim3 itself (a zero gap)
    _check_dramsim3(device, traces[kind]["dramsim3"], ref, (0.0, 0.0, 1.0), {"convention": "dramsim3"})
    _check_dramsim3(device, traces[kind]["dramsim3"], ref, DRAMSIM3_CONVENTION_GAPS_20K[(device, kind)],
                    {"convention": "dramsim3"})


# a stream and a random trace by default (a few seconds each); every case slow
@pytest.mark.parametrize("device,kind", [("DDR4-3200 1R", "stream"), ("DDR4-3200 1R", "random")])
def test_dramsim3_convention_matches_dramsim3(traces_20k, device, kind):
    _check_dramsim3_convention(traces_20k, device, kind)


@pytest.mark.slow
@pytest.mark.parametrize("device,kind", list(DRAMSIM3_CONVENTION_GAPS_20K))
def test_dramsim3_convention_against_dramsim3_all(traces_20k, device, kind):
    _check_dramsim3_convention(traces_20k, device, kind)


def test_dramsim3_keys_are_the_conventions():
    """run_cases' d3/keys controller is part of the dramsim3 convention's controller section, and the
    convention sets every key of that section (DRAMsim3's queues, posting, merging, precharge rule, refresh)."""
    keys = d3_keys()["d3/keys"]
    assert keys["row_hit_cap"] == 4 and keys["refresh_stagger"] is True, keys
    ControllerConfig.from_dict(keys)
    cfg = ControllerConfig.from_dict({"convention": "dramsim3"})
    section = conventions()["dramsim3"]["controller"]
    assert set(keys) <= set(section), (keys, section)
    got = {k: getattr(cfg, k) for k in section}
    assert got == section, got
    assert (cfg.bank_command_queue, cfg.posted_writes, cfg.merge_reads, cfg.run_end) == (8, True, True, "last_done")


def test_hbm3_needs_ramulators_device_rows(traces_20k):
    """HBM3 under the convention on archsim's own HBM3_6400Mbps (per-stack-ID activate window and turnarounds)
    runs mixed traffic > 2 % faster than Ramulator 2.1 with > 10 % lower read latency; HBM3_6400Mbps_16Gb_8Hi_Ramulator2
    (the test above) is what brings it within tolerance."""
    s = _archsim("HBM3 16ch", traces_20k["mixed"]["ramulator"], preset_key="preset")
    cycles, _, lat = RAMULATOR_20K[("HBM3 16ch", "mixed")]
    assert s["cycles"] / cycles - 1 < -0.02 and s["read_latency_mean_cycles"] / lat - 1 < -0.10, (
        f"HBM3_6400Mbps: {s['cycles']} cycles, latency {s['read_latency_mean_cycles']:.1f}; Ramulator 2.1 "
        f"{cycles}, {lat:.1f}")


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


def test_convention_front_end_per_standard():
    """Ramulator 2.1 ticks HBM3 at half the CK: under its convention the front end offers two requests per CK on
    HBM3, one elsewhere; an explicit width wins, and archsim's own convention keeps one."""
    c = ControllerConfig.from_dict({"convention": "ramulator2"})
    assert c.for_standard("hbm3").frontend_width == 2 and c.for_standard("hbm3_ramulator2").frontend_width == 2
    assert c.for_standard("ddr4").frontend_width == 1 and c.for_standard("hbm2").frontend_width == 1
    assert ControllerConfig.from_dict({"convention": "ramulator2", "frontend_width": 4}).for_standard(
        "hbm3").frontend_width == 4
    assert ControllerConfig.from_dict({}).for_standard("hbm3").frontend_width == 1


def test_unknown_conventions():
    with pytest.raises(ConfigError, match="controller.convention"):
        ControllerConfig.from_dict({"convention": "ramulator3"})


def test_run_end_convention_reports_the_last_hand_over(traces_20k):
    dev = DEVICES["DDR4-3200 1R"]
    s = run_trace(str(traces_20k["random"]["ramulator"]), preset=dev["preset_ramulator2"], mapping="RoBaRaCoCh",
                  controller={"convention": "ramulator2"}).stats
    assert s["cycles"] == s["last_accept_cycle"] < s["last_done_cycle"], s


def test_default_controller_on_a_convention_preset_gets_a_note():
    """Issue 39: a run of a reference's device preset with archsim's own controller says which convention
    reproduces the reference (the default controller is 78-96 % slower than Ramulator 2.1 on HBM3 and HBM4);
    under the convention, or on a preset of no convention, there is no note."""
    from archsim.dram.controller import convention_note
    from archsim.dram.spec import preset_names

    listed = [p for c in conventions().values() for p in c.get("presets", ())]
    assert listed and set(listed) <= set(preset_names())
    assert "controller.convention=ramulator2" in convention_note("HBM4_8000Mbps_32Gb_8Hi", "archsim")
    assert "controller.convention=dramsim3" in convention_note("HBM2_2Gbps_DRAMsim3", "archsim")
    assert convention_note("HBM4_8000Mbps_32Gb_8Hi", "ramulator2") is None
    assert convention_note("HBM2_2Gbps_PC", "archsim") is None


def test_trace_summary_prints_the_note(capsys):
    from archsim.systems.dram_trace.summary import print_trace_summary

    s = run_trace("synthetic:random:200", preset="GDDR7_28Gbps_16Gb").stats
    print_trace_summary(s, "synthetic:random:200")
    assert "note: GDDR7_28Gbps_16Gb is a device of the `ramulator2` convention" in capsys.readouterr().out


def _fidelity_report():
    """reports/dram_fidelity/make_report.py by its path: other reports' make_report modules share the name, and
    the first one a test process imports would shadow it."""
    import importlib.util

    path = ROOT / "reports" / "dram_fidelity" / "make_report.py"
    spec = importlib.util.spec_from_file_location("dram_fidelity_make_report", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_norefresh_table_pairs_runs_of_one_size(tmp_path):
    # issue 39's DDR5 was run with refresh off at 20 K and 200 K requests: each row must compare runs of one size
    # (a table keyed without the size paired a 200 K Ramulator run with a 20 K archsim run: -89.9 %)
    import json

    norefresh = _fidelity_report().norefresh

    def rec(sim, n, cycles):
        return {"sim": sim, "device": "DDR5-4800 1R", "kind": "stream", "requests": n, "cycles": cycles,
                "read_latency_mean_cycles": 1.0}

    recs = [rec("ramulator2+norefresh", 20000, 100), rec("ramulator2+norefresh", 200000, 1000),
            rec("archsim/ramulator2+norefresh", 200000, 1010), rec("archsim/ramulator2+norefresh", 20000, 101)]
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(recs))
    rows = [line for line in norefresh(path).splitlines() if line.startswith("| DDR5")]
    assert rows == ["| DDR5-4800 1R | stream | 200,000 | 1,000 | 1,010 | +1.00 % | 1.0 | 1.0 |",
                    "| DDR5-4800 1R | stream | 20,000 | 100 | 101 | +1.00 % | 1.0 | 1.0 |"]


def test_rfm_table_shows_the_gap_without_rfm(tmp_path):
    # the RFM table's last column is archsim minus Ramulator with RFM off in both: a gap RFM does not cause (the
    # one-bank conflict trace's scheduler difference) shows there too
    import json

    rfm = _fidelity_report().rfm

    def rec(sim, device, cycles):
        return {"sim": sim, "device": device, "kind": "conflict", "requests": 20000, "cycles": cycles}

    recs = [rec("ramulator2", "DDR5-4800 1R RFM", 1000), rec("archsim/ramulator2", "DDR5-4800 1R RFM", 1012),
            rec("ramulator2+norefresh", "DDR5-4800 1R", 950), rec("archsim/ramulator2+norefresh", "DDR5-4800 1R", 969)]
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(recs))
    rows = [line for line in rfm(path).splitlines() if line.startswith("| conflict")]
    assert rows == ["| conflict | 20,000 | +5.26 % | +4.44 % | +1.20 % | +2.00 % |"]
