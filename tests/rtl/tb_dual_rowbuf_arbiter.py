"""cocotb bench for rtl/dual_rowbuf_arbiter.v; the golden model is the channel engine's command log.

Run from pytest (tests/rtl/test_dual_rowbuf_arbiter.py) through the cocotb runner. The pytest side builds
the workloads and runs the engine (no numba inside the simulator); this bench only drives the RTL and
records what it issues. ARCHSIM_TB_CASES: a JSON list of {name, requests: [[arrive, write, bank, row]],
stream: [[at, cmd, bank, row, flags, est]], cycles, names}; the result (the RTL's command log per case, in
the engine's cycle numbering) goes to ARCHSIM_TB_RESULT.

Cycle mapping (see the block's header): RTL cycle c (counted from the first cycle after reset) is the
engine's cycle c - 1. A request is presented (req_valid) from RTL cycle `arrive` on, so that it enters
the queue, like the engine's port intake, at the start of engine cycle >= arrive; the stream's head and
next command are presented while they have entered the engine's stream (at <= engine cycle). Inputs are
driven at the falling edge (mid-cycle) from the registered status of the previous cycle (pim_popped,
req_taken); an issue in RTL cycle c shows on the registered buses at the falling edge of cycle c + 1.
"""

from __future__ import annotations

import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge

PERIOD_NS = 10
SEG_END = 2


def _u(signal) -> int:
    value = signal.value
    return value.to_unsigned() if hasattr(value, "to_unsigned") else int(value)


class Driver:
    """Writes a DUT input only when its value changes (each write costs a simulator call)."""

    def __init__(self, dut):
        self.dut = dut
        self.last: dict[str, int] = {}

    def set(self, name: str, value: int) -> None:
        if self.last.get(name) != value:
            getattr(self.dut, name).value = value
            self.last[name] = value


async def _run_case(dut, case: dict) -> dict:
    names = case["names"]
    reqs = case["requests"]
    stream = case["stream"]
    cycles = int(case["cycles"])
    drv = Driver(dut)
    dut.rst_n.value = 0
    for n in ("req_valid", "req_write", "req_bank", "req_row", "pim_valid0", "pim_cmd0", "pim_bank0", "pim_row0",
              "pim_end0", "pim_valid1", "pim_cmd1", "pim_bank1", "pim_row1", "pim_end1"):
        drv.set(n, 0)
    await ClockCycles(dut.clk, 3)
    await FallingEdge(dut.clk)
    dut.rst_n.value = 1
    log: list[list] = []
    head = 0
    ri = 0
    unsupported = 0
    last_issue = -1
    c = 0
    while True:
        st = _u(dut.status)     # {unsupported, mem_busy, req_taken, pim_popped[1:0], row_valid, col_valid}
        busy = (st >> 5) & 1
        if c > 0 and st & 0x5f:
            # registered outputs: what issued in RTL cycle c - 1 = engine cycle c - 2
            e = c - 2
            if st & 1:
                log.append([e, "col", names[_u(dut.col_cmd)], _u(dut.col_bank), "pim" if _u(dut.col_pim) else "mem", -1])
                last_issue = e
            if st & 2:
                cmd = names[_u(dut.row_cmd)]
                log.append([e, "row", cmd, _u(dut.row_bank), "pim" if _u(dut.row_pim) else "mem",
                            _u(dut.row_row) if cmd in case["opens"] else -1])
                last_issue = e
            head += (st >> 2) & 3
            ri += (st >> 4) & 1
            if st >> 6:
                unsupported = 1
                break
        done = head >= len(stream) and ri >= len(reqs) and not busy
        if c > cycles or (done and c > last_issue + 3):
            break
        now = c - 1     # engine cycle of this RTL cycle
        # No work visible and none in the queues: nothing can issue (refresh is off) until the next arrival,
        # so let the simulator run to it without a Python call per cycle.
        pim_here = head < len(stream) and stream[head][0] <= now
        req_here = ri < len(reqs) and reqs[ri][0] <= c
        if not pim_here and not req_here and not busy and c > last_issue + 3 and not done:
            nxt = min(stream[head][0] + 1 if head < len(stream) else cycles + 1,
                      reqs[ri][0] if ri < len(reqs) else cycles + 1)
            if nxt - c > 2:
                drv.set("pim_valid0", 0)
                drv.set("pim_valid1", 0)
                drv.set("req_valid", 0)
                await ClockCycles(dut.clk, nxt - c - 1, rising=False)
                c = nxt - 1
                # (the registered outputs of the cycles skipped over are empty: read them as usual)
        for k, name in ((0, "0"), (1, "1")):
            i = head + k
            if i < len(stream) and stream[i][0] <= now:
                at, cmd, bank, row, flags, _ = stream[i]
                drv.set(f"pim_valid{name}", 1)
                drv.set(f"pim_cmd{name}", cmd)
                drv.set(f"pim_bank{name}", bank)
                drv.set(f"pim_row{name}", max(row, 0))
                drv.set(f"pim_end{name}", 1 if flags & SEG_END else 0)
            else:
                drv.set(f"pim_valid{name}", 0)
        if ri < len(reqs) and reqs[ri][0] <= c:
            arrive, write, bank, row = reqs[ri]
            drv.set("req_valid", 1)
            drv.set("req_write", write)
            drv.set("req_bank", bank)
            drv.set("req_row", row)
        else:
            drv.set("req_valid", 0)
        await FallingEdge(dut.clk)
        c += 1
    return {"name": case["name"], "log": log, "popped": head, "accepted": ri, "unsupported": unsupported,
            "end_cycle": c - 1}


@cocotb.test()
async def arbiter_matches_engine(dut) -> None:
    with open(os.environ["ARCHSIM_TB_CASES"]) as f:
        cases = json.load(f)
    Clock(dut.clk, PERIOD_NS, unit="ns").start()
    results = []
    for case in cases:
        res = await _run_case(dut, case)
        results.append(res)
        dut._log.info("%s: %d commands issued, %d stream commands, %d requests", case["name"], len(res["log"]),
                      res["popped"], res["accepted"])
    with open(os.environ["ARCHSIM_TB_RESULT"], "w") as f:
        json.dump(results, f)
