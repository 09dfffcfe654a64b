"""The reference channel scheduler: a naive, per-cycle controller in plain Python that implements
docs/channel-engine.md literally (including its "Clarifications (reference scheduler)" section).

It exists to be compared cycle for cycle with the fast kernel (archsim.engine.channel) on random input, so
it favours the obvious over the fast: every cycle every channel takes one scheduling step; candidates are
recomputed from scratch; timing legality is decided by looking back over this controller's own issue
history with the constraint rows of the standard (section 4), never through lowered tables.

The only shortcut is skipping cycles in which provably nothing can happen (no command issued in the last
step, and no arrival, refresh due, timing bound or starvation promotion falls before the next cycle it
jumps to). `skip_idle=False` turns it off; the tests check both give the same results.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from archsim.dram.controller import ControllerConfig
from archsim.dram.effects import CLOSES, NEEDS_OPEN, Effect
from archsim.dram.spec import DramSpec

__all__ = ["ReferenceController", "SEG_START", "SEG_END", "LOG_COLUMNS"]

SEG_START = 1
SEG_END = 2
LOG_COLUMNS = ["cycle", "command", "channel", "pseudochannel", "rank", "bankgroup", "bank", "row", "column",
               "source"]
READ, WRITE, RMW = 0, 1, 2
HIT, MISS, CONFLICT = 0, 1, 2
NONE = 3                         # served without a command of its own (posted_writes, merge_reads)
ARBITRATIONS = ("frfcfs", "priority", "blocked", "threshold", "threshold_row", "threshold_yield")
NEVER = 1 << 62


@dataclass(eq=False)
class _Request:
    id: int
    channel: int
    bank: int
    row: int
    column: int
    kind: int
    arrive: int
    tag: int
    source: int
    age: int = -1
    enq: int = -1
    cls: int = HIT
    act_pinned: bool = False     # active_buffer: its ACT issued, its column command not yet
    rd_issue: int = -1           # rmw: cycle of its RD (pinned until its WR)
    posted: bool = False         # posted_writes: acknowledged, its write command not yet issued
    followers: list = field(default_factory=list)   # merge_reads: reads merged into it (done with it)

    @property
    def pinned(self) -> bool:
        return self.act_pinned or self.rd_issue >= 0


@dataclass(eq=False)
class _StreamCmd:
    cmd: int
    target: tuple[int, int]      # (scope level, node)
    row: int
    column: int
    flags: int
    est: int
    tag: int
    at: int
    channel: int
    source: int
    age: int = -1


@dataclass
class _Candidate:
    age: int
    cmd: int
    target: tuple[int, int]
    row: int
    column: int
    source: int
    req: _Request | None = None      # rw: the request it serves
    stream_head: bool = False        # stream: the head itself (not a close or restore before it)
    pinned_ok: bool = False          # a pinned request's own column command (may pass refresh and pins)


@dataclass
class _RefreshNode:
    node: int
    banks: list[int]
    due: int
    period: int                      # cycles from one refresh due of the node to its next
    pending: bool = False
    ref_bank: int = 0
    rfm_at: int = -1                 # rfm_threshold: the cycle an RFM of the node was requested (-1 none pending)


@dataclass
class _SourceState:
    """Per channel and source."""
    read_q: list[_Request] = field(default_factory=list)
    write_q: list[_Request] = field(default_factory=list)
    write_mode: bool = False
    stream: list[_StreamCmd] = field(default_factory=list)    # entered, not yet issued (head first)
    opens: list[tuple[int, tuple[int, int], int, int]] = field(default_factory=list)  # (cmd, target, row, col)
    seg_end: bool = False          # its last issued command had SEG_END (blocked arbitration boundary)
    starve_since: int = -1


class _Channel:
    def __init__(self, ref: ReferenceController, ch: int):
        self.ch = ch
        nb = ref.spec.banks_per_channel
        self.first_bank = ch * nb
        nbuf = len(ref.spec.row_buffers)
        self.open = {b: [-1] * nbuf for b in range(self.first_bank, self.first_bank + nb)}
        self.opener = {b: [-1] * nbuf for b in range(self.first_bank, self.first_bank + nb)}
        # column commands served by the open row of buffer 0 since it opened (row_hit_cap)
        self.row_hits = dict.fromkeys(self.open, 0)
        self.history: dict[int, list[tuple[int, tuple[int, int]]]] = defaultdict(list)  # cmd -> (cycle, target)
        self.seq = 0
        self.src = [_SourceState() for _ in ref.sources]
        self.active = -1            # blocked arbitration: the active source
        self.held: set[int] = set()  # sources the threshold gate holds back this step
        self.refresh: list[_RefreshNode] = []
        # activates per bank since its node's last RFM request (rfm_threshold)
        self.acts = dict.fromkeys(self.open, 0)
        if ref.refresh_mode == "none" and ref.rfm_threshold > 0:
            # RFM alone: the all-bank refresh's nodes, never due
            scope = ref.spec.commands[ref.ref_ab].scope
            nodes = sorted({int(ref.node_of[b, scope]) for b in self.open})
            self.refresh = [_RefreshNode(n, list(ref.banks((scope, n))), 1 << 62, 1 << 62) for n in nodes]
        elif ref.refresh_mode != "none":
            scope = ref.spec.commands[ref.ref_ab].scope
            nodes = sorted({int(ref.node_of[b, scope]) for b in self.open})
            if ref.refresh_mode == "perbank":
                self.refresh = [_RefreshNode(n, list(ref.banks((scope, n))), ref.t["nREFIpb"], ref.t["nREFIpb"])
                                for n in nodes]
            elif ref.cfg.refresh_stagger:
                # the nodes (ranks) in turn, one every nREFI // nodes cycles: node i first at (i + 1) times that
                gap = ref.t["nREFI"] // len(nodes)
                self.refresh = [_RefreshNode(n, list(ref.banks((scope, n))), (i + 1) * gap, gap * len(nodes))
                                for i, n in enumerate(nodes)]
            else:
                self.refresh = [_RefreshNode(n, list(ref.banks((scope, n))), ref.t["nREFI"], ref.t["nREFI"])
                                for n in nodes]
        # bank_command_queue (3.6): each bank's command queue (requests in the order they moved down), the local
        # bank whose queue issued last, and the writes left to move in the current drain
        self.cq: dict[int, list[_Request]] = {b: [] for b in self.open}
        self.cq_rr = 0
        self.drain = 0


def _controller_config(controller: ControllerConfig | dict | None,
                       active_buffer: bool | None) -> tuple[ControllerConfig, bool]:
    """The controller config and whether the active buffer is on (an argument, else the config's key)."""
    if isinstance(controller, ControllerConfig):
        cfg = controller
    else:
        data = dict(controller or {})
        ab = data.pop("active_buffer", None)
        if ab is not None and "active_buffer" not in ControllerConfig.__dataclass_fields__:
            active_buffer = bool(ab) if active_buffer is None else active_buffer
        elif ab is not None:
            data["active_buffer"] = ab
        cfg = ControllerConfig.from_dict(data)
    if active_buffer is None:
        active_buffer = bool(getattr(cfg, "active_buffer", False))
    return cfg, bool(active_buffer)


class ReferenceController:
    """See docs/channel-engine.md. API shared with archsim.engine.memory.MemorySystem."""

    def __init__(self, spec: DramSpec, controller: ControllerConfig | dict | None = None,
                 sources: list[dict[str, str]] | None = None, arbitration: str = "frfcfs",
                 starvation_cap: int = 0, threshold: int = 0, stream_refresh: str = "split",
                 alu_latency: int = 4, active_buffer: bool | None = None, skip_idle: bool = True,
                 log: bool = True, rmw: str = "command"):
        # `log` is accepted for API compatibility with the fast engine; the reference always logs
        cfg, active_buffer = _controller_config(controller, active_buffer)
        if arbitration not in ARBITRATIONS:
            raise ValueError(f"arbitration must be one of {', '.join(ARBITRATIONS)}, got {arbitration!r}")
        if stream_refresh not in ("split", "wait"):
            raise ValueError(f"stream_refresh must be split or wait, got {stream_refresh!r}")
        if rmw not in ("command", "rd_wr"):
            raise ValueError(f"rmw must be command or rd_wr, got {rmw!r}")
        self.spec = spec
        self.cfg = cfg
        self.t = spec.timing
        self.arbitration = arbitration
        self.starvation_cap = int(starvation_cap)
        self.threshold = int(threshold)
        self.stream_refresh = stream_refresh
        self.alu_latency = int(alu_latency)
        self.active_buffer = bool(active_buffer)
        self.pinned_leave_queue = bool(cfg.pinned_leave_queue)
        self.skip_idle = skip_idle
        self.sources = list(sources or [{"name": "mem", "kind": "rw"}])
        for s in self.sources:
            if s.get("kind") not in ("rw", "stream"):
                raise ValueError(f"source {s!r}: kind must be rw or stream")
        self.cmdq = int(cfg.bank_command_queue)
        self._cq_n = 0                 # completions recorded under bank_command_queue (their order, 3.6)
        if self.cmdq and ([s["kind"] for s in self.sources] != ["rw"] or self.active_buffer):
            raise ValueError("bank_command_queue serves one rw source without the active buffer")
        self.source_index = {s["name"]: i for i, s in enumerate(self.sources)}
        self.refresh_mode = cfg.refresh
        self.closed_rows = cfg.row_policy == "closed"
        self.high = max(1, round(cfg.write_high_watermark * cfg.write_queue))
        self.low = round(cfg.write_low_watermark * cfg.write_queue)
        self.dual = spec.command_bus == "dual"
        # stream_refresh wait: longer segments are split by refresh instead of waiting for it (per-bank refresh:
        # the interval between two refreshes of a node)
        self.split_above = (self.t["nREFI"] - self.t["nRFC"] if self.refresh_mode != "perbank"
                            else self.t["nREFIpb"] - self.t["nRFCpb"])

        self.node_of = np.asarray(spec.node_of)
        self.n_levels = self.node_of.shape[1]
        self.bank_level = next(k for k in range(self.n_levels)
                               if len(np.unique(self.node_of[:, k])) == spec.total_banks)
        self._banks: dict[tuple[int, int], tuple[int, ...]] = {}
        self._nodes: dict[tuple[int, int], tuple[list[frozenset], list[dict[int, frozenset]]]] = {}
        self._rules = self._build_rules()
        self._find_commands(spec, rmw)
        self._setup_rfm(spec, cfg)
        if self.refresh_mode != "none" and (self.ref_ab < 0 or (self.refresh_mode == "perbank" and self.ref_pb < 0)):
            raise ValueError(f"{spec.standard} has no {self.refresh_mode} refresh command")

        self.channels = [_Channel(self, c) for c in range(spec.channels)]
        if self.refresh_mode == "allbank" and cfg.refresh_stagger and self.channels[0].refresh:
            # staggered: a node's refreshes are ranks * (nREFI // ranks) apart, which may be a little under nREFI
            self.split_above = self.channels[0].refresh[0].period - self.t["nRFC"]
        self.ports: list[dict[str, Any]] = []
        self.requests: list[_Request] = []
        self._done: list[int] = []
        self._stream_pending: list[_StreamCmd] = []
        self._log: list[tuple] = []
        self._completions: list[tuple[int, int, int]] = []    # (done, issue order, tag)
        self.now = 0
        self._wake = NEVER

    def _find_commands(self, spec: DramSpec, rmw: str) -> None:
        """The standard's command of each effect the controller issues (bank scope, buffer 0), -1 if none."""
        cmds = spec.commands
        b0 = self.bank_level

        def find(effect: str, buffer: int = 0, scope: int | None = b0) -> int:
            for c in cmds:
                if c.effect == effect and c.buffer == buffer and (scope is None or c.scope == scope):
                    return c.index
            return -1

        self.ACT, self.PRE = find(Effect.OPEN), find(Effect.CLOSE)
        self.RD, self.WR = find(Effect.READ), find(Effect.WRITE)
        self.RDA, self.WRA = find(Effect.READ_CLOSE), find(Effect.WRITE_CLOSE)
        # near-memory update command (one column command per rmw) and its closing form, if the standard has them
        self.UPD, self.UPDA = find(Effect.UPDATE), find(Effect.UPDATE_CLOSE)
        if rmw == "rd_wr":          # RD, ALU latency, WR even where the standard has an update command
            self.UPD = self.UPDA = -1
        # closing one bank's buffer: its bank-scope close, else the narrowest close of that buffer
        self.bank_close = []
        for b in range(len(spec.row_buffers)):
            closes = [c for c in cmds if c.effect == Effect.CLOSE and c.buffer == b]
            self.bank_close.append(min(closes, key=lambda c: (-c.scope, c.index)).index if closes else -1)
        refs = [c for c in cmds if c.effect == Effect.REFRESH and c.index != spec.rfm_command]
        self.ref_ab = min(refs, key=lambda c: (len(self.banks((c.scope, 0))) * -1, c.index)).index if refs else -1
        self.ref_pb = find(Effect.REFRESH)

    # ---- the device: targets, node sets, timing rows ---------------------------------------------
    def banks(self, target: tuple[int, int]) -> tuple[int, ...]:
        """Every bank of a target (scope level, node), ascending."""
        if target not in self._banks:
            level, node = target
            self._banks[target] = tuple(int(b) for b in np.nonzero(self.node_of[:, level] == node)[0])
        return self._banks[target]

    def target_of(self, cmd: int, bank: int) -> tuple[int, int]:
        scope = self.spec.commands[cmd].scope
        return scope, int(self.node_of[bank, scope])

    def _node_sets(self, target: tuple[int, int]) -> tuple[list[frozenset], list[dict[int, frozenset]]]:
        """Per level: the level-nodes the target's banks touch; and, per parent node, those under it."""
        if target not in self._nodes:
            banks = list(self.banks(target))
            sets, by_parent = [], []
            for lv in range(self.n_levels):
                sets.append(frozenset(int(x) for x in self.node_of[banks, lv]))
                par = self.spec.level_parent[lv]
                groups: dict[int, set[int]] = defaultdict(set)
                if par >= 0:
                    for b in banks:
                        groups[int(self.node_of[b, par])].add(int(self.node_of[b, lv]))
                by_parent.append({p: frozenset(v) for p, v in groups.items()})
            self._nodes[target] = (sets, by_parent)
        return self._nodes[target]

    def _build_rules(self) -> dict[int, list[dict[str, Any]]]:
        """Constraint rows per following command; one row of the standard keeps its preceding set (the
        window counts over the set)."""
        merged: dict[tuple[int, int], dict[str, Any]] = {}
        for n, c in enumerate(self.spec.constraints):
            key = (int(c.get("group", -1 - n)), int(c["next"]))
            r = merged.setdefault(key, {"level": int(c["level"]), "prev": set(), "latency": int(c["latency"]),
                                        "window": int(c["window"]), "sibling": bool(c.get("sibling", False))})
            r["prev"].add(int(c["prev"]))
        out: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for (_, nxt), r in merged.items():
            out[nxt].append(r)
        return out

    def earliest(self, ch: _Channel, cmd: int, target: tuple[int, int], t: int) -> int:
        """Section 4 by look-back: the earliest cycle >= 0 at which `cmd` to `target` satisfies every row
        against the commands issued so far (exact whenever it is > t)."""
        best = 0
        f_sets, f_par = self._node_sets(target)
        for r in self._rules.get(cmd, ()):
            lv, lat, window = r["level"], r["latency"], r["window"]
            if r["sibling"]:
                for p in r["prev"]:
                    for cycle, ptarget in reversed(ch.history.get(p, ())):
                        if cycle + lat <= best or cycle + lat <= t:
                            break
                        p_par = self._node_sets(ptarget)[1][lv]
                        if any(pi in p_par and (len(fx) > 1 or len(p_par[pi]) > 1 or fx != p_par[pi])
                               for pi, fx in f_par[lv].items()):
                            best = max(best, cycle + lat)
                            break
                continue
            for x in f_sets[lv]:
                recent: list[int] = []          # cycles of the latest `window` preceding commands at node x
                for p in r["prev"]:
                    k = 0
                    for cycle, ptarget in reversed(ch.history.get(p, ())):
                        if cycle + lat <= t or k == window:
                            break
                        if x in self._node_sets(ptarget)[0][lv]:
                            recent.append(cycle)
                            k += 1
                if len(recent) >= window:
                    best = max(best, sorted(recent, reverse=True)[window - 1] + lat)
        return best

    def ready(self, ch: _Channel, cmd: int, target: tuple[int, int], t: int, extra: int = 0) -> bool:
        """Timing-legal at t (and not before `extra`); remembers when a not-ready command could become ready."""
        e = max(self.earliest(ch, cmd, target, t), extra)
        if e > t:
            self._wake = min(self._wake, e)
            return False
        return True

    # ---- input ----------------------------------------------------------------------------------
    def add_port(self, source: str = "mem", width: int = 1) -> int:
        s = self.source_index.get(source)
        if s is None or self.sources[s]["kind"] != "rw":
            raise ValueError(f"add_port: {source!r} is not an rw source")
        self.ports.append({"source": s, "width": int(width), "backlog": [], "head": 0})
        return len(self.ports) - 1

    def enqueue_requests(self, port: int, channel, bank, row, column, kind, arrive, tag) -> np.ndarray:
        cols = [np.atleast_1d(np.asarray(x, dtype=np.int64)) for x in (channel, bank, row, column, kind, arrive, tag)]
        n = max(len(c) for c in cols)
        cols = [np.broadcast_to(c, (n,)) for c in cols]
        p = self.ports[port]
        ids = []
        for ch, b, r, c, k, a, tg in zip(*cols, strict=True):
            if int(self.node_of[b, 0]) != ch:
                raise ValueError(f"request to bank {b} is not in channel {ch}")
            if self.cmdq and int(k) == RMW:
                raise ValueError("bank_command_queue takes reads and writes only")
            req = _Request(len(self.requests), int(ch), int(b), int(r), int(c), int(k), max(0, int(a)), int(tg),
                           p["source"])
            self.requests.append(req)
            self._done.append(-1)
            p["backlog"].append(req)
            ids.append(req.id)
        return np.array(ids, dtype=np.int64)

    def enqueue_stream(self, source: str, channel, cmd, bank, row, column, flags=0, est=0, tag=-1, at=0) -> None:
        s = self.source_index.get(source)
        if s is None or self.sources[s]["kind"] != "stream":
            raise ValueError(f"enqueue_stream: {source!r} is not a stream source")
        cols = [np.atleast_1d(np.asarray(x, dtype=np.int64)) for x in (channel, cmd, bank, row, column, flags, est,
                                                                         tag, at)]
        n = max(len(c) for c in cols)
        for ch, c, b, r, col, fl, est_, tg, at_ in zip(*[np.broadcast_to(x, (n,)) for x in cols], strict=True):
            if int(self.node_of[b, 0]) != ch:
                raise ValueError(f"stream command to bank {b} is not in channel {ch}")
            sc = _StreamCmd(int(c), self.target_of(int(c), int(b)), int(r), int(col), int(fl), int(est_), int(tg),
                            int(at_), int(ch), s)
            self._stream_pending.append(sc)

    # ---- results --------------------------------------------------------------------------------
    @property
    def request_done(self) -> np.ndarray:
        return np.array(self._done, dtype=np.int64)

    @property
    def request_class(self) -> np.ndarray:
        return np.array([r.cls for r in self.requests], dtype=np.int64)

    def completions(self) -> list[tuple[int, int]]:
        return [(tag, done) for done, _, tag in sorted(self._completions)]

    def command_log(self) -> pd.DataFrame:
        return pd.DataFrame(self._log, columns=LOG_COLUMNS)

    def _address(self, bank: int) -> list[int]:
        out = []
        for n in self.spec.counts[::-1]:
            out.append(bank % n)
            bank //= n
        return out[::-1]

    # ---- the run --------------------------------------------------------------------------------
    def _busy(self) -> bool:
        if any(p["head"] < len(p["backlog"]) for p in self.ports) or self._stream_pending:
            return True
        if self.cmdq:
            # posted writes are done (acknowledged) while they wait: the run ends without them
            return any(self._done[r.id] < 0 for ch in self.channels
                       for r in ch.src[0].read_q + ch.src[0].write_q + [x for q in ch.cq.values() for x in q])
        return any(s.read_q or s.write_q or s.stream for ch in self.channels for s in ch.src)

    def run(self, max_cycles: int = 10**7) -> bool:
        """Step every channel every cycle until every request and stream command has issued (its completing
        command). Returns False if max_cycles passed first."""
        t = self.now
        while self._busy():
            if t >= max_cycles:
                self.now = t
                return False
            self._wake = NEVER
            self._intake(t)
            issued = False
            for ch in self.channels:
                issued |= self._step(ch, t)
            if issued or not self.skip_idle or not self._busy():
                t += 1
            else:
                t = max(t + 1, min(self._wake, max_cycles))
        self.now = t
        return True

    def _intake(self, t: int) -> None:
        """Section 2: ports offer requests (port order from port t mod ports), then streams take the commands
        enqueued for t."""
        n = len(self.ports)
        for p in (self.ports[(t + i) % n] for i in range(n)):
            offered = 0
            while p["head"] < len(p["backlog"]) and offered < p["width"]:
                req = p["backlog"][p["head"]]
                if req.arrive > t:
                    self._wake = min(self._wake, req.arrive)
                    break
                ch = self.channels[req.channel]
                st = ch.src[p["source"]]
                q, cap = (st.read_q, self.cfg.read_queue) if req.kind == READ else (st.write_q, self.cfg.write_queue)
                if self._occupancy(q) >= cap:
                    break
                if (self.cfg.posted_writes or self.cfg.merge_reads) and self._accept(ch, st, req, t):
                    p["head"] += 1          # answered from (merged into) a waiting write: queued nowhere
                    offered += 1
                    continue
                req.age, req.enq = ch.seq, t
                ch.seq += 1
                q.append(req)
                p["head"] += 1
                offered += 1
            if offered == p["width"] and p["head"] < len(p["backlog"]):
                self._wake = min(self._wake, t + 1)     # more may be offered next cycle
        keep = []
        for sc in self._stream_pending:
            if sc.at <= t:
                ch = self.channels[sc.channel]
                sc.age = ch.seq
                ch.seq += 1
                ch.src[sc.source].stream.append(sc)
            else:
                self._wake = min(self._wake, sc.at)
                keep.append(sc)
        self._stream_pending = keep

    def _accept(self, ch: _Channel, st: _SourceState, req: _Request, t: int) -> bool:
        """posted_writes / merge_reads (3.6) at acceptance: True if the request is queued nowhere (answered from
        or merged into a waiting write, or merged into a waiting read); a posted write is done at t + 1."""
        addr = (req.bank, req.row, req.column)
        if self.cfg.posted_writes:
            if any(x.kind == WRITE and (x.bank, x.row, x.column) == addr for x in st.write_q + ch.cq[req.bank]):
                req.enq, req.cls = t, NONE
                self._done[req.id] = t + 1
                self._cq_complete(t + 1, req.tag)
                return True
            if req.kind == WRITE:
                self._done[req.id] = t + 1
                self._cq_complete(t + 1, req.tag)
                req.posted = True
                return False
        if req.kind == READ and self.cfg.merge_reads:
            first = next((x for x in st.read_q + ch.cq[req.bank]
                          if x.kind == READ and (x.bank, x.row, x.column) == addr), None)
            if first is not None:
                req.enq, req.cls = t, NONE
                first.followers.append(req)
                return True
        return False

    def _occupancy(self, q: list) -> int:
        """Entries a read or write queue holds: its requests, but not the pinned ones under
        `pinned_leave_queue` (they have left for the active buffer)."""
        return sum(not r.pinned for r in q) if self.pinned_leave_queue else len(q)

    # ---- one scheduling step of one channel (section 3) -----------------------------------------
    def _step(self, ch: _Channel, t: int) -> bool:
        if self.cmdq:
            return self._cq_step(ch, t)
        issued_by: set[int] = set()
        had_ready: set[int] = set()
        # 3.1 refresh
        any_issue = self._refresh_step(ch, t)
        row_free = not any_issue
        col_free = self.dual or not any_issue

        promoted, may_issue = self._step_decisions(ch, t)

        def arbitrate(bus: str | None) -> None:
            nonlocal any_issue
            cands = [self._candidates(ch, s, t) for s in range(len(ch.src))]
            for s, (col, row) in enumerate(cands):
                if col is not None or row is not None:
                    had_ready.add(s)
            win = self._choose(cands, bus, promoted, may_issue)
            if win is not None:
                self._issue_candidate(ch, t, win)
                issued_by.add(win.source)
                any_issue = True

        if not self.dual:
            if col_free:
                arbitrate(None)
            else:
                # the refresh took the only bus: sources with a ready candidate still wait (starvation)
                for s in range(len(ch.src)):
                    if any(c is not None for c in self._candidates(ch, s, t)):
                        had_ready.add(s)
        else:
            if col_free:
                arbitrate("column")
            if row_free:
                arbitrate("row")

        self._update_starvation(ch, t, issued_by, had_ready)
        return any_issue

    def _step_decisions(self, ch: _Channel, t: int) -> tuple[list[bool], list[bool]]:
        """Per-step decisions, taken once before anything of the sources issues: each rw source's write mode,
        which sources the starvation cap promotes, and which may issue (blocked: the active one; threshold:
        the first, and the others while the first has fewer than `threshold` queued or when promoted)."""
        for s, st in enumerate(ch.src):
            if self.sources[s]["kind"] == "rw":
                qr, qw = self._occupancy(st.read_q), self._occupancy(st.write_q)
                if not st.write_mode and (qw >= self.high or (qr == 0 and qw > 0)):
                    st.write_mode = True
                elif st.write_mode and (qw == 0 or (qw <= self.low and qr > 0)):
                    st.write_mode = False
        promoted = [self.starvation_cap > 0 and st.starve_since >= 0 and t - st.starve_since >= self.starvation_cap
                    for st in ch.src]
        if self.arbitration == "blocked":
            self._update_active(ch)
        first = ch.src[0]
        first_queued = self._occupancy(first.read_q) + self._occupancy(first.write_q) + len(first.stream)
        may_issue = [True] * len(ch.src)
        ch.held = set()             # the sources the threshold gate holds back this step
        for s in range(len(ch.src)):
            if self.arbitration == "blocked":
                may_issue[s] = s == ch.active
            elif self.arbitration.startswith("threshold") and s > 0:
                may_issue[s] = first_queued < self.threshold or promoted[s]
                if not may_issue[s]:
                    ch.held.add(s)
        return promoted, may_issue

    def _update_starvation(self, ch: _Channel, t: int, issued_by: set[int], had_ready: set[int]) -> None:
        """A source that issued or has no work is not starving; one that had a ready command and did not issue
        starts starving now; the loop wakes when a starving source reaches the cap."""
        for s, st in enumerate(ch.src):
            if s in issued_by or not self._has_work(st, s):
                st.starve_since = -1
            elif s in had_ready and st.starve_since < 0:
                st.starve_since = t
            if self.starvation_cap > 0 and st.starve_since >= 0:
                self._wake = min(self._wake, max(t + 1, st.starve_since + self.starvation_cap))

    # ---- bank_command_queue (3.6): DRAMsim3's transaction queues in front of per-bank command queues ---------
    def _cq_step(self, ch: _Channel, t: int) -> bool:
        """Refresh, then the bank queues' command (single bus: unless a refresh command issued; dual bus: a
        second one asked for after any first, issued if on the other bus), then one transaction moves down."""
        issued = self._refresh_step(ch, t)
        first_bus = "row"
        if not issued:
            pick = self._cq_pick(ch, t)
            if pick is not None:
                self._cq_issue(ch, t, *pick)
                issued = True
                first_bus = self.spec.commands[pick[2]].bus
        if issued and self.dual:
            pick = self._cq_pick(ch, t)
            if pick is not None:
                if self.spec.commands[pick[2]].bus != first_bus:
                    self._cq_issue(ch, t, *pick)
                else:
                    ch.cq_rr = pick[0]
        moved = self._cq_move(ch, t)
        return issued or moved

    def _cq_pick(self, ch: _Channel, t: int) -> tuple[int, int, int] | None:
        """(local bank, queue position, command): the first ready command of the first bank queue that has
        one, visiting them round robin from the one after the last that issued (refresh-blocked ones skipped)."""
        nb = self.spec.banks_per_channel
        blocked = self._refresh_blocked(ch)
        for i in range(nb):
            bl = (ch.cq_rr + 1 + i) % nb
            b = ch.first_bank + bl
            if not ch.cq[b] or b in blocked:
                continue
            got = self._cq_queue_cmd(ch, b, t)
            if got is not None:
                return bl, got[0], got[1]
        return None

    def _cq_queue_cmd(self, ch: _Channel, b: int, t: int) -> tuple[int, int] | None:
        """(position, command): in queue order the first request whose command is timing-ready; a PRE only for
        the first request, when no queued request hits the open row or the row served row_hit_cap column
        commands; a write never passes a read of its address."""
        q = ch.cq[b]
        orow = ch.open[b][0]
        cap = self.cfg.row_hit_cap
        for pos, r in enumerate(q):
            if r.row == orow:
                cmd = self.WR if r.kind == WRITE else self.RD
                if r.kind == WRITE and any(x.kind == READ and (x.row, x.column) == (r.row, r.column) for x in q[:pos]):
                    continue
            elif orow < 0:
                cmd = self.ACT
            else:
                capped = 0 < cap <= ch.row_hits[b]
                if pos > 0 or (not capped and any(x.row == orow for x in q)):
                    continue
                cmd = self.PRE
            if self.ready(ch, cmd, self.target_of(cmd, b), t):
                return pos, cmd
        return None

    def _cq_issue(self, ch: _Channel, t: int, bl: int, pos: int, cmd: int) -> None:
        b = ch.first_bank + bl
        r = ch.cq[b][pos]
        ch.cq_rr = bl
        c = self.spec.commands[cmd]
        col = r.column if c.bus == "column" else -1
        self._issue(ch, t, cmd, self.target_of(cmd, b), r.row, col, self.sources[0]["name"], opener=0)
        if c.effect == Effect.OPEN:
            r.cls = max(r.cls, MISS)
        elif c.effect == Effect.CLOSE:
            r.cls = CONFLICT
        else:
            ch.cq[b].pop(pos)
            if r.posted:
                r.posted = False
                return
            for x in [r, *r.followers]:
                self._done[x.id] = t + c.latency
                self._cq_complete(t + c.latency, x.tag)

    def _cq_complete(self, done: int, tag: int) -> None:
        # in done order, ties in the order they happened (the kernel's ring; a command may complete a read and the
        # reads merged into it, an intake cycle several posted writes)
        if tag >= 0:
            self._cq_n += 1
            self._completions.append((done, self._cq_n, tag))

    def _cq_move(self, ch: _Channel, t: int) -> bool:
        """At most one transaction moves into its bank's command queue: the oldest of the read queue, or of the
        write queue while draining, whose bank queue has room (3.6)."""
        st = ch.src[0]
        if ch.drain == 0:
            empty = not any(ch.cq.values())
            if len(st.write_q) >= self.cfg.write_queue or (len(st.write_q) > self.cfg.write_drain_idle and empty):
                ch.drain = len(st.write_q)
        q = st.write_q if ch.drain > 0 else st.read_q
        for r in sorted(q, key=lambda x: x.age):
            if len(ch.cq[r.bank]) >= self.cmdq:
                continue
            if ch.drain > 0:
                if any(x.kind == READ and (x.bank, x.row, x.column) == (r.bank, r.row, r.column)
                       for x in st.read_q + ch.cq[r.bank]):
                    ch.drain = 0
                    return False
                ch.drain -= 1
            q.remove(r)
            ch.cq[r.bank].append(r)
            return True
        return False

    def _setup_rfm(self, spec: DramSpec, cfg: Any) -> None:
        """Refresh management: an RFM once a bank has opened rfm_threshold rows (the RFM command: the standard's)."""
        self.rfm = spec.rfm_command
        self.rfm_threshold = int(cfg.rfm_threshold)
        if self.rfm_threshold > 0 and self.rfm < 0:
            raise ValueError(f"{spec.standard} has no RFM command")

    def _refresh_step(self, ch: _Channel, t: int) -> bool:
        """3.1: refresh nodes become pending at their due; the first pending node whose wanted command is
        ready issues it (taking the row bus). True if a refresh command issued."""
        issued = False
        for node in ch.refresh:
            if not node.pending:
                if t >= node.due:
                    node.pending = True
                else:
                    self._wake = min(self._wake, node.due)
            if not (node.pending or node.rfm_at >= 0) or issued:
                continue
            want = self._refresh_wanted(ch, node)
            if want is None or not self.ready(ch, want[0], want[1], t):
                continue
            self._issue(ch, t, want[0], want[1], -1, -1, "refresh")
            issued = True
            if want[0] == self.rfm:
                node.rfm_at = -1
            elif self.spec.commands[want[0]].effect == Effect.REFRESH:
                node.pending = False
                node.due += node.period
                if self.refresh_mode == "perbank":
                    node.ref_bank = (node.ref_bank + 1) % len(node.banks)
        return issued

    def _has_work(self, st: _SourceState, s: int) -> bool:
        return bool(st.read_q or st.write_q) if self.sources[s]["kind"] == "rw" else bool(st.stream)

    def _update_active(self, ch: _Channel) -> None:
        n = len(ch.src)
        if ch.active < 0:
            ch.active = next((s for s in range(n) if self._has_work(ch.src[s], s)), -1)
            if ch.active >= 0:
                ch.src[ch.active].seg_end = False
            return
        cur = ch.src[ch.active]
        boundary = not self._has_work(cur, ch.active) or (self.sources[ch.active]["kind"] == "stream" and cur.seg_end)
        if boundary:
            for k in range(1, n + 1):
                s = (ch.active + k) % n
                if self._has_work(ch.src[s], s):
                    ch.active = s
                    ch.src[s].seg_end = False     # a stream that becomes active starts a new segment
                    return

    def _choose(self, cands: list[tuple[_Candidate | None, _Candidate | None]], bus: str | None,
                promoted: list[bool], may_issue: list[bool]) -> _Candidate | None:
        """Section 3.4: the winner for one bus (None = the single command bus)."""
        def pick(c: tuple[_Candidate | None, _Candidate | None]) -> _Candidate | None:
            col, row = c
            if bus == "column":
                return col
            if bus == "row":
                return row
            return col if col is not None else row

        if self.arbitration == "frfcfs":
            cols = [c[0] for c in cands if c[0] is not None]
            rows = [c[1] for c in cands if c[1] is not None]
            if bus in ("column", None) and cols:
                return min(cols, key=lambda c: c.age)
            if bus in ("row", None) and rows:
                return min(rows, key=lambda c: c.age)
            return None
        order = [s for s in range(len(cands)) if promoted[s]] + [s for s in range(len(cands)) if not promoted[s]]
        for s in order:
            if may_issue[s]:
                w = pick(cands[s])
                if w is not None:
                    return w
            elif self.arbitration == "threshold_row" and bus != "row" and cands[s][0] is not None:
                return cands[s][0]      # held back: its column commands (rows it opened) still go
        return None

    # ---- refresh (3.1) --------------------------------------------------------------------------
    def _pinned_banks(self, ch: _Channel) -> set[int]:
        return {r.bank for st in ch.src for r in st.write_q + st.read_q if r.pinned}

    def _widest_close(self, buffer: int, banks: tuple[int, ...]) -> int:
        """The widest close command of `buffer` whose target covers `banks` (lowest index on ties), or -1."""
        best, size = -1, 0
        need = set(banks)
        for c in self.spec.commands:
            if c.effect == Effect.CLOSE and c.buffer == buffer:
                tb = self.banks(self.target_of(c.index, banks[0]))
                if need <= set(tb) and len(tb) > size:
                    best, size = c.index, len(tb)
        return best

    def _refresh_wanted(self, ch: _Channel, node: _RefreshNode) -> tuple[int, tuple[int, int]] | None:
        nbuf = len(self.spec.row_buffers)
        pinned = self._pinned_banks(ch)
        if self.refresh_mode != "perbank":      # all-bank refresh, or an RFM (with all-bank refresh or none)
            banks = tuple(node.banks)
            for buf in range(nbuf):
                open_banks = [b for b in banks if ch.open[b][buf] >= 0]
                if open_banks:
                    c = self._widest_close(buf, banks)
                    target = self.target_of(c, banks[0]) if c >= 0 else self.target_of(self.bank_close[buf],
                                                                                        open_banks[0])
                    c = c if c >= 0 else self.bank_close[buf]
                    return None if pinned & set(self.banks(target)) else (c, target)
            # the periodic refresh first if it fell due no later than the RFM was requested, else the RFM
            final = self.ref_ab if node.pending and (node.rfm_at < 0 or node.due <= node.rfm_at) else self.rfm
            return final, self.target_of(final, banks[0])
        bank = node.banks[node.ref_bank]
        for buf in range(nbuf):
            if ch.open[bank][buf] >= 0:
                return None if bank in pinned else (self.bank_close[buf], self.target_of(self.bank_close[buf], bank))
        return self.ref_pb, self.target_of(self.ref_pb, bank)

    def _refresh_blocked(self, ch: _Channel) -> set[int]:
        out: set[int] = set()
        for node in ch.refresh:
            if node.pending or node.rfm_at >= 0:
                out |= set(node.banks) if self.refresh_mode != "perbank" else {node.banks[node.ref_bank]}
        return out

    # ---- candidates (3.2, 3.3) ------------------------------------------------------------------
    def _candidates(self, ch: _Channel, s: int, t: int) -> tuple[_Candidate | None, _Candidate | None]:
        """(ready column candidate, ready row candidate) of source s."""
        blocked = self._refresh_blocked(ch)
        pinned = self._pinned_banks(ch)
        if self.sources[s]["kind"] == "rw":
            return self._rw_candidates(ch, s, t, blocked, pinned)
        c = self._stream_candidate(ch, s, t, blocked, pinned)
        if c is None:
            return None, None
        return (c, None) if self.spec.commands[c.cmd].bus == "column" else (None, c)

    def _column_cmd(self, ch: _Channel, st: _SourceState, req: _Request, pinned: set[int]) -> int:
        """Read or write command of a hit; with the closed policy its closing form if it is the bank's only
        hit in both queues of the source and no other request pins the bank. An rmw reads first."""
        if req.kind == RMW and self.UPD >= 0:
            plain, closing = self.UPD, self.UPDA
        elif req.kind == RMW and req.rd_issue < 0:
            return self.RD
        else:
            plain, closing = (self.RD, self.RDA) if req.kind == READ else (self.WR, self.WRA)
        if not self.closed_rows or closing < 0:
            return plain
        open_row = ch.open[req.bank][0]
        hits = [r for r in st.read_q + st.write_q if r.bank == req.bank and r.row == open_row]
        others_pin = any(r.pinned and r is not req and r.bank == req.bank
                         for x in ch.src for r in x.read_q + x.write_q)
        return closing if len(hits) == 1 and not others_pin else plain

    def _rw_candidates(self, ch: _Channel, s: int, t: int, blocked: set[int],
                       pinned: set[int]) -> tuple[_Candidate | None, _Candidate | None]:
        st = ch.src[s]
        first = self._pinned_candidate(ch, s, t, pinned)
        if first is not None:
            return first, None
        # under `blocked` only the active source issues, so reservations are ignored (clarification 8)
        reserved = self._reserved(ch) if self.arbitration != "blocked" else set()
        active_q = st.write_q if st.write_mode else st.read_q
        by_bank: dict[int, list[_Request]] = defaultdict(list)
        for r in sorted(active_q, key=lambda r: r.age):
            if not r.pinned and r.bank not in blocked:
                by_bank[r.bank].append(r)
        col_best = row_best = None
        for bank, rs in by_bank.items():
            c = self._bank_candidate(ch, s, t, bank, rs, pinned, reserved)
            if c is None:
                continue
            if self.spec.commands[c.cmd].bus == "column":
                col_best = c if col_best is None or c.age < col_best.age else col_best
            else:
                row_best = c if row_best is None or c.age < row_best.age else row_best
        return col_best, row_best

    def _bank_candidate(self, ch: _Channel, s: int, t: int, bank: int, rs: list[_Request], pinned: set[int],
                        reserved: set[int]) -> _Candidate | None:
        """The command one bank offers for source s's requests `rs` (oldest first), if ready: the first row
        hit's column command (unless row_hit_cap served the open row enough: then the oldest request's), else
        an activate (not of a row another buffer holds, not of a reserved bank) or a precharge (not of a pinned
        bank, only by a source that may close it)."""
        open_row = ch.open[bank][0]
        hits = [r for r in rs if open_row >= 0 and r.row == open_row]
        capped = 0 < self.cfg.row_hit_cap <= ch.row_hits[bank]
        r = hits[0] if hits and not capped else rs[0]
        if open_row >= 0 and r.row == open_row:
            cmd = self._column_cmd(ch, ch.src[s], r, pinned)
        elif open_row < 0:
            cmd = self.ACT
            if any(ch.open[bank][b] == r.row for b in range(1, len(self.spec.row_buffers))) or bank in reserved:
                return None
        else:
            cmd = self.PRE
            if bank in pinned or not self._may_close(ch, s, bank):
                return None
        target = self.target_of(cmd, bank)
        if not self.ready(ch, cmd, target, t):
            return None
        return _Candidate(r.age, cmd, target, r.row if cmd != self.PRE else -1,
                          r.column if self.spec.commands[cmd].bus == "column" else -1, s, r)

    def _pinned_candidate(self, ch: _Channel, s: int, t: int, pinned: set[int]) -> _Candidate | None:
        """The oldest pinned request's column command if it is ready (it passes refresh and pins): pinned
        requests go first."""
        st = ch.src[s]
        for r in sorted(st.read_q + st.write_q, key=lambda r: r.age):
            if not r.pinned:
                continue
            cmd = self._column_cmd(ch, st, r, pinned)
            target = self.target_of(cmd, r.bank)
            extra = r.rd_issue + self.spec.commands[self.RD].latency + self.alu_latency if r.rd_issue >= 0 else 0
            if self.ready(ch, cmd, target, t, extra):
                return _Candidate(r.age, cmd, target, r.row, r.column, s, r, pinned_ok=True)
        return None

    def _may_close(self, ch: _Channel, s: int, bank: int) -> bool:
        """Whether rw source s may precharge bank's row: it opened it, or (threshold_yield) s is the first
        source and the gate holds back the source that opened it (3.2, 3.4)."""
        opener = ch.opener[bank][0]
        return opener == s or (self.arbitration == "threshold_yield" and s == 0 and opener in ch.held)

    def _reserved(self, ch: _Channel) -> set[int]:
        """Banks whose stream head is an open not yet issued (3.3): no rw source may open them."""
        out: set[int] = set()
        for s, st in enumerate(ch.src):
            if self.sources[s]["kind"] == "stream" and st.stream:
                h = st.stream[0]
                if self.spec.commands[h.cmd].effect == Effect.OPEN:
                    out |= set(self.banks(h.target))
        return out

    def _open_or_close(self, ch: _Channel, cmd: int, target: tuple[int, int], row: int) -> tuple[int, tuple[int, int]]:
        """An open of `row` in `target`, or the close that must come first (3.3)."""
        c = self.spec.commands[cmd]
        banks = self.banks(target)
        nbuf = len(self.spec.row_buffers)
        if row >= 0:
            for b in banks:
                for other in range(nbuf):
                    if other != c.buffer and ch.open[b][other] == row:
                        close = self.bank_close[other]
                        return close, self.target_of(close, b)
        open_banks = [b for b in banks if ch.open[b][c.buffer] >= 0]
        if open_banks:
            same_scope = next((x.index for x in self.spec.commands
                               if x.effect == Effect.CLOSE and x.buffer == c.buffer and x.scope == c.scope), -1)
            if same_scope >= 0:
                return same_scope, target
            close = self.bank_close[c.buffer]
            return close, self.target_of(close, open_banks[0])
        return cmd, target

    def _stream_candidate(self, ch: _Channel, s: int, t: int, blocked: set[int],
                          pinned: set[int]) -> _Candidate | None:
        st = ch.src[s]
        if not st.stream:
            return None
        h = st.stream[0]
        hc = self.spec.commands[h.cmd]
        banks = self.banks(h.target)
        if self._refresh_defers(ch, h, banks, t):
            return None
        cmd, target, row, col, is_head = h.cmd, h.target, h.row, h.column, True
        if hc.effect == Effect.OPEN:
            cmd, target = self._open_or_close(ch, h.cmd, h.target, h.row)
            is_head = cmd == h.cmd
        elif hc.effect in NEEDS_OPEN:
            lost = [b for b in banks if ch.open[b][hc.buffer] < 0
                    or (h.row >= 0 and ch.open[b][hc.buffer] != h.row)]
            if lost:
                restore = self._restore(ch, st, hc.buffer, lost[0])
                if restore is None:
                    return None      # nothing to restore from: a malformed stream never proceeds
                cmd, target, row, col, is_head = *restore, False
        if not is_head and cmd != h.cmd:
            ce = self.spec.commands[cmd].effect
            if ce == Effect.CLOSE:
                row, col = -1, -1
        tb = set(self.banks(target))
        effect = self.spec.commands[cmd].effect
        if effect in CLOSES and tb & pinned:
            return None
        if tb & blocked:
            return None
        if not self.ready(ch, cmd, target, t):
            return None
        return _Candidate(h.age, cmd, target, row, col, s, None, stream_head=is_head)

    def _refresh_defers(self, ch: _Channel, h: _StreamCmd, banks: tuple[int, ...], t: int) -> bool:
        """Refresh admission (stream_refresh: wait): a segment that would run past a due refresh of its banks
        waits for it (a segment longer than split_above is split instead)."""
        if self.stream_refresh == "wait" and h.flags & SEG_START and h.est > 0 and h.est <= self.split_above:
            bset = set(banks)
            return any(t + h.est > node.due and bset & set(node.banks) for node in ch.refresh)
        return False

    def _restore(self, ch: _Channel, st: Any, buffer: int, bank: int) -> tuple[int, tuple[int, int], int, int] | None:
        """(command, target, row, column) that re-opens the row a stream's column command needs in `bank`'s
        `buffer` (its latest open of that buffer covering the bank, or the close that must come first)."""
        restore = next(((c, tg, r, cl) for c, tg, r, cl in reversed(st.opens)
                        if self.spec.commands[c].buffer == buffer and bank in self.banks(tg)), None)
        if restore is None:
            return None
        cmd, target = self._open_or_close(ch, restore[0], restore[1], restore[2])
        return cmd, target, restore[2], restore[3]

    # ---- issue (3.5) ----------------------------------------------------------------------------
    def _issue(self, ch: _Channel, t: int, cmd: int, target: tuple[int, int], row: int, col: int,
               source: str, opener: int = -1) -> None:
        c = self.spec.commands[cmd]
        ch.history[cmd].append((t, target))
        if c.effect == Effect.CLOSE:
            # a close of one bank logs the row it closes (-1 if it was closed); a wider close logs -1
            banks = self.banks(target)
            row = ch.open[banks[0]][c.buffer] if len(banks) == 1 and ch.open[banks[0]][c.buffer] >= 0 else -1
        for b in self.banks(target):
            if c.effect == Effect.OPEN:
                ch.open[b][c.buffer] = row
                ch.opener[b][c.buffer] = opener
            elif c.effect in CLOSES:
                ch.open[b][c.buffer] = -1
                ch.opener[b][c.buffer] = -1
            if c.buffer == 0 and c.effect in (Effect.READ, Effect.WRITE, Effect.UPDATE, Effect.COMPUTE):
                ch.row_hits[b] += 1
            elif c.buffer == 0 and (c.effect == Effect.OPEN or c.effect in CLOSES):
                ch.row_hits[b] = 0
        low = self.banks(target)[0]
        self._log.append((t, c.name, *self._address(low), row, col, source))
        if c.effect == Effect.OPEN and self.rfm_threshold > 0 and len(self.banks(target)) == 1:
            self._count_activate(ch, low, t)

    def _count_activate(self, ch: _Channel, bank: int, t: int) -> None:
        """rfm_threshold: the bank opened a row; at the threshold its refresh node is due for an RFM (requested
        at t) and the node's activate counts start again."""
        ch.acts[bank] += 1
        if ch.acts[bank] < self.rfm_threshold:
            return
        node = next(n for n in ch.refresh if bank in n.banks)
        for b in node.banks:
            ch.acts[b] = 0
        if node.rfm_at < 0:
            node.rfm_at = t

    def _issue_candidate(self, ch: _Channel, t: int, c: _Candidate) -> None:
        name = self.sources[c.source]["name"]
        self._issue(ch, t, c.cmd, c.target, c.row, c.column, name, opener=c.source)
        cmd = self.spec.commands[c.cmd]
        st = ch.src[c.source]
        if self.sources[c.source]["kind"] == "rw":
            r = c.req
            assert r is not None
            if cmd.effect == Effect.OPEN:
                r.cls = max(r.cls, MISS)
                if self.active_buffer:
                    r.act_pinned = True
            elif cmd.effect == Effect.CLOSE:
                r.cls = max(r.cls, CONFLICT)
            elif r.kind == RMW and cmd.effect == Effect.READ:     # the RD of an rmw without an update command
                r.rd_issue = t
                r.act_pinned = False
            else:
                r.act_pinned = False
                r.rd_issue = -1
                (st.read_q if r.kind == READ else st.write_q).remove(r)
                done = t + cmd.latency
                self._done[r.id] = done
                if r.tag >= 0:
                    self._completions.append((done, len(self._log), r.tag))
            return
        st.seg_end = False
        if cmd.effect == Effect.OPEN:
            st.opens.append((c.cmd, c.target, c.row, c.column))
        if c.stream_head:
            h = st.stream.pop(0)
            st.seg_end = bool(h.flags & SEG_END)
            if h.tag >= 0:
                self._completions.append((t + cmd.latency, len(self._log), h.tag))
