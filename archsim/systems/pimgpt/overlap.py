"""PIM-GPT with the ASIC and the PIM channels overlapping where the data allow (`schedule: overlap`, issue #7).

The paper's engine (`schedule: serial`, archsim.systems.pimgpt.system) issues the next instruction only when the ASIC
and every PIM channel are idle. Here one decode step is a task graph on the event loop (archsim.engine.loop):

* every op is cut into *pieces* by where its data live. A PIM op (weight GEMV, q.K^T, p.V, K/V append) has one
  PIM task per channel (that channel's command stream, on a `MemoryUnit` over the channel engine); its ASIC
  part (partial-sum reduction) has one task per channel too, over the outputs that channel holds (GEMV output
  o lives in channel (o // banks) mod channels; head h in channel h mod channels). An ASIC-only op follows the
  pieces of the op it reads if it is element-wise (GELU, residual add), or row-wise and those pieces are whole
  rows (softmax: one row per head); otherwise (LayerNorm over d_model) it is one task;
* every task declares the elements it writes and reads (`Op.inputs` of the graph say which ops' outputs an op
  reads; the layout says which elements). A task depends on exactly the tasks that wrote elements it reads, so
  no edge is written by hand: a channel's softmax waits only for that channel's scores, its p.V only for that
  softmax and that channel's V, the next GEMV for every piece of its input vector (it is broadcast);
* the ASIC is one unit running one task at a time (first ready, first served); the PIM channels run their
  streams in order, each as soon as its inputs are ready. Tokens follow each other (the next token's embedding
  needs this token's LM head).

An ASIC piece takes its share (by elements) of the op's issue cycles, and its results are ready the op's
pipeline drain (one row's dependency chain, archsim.host.asic `latency_parts`) after that: the datapath
streams elements at its full width whatever the piece boundaries, and independent rows overlap in the pipeline,
as the ASIC model already assumes within an op. Command counts and ASIC energy are those of the whole ops,
as in serial mode; only time (and so background energy) changes. `pieces="op"` gives every op one PIM and one
ASIC task: the dependencies are then a chain and the result equals the serial engine cycle for cycle (tests).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from archsim.engine.loop import EventLoop, FixedUnit, MemoryUnit, Task

ELEMENTWISE = ("gelu", "silu", "relu", "mul", "residual_add")
ROWWISE = ("softmax", "layernorm", "rmsnorm")
PIM_KINDS = ("gemv", "gemm", "attn_score", "attn_context", "kv_append", "embedding")


@dataclasses.dataclass(eq=False)
class Piece:
    """One task of the plan, before it is put on the loop."""

    name: str
    op: Any
    unit: str                                  # "PIM" or "ASIC"
    writes: np.ndarray                         # elements of the op's output (ASIC) or of its partials (PIM)
    reads: list[tuple[str, np.ndarray]]        # (tensor, elements) read from other ops' outputs
    channel: int = -1                          # PIM: the channel
    cycles: int = 0                            # ASIC: DRAM clock cycles until the datapath takes the next piece
    drain: int = 0                             # ASIC: further cycles until the piece's results are ready
    stream: tuple[np.ndarray, np.ndarray] | None = None   # PIM: (cmd, bank) of the channel
    deps: list[Piece] = dataclasses.field(default_factory=list)
    task: Task | None = None                   # PIM: the stream; ASIC: the datapath (issue) part
    done: Task | None = None                   # the task whose end makes the results ready


class OverlapRunner:
    """Runs decode steps of a `PimGptSimulator` as task graphs on one event loop."""

    def __init__(self, sim: Any, pieces: str = "channel"):
        if pieces not in ("channel", "op"):
            raise ValueError(f"pieces must be 'channel' or 'op', got {pieces!r}")
        self.sim = sim
        self.pieces = pieces
        spec = sim.spec
        self.loop = EventLoop()
        self.mem = self.loop.add(MemoryUnit("PIM", sim.engine.ms))
        # costs are in DRAM clock cycles; the ASIC datapath takes one piece at a time, its pipeline drains
        # a piece's dependency chain while the next piece enters (archsim.host.asic `latency_parts`)
        self.asic = self.loop.add(FixedUnit("ASIC", 1e12 / spec.tCK_ps))
        self.drain = self.loop.add(FixedUnit("ASIC pipeline", 1e12 / spec.tCK_ps, capacity=1 << 30))
        self.g = sim.g
        self.tasks: list[Piece] = []            # every piece of the last step (tests check the dependencies)

    # -- element sets ------------------------------------------------------------------------------------
    def _channel_of_outputs(self, op: Any) -> list[np.ndarray]:
        """Output elements of a PIM op held by each channel."""
        g, m = self.g, self.sim.model
        C, B = g.channels, g.banks
        if op.kind in ("gemv", "gemm"):
            o = np.arange(op.n)
            ch = (o // B) % C
            return [o[ch == c] for c in range(C)]
        att = self.sim.layout.layers[op.layer]["attn"]
        d = m.d_head
        if op.kind == "attn_score":                                  # rows of the channel's query heads
            L = op.n
            return [np.concatenate([h * L + np.arange(L) for h in att.q_heads[c]]) if att.q_heads[c]
                    else np.zeros(0, np.int64) for c in range(C)]
        if op.kind == "attn_context":
            return [np.concatenate([h * d + np.arange(d) for h in att.q_heads[c]]) if att.q_heads[c]
                    else np.zeros(0, np.int64) for c in range(C)]
        if op.kind == "kv_append":                                   # [K (kv_dim) | V (kv_dim)]
            return [np.concatenate([np.r_[h * d + np.arange(d), m.kv_dim + h * d + np.arange(d)]
                                    for h in att.heads[c]]) if att.heads[c] else np.zeros(0, np.int64)
                    for c in range(C)]
        raise ValueError(op.kind)

    def _reads_of(self, op: Any, c: int | None, graph_by_name: dict[str, Any]) -> list[tuple[str, np.ndarray]]:
        """(tensor, elements) piece c of `op` reads (c None: the whole op)."""
        m = self.sim.model
        d = m.d_head
        out = []
        heads = q_heads = None
        if c is not None and op.kind in ("attn_score", "attn_context", "kv_append"):
            att = self.sim.layout.layers[op.layer]["attn"]
            heads, q_heads = att.heads[c], att.q_heads[c]        # KV heads (GQA: fewer) and query heads
        for name in op.inputs:
            src = graph_by_name[name]
            size = self._size(src)
            if heads is None:
                idx = np.arange(size)
            elif op.kind == "kv_append":                   # k and v of this channel's heads from the QKV output
                # (RoPE: the rotated k from the rope op [q | k], v still from the QKV output)
                take_k, take_v = src.kind == "rope" or len(op.inputs) == 1, src.kind != "rope"
                idx = np.concatenate([np.r_[m.q_dim + h * d + np.arange(d) if take_k else [],
                                            m.q_dim + m.kv_dim + h * d + np.arange(d) if take_v else []]
                                      for h in heads]).astype(np.int64) if heads else np.zeros(0, np.int64)
            elif src.kind == "kv_append":                  # K (score) or V (context) of this channel's heads
                off = 0 if op.kind == "attn_score" else m.kv_dim
                idx = np.concatenate([off + h * d + np.arange(d) for h in heads]) if heads else np.zeros(0, np.int64)
            elif op.kind == "attn_score":                  # q of this channel's query heads
                idx = np.concatenate([h * d + np.arange(d) for h in q_heads]) if q_heads else np.zeros(0, np.int64)
            else:                                          # context: softmax rows of this channel's query heads
                L = op.k
                idx = np.concatenate([h * L + np.arange(L) for h in q_heads]) if q_heads else np.zeros(0, np.int64)
            out.append((name, idx))
        return out

    @staticmethod
    def _size(op: Any) -> int:
        """Elements of an op's output (its index space)."""
        if op.kind == "kv_append":
            return op.n
        if op.kind == "attn_score":
            return op.groups * op.n
        if op.kind == "attn_context":
            return op.groups * op.n
        if op.kind in ROWWISE:
            return op.groups * op.m * op.n
        return op.m * op.n

    # -- the plan -------------------------------------------------------------------------------------------
    def plan(self, graph: list, t: int, L: int) -> list[Piece]:
        sim = self.sim
        C = self.g.channels
        by_name = {op.name: op for op in graph}
        owner: dict[str, np.ndarray] = {}              # tensor -> index of the piece that wrote each element
        pieces: list[Piece] = []
        asic_pieces: dict[str, list[Piece]] = {}

        def add(p: Piece) -> int:
            pieces.append(p)
            return len(pieces) - 1

        for op in graph:
            _acc, _key, make, _cyc, _pj = sim._step(op, op.layer, t, L)
            size = self._size(op)
            pim: list[Piece] = []
            parts: list[tuple[list[Piece] | None, np.ndarray]] = []     # ASIC pieces: (PIM sources, outputs)
            if make is not None:
                cmd, bank, offs = make()
                chans = [c for c in range(C) if offs[c + 1] > offs[c]]
                if self.pieces == "op" or op.kind == "embedding":
                    p = Piece(f"{op.name}/pim", op, "PIM", np.zeros(0, np.int64), self._reads_of(op, None, by_name))
                    p.stream = [(c, cmd[offs[c]:offs[c + 1]], bank[offs[c]:offs[c + 1]]) for c in chans]
                    pim.append(p)
                    parts = [([p], np.arange(size))]
                elif op.kind == "attn_context":
                    parts = self._context_pieces(op, cmd, bank, offs, chans, by_name, pim)
                else:
                    outs = self._channel_of_outputs(op)
                    for c in chans:
                        p = Piece(f"{op.name}/pim/ch{c}", op, "PIM", np.zeros(0, np.int64),
                                  self._reads_of(op, c, by_name))
                        p.stream = [(c, cmd[offs[c]:offs[c + 1]], bank[offs[c]:offs[c + 1]])]
                        pim.append(p)
                        parts.append(([p], outs[c]))
                for p in pim:
                    add(p)
            else:
                parts = [(None, e) for e in self._follow(op, by_name, asic_pieces, size)]
            own = np.full(size, -1, dtype=np.int64)
            mine: list[Piece] = []
            issue, total = sim.asic_cost_parts(op)
            done_elems = 0
            for src, elems in parts:
                if len(elems) == 0:
                    continue
                # the datapath streams the op's elements at its full width whatever the piece boundaries: a
                # piece takes its share of the op's issue cycles (shares rounded so they sum to the op's), and
                # its results are ready one dependency chain (the op's drain) after its last issue cycle
                cyc = (issue * (done_elems + len(elems))) // size - (issue * done_elems) // size
                done_elems += len(elems)
                reads = [] if src is not None else self._reads_for_elems(op, elems, by_name)
                p = Piece(f"{op.name}/asic" + (f"/{len(mine)}" if len(parts) > 1 else ""), op, "ASIC", elems, reads,
                          cycles=cyc, drain=total - issue)
                if src is not None:
                    p.deps.extend(src)                 # the op's own PIM pieces that hold these partials
                own[elems] = add(p)
                mine.append(p)
            owner[op.name] = own
            asic_pieces[op.name] = mine
            for p in pim:
                self._link(p, owner, pieces)
            for p in mine:
                self._link(p, owner, pieces)
        self.tasks = pieces
        return pieces

    def _context_pieces(self, op: Any, cmd: np.ndarray, bank: np.ndarray, offs: np.ndarray, chans: list[int],
                        by_name: dict, pim: list[Piece]) -> list[tuple[list[Piece], np.ndarray]]:
        """p.V: a channel's stream is one program per (head, global-buffer chunk of p): the WRGB run loading
        the chunk, then the MACs using it. Each program is a PIM piece reading that chunk of the head's softmax
        row and the head's V; the ASIC reduces each head's chunk partials into its d_head outputs."""
        m = self.sim.model
        d, L = m.d_head, op.k
        att = self.sim.layout.layers[op.layer]["attn"]
        gb = self.g.gb_elems
        J = -(-L // gb)
        wrgb = self.g.cmd["WRGB"]
        p_name, kv_name = op.inputs
        parts = []
        for c in chans:
            s_cmd, s_bank = cmd[offs[c]:offs[c + 1]], bank[offs[c]:offs[c + 1]]
            is_w = s_cmd == wrgb
            starts = np.flatnonzero(is_w & np.r_[True, ~is_w[:-1]]).tolist() + [len(s_cmd)]
            heads = att.q_heads[c]                     # one program per query head; it reads its KV head's V
            if len(starts) - 1 != len(heads) * J:
                raise AssertionError(f"{op.name}: channel {c} has {len(starts) - 1} programs, expected {len(heads) * J}")
            k = 0
            for h in heads:
                mine = []
                v = m.kv_dim + (h // att.rep) * d + np.arange(d)
                for j in range(J):
                    rows = h * L + np.arange(j * gb, min(L, (j + 1) * gb))
                    p = Piece(f"{op.name}/pim/ch{c}/h{h}/j{j}", op, "PIM", np.zeros(0, np.int64),
                              [(p_name, rows), (kv_name, v)])
                    p.stream = [(c, s_cmd[starts[k]:starts[k + 1]], s_bank[starts[k]:starts[k + 1]])]
                    k += 1
                    pim.append(p)
                    mine.append(p)
                parts.append((mine, h * d + np.arange(d)))
        return parts

    def _follow(self, op: Any, by_name: dict, asic_pieces: dict, size: int) -> list[np.ndarray]:
        """Element sets of an ASIC-only op: one per row for a row-wise op (rows are independent: softmax per
        head), its first input's pieces for an element-wise op, else the whole op."""
        whole = [np.arange(size)]
        if self.pieces == "op" or not op.inputs:
            return whole
        if op.kind in ROWWISE:
            rows = size // op.n
            return [r * op.n + np.arange(op.n) for r in range(rows)] if rows > 1 else whole
        if op.kind not in ELEMENTWISE:
            return whole
        sets = [p.writes for p in asic_pieces.get(op.inputs[0], [])]
        if len(sets) < 2 or sum(len(s) for s in sets) != size:
            return whole
        return sets

    def _reads_for_elems(self, op: Any, elems: np.ndarray, by_name: dict) -> list[tuple[str, np.ndarray]]:
        """An ASIC-only op's piece reads the same elements of each input (element-/row-wise ops keep indices);
        a piece that is the whole op reads its inputs whole."""
        out = []
        for name in op.inputs:
            n = self._size(by_name[name])
            out.append((name, elems if len(elems) < self._size(op) and n == self._size(op) else np.arange(n)))
        return out

    @staticmethod
    def _link(p: Piece, owner: dict[str, np.ndarray], pieces: list[Piece]) -> None:
        for name, idx in p.reads:
            own = owner.get(name)
            if own is None or len(idx) == 0:
                continue
            for k in np.unique(own[idx]).tolist():
                if k >= 0 and pieces[k] not in p.deps:
                    p.deps.append(pieces[k])

    # -- running ----------------------------------------------------------------------------------------------
    def run_token(self, graph: list, t: int, L: int) -> tuple[int, int, dict[str, np.ndarray]]:
        """Run decode step t; returns (start cycle, end cycle, command counts per op name). Commands the
        engine issued beyond the ops' streams (refresh, and the row restores after it) are under the key
        "refresh" (ops overlap, so they are not attributed to one op)."""
        pieces = self.plan(graph, t, L)
        before = self.mem.ms.S.cmd_count.sum(axis=0)
        loop = self.loop
        tck = self.sim.spec.tCK_ps
        start_ps = loop.now
        tasks = []
        for p in pieces:
            if p.unit == "ASIC":
                p.task = Task(p.name, self.asic, cycles=p.cycles)
                p.done = Task(p.name + "/drain", self.drain, cycles=p.drain, deps=[p.task])
                tasks += [p.task, p.done]
            else:
                p.task = p.done = Task(p.name, self.mem, submit=self._submitter(p))
                tasks.append(p.task)
        for p in pieces:
            p.task.deps = [d.done for d in p.deps]
        loop.submit(tasks)
        loop.run()
        end_ps = max(p.done.end_ps for p in pieces)
        counts: dict[str, np.ndarray] = {}
        n_cmds = self.sim.n_cmds
        for p in pieces:
            if p.unit == "PIM":
                c = counts.setdefault(p.op.name, np.zeros(n_cmds, dtype=np.int64))
                for _ch, cmd, _bank in p.stream:
                    c += np.bincount(cmd, minlength=n_cmds)
        extra = self.mem.ms.S.cmd_count.sum(axis=0) - before - sum(counts.values())
        if extra.any():
            counts["refresh"] = extra
        return round(start_ps / tck), round(end_ps / tck), counts

    @staticmethod
    def _submitter(p: Piece):
        def submit(ms: Any, at: int, tag: int) -> int:
            # a stream's "channel" is a PIM unit: unit u is stream source u % units of channel u // units, with
            # its banks counted from the unit's first (archsim.engine.reuse.StreamChannels)
            n = 0
            B = ms.tables.banks
            names = [s["name"] for s in ms.sources if s["kind"] == "stream"]
            per_unit = B // len(names)
            for unit, cmd, bank in p.stream:
                ch, u = divmod(unit, len(names))
                ms.enqueue_stream(names[u], ch, cmd, bank + ch * B + u * per_unit, tag=tag, at=at)
                n += len(cmd)
            return n
        return submit
