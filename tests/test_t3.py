"""T3: ring collectives, tracker, fused GEMM + reduce-scatter on the channel engine (archsim.interconnect)."""
from __future__ import annotations

import numpy as np
import pytest

from archsim.dram.checker import check_log
from archsim.engine.channel import KIND_READ
from archsim.engine.memory import MemorySystem
from archsim.errors import ConfigError, UserError
from archsim.interconnect import ring as ringmod
from archsim.systems.t3.params import load_params
from archsim.systems.t3.shapes import SublayerShape, chunk_tiles, stage_chunk, sublayer_shape
from archsim.systems.t3.sim import (
    CONFIGS,
    _Sim,
    dram_energy,
    expected_rs_accesses,
    nmc_energy_actions,
    rs_link_bound_s,
    simulate_sublayer,
)
from archsim.systems.t3.tracker import Tracker

SMALL = SublayerShape("fc2_fwd", tokens=128, k=256, h=1024)
# the preset's IPoly hash is for 32 channels; the 4-channel test memory XORs row bits into its channel bits
SMALL_MAPPING = "RoRaBgBaChCo,Ch^Ro"


@pytest.fixture(scope="module")
def params():
    # 4 channels keep the runs small; everything else is the paper preset
    return load_params(overrides={"memory.channels": 4, "memory.mapping": SMALL_MAPPING})


@pytest.fixture(scope="module")
def functional_runs(params):
    return {c: simulate_sublayer(params, SMALL, 4, c, functional=True, log=True) for c in CONFIGS}


# ---- ring --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 3, 5, 8])
@pytest.mark.parametrize("kind", ringmod.COLLECTIVES)
def test_ring_collective_matches_closed_form_and_numpy(n, kind):
    cfg = ringmod.load_ring("t3_ring", n)
    rng = np.random.default_rng(n)
    x = [rng.integers(-9, 9, size=40 * n).astype(np.float32) for _ in range(n)]
    run = ringmod.simulate_collective(cfg, kind, x)
    closed = ringmod.collective_s(cfg, kind, x[0].nbytes)
    # ceil to whole picoseconds per transfer is the only difference
    steps = (n - 1) * (2 if kind == "all_reduce" else 1)
    assert closed <= run.seconds <= closed + steps * 1e-12 + 1e-15
    bounds = ringmod.chunk_bounds(len(x[0]), n)
    total = sum(x)
    for d in range(n):
        lo, hi = bounds[d]
        if kind == "reduce_scatter":
            np.testing.assert_array_equal(run.outputs[d], total[lo:hi])
        elif kind == "all_reduce":
            np.testing.assert_array_equal(run.outputs[d], total)
        else:
            for e in range(n):
                np.testing.assert_array_equal(run.outputs[d][bounds[e][0]:bounds[e][1]], x[e][bounds[e][0]:bounds[e][1]])


def test_ring_closed_form_numbers():
    cfg = ringmod.load_ring("t3_ring", 8)
    # 8 MB over 8 devices: 7 steps of (500 ns + 1 MB / 75 GB/s)
    assert ringmod.collective_s(cfg, "reduce_scatter", 8_000_000) == pytest.approx(7 * (500e-9 + 1e6 / 75e9))
    assert ringmod.collective_s(cfg, "all_reduce", 8_000_000) == pytest.approx(14 * (500e-9 + 1e6 / 75e9))


def test_rs_schedule_ends_each_chunk_at_its_owner():
    for n in (2, 4, 7):
        for c in range(n):
            path = [d for k in range(n - 1) for d in range(n) if ringmod.rs_send_chunk(n, d, k) == c]
            # chunk c starts at c+1 and is forwarded one hop per step, the last send lands on c
            assert path == [(c + 1 + k) % n for k in range(n - 1)]
            assert (path[-1] + 1) % n == c
        # the fused schedule's stagger is the ring's order
        assert all(stage_chunk(n, d, s) == ringmod.rs_send_chunk(n, d, s) for d in range(n) for s in range(n - 1))


def test_ring_bad_input(tmp_path):
    bad = tmp_path / "r.yaml"
    bad.write_text("link_bytes_per_s: 1.0e+9\nhop_latncy_s: 1.0e-7\n")
    with pytest.raises(ConfigError, match="hop_latncy_s: unknown key"):
        ringmod.load_ring(str(bad), 4)
    with pytest.raises(UserError, match="unknown interconnect preset"):
        ringmod.load_ring("nope", 4)
    with pytest.raises(ConfigError, match="devices"):
        ringmod.load_ring("t3_ring", 1)
    with pytest.raises(UserError, match="unknown collective"):
        ringmod.collective_s(ringmod.load_ring("t3_ring", 2), "broadcast", 10)


# ---- tracker ----------------------------------------------------------------------------------------------
def test_tracker_fires_exactly_at_expected_count():
    tr = Tracker(entries=4)
    tr.expect("a", 5)
    assert tr.update("a", 2, 10) == []
    assert tr.update("a", 2, 11) == []
    assert tr.update("a", 1, 12) == ["a"]
    assert tr.fired == {"a": 12} and tr.pending == 0
    with pytest.raises(ValueError, match="after it fired"):
        tr.update("a", 1, 13)
    with pytest.raises(ValueError, match="unprogrammed"):
        tr.update("b", 1, 13)
    tr.expect("c", 2)
    with pytest.raises(ValueError, match="expected 2"):
        tr.update("c", 3, 14)


def test_tracker_full_table_holds_updates_until_an_entry_frees():
    tr = Tracker(entries=2)
    for k in "abc":
        tr.expect(k, 2)
    tr.update("a", 1, 0)
    tr.update("b", 1, 1)
    assert tr.update("c", 1, 2) == [] and tr.full_events == 1 and tr.pending == 3
    assert tr.update("c", 1, 3) == [] and tr.full_events == 2      # c still has no entry: waits behind
    assert tr.update("a", 1, 4) == ["a", "c"]                       # a frees its entry; c's two updates count
    assert tr.fired == {"a": 4, "c": 4} and tr.high_water == 2
    assert tr.update("b", 1, 5) == ["b"]


def test_tracker_random_streams_fire_once_when_complete():
    rng = np.random.default_rng(7)
    for _trial in range(30):
        entries = int(rng.integers(1, 6))
        tr = Tracker(entries)
        expected = {k: int(rng.integers(1, 5)) for k in range(12)}
        for k, c in expected.items():
            tr.expect(k, c)
        # updates in an order where each tile's updates come together-ish (production order), split randomly
        stream = []
        for k, c in expected.items():
            parts = []
            while c:
                p = int(rng.integers(1, c + 1))
                parts.append(p)
                c -= p
            stream += [(k, p) for p in parts]
        # local interleaving of neighbours only (the stagger keeps tiles in order), so no deadlock
        for i in range(0, len(stream) - 1, 2):
            if rng.random() < 0.5:
                stream[i], stream[i + 1] = stream[i + 1], stream[i]
        fired = []
        for t, (k, p) in enumerate(stream):
            fired += tr.update(k, p, t)
        assert sorted(fired) == sorted(expected) and len(fired) == len(set(fired))
        assert tr.pending == 0 and tr.high_water <= entries


# ---- fused schedule -----------------------------------------------------------------------------------------
def test_fused_result_equals_sequential_and_numpy(functional_runs):
    seq = functional_runs["sequential"]
    partials = seq.extra["partials"]
    bounds = seq.extra["chunk_bounds"]
    total = sum(partials.values())
    for c, run in functional_runs.items():
        for d in range(4):
            np.testing.assert_array_equal(run.outputs[d], total[:, bounds[d][0]:bounds[d][1]], err_msg=c)
            np.testing.assert_array_equal(run.outputs[d], seq.outputs[d])


@pytest.mark.parametrize("devices", [4, 3])
def test_bidirectional_ring_reduces_both_halves(devices):
    """ring_directions 2: every column chunk's first half of the rows goes round the ring forwards, its second
    half backwards; every device ends with its chunk reduced (numpy) in every configuration, from the same GEMM
    tiles, and the reduce-scatter ends sooner than on one direction (half the bytes on each direction; the
    preset's 32 channels, so the links bind the sequential reduce-scatter, not the memory)."""
    import dataclasses

    params = load_params()
    bi = dataclasses.replace(params, ring_directions=2)
    shape = SublayerShape("fc2_fwd", tokens=256, k=256, h=96 * devices)
    one_way = {c: simulate_sublayer(params, shape, devices, c, functional=True) for c in ("sequential", "t3")}
    runs = {c: simulate_sublayer(bi, shape, devices, c, functional=True) for c in CONFIGS}
    total = sum(runs["sequential"].extra["partials"].values())
    bounds = runs["sequential"].extra["chunk_bounds"]
    for c, run in runs.items():
        assert run.ring.directions == 2 and len(run.final_tiles) == len(one_way["t3"].final_tiles)
        for d in range(devices):
            np.testing.assert_array_equal(run.outputs[d], total[:, bounds[d][0]:bounds[d][1]], err_msg=c)
    seq, seq1 = runs["sequential"], one_way["sequential"]
    assert seq.gemm_cycles == pytest.approx(seq1.gemm_cycles, rel=0.01)       # the same tiles, in another order
    assert seq.rs_end_cycles - seq.gemm_cycles < seq1.rs_end_cycles - seq1.gemm_cycles
    assert seq.ag_s < seq1.ag_s
    assert rs_link_bound_s(seq) < rs_link_bound_s(seq1)
    with pytest.raises(ConfigError, match="ring_directions"):
        simulate_sublayer(bi, SublayerShape("fc2_fwd", tokens=128, k=256, h=96 * devices), devices, "t3")


def test_every_dma_fires_once_per_tile_and_only_when_complete(params, functional_runs):
    n = 4
    chunks = chunk_tiles(SMALL, n, params.gpu)
    for c in ("t3", "t3-mca"):
        run = functional_runs[c]
        want = {(d, (stage_chunk(n, d, s), tile.index)) for d in range(n) for s in range(1, n)
                for tile in chunks[stage_chunk(n, d, s)]}
        assert set(run.dma_fires) == want
        assert set(run.dma_fires.values()) == {1}
        # the final tiles are those of the device's own chunk
        assert {k for k in run.final_tiles} == {(d, (d, t.index)) for d in range(n) for t in chunks[d]}
        assert run.tracker["fired"] == len(want)
    # "only when complete": an early DMA would send a partial sum and the functional result above would be
    # wrong; the tracker also refuses updates after a fire (test_tracker_fires_exactly_at_expected_count)


def test_reduce_scatter_traffic_matches_closed_form(params, functional_runs):
    n = 4
    chunk_acc = SMALL.tokens * SMALL.h // n * 2 // params.spec.access_bytes
    exp = expected_rs_accesses(n, chunk_acc)
    seq = functional_runs["sequential"].traffic
    assert seq["rs_read"] == exp["sequential"]["rs_read"] and seq["rs_write"] == exp["sequential"]["rs_write"]
    assert seq["gemm_write"] == n * chunk_acc
    fused = functional_runs["t3"].traffic
    assert fused["rs_read"] == exp["t3"]["rs_read"]
    assert fused["gemm_update"] + fused["rs_update"] == exp["t3"]["updates"]
    assert fused["gemm_read"] == seq["gemm_read"]
    assert functional_runs["t3"].nmc_updates == 4 * exp["t3"]["updates"]     # summed over the 4 devices


def test_checker_accepts_every_simulated_command_stream(params, functional_runs):
    for c, run in functional_runs.items():
        for ms in run.memories:
            log = ms.command_log()
            assert len(log) > 0
            assert check_log(params.spec, log) == [], c


def test_mca_keeps_the_gemm_first_and_communication_progresses(params):
    shape = SublayerShape("fc2_fwd", tokens=256, k=512, h=1024)
    runs = {c: simulate_sublayer(params, shape, 4, c, devices="one") for c in ("t3", "t3-mca")}
    # compute traffic first: the GEMM is no slower than with FR-FCFS over both sources
    assert runs["t3-mca"].gemm_cycles <= runs["t3"].gemm_cycles * 1.02
    # and the reduce-scatter is not starved (the starvation cap): it ends within 25% of its end under FR-FCFS.
    # It does end later - it binds this small sublayer, and MCA delays it to speed the GEMM (reports/t3)
    assert runs["t3"].rs_end_cycles < runs["t3-mca"].rs_end_cycles <= 1.25 * runs["t3"].rs_end_cycles


def test_starvation_cap_bounds_communication_wait(params):
    """A saturated compute source under `threshold` arbitration: the one communication read still issues
    within the starvation cap (plus its own ACT-to-data time)."""
    spec = params.spec
    cap = 300
    ms = MemorySystem(spec, params.controller, sources=[{"name": "compute", "kind": "rw"},
                                                        {"name": "comm", "kind": "rw"}],
                      arbitration="threshold", threshold=1, starvation_cap=cap, log=True)
    pc, pm = ms.add_port("compute", width=4), ms.add_port("comm", width=1)
    n = 20000
    rng = np.random.default_rng(1)
    ms.enqueue_requests(pc, 0, rng.integers(0, 32, n), rng.integers(0, 4096, n), rng.integers(0, 32, n), KIND_READ, 0)
    rid = ms.enqueue_requests(pm, 0, 5, 7, 3, KIND_READ, 100)
    ms.run()
    t = spec.timing
    lat = int(ms.request_done[rid[0]] - ms.S.r_enq[rid[0]])
    bound = cap + t["nRP"] + t["nRCDRD"] + t["nCL"] + t["nBL"] + 2 * cap   # PRE, ACT and RD each may wait once
    assert lat <= bound
    assert ms.request_done[:n].max() > ms.request_done[rid[0]]           # compute was still busy meanwhile
    assert check_log(spec, ms.command_log()) == []


@pytest.mark.parametrize("directions", [1, 2])
def test_one_device_symmetry_model_agrees_with_all_devices(params, directions):
    import dataclasses

    params = dataclasses.replace(params, ring_directions=directions)
    shape = SublayerShape("fc2_fwd", tokens=256, k=256, h=1024)
    for c in ("sequential", "t3"):
        one = simulate_sublayer(params, shape, 4, c, devices="one")
        full = simulate_sublayer(params, shape, 4, c, devices="all")
        # devices differ in which chunk they produce when (addresses, so DRAM timing) and drift apart; the
        # all-device run waits for the slowest device at every ring step, the symmetric model cannot: it is
        # optimistic. Measured on this small memory-bound case: sequential -0.1%, T3 -17% (reports/t3 gaps)
        assert 0.6 * full.rs_end_cycles <= one.rs_end_cycles <= 1.05 * full.rs_end_cycles, c
        assert one.traffic == full.traffic


def test_windowed_driver_converges_to_the_exact_one(params):
    """The preset's driver is exact (window 0: the memory stops at every completion waited on); the windowed
    loop acts on completions at window boundaries, so it can only be later, and by little."""
    assert params.window_cycles == 0
    shape = SublayerShape("fc2_fwd", tokens=128, k=256, h=512)
    exact = simulate_sublayer(params, shape, 2, "t3")
    for w in (16, 64):
        coarse = simulate_sublayer(params, shape, 2, "t3", window_cycles=w)
        assert coarse.rs_end_cycles == pytest.approx(exact.rs_end_cycles, rel=0.01), w
        assert coarse.rs_end_cycles >= exact.rs_end_cycles - w, w


def test_nmc_update_is_one_command_priced_from_the_energy_table(params, functional_runs):
    """An update is one NMC_ADD / NMC_ADDA command of the T3 memory (no RD, WR of its own), and its energy is
    the preset's NMC action: a host write plus a bank-level read plus 16 FP16 adds (HBM2_2Gbps_NMC)."""
    from archsim.energy import dram_action_energy_pj

    run = functional_runs["t3"]
    assert run.nmc_mode == "command"
    assert run.commands["NMC_ADD"] + run.commands["NMC_ADDA"] == run.nmc_updates > 0
    per = dram_action_energy_pj(params.spec)
    assert per["NMC"] == pytest.approx(per["WR"] + 0.73 * 256 + 16 * 0.46)
    acts = nmc_energy_actions(run)
    assert acts["NMC"] == run.nmc_updates and "NMC_UPDATE" not in acts
    e = dram_energy(run, params)
    assert e["nmc"] == pytest.approx(run.nmc_updates * per["NMC"])
    # sequential has no updates: every GEMM store is a plain write
    seq = functional_runs["sequential"]
    assert seq.nmc_updates == 0 and seq.commands.get("NMC_ADD", 0) + seq.commands.get("NMC_ADDA", 0) == 0


def test_rd_wr_updates_keep_the_result_and_are_priced_alike(params):
    """`nmc.update: rd_wr` (the comparison in reports/t3): the engine's RD, adder, WR per update, the same
    functional result, the update's RD and WR moved to one NMC_UPDATE action priced like NMC_ADD; slower."""
    from archsim.energy import dram_action_energy_pj

    rw = load_params(overrides={"memory.channels": 4, "memory.mapping": SMALL_MAPPING, "nmc.update": "rd_wr"})
    shape = SublayerShape("fc2_fwd", tokens=64, k=256, h=512)
    a = simulate_sublayer(rw, shape, 2, "t3", functional=True)
    b = simulate_sublayer(params, shape, 2, "t3", functional=True)
    assert a.nmc_mode == "rd_wr" and a.commands.get("NMC_ADD", 0) + a.commands.get("NMC_ADDA", 0) == 0
    for x, y in zip(a.outputs, b.outputs, strict=True):
        np.testing.assert_array_equal(x, y)
    acts = nmc_energy_actions(a)
    assert acts["NMC_UPDATE"] == a.nmc_updates == b.nmc_updates
    assert acts["RD"] == a.commands["RD"] + a.commands.get("RDA", 0) - a.nmc_updates
    assert dram_energy(a, rw)["nmc"] == pytest.approx(a.nmc_updates * dram_action_energy_pj(rw.spec)["NMC"])
    assert a.gemm_cycles > b.gemm_cycles


# ---- bad input ------------------------------------------------------------------------------------------------
def test_bad_inputs(params, tmp_path):
    with pytest.raises(UserError, match="unknown T3 configuration"):
        simulate_sublayer(params, SMALL, 4, "t4")
    with pytest.raises(ConfigError, match="functional mode needs devices: all"):
        simulate_sublayer(params, SMALL, 4, "t3", devices="one", functional=True)
    from archsim.workload.spec import load_model

    with pytest.raises(ConfigError, match="not divisible by tp"):
        sublayer_shape(load_model("t-nlg"), "op_fwd", 64, 128)
    with pytest.raises(UserError, match="unknown sublayer"):
        sublayer_shape(load_model("t-nlg"), "fc3", 8, 128)
    bad = tmp_path / "p.yaml"
    bad.write_text("gpu: {cus: 0}\n")
    with pytest.raises(ConfigError, match="gpu.cus"):
        load_params(str(bad))
    bad.write_text("mca: {treshold: 3}\n")
    with pytest.raises(ConfigError, match="mca.treshold: unknown key"):
        load_params(str(bad))
    bad.write_text("nmc: {update: rdwr}\n")
    with pytest.raises(ConfigError, match="nmc.update: must be one of command, rd_wr"):
        load_params(str(bad))
    # the adder latency has one source: the NMC standard's nALU
    bad.write_text("memory: {preset: HBM2_2Gbps_NMC}\nnmc: {alu_latency_cycles: 3}\n")
    with pytest.raises(ConfigError, match="nmc.alu_latency_cycles: HBM2_2Gbps_NMC gives the adder latency"):
        load_params(str(bad))


def test_cli_errors_exit_2(capsys):
    from archsim.cli import main

    for arg in ("tp=1", "tp=128", "sublayer=fc3", "devices=some", "configs=[t4]", "nmc_update=rdwr",
                "mca_threshold=fast"):
        assert main(["run", "--system", "t3", "--set", arg]) == 2, arg
        err = capsys.readouterr().err
        assert "Traceback" not in err and arg.split("=")[0] in err


def test_system_run_reports_speedups():
    from archsim import api

    res = api.run({"system": "t3", "model": "mega-gpt2", "sublayer": "op_fwd", "tp": 16, "tokens": 256})
    s = res.stats
    assert s["speedup_sequential"] == 1.0
    # ideal overlap of the sequential parts never loses; no schedule beats its link: every device sends N-1
    # chunks in the reduce-scatter and the all-gather follows
    assert s["speedup_ideal"] >= 1.0
    cfg = ringmod.load_ring("t3_ring", 16)
    nbytes = 256 * 3072 * 2
    link_bound = 15 * nbytes / 16 / cfg.link_bytes_per_s + ringmod.collective_s(cfg, "all_gather", nbytes)
    for c in ("sequential", "t3", "t3_mca", "ideal"):
        assert s[f"{c}_s"] >= link_bound
    assert s["data_movement_change_t3"] < 0
    assert set(res.df["config"]) == {"sequential", "t3", "t3-mca", "ideal"}


@pytest.mark.slow
def test_tnlg_fc2_tp8_reproduction_direction():
    """Full-size sublayer (1024 tokens, paper memory): T3-MCA beats sequential and stays under ideal."""
    from archsim import api

    s = api.run({"system": "t3", "model": "t-nlg", "sublayer": "fc2_fwd", "tp": 8, "tokens": 1024}).stats
    assert 1.05 < s["speedup_t3"] <= s["speedup_ideal"] * 1.001
    assert 1.05 < s["speedup_t3_mca"] <= s["speedup_ideal"] * 1.001
    assert -0.5 < s["data_movement_change_t3"] < -0.1


def test_advance_never_jumps_past_its_bound(params):
    """A driver enqueues work between advances; a memory with nothing due before its next refresh must stop
    at the bound, or work arriving in between would start late (shared-engine fix made for T3)."""
    ms = MemorySystem(params.spec, params.controller)
    port = ms.add_port()
    ms.advance(100)
    assert ms.clock == 100
    rid = ms.enqueue_requests(port, 0, 0, 1, 0, KIND_READ, 150)
    ms.advance(140)
    assert ms.clock == 140
    ms.run()
    assert ms.S.r_enq[rid[0]] == 150


def test_threshold_row_arbitration_matches_the_reference():
    """`threshold_row` (T3-MCA variant: a held-back source still issues column commands to rows it opened) in
    the fast engine against the reference scheduler, on the random cases that draw `threshold`."""
    from engine_cases import describe, random_case, run_case
    from test_engine_vs_reference import assert_clean, assert_same

    from archsim.engine.reference import ReferenceController

    ran = 0
    for seed in range(20):
        case = random_case(seed)
        if case["arbitration"] != "threshold":
            continue
        case["arbitration"] = "threshold_row"
        fast, ref = run_case(MemorySystem, case), run_case(ReferenceController, case)
        assert_same(case, fast, ref)
        assert_clean(case, fast, "fast engine")
        ran += 1
    assert ran >= 3, f"only {ran} threshold cases among 20 seeds ({describe(case)})"


# ---- issue 22: address hashing in the baseline, claim directions -------------------------------------------
def _chunk_channels(params, model: str, sub: str, tp: int, tokens: int) -> list[int]:
    from archsim.workload.spec import load_model

    sim = _Sim(params, sublayer_shape(load_model(model), sub, tp, tokens), tp, "sequential", devices="one")
    return [len(np.unique(np.concatenate([sim.tile_requests("C", t)[0] for t in tiles]))) for tiles in sim.chunks]


def test_preset_hash_spreads_every_chunk_over_all_channels():
    """The issue's camping: under the unhashed RoRaBgBaChCo some GPT-3 and MT-NLG TP-32 chunks (384 / 640
    columns) decode onto 8 of the 32 channels (PaLM's onto 16); the preset's IPoly channel hash puts every
    chunk of every 500B-class TP-32 out-projection on all 32 (256 tokens: the same row strides as 1024)."""
    hashed = load_params()
    plain = load_params(overrides={"memory.mapping": "RoRaBgBaChCo"})
    assert hashed.mapping and "Ch4^" in hashed.mapping and plain.mapping == "RoRaBgBaChCo"
    got = {m: (min(_chunk_channels(plain, m, "op_fwd", 32, 256)), min(_chunk_channels(hashed, m, "op_fwd", 32, 256)))
           for m in ("gpt3-175b", "mt-nlg", "palm")}
    assert got["gpt3-175b"][0] == 8 and got["mt-nlg"][0] == 8, f"(unhashed, hashed) fewest channels per chunk: {got}"
    assert all(h == 32 for _, h in got.values()), f"(unhashed, hashed) fewest channels per chunk: {got}"


def test_preset_mapping_errors_name_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("memory: {preset: HBM2_2Gbps_NMC, channels: 4, mapping: 'RoRaBgBaChCo,Ch3^Ro'}\n")
    with pytest.raises(ConfigError, match=r"memory\.mapping.*channel has 2 bits"):
        load_params(str(bad))
    bad.write_text("memory: {preset: HBM2_2Gbps_NMC}\nmca: {gate: some}\n")
    with pytest.raises(ConfigError, match=r"mca\.gate"):
        load_params(str(bad))


def test_claim_directions_small(params):
    """Small default-suite version of the slow reproduction checks: T3 >= Sequential, ideal >= T3 within 1%,
    T3-MCA within 2% of T3 (our model: MCA recovers little and at this size costs 1.2%, reports/t3 shows why;
    the paper's +13% over T3 is not reproduced), and the record of what MCA did (threshold trajectory, stall
    cycles) is in the run's stats."""
    from archsim import api

    s = api.run({"system": "t3", "model": "mega-gpt2", "sublayer": "fc2_fwd", "tp": 8, "tokens": 128}).stats
    figs = {k: round(s[k], 4) for k in ("speedup_t3", "speedup_t3_mca", "speedup_ideal")}
    assert s["speedup_t3"] >= 1.0, figs
    assert s["speedup_t3_mca"] >= 0.98 * s["speedup_t3"], figs
    assert s["speedup_ideal"] >= 0.99 * s["speedup_t3"], figs
    assert s["t3_mca_threshold_trajectory"] and all(v >= 1 for v in s["t3_mca_threshold_trajectory"])
    assert s["t3_comm_stall_cycles"] == s["t3_compute_stall_cycles"] - s["sequential_compute_stall_cycles"]
    assert s["chunk_channels_min"] == s["chunk_channels_max"] == 32


@pytest.mark.slow
def test_done_when_gpt3_out_projection_sequential_rs_at_its_link_bound():
    """Issue 22 done-when: GPT-3 out-projection, TP 32, 1024 tokens: the sequential reduce-scatter runs within
    10% of its ring link bound under the preset's hashed mapping (it took 1.84x unhashed: chunks on 8 of 32
    channels)."""
    from archsim import api

    s = api.run({"system": "t3", "model": "gpt3-175b", "sublayer": "op_fwd", "tp": 32, "tokens": 1024,
                 "configs": ["sequential"]}).stats
    ratio = s["sequential_rs_s"] / s["rs_link_bound_s"]
    assert 0.9 <= ratio <= 1.1, (f"sequential RS {s['sequential_rs_s'] * 1e6:.1f} us vs link bound "
                                 f"{s['rs_link_bound_s'] * 1e6:.1f} us ({ratio:.2f}x), channels per chunk "
                                 f"{s['chunk_channels_min']}-{s['chunk_channels_max']}")


@pytest.mark.slow
@pytest.mark.parametrize("model,sub,tp", [("t-nlg", "fc2_fwd", 8), ("gpt3-175b", "fc2_fwd", 32)])
def test_claim_directions_full_size(model, sub, tp):
    """Full-size rows (1024 tokens, the paper preset): T3 >= Sequential, T3-MCA >= T3 within 1%, ideal >= T3
    within 1% (where the paper agrees; our MCA recovers little, reports/t3 shows why)."""
    from archsim import api

    s = api.run({"system": "t3", "model": model, "sublayer": sub, "tp": tp, "tokens": 1024}).stats
    figs = {k: round(s[k], 4) for k in ("speedup_t3", "speedup_t3_mca", "speedup_ideal", "sequential_rs_vs_link_bound")}
    assert s["speedup_t3"] > 1.05, figs
    assert s["speedup_t3_mca"] >= 0.99 * s["speedup_t3"], figs
    assert s["speedup_ideal"] >= 0.99 * s["speedup_t3"], figs
    assert s["sequential_rs_vs_link_bound"] <= 1.1, figs
