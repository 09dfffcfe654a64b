"""Stimulus and golden model for rtl/dual_rowbuf_arbiter.v.

The golden model is the simulator itself: `engine_log` runs a memory request stream and a PIM command
stream through archsim.engine.memory.MemorySystem on one channel of the NeuPIMs device, configured as the
RTL block is built (`arbiter_engine`): sources [pim: stream, mem: rw], read and write queues of one entry,
open row policy, all-bank refresh, arbitration `priority` (dual) or `blocked` (single buffer). It returns the
command log as (cycle, bus, command, bank, source, row) tuples: bank is the lowest bank of the target, row
the opened row for opens (else -1), source "pim", "mem" or "refresh".

`check_scope` refuses, before anything runs, what the RTL does not implement (issue #10).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from archsim.dram.spec import load_spec
from archsim.dram.verilog import arbiter_refusal
from archsim.engine.channel import SEG_END, SEG_START

#: mode -> (preset, arbitration, RTL parameter BLOCKED, include subdirectory)
MODES = {"dual": ("NeuPIMs_HBM2_Dual", "priority", 0, ""),
         "blocked": ("NeuPIMs_HBM2_Single", "blocked", 1, "neupims_single")}
#: the memory controller the RTL implements
CONTROLLER = {"refresh": "allbank", "read_queue": 1, "write_queue": 1, "row_policy": "open", "active_buffer": False}
SOURCES = [{"name": "pim", "kind": "stream"}, {"name": "mem", "kind": "rw"}]


def arbiter_spec(mode: str, timing: dict[str, int] | None = None):
    overrides = {"org.channels": 1, **{f"timing.{k}": v for k, v in (timing or {}).items()}}
    return load_spec(MODES[mode][0], overrides=overrides)


@dataclass
class Workload:
    """Memory requests (arrive, write, bank, row) and a PIM stream (at, cmd, bank, row, flags, est)."""

    requests: list[tuple[int, int, int, int]] = field(default_factory=list)
    stream: list[tuple[int, int, int, int, int, int]] = field(default_factory=list)


def check_scope(spec, controller: dict, arbitration: str, work: Workload, starvation_cap: int = 0,
                stream_refresh: str = "split") -> None:
    """NotImplementedError for any configuration or input the RTL block does not implement (issue #10)."""
    def no(what: str) -> None:
        raise NotImplementedError(f"dual_rowbuf_arbiter: {what} is not implemented in the RTL (issue #10)")

    ctrl = {**CONTROLLER, **controller}
    if ctrl["refresh"] not in ("allbank", "none"):
        no(f"refresh {ctrl['refresh']!r} (only all-bank refresh)")
    if ctrl["read_queue"] != 1 or ctrl["write_queue"] != 1:
        no(f"read/write queues of {ctrl['read_queue']}/{ctrl['write_queue']} entries (only 1/1)")
    if ctrl["row_policy"] != "open":
        no(f"row policy {ctrl['row_policy']!r}")
    if ctrl["active_buffer"]:
        no("active_buffer")
    if arbitration not in ("priority", "blocked"):
        no(f"arbitration {arbitration!r}")
    if starvation_cap:
        no("a starvation cap")
    if stream_refresh != "split":
        no(f"stream_refresh {stream_refresh!r}")
    if spec.command_bus != "dual" or len(spec.row_buffers) > 2:
        no(f"{spec.name} ({spec.command_bus} command bus, {len(spec.row_buffers)} row buffers)")
    if any(r[1] not in (0, 1) for r in work.requests):
        no("rmw requests")
    for _, c, _, row, _, _ in work.stream:
        eff = spec.commands[c].effect
        why = arbiter_refusal(spec, c)
        if why is not None:
            no(f"{why} in the PIM stream")
        if eff in ("open", "compute", "read", "write") and row < 0:
            no(f"a stream {spec.command_names[c]} without a row")
    ats = [s[0] for s in work.stream]
    arr = [r[0] for r in work.requests]
    assert ats == sorted(ats) and arr == sorted(arr), "arrival cycles must be non-decreasing"


def local_bank(spec, df) -> np.ndarray:
    """The channel-local bank id of the logged target (the lowest bank of the target)."""
    c = spec.counts   # (channel, pseudochannel, rank, bankgroup, bank)
    return ((df["pseudochannel"].to_numpy() * c[2] + df["rank"].to_numpy()) * c[3]
            + df["bankgroup"].to_numpy()) * c[4] + df["bank"].to_numpy()


def engine_log(spec, mode: str, work: Workload) -> list[tuple]:
    """The channel engine's command log for `work`, as the RTL's bench records it."""
    from archsim.engine.memory import MemorySystem

    arbitration = MODES[mode][1]
    check_scope(spec, CONTROLLER, arbitration, work)
    ms = MemorySystem(spec, CONTROLLER, sources=SOURCES, arbitration=arbitration, log=True,
                      requests=len(work.requests) + 16, stream_capacity=len(work.stream) + 16)
    port = ms.add_port("mem")
    if work.requests:
        r = np.array(work.requests, dtype=np.int64)
        ms.enqueue_requests(port, 0, r[:, 2], r[:, 3], 0, kind=r[:, 1], arrive=r[:, 0])
    if work.stream:
        s = np.array(work.stream, dtype=np.int64)
        ms.enqueue_stream("pim", 0, s[:, 1], s[:, 2], row=s[:, 3], column=0, flags=s[:, 4], est=s[:, 5],
                          at=s[:, 0])
    ms.run()
    df = ms.command_log()
    names = list(spec.command_names)
    banks = local_bank(spec, df)
    out = []
    # walk the stream: a logged pim command is the next stream command, or a close or a restore (an open)
    # the engine put first
    nxt = 0
    for cyc, cmd, b, row, src in zip(df["cycle"], df["command"], banks, df["row"], df["source"], strict=True):
        c = names.index(cmd)
        eff = spec.commands[c].effect
        if src == "pim":
            s = work.stream[nxt] if nxt < len(work.stream) else None
            if s is not None and s[1] == c and int(spec_rep(spec, c, s[2])) == int(b):
                nxt += 1
            else:
                assert eff in ("close", "open"), f"stream command {cmd} at {cyc} is neither the next one nor a close/restore"
        bus = "col" if spec.commands[c].bus == "column" else "row"
        out.append((int(cyc), bus, cmd, int(b), src, int(row) if eff == "open" else -1))
    assert nxt == len(work.stream), "the engine did not issue the whole stream"
    return out


def spec_rep(spec, c: int, bank: int) -> int:
    """Lowest bank of the target of command c holding `bank`."""
    from archsim.engine.memory import lowered

    return int(lowered(spec).tables.rep[c, bank])


# ---- stimulus -----------------------------------------------------------------------------------------------
def pim_segment(spec, rng: random.Random, rows: list[int], staging_rows: list[int]) -> list[tuple]:
    """One GEMV as NeuPIMs' attention compiler shapes it (archsim/systems/neupims/compiler.py): optionally a GWRITE
    (ACT, GWRITE, PRE on a staging bank), then rounds of G_ACT on every bank group (random order) with one
    row, k COMPs and a READRES, PIM_PRE between row sets and at the end. (cmd, bank, row, flags) tuples."""
    C = spec.cmd
    per_group = spec.counts[4]
    groups = list(range(0, spec.banks_per_channel, per_group))
    out: list[list[int]] = []
    if rng.random() < 0.5:
        b = rng.randrange(spec.banks_per_channel)
        r = rng.choice(staging_rows)
        out += [[C("ACT"), b, r, 0], [C("GWRITE"), b, r, 0], [C("PRE"), b, -1, 0]]
    for _ in range(rng.choice([1, 1, 2, 3])):
        row = rng.choice(rows)
        order = groups[:]
        rng.shuffle(order)
        out += [[C("G_ACT"), g + rng.randrange(per_group), row, 0] for g in order]
        for _ in range(rng.choice([1, 2, 3])):
            out += [[C("COMP"), rng.randrange(spec.banks_per_channel), row, 0]
                    for _ in range(rng.choice([1, 2, 4, 8]))]
            out.append([C("READRES"), 0, row, 0])
        out.append([C("PIM_PRE"), 0, -1, 0])
    out[0][3] |= SEG_START
    out[-1][3] |= SEG_END
    return [tuple(x) for x in out]


def random_workload(spec, seed: int, n_stream: int = 1000, n_requests: int = 450) -> Workload:
    """Seeded mix: PIM segments arriving in bursts with gaps, and memory reads/writes to random banks whose
    rows overlap the PIM rows (so the exclusivity rules and the stream's closes are exercised)."""
    rng = random.Random(seed)
    rows = [3, 5, 7, 11]
    staging = [100, 101]
    w = Workload()
    t = 0
    while len(w.stream) < n_stream:
        t += rng.choice([0, 0, 20, 60, 200, 500])
        for cmd, bank, row, flags in pim_segment(spec, rng, rows, staging):
            w.stream.append((t, cmd, bank, row, flags, 0))
    horizon = t + 2000
    t = 0
    for _ in range(n_requests):
        t += rng.choice([0, 0, 1, 3, 10, 40]) if rng.random() < 0.9 else rng.randrange(horizon // 20)
        row = rng.choice(rows + staging + [20, 21, 22]) if rng.random() < 0.8 else rng.randrange(spec.rows)
        w.requests.append((t, int(rng.random() < 0.35), rng.randrange(spec.banks_per_channel), row))
    return w


def attention_workload(spec, seed: int = 7, contexts=(40, 70), heads: int = 2) -> tuple[Workload, str]:
    """A NeuPIMs attention step's PIM streams (archsim.systems.neupims.compiler.AttentionCompiler.decode_step:
    logits then attend) replayed with a memory request stream (the NPU's DMA: reads and writes of random
    rows) arriving over the same time."""
    from archsim.systems.neupims.compiler import AttentionCompiler

    comp = AttentionCompiler(spec, d_head=64)
    lg, at = comp.decode_step(list(contexts), heads)
    w = Workload()
    for s in (lg, at):
        for cmd, bank, row, flags, est in zip(*s.arrays(), strict=True):
            w.stream.append((0, int(cmd), int(bank), int(row), int(flags), int(est)))
    rng = random.Random(seed)
    t = 0
    kv_rows = sorted({r for _, _, _, r, _, _ in w.stream if r >= 0})
    for _ in range(400):
        t += rng.choice([0, 1, 2, 5, 20])
        row = rng.choice(kv_rows) if rng.random() < 0.3 else rng.randrange(spec.rows)
        w.requests.append((t, int(rng.random() < 0.3), rng.randrange(spec.banks_per_channel), row))
    return w, f"contexts {list(contexts)}, {heads} heads, d_head 64"
