"""Planning latencies read from a standard's constraint rows: the one place a compiler or a policy asks "how
long from A to B" (a threshold's queueing estimate, a PIM segment's admission estimate). The rows are the ones
the channel kernel enforces (archsim.engine.tables lowers the same `spec.constraints`), so a planning figure
can never drift from the timing that runs; a standard without the row is an error, not a fallback value.
"""
from __future__ import annotations

from archsim.dram.effects import Effect
from archsim.dram.roles import bank_command, standard_error
from archsim.dram.spec import DramSpec


def _index(spec: DramSpec, cmd: int | str) -> int:
    if isinstance(cmd, str):
        if cmd not in spec.command_names:
            raise standard_error(spec, "commands", f"no command {cmd}; known: {', '.join(spec.command_names)}")
        return spec.cmd(cmd)
    return cmd


def gap(spec: DramSpec, prev: int | str, nxt: int | str) -> int:
    """Fewest cycles from `prev` to `nxt` at one target (the same bank): the largest latency of the rows
    (window 1, not sibling) from prev to nxt. Raises if the standard has no such row."""
    p, n = _index(spec, prev), _index(spec, nxt)
    rows = [r["latency"] for r in spec.constraints
            if r["prev"] == p and r["next"] == n and r["window"] == 1 and not r["sibling"]]
    if not rows:
        raise standard_error(spec, "constraints", f"no row from {spec.commands[p].name} to "
                             f"{spec.commands[n].name}: a planning latency needs one")
    return max(rows)


def level_gap(spec: DramSpec, prev: int | str, nxt: int | str, level: str) -> int:
    """Fewest cycles from `prev` to `nxt` on different targets of one `level` node (e.g. two G_ACTs of one
    rank): the largest window-1 latency of the rows at that level. Raises if the standard has none."""
    p, n = _index(spec, prev), _index(spec, nxt)
    rows = [r["latency"] for r in spec.constraints if r["prev"] == p and r["next"] == n and r["window"] == 1
            and not r["sibling"] and r["level_name"] == level]
    if not rows:
        raise standard_error(spec, "constraints", f"no {level} row from {spec.commands[p].name} to "
                             f"{spec.commands[n].name}: a planning latency needs one")
    return max(rows)


def widest_level(spec: DramSpec, prev: int | str, nxt: int | str, below: tuple[str, ...] = ("bank", "bankgroup")) -> str:
    """The level (not one of `below`) whose window-1 row from `prev` to `nxt` is the longest: where a standard
    puts its four-activate window (a rank; HBM2's pseudo-channel, HBM3's stack ID). Raises if it has none."""
    p, n = _index(spec, prev), _index(spec, nxt)
    rows = [r for r in spec.constraints if r["prev"] == p and r["next"] == n and r["window"] == 1
            and not r["sibling"] and r["level_name"] not in below]
    if not rows:
        raise standard_error(spec, "constraints", f"no row above {', '.join(below)} from {spec.commands[p].name} "
                             f"to {spec.commands[n].name}: a planning latency needs one")
    return max(rows, key=lambda r: r["latency"])["level_name"]


def window(spec: DramSpec, prev: int | str, nxt: int | str) -> tuple[int, int]:
    """(latency, window) of the widest activation-window row from `prev` to `nxt` (e.g. a four-activate window:
    the window-th command before may be no nearer than latency). Raises if there is none."""
    p, n = _index(spec, prev), _index(spec, nxt)
    rows = [(r["latency"], r["window"]) for r in spec.constraints
            if r["prev"] == p and r["next"] == n and r["window"] > 1]
    if not rows:
        raise standard_error(spec, "constraints", f"no window row from {spec.commands[p].name} to "
                             f"{spec.commands[n].name}: a planning latency needs one")
    return max(rows)


def completion(spec: DramSpec, cmd: int | str) -> int:
    """Cycles from issue until `cmd`'s effect is complete (its data returned or written)."""
    return spec.commands[_index(spec, cmd)].latency


def closed_row_read(spec: DramSpec) -> int:
    """Cycles from the activate of a closed row to its read data: ACT -> RD of the memory buffer, then RD's
    completion (nRCDRD + nCL + nBL on a JEDEC standard)."""
    act, rd = bank_command(spec, Effect.OPEN), bank_command(spec, Effect.READ)
    if act < 0 or rd < 0:
        raise standard_error(spec, "commands", "needs a bank ACT and RD of the memory buffer")
    return gap(spec, act, rd) + completion(spec, rd)
