"""Lower a DRAM standard once to the integer tables the channel kernel runs on.

Everything the kernel knows about a device comes from here: command effects, buses, buffers, completion
latencies, the roles the controller needs (the ACT/PRE/RD/WR of the memory buffer, refresh, closes), and the
constraint rows in *forward* form.

Forward form. The kernel keeps, per channel, "ready cells": ready[cell, cmd] is a cycle before which `cmd`
may not issue to any target that reads that cell. A target (the node of a command's scope) reads one cell
per *anchor level* that contains all its banks (anchors are the levels some command is scoped to), so a
command's earliest cycle is the max of K numbers. Issuing P at target s raises, for every constraint row
(L, P, F, latency), the cells that exactly cover the targets of F the row binds (docs/channel-engine.md,
section 4): a cell is raised only if every target reading it is bound, coarse cells first. The cover is
computed here by brute force over banks, so the semantics (wide commands count at every node their banks
touch; sibling rows) live in one place and the kernel only does max() over precomputed lists.
`check_cover` re-derives the bound targets from the cells and is run by the tests.
"""
from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass

import numpy as np

from archsim.dram.spec import DramSpec
from archsim.errors import ConfigError

EFFECT_CODES = {"open": 0, "close": 1, "read": 2, "write": 3, "read_close": 4, "write_close": 5, "refresh": 6,
                "compute": 7, "transfer": 8, "update": 9, "update_close": 10}
(E_OPEN, E_CLOSE, E_READ, E_WRITE, E_READ_CLOSE, E_WRITE_CLOSE, E_REFRESH, E_COMPUTE, E_TRANSFER, E_UPDATE,
 E_UPDATE_CLOSE) = range(11)
# roles of the rw (FR-FCFS) source and the refresh manager: indices into Tables.role. R_UPD / R_UPDA: the
# near-memory update command (one column command for an rmw request) and its closing form; -1 when the
# standard has none (an rmw is then RD, ALU latency, WR)
R_ACT, R_PRE, R_RD, R_WR, R_RDA, R_WRA, R_REFAB, R_REFPB, R_UPD, R_UPDA = range(10)
N_ROLES = 10
ROLE_NEEDS = {R_ACT: ("open", "ACT"), R_PRE: ("close", "PRE"), R_RD: ("read", "RD"), R_WR: ("write", "WR"),
              R_RDA: ("read_close", "RDA"), R_WRA: ("write_close", "WRA")}

Tables = namedtuple("Tables", [
    "n_cmds", "banks", "n_levels", "K", "n_cells",
    "cmd_scope", "cmd_bus", "cmd_buf", "cmd_effect", "cmd_lat",
    "rep", "tgt_off", "tgt_banks",          # rep[c, b]: lowest bank of c's target holding b; banks of (c, rep)
    "rcell",                                  # rcell[c, b, k]: read cells (x n_cmds) of c's target holding b
    "upd_off", "upd_idx", "upd_lat",          # per (c, b): flat indices cell * n_cmds + next, latency
    "win_off", "win_wid", "win_node", "win_w", "win_lat", "wcov_off", "wcov_idx",  # window rows
    "n_win", "n_win_nodes", "max_window",
    "role", "close_bank", "close_wide",       # role cmds; per buffer: bank-scope close, widest close per level
    "ref_level", "ref_nodes", "ref_node_of", "ref_off", "ref_banks",   # refresh nodes of one channel
    "bank_ref_node",
])


@dataclass
class Lowered:
    spec: DramSpec
    tables: Tables
    anchors: list[int]


def _tables_error(spec: DramSpec, key: str, problem: str) -> ConfigError:
    return ConfigError(key, problem, source=f"standard {spec.standard}")


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
                raise _tables_error(spec, "constraints", (
                    f"{spec.levels[r['level']]}: {r['prev_name']} -> {r['next_name']} >= {r['latency']} has no "
                    f"row binding {spec.commands[c].name} at least as long; the engine needs "
                    f"{spec.commands[c].name} never to be ready before {spec.commands[p].name}"))


def lower(spec: DramSpec) -> Lowered:
    """Integer tables of one channel of `spec` (every channel is laid out alike)."""
    B = spec.banks_per_channel
    nd = spec.node_of[:B]                       # channel 0's banks: node ids start at 0 at every level
    L = len(spec.levels)
    cmds = spec.commands
    C = len(cmds)
    parent = spec.level_parent
    nodes_at = [int(nd[:, lv].max()) + 1 for lv in range(L)]

    # targets: for command c, the banks of each node of its scope
    rep = np.zeros((C, B), dtype=np.int64)
    tgt_banks_of: list[dict[int, np.ndarray]] = []
    for c in cmds:
        col = nd[:, c.scope]
        d: dict[int, np.ndarray] = {}
        for node in np.unique(col):
            banks = np.nonzero(col == node)[0]
            d[int(banks[0])] = banks
            rep[c.index, banks] = banks[0]
        tgt_banks_of.append(d)

    # anchors: the scope levels of the commands, coarsest (fewest nodes) first
    anchors = sorted({c.scope for c in cmds}, key=lambda lv: (nodes_at[lv], lv))
    cell_base = {}
    n_cells = 0
    for a in anchors:
        cell_base[a] = n_cells
        n_cells += nodes_at[a]
    dummy = n_cells                              # never raised: pads targets that read fewer cells

    def read_cells(c: int, banks: np.ndarray) -> list[int]:
        out = []
        for a in anchors:
            ns = np.unique(nd[banks, a])
            if len(ns) == 1:
                out.append(cell_base[a] + int(ns[0]))
        return out

    cells_of: list[dict[int, list[int]]] = [{r: read_cells(ci, b) for r, b in tgt_banks_of[ci].items()} for ci in range(C)]
    K = max(len(v) for d in cells_of for v in d.values())
    rcell = np.full((C, B, K), dummy * C, dtype=np.int64)
    for ci in range(C):
        for b in range(B):
            cs = cells_of[ci][int(rep[ci, b])]
            rcell[ci, b, :len(cs)] = np.array(cs, dtype=np.int64) * C

    # Lowering asks for the same target's nodes, and the same covers, many times (HBM3: ~10^5 times):
    # both are memoised, which makes lowering ~10x faster without changing what it computes.
    nodes_memo: dict[tuple[int, int, int], frozenset[int]] = {}

    def nodes_of(c: int, r: int, lv: int) -> frozenset[int]:
        key = (c, r, lv)
        got = nodes_memo.get(key)
        if got is None:
            got = nodes_memo[key] = frozenset(nd[tgt_banks_of[c][r], lv].tolist())
        return got

    parent_node = {}
    for lv in range(L):
        if parent[lv] >= 0:
            for b in range(B):
                parent_node[(lv, int(nd[b, lv]))] = int(nd[b, parent[lv]])

    def binds(row: dict, s_nodes: set[int], r_nodes: set[int]) -> bool:
        if not row["sibling"]:
            return not s_nodes.isdisjoint(r_nodes)
        lv = row["level"]
        return any(parent_node[(lv, x)] == parent_node[(lv, y)] and x != y for x in s_nodes for y in r_nodes)

    readers_of: dict[int, list[tuple[int, frozenset[int]]]] = {}   # nxt -> [(cell, its readers)], coarse first
    cover_memo: dict[tuple[int, frozenset[int]], list[int]] = {}

    def cover(nxt: int, bound: set[int]) -> list[int]:
        """Cells (ids) that together are read by exactly the targets `bound` of command nxt."""
        if not bound:
            return []
        key = (nxt, frozenset(bound))
        got = cover_memo.get(key)
        if got is not None:
            return got
        order = readers_of.get(nxt)
        if order is None:
            readers: dict[int, set[int]] = {}
            for r, cs in cells_of[nxt].items():
                for cell in cs:
                    readers.setdefault(cell, set()).add(r)
            order = readers_of[nxt] = [(cell, frozenset(readers[cell]))
                                       for cell in sorted(readers, key=lambda x: (-len(readers[x]), x))]
        left = set(bound)
        out = []
        for cell, rs in order:
            if rs <= bound and rs & left:
                out.append(cell)
                left -= rs
        if left:   # cannot happen: the finest anchor of a command is its own scope (one cell per target)
            raise AssertionError(f"cover failed for {cmds[nxt].name}")
        cover_memo[key] = out
        return out

    # windowless rows: per (prev, target) the raised (cell, next) pairs with the largest latency
    upd: list[dict[int, int]] = [dict() for _ in range(C * B)]
    by_prev: dict[int, list[dict]] = {}
    for row in spec.constraints:
        by_prev.setdefault(row["prev"], []).append(row)
    windows: dict[tuple[int, int], dict] = {}
    for row in spec.constraints:
        if row["window"] > 1:
            key = (row["group"], row["next"])
            w = windows.setdefault(key, {"level": row["level"], "lat": row["latency"], "window": row["window"],
                                         "next": row["next"], "prev": set()})
            w["prev"].add(row["prev"])
    bound_memo: dict[tuple[int, int, bool, frozenset[int]], set[int]] = {}
    for p in range(C):
        for _s, s_banks in tgt_banks_of[p].items():
            acc: dict[int, int] = {}
            for row in by_prev.get(p, []):
                if row["window"] > 1:
                    continue
                lv = row["level"]
                s_nodes = frozenset(nd[s_banks, lv].tolist())
                n = row["next"]
                # which targets of n the row binds depends only on (n, level, sibling, s_nodes): memoised
                key = (n, lv, bool(row["sibling"]), s_nodes)
                bound = bound_memo.get(key)
                if bound is None:
                    bound = bound_memo[key] = {r for r in tgt_banks_of[n] if binds(row, s_nodes, nodes_of(n, r, lv))}
                for cell in cover(n, bound):
                    idx = cell * C + n
                    if row["latency"] > acc.get(idx, -1):
                        acc[idx] = row["latency"]
            for b in s_banks:
                upd[p * B + int(b)] = acc
    upd_off = np.zeros(C * B + 1, dtype=np.int64)
    for k in range(C * B):
        upd_off[k + 1] = upd_off[k] + len(upd[k])
    upd_idx = np.zeros(max(int(upd_off[-1]), 1), dtype=np.int64)
    upd_lat = np.zeros(max(int(upd_off[-1]), 1), dtype=np.int64)
    for k in range(C * B):
        items = sorted(upd[k].items())
        a = upd_off[k]
        for j, (idx, lat) in enumerate(items):
            upd_idx[a + j] = idx
            upd_lat[a + j] = lat

    # window rows: per (prev, target) the (window id, level node) histories it pushes; per (window, node) the
    # cells (x n_cmds + next) the window's oldest issue + latency raises
    wlist = list(windows.values())
    win_nodes_max = max((nodes_at[w["level"]] for w in wlist), default=1)
    wcov: dict[tuple[int, int], list[int]] = {}
    for wi, w in enumerate(wlist):
        lv = w["level"]
        n = w["next"]
        for x in range(nodes_at[lv]):
            bound = {r for r in tgt_banks_of[n] if x in nodes_of(n, r, lv)}
            wcov[(wi, x)] = [cell * C + n for cell in cover(n, bound)]
    win_push: list[list[tuple[int, int]]] = [[] for _ in range(C * B)]
    for p in range(C):
        for _s, s_banks in tgt_banks_of[p].items():
            pushes = []
            for wi, w in enumerate(wlist):
                if p in w["prev"]:
                    for x in sorted(set(nd[s_banks, w["level"]].tolist())):
                        pushes.append((wi, x))
            for b in s_banks:
                win_push[p * B + int(b)] = pushes
    win_off = np.zeros(C * B + 1, dtype=np.int64)
    for k in range(C * B):
        win_off[k + 1] = win_off[k] + len(win_push[k])
    nwp = max(int(win_off[-1]), 1)
    win_wid = np.zeros(nwp, dtype=np.int64)
    win_node = np.zeros(nwp, dtype=np.int64)
    for k in range(C * B):
        for j, (wi, x) in enumerate(win_push[k]):
            win_wid[win_off[k] + j] = wi
            win_node[win_off[k] + j] = x
    n_win = len(wlist)
    wcov_off = np.zeros(max(n_win, 1) * win_nodes_max + 1, dtype=np.int64)
    flat: list[int] = []
    for wi in range(max(n_win, 1)):
        for x in range(win_nodes_max):
            k = wi * win_nodes_max + x
            flat.extend(wcov.get((wi, x), []))
            wcov_off[k + 1] = len(flat)
    wcov_idx = np.array(flat or [0], dtype=np.int64)
    win_w = np.array([w["window"] for w in wlist] or [1], dtype=np.int64)
    win_lat = np.array([w["lat"] for w in wlist] or [0], dtype=np.int64)

    # roles
    def find(effect: str, scope_bank: bool = True, buf: int = 0) -> int:
        bank_level = L - 1 if "bank" not in spec.levels else spec.levels.index("bank")
        got = [c.index for c in cmds if c.effect == effect and c.buffer == buf
               and ((c.scope == bank_level) == scope_bank)]
        return got[0] if got else -1

    role = np.full(N_ROLES, -1, dtype=np.int64)
    for r, (eff, name) in ROLE_NEEDS.items():
        role[r] = find(eff)
        if role[r] < 0:
            raise _tables_error(spec, "commands", f"no bank-scope `{eff}` command of buffer "
                                f"{spec.row_buffers[0]} (the controller's {name})")
    role[R_UPD], role[R_UPDA] = find("update"), find("update_close")
    if (role[R_UPD] < 0) != (role[R_UPDA] < 0):
        have, miss = ("update", "update_close") if role[R_UPD] >= 0 else ("update_close", "update")
        raise _tables_error(spec, "commands", f"a bank-scope `{have}` command of buffer {spec.row_buffers[0]} "
                            f"needs a bank-scope `{miss}` one too (the closed-row policy closes with it)")
    _check_close_forms_not_looser(spec, role)
    role[R_REFPB] = find("refresh")
    wide_ref = [c for c in cmds if c.effect == "refresh" and c.index != role[R_REFPB]]
    role[R_REFAB] = wide_ref[0].index if wide_ref else -1
    nbuf = len(spec.row_buffers)
    def narrowest_close(k: int) -> int:
        """The bank-scope close of buffer k, else its narrowest close (the NeuPIMs PIM buffer closes only
        channel-wide), else -1. Used where one bank's buffer must be closed (docs/channel-engine.md 3.3)."""
        got = [c for c in cmds if c.effect == "close" and c.buffer == k]
        return min(got, key=lambda c: (-c.scope, c.index)).index if got else -1

    close_bank = np.array([narrowest_close(k) for k in range(nbuf)], dtype=np.int64)
    close_wide = np.full((nbuf, L), -1, dtype=np.int64)
    bank_level = spec.levels.index("bank")
    for c in cmds:
        if c.effect == "close" and c.scope != bank_level and close_wide[c.buffer, c.scope] < 0:
            close_wide[c.buffer, c.scope] = c.index     # equally wide closes: the lowest command index

    # refresh nodes: the nodes of the all-bank refresh command's scope
    ref_level = cmds[role[R_REFAB]].scope if role[R_REFAB] >= 0 else 0
    col = nd[:, ref_level]
    ref_nodes = int(col.max()) + 1
    ref_off = np.zeros(ref_nodes + 1, dtype=np.int64)
    ref_banks = np.zeros(B, dtype=np.int64)
    k = 0
    for node in range(ref_nodes):
        banks = np.nonzero(col == node)[0]
        ref_banks[k:k + len(banks)] = banks
        k += len(banks)
        ref_off[node + 1] = k

    tgt_off = np.zeros(C * B + 1, dtype=np.int64)
    tb: list[int] = []
    for ci in range(C):
        for b in range(B):
            banks = tgt_banks_of[ci][int(rep[ci, b])]
            tb.extend(banks.tolist())
            tgt_off[ci * B + b + 1] = len(tb)
    tables = Tables(
        n_cmds=C, banks=B, n_levels=L, K=K, n_cells=n_cells + 1,
        cmd_scope=np.array([c.scope for c in cmds], dtype=np.int64),
        cmd_bus=np.array([1 if c.bus == "column" else 0 for c in cmds], dtype=np.int64),
        cmd_buf=np.array([c.buffer for c in cmds], dtype=np.int64),
        cmd_effect=np.array([EFFECT_CODES[c.effect] for c in cmds], dtype=np.int64),
        cmd_lat=np.array([c.latency for c in cmds], dtype=np.int64),
        rep=rep, tgt_off=tgt_off, tgt_banks=np.array(tb, dtype=np.int64), rcell=rcell,
        upd_off=upd_off, upd_idx=upd_idx, upd_lat=upd_lat,
        win_off=win_off, win_wid=win_wid, win_node=win_node, win_w=win_w, win_lat=win_lat,
        wcov_off=wcov_off, wcov_idx=wcov_idx, n_win=max(n_win, 1), n_win_nodes=win_nodes_max,
        max_window=int(win_w.max()),
        role=role, close_bank=close_bank, close_wide=close_wide,
        ref_level=ref_level, ref_nodes=ref_nodes, ref_node_of=col.astype(np.int64), ref_off=ref_off,
        ref_banks=ref_banks, bank_ref_node=col.astype(np.int64),
    )
    return Lowered(spec, tables, anchors)


def check_cover(low: Lowered) -> None:
    """Exactness of the forward form: for every (preceding command P at target s, following command F at
    target r), the latency the lowered cells impose equals the max latency over the windowless rows that
    bind that pair by the definition (docs/channel-engine.md, section 4). Raises AssertionError."""
    spec, t = low.spec, low.tables
    B = t.banks
    nd = spec.node_of[:B]
    par_of = {}
    for lv, par in enumerate(spec.level_parent):
        if par >= 0:
            for b in range(B):
                par_of[(lv, int(nd[b, lv]))] = int(nd[b, par])

    def banks(c: int, r: int) -> np.ndarray:
        return t.tgt_banks[t.tgt_off[c * B + r]:t.tgt_off[c * B + r + 1]]

    rows_by_pair: dict[tuple[int, int], list[dict]] = {}
    for row in spec.constraints:
        if row["window"] <= 1:
            rows_by_pair.setdefault((row["prev"], row["next"]), []).append(row)
    for (p, n), rows in rows_by_pair.items():
        for s in np.unique(t.rep[p]).tolist():
            lo, hi = t.upd_off[p * B + s], t.upd_off[p * B + s + 1]
            raised = dict(zip(t.upd_idx[lo:hi].tolist(), t.upd_lat[lo:hi].tolist(), strict=True))
            for r in np.unique(t.rep[n]).tolist():
                want = -1
                for row in rows:
                    lv = row["level"]
                    xs, ys = set(nd[banks(p, s), lv].tolist()), set(nd[banks(n, r), lv].tolist())
                    if row["sibling"]:
                        ok = any(par_of[(lv, x)] == par_of[(lv, y)] and x != y for x in xs for y in ys)
                    else:
                        ok = not xs.isdisjoint(ys)
                    if ok:
                        want = max(want, row["latency"])
                got = max((raised.get(int(c) + n, -1) for c in t.rcell[n, r]), default=-1)
                if got != want:
                    raise AssertionError(f"{spec.commands[p].name} at bank {s} -> {spec.commands[n].name} at bank "
                                         f"{r}: lowered latency {got}, definition {want}")
