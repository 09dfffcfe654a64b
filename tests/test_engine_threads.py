"""The threaded channel engine (MemorySystem(threads=N), docs/channel-engine.md "Threads") against one thread
on random multi-channel, multi-source cases: rw ports shared by every channel (head-of-line blocking couples
them), streams with tagged commands, completion groups spanning channels, refresh, the command log. Every
observable must be identical: log, request done cycles and classes, completions in order, counters, clock.
"""
from __future__ import annotations

import numpy as np
import pytest
from engine_cases import VARIANTS, _spec, random_case

import archsim.engine.channel as channel
import archsim.engine.threads as threads
from archsim.engine.channel import ST_COMPLETION, ST_IDLE
from archsim.engine.memory import MemorySystem
from archsim.errors import ConfigError

# variants whose presets take org.channels (several channels per device)
MULTI = [i for i, (p, ov) in enumerate(VARIANTS) if dict(ov).get("org.channels") == 1]


def _multi_case(seed: int) -> dict:
    """A random single-channel case (tests/engine_cases.py) spread over 2, 4 or 8 channels: each channel gets the
    case's traffic with its own time shift and a random subset of its requests; ports are shared by all
    channels; some tags form completion groups across channels."""
    rng = np.random.default_rng(10_000 + seed)
    base = random_case(seed, variant=MULTI[seed % len(MULTI)])
    nch = int(rng.choice([2, 4, 4, 8]))          # (a power of two; 3 threads then shard 4 channels 1, 1, 2)
    ov = dict(base["overrides"])
    ov["org.channels"] = nch
    spec = _spec(base["preset"], tuple(sorted(ov.items())))
    B = spec.banks_per_channel
    reqs = {i: [] for i in range(len(base["ports"]))}
    streams = []
    for ch in range(nch):
        shift = int(rng.integers(0, 60))
        for r in base["requests"]:
            keep = rng.random(len(r["bank"])) < 0.8
            tag = np.where(r["tag"] >= 0, r["tag"] + 1000 * ch, -1)
            reqs[r["port"]].append({k: v[keep] for k, v in dict(r, tag=tag, channel=np.full_like(r["bank"], ch),
                                                                   bank=r["bank"] + ch * B,
                                                                   arrive=r["arrive"] + shift).items()
                                    if k != "port"})
        for s in base["streams"]:
            tag = np.where(s["tag"] >= 0, s["tag"] + 1000 * ch, -1)
            streams.append(dict(s, channel=ch, bank=s["bank"] + ch * B, at=s["at"] + shift, tag=tag))
    requests = []
    for p, parts in reqs.items():
        cat = {k: np.concatenate([x[k] for x in parts]) for k in parts[0]}
        order = np.argsort(cat["arrive"], kind="stable")          # a port is an in-order backlog
        requests.append(dict({k: v[order] for k, v in cat.items()}, port=p))
    # completion groups: some tagged items get a group's tag; in every third case every tagged item is in a group
    # (no tag outside a group: regions are then bounded by the groups' items left, not by the command latency)
    groups = {}
    items = [(x, "request") for x in requests] + [(x, "stream") for x in streams]
    if seed % 3 == 0:
        for x, _ in items:
            x["tag"] = np.where(x["tag"] >= 0, 800_000 + x["tag"] % 3, -1)
        for g in range(3):
            n = sum(int((x["tag"] == 800_000 + g).sum()) for x, _ in items)
            if n:
                groups[800_000 + g] = n
    for g in range(int(rng.integers(0, 3))):
        gtag = 900_000 + g
        n = 0
        for x, _ in items:
            pick = (x["tag"] >= 0) & (x["tag"] < 800_000) & (rng.random(len(x["tag"])) < 0.3)
            x["tag"] = np.where(pick, gtag, x["tag"])
            n += int(pick.sum())
        if n:
            groups[gtag] = n
    return {"base": base, "spec": spec, "requests": requests, "streams": streams, "groups": groups}


def _run(case: dict, threads: int, driver: bool) -> tuple[dict, MemorySystem]:
    b = case["base"]
    ms = MemorySystem(case["spec"], controller=dict(b["controller"]), sources=b["sources"],
                      arbitration=b["arbitration"], starvation_cap=b["starvation_cap"], threshold=b["threshold"],
                      stream_refresh=b["stream_refresh"], alu_latency=b["alu_latency"], log=True, threads=threads)
    for tag, n in case["groups"].items():
        ms.expect(tag, n)
    ports = [ms.add_port(source=p["source"], width=p["width"]) for p in b["ports"]]
    for r in case["requests"]:
        if len(r["bank"]):
            ms.enqueue_requests(ports[r["port"]], r["channel"], r["bank"], r["row"], r["column"], r["kind"],
                                r["arrive"], r["tag"])
    for s in case["streams"]:
        for at in np.unique(s["at"]).tolist():
            k = s["at"] == at
            ms.enqueue_stream(s["source"], s["channel"], s["cmd"][k], s["bank"][k], s["row"][k], s["column"][k],
                              flags=s["flags"][k], est=s["est"][k], tag=s["tag"][k], at=int(at))
    stops = []
    if driver:
        # a co-simulation's loop: advance to each completion (or a bound), drain, go on
        bound = 0
        while True:
            bound += 97
            st = ms.advance(bound)
            stops.append((st, ms.clock, tuple(ms.drain())))
            if st == ST_IDLE or (ms.S.outstanding[0] == 0 and ms.S.min_pending[0] >= channel.INF):
                break
            assert ms.clock < 400_000, "the run does not finish"
    else:
        ms.run(max_cycles=400_000)
    log = ms.command_log().reset_index(drop=True)
    n = int(ms.S.n_comp[0])
    ring = (ms.S.c_tag[:n].tolist(), ms.S.c_done[:n].tolist(), ms.S.c_id[:n].tolist())   # (raw, in ring order)
    out = {"ring": ring, "log": log, "done": np.asarray(ms.request_done).copy(), "class": np.asarray(ms.request_class).copy(),
           "completions": list(ms.completions()) if not driver else None, "stops": stops, "clock": ms.clock,
           "counts": ms.S.cmd_count.copy(), "progress": ms.S.progress[:2].copy()}
    return out, ms


def _assert_same(seed: int, one: dict, many: dict, threads: int) -> None:
    what = f"seed {seed}, {threads} threads vs 1"
    la, lb = one["log"], many["log"]
    assert len(la) == len(lb), f"{what}: {len(lb)} logged commands vs {len(la)}"
    diff = np.nonzero((la.to_numpy() != lb.to_numpy()).any(axis=1))[0]
    assert not len(diff), f"{what}: logs differ first at row {diff[0]}:\n{la.iloc[diff[0]]}\n{lb.iloc[diff[0]]}"
    assert one["ring"] == many["ring"], f"{what}: completion rings differ"
    for key in ("done", "class", "counts", "progress"):
        assert np.array_equal(one[key], many[key]), f"{what}: {key} differ"
    assert one["completions"] == many["completions"], f"{what}: completions differ"
    assert one["stops"] == many["stops"], f"{what}: advance() stops differ"
    assert one["clock"] == many["clock"], f"{what}: final clock {many['clock']} vs {one['clock']}"


@pytest.fixture()
def short_regions(monkeypatch):
    """Regions from 1 cycle up and at most 64 (small cases have short gaps; short regions also exercise the
    merge across many region boundaries and the shard buffers' limits)."""
    monkeypatch.setattr(threads, "REGION_MIN", 1)
    monkeypatch.setattr(threads, "REGION_MAX", 64)


@pytest.mark.parametrize("chunk", range(2))
def test_threads_give_bit_identical_results(short_regions, chunk):
    regions = cycles = 0
    for seed in range(chunk * 12, chunk * 12 + 12):
        case = _multi_case(seed)
        driver = seed % 2 == 1
        one, _ = _run(case, 1, driver)
        for n in (2, 3):
            many, ms = _run(case, n, driver)
            _assert_same(seed, one, many, n)
            regions += ms.sync["regions"]
            cycles += ms.sync["region_cycles"]
    # the comparison means something only if shards did run in parallel regions
    assert regions >= 20 and cycles >= 200, f"only {regions} parallel regions ({cycles} cycles) in 12 cases"


def test_threads_default_and_validation(monkeypatch):
    spec = _spec("HBM2_2Gbps_PC", (("org.channels", 4),))
    assert MemorySystem(spec).threads == 1                     # the default: one thread (docs/performance.md)
    monkeypatch.setattr(threads, "_DEFAULT", [None])
    assert MemorySystem(spec).threads == min(4, threads.cores())
    threads.set_threads(3)
    assert MemorySystem(spec).threads == 3
    assert MemorySystem(spec, threads=8).threads == 4          # never more threads than channels
    assert MemorySystem(spec, threads=1).threads == 1
    for bad in (0, -2, 1.5, "2", True):
        with pytest.raises(ConfigError, match="threads"):
            threads.set_threads(bad)


def test_completion_inside_a_gap_stops_every_thread(short_regions):
    """A tagged request completes while other channels are mid-work: advance() stops at exactly its done
    cycle with every thread count (a region never runs past a completion one of its shards causes)."""
    spec = _spec("HBM2_2Gbps_PC", (("org.channels", 4),))
    got = []
    for n in (1, 2, 4):
        ms = MemorySystem(spec, {"refresh": "allbank"}, threads=n)
        port = ms.add_port(width=4)
        n = 64
        rng = np.random.default_rng(3)
        ch = rng.integers(0, 4, n)
        ms.enqueue_requests(port, ch, ch * spec.banks_per_channel + rng.integers(0, 8, n), rng.integers(0, 9, n),
                            rng.integers(0, 8, n), 0, 0, np.where(np.arange(n) % 7 == 0, np.arange(n), -1))
        seen = []
        while True:
            st = ms.advance()
            seen.append((st, ms.clock, tuple(ms.drain())))
            if st != ST_COMPLETION:
                break
        got.append(seen)
    assert got[0] == got[1] == got[2], f"stops differ: {got[0][:3]} / {got[1][:3]} / {got[2][:3]}"
    assert len(got[0]) > 5, f"only {len(got[0])} stops"


def test_cli_threads_flag(monkeypatch, tmp_path, capsys):
    """`archsim trace --threads N`: the same results for 1 and 2 threads; a bad N is a one-line error, exit 2."""
    import json

    from archsim.cli import main

    monkeypatch.setattr(threads, "_DEFAULT", [1])
    out = []
    for n in (1, 2):
        path = tmp_path / f"t{n}.json"
        assert main(["trace", "synthetic:random:300", "--preset", "HBM2_2Gbps_PC", "--threads", str(n),
                     "--json", str(path), "--quiet"]) == 0
        assert threads._DEFAULT[0] == n
        out.append(json.loads(path.read_text())["stats"])
    keep = [k for k in out[0] if not k.endswith("_s") and "wall" not in k and "per_s" not in k]
    assert {k: out[0][k] for k in keep} == {k: out[1][k] for k in keep}, "stats differ between 1 and 2 threads"
    assert main(["trace", "synthetic:random:10", "--threads", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--threads" in err[0] and ">= 1" in err[0], err


def test_systems_end_to_end_identical(monkeypatch):
    """PIM-GPT (streams, completion groups on the event loop) and T3 (DMA / NMC ports and completions) give the
    same results with 2 threads as with 1, and their 2-thread runs did run parallel regions."""
    import json

    from archsim.systems.pimgpt.system import run_pimgpt
    from archsim.systems.t3.params import load_params
    from archsim.systems.t3.shapes import sublayer_shape
    from archsim.systems.t3.sim import simulate_sublayer
    from archsim.workload.spec import load_model

    def pimgpt():
        s = run_pimgpt("gpt2-small", tokens=2, baselines=[]).stats
        return {k: v for k, v in s.items() if "wall" not in k and not k.startswith("sim_")}

    def t3_run():
        run = simulate_sublayer(load_params(), sublayer_shape(load_model("t-nlg"), "fc2_fwd", 8, 64), 8,
                                   "t3", devices="one")
        return {"sublayer_s": run.sublayer_s, "gemm": run.gemm_cycles, "rs_end": run.rs_end_cycles,
                "log": [int(ms.S.n_log[0]) for ms in run.memories],
                "counts": [ms.S.cmd_count.tolist() for ms in run.memories]}

    monkeypatch.setattr(threads, "_DEFAULT", [1])
    for name, fn in (("pimgpt", pimgpt), ("t3", t3_run)):
        got = []
        for n in (1, 2):
            threads.set_threads(n)
            before = threads.TOTALS["regions"]
            got.append(json.dumps(fn(), sort_keys=True, default=str))
            regions = threads.TOTALS["regions"] - before
        assert got[0] == got[1], f"{name}: results differ between 1 and 2 threads"
        assert regions > 0, f"{name}: no parallel region ran with 2 threads"
