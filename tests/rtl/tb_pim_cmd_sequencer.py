"""cocotb bench for rtl/pim_cmd_sequencer.v; the golden model is the channel engine's command log.

Run from pytest (tests/rtl/test_pim_cmd_sequencer.py) through the cocotb runner. The pytest side computes
the streams and the engine's issue cycles (no numba inside the simulator) and passes them in a JSON file
(ARCHSIM_TB_CASES): a list of {name, cmd, bank, cycle, at (optional), strict (optional)}.

Per case: reset, then the stream is driven in order. Command i is presented (in_valid high) from cycle
max(at[i], issue[i-1] + 1), i.e. exactly when it would be the head of the engine's stream; its issue cycle
is the first cycle in which in_ready is high while it is presented. Cycles count from the cycle the first
command is presented (the engine's cycle 0). `strict` cases sample in_ready every cycle and also require
it low in every cycle before the issue (the tight-gate tests); the others wait for in_ready's rising edge.
The registered command-bus output must show the command one cycle after its issue.

Before the cases, command indices outside the table (ARCHSIM_TB_NUM_CMDS and the all-ones index) must
never be ready. The result (issue cycles and the first mismatch per case) is written to ARCHSIM_TB_RESULT.
"""

from __future__ import annotations

import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge
from cocotb.utils import get_sim_time

PERIOD_NS = 10


def _u(signal) -> int:
    value = signal.value
    return value.to_unsigned() if hasattr(value, "to_unsigned") else int(value)


def _cycle() -> int:
    return int(get_sim_time(unit="ns")) // PERIOD_NS


async def _run_case(dut, case: dict) -> tuple[list[int], list[str]]:
    cmds, banks, want = case["cmd"], case["bank"], case["cycle"]
    at = case.get("at") or [0] * len(cmds)
    strict = bool(case.get("strict"))
    names = case.get("names")
    dut.rst_n.value = 0
    dut.in_valid.value = 0
    dut.in_cmd.value = 0
    dut.in_bank.value = 0
    await ClockCycles(dut.clk, 3)
    await FallingEdge(dut.clk)
    dut.rst_n.value = 1
    await FallingEdge(dut.clk)
    c0 = _cycle()
    got: list[int] = []
    errors: list[str] = []
    prev = -1
    for i, (c, b) in enumerate(zip(cmds, banks, strict=True)):
        # wait (valid low) until the command would have entered the engine's stream
        while _cycle() - c0 < at[i]:
            dut.in_valid.value = 0
            await FallingEdge(dut.clk)
        dut.in_cmd.value = c
        dut.in_bank.value = b
        dut.in_valid.value = 1
        await ReadOnly()
        while not _u(dut.in_ready):
            if strict:
                await FallingEdge(dut.clk)
                await ReadOnly()
            else:
                await RisingEdge(dut.in_ready)
                await ReadOnly()
        t = _cycle() - c0
        got.append(t)
        if t <= prev:
            errors.append(f"command {i}: issued at {t}, not after the previous one at {prev}")
        prev = t
        await RisingEdge(dut.clk)
        await FallingEdge(dut.clk)
        if not (_u(dut.cmd_valid) == 1 and _u(dut.cmd_idx) == c and _u(dut.cmd_bank) == b):
            errors.append(f"command {i}: command bus shows valid={_u(dut.cmd_valid)} idx={_u(dut.cmd_idx)} "
                          f"bank={_u(dut.cmd_bank)} one cycle after the issue, expected {c}/{b}")
        if i < len(want) and t != want[i]:
            nm = names[c] if names else str(c)
            errors.insert(0, f"first mismatch at command {i} ({nm} bank {b}): RTL issued at cycle {t}, "
                             f"engine at cycle {want[i]}")
            break
        dut.in_valid.value = 0
    dut.in_valid.value = 0
    return got, errors


async def _unknown_command_is_never_ready(dut) -> None:
    """A command index outside the table (>= NUM_CMDS) is never ready and never reaches the command bus."""
    dut.rst_n.value = 0
    dut.in_valid.value = 0
    await ClockCycles(dut.clk, 3)
    await FallingEdge(dut.clk)
    dut.rst_n.value = 1
    n_cmds = int(os.environ.get("ARCHSIM_TB_NUM_CMDS", "0"))
    width = len(dut.in_cmd)
    for bad in sorted({n_cmds, (1 << width) - 1}):
        if not 0 < bad < (1 << width):
            continue
        dut.in_cmd.value = bad
        dut.in_bank.value = 0
        dut.in_valid.value = 1
        for _ in range(20):
            await FallingEdge(dut.clk)
            assert _u(dut.in_ready) == 0 and _u(dut.cmd_valid) == 0, f"unknown command {bad} was accepted"
    dut.in_valid.value = 0


@cocotb.test()
async def sequencer_matches_engine(dut) -> None:
    with open(os.environ["ARCHSIM_TB_CASES"]) as f:
        cases = json.load(f)
    Clock(dut.clk, PERIOD_NS, unit="ns").start()
    results = []
    await _unknown_command_is_never_ready(dut)
    for case in cases:
        got, errors = await _run_case(dut, case)
        results.append({"name": case["name"], "cycle": got, "errors": errors})
        dut._log.info("%s: %d commands, last at cycle %s, %s", case["name"], len(got), got[-1] if got else "-",
                      "OK" if not errors else errors[0])
    with open(os.environ["ARCHSIM_TB_RESULT"], "w") as f:
        json.dump(results, f)
    bad = [f"{r['name']}: {r['errors'][0]}" for r in results if r["errors"]]
    assert not bad, "; ".join(bad)
