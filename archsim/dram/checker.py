"""Independent re-verification of a DRAM command log against the constraint table of its standard.

The simulator (archsim.engine.dram_kernel) enforces timing in *forward* form: issuing a command raises a
table of per-node "ready" cycles. This checker deliberately uses a different algorithm, the *look-back*
form of the definition in jedec.yaml:

    at `level`, a following command may issue no earlier than `latency` cycles after the `window`-th most
    recent preceding command issued to the same node of that level.

For every constraint rule it gathers, per node of the rule's level, the ordered history of the preceding
commands, and for every following command looks back to the window-th most recent one (numpy
`searchsorted` over (node, log position) keys, so each rule is checked for the whole log at once).
"Issued before" means "earlier in the log": the log is in issue order, and two commands in one cycle (a
row and a column command on a dual command bus) are ordered as logged.

Besides timing it checks:

* cycles are non-decreasing;
* command-bus occupancy: "single" = at most one command per channel per cycle, "dual" = at most one
  row-bus and one column-bus command per channel per cycle;
* bank state: ACT only to a closed bank; RD/WR/RDA/WRA only to an open bank whose open row equals the
  logged row (when the logged row is >= 0); REFab only when every bank of its rank is closed; REFpb only
  to a closed bank. PRE/PREA/RDA/WRA close banks (a PRE to a closed bank is a legal no-op, as in JEDEC).
  Commands are classified by their `effect` in the standard, not by name; effects the checker does not
  model (e.g. `pim`) change no state.

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
    cmd_col = df["command"].astype(str).to_numpy()
    uniq, inv = np.unique(cmd_col, return_inverse=True) if len(cmd_col) else (np.array([], dtype=str),
                                                                              np.zeros(0, dtype=np.int64))
    lut = np.array([index.get(u, -1) for u in uniq], dtype=np.int64)
    cmd = lut[inv] if len(uniq) else np.zeros(0, dtype=np.int64)
    if (cmd < 0).any():
        i = int(np.argmax(cmd < 0))
        raise UserError(f"command log row {i}: unknown command {cmd_col[i]!r} for {spec.standard}; "
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


def _look_back(node: np.ndarray, prev_idx: np.ndarray, next_idx: np.ndarray, window: int,
               n: int) -> tuple[np.ndarray, np.ndarray]:
    """For each following command (log rows next_idx) find the window-th most recent preceding command
    (log rows prev_idx) at the same node. Returns (which of next_idx have one, the log row of that one)."""
    if len(prev_idx) == 0 or len(next_idx) == 0:
        return np.zeros(len(next_idx), dtype=bool), np.zeros(0, dtype=np.int64)
    scale = np.int64(n + 1)
    pkey = node[prev_idx] * scale + prev_idx
    order = np.argsort(pkey, kind="stable")
    pkey = pkey[order]
    prow = prev_idx[order]
    qnode = node[next_idx] * scale
    pos = np.searchsorted(pkey, qnode + next_idx, side="left")       # preceding ones strictly earlier
    start = np.searchsorted(pkey, qnode, side="left")                # first one at this node
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
    by_cmd = [np.nonzero(cmd == c)[0] for c in range(len(names))]
    for rule in rules(spec):
        nxt = by_cmd[rule.nxt]
        if len(nxt) == 0:
            continue
        prev = by_cmd[rule.prev[0]] if len(rule.prev) == 1 else np.sort(np.concatenate([by_cmd[p] for p in rule.prev]))
        has, prow = _look_back(nodes[rule.level], prev, nxt, rule.window, n)
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
    """Bank-state rules, vectorised: every command becomes per-bank events (rank-wide commands expand to
    all banks of their rank); a requirement looks back to the most recent open/close event of its bank."""
    n = len(a["cmd"])
    names = spec.command_names
    effect = np.array([c.effect for c in spec.commands], dtype=object)
    eff = effect[a["cmd"]]
    bank = nodes[4]
    rank = nodes[2]
    bpr = spec.banks_per_rank
    idx = np.arange(n, dtype=np.int64)

    def per_bank(mask: np.ndarray, rank_wide: bool) -> tuple[np.ndarray, np.ndarray]:
        rows = idx[mask]
        if not rank_wide:
            return rows, bank[rows]
        banks = (rank[rows] * bpr)[:, None] + np.arange(bpr, dtype=np.int64)[None, :]
        return np.repeat(rows, bpr), banks.reshape(-1)

    # state events: +1 open (row), 0 close
    open_rows, open_banks = per_bank(eff == "open", False)
    close_rows1, close_banks1 = per_bank(np.isin(eff, ["close", "read_close", "write_close"]), False)
    close_rows2, close_banks2 = per_bank(eff == "close_all", True)
    ev_row = np.concatenate([open_rows, close_rows1, close_rows2])
    ev_bank = np.concatenate([open_banks, close_banks1, close_banks2])
    ev_open = np.concatenate([np.ones(len(open_rows), bool), np.zeros(len(close_rows1) + len(close_rows2), bool)])
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
    bank_text = lambda b: f"bg{(b % bpr) // spec.counts[4]} ba{b % spec.counts[4]}"  # noqa: E731

    # ACT, REFpb: bank must be closed
    for what in ("open", "refresh_bank"):
        q_rows, q_banks = per_bank(eff == what, False)
        is_open, orow = last_state(q_rows, q_banks)
        for i, r in zip(q_rows[is_open].tolist(), orow[is_open].tolist(), strict=True):
            found.append((i, "state", f"{names[a['cmd'][i]]} to an open bank (row {r} is open; precharge first)"))
    # REFab: every bank of the rank closed
    q_rows, q_banks = per_bank(eff == "refresh_all", True)
    is_open, orow = last_state(q_rows, q_banks)
    if is_open.any():
        open_by_row: dict[int, list[str]] = defaultdict(list)
        for i, b, r in zip(q_rows[is_open].tolist(), q_banks[is_open].tolist(), orow[is_open].tolist(), strict=True):
            open_by_row[i].append(f"{bank_text(b)} row {r}")
        for i, banks in open_by_row.items():
            found.append((i, "state", f"{names[a['cmd'][i]]} while banks of the rank are open: {', '.join(banks)}"))
    # column commands: bank open, at the logged row
    q_rows, q_banks = per_bank(np.isin(eff, ["read", "write", "read_close", "write_close"]), False)
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
