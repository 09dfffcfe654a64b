"""PIM-GPT end to end: decode token by token on GDDR6-AiM channels + the non-linear ASIC.

Per token (context L = t + 1) every op of the graph runs in order (the PIM-GPT engine issues the next
instruction when the ASIC and the PIM package are idle, the PIM-GPT paper (Wu, Wang & Lu 2024); `schedule:
overlap` instead runs the step as a task graph on the event loop, archsim.systems.pimgpt.overlap):
  * weight GEMVs, q.K^T, p.V, K/V appends and embedding reads -> per-channel command streams timed by the
    channel engine (archsim.engine.channel, one stream source per channel, via archsim.engine.reuse); their
    I/O (WRGB, RDMAC, RD/WR bursts) is part of the streams; refresh (option `refresh: true`) interrupts a
    stream and the stream restores its row afterwards;
  * LayerNorm or RMSNorm / softmax / GELU or SiLU (x up: the gated FFN) / RoPE / residual / partial-sum reduction
    -> the ASIC latency model
    (archsim.host.asic), converted from ASIC clock cycles to DRAM clock cycles.
Energy is applied after timing: command counts x per-action energies of the preset's `pim.energy` table,
plus ASIC compute + SRAM energy, plus channel standby power x time.

Simulation speed (all exact: results equal a full simulation cycle for cycle, tests/test_pimgpt.py):
  * per-token op plans come from the graph of a one-layer copy of the model, after checking that the full
    graph is exactly that block repeated n_layers times (otherwise every token builds the full graph);
  * streams are generated in timing-only form (opcode, bank) for all channels at once and run by one kernel
    call per op (archsim.systems.pimgpt.compiler `*_timing`, archsim.engine.reuse `run_flat`);
  * attention streams are keyed by their timing class (AttentionLayout.timing_class: q.K^T depends on L only
    through ceil(L / banks), p.V through ceil(L / lanes), the K/V append through the bank and row alignment of
    token t), so one simulated op serves every token of its class;
  * within an op, a channel whose stream and relative state equal another channel's takes that channel's
    outcome instead of being simulated (channels are independent; StreamChannels);
  * two memo levels keyed on the exact normalised timing state (interned to an int by the engine): one op
    (StreamChannels memo; off with refresh, which depends on absolute time; an op enters it only if it issued
    exactly its own commands, so the stream's last opens, read only by restores, stay out of the key) and one
    whole layer (`_layer_memo`: same layer structure, token and context length).
    A layer hit replays the layer's per-op contributions (integers scaled, the ASIC energy added op by op
    so floating-point sums are bit-identical); when a layer ends in the state it started from, the
    following layers of the same structure are replayed at once.

The simulation of system `pimgpt` (declared in archsim.systems.pimgpt; its config in config.py).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from archsim import metrics, schema
from archsim.config import flatten
from archsim.dram import latency
from archsim.dram.spec import DramSpec, load_spec
from archsim.engine.compiling import clock, sim_seconds
from archsim.engine.reuse import StreamChannels
from archsim.errors import UserError
from archsim.results import Result, make_manifest
from archsim.systems.pimgpt.compiler import ModelLayout, Policy, layout_model
from archsim.systems.pimgpt.config import (
    SCHEDULES,
    OverlapSchedule,
    PimGptConfig,
    SerialSchedule,
    _resolve,
)
from archsim.workload.spec import ModelSpec

if TYPE_CHECKING:
    from archsim.host.asic import AsicModel
    from archsim.host.baselines import Baseline

ENERGY_COMPONENTS = ("dram_array", "pim_mac", "global_buffer", "io", "asic", "background")


@dataclass(frozen=True)
class Setup:
    """A run's config resolved once into typed values (model, DRAM preset, mapping policy, ASIC and baselines
    each loaded once), passed down to everything below `run_config`; `resolved` is the same config as the dict
    the manifest records."""

    model: ModelSpec
    tokens: int
    context_start: int              # contexts of the decode steps: context_start + 1 .. context_start + tokens
    batch: int                      # requests per step, one after another (a batch's step = batch x one's)
    spec: DramSpec                  # the preset with the config's dram overrides and channel count
    policy: Policy                  # the mapping policy with the config's mapping_overrides
    asic: AsicModel                 # the ASIC preset at the config's asic_clock_hz, with its energy table
    baselines: tuple[Baseline, ...]
    engine: str
    refresh: bool
    timeline: bool
    schedule: SerialSchedule | OverlapSchedule
    resolved: dict[str, Any] = field(compare=False, repr=False)

    @property
    def omit_ops(self) -> tuple[str, ...]:
        """Op kinds left out of every decode step (only the serial schedule has any)."""
        return self.schedule.omit_ops if isinstance(self.schedule, SerialSchedule) else ()


def setup(config: dict[str, Any]) -> Setup:
    """`config` resolved and typed: what `run_config` passes down. Raises the config's errors (a preset without
    a `pim` section included) before anything is simulated."""
    from archsim.host.asic import AsicConfig, AsicModel
    from archsim.workload import load_model

    cfg, pol, baselines = _resolve(config)
    model = load_model(cfg["model"])
    # the channel count is one more override of the preset (after the dram ones: it wins): its files read once
    over = flatten(cfg.get("dram") or {})
    if cfg["channels"] is not None:
        over["org.channels"] = cfg["channels"]
    spec = load_spec(cfg["preset"], overrides=over or None)
    if "pim" not in spec.raw:
        raise UserError(f"DRAM preset {spec.name} has no `pim` section (use a PIM preset, e.g. GDDR6_AiM_16Gbps)")
    clock = {} if cfg["asic_clock_hz"] is None else {"clock_hz": float(cfg["asic_clock_hz"])}
    asic = AsicModel(AsicConfig.load(cfg["asic"], cfg.get("asic_overrides"), "asic_overrides", **clock))
    schedule = schema.variant(SCHEDULES, cfg.get("schedule", "serial"), cfg, "schedule", PimGptConfig)
    return Setup(model=model, tokens=cfg["tokens"], context_start=cfg.get("context_start", 0),
                 batch=cfg.get("batch", 1), spec=spec, policy=pol, asic=asic, baselines=baselines,
                 engine=cfg["engine"], refresh=bool(cfg["refresh"]), timeline=bool(cfg["timeline"]),
                 schedule=schedule, resolved=cfg)


class PimGptSimulator:
    """Holds the layout, the channel engine, the ASIC model and the per-op accumulators of one run."""

    def __init__(self, su: Setup | dict[str, Any], log: bool = False):
        if isinstance(su, dict):        # a config dict (tests, reports, the Python API): resolved here, once
            su = setup(su)
        self.su = su
        self.model = su.model
        self.spec: DramSpec = su.spec
        self.policy = su.policy
        self.layout: ModelLayout = layout_model(self.model, self.spec, self.policy)
        self.g = self.layout.g
        if su.context_start + su.tokens > self.model.max_context:
            raise UserError(f"context_start + tokens = {su.context_start + su.tokens} exceeds {self.model.name}'s "
                            f"max context {self.model.max_context}")
        self.asic = su.asic
        overlap = isinstance(su.schedule, OverlapSchedule)
        # overlap: the event loop drives the channel engine directly (nothing to memoise op by op)
        self.engine = StreamChannels(self.spec, memo=not overlap and su.schedule.memo, log=log,
                                     refresh=su.refresh, engine=su.engine,
                                     units=self.g.channels // self.spec.channels)
        self.log = log
        self.n_cmds = len(self.spec.commands)
        self._streams: dict[Any, list] = {}
        self._asic_memo: dict[Any, tuple[int, float]] = {}
        self.acc: dict[str, dict[str, Any]] = {}
        self.work: dict[str, list[float]] = {}   # role -> [flops, bytes] of the graph ops (for the roofline)
        self.intervals: list[tuple[str, str, int, int]] | None = None  # (unit, op, start, end) when recording
        self.token_cycles: list[int] = []
        self.clock = 0
        self.rng = np.random.default_rng(0)
        self._flat_w: dict[Any, tuple] = {}        # weight streams (timing form), for the whole run
        self._flat_t: dict[Any, tuple] = {}        # attention streams (timing form) by timing class
        self._layer_memo: dict[Any, tuple] = {}
        self.layer_memo_hits = 0
        self.layer_memo_misses = 0
        self._fast = self._setup_fast()
        self._overlap = None
        if overlap:
            from archsim.systems.pimgpt.overlap import OverlapRunner
            self._overlap = OverlapRunner(self)

    # -- streams --------------------------------------------------------------------------------------------
    def _cols(self, s: Any) -> tuple:
        return (s.cmd, s.bank, s.row, s.col, s.gb, s.clr) if self.log else (s.cmd, s.bank)

    def _streams_for(self, key: Any, make: Any) -> list:
        """Per-channel streams for `key`; cached (timing depends on commands and banks only, not on rows)."""
        if self.log:
            return [self._cols(make(c)) for c in range(self.g.channels)]
        got = self._streams.get(key)
        if got is None:
            got = [self._cols(make(c)) for c in range(self.g.channels)]
            if len(self._streams) > 4096:
                self._streams.clear()
            self._streams[key] = got
        return got

    def pim_op(self, op: Any, t: int, L: int) -> tuple[Any, Any]:
        """(memo key, stream factory) of the PIM part of `op`, or (None, None) if it has none."""
        lay = self.layout
        kind, layer = op.kind, op.layer
        if kind == "gemv" or kind == "gemm":
            w = lay.lm_head if op.role == "lm_head" else lay.layers[layer][op.role]
            key = ("w", w.n, w.k) if not self.log else ("w", w.name)
            return key, lambda: self._streams_for(key, w.program)
        if kind in ("attn_score", "attn_context", "kv_append"):
            att = lay.layers[layer]["attn"]
            if kind == "attn_score":
                key = ("score", L)
                make = lambda c: att.score_program(c, L)  # noqa: E731
            elif kind == "attn_context":
                key = ("ctx", L)
                make = lambda c: att.context_program(c, L)  # noqa: E731
            else:
                key = ("kv", t)
                make = lambda c: att.kv_program(c, t)  # noqa: E731
            if self.log:
                key = key + (layer,)
            return key, lambda: self._streams_for(key, make)
        if kind == "embedding":
            tok = int(self._token_id)
            parts: dict[int, list] = {}
            c, s = lay.embedding_table.element_reads(tok)
            parts.setdefault(c, []).append(s)
            if lay.wpe is not None:
                c2, s2 = lay.wpe.element_reads(t)
                parts.setdefault(c2, []).append(s2)
            from archsim.pim.stream import Stream

            def make_emb() -> list:
                return [self._cols(Stream.concat(parts[c])) if c in parts else None for c in range(self.g.channels)]
            key = ("emb", tok, t)
            return key, make_emb
        return None, None

    def asic_cost(self, op: Any) -> tuple[int, float]:
        """(DRAM-clock cycles, pJ) of the ASIC part of `op` (memoised by shape)."""
        key = (op.kind, op.role, op.m, op.n, op.k, op.groups, op.has_bias, op.flops)
        got = self._asic_memo.get(key)
        if got is None:
            s = self.asic.latency_s(op)
            got = (math.ceil(s / self.spec.tCK_s - 1e-9), self.asic.energy_pj(op))
            self._asic_memo[key] = got
        return got

    def asic_cost_parts(self, op: Any) -> tuple[int, int]:
        """(issue, total) DRAM-clock cycles of the ASIC part of `op`: the ASIC takes the next op after `issue`,
        the result is ready after `total` (= `asic_cost(op)[0]`; archsim.host.asic `latency_parts`)."""
        total, _ = self.asic_cost(op)
        issue, _drain = self.asic.latency_parts(op)
        f = self.asic.config.clock_hz
        return min(total, math.ceil(issue / f / self.spec.tCK_s - 1e-9)), total

    # -- fast path: per-token plans, timing-form streams, layer memo --------------------------------------------
    def _graph(self, model: Any, L: int) -> Any:
        """The decode-step graph at context L, without the op kinds of `omit_ops` (an experiment)."""
        from archsim.workload import build_graph

        g = build_graph(model, "decode", context_len=L)
        omit = self.su.omit_ops
        if omit:
            g[:] = [op for op in g if op.kind not in omit]
        return g

    def _setup_fast(self) -> bool:
        """Use the one-layer template if the full graph is its block repeated n_layers times (checked at a few
        context lengths: block ops equal up to name and layer index, embedding / head ops equal)."""

        if self.log:
            return False
        model = self.model
        n = model.n_layers
        m1 = dataclasses.replace(model, n_layers=1)
        T, c0 = self.su.tokens, self.su.context_start
        split = None
        for L in sorted({c0 + 1, c0 + 2, c0 + (T + 1) // 2, c0 + T} & set(range(1, model.max_context + 1))):
            full = list(self._graph(model, L))
            one = list(self._graph(m1, L))
            idx = [i for i, op in enumerate(one) if op.layer is not None]
            if not idx or any(one[i].layer != 0 for i in idx) or idx != list(range(idx[0], idx[-1] + 1)):
                return False
            npre, nb = idx[0], len(idx)
            pre, block, post = one[:npre], one[npre:npre + nb], one[npre + nb:]
            if len(full) != npre + n * nb + len(post) or full[:npre] != pre or full[npre + n * nb:] != post:
                return False
            for i in range(n):
                for j, op in enumerate(block):
                    f = full[npre + i * nb + j]
                    if f.layer != i or dataclasses.replace(f, name=op.name, layer=0) != op:
                        return False
            if split not in (None, (npre, nb)):
                return False
            split = (npre, nb)
        self._model1 = m1
        self._npre, self._nblock = split
        # layers whose weight shapes match run the same streams: one structure id per distinct shape tuple
        one = list(self._graph(m1, 1))
        self._shape1 = [(op.kind, op.role, op.layer) for op in one]
        block = one[self._npre:self._npre + self._nblock]
        ids: dict[tuple, int] = {}
        self._struct: list[int] = []
        self._struct_rep: dict[int, int] = {}
        for i in range(n):
            sig = tuple((self.layout.layers[i][op.role].n, self.layout.layers[i][op.role].k)
                        if op.kind in ("gemv", "gemm") else op.kind for op in block)
            if sig not in ids:
                ids[sig] = len(ids)
                self._struct_rep[ids[sig]] = i
            self._struct.append(ids[sig])
        return True

    def _acc_for(self, op: Any) -> dict[str, Any]:
        role = op.role or op.kind
        a = self.acc.get(role)
        if a is None:
            a = self.acc[role] = {"op": role, "kind": op.kind, "ops": 0, "pim_cycles": 0, "asic_cycles": 0,
                                  "asic_energy_pj": 0.0, "counts": np.zeros(self.n_cmds, dtype=np.int64)}
        return a

    def _flat_token(self, key: Any, fn: Any, arg: int) -> tuple:
        """Attention stream of timing class `key` (AttentionLayout.timing_class: every argument of the class
        has this stream), kept across tokens (bounded)."""
        got = self._flat_t.get(key)
        if got is None:
            if len(self._flat_t) > 256:
                self._flat_t.clear()
            got = self._flat_t[key] = fn(arg)
        return got

    def _flat_weight(self, key: Any, w: Any) -> tuple:
        got = self._flat_w.get(key)
        if got is None:
            got = self._flat_w[key] = w.timing()
        return got

    def _flat_embedding(self, tok: int, t: int) -> tuple:
        from archsim.systems.pimgpt.compiler import concat_flat

        lay = self.layout
        pieces: list[list] = [[] for _ in range(self.g.channels)]
        c, cmd, bank = lay.embedding_table.element_reads_timing(tok)
        pieces[c].append((cmd, bank))
        if lay.wpe is not None:
            c, cmd, bank = lay.wpe.element_reads_timing(t)
            pieces[c].append((cmd, bank))
        return concat_flat(pieces)

    def _step(self, op: Any, layer: int | None, t: int, L: int) -> tuple:
        """(accumulator, memo key, timing-stream factory or None, ASIC cycles, ASIC pJ) of one op; same keys
        as `pim_op`."""
        acc = self._acc_for(op)
        cyc, pj = self.asic_cost(op)
        kind = op.kind
        lay = self.layout
        key = make = None
        if kind == "gemv" or kind == "gemm":
            w = lay.lm_head if op.role == "lm_head" else lay.layers[layer][op.role]
            key = ("w", w.n, w.k)
            make = lambda: self._flat_weight(key, w)  # noqa: E731
        elif kind == "attn_score":
            att = lay.layers[layer]["attn"]
            key = att.timing_class("score", L)
            make = lambda: self._flat_token(key, att.score_timing, L)  # noqa: E731
        elif kind == "attn_context":
            att = lay.layers[layer]["attn"]
            key = att.timing_class("context", L)
            make = lambda: self._flat_token(key, att.context_timing, L)  # noqa: E731
        elif kind == "kv_append":
            att = lay.layers[layer]["attn"]
            key = att.timing_class("kv", t)
            make = lambda: self._flat_token(key, att.kv_timing, t)  # noqa: E731
        elif kind == "embedding":
            tok = int(self._token_id)
            key = ("emb", tok, t)
            make = lambda: self._flat_embedding(tok, t)  # noqa: E731
        return acc, key, make, cyc, pj

    def _exec(self, st: tuple) -> tuple:
        """Run one planned op; returns its contribution (accumulator, PIM cycles, counts or None, ASIC cycles,
        ASIC pJ) for the layer memo."""
        acc, key, make, cyc, pj = st
        acc["ops"] += 1
        dp, cnt = 0, None
        if make is not None:
            end, cnt = self.engine.run_flat(key, make, self.clock)
            dp = end - self.clock
            acc["pim_cycles"] += dp
            acc["counts"] += cnt
            self.clock = end
        acc["asic_cycles"] += cyc
        acc["asic_energy_pj"] += pj
        self.clock += cyc
        return acc, dp, cnt, cyc, pj

    @staticmethod
    def _layer_entry(rec: list[tuple], advance: int, out_sid: int, lo: tuple) -> tuple:
        """Per-accumulator totals of one layer's ops (ASIC pJ kept as the ordered list of addends)."""
        agg: dict[int, list] = {}
        for acc, dp, cnt, cyc, pj in rec:
            e = agg.get(id(acc))
            if e is None:
                e = agg[id(acc)] = [acc, 0, 0, None, 0, []]
            e[1] += 1
            e[2] += dp
            if cnt is not None:
                e[3] = cnt.copy() if e[3] is None else e[3] + cnt
            e[4] += cyc
            e[5].append(pj)
        return advance, out_sid, [tuple(e[:5]) + (tuple(e[5]),) for e in agg.values()], lo

    def _replay(self, ent: tuple, k: int) -> None:
        """Apply a memoised layer k times in a row (it ends in the state it starts from when k > 1)."""
        advance, out_sid, agg, lo = ent
        for acc, nops, dp, cnt, cyc, pjs in agg:
            acc["ops"] += k * nops
            acc["pim_cycles"] += k * dp
            if cnt is not None:
                acc["counts"] += cnt * k
            acc["asic_cycles"] += k * cyc
            e = acc["asic_energy_pj"]
            for _ in range(k):
                for pj in pjs:
                    e += pj
            acc["asic_energy_pj"] = e
        self.clock += k * advance
        self.engine.set_state(out_sid, self.clock)
        self.engine.apply_last_open(lo)            # the stream's last opens the layer wrote (not in the key)

    def _run_token_fast(self, t: int) -> int:

        L = t + 1
        ops = self._graph(self._model1, L)
        if [(op.kind, op.role, op.layer) for op in ops] != self._shape1:
            return self._run_token_ops(t)              # not the checked template: full graph for this token
        for op in ops:                                 # block ops stand for every layer
            self._add_work(op, self.model.n_layers if op.layer is not None else 1)
        self._token_id = self.rng.integers(0, self.model.vocab)
        npre, nb = self._npre, self._nblock
        pre = [self._step(op, None, t, L) for op in ops[:npre]]
        blocks = {s: [self._step(op, r, t, L) for op in ops[npre:npre + nb]] for s, r in self._struct_rep.items()}
        post = [self._step(op, None, t, L) for op in ops[npre + nb:]]
        start = self.clock
        eng = self.engine
        for st in pre:
            self._exec(st)
        n = self.model.n_layers
        i = 0
        while i < n:
            s = self._struct[i]
            if not eng.memo_on:
                for st in blocks[s]:
                    self._exec(st)
                i += 1
                continue
            sid = eng.state_id(self.clock)
            lkey = (s, t, L, sid)
            ent = self._layer_memo.get(lkey)
            if ent is None:
                self.layer_memo_misses += 1
                c0 = self.clock
                eng.mark_last_open()
                rec = [self._exec(st) for st in blocks[s]]
                lo = eng.last_open_since_mark()
                if lo is not None:                 # every op of the layer was memo-safe
                    self._layer_memo[lkey] = self._layer_entry(rec, self.clock - c0, eng.state_id(self.clock), lo)
                i += 1
                continue
            k = 1
            if ent[1] == sid:                      # fixed point: the next layers of this structure repeat it
                while i + k < n and self._struct[i + k] == s:
                    k += 1
            self.layer_memo_hits += k
            self._replay(ent, k)
            i += k
        for st in post:
            self._exec(st)
        self.token_cycles.append(self.clock - start)
        return self.clock - start

    # -- the run ----------------------------------------------------------------------------------------------
    def run_token(self, t: int) -> int:
        """Simulate decode step t (context L = t + 1); returns its cycles."""
        if self._overlap is not None:
            return self._run_token_overlap(t)
        if self._fast:
            return self._run_token_fast(t)
        return self._run_token_ops(t)

    def _run_token_ops(self, t: int) -> int:
        """Reference per-op path (full graph, Stream-based streams): used with log=True (command logs need
        rows and columns) and for graphs the one-layer template does not describe."""

        L = t + 1
        graph = self._graph(self.model, L)
        self._token_id = self.rng.integers(0, self.model.vocab)
        start = self.clock
        for op in graph:
            self._add_work(op, 1)
            a = self._acc_for(op)
            a["ops"] += 1
            key, make = self.pim_op(op, t, L)
            if make is not None:
                ends, counts = self.engine.run(key, make, self.clock)
                end = int(ends.max())
                if self.intervals is not None:
                    self.intervals.append(("PIM", op.name, self.clock, end))
                a["pim_cycles"] += end - self.clock
                a["counts"] += counts.sum(axis=0)
                self.clock = end
            cyc, pj = self.asic_cost(op)
            if self.intervals is not None and cyc:
                self.intervals.append(("ASIC", op.name, self.clock, self.clock + cyc))
            a["asic_cycles"] += cyc
            a["asic_energy_pj"] += pj
            self.clock += cyc
        self.token_cycles.append(self.clock - start)
        return self.clock - start

    def _run_token_overlap(self, t: int) -> int:
        """Decode step t as a task graph on the event loop (schedule: overlap, systems/pimgpt/overlap.py).
        Per op: the same command counts, ASIC cycles (busy time) and energy as serially; `pim_cycles` is the
        span from the op's first PIM piece's start to its last one's end."""
        from archsim.workload import build_graph

        L = t + 1
        graph = build_graph(self.model, "decode", context_len=L)
        self._token_id = self.rng.integers(0, self.model.vocab)
        start, end, counts = self._overlap.run_token(graph, t, L)
        self.engine.commands_simulated += int(sum(int(c.sum()) for c in counts.values()))   # (issued on the loop)
        span: dict[str, list[int]] = {}
        for p in self._overlap.tasks:
            if p.unit == "PIM":
                s = span.setdefault(p.op.name, [p.task.start_ps, p.task.end_ps])
                s[0] = min(s[0], p.task.start_ps)
                s[1] = max(s[1], p.task.end_ps)
        tck = self.spec.tCK_ps
        for op in graph:
            self._add_work(op, 1)
            a = self._acc_for(op)
            a["ops"] += 1
            cyc, pj = self.asic_cost(op)
            if op.name in counts:
                a["counts"] += counts[op.name]
                s = span[op.name]
                a["pim_cycles"] += (s[1] - s[0]) // tck
            a["asic_cycles"] += cyc
            a["asic_energy_pj"] += pj
        if "refresh" in counts:                   # refreshes and the restores after them (refresh: true)
            from archsim.workload.graph import Op
            self._acc_for(Op(name="refresh", kind="refresh", layer=None, m=0, n=0))["counts"] += counts["refresh"]
        self.clock = end
        self.token_cycles.append(int(end - start))
        return int(end - start)

    def _add_work(self, op: Any, times: int) -> None:
        w = self.work.setdefault(op.role or op.kind, [0.0, 0.0])
        w[0] += op.flops * times
        w[1] += op.bytes_total * times

    def run(self, quiet: bool = True, seed: int = 0) -> Result:
        from archsim.progress import report as report_progress

        self.rng = np.random.default_rng(seed)
        timer = clock()       # simulation time: a first run's kernel compile apart (sim_compile_s)
        n, c0 = self.su.tokens, self.su.context_start
        for t in range(c0, c0 + n):
            self.run_token(t)
            report_progress("tokens", t - c0 + 1, n, self.clock * self.spec.tCK_ps * 1e-12)
        wall = sim_seconds(timer)
        res = self.result(wall, seed)
        if self.su.timeline:
            res.tables["timeline"] = self.timeline(c0 + n - 1)
        return res

    def timeline(self, t: int) -> pd.DataFrame:
        """Per-unit busy intervals of decode step t on a fresh simulator: op by op (serial: the PIM channels
        and the ASIC never overlap, each op starts when the previous one ends), or the pieces of the task graph
        (overlap)."""
        su = self.su
        schedule = su.schedule
        if isinstance(schedule, SerialSchedule):
            schedule = dataclasses.replace(schedule, memo=False)
        tokens = max(t + 1, 1)
        sim = PimGptSimulator(dataclasses.replace(su, tokens=tokens, timeline=False, schedule=schedule, resolved={
            **su.resolved, "tokens": tokens, "memo": False, "timeline": False}))
        if sim._overlap is not None:              # the task graph's pieces: the ASIC datapath and each channel
            sim.rng = np.random.default_rng(0)
            sim.run_token(t)
            ps = 1e-12
            rows = [{"unit": "ASIC" if p.unit == "ASIC" else "PIM ch" + ",".join(str(c) for c, _, _ in p.stream),
                     "op": p.name, "start_s": p.task.start_ps * ps, "end_s": p.task.end_ps * ps}
                    for p in sim._overlap.tasks if p.task.end_ps > p.task.start_ps]
            t0 = min((r["start_s"] for r in rows), default=0.0)
            return pd.DataFrame([{**r, "start_s": r["start_s"] - t0, "end_s": r["end_s"] - t0} for r in rows])
        sim._fast = False
        sim.intervals = []
        sim.rng = np.random.default_rng(0)
        sim._run_token_ops(t)
        tck = self.spec.tCK_s
        t0 = sim.intervals[0][2] if sim.intervals else 0
        return pd.DataFrame([{"unit": u, "op": name, "start_s": (a - t0) * tck, "end_s": (b - t0) * tck}
                             for u, name, a, b in sim.intervals])

    # -- results --------------------------------------------------------------------------------------------
    def energy_by_component(self, counts: np.ndarray, asic_pj: float, cycles: int) -> dict[str, float]:
        e = self.spec.raw["pim"]["energy"]
        names = self.spec.command_names
        cnt = {nm: int(counts[i]) for i, nm in enumerate(names)}
        B = self.g.banks
        bits = self.spec.access_bytes * 8
        rw = cnt["RD"] + cnt["RDA"] + cnt["WR"] + cnt["WRA"]
        ew = cnt["EWMUL"] + cnt["EWADD"]
        return {
            "dram_array": (cnt["ACTAB"] * B + cnt["ACT"]) * e["act_pj_per_bank"]
            + (cnt["MACAB"] + 2 * ew) * B * e["mac_array_pj_per_bank"] + rw * bits * e["cell_rdwr_pj_per_bit"],
            "pim_mac": (cnt["MACAB"] + ew) * B * e["mac_compute_pj_per_bank"],
            "global_buffer": (cnt["MACAB"] + ew) * e["gb_broadcast_pj"] + cnt["WRGB"] * e["gb_write_pj"],
            "io": (cnt["WRGB"] + cnt["RDMAC"] + rw) * bits * e["io_pj_per_bit"] + rw * bits * e["col_path_pj_per_bit"],
            "asic": asic_pj,
            "background": e["background_mw_per_channel"] * 1e-3 * self.g.channels * cycles * self.spec.tCK_s * 1e12,
        }

    def row_hits(self, counts: np.ndarray) -> tuple[int, int]:
        """(bank column accesses, bank activations): hits = accesses - activations."""
        names = self.spec.command_names
        c = {nm: int(counts[i]) for i, nm in enumerate(names)}
        B = self.g.banks
        acc = (c["MACAB"] + c["EWMUL"] + c["EWADD"]) * B + c["RD"] + c["RDA"] + c["WR"] + c["WRA"]
        act = c["ACTAB"] * B + c["ACT"]
        return acc, act

    def result(self, wall_s: float, seed: int) -> Result:
        tck = self.spec.tCK_s
        mac_gap = latency.gap(self.spec, "MACAB", "MACAB")     # one column per bank per MAC slot (nCCDL)
        n = len(self.token_cycles)
        total_cycles = int(sum(self.token_cycles))
        rows = []
        tot_counts = np.zeros(self.n_cmds, dtype=np.int64)
        energy_tot = dict.fromkeys(ENERGY_COMPONENTS, 0.0)
        names = self.spec.command_names
        for role, a in self.acc.items():
            cyc = a["pim_cycles"] + a["asic_cycles"]
            e = self.energy_by_component(a["counts"], a["asic_energy_pj"], 0)
            tot_counts += a["counts"]
            for k in ENERGY_COMPONENTS:
                energy_tot[k] += e[k]
            acc, act = self.row_hits(a["counts"])
            rows.append({"op": role, "kind": a["kind"], "ops": a["ops"], "pim_cycles": a["pim_cycles"],
                         "asic_cycles": a["asic_cycles"], "cycles": cyc, "seconds": cyc * tck,
                         "seconds_per_token": cyc * tck / n, "share": cyc / total_cycles if total_cycles else 0.0,
                         "flops": self.work.get(role, [0.0, 0.0])[0], "bytes": self.work.get(role, [0.0, 0.0])[1],
                         "op_per_byte": (self.work[role][0] / self.work[role][1]
                                         if self.work.get(role, [0, 0])[1] else 0.0),
                         "row_hit_rate": (acc - act) / acc if acc else float("nan"),
                         **{f"cmd_{nm}": int(a["counts"][i]) for i, nm in enumerate(names) if a["counts"].any()},
                         **{f"energy_{k}_pj": v for k, v in e.items() if k != "background"}})
        bg = self.energy_by_component(np.zeros(self.n_cmds, dtype=np.int64), 0.0, total_cycles)["background"]
        energy_tot["background"] = bg
        df = pd.DataFrame(rows)
        # command counts absent for an op are zero; a row-hit rate without bank accesses stays NaN (no meaning)
        count_cols = [c for c in df.columns if c.startswith(("cmd_", "energy_"))]
        df[count_cols] = df[count_cols].fillna(0)
        seconds = total_cycles * tck
        acc, act = self.row_hits(tot_counts)
        lat = np.array(self.token_cycles) * tck
        asic_cycles = sum(a["asic_cycles"] for a in self.acc.values())
        stats: dict[str, Any] = {
            "model": self.model.name, "preset": self.spec.name, "channels": self.g.channels, "tokens": n,
            "banks_per_channel": self.g.banks,
            "asic_clock_hz": self.asic.config.clock_hz, "mapping": self.policy.name,
            "weight_layout": self.policy.weight_layout,
            "cycles": total_cycles, "seconds": seconds, "tCK_ps": self.spec.tCK_ps,
            "latency_per_token_s": seconds / n, "latency_first_token_s": float(lat[0]),
            "latency_last_token_s": float(lat[-1]), "tokens_per_s": n / seconds,
            "energy_per_token_j": sum(energy_tot.values()) * 1e-12 / n,
            "energy_per_token_by_component_j": {k: v * 1e-12 / n for k, v in energy_tot.items()},
            "row_hit_rate": (acc - act) / acc if acc else float("nan"),
            "asic_share": asic_cycles / total_cycles if total_cycles else 0.0,
            "pim_share": 1 - asic_cycles / total_cycles if total_cycles else 0.0,
            "commands": {nm: int(tot_counts[i]) for i, nm in enumerate(names)},
            "memory_reserved_bytes": self.layout.bytes_reserved,
            "memory_capacity_bytes": self.spec.capacity_bytes,
            "sim_wall_s": wall_s, "sim_kernel_s": self.engine.kernel_s,
            "sim_commands_simulated": self.engine.commands_simulated,
            "sim_memo_hits": self.engine.memo_hits, "sim_memo_misses": self.engine.memo_misses,
            "sim_layer_memo_hits": self.layer_memo_hits, "sim_layer_memo_misses": self.layer_memo_misses,
            "engine": self.engine.engine, "refresh": "allbank" if self.su.refresh else "none",
            # roofs for the report's roofline: all MACs busy, and every bank streaming one column per MAC slot
            "peak_flops_per_s": self.g.channels * self.g.banks * self.g.lanes * 2 / (mac_gap * tck),
            "peak_bytes_per_s": self.g.channels * self.g.banks * self.spec.access_bytes / (mac_gap * tck),
        }
        stats.update(self.common_metrics(tot_counts, energy_tot, seconds / n))
        stats.update(self.baselines())
        if self.su.timeline:     # the step run() records the timeline of (the report's figure says which)
            c0 = self.su.context_start
            stats["timeline_of"] = f"decode step {n} of {n} (context {c0 + n})"
        # manifest.config is the resolved config, so it re-runs as is (`archsim run --config` / --from-json);
        # the expanded DRAM preset and mapping policy it ran with are recorded beside it
        res = Result(stats=stats, df=df, manifest=make_manifest("pimgpt", dict(self.su.resolved), seed=seed,
                                                                dram=self.spec.raw, policy=self.policy.raw))
        res.extra["token_latency_s"] = lat
        return res

    def common_metrics(self, counts: np.ndarray, energy_pj: dict[str, float], step_s: float) -> dict[str, Any]:
        """The common metric schema (archsim.metrics): one request's step x `batch` (requests one after another,
        each weight GEMV once per request), energy per token split into the schema's parts: the activates,
        ordinary reads and writes and the DRAM interface are `dram`; the MACs' column reads, the MACs and the
        global buffer `pim`; the ASIC `compute`; the background `static`."""

        e = self.spec.raw["pim"]["energy"]
        c = {nm: int(counts[i]) for i, nm in enumerate(self.spec.command_names)}
        B = self.g.banks
        mac_reads = (c["MACAB"] + 2 * (c["EWMUL"] + c["EWADD"])) * B * e["mac_array_pj_per_bank"]
        n = len(self.token_cycles)
        per_token = {
            "dram": energy_pj["dram_array"] - mac_reads + energy_pj["io"],
            "pim": mac_reads + energy_pj["pim_mac"] + energy_pj["global_buffer"],
            "compute": energy_pj["asic"], "static": energy_pj["background"]}
        c0 = self.su.context_start
        sc = metrics.scope(layers_simulated=self.model.n_layers, layers=self.model.n_layers, devices=1,
                           not_modelled=["prefill: PIM-GPT decodes only (its paper's engine)"],
                           contexts=[c0 + 1, c0 + n], batch_rule="requests one after another")
        return metrics.common(self.su.batch * step_s, self.su.batch, {k: v * 1e-12 / n for k, v in per_token.items()},
                              sc)

    def baselines(self) -> dict[str, Any]:
        """Speedup and energy efficiency against the GPU/CPU baselines over the same tokens."""
        from archsim.workload import build_graph

        out: dict[str, Any] = {}
        n = len(self.token_cycles)
        if not self.su.baselines or n == 0:
            return out
        pim_s = sum(self.token_cycles) * self.spec.tCK_s
        pim_j = out_j = 0.0
        pim_j = self._energy_total_j()
        # Baseline per-token cost is affine in the context length between the few L where its roofline
        # changes regime, so evaluate it at up to 33 points and integrate piecewise-linearly (exact at the
        # sample points; tests compare against every-token evaluation).
        c0 = self.su.context_start
        Ls = np.unique(np.linspace(c0 + 1, c0 + n, min(n, 33)).round().astype(int))
        for b in self.su.baselines:
            lat, en = [], []
            for L in Ls:
                r = b.decode_token(build_graph(self.model, "decode", context_len=int(L)))
                lat.append(r["latency_s"])
                en.append(r["energy_j"])
            allL = np.arange(c0 + 1, c0 + n + 1)
            b_s = float(np.interp(allL, Ls, lat).sum())
            b_j = float(np.interp(allL, Ls, en).sum())
            tag = b.name.replace("-", "_")
            out[f"{tag}_latency_per_token_s"] = b_s / n
            out[f"{tag}_energy_per_token_j"] = b_j / n
            out[f"speedup_vs_{tag}"] = b_s / pim_s
            out[f"energy_efficiency_vs_{tag}"] = b_j / pim_j if pim_j else float("nan")
        del out_j
        return out

    def _energy_total_j(self) -> float:
        total = 0.0
        for a in self.acc.values():
            e = self.energy_by_component(a["counts"], a["asic_energy_pj"], 0)
            total += sum(v for k, v in e.items() if k != "background")
        total += self.energy_by_component(np.zeros(self.n_cmds, dtype=np.int64), 0.0,
                                          int(sum(self.token_cycles)))["background"]
        return total * 1e-12


def run_config(config: dict[str, Any], seed: int = 0) -> Result:
    """The config (PimGptConfig's keys) resolved once into a `Setup`, then simulated."""
    return PimGptSimulator(setup(config)).run(seed=seed)


def run_pimgpt(model: str = "gpt2-xl", tokens: int = 1024, **kwargs: Any) -> Result:
    """Python API: simulate `tokens` decode steps of `model` on PIM-GPT."""
    return run_config({"system": "pimgpt", "model": model, "tokens": tokens, **kwargs})
