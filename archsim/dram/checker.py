"""Independent re-verification of a DRAM command log against the constraint table of its standard.

The simulator (archsim.engine.dram_kernel) enforces timing in *forward* form: issuing a command raises a
table of per-node "ready" cycles. This checker deliberately uses a different algorithm, the *look-back*
form of the definition in jedec.yaml:

    at `level`, a following command may issue no earlier than `latency` cycles after the `window`-th most
    recent preceding command issued to the same node of that level.

For every constraint rule it gathers, per node of the rule's level, the ordered history of the preceding
commands, and for every following command looks back to the window-th most recent one (the log
is sorted once per level by (node, log position); the most recent preceding command is a running maximum
over that order, the window-th most recent a `searchsorted`, so each rule is checked for the whole log at
once in numpy).
"Issued before" means "earlier in the log": the log is in issue order, and two commands in one cycle (a
row and a column command on a dual command bus) are ordered as logged.

Besides timing it checks:

* cycles are non-decreasing;
* command-bus occupancy: "single" = at most one command per channel per cycle, "dual" = at most one
  row-bus and one column-bus command per channel per cycle;
* bank state: ACT only to a closed bank; RD/WR/RDA/WRA only to an open bank whose open row equals the
  logged row (when the logged row is >= 0); REFab only when every bank of its rank is closed; REFpb only
  to a closed bank. PRE/PREA/RDA/WRA close banks (a PRE to a closed bank is a legal no-op, as in JEDEC).
  Commands are classified by their `effect` in the standard, not by name, and a command wider than a bank
  acts on every bank below its node: `open_all` (an all-bank ACT such as GDDR6-AiM's ACTAB) needs them all
  closed and opens the logged row in each; `close_all` at channel scope closes the whole channel. Effects
  the checker does not model (`pim`: MAC, global-buffer and accumulator commands) change no bank state;
  their timing rows are checked like any other.

Malformed input (missing columns, unknown command names, addresses out of range for the spec) raises
archsim.errors.UserError naming the log row.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from archsim.dram.spec import LEVELS, DramSpec
from archsim.errors import UserError

__all__ = ["Violation", "Rule", "check_log", "rules", "LOG_COLUMNS"]

LOG_COLUMNS = ["cycle", "command", "channel", "pseudochannel", "rank", "bankgroup", "bank", "row", "column"]
ADDR_COLUMNS = ["channel", "pseudochannel", "rank", "bankgroup", "bank"]
_SHORT = ("ch", "pc", "ra", "bg", "ba")


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
    """A timing rule as the checker applies it: following commands `nxt` vs the `window`-th most recent
    command of `prev` at the same node of `level`."""

    level: int
    prev: tuple[int, ...]
    nxt: int
    latency: int
    window: int
    expr: str

    def text(self, names: list[str], prev_cmd: int, got: int) -> str:
        lat = self.expr if self.expr == str(self.latency) else f"{self.expr} = {self.latency}"
        win = "" if self.window == 1 else f" (window {self.window}: {_ordinal(self.window)} most recent)"
        return f"{LEVELS[self.level]}: {names[prev_cmd]} -> {names[self.nxt]}{win} >= {lat}, got {got}"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def rules(spec: DramSpec) -> list[Rule]:
    """The spec's constraint rows as checker rules.

    A row with window 1 is checked pair by pair (the most recent of a set of preceding commands binds, so
    this equals checking the set). Rows with a window > 1 count the window over the *set* of preceding
    commands of the row (rows sharing level, latency expression, window and following command are one
    row of the standard file).
    """
    out: list[Rule] = []
    windowed: dict[tuple[int, int, int, str, int], list[int]] = defaultdict(list)
    for c in spec.constraints:
        if int(c["window"]) <= 1:
            out.append(Rule(int(c["level"]), (int(c["prev"]),), int(c["next"]), int(c["latency"]), 1,
                            str(c.get("expr", c["latency"]))))
        else:
            key = (int(c["level"]), int(c["next"]), int(c["latency"]), str(c.get("expr", c["latency"])),
                   int(c["window"]))
            if int(c["prev"]) not in windowed[key]:
                windowed[key].append(int(c["prev"]))
    for (level, nxt, lat, text, window), prev in windowed.items():
        out.append(Rule(level, tuple(prev), nxt, lat, window, text))
    return out


# ------------------------------------------------------------------------------------------------
# input validation


def _int_column(df: pd.DataFrame, col: str) -> np.ndarray:
    s = df[col]
    if pd.api.types.is_integer_dtype(s.dtype):
        return s.to_numpy(dtype=np.int64)
    try:
        values = pd.to_numeric(s, errors="coerce")
    except Exception:  # pragma: no cover - pandas raises TypeError for nested objects
        values = pd.Series([np.nan] * len(s))
    arr = values.to_numpy(dtype=np.float64, na_value=np.nan) if len(s) else np.zeros(0)
    bad = ~np.isfinite(arr) | (arr != np.round(arr))
    if bad.any():
        i = int(np.argmax(bad))
        raise UserError(f"command log row {i}: {col} = {s.iloc[i]!r} is not an integer")
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
        raise UserError(f"command log row {i}: unknown command {df['command'].iloc[i]!r} for {spec.standard}; "
                        f"known: {', '.join(names)}")
    out = {"cmd": cmd}
    for col in ["cycle", *ADDR_COLUMNS, "row", "column"]:
        out[col] = _int_column(df, col)
    if (out["cycle"] < 0).any():
        i = int(np.argmax(out["cycle"] < 0))
        raise UserError(f"command log row {i}: cycle {out['cycle'][i]} is negative")
    for col, n in zip(ADDR_COLUMNS, spec.counts, strict=True):
        v = out[col]
        bad = (v < 0) | (v >= n)
        if bad.any():
            i = int(np.argmax(bad))
            hint = "; was the log made with another --channels or preset?" if col == "channel" else ""
            raise UserError(f"command log row {i}: {col} {v[i]} out of range 0..{n - 1} for {spec.name} "
                            f"({n} {col}{'s' if n != 1 else ''}){hint}")
    for col, n in (("row", spec.rows), ("column", spec.columns)):
        v = out[col]
        bad = (v < -1) | (v >= n)
        if bad.any():
            i = int(np.argmax(bad))
            raise UserError(f"command log row {i}: {col} {v[i]} out of range -1..{n - 1} for {spec.name}")
    return out


# ------------------------------------------------------------------------------------------------
# the checks


def _node_ids(spec: DramSpec, a: dict[str, np.ndarray]) -> list[np.ndarray]:
    """node[k][i]: flat id of the level-k node that log row i addresses (levels below a command's scope are
    meaningless for it and never used)."""
    nodes = []
    acc = np.zeros(len(a["cmd"]), dtype=np.int64)
    for col, n in zip(ADDR_COLUMNS, spec.counts, strict=True):
        acc = acc * n + a[col]
        nodes.append(acc.copy())
    return nodes


class _History:
    """Per-level views of the log sorted by (node, log position): the per-node issue histories."""

    def __init__(self, nodes: list[np.ndarray], n: int):
        self.n = n
        self.scale = np.int64(n + 1)
        self.keys = [nd * self.scale + np.arange(n, dtype=np.int64) for nd in nodes]
        self.order = [np.argsort(k, kind="stable") for k in self.keys]
        self._last: dict[tuple[int, tuple[int, ...]], np.ndarray] = {}

    def last(self, level: int, prev_mask: np.ndarray, key: tuple[int, ...]) -> np.ndarray:
        """For every log row, the log row of the most recent earlier command of `prev_mask` at the same
        level-`level` node, or -1. One pass: in (node, position) order, a running maximum of the keys of
        the preceding commands; a row with none in its node sees a sentinel just below its node's keys."""
        cached = self._last.get((level, key))
        if cached is not None:
            return cached
        order, keys = self.order[level], self.keys[level]
        k = keys[order]
        node_base = k - (k % self.scale)
        vals = np.where(prev_mask[order], k, node_base - 1)
        run = np.maximum.accumulate(vals)
        before = np.empty_like(run)            # exclusive: commands strictly earlier in the log
        before[0] = -1
        before[1:] = run[:-1]
        out = np.full(self.n, -1, dtype=np.int64)
        found = before >= node_base
        out[order[found]] = before[found] - node_base[found]
        self._last[(level, key)] = out
        return out

    def window_back(self, level: int, prev_idx: np.ndarray, next_idx: np.ndarray,
                    window: int) -> tuple[np.ndarray, np.ndarray]:
        """For each following command (log rows next_idx), the window-th most recent preceding command (log
        rows prev_idx, ascending) at the same node. Returns (which of next_idx have one, its log row)."""
        if len(prev_idx) == 0 or len(next_idx) == 0:
            return np.zeros(len(next_idx), dtype=bool), np.zeros(0, dtype=np.int64)
        keys = self.keys[level]
        pkey = keys[prev_idx]
        order = np.argsort(pkey, kind="stable")
        pkey, prow = pkey[order], prev_idx[order]
        qkey = keys[next_idx]
        pos = np.searchsorted(pkey, qkey, side="left")                       # strictly earlier ones
        start = np.searchsorted(pkey, qkey - qkey % self.scale, side="left")  # first one at this node
        has = (pos - start) >= window
        return has, prow[pos[has] - window]


def check_log(spec: DramSpec, log_df: pd.DataFrame) -> list[Violation]:
    """Re-verify a command log (columns LOG_COLUMNS, in issue order) against `spec`. Returns the violations,
    ordered by log row (empty list = the log is legal)."""
    a = _decode(spec, log_df)
    n = len(a["cmd"])
    names = spec.command_names
    found: list[tuple[int, str, str]] = []  # (log row, kind, rule text)
    if n == 0:
        return []
    cyc = a["cycle"]
    cmd = a["cmd"]

    # -- order
    back = np.nonzero(cyc[1:] < cyc[:-1])[0] + 1
    for i in back.tolist():
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

    # -- timing
    nodes = _node_ids(spec, a)
    hist = _History(nodes, n)
    by_cmd = [np.nonzero(cmd == c)[0] for c in range(len(names))]
    for rule in rules(spec):
        nxt = by_cmd[rule.nxt]
        if len(nxt) == 0 or all(len(by_cmd[p]) == 0 for p in rule.prev):
            continue
        if rule.window == 1:
            last = hist.last(rule.level, np.isin(cmd, rule.prev), rule.prev)[nxt]
            has = last >= 0
            prow = last[has]
        else:
            prev = np.sort(np.concatenate([by_cmd[p] for p in rule.prev]))
            has, prow = hist.window_back(rule.level, prev, nxt, rule.window)
        if not has.any():
            continue
        frow = nxt[has]
        gap = cyc[frow] - cyc[prow]
        bad = gap < rule.latency
        for i, j, g in zip(frow[bad].tolist(), prow[bad].tolist(), gap[bad].tolist(), strict=True):
            found.append((i, "timing", rule.text(names, int(cmd[j]), g)))

    # -- bank state
    found.extend(_check_state(spec, a, nodes))

    found.sort(key=lambda f: f[0])
    out = []
    for i, kind, text in found:
        out.append(Violation(index=i, cycle=int(cyc[i]), command=names[cmd[i]],
                             address=tuple(int(a[c][i]) for c in ADDR_COLUMNS),  # type: ignore[arg-type]
                             row=int(a["row"][i]), rule=text, kind=kind))
    return out


def _check_state(spec: DramSpec, a: dict[str, np.ndarray], nodes: list[np.ndarray]) -> list[tuple[int, str, str]]:
    """Bank-state rules, vectorised: every command becomes per-bank events (a command wider than a bank
    expands to every bank below its node); a requirement looks back to the most recent open/close event of
    its bank."""
    n = len(a["cmd"])
    names = spec.command_names
    effect = np.array([c.effect for c in spec.commands], dtype=object)
    cmd_scope = np.array([c.scope for c in spec.commands], dtype=np.int64)
    eff = effect[a["cmd"]]
    idx = np.arange(n, dtype=np.int64)
    # banks below one node of each level (flat bank ids are nested, so they are contiguous)
    below = [int(np.prod(spec.counts[k + 1:])) for k in range(len(LEVELS))]
    wide = cmd_scope[a["cmd"]] < len(LEVELS) - 1

    def per_bank(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(log row, flat bank) for every bank a command acts on: its own bank, or every bank below the
        node of its scope for a wider command (PREA, REFab: the rank; all-bank PIM commands: the channel)."""
        rows = idx[mask & ~wide]
        out_rows, out_banks = [rows], [nodes[-1][rows]]
        for k in range(len(LEVELS) - 1):
            rows_k = idx[mask & wide & (cmd_scope[a["cmd"]] == k)]
            if len(rows_k):
                banks = nodes[k][rows_k][:, None] * below[k] + np.arange(below[k], dtype=np.int64)[None, :]
                out_rows.append(np.repeat(rows_k, below[k]))
                out_banks.append(banks.reshape(-1))
        return np.concatenate(out_rows), np.concatenate(out_banks)

    # state events: +1 open (row), 0 close
    open_rows, open_banks = per_bank(np.isin(eff, ["open", "open_all"]))
    close_rows, close_banks = per_bank(np.isin(eff, ["close", "close_all", "read_close", "write_close"]))
    ev_row = np.concatenate([open_rows, close_rows])
    ev_bank = np.concatenate([open_banks, close_banks])
    ev_open = np.concatenate([np.ones(len(open_rows), bool), np.zeros(len(close_rows), bool)])
    scale = np.int64(n + 1)
    key = ev_bank * scale + ev_row
    order = np.argsort(key, kind="stable")
    key, ev_row, ev_open = key[order], ev_row[order], ev_open[order]

    def last_state(q_rows: np.ndarray, q_banks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(bank open?, open row or -1) just before each query."""
        pos = np.searchsorted(key, q_banks * scale + q_rows, side="left")
        start = np.searchsorted(key, q_banks * scale, side="left")
        has = pos > start
        last = np.where(has, pos - 1, 0)
        is_open = has & (ev_open[last] if len(ev_open) else np.zeros(len(q_rows), bool))
        orow = np.where(is_open, a["row"][ev_row[last]] if len(ev_row) else -1, -1)
        return is_open, orow

    found: list[tuple[int, str, str]] = []

    def bank_text(b: int) -> str:
        parts = []
        for k in range(len(LEVELS) - 1, 0, -1):
            if spec.counts[k] > 1:
                parts.append(f"{_SHORT[k]}{b % spec.counts[k]}")
            b //= spec.counts[k]
        return " ".join(reversed(parts))

    # ACT, REFpb (one bank) and REFab, all-bank ACT (every bank below the command's node) need closed banks
    q_rows, q_banks = per_bank(np.isin(eff, ["open", "refresh_bank", "open_all", "refresh_all"]))
    is_open, orow = last_state(q_rows, q_banks)
    if is_open.any():
        open_by_row: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for i, b, r in zip(q_rows[is_open].tolist(), q_banks[is_open].tolist(), orow[is_open].tolist(), strict=True):
            open_by_row[i].append((b, r))
        for i, banks in open_by_row.items():
            what = names[a["cmd"][i]]
            if wide[i]:
                listed = ", ".join(f"{bank_text(b)} row {r}" for b, r in banks)
                found.append((i, "state", f"{what} while banks of its {LEVELS[cmd_scope[a['cmd'][i]]]} are open: "
                                          f"{listed} (precharge first)"))
            else:
                found.append((i, "state", f"{what} to an open bank (row {banks[0][1]} is open; precharge first)"))
    # column commands: bank open, at the logged row
    q_rows, q_banks = per_bank(np.isin(eff, ["read", "write", "read_close", "write_close"]))
    is_open, orow = last_state(q_rows, q_banks)
    want = a["row"][q_rows]
    for i in q_rows[~is_open].tolist():
        found.append((i, "state", f"{names[a['cmd'][i]]} to a closed bank (activate first)"))
    wrong = is_open & (want >= 0) & (orow != want)
    for i, r, w in zip(q_rows[wrong].tolist(), orow[wrong].tolist(), want[wrong].tolist(), strict=True):
        found.append((i, "state", f"{names[a['cmd'][i]]} to row {w} but row {r} is open"))
    return found


def summary(violations: list[Violation]) -> dict[str, Any]:
    """Counts by kind and by rule text (for reports)."""
    by_kind: dict[str, int] = defaultdict(int)
    by_rule: dict[str, int] = defaultdict(int)
    for v in violations:
        by_kind[v.kind] += 1
        by_rule[v.rule.split(", got")[0]] += 1
    return {"total": len(violations), "by_kind": dict(by_kind), "by_rule": dict(by_rule)}
