"""The commands a controller needs by role, found in a standard by their effect (archsim.dram.effects).

The memory controller asks for "the ACT of the memory buffer", "the all-bank refresh", "the close of buffer k
for one bank", ... and the standard names its commands freely (ACT, PIM_ACT, NMC_ADD, ...). This module finds
them once, from the loaded spec alone, so that the lowering for the channel kernel (archsim.engine.tables) and
the RTL arbiter's header (archsim.dram.verilog) read the same answer: one source of truth, in the dram layer.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from archsim.dram.effects import Effect
from archsim.dram.spec import DramSpec
from archsim.errors import ConfigError

# roles of the rw (FR-FCFS) source and the refresh manager: indices into the role array. R_UPD / R_UPDA: the
# near-memory update command (one column command for an rmw request) and its closing form; -1 when the
# standard has none (an rmw is then RD, ALU latency, WR)
# R_RFMAB: the refresh-management command (the standard's `rfm_command`, DDR5's RFMab), -1 when it has none
R_ACT, R_PRE, R_RD, R_WR, R_RDA, R_WRA, R_REFAB, R_REFPB, R_UPD, R_UPDA, R_RFMAB = range(11)
N_ROLES = 11
ROLE_NEEDS = {R_ACT: (Effect.OPEN, "ACT"), R_PRE: (Effect.CLOSE, "PRE"), R_RD: (Effect.READ, "RD"),
              R_WR: (Effect.WRITE, "WR"), R_RDA: (Effect.READ_CLOSE, "RDA"), R_WRA: (Effect.WRITE_CLOSE, "WRA")}


class RefreshNodes(NamedTuple):
    """The nodes of the all-bank refresh command's scope in one channel, and their banks."""

    level: int              # the refresh command's scope level (0 if the standard has no all-bank refresh)
    count: int              # nodes of that level in one channel
    node_of: np.ndarray     # node of every bank of the channel
    off: np.ndarray         # banks of node n: banks[off[n]:off[n + 1]]
    banks: np.ndarray


def standard_error(spec: DramSpec, key: str, problem: str) -> ConfigError:
    return ConfigError(key, problem, source=f"standard {spec.standard}")


def bank_command(spec: DramSpec, effect: str, scope_bank: bool = True, buf: int = 0) -> int:
    """The first command with `effect` on buffer `buf` whose scope is the bank level (scope_bank) or wider;
    -1 if there is none."""
    bank_level = len(spec.levels) - 1 if "bank" not in spec.levels else spec.levels.index("bank")
    got = [c.index for c in spec.commands if c.effect == effect and c.buffer == buf
           and ((c.scope == bank_level) == scope_bank)]
    return got[0] if got else -1


def _check_close_forms_not_looser(spec: DramSpec, role: np.ndarray) -> None:
    """The kernel wakes a channel for a newly offered row hit at the earliest cycle of its RD / WR, though
    under the closed-row policy the hit may issue as RDA / WRA: that is exact only if RDA (WRA) is never
    ready before RD (WR), i.e. every row binding RD also binds RDA with at least its latency."""
    for plain, close in ((R_RD, R_RDA), (R_WR, R_WRA), (R_UPD, R_UPDA)):
        p, c = int(role[plain]), int(role[close])
        if p < 0:
            continue
        by = {}
        for r in spec.constraints:
            if r["next"] == c:
                key = (r["level"], r["prev"], r["window"], r["sibling"])
                by[key] = max(by.get(key, -1), r["latency"])
        for r in spec.constraints:
            if r["next"] != p or r["latency"] <= 1:
                continue
            key = (r["level"], r["prev"], r["window"], r["sibling"])
            if by.get(key, -1) < r["latency"]:
                raise standard_error(spec, "constraints", (
                    f"{spec.levels[r['level']]}: {r['prev_name']} -> {r['next_name']} >= {r['latency']} has no "
                    f"row binding {spec.commands[c].name} at least as long; the engine needs "
                    f"{spec.commands[c].name} never to be ready before {spec.commands[p].name}"))


def controller_roles(spec: DramSpec) -> np.ndarray:
    """role[R_*]: the command index of every role (-1: the standard has none). Raises ConfigError for a
    standard the controller cannot drive (no bank-scope ACT/PRE/RD/WR/RDA/WRA of buffer 0, an update command
    without its closing form, or a closing form looser than its plain form)."""
    role = np.full(N_ROLES, -1, dtype=np.int64)
    for r, (eff, name) in ROLE_NEEDS.items():
        role[r] = bank_command(spec, eff)
        if role[r] < 0:
            raise standard_error(spec, "commands", f"no bank-scope `{eff}` command of buffer "
                                 f"{spec.row_buffers[0]} (the controller's {name})")
    role[R_UPD], role[R_UPDA] = bank_command(spec, Effect.UPDATE), bank_command(spec, Effect.UPDATE_CLOSE)
    if (role[R_UPD] < 0) != (role[R_UPDA] < 0):
        have, miss = ((Effect.UPDATE, Effect.UPDATE_CLOSE) if role[R_UPD] >= 0
                      else (Effect.UPDATE_CLOSE, Effect.UPDATE))
        raise standard_error(spec, "commands", f"a bank-scope `{have}` command of buffer {spec.row_buffers[0]} "
                             f"needs a bank-scope `{miss}` one too (the closed-row policy closes with it)")
    _check_close_forms_not_looser(spec, role)
    role[R_REFPB] = bank_command(spec, Effect.REFRESH)
    wide_ref = [c for c in spec.commands if c.effect == Effect.REFRESH and c.index != role[R_REFPB]
                and c.index != spec.rfm_command]
    role[R_REFAB] = wide_ref[0].index if wide_ref else -1
    role[R_RFMAB] = spec.rfm_command
    return role


def close_commands(spec: DramSpec) -> tuple[np.ndarray, np.ndarray]:
    """(close_bank, close_wide). close_bank[k]: the bank-scope close of buffer k, else its narrowest close (the
    NeuPIMs PIM buffer closes only channel-wide), else -1; used where one bank's buffer must be closed
    (docs/channel-engine.md 3.3). close_wide[k, level]: the close of buffer k scoped to that level (wider
    than a bank; equally wide closes: the lowest command index), else -1."""
    cmds = spec.commands
    nbuf = len(spec.row_buffers)

    def narrowest_close(k: int) -> int:
        got = [c for c in cmds if c.effect == Effect.CLOSE and c.buffer == k]
        return min(got, key=lambda c: (-c.scope, c.index)).index if got else -1

    close_bank = np.array([narrowest_close(k) for k in range(nbuf)], dtype=np.int64)
    close_wide = np.full((nbuf, len(spec.levels)), -1, dtype=np.int64)
    bank_level = spec.levels.index("bank")
    for c in cmds:
        if c.effect == Effect.CLOSE and c.scope != bank_level and close_wide[c.buffer, c.scope] < 0:
            close_wide[c.buffer, c.scope] = c.index
    return close_bank, close_wide


def refresh_nodes(spec: DramSpec, role: np.ndarray) -> RefreshNodes:
    """The nodes of the all-bank refresh command's scope in channel 0 (every channel is laid out alike)."""
    nd = spec.node_of[:spec.banks_per_channel]
    level = spec.commands[role[R_REFAB]].scope if role[R_REFAB] >= 0 else 0
    col = nd[:, level]
    count = int(col.max()) + 1
    off = np.zeros(count + 1, dtype=np.int64)
    banks = np.zeros(spec.banks_per_channel, dtype=np.int64)
    k = 0
    for node in range(count):
        bs = np.nonzero(col == node)[0]
        banks[k:k + len(bs)] = bs
        k += len(bs)
        off[node + 1] = k
    return RefreshNodes(level, count, col.astype(np.int64), off, banks)


def refresh_busy(spec: DramSpec, cmd: int) -> int:
    """Cycles a refresh command keeps its banks busy (out of precharged standby): the spacing the standard puts
    between two of them at one target (its row from the command to itself: REFab's nRFC, REFpb's nRFCpb, RFMab's
    nRFM); 0 for a command that is no refresh or a refresh without that row."""
    if spec.commands[cmd].effect != Effect.REFRESH:
        return 0
    rows = [r["latency"] for r in spec.constraints
            if r["prev"] == cmd and r["next"] == cmd and r["window"] == 1 and not r["sibling"]]
    return max(rows, default=0)
