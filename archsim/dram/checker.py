"""Independent re-verification of a DRAM command log against the standard it was made with.

The engines enforce timing in *forward* form (issuing a command raises per-node ready cycles). This checker
deliberately uses the *look-back* form of the definition (docs/channel-engine.md, sections 1 and 4):

    a following command F may issue no earlier than `latency` cycles after the `window`-th most recent
    preceding command P issued to the same node of the row's level (sibling rows: to a different node of
    the level under the same parent node).

A command acts on every bank of its *target*: the node of its scope level that contains the bank given by
the log's address columns. "Same node" means some bank of P's target and some bank of F's target share the
level's node, so every command is expanded into one event per level-node its banks touch. For every rule
the preceding events are sorted once by (node, log position) and each following event looks back with a
`searchsorted`, so a rule is checked for the whole log at once in numpy. "Issued before" means "earlier in
the log": the log is in issue order (two commands in one cycle are ordered as logged).

Besides timing it checks:

* cycles are non-decreasing;
* command-bus occupancy: "single" = at most one command per channel per cycle, "dual" = at most one
  row-bus and one column-bus command per channel per cycle;
* bank state, per (bank, row buffer), with commands classified by `effect` only (never by name):
  `open` needs its buffer closed in every bank of the target and the row not open in any other buffer of
  those banks; `read`, `write`, `update`, `compute` and the `*_close` effects need their buffer open (at the logged
  row when it is >= 0); `refresh` needs every buffer closed in every bank of its target; `close` is always
  legal (closing a closed buffer is a no-op); `transfer` has no bank state.

Malformed input (missing columns, unknown command names, addresses out of range for the spec) raises
archsim.errors.UserError naming the log row.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from archsim.dram.effects import CLOSES, NEEDS_OPEN, Effect
from archsim.dram.spec import DramSpec
from archsim.errors import RowError, UserError

__all__ = ["Violation", "Rule", "check_log", "rules", "summary", "LOG_COLUMNS"]

LOG_COLUMNS = ["cycle", "command", "channel", "pseudochannel", "rank", "bankgroup", "bank", "row", "column"]
ADDR_COLUMNS = ["channel", "pseudochannel", "rank", "bankgroup", "bank"]
_SHORT = ("ch", "pc", "ra", "bg", "ba")
# effects that need their buffer open, and those that close it (the declaration: archsim.dram.effects)
_OPEN_NEEDS = NEEDS_OPEN
_CLOSES = CLOSES


@dataclass(frozen=True)
class Violation:
    """One broken rule at one command of the log."""

    index: int                                   # row of the log (0-based position)
    cycle: int
    command: str
    address: tuple[int, int, int, int, int]      # channel, pseudochannel, rank, bankgroup, bank
    row: int
    rule: str                                    # e.g. "bankgroup: RD -> RD >= nCCDL = 4, got 3"
    kind: str                                    # timing | state | bus | order

    def __str__(self) -> str:
        ch, pc, ra, bg, ba = self.address
        where = f"ch{ch} pc{pc} ra{ra} bg{bg} ba{ba}" + (f" row {self.row}" if self.row >= 0 else "")
        return f"cycle {self.cycle} {self.command} @ {where} (log row {self.index}): {self.rule}"


@dataclass(frozen=True)
class Rule:
    """One constraint row of the standard as the checker applies it: following command `nxt` vs the
    `window`-th most recent command of the set `prev` at the same node of `level` (sibling: a different node
    under the same parent). One row of the standard file with several following commands is one rule per
    following command; its preceding commands stay one set (the window counts over the set)."""

    level: int
    prev: tuple[int, ...]
    nxt: int
    latency: int
    window: int
    sibling: bool
    expr: str
    group: int

    def text(self, spec: DramSpec, prev_cmd: int, got: int) -> str:
        names = spec.command_names
        lat = self.expr if self.expr == str(self.latency) else f"{self.expr} = {self.latency}"
        win = "" if self.window == 1 else f" (window {self.window}: {_ordinal(self.window)} most recent)"
        where = spec.levels[self.level] + (" sibling" if self.sibling else "")
        return f"{where}: {names[prev_cmd]} -> {names[self.nxt]}{win} >= {lat}, got {got}"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def rules(spec: DramSpec) -> list[Rule]:
    """The spec's constraint rows as checker rules, one per (row of the standard file, following command)."""
    merged: dict[tuple[int, int], dict[str, Any]] = {}
    for c in spec.constraints:
        key = (int(c.get("group", -1)), int(c["next"]))
        if key[0] < 0:      # a hand-made row without a group is its own rule
            key = (-1 - len(merged), int(c["next"]))
        r = merged.setdefault(key, {"level": int(c["level"]), "prev": [], "latency": int(c["latency"]),
                                    "window": int(c["window"]), "sibling": bool(c.get("sibling", False)),
                                    "expr": str(c.get("expr", c["latency"]))})
        if int(c["prev"]) not in r["prev"]:
            r["prev"].append(int(c["prev"]))
    return [Rule(r["level"], tuple(r["prev"]), nxt, r["latency"], r["window"], r["sibling"], r["expr"], group)
            for (group, nxt), r in merged.items()]


# ------------------------------------------------------------------------------------------------
# input validation


def _int_column(df: pd.DataFrame, col: str) -> np.ndarray:
    s = df[col]
    if pd.api.types.is_integer_dtype(s.dtype):
        return s.to_numpy(dtype=np.int64)
    values = pd.to_numeric(s, errors="coerce")
    arr = values.to_numpy(dtype=np.float64, na_value=np.nan) if len(s) else np.zeros(0)
    bad = ~np.isfinite(arr) | (arr != np.round(arr))
    if bad.any():
        i = int(np.argmax(bad))
        raise RowError(i, f"{col} = {s.iloc[i]!r} is not an integer")
    return arr.astype(np.int64)


def _decode(spec: DramSpec, df: pd.DataFrame) -> dict[str, np.ndarray]:
    if not isinstance(df, pd.DataFrame):
        raise UserError(f"command log: expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in LOG_COLUMNS if c not in df.columns]
    if missing:
        raise UserError(f"command log lacks columns {', '.join(missing)}; expected {', '.join(LOG_COLUMNS)}")
    names = spec.command_names
    index = {n: i for i, n in enumerate(names)}
    codes, uniq = pd.factorize(df["command"].astype(str), sort=False)
    lut = np.array([index.get(u, -1) for u in uniq] + [-1], dtype=np.int64)   # code -1 (missing) -> -1
    cmd = lut[codes]
    if (cmd < 0).any():
        i = int(np.argmax(cmd < 0))
        raise RowError(i, f"unknown command {df['command'].iloc[i]!r} for {spec.standard}; "
                        f"known: {', '.join(names)}")
    out = {"cmd": cmd}
    for col in ["cycle", *ADDR_COLUMNS, "row", "column"]:
        out[col] = _int_column(df, col)
    if (out["cycle"] < 0).any():
        i = int(np.argmax(out["cycle"] < 0))
        raise RowError(i, f"cycle {out['cycle'][i]} is negative")
    for col, n in zip(ADDR_COLUMNS, spec.counts, strict=True):
        v = out[col]
        bad = (v < 0) | (v >= n)
        if bad.any():
            i = int(np.argmax(bad))
            hint = "; was the log made with another --channels or preset?" if col == "channel" else ""
            raise RowError(i, f"{col} {v[i]} out of range 0..{n - 1} for {spec.name} "
                            f"({n} {col}{'s' if n != 1 else ''}){hint}")
    for col, n in (("row", spec.rows), ("column", spec.columns)):
        v = out[col]
        bad = (v < -1) | (v >= n)
        if bad.any():
            i = int(np.argmax(bad))
            raise RowError(i, f"{col} {v[i]} out of range -1..{n - 1} for {spec.name}")
    bank = np.zeros(len(cmd), dtype=np.int64)
    for col, n in zip(ADDR_COLUMNS, spec.counts, strict=True):
        bank = bank * n + out[col]
    out["gbank"] = bank
    return out


# ------------------------------------------------------------------------------------------------
# targets: which banks (and which level-nodes) every logged command acts on


class _Targets:
    """Per level: the banks of every node (node ids of spec.node_of, which may have gaps for groups)."""

    def __init__(self, spec: DramSpec):
        self.spec = spec
        self.node_of = np.asarray(spec.node_of, dtype=np.int64)
        self.start, self.count, self.sorted_banks = [], [], []
        for k in range(self.node_of.shape[1]):
            col = self.node_of[:, k]
            order = np.argsort(col, kind="stable")
            size = int(col.max()) + 1
            self.sorted_banks.append(order.astype(np.int64))
            self.count.append(np.bincount(col, minlength=size).astype(np.int64))
            self.start.append(np.searchsorted(col[order], np.arange(size), side="left").astype(np.int64))

    def expand(self, level: np.ndarray, node: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(index into the inputs, bank) for every bank of every (level, node)."""
        reps, banks = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        for k in np.unique(level).tolist():
            sel = np.nonzero(level == k)[0]
            cnt = self.count[k][node[sel]]
            rep = np.repeat(sel, cnt)
            offs = np.arange(int(cnt.sum()), dtype=np.int64) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            banks.append(self.sorted_banks[k][np.repeat(self.start[k][node[sel]], cnt) + offs])
            reps.append(rep)
        return np.concatenate(reps), np.concatenate(banks)


def _bank_text(spec: DramSpec, bank: int) -> str:
    """'ch0 pc0 bg1 ba2': the channel, then every address field with more than one value."""
    parts = []
    for k in range(len(ADDR_COLUMNS) - 1, -1, -1):
        n = spec.counts[k]
        if k == 0 or n > 1:
            parts.append(f"{_SHORT[k]}{bank % n}")
        bank //= n
    return " ".join(reversed(parts))


# ------------------------------------------------------------------------------------------------
# the checks


def check_log(spec: DramSpec, log_df: pd.DataFrame) -> list[Violation]:
    """Re-verify a command log (columns LOG_COLUMNS, in issue order; other columns are ignored) against
    `spec`. Returns the violations, ordered by log row (empty list = the log is legal)."""
    a = _decode(spec, log_df)
    n = len(a["cmd"])
    if n == 0:
        return []
    names = spec.command_names
    cyc, cmd = a["cycle"], a["cmd"]
    found: list[tuple[int, str, str]] = []  # (log row, kind, rule text)

    # -- order
    for i in (np.nonzero(cyc[1:] < cyc[:-1])[0] + 1).tolist():
        found.append((i, "order", f"cycle {cyc[i]} is earlier than the previous command's cycle {cyc[i - 1]}"))

    # -- command bus
    is_col = np.array([c.bus == "column" for c in spec.commands], dtype=np.int64)[cmd]
    dual = spec.command_bus == "dual"
    bus_key = is_col if dual else np.zeros(n, dtype=np.int64)
    order = np.lexsort((np.arange(n), bus_key, cyc, a["channel"]))
    same = ((a["channel"][order][1:] == a["channel"][order][:-1]) & (cyc[order][1:] == cyc[order][:-1])
            & (bus_key[order][1:] == bus_key[order][:-1]))
    for k in np.nonzero(same)[0].tolist():
        i, j = int(order[k + 1]), int(order[k])
        bus = ("column" if bus_key[i] else "row") + " command bus" if dual else "command bus (single)"
        found.append((i, "bus", f"{bus}: {names[cmd[j]]} (log row {j}) and {names[cmd[i]]} issue in the "
                                f"same cycle on channel {a['channel'][i]}"))

    # every command's target, and every (log row, bank) it acts on
    tg = _Targets(spec)
    scope = np.array([c.scope for c in spec.commands], dtype=np.int64)[cmd]
    target = tg.node_of[a["gbank"], scope]
    ev_row, ev_bank = tg.expand(scope, target)

    found.extend(_check_timing(spec, tg, a, ev_row, ev_bank))
    found.extend(_check_state(spec, a, ev_row, ev_bank))

    found.sort(key=lambda f: f[0])
    return [Violation(index=i, cycle=int(cyc[i]), command=names[cmd[i]],
                      address=tuple(int(a[c][i]) for c in ADDR_COLUMNS),  # type: ignore[arg-type]
                      row=int(a["row"][i]), rule=text, kind=kind) for i, kind, text in found]


def _check_timing(spec: DramSpec, tg: _Targets, a: dict[str, np.ndarray], ev_row: np.ndarray,
                  ev_bank: np.ndarray) -> list[tuple[int, str, str]]:
    n = len(a["cmd"])
    cyc, cmd = a["cycle"], a["cmd"]
    scale = np.int64(n + 1)
    found: list[tuple[int, str, str]] = []
    events: dict[int, tuple[np.ndarray, np.ndarray]] = {}     # level -> (log row, level-node), unique pairs
    sib_events: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def level_events(lv: int) -> tuple[np.ndarray, np.ndarray]:
        if lv not in events:
            node = tg.node_of[ev_bank, lv]
            size = np.int64(node.max() + 1)
            key = np.unique(ev_row * size + node)        # sorted by log row
            events[lv] = (key // size, key % size)
        return events[lv]

    def parent_events(lv: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(log row, parent node, the single level-node the row touches under that parent or -1 if several)."""
        if lv not in sib_events:
            row, node = level_events(lv)
            parent_of = np.zeros(int(tg.node_of[:, lv].max()) + 1, dtype=np.int64)
            parent_of[tg.node_of[:, lv]] = tg.node_of[:, spec.level_parent[lv]]
            par = parent_of[node]
            size = np.int64(par.max() + 1)
            key = row * size + par
            ukey, first, cnt = np.unique(key, return_index=True, return_counts=True)
            single = np.where(cnt == 1, node[first], -1)
            sib_events[lv] = (ukey // size, ukey % size, single)
        return sib_events[lv]

    for rule in rules(spec):
        is_next = cmd == rule.nxt
        is_prev = np.isin(cmd, rule.prev)
        if not is_next.any() or not is_prev.any():
            continue
        if not rule.sibling:
            row, node = level_events(rule.level)
            pk = node[is_prev[row]] * scale + row[is_prev[row]]        # preceding events, by (node, row)
            order = np.argsort(pk, kind="stable")
            pk, prow_all = pk[order], row[is_prev[row]][order]
            fsel = is_next[row]
            frow, fnode = row[fsel], node[fsel]
            pos = np.searchsorted(pk, fnode * scale + frow, side="left")      # strictly earlier in the log
            start = np.searchsorted(pk, fnode * scale, side="left")           # first one at this node
            has = (pos - start) >= rule.window
            frow, prow = frow[has], prow_all[pos[has] - rule.window]
        else:
            row, par, single = parent_events(rule.level)
            psel = is_prev[row]
            pk = par[psel] * scale + row[psel]
            order = np.argsort(pk, kind="stable")
            pk, prow_all, psingle, ppar = pk[order], row[psel][order], single[psel][order], par[psel][order]
            # runs of consecutive preceding events at one parent that touch the same single node
            new_run = np.ones(len(pk), dtype=bool)
            new_run[1:] = (ppar[1:] != ppar[:-1]) | (psingle[1:] != psingle[:-1]) | (psingle[1:] < 0)
            run_start = np.maximum.accumulate(np.where(new_run, np.arange(len(pk)), 0))
            fsel = is_next[row]
            frow, fpar, fsingle = row[fsel], par[fsel], single[fsel]
            last = np.searchsorted(pk, fpar * scale + frow, side="left") - 1   # most recent at this parent
            start = np.searchsorted(pk, fpar * scale, side="left")
            ok = last >= start
            frow, fsingle, last, start = frow[ok], fsingle[ok], last[ok], start[ok]
            # the most recent one is a sibling unless both touch only the same node; then the one before
            # its run (which touches another node, or several)
            same = (fsingle >= 0) & (psingle[last] == fsingle)
            q = np.where(same, run_start[last] - 1, last)
            has = q >= start
            frow, prow = frow[has], prow_all[q[has]]
        if len(frow) == 0:
            continue
        gap = cyc[frow] - cyc[prow]
        bad = gap < rule.latency
        if not bad.any():
            continue
        # a wide following command may look back at several nodes: report the binding (most recent) one
        best: dict[int, int] = {}
        for f, p in zip(frow[bad].tolist(), prow[bad].tolist(), strict=True):
            if p > best.get(f, -1):
                best[f] = p
        for f, p in best.items():
            found.append((f, "timing", rule.text(spec, int(cmd[p]), int(cyc[f] - cyc[p]))))
    return found


def _check_state(spec: DramSpec, a: dict[str, np.ndarray], ev_row: np.ndarray,
                 ev_bank: np.ndarray) -> list[tuple[int, str, str]]:
    """Bank state per (bank, buffer), vectorised: open/close events keyed by (bank, buffer, log row); a
    requirement looks back to the most recent event of its (bank, buffer)."""
    n = len(a["cmd"])
    names = spec.command_names
    nbuf = len(spec.row_buffers)
    cmd = a["cmd"]
    eff = np.array([c.effect for c in spec.commands], dtype=object)[cmd][ev_row]
    buf = np.array([c.buffer for c in spec.commands], dtype=np.int64)[cmd][ev_row]
    logged_row = a["row"][ev_row]
    scale = np.int64(n + 1)

    is_open_ev = eff == Effect.OPEN.value
    ev_mask = is_open_ev | np.isin(eff, _CLOSES)
    key = (ev_bank * nbuf + buf)[ev_mask] * scale + ev_row[ev_mask]
    order = np.argsort(key, kind="stable")
    key, st_open, st_row = key[order], is_open_ev[ev_mask][order], logged_row[ev_mask][order]

    def state(q_rows: np.ndarray, q_slot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(open?, open row) of (bank, buffer) slots just before the given log rows."""
        pos = np.searchsorted(key, q_slot * scale + q_rows, side="left")
        start = np.searchsorted(key, q_slot * scale, side="left")
        has = pos > start
        last = np.where(has, pos - 1, 0)
        if len(key) == 0:
            return np.zeros(len(q_rows), bool), np.full(len(q_rows), -1, np.int64)
        is_open = has & st_open[last]
        return is_open, np.where(is_open, st_row[last], -1)

    problems: dict[int, list[str]] = defaultdict(list)
    buffers = spec.row_buffers

    # open: its buffer closed, the row not open in another buffer
    q = np.nonzero(is_open_ev)[0]
    is_open, orow = state(ev_row[q], ev_bank[q] * nbuf + buf[q])
    for e, r in zip(q[is_open].tolist(), orow[is_open].tolist(), strict=True):
        i = int(ev_row[e])
        problems[i].append(f"{names[cmd[i]]} opens row {logged_row[e]} but buffer {buffers[buf[e]]} of "
                           f"{_bank_text(spec, int(ev_bank[e]))} has row {r} open (close it first)")
    for other in range(nbuf):
        sel = q[(buf[q] != other) & (logged_row[q] >= 0)]
        is_open, orow = state(ev_row[sel], ev_bank[sel] * nbuf + other)
        clash = is_open & (orow == logged_row[sel])
        for e in sel[clash].tolist():
            i = int(ev_row[e])
            problems[i].append(f"{names[cmd[i]]} opens row {logged_row[e]} but row {logged_row[e]} is open in "
                               f"buffer {buffers[other]} of {_bank_text(spec, int(ev_bank[e]))}")
    # column access and compute: their buffer open, at the logged row
    q = np.nonzero(np.isin(eff, _OPEN_NEEDS))[0]
    is_open, orow = state(ev_row[q], ev_bank[q] * nbuf + buf[q])
    for e in q[~is_open].tolist():
        i = int(ev_row[e])
        problems[i].append(f"{names[cmd[i]]} needs buffer {buffers[buf[e]]} open but it is closed in "
                           f"{_bank_text(spec, int(ev_bank[e]))} (open a row first)")
    wrong = is_open & (logged_row[q] >= 0) & (orow != logged_row[q])
    for e, r in zip(q[wrong].tolist(), orow[wrong].tolist(), strict=True):
        i = int(ev_row[e])
        problems[i].append(f"{names[cmd[i]]} to row {logged_row[e]} but row {r} is open in buffer "
                           f"{buffers[buf[e]]} of {_bank_text(spec, int(ev_bank[e]))}")
    # refresh: every buffer of every bank closed
    q = np.nonzero(eff == Effect.REFRESH.value)[0]
    for b in range(nbuf):
        is_open, orow = state(ev_row[q], ev_bank[q] * nbuf + b)
        for e, r in zip(q[is_open].tolist(), orow[is_open].tolist(), strict=True):
            i = int(ev_row[e])
            problems[i].append(f"{names[cmd[i]]} needs every buffer closed but buffer {buffers[b]} of "
                               f"{_bank_text(spec, int(ev_bank[e]))} has row {r} open (close it first)")

    found = []
    for i, items in problems.items():
        shown = items[:4] + ([f"... and {len(items) - 4} more bank(s)"] if len(items) > 4 else [])
        found.append((i, "state", "; ".join(shown)))
    return found


def summary(violations: list[Violation]) -> dict[str, Any]:
    """Counts by kind and by rule text (for reports)."""
    by_kind: dict[str, int] = defaultdict(int)
    by_rule: dict[str, int] = defaultdict(int)
    for v in violations:
        by_kind[v.kind] += 1
        by_rule[v.rule.split(", got")[0]] += 1
    return {"total": len(violations), "by_kind": dict(by_kind), "by_rule": dict(by_rule)}
