"""Stimulus and golden model for rtl/pim_cmd_sequencer.v.

The golden model is the simulator itself: `engine_cycles` runs a stream through
archsim.engine.memory.MemorySystem (one channel, one `stream` source, refresh off, log on) and returns the
issue cycle of every command from its command log, after checking that the log holds exactly the stream's
commands (a well-formed stream: the engine inserted no close or restore, docs/channel-engine.md 3.3).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from archsim.dram.spec import load_spec
from archsim.dram.verilog import TIMING_PRESET


def sequencer_spec(timing: dict[str, int] | None = None):
    overrides: dict[str, Any] = {"org.channels": 1}
    for k, v in (timing or {}).items():
        overrides[f"timing.{k}"] = v
    return load_spec(TIMING_PRESET, overrides=overrides)


def engine_cycles(spec, cmd, bank, row=-1, at=None) -> list[int]:
    """Issue cycle of every command of the stream, from the channel engine's command log."""
    from archsim.engine.memory import MemorySystem

    cmd = np.asarray(cmd, dtype=np.int64)
    bank = np.asarray(bank, dtype=np.int64)
    ms = MemorySystem(spec, {"refresh": "none"}, sources=[{"name": "pim", "kind": "stream"}], log=True,
                      stream_capacity=len(cmd) + 16)
    ms.enqueue_stream("pim", 0, cmd, bank, row=row, column=0, at=at)
    ms.run()
    log = ms.command_log()
    names = np.array(spec.command_names)
    got = log["command"].to_numpy()
    assert len(got) == len(cmd) and (got == names[cmd]).all(), (
        "the engine's log is not exactly the stream (it inserted closes/restores: malformed stream)")
    assert (log["source"] == "pim").all()
    narrow = np.array([spec.commands[c].scope == len(spec.levels) - 1 for c in cmd])
    # the log splits the bank id into address fields (bankgroup, bank within the group)
    logged = log["bankgroup"].to_numpy() * spec.counts[-1] + log["bank"].to_numpy()
    assert (logged[narrow] == bank[narrow]).all()
    return [int(c) for c in log["cycle"]]


def random_stream(spec, rng: random.Random, n: int) -> tuple[list[int], list[int], list[int]]:
    """A well-formed random stream of about n commands: (cmd, bank, row).

    Every open finds its banks closed, every column / compute command finds its bank(s) open at the row it
    names (row -1 for an all-bank compute over banks opened at different rows: the engine then only needs
    them open), so the engine issues exactly these commands. Bursts of one command keep timing tight."""
    C = spec.cmd
    nb = spec.banks_per_channel
    open_row = [-1] * nb
    cmds: list[int] = []
    banks: list[int] = []
    rows: list[int] = []

    def add(name: str, b: int = 0, r: int = -1) -> None:
        cmds.append(C(name))
        banks.append(b)
        rows.append(r)

    while len(cmds) < n:
        opened = [b for b in range(nb) if open_row[b] >= 0]
        closed = [b for b in range(nb) if open_row[b] < 0]
        menu: list[tuple[float, str]] = [(1.5, "WRGB"), (1.0, "RDMAC"), (0.4, "AF"), (0.2, "PRE_closed")]
        if closed:
            menu += [(4.0, "ACT"), (0.3, "REFpb")]
        if opened:
            menu += [(4.0, "RD"), (3.0, "WR"), (0.8, "RDA"), (0.8, "WRA"), (2.0, "PRE"), (0.4, "PREA"),
                     (0.6, "PREAB")]
        if not opened:
            menu += [(2.5, "ACTAB"), (0.3, "REFab")]
        if len(opened) == nb:
            menu += [(5.0, "MACAB"), (1.0, "EWMUL"), (1.0, "EWADD")]
        what = rng.choices([m for _, m in menu], weights=[w for w, _ in menu])[0]
        burst = rng.choice([1, 1, 1, 2, 3, 4, 8])
        for _ in range(burst):
            opened = [b for b in range(nb) if open_row[b] >= 0]
            closed = [b for b in range(nb) if open_row[b] < 0]
            if what in ("WRGB", "RDMAC", "AF"):
                add(what)
            elif what == "PRE_closed":
                if closed:
                    add("PRE", rng.choice(closed))
            elif what == "ACT" and closed:
                b = rng.choice(closed)
                open_row[b] = rng.randrange(1024)
                add("ACT", b, open_row[b])
            elif what == "REFpb" and closed:
                add("REFpb", rng.choice(closed))
            elif what in ("RD", "WR", "RDA", "WRA") and opened:
                b = rng.choice(opened)
                add(what, b, open_row[b])
                if what in ("RDA", "WRA"):
                    open_row[b] = -1
            elif what == "PRE" and opened:
                b = rng.choice(opened)
                add("PRE", b)
                open_row[b] = -1
            elif what in ("PREA", "PREAB") and opened:
                add(what)
                open_row = [-1] * nb
            elif what == "ACTAB" and not opened:
                r = rng.randrange(1024)
                add("ACTAB", 0, r)
                open_row = [r] * nb
            elif what == "REFab" and not opened:
                add("REFab")
            elif what in ("MACAB", "EWMUL", "EWADD") and len(opened) == nb:
                add(what, 0, open_row[0] if len(set(open_row)) == 1 else -1)
            else:
                break
    return cmds[:n], banks[:n], rows[:n]


def pimgpt_stream(limit: int = 3000) -> tuple[list[int], list[int], list[int], str]:
    """Channel 0's command streams of GPT-2 small's first layer in PIM-GPT (archsim.systems.pimgpt.compiler):
    the QKV GEMV, this token's K/V writes (ACT/WR/PRE, ACTAB/WR/PREAB), the attention score and context
    programs, the output projection and the FFN GEMVs, concatenated in op order and truncated to `limit`
    commands (a truncated stream is still well formed: it only ends with rows open)."""
    from archsim.systems.pimgpt.compiler import layout_model, load_policy
    from archsim.workload import load_model

    spec = load_spec(TIMING_PRESET)
    lay = layout_model(load_model("gpt2-small"), spec, load_policy("pimgpt"))
    L0 = lay.layers[0]
    t = 5                       # decode step: the token's position (context length t + 1)
    parts = [("qkv", L0["qkv"].program(0)), ("kv", L0["attn"].kv_program(0, t)),
             ("score", L0["attn"].score_program(0, t + 1)), ("context", L0["attn"].context_program(0, t + 1)),
             ("attn_out", L0["attn_out"].program(0)), ("ffn1", L0["ffn1"].program(0)),
             ("ffn2", L0["ffn2"].program(0))]
    cmds: list[int] = []
    banks: list[int] = []
    rows: list[int] = []
    used = []
    for name, s in parts:
        if len(cmds) >= limit:
            break
        used.append(name)
        cmds += [int(x) for x in s.cmd]
        banks += [int(x) % spec.banks_per_channel for x in np.maximum(s.bank, 0)]
        rows += [int(x) for x in s.row]
    return cmds[:limit], banks[:limit], rows[:limit], "+".join(used)
