"""cocotb bench for rtl/dual_rowbuf_arbiter.v; the golden model is the channel engine's command log.

Run from pytest (tests/rtl/test_dual_rowbuf_arbiter.py) through the cocotb runner, with
tests/rtl/arb_harness.v as the top level: the harness feeds a case's requests and PIM stream to the block
cycle by cycle and logs its command buses (see its header for the cycle mapping), so no Python runs per
cycle. The pytest side builds the workloads and the engine's logs; ARCHSIM_TB_CASES is a JSON list of
{name, requests: [[arrive, write, bank, row]], stream: [[at, cmd, bank, row, flags, est]], cycles, names,
opens}. This bench writes each case's files, runs it (reset, start, wait for done), and writes the RTL's
command logs, in the engine's cycle numbering and format, to ARCHSIM_TB_RESULT.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge

PERIOD_NS = 10
SEG_END = 2


def write_case(folder: Path, i: int, case: dict) -> None:
    s = [(at << 32) | ((flags & SEG_END) and 1 << 31) | (max(row, 0) << 16) | (bank << 8) | cmd
         for at, cmd, bank, row, flags, _ in case["stream"]]
    r = [(arrive << 32) | (write << 31) | (row << 16) | (bank << 8) for arrive, write, bank, row in case["requests"]]
    for name, words in (("stream", s), ("reqs", r), ("info", [len(s), len(r), int(case["cycles"])])):
        (folder / f"case{i}_{name}.hex").write_text("".join(f"{w:016x}\n" for w in words) or "0\n")


def read_log(folder: Path, i: int, case: dict) -> dict:
    names, opens = case["names"], set(case["opens"])
    log = []
    end = None
    for line in (folder / f"case{i}_log.txt").read_text().splitlines():
        f = line.split()
        if f[0] == "END":
            end = [int(x) for x in f[1:]]
            continue
        e, col, cmd, bank, pim, row = (int(x) for x in f)
        name = names[cmd] if cmd < len(names) else f"?{cmd}"
        src = ("mem", "pim", "refresh")[pim]
        log.append([e, "col" if col else "row", name, bank, src, row if name in opens else -1])
    assert end is not None, f"case {i}: the harness did not finish its log"
    return {"name": case["name"], "log": log, "end_cycle": end[0], "popped": end[1], "accepted": end[2],
            "unsupported": end[3]}


@cocotb.test()
async def arbiter_matches_engine(dut) -> None:
    with open(os.environ["ARCHSIM_TB_CASES"]) as f:
        cases = json.load(f)
    folder = Path(os.environ["ARCHSIM_TB_DIR"])
    Clock(dut.clk, PERIOD_NS, unit="ns").start()
    results = []
    for i, case in enumerate(cases):
        write_case(folder, i, case)
        dut.start.value = 0
        dut.rst_n.value = 0
        dut.case_idx.value = i
        await ClockCycles(dut.clk, 3)
        await FallingEdge(dut.clk)
        dut.rst_n.value = 1
        dut.start.value = 1
        await RisingEdge(dut.done)
        res = read_log(folder, i, case)
        results.append(res)
        dut._log.info("%s: %d commands issued, %d stream commands, %d requests, last cycle %d", case["name"],
                      len(res["log"]), res["popped"], res["accepted"], res["end_cycle"])
    with open(os.environ["ARCHSIM_TB_RESULT"], "w") as f:
        json.dump(results, f)
