"""Random small channel-engine cases that both engines consume (archsim.engine.memory.MemorySystem and
archsim.engine.reference.ReferenceController share one API): `random_case(seed)` draws a case as plain data,
`build(engine_cls, case)` makes an engine with it, `run_case` runs it and returns what the engines must agree
on. Used by tests/test_engine_vs_reference.py and tests/test_engine_reference.py.
"""
from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

import numpy as np

from archsim.dram import spec as spec_mod
from archsim.dram.controller import ControllerConfig
from archsim.dram.spec import DramSpec, load_spec

SEG_START, SEG_END = 1, 2
ARBITRATIONS = ("frfcfs", "priority", "blocked", "threshold")

# (preset, overrides) the generator draws from; one channel keeps cases small (channels are independent)
VARIANTS: list[tuple[str, tuple[tuple[str, Any], ...]]] = [
    ("DDR4_3200AA_x8_8Gb", ()),
    ("DDR4_3200AA_x8_8Gb", (("org.ranks", 2),)),
    ("HBM2_2Gbps_PC", (("org.channels", 1),)),
    ("HBM3_6400Mbps", (("org.channels", 1),)),
    ("GDDR6_AiM_16Gbps", (("org.channels", 1),)),
    ("HBM2_2Gbps_DualRB", (("org.channels", 1),)),
    ("HBM2_2Gbps_NMC", (("org.channels", 1),)),     # rmw requests issue the NMC_ADD update command
    # issue 39 (pinned by `variant=`; the unpinned draw keeps to the variants above, so every earlier seed's
    # case is unchanged): two-cycle commands on a single bus (DDR5, 2 ranks: its rank-switch rows too), on dual
    # buses without bank groups (GDDR7), and HBM4's pseudo-channel-wide rows
    ("DDR5_4800AN_x8_16Gb", (("org.ranks", 2),)),
    ("GDDR7_28Gbps_16Gb", (("org.channels", 1),)),
    ("HBM4_8000Mbps_32Gb_8Hi", (("org.channels", 1),)),
    # LPDDR5's split activate: a two-cycle ACT whose rows run from its first cycle (`timings_from: first`)
    ("LPDDR5_6400_x16_16Gb", ()),
    # DDR5 with refresh management: an RFM every few activates of a bank (rfm_threshold drawn small), 2 ranks
    ("DDR5_4800AN_x8_16Gb_RFM", (("org.ranks", 2),)),
]
DRAWN = 7       # the variants an unpinned case draws from


_yaml_cache: dict[str, Any] = {}


def _cached_load_yaml(path: Any) -> Any:
    key = str(path)
    if key not in _yaml_cache:
        _yaml_cache[key] = _real_load_yaml(path)
    return copy.deepcopy(_yaml_cache[key])


_real_load_yaml = spec_mod.load_yaml


@lru_cache(maxsize=1024)
def _spec(preset: str, overrides: tuple[tuple[str, Any], ...]) -> DramSpec:
    # thousands of cases draw their own timing overrides: parse each YAML file once, not once per case
    spec_mod.load_yaml = _cached_load_yaml
    try:
        return load_spec(preset, overrides=dict(overrides))
    finally:
        spec_mod.load_yaml = _real_load_yaml


def case_spec(case: dict[str, Any]) -> DramSpec:
    return _spec(case["preset"], tuple(sorted(case["overrides"].items())))


def _stream(rng: np.random.Generator, spec: DramSpec, name: str, rows: list[int],
            dma_bank: int | None = None) -> dict[str, np.ndarray]:
    """A well-formed random stream for one channel of `spec`: per segment an open, column work, drain, close."""
    cmd = spec.cmd
    banks_ch = spec.banks_per_channel
    out: list[tuple[int, int, int, int, int, int, int]] = []   # cmd, bank, row, column, flags, est, tag
    tag = 10_000
    for _ in range(int(rng.integers(1, 4))):
        r = int(rng.choice(rows))
        k = int(rng.integers(1, 6))
        seg: list[tuple[int, int, int, int]] = []
        if spec.standard == "GDDR6-AiM":
            if rng.random() < 0.5:
                seg.append((cmd("WRGB"), 0, -1, int(rng.integers(0, 4))))
            seg.append((cmd("ACTAB"), 0, r, -1))
            for i in range(k):
                op = "MACAB" if rng.random() < 0.8 else str(rng.choice(["EWMUL", "EWADD"]))
                seg.append((cmd(op), 0, r, i % spec.columns))
            if rng.random() < 0.3:
                seg.append((cmd("AF"), 0, -1, -1))
            seg.append((cmd("PREAB"), 0, -1, -1))
            seg += [(cmd("RDMAC"), 0, -1, j) for j in range(2)]
        elif spec.standard == "HBM2-DualRB":
            seg += [(cmd("PACT"), b, r, -1) for b in range(banks_ch)]     # COMP works on every bank's pim row
            seg += [(cmd("COMP"), 0, r, i % spec.columns) for i in range(k)]
            seg.append((cmd("RDRES"), 0, -1, 0))
            if rng.random() < 0.5:
                seg.append((cmd("PPREA"), 0, -1, -1))
            else:
                seg += [(cmd("PPRE"), b, -1, -1) for b in range(banks_ch)]
        else:                                   # a DMA-like stream of plain commands in one bank
            b = int(rng.integers(0, min(banks_ch, 8))) if dma_bank is None else dma_bank
            seg.append((cmd("ACT"), b, r, -1))
            for i in range(k):
                u = rng.random()
                op = "RD" if u < 0.6 else "WR"
                if spec.standard == "HBM2-NMC":        # the update command in a stream too
                    op = "RD" if u < 0.4 else "WR" if u < 0.7 else "NMC_ADD"
                seg.append((cmd(op), b, r, i % spec.columns))
            seg.append((cmd("PRE"), b, -1, -1))
        use_seg = rng.random() < 0.6
        for j, (c, b, row, col) in enumerate(seg):
            flags = est = 0
            if use_seg and j == 0:
                flags, est = SEG_START, int(rng.integers(0, 400))
            if use_seg and j == len(seg) - 1:
                flags |= SEG_END
            t = -1
            if spec.commands[c].effect in ("transfer", "read") and rng.random() < 0.5:
                t, tag = tag, tag + 1
            out.append((c, b, row, col, flags, est, t))
    arr = np.array(out, dtype=np.int64)
    # enqueued in one to three batches, at increasing cycles
    at = np.zeros(len(arr), dtype=np.int64)
    cuts = sorted(rng.integers(0, len(arr), int(rng.integers(0, 3))).tolist())
    t_at = 0
    for c in cuts:
        t_at += int(rng.integers(0, 400))
        at[c:] = t_at
    return {"source": name, "channel": np.zeros(len(arr), np.int64), "cmd": arr[:, 0], "bank": arr[:, 1],
            "row": arr[:, 2], "column": arr[:, 3], "flags": arr[:, 4], "est": arr[:, 5], "tag": arr[:, 6], "at": at}


def random_case(seed: int, variant: int | None = None, refresh: str | None = None,
                n_rw: int | None = None, n_stream: int | None = None) -> dict[str, Any]:
    """A small random case (plain data). Optional arguments pin the preset variant, the refresh mode and the
    number of rw / stream sources."""
    rng = np.random.default_rng(seed)
    v = int(rng.integers(DRAWN)) if variant is None else variant
    preset, ov = VARIANTS[v]
    overrides = dict(ov)
    modes = _spec(preset, ov).refresh_modes          # (DDR4 has no per-bank refresh)
    refresh = refresh or str(rng.choice(list(modes)))
    if refresh not in modes:
        refresh = "allbank"
    if refresh != "none":
        # short refresh intervals so refresh happens in small cases (nRFC shortened to fit several in)
        overrides["timing.nRFC"] = int(rng.integers(60, 150))
        overrides["timing.nRFCpb"] = int(rng.integers(20, 50))
        # an all-bank PIM segment needs ~250 cycles between refreshes to restore its row and make progress;
        # per-bank refresh interrupts every nREFI / banks_per_rank
        base = _spec(preset, ov)
        free = (300, 600) if base.standard in ("GDDR6-AiM", "HBM2-DualRB") else (100, 450)
        if refresh == "allbank":
            overrides["timing.nREFI"] = overrides["timing.nRFC"] + int(rng.integers(*free))
        else:
            overrides["timing.nREFI"] = base.banks_per_rank * (overrides["timing.nRFCpb"] + int(rng.integers(*free)))
    spec = _spec(preset, tuple(sorted(overrides.items())))
    while True:
        q = int(rng.integers(2, 9))
        hi, lo = float(rng.choice([0.5, 0.75, 0.8, 1.0])), float(rng.choice([0.0, 0.2, 0.25]))
        controller = {"row_policy": str(rng.choice(["open", "closed"])), "refresh": refresh,
                      "read_queue": int(rng.integers(2, 9)), "write_queue": q,
                      "write_high_watermark": hi, "write_low_watermark": lo}
        try:
            ControllerConfig.from_dict(controller)
            break
        except Exception:
            continue
    controller["active_buffer"] = bool(rng.random() < 0.3)
    # pinned requests leave their queue (Ramulator 2.1's separate active buffer) in some of the cases with the
    # active buffer; decided from draws already made, so the other cases stay as they were
    controller["pinned_leave_queue"] = controller["active_buffer"] and controller["read_queue"] % 2 == 0
    if spec.rfm_command >= 0:
        # refresh management every few activates, with a short nRFM, so that RFMs happen in small cases (drawn
        # after every earlier draw: the other variants' cases are unchanged)
        controller["rfm_threshold"] = int(rng.integers(2, 7))
        overrides["timing.nRFM"] = int(rng.integers(30, 120))
    arbitration = str(rng.choice(ARBITRATIONS))
    n_rw = int(rng.integers(0, 3)) if n_rw is None else n_rw
    n_stream = int(rng.integers(0, 2)) if n_stream is None else n_stream
    if n_rw + n_stream == 0:
        n_rw = 1
    all_bank_stream = spec.standard in ("GDDR6-AiM", "HBM2-DualRB")
    if arbitration == "blocked" and n_stream and all_bank_stream:
        # `blocked` lets only one source issue: an rw source waiting for a row the (inactive) stream opened
        # or reserved would wait forever, so a stream over every bank runs alone there
        n_rw = 0
    kinds = ["rw"] * n_rw + ["stream"] * n_stream
    rng.shuffle(kinds)
    if arbitration == "threshold" and "rw" in kinds:
        # the threshold gates on the first source's queued requests: make that an rw source
        kinds.remove("rw")
        kinds.insert(0, "rw")
    elif arbitration == "threshold":
        arbitration = "priority"
    sources = [{"name": f"{k}{i}", "kind": k} for i, k in enumerate(kinds)]
    # Each rw source gets its own banks: an rw source never precharges a row another source opened
    # (section 3.2), so two rw sources sharing a bank can wait for each other forever.
    banks_ch = spec.banks_per_channel
    pools = rng.permutation(banks_ch)
    rows = list(range(int(rng.integers(1, 5))))
    ports, requests = [], []
    # read / write / rmw mix; the NMC standard issues an rmw as its update command: more of them there
    rmw_p = [0.35, 0.25, 0.4] if spec.standard == "HBM2-NMC" else [0.5, 0.35, 0.15]
    for i, s in enumerate(sources):
        if s["kind"] != "rw":
            continue
        bank_pool = pools[4 * i: 4 * i + int(rng.integers(1, 5))]
        for _ in range(int(rng.integers(1, 3))):
            ports.append({"source": s["name"], "width": int(rng.integers(1, 3))})
            n = int(rng.integers(2, 31 if len(ports) == 1 else 16))
            arrive = np.cumsum(rng.integers(0, 25, n)) - 1
            requests.append({"port": len(ports) - 1, "channel": np.zeros(n, np.int64),
                             "bank": rng.choice(bank_pool, n).astype(np.int64),
                             "row": rng.choice(rows, n).astype(np.int64),
                             "column": rng.integers(0, 4, n).astype(np.int64),
                             "kind": rng.choice(3, n, p=rmw_p).astype(np.int64),
                             "arrive": arrive.astype(np.int64),
                             "tag": np.where(rng.random(n) < 0.5, np.arange(n) + 100 * len(ports), -1).astype(np.int64)})
    # under `blocked` a plain-command stream gets a bank of its own (see above)
    dma_bank = int(pools[-1]) if arbitration == "blocked" else None
    streams = [_stream(rng, spec, s["name"], list(range(int(rng.integers(1, 6)))), dma_bank)
               for s in sources if s["kind"] == "stream"]
    # `threshold` without promotion can hold the other sources back while the first one waits for them
    cap = int(rng.choice([0, 0, 30, 200])) if arbitration != "threshold" else int(rng.choice([30, 200]))
    return {"seed": seed, "preset": preset, "overrides": overrides, "controller": controller, "sources": sources,
            "arbitration": arbitration, "starvation_cap": cap, "threshold": int(rng.integers(1, 5)), "stream_refresh": str(rng.choice(["split", "wait"])),
            "alu_latency": int(rng.integers(1, 7)), "ports": ports, "requests": requests, "streams": streams}


def build(engine_cls: Any, case: dict[str, Any], spec: DramSpec | None = None) -> Any:
    """An engine loaded with the case (`spec` replaces the case's spec, e.g. a mutated one)."""
    eng = engine_cls(spec or case_spec(case), controller=dict(case["controller"]), sources=case["sources"],
                     arbitration=case["arbitration"], starvation_cap=case["starvation_cap"],
                     threshold=case["threshold"], stream_refresh=case["stream_refresh"],
                     alu_latency=case["alu_latency"], log=True)
    ports = [eng.add_port(source=p["source"], width=p["width"]) for p in case["ports"]]
    for r in case["requests"]:
        eng.enqueue_requests(ports[r["port"]], r["channel"], r["bank"], r["row"], r["column"], r["kind"],
                             r["arrive"], r["tag"])
    for s in case["streams"]:
        # one stream is for one channel: pass it as a number
        channel = int(s["channel"][0])
        assert (s["channel"] == channel).all()
        for at in np.unique(s["at"]).tolist():        # one call per enqueue cycle (`at` is a number)
            k = s["at"] == at
            eng.enqueue_stream(s["source"], channel, s["cmd"][k], s["bank"][k], s["row"][k], s["column"][k],
                               flags=s["flags"][k], est=s["est"][k], tag=s["tag"][k], at=int(at))
    return eng


def run_case(engine_cls: Any, case: dict[str, Any], spec: DramSpec | None = None,
             max_cycles: int = 200_000) -> dict[str, Any]:
    eng = build(engine_cls, case, spec)
    try:
        eng.run(max_cycles=max_cycles)
    except TypeError:           # an engine whose run() takes no limit
        eng.run()
    log = eng.command_log().reset_index(drop=True)
    return {"log": log, "done": np.asarray(eng.request_done), "completions": list(eng.completions()),
            "class": np.asarray(eng.request_class), "kernel": getattr(eng, "kernel", None)}


def describe(case: dict[str, Any]) -> str:
    n_req = sum(len(r["bank"]) for r in case["requests"])
    n_str = sum(len(s["cmd"]) for s in case["streams"])
    return (f"seed {case['seed']}: {case['preset']} {case['overrides']} {case['controller']} "
            f"sources={[s['name'] for s in case['sources']]} {case['arbitration']} cap={case['starvation_cap']} "
            f"threshold={case['threshold']} {case['stream_refresh']} alu={case['alu_latency']} "
            f"{n_req} requests, {n_str} stream commands")
