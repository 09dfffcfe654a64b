"""cocotb bench for rtl/t3_tracker.v; archsim.systems.t3.tracker.Tracker is the golden model.

Run from pytest (tests/rtl/test_t3_tracker.py). Each scenario programs expected counts, drives a stream of
updates with random gaps (the bench holds an update while upd_ready is low) and compares the keys the RTL
fires, in order, plus its overflow count and occupancy with the model's. Scenarios: random streams (tiles
updated in production order with neighbours swapped), a table that fills (more live tiles than entries),
and wrap-around (keys reused modulo 2**KEY_BITS after they fire, reprogrammed first).
"""

from __future__ import annotations

import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge

from archsim.systems.t3.tracker import Tracker


def _u(signal) -> int:
    value = signal.value
    return value.to_unsigned() if hasattr(value, "to_unsigned") else int(value)


def stream(rng: random.Random, keys: list[int], max_count: int, swap: float,
           split: bool = False) -> tuple[dict[int, int], list]:
    expected = {k: rng.randint(1, max_count) for k in keys}
    if split:
        # every tile's first update before any tile's second (local updates of a stage, then the remote
        # ones): more tiles live at once than the table has entries
        expected = {k: rng.randint(2, max_count) for k in keys}
        first = {k: rng.randint(1, c - 1) for k, c in expected.items()}
        return expected, [(k, first[k]) for k in keys] + [(k, expected[k] - first[k]) for k in keys]
    ups = []
    for k in keys:
        c = expected[k]
        while c:
            p = rng.randint(1, c)
            ups.append((k, p))
            c -= p
    for i in range(0, len(ups) - 1, 2):
        if rng.random() < swap:
            ups[i], ups[i + 1] = ups[i + 1], ups[i]
    return expected, ups


class Fires:
    def __init__(self, dut):
        self.dut = dut
        self.keys: list[int] = []

    async def run(self) -> None:
        while True:
            await RisingEdge(self.dut.clk)
            await ReadOnly()              # after the edge's updates: the fire this edge produced
            if _u(self.dut.fire_valid):
                self.keys.append(_u(self.dut.fire_key))


async def program(dut, key: int, count: int) -> None:
    dut.prog_valid.value = 1
    dut.prog_key.value = key
    dut.prog_count.value = count
    await FallingEdge(dut.clk)
    dut.prog_valid.value = 0


async def send(dut, rng: random.Random, key: int, n: int) -> None:
    while rng.random() < 0.2:
        await FallingEdge(dut.clk)
    dut.upd_valid.value = 1
    dut.upd_key.value = key
    dut.upd_n.value = n
    for _ in range(1000):
        await ReadOnly()                  # the inputs just driven have settled: upd_ready for the next edge
        ready = _u(dut.upd_ready)
        await FallingEdge(dut.clk)
        if ready:
            break
    else:
        raise AssertionError(f"update ({key}, {n}) not accepted in 1000 cycles")
    dut.upd_valid.value = 0


async def reset(dut) -> Fires:
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    for sig in (dut.prog_valid, dut.upd_valid, dut.prog_key, dut.prog_count, dut.upd_key, dut.upd_n):
        sig.value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    fires = Fires(dut)
    cocotb.start_soon(fires.run())
    return fires


async def drain(dut, fires: Fires, want: int) -> None:
    for _ in range(200):
        if len(fires.keys) >= want:
            break
        await FallingEdge(dut.clk)
    await ClockCycles(dut.clk, 3)
    await FallingEdge(dut.clk)            # drive the next inputs between edges


def params(dut) -> tuple[int, int]:
    return int(os.environ["ARCHSIM_TB_ENTRIES"]), int(os.environ["ARCHSIM_TB_KEY_BITS"])


async def scenario(dut, rng: random.Random, rounds: int, n_keys: int, swap: float, wrap: bool,
                   split: bool = False) -> Tracker:
    entries, key_bits = params(dut)
    fires = await reset(dut)
    model = Tracker(entries)
    want: list[int] = []
    seq = 0
    for _ in range(rounds):
        keys = [(seq + i) % (1 << key_bits) if wrap else seq + i for i in range(n_keys)]
        seq += n_keys
        expected, ups = stream(rng, keys, 6, swap, split)
        for k, c in expected.items():
            model.expect(k, c)
            await program(dut, k, c)
        for t, (k, n) in enumerate(ups):
            want += model.update(k, n, t)
            await send(dut, rng, k, n)
            for _ in range(2 * entries + 4):          # let the drain that this update may start finish
                await ReadOnly()
                if _u(dut.upd_ready) or _u(dut.ovf_cnt) == 2 ** int(os.environ["ARCHSIM_TB_OVF_BITS"]):
                    break
                await FallingEdge(dut.clk)
            await FallingEdge(dut.clk)
            assert fires.keys == want, f"after update {t} ({k}, {n}): fired {fires.keys[-12:]} expected {want[-12:]}"
        await drain(dut, fires, len(want))
        assert fires.keys == want, f"fired {fires.keys[-20:]} expected {want[-20:]}"
        assert _u(dut.full_events) == model.full_events
        assert _u(dut.occupancy) == len(model.table) and model.pending == 0
        assert _u(dut.err_over) == 0
    assert model.high_water <= entries
    return model


@cocotb.test()
async def random_streams(dut):
    rng = random.Random(int(os.environ.get("ARCHSIM_TB_SEED", "1")))
    await scenario(dut, rng, rounds=1, n_keys=30, swap=0.5, wrap=False)


@cocotb.test()
async def table_full(dut):
    rng = random.Random(int(os.environ.get("ARCHSIM_TB_SEED", "1")) + 1)
    entries, _ = params(dut)
    # neighbours swapped often and more live tiles than entries: the overflow FIFO fills and drains
    ovf = 2 ** int(os.environ["ARCHSIM_TB_OVF_BITS"])
    # entries + overflow depth - 1 live tiles: the table fills and the FIFO holds the rest without stalling
    model = await scenario(dut, rng, rounds=3, n_keys=entries + ovf - 1, swap=0.0, wrap=True, split=True)
    assert model.full_events > 0 and model.high_water == entries     # the table did fill


@cocotb.test()
async def wrap_around(dut):
    rng = random.Random(int(os.environ.get("ARCHSIM_TB_SEED", "1")) + 2)
    _, key_bits = params(dut)
    await scenario(dut, rng, rounds=3, n_keys=(1 << key_bits) // 2 + 3, swap=0.5, wrap=True)
