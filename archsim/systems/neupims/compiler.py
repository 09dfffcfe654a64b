"""NeuPIMs attention on PIM: the per-channel command streams of a decode step's two attention GEMVs.

Layout (archsim's reading of NeuPIMs, ASPLOS'24, with its Newton-style PIM: every bank multiplies 16
elements of its open PIM row with 16 elements of the channel's global buffer per COMP, and READRES returns
one accumulated value per bank):

* logits s = q . K^T (per head; dk = d_head, L keys): key j lives in bank j mod B (B banks per channel), at
  slot j div B of that bank; a 1 KB row holds `row_elems / dk` keys. One *round* computes B keys at once:
  dk / 16 COMPs (16 elements each) then READRES. Rounds whose keys share a row index share one activation
  of the PIM rows: G_ACT on every bank group, the rounds, PIM_PRE.
* attend o = s . V (per head; dk outputs, each a dot product of length L): V is stored transposed; output
  element i lives in bank i mod B, its L values in consecutive rows. One round computes B outputs over one
  global-buffer chunk of s (`row_elems` values): row_elems / 16 COMPs then READRES.
* The global buffer is filled by GWRITE from a bank row (the memory row buffer path): q of up to
  row_elems / dk heads per GWRITE for the logits, one chunk of s per GWRITE for attend (ACT, GWRITE, PRE on
  a staging bank).

Layout token_rows (NeuPIMs' code, `kv_layout` of the mapping policy): a bank row holds row_elems dims of one key
across the heads (one key per bank), so one row set of B keys serves every head of a query chunk; the chunk's
query is written once (`logits_token_rows`). With dk = 128 and 1 KB rows both layouts open the same rows per key
and head when the device's heads fill whole rows (GPT3-7B at TP 4); with 5 heads per device (GPT3-13B at TP 8)
token_rows opens a row of 128 used dims for the fifth head of every 32 keys.

Each row set (one activation, its GEMVs, PIM_PRE) is one segment, as NeuPIMs' PIM_HEADER covers one tile: flags
SEG_START / SEG_END and an estimate of its length, so that `stream_refresh: wait` admits it only if it ends
before the next refresh.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from archsim.dram import latency
from archsim.dram.spec import DramSpec
from archsim.engine.channel import SEG_END, SEG_START
from archsim.errors import ConfigError
from archsim.systems.neupims.config import PIM_GEMVS, PIM_PRECHARGE

COMP_ELEMS = 16          # multipliers per bank (one COMP consumes 16 elements of the row per bank)
# how a row set's PIM rows are closed: one all-bank PIM_PRE (unit), or one PIM_PREb per bank as NeuPIMs'
# simulator issues them (per_bank; the mapping policy's `pim_precharge`)


@dataclass
class Stream:
    """One channel's PIM command stream: command indices, bank (local), row, segment flags and estimates."""

    cmd: list[int] = field(default_factory=list)
    bank: list[int] = field(default_factory=list)
    row: list[int] = field(default_factory=list)
    flags: list[int] = field(default_factory=list)
    est: list[int] = field(default_factory=list)

    def add(self, cmd: int, bank: int = 0, row: int = -1) -> None:
        self.cmd.append(cmd)
        self.bank.append(bank)
        self.row.append(row)
        self.flags.append(0)
        self.est.append(0)

    def extend(self, cmd: list[int], bank: list[int], row: list[int]) -> None:
        """Append commands in bulk (lists of one length): the compiler's rounds are thousands of commands."""
        self.cmd += cmd
        self.bank += bank
        self.row += row
        zeros = [0] * len(cmd)
        self.flags += zeros
        self.est += zeros

    def segment(self, start: int, est: int) -> None:
        """Mark commands [start, end) as one admission segment of estimated length `est` cycles."""
        if start < len(self.cmd):
            self.flags[start] |= SEG_START
            self.flags[-1] |= SEG_END
            self.est[start] = est

    def count(self, cmd: int) -> int:
        return sum(1 for c in self.cmd if c == cmd)

    def arrays(self) -> tuple[np.ndarray, ...]:
        return tuple(np.asarray(x, dtype=np.int64) for x in (self.cmd, self.bank, self.row, self.flags, self.est))


def pim_unit_banks(spec: DramSpec) -> int:
    """Banks of one PIM unit: the node of COMP's scope (NeuPIMs' 128-bit channel, an HBM pseudo-channel). KV
    caches and attention streams are placed per unit; an HBM channel of two pseudo-channels holds two."""
    nodes = spec.node_of[:spec.banks_per_channel, spec.commands[spec.cmd("COMP")].scope]
    return int((nodes == nodes[0]).sum())


class AttentionCompiler:
    """Streams of the attention GEMVs for requests placed on one PIM unit of a `neupims` device (bank ids count
    from the unit's first bank)."""

    def __init__(self, spec: DramSpec, d_head: int, pim_precharge: str = "unit", pim_gemv: str = "split"):
        names = set(spec.command_names)
        for need in ("G_ACT", "COMP", "READRES", "PIM_PRE", "GWRITE"):
            if need not in names:
                raise ValueError(f"{spec.name}: no {need} command; NeuPIMs attention needs a neupims device")
        self.spec = spec
        if pim_precharge not in PIM_PRECHARGE:
            raise ValueError(f"pim_precharge must be one of {', '.join(PIM_PRECHARGE)}, got {pim_precharge!r}")
        if pim_precharge == "per_bank" and "PIM_PREb" not in names:
            raise ValueError(f"{spec.name}: no PIM_PREb command for pim_precharge per_bank")
        self.pim_precharge = pim_precharge
        if pim_gemv not in PIM_GEMVS:
            raise ValueError(f"pim_gemv must be one of {', '.join(PIM_GEMVS)}, got {pim_gemv!r}")
        if pim_gemv == "fused" and "COMPS_READRES" not in names:
            raise ConfigError("pim_gemv", f"fused needs a DRAM standard with the fused GEMV COMPS_READRES (neupims_code_fused); "
                              f"{spec.name} has none")
        self.fused = pim_gemv == "fused"
        self.c = {n: spec.cmd(n) for n in ("ACT", "PRE", "G_ACT", "COMP", "READRES", "PIM_PRE", "GWRITE")}
        if pim_precharge == "per_bank":
            self.c["PIM_PREb"] = spec.cmd("PIM_PREb")
        if self.fused:
            self.c["COMPS_READRES"] = spec.cmd("COMPS_READRES")
        self.banks = pim_unit_banks(spec)
        self.elem_bytes = 2                                    # FP16
        self.row_elems = spec.row_bytes // self.elem_bytes     # 512 for 1 KB rows
        if d_head % COMP_ELEMS or self.row_elems % d_head:
            raise ValueError(f"d_head {d_head} must be a multiple of {COMP_ELEMS} dividing {self.row_elems}")
        self.dk = d_head
        # one bank per bank group of every rank: G_ACT's targets, taking the ranks in turn (a rank's G_ACTs are
        # an activation window apart, the ranks' windows run side by side; the stream issues in order). The
        # "rank" is the level of the standard's activation window: NeuPIMs' pseudo-rank, HBM2's pseudo-channel,
        # HBM3's stack ID
        window_level = latency.widest_level(spec, "G_ACT", "G_ACT")
        level = spec.levels.index(window_level)
        per_group = spec.counts[4]
        firsts = list(range(0, self.banks, per_group))
        by_rank: dict[int, list[int]] = {}
        for b in firsts:
            by_rank.setdefault(int(spec.node_of[b, level]), []).append(b)
        self.group_banks = [b for turn in zip(*by_rank.values(), strict=True) for b in turn]
        # admission estimates of a PIM segment (NeuPIMs' formulas), from the rows the engine enforces: a COMP
        # slot, opening a row set (G_ACTs paced by their activation window, then G_ACT -> COMP, PIM_PRE -> G_ACT)
        comp = latency.gap(spec, "COMP", "COMP")
        self.t_round = lambda comps: 2 * (max(comps, 6) + 1) * comp // 2     # noqa: E731 (NeuPIMs)
        # a rank's G_ACTs one after another (NewtonSim's estimate: tFAW x (G_ACTs per rank - 1) + tRCDRD,
        # channel_state.cc:324), then the row cycle's close and reopen
        ranks = len(by_rank)
        self.t_open = ((len(self.group_banks) // ranks - 1) * latency.level_gap(spec, "G_ACT", "G_ACT", window_level)
                       + latency.gap(spec, "G_ACT", "COMP") + latency.gap(spec, "PIM_PRE", "G_ACT"))
        # closing the rows: (AL + tRTP) per precharge command, as NewtonSim's estimate (channel_state.cc:318-321)
        if pim_precharge == "per_bank":
            self.t_open += self.banks * latency.gap(spec, "COMP", "PIM_PREb")
        else:
            self.t_open += latency.gap(spec, "COMP", "PIM_PRE")

    # -- pieces ---------------------------------------------------------------------------------------------
    def _gwrite(self, s: Stream, row: int, staging_bank: int = 0) -> None:
        s.add(self.c["ACT"], staging_bank, row)
        s.add(self.c["GWRITE"], staging_bank, row)
        s.add(self.c["PRE"], staging_bank)

    def _row_set(self, s: Stream, row: int, gemvs: list[int]) -> None:
        """One PIM row set: G_ACT on every bank group, a GEMV of k COMPs + READRES for each k in `gemvs`
        (the open rows' heads or blocks), PIM_PRE; one admission segment (NeuPIMs' PIM_HEADER covers one
        tile: NeuPIMSLogitSoftmax.cc:197-215, NeuPIMSAttend.cc:186-196)."""
        c = self.c
        start = len(s.cmd)
        n_act = len(self.group_banks)
        s.extend([c["G_ACT"]] * n_act, self.group_banks, [row] * n_act)
        for comps in gemvs[:-1] if self.fused else gemvs:
            s.extend([c["COMP"]] * comps + [c["READRES"]], [0] * (comps + 1), [row] * (comps + 1))
        if self.fused:      # the last GEMV as one command: the rows close nRTP after it (mapping policy pim_gemv)
            s.add(c["COMPS_READRES"], 0, row)
        if self.pim_precharge == "per_bank":
            s.extend([c["PIM_PREb"]] * self.banks, list(range(self.banks)), [-1] * self.banks)
        else:
            s.add(c["PIM_PRE"], 0)
        s.segment(start, self.estimate(len(gemvs), max(gemvs), 1))

    # -- the two GEMVs -------------------------------------------------------------------------------------
    def logits(self, s: Stream, context: int, k_row: int, q_row: int, head: int, queries: int = 1) -> None:
        """q . K^T of one head over `context` keys, K rows starting at `k_row` (layout head_rows: a bank row
        holds row_elems / dk keys of one head, so one activation serves that many rounds of B keys).

        GQA: `queries` query heads of one KV group (heads head .. head + queries - 1, all in the global buffer
        that one GWRITE of q fills) read the same K rows: each open row set runs one GEMV per query head and
        round (the group's heads as more GEMV rows over the same keys), so K rows are opened once per KV head."""
        heads_per_gwrite = self.row_elems // self.dk
        if head % heads_per_gwrite == 0:
            self._gwrite(s, q_row + head // heads_per_gwrite)
        keys_per_row = self.row_elems // self.dk
        rounds = math.ceil(context / self.banks)
        comps = self.dk // COMP_ELEMS
        for r0 in range(0, rounds, keys_per_row):
            self._row_set(s, k_row + r0 // keys_per_row, [comps] * (min(keys_per_row, rounds - r0) * queries))

    def logits_token_rows(self, s: Stream, context: int, k_row: int, q_row: int, heads: int, row_stride: int) -> None:
        """q . K^T of `heads` heads sharing one query chunk (layout token_rows, NeuPIMs' code: a bank row holds
        row_elems dims of one key across the heads, so a row set of B keys serves every head of the chunk;
        NeuPIMSLogitSoftmax.cc:173-271, PIMTensor.cc:20-33): GWRITE of the chunk, then per B keys one row set
        with a GEMV per head. The request's tiles of one chunk are `row_stride` rows apart from `k_row`."""
        self._gwrite(s, q_row)
        comps = self.dk // COMP_ELEMS
        for t in range(math.ceil(context / self.banks)):
            self._row_set(s, k_row + t * row_stride, [comps] * heads)

    def attend(self, s: Stream, context: int, v_row: int, s_row: int) -> None:
        """s . V of one head: dk outputs over `context` scores, V^T rows starting at `v_row`. Per chunk of
        row_elems scores: GWRITE of the chunk, then per block of B outputs one row set with one GEMV of as many
        COMPs as the chunk has scores / 16 (NeuPIMSAttend.cc:171-174)."""
        chunks = math.ceil(context / self.row_elems)
        blocks = math.ceil(self.dk / self.banks)
        for c in range(chunks):
            self._gwrite(s, s_row + c)
            comps = math.ceil(min(self.row_elems, context - c * self.row_elems) / COMP_ELEMS)
            for bl in range(blocks):
                self._row_set(s, v_row + bl * chunks + c, [comps])

    def estimate(self, rounds: int, comps: int, row_sets: int) -> int:
        """NeuPIMs' GEMV length estimate (NewtonSim channel_state.cc:271-330): opening each row set, then
        2 x (max(k, 6) + 1) per round."""
        return row_sets * self.t_open + rounds * self.t_round(comps)

    def decode_step(self, contexts: list[int], heads: int) -> tuple[Stream, Stream]:
        """(logits stream, attend stream) of one decode step for requests with these context lengths,
        `heads` heads each, all on this channel. KV rows are laid out request after request."""
        lg, at = Stream(), Stream()
        row = 0
        for L in contexts:
            k_rows = math.ceil(math.ceil(L / self.banks) / (self.row_elems // self.dk))
            v_rows = math.ceil(self.dk / self.banks) * math.ceil(L / self.row_elems)
            for h in range(heads):
                self.logits(lg, L, row, q_row=10_000, head=h)
                row += k_rows
                self.attend(at, L, row, s_row=20_000 + h * 8)
                row += v_rows
        return lg, at
