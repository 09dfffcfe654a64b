"""Command effects: what a DRAM command does to the banks of its target, declared once.

A standard names each command's `effect` (`archsim/presets/dram/standards/*.yaml`); everything that interprets
a command by what it does reads this module: the spec loader (which names are allowed), the lowering
(`archsim.engine.tables`: the integer code of every command, `cmd_effect`), the channel kernel
(`archsim.engine.channel`: the `E_*` codes below are plain module-level integers, which numba compiles as
constants), the reference scheduler (`archsim.engine.reference`), the command-log checker
(`archsim.dram.checker`) and the Verilog generator (`archsim.dram.verilog`, the `CMD_EFFECT` table of the RTL
arbiter). Semantics in words: docs/channel-engine.md, section 1. `tests/test_effects.py` fails if an effect
declared here is not handled by one of those readers.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Effect(StrEnum):
    """An effect by the name a standard writes (a `str`, so `command.effect == Effect.OPEN` compares names)."""

    OPEN = "open"
    CLOSE = "close"
    READ = "read"
    WRITE = "write"
    READ_CLOSE = "read_close"
    WRITE_CLOSE = "write_close"
    REFRESH = "refresh"
    COMPUTE = "compute"
    TRANSFER = "transfer"
    UPDATE = "update"
    UPDATE_CLOSE = "update_close"


# Integer codes (the lowered `cmd_effect` table and the kernel's constants): the position in `Effect`.
# Written out so that numba sees plain integers and a reader can grep for them; tests/test_effects.py checks
# that each equals CODE[its effect]. Add a new effect at the end and never renumber: numba's on-disk cache of
# the kernel is keyed on archsim/engine/channel.py alone and keeps the codes it was compiled with.
E_OPEN = 0
E_CLOSE = 1
E_READ = 2
E_WRITE = 3
E_READ_CLOSE = 4
E_WRITE_CLOSE = 5
E_REFRESH = 6
E_COMPUTE = 7
E_TRANSFER = 8
E_UPDATE = 9
E_UPDATE_CLOSE = 10
CODE: dict[Effect, int] = {e: i for i, e in enumerate(Effect)}


@dataclass(frozen=True)
class Rule:
    """What an effect needs of its buffer in every bank of the target, and what it does to it."""

    needs: str              # "open": its buffer open (at the logged row); "all_closed": every buffer closed;
    #                         "closed": its buffer closed (and the row not open in another buffer); "": nothing
    opens: bool = False     # opens the row in its buffer
    closes: bool = False    # closes its buffer (after the access, for a column command)
    does: str = ""          # in words (docs/channel-engine.md, section 1)


RULES: dict[Effect, Rule] = {
    Effect.OPEN: Rule("closed", opens=True, does="opens the row in its buffer"),
    Effect.CLOSE: Rule("", closes=True, does="closes its buffer (closing a closed buffer is a legal no-op)"),
    Effect.READ: Rule("open", does="column read"),
    Effect.WRITE: Rule("open", does="column write"),
    Effect.READ_CLOSE: Rule("open", closes=True, does="column read, then closes its buffer"),
    Effect.WRITE_CLOSE: Rule("open", closes=True, does="column write, then closes its buffer"),
    Effect.REFRESH: Rule("all_closed", does="refreshes the banks"),
    Effect.COMPUTE: Rule("open", does="in-bank compute on the open row (PIM MAC)"),
    Effect.TRANSFER: Rule("", does="moves data that is not in a bank row (global buffer, accumulators)"),
    Effect.UPDATE: Rule("open", does="near-memory read-add-write of one burst of the open row"),
    Effect.UPDATE_CLOSE: Rule("open", closes=True, does="near-memory read-add-write, then closes its buffer"),
}

#: every effect name a standard may use, in code order
EFFECTS: tuple[str, ...] = tuple(e.value for e in Effect)
#: effects that need their buffer open at the logged row (column accesses and in-bank compute)
NEEDS_OPEN: tuple[str, ...] = tuple(e.value for e in Effect if RULES[e].needs == "open")
#: effects that close their buffer
CLOSES: tuple[str, ...] = tuple(e.value for e in Effect if RULES[e].closes)
#: effects that open a row
OPENS: tuple[str, ...] = tuple(e.value for e in Effect if RULES[e].opens)
