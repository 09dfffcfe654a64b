"""cocotb bench for rtl/pim_cmd_decoder.v; the Python `Isa.decode` is the golden model.

Run from pytest (tests/rtl/test_pim_cmd_decoder.py) through the cocotb runner. Stimulus: every
instruction with all-zero and all-ones fields, random legal instructions from `Isa.encode`, legal
opcodes with reserved bits set, unknown opcodes and fully random words, with in_valid toggling.
"""

from __future__ import annotations

import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge

from archsim.errors import UserError
from archsim.isa import Isa, load


def _u(signal) -> int:
    value = signal.value
    # to_unsigned() raises on X/Z, which is what we want: an undriven output is a failure.
    return value.to_unsigned() if hasattr(value, "to_unsigned") else int(value)


def stimulus(isa: Isa, rng: random.Random, n_random: int) -> list[int]:
    words: list[int] = []
    for ins in isa.instructions:
        words.append(isa.encode(ins.mnemonic, **{f.name: 0 for f in ins.fields}))
        words.append(isa.encode(ins.mnemonic, **{f.name: f.max for f in ins.fields}))
    legal_opcodes = {ins.opcode for ins in isa.instructions}
    illegal_opcodes = [op for op in range(isa.opcode_field.max + 1) if op not in legal_opcodes]
    for _ in range(n_random):
        kind = rng.random()
        ins = rng.choice(isa.instructions)
        word = isa.encode(ins.mnemonic, **{f.name: rng.randint(0, f.max) for f in ins.fields})
        if kind < 0.70:
            words.append(word)
        elif kind < 0.80:
            reserved = [b for b in range(isa.word_bits) if not (ins.used_mask >> b) & 1]
            if reserved:
                word |= 1 << rng.choice(reserved)
            words.append(word)
        elif kind < 0.90 and illegal_opcodes:
            op = rng.choice(illegal_opcodes)
            words.append((word & ~isa.opcode_field.mask) | (op << isa.opcode_field.lsb))
        else:
            words.append(rng.getrandbits(isa.word_bits))
    return words


def expected(isa: Isa, word: int) -> dict[str, int]:
    """What the decoder must output for `word`, from the Python decoder."""
    fields = list(isa.fields.values())
    units = list(isa.units)
    exp = {
        "illegal": 0,
        "opcode": (word >> isa.opcode_field.lsb) & isa.opcode_field.max,
        "op_onehot": 0,
        "unit_onehot": 0,
        "fields_used": 0,
    }
    exp.update({f"f_{f.name}": 0 for f in fields})
    try:
        instr = isa.decode(word)
    except UserError:
        exp["illegal"] = 1
        return exp
    spec = isa.instruction(instr.mnemonic)
    exp["op_onehot"] = 1 << isa.instructions.index(spec)
    exp["unit_onehot"] = 1 << units.index(spec.unit)
    for name, value in instr.fields.items():
        exp["fields_used"] |= 1 << list(isa.fields).index(name)
        exp[f"f_{name}"] = value
    return exp


@cocotb.test()
async def decoder_matches_golden_model(dut) -> None:
    isa = load(os.environ.get("ARCHSIM_TB_ISA", "pim"))
    seed = int(os.environ.get("ARCHSIM_TB_SEED", "1"))
    n_random = int(os.environ.get("ARCHSIM_TB_WORDS", "3000"))
    rng = random.Random(seed)
    # Every ISA field must have an output port, so an ISA edit without an RTL edit fails here.
    missing = [f.name for f in isa.fields.values() if not hasattr(dut, f"f_{f.name}")]
    assert not missing, f"pim_cmd_decoder has no output port for field(s) {missing}"

    Clock(dut.clk, 10, unit="ns").start()
    dut.rst_n.value = 0
    dut.in_valid.value = 0
    dut.instr.value = 0
    await ClockCycles(dut.clk, 3)
    await FallingEdge(dut.clk)
    assert _u(dut.out_valid) == 0, "out_valid must be low during reset"
    dut.rst_n.value = 1

    # Drive on the falling edge, check on the next one: the rising edge in between registers the word.
    mismatches: list[str] = []
    checked = illegal = 0
    for word in stimulus(isa, rng, n_random):
        valid = rng.random() < 0.9
        dut.instr.value = word
        dut.in_valid.value = int(valid)
        await FallingEdge(dut.clk)
        if _u(dut.out_valid) != int(valid):
            mismatches.append(f"word {word:#x}: out_valid={_u(dut.out_valid)}, expected {int(valid)}")
            continue
        if not valid:
            continue
        checked += 1
        exp = expected(isa, word)
        illegal += exp["illegal"]
        for port, want in exp.items():
            got = _u(getattr(dut, port))
            if got != want:
                mismatches.append(
                    f"word {word:#0{isa.hex_digits + 2}x}: {port}={got:#x}, golden model {want:#x}"
                )
    dut._log.info("checked %d words (%d illegal), seed %d", checked, illegal, seed)
    assert checked > n_random // 2 and illegal > 0, "stimulus did not exercise the decoder"
    assert not mismatches, f"{len(mismatches)} mismatch(es), first: " + "; ".join(mismatches[:8])
