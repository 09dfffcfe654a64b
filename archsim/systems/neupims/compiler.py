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

Each GEMV (one head's logits or attend) is one segment (NeuPIMs' PIM_HEADER): flags SEG_START / SEG_END and
an estimate of its length, so that `stream_refresh: wait` admits it only if it ends before the next refresh.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from archsim.dram import latency
from archsim.dram.spec import DramSpec
from archsim.engine.channel import SEG_END, SEG_START

COMP_ELEMS = 16          # multipliers per bank (one COMP consumes 16 elements of the row per bank)


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

    def __init__(self, spec: DramSpec, d_head: int):
        names = set(spec.command_names)
        for need in ("G_ACT", "COMP", "READRES", "PIM_PRE", "GWRITE"):
            if need not in names:
                raise ValueError(f"{spec.name}: no {need} command; NeuPIMs attention needs a neupims device")
        self.spec = spec
        self.c = {n: spec.cmd(n) for n in ("ACT", "PRE", "G_ACT", "COMP", "READRES", "PIM_PRE", "GWRITE")}
        self.banks = pim_unit_banks(spec)
        self.elem_bytes = 2                                    # FP16
        self.row_elems = spec.row_bytes // self.elem_bytes     # 512 for 1 KB rows
        if d_head % COMP_ELEMS or self.row_elems % d_head:
            raise ValueError(f"d_head {d_head} must be a multiple of {COMP_ELEMS} dividing {self.row_elems}")
        self.dk = d_head
        # one bank per bank group of every rank: G_ACT's targets
        per_group = spec.counts[4]
        self.group_banks = list(range(0, self.banks, per_group))
        # admission estimates of a PIM segment (NeuPIMs' formulas), from the rows the engine enforces: a COMP
        # slot, opening a row set (G_ACTs paced by their activation window, then G_ACT -> COMP, PIM_PRE -> G_ACT)
        comp = latency.gap(spec, "COMP", "COMP")
        self.t_round = lambda comps: 2 * (max(comps, 6) + 1) * comp // 2     # noqa: E731 (NeuPIMs)
        faw, acts_per_window = latency.window(spec, "G_ACT", "G_ACT")
        self.t_open = (len(self.group_banks) // acts_per_window * faw + latency.gap(spec, "G_ACT", "COMP")
                       + latency.gap(spec, "PIM_PRE", "G_ACT"))

    # -- pieces ---------------------------------------------------------------------------------------------
    def _gwrite(self, s: Stream, row: int, staging_bank: int = 0) -> None:
        s.add(self.c["ACT"], staging_bank, row)
        s.add(self.c["GWRITE"], staging_bank, row)
        s.add(self.c["PRE"], staging_bank)

    def _rounds(self, s: Stream, rounds: int, comps: int, rows_of_round: list[int]) -> None:
        """`rounds` x (comps COMP + READRES), opening each round's PIM row set when it changes."""
        c = self.c
        n_act = len(self.group_banks)
        computes = [c["COMP"]] * comps + [c["READRES"]]      # one round's commands, all on bank 0
        zeros = [0] * (comps + 1)
        open_row = None
        for r in range(rounds):
            row = rows_of_round[r]
            if row != open_row:
                if open_row is not None:
                    s.add(c["PIM_PRE"], 0)
                s.extend([c["G_ACT"]] * n_act, self.group_banks, [row] * n_act)
                open_row = row
            s.extend(computes, zeros, [row] * (comps + 1))
        if open_row is not None:
            s.add(c["PIM_PRE"], 0)

    # -- the two GEMVs -------------------------------------------------------------------------------------
    def logits(self, s: Stream, context: int, k_row: int, q_row: int, head: int) -> None:
        """q . K^T of one head over `context` keys, K rows starting at `k_row`."""
        start = len(s.cmd)
        heads_per_gwrite = self.row_elems // self.dk
        if head % heads_per_gwrite == 0:
            self._gwrite(s, q_row + head // heads_per_gwrite)
        keys_per_row = self.row_elems // self.dk
        rounds = math.ceil(context / self.banks)
        rows = [k_row + (g // keys_per_row) for g in range(rounds)]
        comps = self.dk // COMP_ELEMS
        self._rounds(s, rounds, comps, rows)
        s.segment(start, self.estimate(rounds, comps, len(set(rows))))

    def attend(self, s: Stream, context: int, v_row: int, s_row: int) -> None:
        """s . V of one head: dk outputs over `context` scores, V^T rows starting at `v_row`."""
        start = len(s.cmd)
        chunks = math.ceil(context / self.row_elems)
        blocks = math.ceil(self.dk / self.banks)
        comps = self.row_elems // COMP_ELEMS
        for c in range(chunks):
            self._gwrite(s, s_row + c)
            rows = [v_row + bl * chunks + c for bl in range(blocks)]
            self._rounds(s, blocks, comps, rows)
        s.segment(start, self.estimate(chunks * blocks, comps, chunks * blocks))

    def estimate(self, rounds: int, comps: int, row_sets: int) -> int:
        """NeuPIMs' GEMV length estimate: opening each row set, then 2 x (max(k, 6) + 1) per round."""
        return row_sets * self.t_open + rounds * self.t_round(comps) + latency.gap(self.spec, "GWRITE", "COMP")

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
