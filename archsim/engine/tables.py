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

from archsim.dram.effects import CODE as EFFECT_CODES
from archsim.dram.roles import close_commands, controller_roles, refresh_busy, refresh_nodes
from archsim.dram.spec import DramSpec

Tables = namedtuple("Tables", [
    "n_cmds", "banks", "n_levels", "K", "n_cells",
    "cmd_scope", "cmd_bus", "cmd_buf", "cmd_effect", "cmd_lat",
    "cmd_busy",                               # a refresh command's busy cycles at its banks (0 other commands)
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


class _Lowering:
    """The steps of `lower`, sharing the channel's geometry and two memos (the nodes of a target at a level,
    and the covers: lowering asks for the same ones many times, ~10^5 on HBM3; memoising them makes it ~10x
    faster without changing what it computes)."""

    def __init__(self, spec: DramSpec) -> None:
        self.spec = spec
        self.B = spec.banks_per_channel
        self.nd = spec.node_of[:self.B]          # channel 0's banks: node ids start at 0 at every level
        self.L = len(spec.levels)
        self.cmds = spec.commands
        self.C = len(self.cmds)
        self.nodes_at = [int(self.nd[:, lv].max()) + 1 for lv in range(self.L)]
        self.parent_node: dict[tuple[int, int], int] = {}
        for lv in range(self.L):
            if spec.level_parent[lv] >= 0:
                for b in range(self.B):
                    self.parent_node[(lv, int(self.nd[b, lv]))] = int(self.nd[b, spec.level_parent[lv]])
        self.nodes_memo: dict[tuple[int, int, int], frozenset[int]] = {}
        self.readers_of: dict[int, list[tuple[int, frozenset[int]]]] = {}  # nxt -> [(cell, readers)], coarse first
        self.cover_memo: dict[tuple[int, frozenset[int]], list[int]] = {}

    def targets(self) -> None:
        """rep[c, b]: the lowest bank of c's target holding bank b; tgt_banks_of[c]: rep -> the target's banks."""
        self.rep = np.zeros((self.C, self.B), dtype=np.int64)
        self.tgt_banks_of: list[dict[int, np.ndarray]] = []
        for c in self.cmds:
            col = self.nd[:, c.scope]
            d: dict[int, np.ndarray] = {}
            for node in np.unique(col):
                banks = np.nonzero(col == node)[0]
                d[int(banks[0])] = banks
                self.rep[c.index, banks] = banks[0]
            self.tgt_banks_of.append(d)

    def read_cells(self) -> None:
        """Anchors (the scope levels of the commands, coarsest first), their cells, and per (command, bank) the
        K cells its target reads (rcell, x n_cmds; padded with a dummy cell that is never raised)."""
        C, B, nd = self.C, self.B, self.nd
        self.anchors = sorted({c.scope for c in self.cmds}, key=lambda lv: (self.nodes_at[lv], lv))
        cell_base = {}
        n_cells = 0
        for a in self.anchors:
            cell_base[a] = n_cells
            n_cells += self.nodes_at[a]
        self.n_cells = n_cells
        dummy = n_cells

        def cells(banks: np.ndarray) -> list[int]:
            out = []
            for a in self.anchors:
                ns = np.unique(nd[banks, a])
                if len(ns) == 1:
                    out.append(cell_base[a] + int(ns[0]))
            return out

        self.cells_of = [{r: cells(b) for r, b in self.tgt_banks_of[ci].items()} for ci in range(C)]
        self.K = max(len(v) for d in self.cells_of for v in d.values())
        self.rcell = np.full((C, B, self.K), dummy * C, dtype=np.int64)
        for ci in range(C):
            for b in range(B):
                cs = self.cells_of[ci][int(self.rep[ci, b])]
                self.rcell[ci, b, :len(cs)] = np.array(cs, dtype=np.int64) * C

    def nodes_of(self, c: int, r: int, lv: int) -> frozenset[int]:
        key = (c, r, lv)
        got = self.nodes_memo.get(key)
        if got is None:
            got = self.nodes_memo[key] = frozenset(self.nd[self.tgt_banks_of[c][r], lv].tolist())
        return got

    def binds(self, row: dict, s_nodes: set[int], r_nodes: set[int]) -> bool:
        if not row["sibling"]:
            return not s_nodes.isdisjoint(r_nodes)
        lv = row["level"]
        pn = self.parent_node
        return any(pn[(lv, x)] == pn[(lv, y)] and x != y for x in s_nodes for y in r_nodes)

    def cover(self, nxt: int, bound: set[int]) -> list[int]:
        """Cells (ids) that together are read by exactly the targets `bound` of command nxt."""
        if not bound:
            return []
        key = (nxt, frozenset(bound))
        got = self.cover_memo.get(key)
        if got is not None:
            return got
        order = self.readers_of.get(nxt)
        if order is None:
            readers: dict[int, set[int]] = {}
            for r, cs in self.cells_of[nxt].items():
                for cell in cs:
                    readers.setdefault(cell, set()).add(r)
            order = self.readers_of[nxt] = [(cell, frozenset(readers[cell]))
                                            for cell in sorted(readers, key=lambda x: (-len(readers[x]), x))]
        left = set(bound)
        out = []
        for cell, rs in order:
            if rs <= bound and rs & left:
                out.append(cell)
                left -= rs
        if left:   # cannot happen: the finest anchor of a command is its own scope (one cell per target)
            raise AssertionError(f"cover failed for {self.cmds[nxt].name}")
        self.cover_memo[key] = out
        return out

    def _raised_by(self, p: int, s_banks: np.ndarray, rows: list[dict],
                   bound_memo: dict[tuple[int, int, bool, frozenset[int]], set[int]]) -> dict[int, int]:
        """For P issued at the target s_banks: cell * n_cmds + next -> the largest latency of its windowless rows."""
        acc: dict[int, int] = {}
        for row in rows:
            if row["window"] > 1:
                continue
            lv = row["level"]
            s_nodes = frozenset(self.nd[s_banks, lv].tolist())
            n = row["next"]
            # which targets of n the row binds depends only on (n, level, sibling, s_nodes): memoised
            key = (n, lv, bool(row["sibling"]), s_nodes)
            bound = bound_memo.get(key)
            if bound is None:
                bound = bound_memo[key] = {r for r in self.tgt_banks_of[n]
                                           if self.binds(row, s_nodes, self.nodes_of(n, r, lv))}
            for cell in self.cover(n, bound):
                idx = cell * self.C + n
                if row["latency"] > acc.get(idx, -1):
                    acc[idx] = row["latency"]
        return acc

    def windowless_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(upd_off, upd_idx, upd_lat): per (prev, bank) the raised (cell, next) pairs with the largest latency."""
        C, B = self.C, self.B
        upd: list[dict[int, int]] = [dict() for _ in range(C * B)]
        by_prev: dict[int, list[dict]] = {}
        for row in self.spec.constraints:
            by_prev.setdefault(row["prev"], []).append(row)
        bound_memo: dict[tuple[int, int, bool, frozenset[int]], set[int]] = {}
        for p in range(C):
            for _s, s_banks in self.tgt_banks_of[p].items():
                acc = self._raised_by(p, s_banks, by_prev.get(p, []), bound_memo)
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
        return upd_off, upd_idx, upd_lat

    def _windows(self) -> list[dict]:
        """The window rows, one per (row group, next): level, latency, window and the preceding commands."""
        windows: dict[tuple[int, int], dict] = {}
        for row in self.spec.constraints:
            if row["window"] > 1:
                key = (row["group"], row["next"])
                w = windows.setdefault(key, {"level": row["level"], "lat": row["latency"], "window": row["window"],
                                             "next": row["next"], "prev": set()})
                w["prev"].add(row["prev"])
        return list(windows.values())

    def _window_pushes(self, wlist: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(win_off, win_wid, win_node): per (prev, bank) the (window id, level node) histories it pushes."""
        C, B = self.C, self.B
        win_push: list[list[tuple[int, int]]] = [[] for _ in range(C * B)]
        for p in range(C):
            for _s, s_banks in self.tgt_banks_of[p].items():
                pushes = []
                for wi, w in enumerate(wlist):
                    if p in w["prev"]:
                        for x in sorted(set(self.nd[s_banks, w["level"]].tolist())):
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
        return win_off, win_wid, win_node

    def window_rows(self) -> dict:
        """The window rows' fields of Tables: per (prev, target) the (window id, level node) histories it
        pushes; per (window, node) the cells (x n_cmds + next) the window's oldest issue + latency raises."""
        C = self.C
        wlist = self._windows()
        win_nodes_max = max((self.nodes_at[w["level"]] for w in wlist), default=1)
        wcov: dict[tuple[int, int], list[int]] = {}
        for wi, w in enumerate(wlist):
            lv = w["level"]
            n = w["next"]
            for x in range(self.nodes_at[lv]):
                bound = {r for r in self.tgt_banks_of[n] if x in self.nodes_of(n, r, lv)}
                wcov[(wi, x)] = [cell * C + n for cell in self.cover(n, bound)]
        win_off, win_wid, win_node = self._window_pushes(wlist)
        n_win = len(wlist)
        wcov_off = np.zeros(max(n_win, 1) * win_nodes_max + 1, dtype=np.int64)
        flat: list[int] = []
        for wi in range(max(n_win, 1)):
            for x in range(win_nodes_max):
                k = wi * win_nodes_max + x
                flat.extend(wcov.get((wi, x), []))
                wcov_off[k + 1] = len(flat)
        win_w = np.array([w["window"] for w in wlist] or [1], dtype=np.int64)
        return dict(win_off=win_off, win_wid=win_wid, win_node=win_node, win_w=win_w,
                    win_lat=np.array([w["lat"] for w in wlist] or [0], dtype=np.int64),
                    wcov_off=wcov_off, wcov_idx=np.array(flat or [0], dtype=np.int64), n_win=max(n_win, 1),
                    n_win_nodes=win_nodes_max, max_window=int(win_w.max()))

    def target_lists(self) -> tuple[np.ndarray, np.ndarray]:
        """(tgt_off, tgt_banks): the banks of (c, rep[c, b]) as one flat list."""
        tgt_off = np.zeros(self.C * self.B + 1, dtype=np.int64)
        tb: list[int] = []
        for ci in range(self.C):
            for b in range(self.B):
                banks = self.tgt_banks_of[ci][int(self.rep[ci, b])]
                tb.extend(banks.tolist())
                tgt_off[ci * self.B + b + 1] = len(tb)
        return tgt_off, np.array(tb, dtype=np.int64)


def lower(spec: DramSpec) -> Lowered:
    """Integer tables of one channel of `spec` (every channel is laid out alike)."""
    lo = _Lowering(spec)
    lo.targets()
    lo.read_cells()
    upd_off, upd_idx, upd_lat = lo.windowless_rows()
    windows = lo.window_rows()
    role = controller_roles(spec)
    close_bank, close_wide = close_commands(spec)
    refresh = refresh_nodes(spec, role)
    tgt_off, tgt_banks = lo.target_lists()
    cmds = spec.commands
    tables = Tables(
        n_cmds=lo.C, banks=lo.B, n_levels=lo.L, K=lo.K, n_cells=lo.n_cells + 1,
        cmd_scope=np.array([c.scope for c in cmds], dtype=np.int64),
        cmd_bus=np.array([1 if c.bus == "column" else 0 for c in cmds], dtype=np.int64),
        cmd_buf=np.array([c.buffer for c in cmds], dtype=np.int64),
        cmd_effect=np.array([EFFECT_CODES[c.effect] for c in cmds], dtype=np.int64),
        cmd_lat=np.array([c.latency for c in cmds], dtype=np.int64),
        cmd_busy=np.array([refresh_busy(spec, c.index) for c in cmds], dtype=np.int64),
        rep=lo.rep, tgt_off=tgt_off, tgt_banks=tgt_banks, rcell=lo.rcell,
        upd_off=upd_off, upd_idx=upd_idx, upd_lat=upd_lat, **windows,
        role=role, close_bank=close_bank, close_wide=close_wide,
        ref_level=refresh.level, ref_nodes=refresh.count, ref_node_of=refresh.node_of, ref_off=refresh.off,
        ref_banks=refresh.banks, bank_ref_node=refresh.node_of.copy(),
    )
    return Lowered(spec, tables, lo.anchors)


def coarse_groups(rcell: np.ndarray, cells: int) -> np.ndarray:
    """The group of each local bank (0, 1, ...): banks of one group read the same first `cells` cells (the
    coarsest: rcell lists a target's cells coarsest first) for every command, e.g. with HBM2's pseudochannels the
    channel's and the pseudochannel's, so a command just issued raises those alike for all of them."""
    keys = rcell[:, :, :cells].transpose(1, 0, 2).reshape(rcell.shape[1], -1)
    _, group = np.unique(keys, axis=0, return_inverse=True)
    return group.reshape(-1).astype(np.int64)


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
