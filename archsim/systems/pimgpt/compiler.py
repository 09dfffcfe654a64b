"""PIM-GPT compiler: lay a GPT model out over GDDR6-AiM channels x banks and emit per-channel command
streams (isa/pim.yaml) plus the host instruction stream (isa/host.yaml). Policy: mappings/pimgpt.yaml.

Layout in short (PIM-GPT, Wu, Wang & Lu 2024):
* every bank of a channel executes the same MACAB (same row, column, GB slot) in lock-step, so all banks of
  a channel hold data of identical shape at identical addresses; a bank's column space is linear:
  address a -> (row = base + a // 64, column = a % 64);
* weight GEMV W (n x k): output o -> channel c, bank b, slot i with o = i*C*B + c*B + b; k is cut into
  chunks of at most the global-buffer size (1024 BF16); the bank holds, chunk-major, one segment of
  ceil(w/16) columns per (chunk, slot); after each segment RDMAC reads the 16 accumulators (2 bursts);
* attention: head h -> channel h mod C. K row-major: token t -> bank t mod 16, slot t // 16; one token's keys
  of all the channel's heads are contiguous (head concatenation). V column-major: one (head, d) pair per bank
  and row segment holding all max_context tokens;
* K/V space is reserved up to max_context; each token the ASIC writes its K row (ACT, WR..., PRE on one bank)
  and one V column per 16 (head, d) pairs (ACTAB, 16 x WR, PREAB).

Timing-only form: the channel engine needs only each command's opcode and bank. `*_timing` methods return
`Flat` streams (cmd, bank, offs) of all channels at once (channel c = [offs[c], offs[c+1])), generated
vectorised without the row/column/GB/source columns; they equal the corresponding `*_program` streams
command for command (tests/test_pim_engine.py) and are what the decode simulation runs per token.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from archsim import paths, schema
from archsim.dram.spec import DramSpec
from archsim.errors import ConfigError, NotModelled, UserError
from archsim.pim.stream import Stream
from archsim.schema import REQUIRED, opt
from archsim.workload.spec import ModelSpec

# the values of each policy key archsim models (a value the paper's design space has but archsim does not
# model is NotModelled, naming what is supported)
SUPPORTED = {
    ("weights", "spread"): ["channels_x_banks"],
    ("weights", "chunking"): ["global_buffer"],
    ("attention", "head_to_channel"): ["round_robin"],
    ("attention", "head_concatenation"): [True],
    ("attention", "k_layout"): ["row_major"],
    ("attention", "v_layout"): ["column_major"],
    ("attention", "kv_reserve"): ["max_context"],
    ("attention", "v_write"): ["block_rewrite"],
    ("rows", "close_after_op"): [True],
}


@dataclass(frozen=True)
class WeightsPolicy:
    spread: str = opt(REQUIRED, "how a weight matrix's outputs spread: over channels x banks")
    chunking: str = opt(REQUIRED, "how its input dimension is cut: into global-buffer chunks")
    layout: str = opt(REQUIRED, "packed: segments back to back; row_aligned: each segment starts a row",
                      choices=("packed", "row_aligned"))


@dataclass(frozen=True)
class AttentionPolicy:
    head_to_channel: str = opt(REQUIRED, "head h -> channel h mod C (round_robin)")
    head_concatenation: bool = opt(REQUIRED, "a DRAM row holds one token's keys of several heads")
    k_layout: str = opt(REQUIRED, "K row-major: each new token appends a key row")
    v_layout: str = opt(REQUIRED, "V column-major: each token appends one element per (head, d) row")
    kv_reserve: str = opt(REQUIRED, "K/V space reserved up to the model's maximum context")
    v_write: str = opt(REQUIRED, "how a token's V column is written")


@dataclass(frozen=True)
class RowsPolicy:
    close_after_op: bool = opt(REQUIRED, "PREAB at the end of every PIM op")


@dataclass(frozen=True)
class Policy:
    """A PIM-GPT mapping policy (mappings/pimgpt.yaml)."""

    name: str = opt("", "the policy's name (default: its file's)")
    source: str = opt("", "where it comes from (default: its file)")
    weights: WeightsPolicy = opt(WeightsPolicy, "weight matrices over channels and banks")
    attention: AttentionPolicy = opt(AttentionPolicy, "K and V over channels, banks and rows")
    rows: RowsPolicy = opt(RowsPolicy, "when rows close")

    @property
    def weight_layout(self) -> str:
        return self.weights.layout

    @property
    def raw(self) -> dict[str, Any]:
        """The policy as a mapping (the run's manifest records it)."""
        return dataclasses.asdict(self)


def load_policy(name_or_path: str | Path = "pimgpt", overrides: dict[str, Any] | None = None) -> Policy:
    """Load a mapping policy; `overrides` as {"weights.layout": x} or {"weights": {"layout": x}} (the nested
    form a config's mapping_overrides takes). Values archsim does not model yet raise NotModelled naming them."""
    from archsim.config import flatten

    path = paths.resolve("mappings", name_or_path)
    policy = schema.load(Policy, path, overrides, label="mapping_overrides")
    overridden = set(flatten(dict(overrides or {})))
    for (sec, key), supported in SUPPORTED.items():
        value = getattr(getattr(policy, sec), key)
        if value not in supported:
            where = f"mapping_overrides.{sec}.{key}" if f"{sec}.{key}" in overridden else f"{path}: {sec}.{key}"
            raise NotModelled(f"{where}: {value!r} is not modelled yet; supported: "
                              f"{', '.join(map(str, supported))} (system pimgpt)")
    return dataclasses.replace(policy, name=policy.name or path.stem, source=policy.source or str(path))


# ---- geometry ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Geometry:
    channels: int
    banks: int
    rows: int
    cols_per_row: int
    lanes: int            # BF16 elements per 32 B column
    gb_slots: int         # global-buffer slots of 32 B
    row_bytes: int
    cmd: dict             # command name -> spec index

    @property
    def gb_elems(self) -> int:
        return self.gb_slots * self.lanes

    readouts: int         # RDMAC bursts per readout of every bank's accumulator
    acc_per_burst: int    # accumulators one RDMAC burst returns (burst bytes / accumulator bytes)

    # PIM hardware parameters a preset may give under `pim:`; each changes timing or energy (tests check it)
    PIM_KEYS = ("macs_per_bank", "global_buffer_bytes", "accumulator_bytes", "energy", "source")

    @classmethod
    def from_spec(cls, spec: DramSpec) -> Geometry:
        pim = spec.raw.get("pim") or {}
        src = f"preset {spec.name}"
        for key in pim:
            if key not in cls.PIM_KEYS:
                raise ConfigError(f"pim.{key}", "not modelled by PIM-GPT; allowed: " + ", ".join(cls.PIM_KEYS),
                                  source=src)
        lanes = spec.access_bytes // 2          # BF16 elements in one column
        macs = pim.get("macs_per_bank", lanes)
        if macs != lanes:
            # one MAC command multiplies the column it reads in every bank in one step: the multipliers are
            # as many as the elements of a column, and a wider MAC needs a wider column (more bytes per access)
            raise ConfigError("pim.macs_per_bank", f"{macs!r}: a MAC command multiplies one {spec.access_bytes} B "
                              f"column ({lanes} BF16) per bank, so macs_per_bank must be {lanes}; a {macs}-wide MAC "
                              f"needs org.access_bytes = {2 * macs}" if isinstance(macs, int) and macs > 0 else
                              f"{macs!r}: must be a positive whole number", source=src)
        acc = pim.get("accumulator_bytes", 4)
        if not isinstance(acc, int) or acc < 1 or spec.access_bytes % acc:
            raise ConfigError("pim.accumulator_bytes", f"{acc!r}: must divide the {spec.access_bytes} B burst "
                              "that RDMAC reads accumulators with (2 = bf16, 4 = fp32, 8 = fp64)", source=src)
        gb_bytes = pim.get("global_buffer_bytes", spec.row_bytes)
        if not isinstance(gb_bytes, int) or gb_bytes < spec.access_bytes or gb_bytes % spec.access_bytes:
            raise ConfigError("pim.global_buffer_bytes", f"{gb_bytes!r}: must be a positive multiple of the "
                              f"{spec.access_bytes} B column", source=src)
        per_burst = spec.access_bytes // acc
        banks = pim_unit_banks(spec)
        return cls(channels=spec.channels * (spec.banks_per_channel // banks), banks=banks, rows=spec.rows,
                   cols_per_row=spec.columns, lanes=lanes, gb_slots=gb_bytes // spec.access_bytes,
                   row_bytes=spec.row_bytes, cmd={c.name: c.index for c in spec.commands},
                   readouts=-(-banks // per_burst), acc_per_burst=per_burst)


def pim_unit_banks(spec: DramSpec) -> int:
    """Banks of one PIM unit: the node of the all-bank MAC command's scope (a GDDR6-AiM channel, an HBM
    pseudo-channel). The layout's "channels" are these units: an HBM channel of two pseudo-channels is two."""
    if "MACAB" not in spec.command_names:
        raise ConfigError("preset", f"{spec.name} has no all-bank MAC command (MACAB); PIM-GPT needs an AiM-style "
                          "PIM device, e.g. GDDR6_AiM_16Gbps, HBM2_2Gbps_AiM, HBM3_6400Mbps_AiM")
    nodes = spec.node_of[:spec.banks_per_channel, spec.commands[spec.cmd("MACAB")].scope]
    return int((nodes == nodes[0]).sum())


# ---- stream emitters -----------------------------------------------------------------------------------------
def mac_program(g: Geometry, seg_start: np.ndarray, seg_ncols: np.ndarray, seg_gb: np.ndarray,
                base_row: int) -> Stream:
    """MACAB runs over lock-step segments: ACTAB on entering a row, PREAB on leaving it (before the
    readout, so the precharge overlaps the MAC drain), RDMAC x readouts (banks / accumulators per burst) after
    every segment."""
    seg_start = np.asarray(seg_start, dtype=np.int64)
    seg_ncols = np.asarray(seg_ncols, dtype=np.int64)
    n = int(seg_ncols.sum())
    if n == 0:
        return Stream.empty()
    S = len(seg_start)
    sid = np.repeat(np.arange(S), seg_ncols)
    first = np.cumsum(seg_ncols) - seg_ncols
    off = np.arange(n) - first[sid]
    addr = seg_start[sid] + off
    row = base_row + addr // g.cols_per_row
    col = addr % g.cols_per_row
    gb = np.asarray(seg_gb, dtype=np.int64)[sid] + off
    change = row[1:] != row[:-1]
    row_start = np.r_[True, change]
    row_end = np.r_[change, True]
    seg_end = np.r_[sid[1:] != sid[:-1], True]
    R = g.readouts
    width = 3 + R
    C = g.cmd
    cmd = np.empty((n, width), dtype=np.int64)
    cmd[:, 0], cmd[:, 1], cmd[:, 2] = C["ACTAB"], C["MACAB"], C["PREAB"]
    cmd[:, 3:] = C["RDMAC"]
    mask = np.empty((n, width), dtype=bool)
    mask[:, 0], mask[:, 1], mask[:, 2] = row_start, True, row_end
    mask[:, 3:] = seg_end[:, None]
    bank = np.zeros((n, width), dtype=np.int64)
    bank[:, 3:] = np.arange(R) * g.acc_per_burst
    rows = np.full((n, width), -1, dtype=np.int64)
    rows[:, 0] = row
    rows[:, 1] = row
    cols = np.full((n, width), -1, dtype=np.int64)
    cols[:, 1] = col
    gbs = np.full((n, width), -1, dtype=np.int64)
    gbs[:, 1] = gb
    clr = np.full((n, width), -1, dtype=np.int64)
    clr[:, 1] = off == 0
    m = mask.ravel()
    return Stream.from_columns(int(m.sum()), cmd=cmd.ravel()[m], bank=bank.ravel()[m], row=rows.ravel()[m],
                               col=cols.ravel()[m], gb=gbs.ravel()[m], clr=clr.ravel()[m])


def wrgb_program(g: Geometry, gather: np.ndarray) -> Stream:
    """Write len(gather) global-buffer slots (slot s <- input elements gather[s])."""
    n = len(gather)
    if n > g.gb_slots:
        raise ValueError(f"{n} global-buffer slots > {g.gb_slots}")
    return Stream.from_columns(n, gather=gather, cmd=g.cmd["WRGB"], bank=0, gb=np.arange(n), src=np.arange(n))


def _gather(indices: np.ndarray, valid: np.ndarray, lanes: int) -> np.ndarray:
    """(slots, lanes) element indices, -1 where invalid."""
    idx = np.where(valid, indices, -1).astype(np.int64)
    pad = (-len(idx)) % lanes
    return np.r_[idx, np.full(pad, -1, dtype=np.int64)].reshape(-1, lanes)


def bank_rw_program(g: Geometry, bank: int, base_row: int, addr: int, ncols: int, write: bool,
                    gather: np.ndarray | None = None) -> Stream:
    """Single-bank access of ncols columns from linear address `addr`: ACT, RD/WR..., PRE per row touched."""
    parts = []
    a, k = addr, 0
    while k < ncols:
        r, c = divmod(a, g.cols_per_row)
        take = min(ncols - k, g.cols_per_row - c)
        n = take + 2
        cmd = np.r_[g.cmd["ACT"], np.full(take, g.cmd["WR" if write else "RD"]), g.cmd["PRE"]]
        cols = np.r_[-1, np.arange(c, c + take), -1]
        rows = np.r_[base_row + r, np.full(take, base_row + r), -1]
        src = np.r_[-1, np.arange(k, k + take), -1] if write else -1
        parts.append(Stream.from_columns(n, gather=gather if (write and not parts) else None, cmd=cmd, bank=bank,
                                         row=rows, col=cols, src=src))
        a += take
        k += take
    s = Stream.concat(parts)
    if write and gather is not None:
        s.gather = gather
        s.src = np.where(np.isin(s.cmd, [g.cmd["WR"]]), s.src, -1)
    return s


# ---- timing-only streams (opcode + bank) ----------------------------------------------------------------------
Flat = tuple  # (cmd, bank, offs): int64 arrays; all channels concatenated, bank >= 0, channel c = offs[c]:offs[c+1]


def flat_streams(streams: list[Any]) -> Flat:
    """Flat form of per-channel streams (Stream, (cmd, bank, ...) tuple or None)."""
    cmds, banks, lens = [], [], [0]
    for s in streams:
        if s is None:
            lens.append(0)
            continue
        cmd, bank = (s.cmd, s.bank) if isinstance(s, Stream) else (s[0], s[1])
        cmds.append(np.asarray(cmd, dtype=np.int64))
        banks.append(np.maximum(np.asarray(bank, dtype=np.int64), 0))
        lens.append(len(cmds[-1]))
    z = np.zeros(0, dtype=np.int64)
    return (np.ascontiguousarray(np.concatenate(cmds)) if cmds else z,
            np.ascontiguousarray(np.concatenate(banks)) if banks else z.copy(), np.cumsum(lens).astype(np.int64))


def concat_flat(parts: list[list[tuple[np.ndarray, np.ndarray]]]) -> Flat:
    """Flat form of per-channel lists of (cmd, bank) pieces."""
    cmds, banks, lens = [], [], [0]
    for pieces in parts:
        n = 0
        for c, b in pieces:
            cmds.append(c)
            banks.append(b)
            n += len(c)
        lens.append(n)
    z = np.zeros(0, dtype=np.int64)
    return (np.concatenate(cmds).astype(np.int64) if cmds else z,
            np.concatenate(banks).astype(np.int64) if banks else z.copy(), np.cumsum(lens).astype(np.int64))


def mac_timing(g: Geometry, seg_start: np.ndarray, seg_ncols: np.ndarray, seg_prog: np.ndarray,
               prog_wrgb: np.ndarray, prog_ch: np.ndarray) -> Flat:
    """Timing form of a sequence of programs `wrgb_program(prog_wrgb[p] slots) + mac_program(segments of p)`
    (segments grouped by program in order, programs grouped by channel in order; every program has at least
    one MAC column). Same command rules as `mac_program`: ACTAB on entering a row, PREAB on leaving it,
    RDMAC x readouts (banks 0, 8, ... for fp32 accumulators) after every segment; rows restart at each program."""
    seg_ncols = np.asarray(seg_ncols, dtype=np.int64)
    seg_prog = np.asarray(seg_prog, dtype=np.int64)
    prog_wrgb = np.asarray(prog_wrgb, dtype=np.int64)
    P = len(prog_wrgb)
    n = int(seg_ncols.sum())
    C = g.cmd
    cpr = g.cols_per_row
    first = np.cumsum(seg_ncols) - seg_ncols
    addr = np.repeat(np.asarray(seg_start, dtype=np.int64) - first, seg_ncols) + np.arange(n)
    r = addr // cpr
    prog = np.repeat(seg_prog, seg_ncols)
    rs = np.empty(n, dtype=bool)                       # row start (or program start)
    rs[0] = True
    np.not_equal(r[1:], r[:-1], out=rs[1:])
    rs[1:] |= prog[1:] != prog[:-1]
    re = np.empty(n, dtype=bool)                       # row end (or program end)
    re[:-1] = rs[1:]
    re[-1] = True
    se = np.zeros(n, dtype=bool)                       # segment end
    se[(first + seg_ncols - 1)[seg_ncols > 0]] = True
    prog_n = np.bincount(seg_prog, weights=seg_ncols, minlength=P).astype(np.int64)
    if (prog_n == 0).any():
        raise ValueError("mac_timing: a program without MAC columns")
    wr = np.zeros(n, dtype=np.int64)
    wr[np.cumsum(prog_n) - prog_n] = prog_wrgb
    R = g.readouts
    cnt = wr + rs + 1 + re + R * se
    end = np.cumsum(cnt)
    cmd = np.full(int(end[-1]), C["WRGB"], dtype=np.int64)
    bank = np.zeros(int(end[-1]), dtype=np.int64)
    pa = end - cnt + wr                                # ACTAB slot
    cmd[pa[rs]] = C["ACTAB"]
    pm = pa + rs                                       # MACAB slot
    cmd[pm] = C["MACAB"]
    cmd[pm[re] + 1] = C["PREAB"]
    pr = (pm + 1 + re)[se]
    for k in range(R):
        cmd[pr + k] = C["RDMAC"]
        bank[pr + k] = g.acc_per_burst * k
    ch_n = np.bincount(np.asarray(prog_ch, dtype=np.int64), weights=prog_n, minlength=g.channels).astype(np.int64)
    endz = np.r_[0, end]
    offs = np.r_[0, endz[np.cumsum(ch_n)]].astype(np.int64)
    return cmd, bank, offs


def rw_timing(g: Geometry, bank: int, addr: int, ncols: int, write: bool) -> tuple[np.ndarray, np.ndarray]:
    """Timing form of `bank_rw_program`: ACT, RD/WR..., PRE (all at `bank`) per row touched."""
    cpr = g.cols_per_row
    takes = []
    a, k = addr, 0
    while k < ncols:
        take = min(ncols - k, cpr - a % cpr)
        takes.append(take)
        a += take
        k += take
    if not takes:
        z = np.zeros(0, dtype=np.int64)
        return z, z.copy()
    C = g.cmd
    reps = np.ones(3 * len(takes), dtype=np.int64)
    reps[1::3] = takes
    cmd = np.repeat(np.tile(np.array([C["ACT"], C["WR" if write else "RD"], C["PRE"]], dtype=np.int64),
                            len(takes)), reps)
    return cmd, np.full(len(cmd), bank, dtype=np.int64)


# ---- layouts -------------------------------------------------------------------------------------------------
@dataclass
class WeightLayout:
    """A weight matrix W (n outputs x k inputs) spread over channels x banks (see module doc)."""

    name: str
    n: int
    k: int
    base_row: int
    g: Geometry
    packed: bool = True

    def __post_init__(self) -> None:
        g = self.g
        self.widths = [min(g.gb_elems, self.k - j * g.gb_elems) for j in range(math.ceil(self.k / g.gb_elems))]
        self.chunk_cols = [math.ceil(w / g.lanes) for w in self.widths]
        CB = g.channels * g.banks
        self.slots = [max(0, math.ceil((self.n - c * g.banks) / CB)) for c in range(g.channels)]
        self.segs = [self._segments(m) for m in self.slots]
        self.n_rows = max((math.ceil(end / g.cols_per_row) for (_, _, end) in self.segs), default=0)

    def _segments(self, m: int) -> tuple[list[tuple[int, int]], np.ndarray, int]:
        """(chunk, slot) order, start addresses, end address for a channel with m slots per bank."""
        order, starts = [], []
        a = 0
        cpr = self.g.cols_per_row
        for j, cols in enumerate(self.chunk_cols):
            for i in range(m):
                if not self.packed and a % cpr:
                    a += cpr - a % cpr
                order.append((j, i))
                starts.append(a)
                a += cols
        return order, np.array(starts, dtype=np.int64), a

    @property
    def partials(self) -> int:
        return len(self.widths)

    def output_index(self, c: int, b: int, i: int) -> int:
        o = i * self.g.channels * self.g.banks + c * self.g.banks + b
        return o if o < self.n else -1

    def program(self, c: int, base_row: int | None = None) -> Stream:
        g = self.g
        order, starts, _ = self.segs[c]
        base = self.base_row if base_row is None else base_row
        parts = []
        per_chunk = self.slots[c]
        for j, cols in enumerate(self.chunk_cols):
            if per_chunk == 0:
                break
            lo = j * g.gb_elems
            idx = lo + np.arange(cols * g.lanes)
            parts.append(wrgb_program(g, _gather(idx, idx < self.k, g.lanes)))
            sel = slice(j * per_chunk, (j + 1) * per_chunk)
            parts.append(mac_program(g, starts[sel], np.full(per_chunk, cols), np.zeros(per_chunk, np.int64), base))
        if parts:
            parts.append(Stream.empty())
        return Stream.concat(parts)

    def readout_map(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        """Per RDMAC burst of channel c in program order: (acc_per_burst,) output indices (-1 = padding) and
        the partial."""
        order, _, _ = self.segs[c]
        outs, parts = [], []
        k = self.g.acc_per_burst
        for (j, i) in order:
            for r in range(self.g.readouts):
                outs.append([self.output_index(c, r * k + q, i) for q in range(k)])
                parts.append(j)
        return np.array(outs, dtype=np.int64).reshape(-1, k), np.array(parts, dtype=np.int64)

    def place(self, mems: list[Any], W: np.ndarray) -> None:
        """Functional: store W (n x k) into the channels' banks (the one-time weight load)."""
        g = self.g
        for c in range(g.channels):
            order, starts, _ = self.segs[c]
            for (j, i), a in zip(order, starts, strict=True):
                for b in range(g.banks):
                    o = self.output_index(c, b, i)
                    if o < 0:
                        continue
                    vals = W[o, j * g.gb_elems: j * g.gb_elems + self.widths[j]]
                    self._store_linear(mems[c], b, a, vals)

    def _store_linear(self, mem: Any, b: int, addr: int, vals: np.ndarray) -> None:
        g = self.g
        e = addr * g.lanes
        rowe = g.cols_per_row * g.lanes
        k = 0
        while k < len(vals):
            r, off = divmod(e + k, rowe)
            take = min(len(vals) - k, rowe - off)
            mem.store(b, self.base_row + r, off, vals[k:k + take])
            k += take

    def timing(self) -> Flat:
        """Timing form of `program(c)` for every channel."""
        return flat_streams([self.program(c) for c in range(self.g.channels)])

    def element_reads_timing(self, o: int) -> tuple[int, np.ndarray, np.ndarray]:
        """Timing form of `element_reads(o)`: (channel, cmd, bank)."""
        g = self.g
        c, b = divmod(o % (g.channels * g.banks), g.banks)
        i = o // (g.channels * g.banks)
        _, starts, _ = self.segs[c]
        m = self.slots[c]                              # segment order is chunk-major: index j * m + i
        parts = [rw_timing(g, b, int(starts[j * m + i]), cols, write=False) for j, cols in enumerate(self.chunk_cols)]
        return c, np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def element_reads(self, o: int) -> tuple[int, Stream]:
        """Channel and single-bank RD program that fetch matrix row o (embedding lookup)."""
        g = self.g
        c, rem = divmod(o % (g.channels * g.banks), g.banks)
        b, i = rem, o // (g.channels * g.banks)
        order, starts, _ = self.segs[c]
        parts = [bank_rw_program(g, b, self.base_row, int(starts[order.index((j, i))]), cols, write=False)
                 for j, cols in enumerate(self.chunk_cols)]
        return c, Stream.concat(parts)


@dataclass
class AttentionLayout:
    """K (row-major, heads concatenated) and V^T (column-major) of one layer, reserved to max context.

    Grouped-query attention (n_kv_heads < n_heads): the paper's per-head layout applies to the KV heads -- K and
    V are stored once per KV head (KV head j -> channel j mod C), never duplicated -- and query head h reads
    KV head h // rep (rep = n_heads / n_kv_heads query heads per KV head). q . K^T: the global buffer holds the
    q of every query head of a group of KV heads, and each K column is MACed rep times in a row (one
    accumulator per bank), the row staying open; p . V: one program per query head, over its KV head's V^T.
    With rep = 1 (GPT) the streams are the paper's, command for command."""

    layer: int
    n_heads: int                  # query heads
    d_head: int
    max_context: int
    k_base: int
    g: Geometry
    v_base: int = 0
    n_kv_heads: int | None = None  # K/V heads (GQA); None: n_heads (multi-head attention)

    def __post_init__(self) -> None:
        g = self.g
        if self.d_head % g.lanes or (self.d_head * 1) % g.banks and self.d_head < g.banks:
            raise NotImplementedError(f"d_head={self.d_head} not a multiple of {g.lanes} (issue #3)")
        kv = self.n_heads if self.n_kv_heads is None else self.n_kv_heads
        if kv < 1 or self.n_heads % kv:
            raise NotImplementedError(f"{self.n_heads} query heads over {kv} KV heads: GQA needs a whole number "
                                      "of query heads per KV head (issue #37)")
        self.n_kv_heads = kv
        self.rep = self.n_heads // kv                            # query heads per KV head
        if self.rep * self.d_head > g.gb_elems:
            raise NotImplementedError(f"GQA with {self.rep} query heads of {self.d_head} per KV head: their q "
                                      f"exceed the {g.gb_elems}-element global buffer (issue #37)")
        self.cph = self.d_head // g.lanes                        # columns per head
        self.heads = [[h for h in range(kv) if h % g.channels == c] for c in range(g.channels)]   # KV heads
        # query heads each channel serves, in program order: the rep query heads of each of its KV heads
        self.q_heads = [[j * self.rep + r for j in hs for r in range(self.rep)] for hs in self.heads]
        gmax = max(1, g.gb_elems // (self.d_head * self.rep))
        self.groups = [[hs[x:x + gmax] for x in range(0, len(hs), gmax)] for hs in self.heads]
        self.u_max = math.ceil(self.max_context / g.banks)        # token slots per bank
        cpr = g.cols_per_row
        # K: per channel, group-major; each group starts on a row boundary
        self.k_group_base: list[list[int]] = []
        k_rows = 0
        for groups in self.groups:
            bases, a = [], 0
            for grp in groups:
                bases.append(a)
                a += self.u_max * len(grp) * self.cph
                a += (-a) % cpr
            self.k_group_base.append(bases)
            k_rows = max(k_rows, a // cpr)
        self.k_rows = k_rows
        # V^T: pair p = head_index * d_head + d -> bank p % B, slot p // B; a slot spans ceil(Lmax/16) columns
        self.v_cols = math.ceil(self.max_context / g.lanes)
        self.v_stride = math.ceil(self.v_cols / cpr) * cpr
        self.v_slots = [len(hs) * self.d_head // g.banks for hs in self.heads]
        self.v_rows = max(self.v_slots) * self.v_stride // cpr
        self.v_base = self.k_base + self.k_rows

    @property
    def n_rows(self) -> int:
        return self.k_rows + self.v_rows

    # -- timing-only forms (all channels at once) -----------------------------------------------------------
    def _timing_tables(self) -> None:
        g = self.g
        gs = [(c, len(grp), base) for c in range(g.channels)
              for grp, base in zip(self.groups[c], self.k_group_base[c], strict=True)]
        self._grp_ch = np.array([x[0] for x in gs], dtype=np.int64)
        self._grp_G = np.array([x[1] for x in gs], dtype=np.int64)
        self._grp_base = np.array([x[2] for x in gs], dtype=np.int64)
        # per query head (program order): its channel and its KV head's index within the channel
        hs = [(c, i) for c in range(g.channels) for i in range(len(self.heads[c])) for _ in range(self.rep)]
        self._head_ch = np.array([x[0] for x in hs], dtype=np.int64)
        self._head_i = np.array([x[1] for x in hs], dtype=np.int64)
        spp = self.d_head // g.banks
        C = g.cmd
        self._v_timing = []                            # per channel: the V^T column writes (t-independent)
        for c in range(g.channels):
            S = len(self.heads[c]) * spp
            cmd = np.tile(np.r_[C["ACTAB"], np.full(g.banks, C["WR"]), C["PREAB"]], S).astype(np.int64)
            bank = np.tile(np.r_[0, np.arange(g.banks), 0], S).astype(np.int64)
            self._v_timing.append((cmd, bank))

    def timing_class(self, kind: str, arg: int) -> tuple:
        """What the timing form of `kind` ("score"/"context" at context length L, "kv" at token t) depends on:
        equal classes give equal (cmd, bank) streams (tests/test_pim_engine.py), so one stream and one memo key
        serve every argument of a class. score: the token slots per bank ceil(L / banks); context: the
        columns ceil(L / lanes) (the global-buffer chunks follow from them); kv: the bank t mod banks and
        where token t's K slot falls within a row, periodic in t // banks."""
        g = self.g
        if kind == "score":
            return ("score", -(-arg // g.banks))
        if kind == "context":
            return ("ctx", -(-arg // g.lanes))
        if kind == "kv":
            period = 1
            for groups in self.groups:
                for grp in groups:
                    step = len(grp) * self.cph
                    period = math.lcm(period, g.cols_per_row // math.gcd(g.cols_per_row, step))
            return ("kv", arg % g.banks, (arg // g.banks) % period)
        raise ValueError(f"timing_class: unknown kind {kind!r}")

    def score_timing(self, L: int) -> Flat:
        """Timing form of `score_program(c, L)` for every channel."""
        if not hasattr(self, "_grp_ch"):
            self._timing_tables()
        g = self.g
        U = math.ceil(L / g.banks)
        P = len(self._grp_G)
        if P == 0:
            return flat_streams([None] * g.channels)
        nseg = U * self._grp_G * self.rep              # segments (token slot, KV head, query head of it)
        seg_prog = np.repeat(np.arange(P), nseg)
        q = np.arange(int(nseg.sum())) - np.repeat(np.cumsum(nseg) - nseg, nseg)
        starts = self._grp_base[seg_prog] + (q // self.rep) * self.cph
        return mac_timing(g, starts, np.full(len(starts), self.cph), seg_prog,
                          self._grp_G * self.rep * self.cph, self._grp_ch)

    def context_timing(self, L: int) -> Flat:
        """Timing form of `context_program(c, L)` for every channel."""
        if not hasattr(self, "_grp_ch"):
            self._timing_tables()
        g = self.g
        H = len(self._head_ch)
        if H == 0:
            return flat_streams([None] * g.channels)
        spp = self.d_head // g.banks
        J = math.ceil(L / g.gb_elems)
        j = np.arange(J)
        cols = -(-np.minimum(g.gb_elems, L - j * g.gb_elems) // g.lanes)
        P = H * J
        j_p = np.tile(j, H)
        i_p = np.repeat(self._head_i, J)
        seg_prog = np.repeat(np.arange(P), spp)
        s = i_p[seg_prog] * spp + np.tile(np.arange(spp), P)
        starts = s * self.v_stride + j_p[seg_prog] * (g.gb_elems // g.lanes)
        prog_wrgb = cols[j_p]
        return mac_timing(g, starts, prog_wrgb[seg_prog], seg_prog, prog_wrgb, np.repeat(self._head_ch, J))

    def kv_timing(self, t: int) -> Flat:
        """Timing form of `kv_program(c, t)` for every channel."""
        if not hasattr(self, "_grp_ch"):
            self._timing_tables()
        g = self.g
        b, u = t % g.banks, t // g.banks
        parts = []
        for c in range(g.channels):
            pieces = [rw_timing(g, b, base + u * len(grp) * self.cph, len(grp) * self.cph, True)
                      for grp, base in zip(self.groups[c], self.k_group_base[c], strict=True)]
            if self.heads[c]:
                pieces.append(self._v_timing[c])
            parts.append(pieces)
        return concat_flat(parts)

    # -- score q . K^T -----------------------------------------------------------------------------------
    def score_program(self, c: int, L: int) -> Stream:
        g = self.g
        parts = []
        U = math.ceil(L / g.banks)
        R = self.rep
        for grp, base in zip(self.groups[c], self.k_group_base[c], strict=True):
            # the global buffer: q of the rep query heads of each KV head of the group
            q_idx = np.concatenate([(j * R + r) * self.d_head + np.arange(self.d_head) for j in grp for r in range(R)])
            parts.append(wrgb_program(g, _gather(q_idx, np.ones(len(q_idx), bool), g.lanes)))
            G = len(grp)
            u = np.repeat(np.arange(U), G * R)
            i = np.tile(np.repeat(np.arange(G), R), U)
            r = np.tile(np.arange(R), U * G)
            starts = base + (u * G + i) * self.cph
            parts.append(mac_program(g, starts, np.full(len(starts), self.cph), (i * R + r) * self.cph, self.k_base))
        return Stream.concat(parts)

    def score_readout(self, c: int, L: int) -> np.ndarray:
        """(bursts, acc_per_burst) indices into the score vector (h * L + t), -1 where t >= L."""
        g = self.g
        out = []
        U = math.ceil(L / g.banks)
        for grp in self.groups[c]:
            for u in range(U):
                for h in (j * self.rep + r for j in grp for r in range(self.rep)):   # query heads
                    for r in range(g.readouts):
                        k = g.acc_per_burst
                        t = u * g.banks + r * k + np.arange(k)
                        out.append(np.where(t < L, h * L + t, -1))
        return np.array(out, dtype=np.int64).reshape(-1, g.acc_per_burst)

    # -- context p . V -------------------------------------------------------------------------------------
    def context_program(self, c: int, L: int) -> Stream:
        g = self.g
        parts = []
        spp = self.d_head // g.banks                     # V^T slots per head
        for k, h in enumerate(self.q_heads[c]):          # query head h reads KV head h // rep (index i here)
            i = k // self.rep
            for j in range(math.ceil(L / g.gb_elems)):
                w = min(g.gb_elems, L - j * g.gb_elems)
                cols = math.ceil(w / g.lanes)
                t = j * g.gb_elems + np.arange(cols * g.lanes)
                parts.append(wrgb_program(g, _gather(h * L + t, t < L, g.lanes)))
                s = i * spp + np.arange(spp)
                starts = s * self.v_stride + j * (g.gb_elems // g.lanes)
                parts.append(mac_program(g, starts, np.full(spp, cols), np.zeros(spp, np.int64), self.v_base))
        return Stream.concat(parts)

    def context_readout(self, c: int, L: int) -> tuple[np.ndarray, np.ndarray]:
        g = self.g
        spp = self.d_head // g.banks
        outs, parts = [], []
        for k, h in enumerate(self.q_heads[c]):
            i = k // self.rep
            for j in range(math.ceil(L / g.gb_elems)):
                for s in range(i * spp, (i + 1) * spp):
                    for r in range(g.readouts):
                        p = s * g.banks + r * g.acc_per_burst + np.arange(g.acc_per_burst)
                        outs.append(h * self.d_head + (p - i * self.d_head))
                        parts.append(j)
        return np.array(outs, dtype=np.int64).reshape(-1, g.acc_per_burst), np.array(parts, dtype=np.int64)

    # -- KV append ------------------------------------------------------------------------------------------
    def kv_program(self, c: int, t: int) -> Stream:
        """Write token t's K (one bank) and the V^T column holding t (all banks). Payload vector layout (h: KV
        head): [k_t (n_kv_heads*d_head) | V block (n_kv_heads*d_head*16): element ((h*d_head+d)*16 + lane) =
        V[16*(t//16) + lane, h, d]]."""
        g = self.g
        parts = []
        b, u = t % g.banks, t // g.banks
        for grp, base in zip(self.groups[c], self.k_group_base[c], strict=True):
            G = len(grp)
            idx = np.concatenate([h * self.d_head + np.arange(self.d_head) for h in grp])
            parts.append(bank_rw_program(g, b, self.k_base, base + u * G * self.cph, G * self.cph, True,
                                         _gather(idx, np.ones(len(idx), bool), g.lanes)))
        nk = self.n_kv_heads * self.d_head
        spp = self.d_head // g.banks
        cpr = g.cols_per_row
        hs = self.heads[c]
        if hs:
            # one V^T column per slot: ACTAB, one WR per bank, PREAB (vectorised over the channel's slots)
            S = len(hs) * spp
            s_idx = np.arange(S)
            r, col = np.divmod(s_idx * self.v_stride + t // g.lanes, cpr)
            i_of = s_idx // spp
            h_of = np.asarray(hs)[i_of]
            p = s_idx[:, None] * g.banks + np.arange(g.banks)[None, :]
            pair = h_of[:, None] * self.d_head + (p - i_of[:, None] * self.d_head)
            gather = nk + pair.reshape(-1, 1) * g.lanes + np.arange(g.lanes)[None, :]
            B2 = g.banks + 2
            cmd = np.tile(np.r_[g.cmd["ACTAB"], np.full(g.banks, g.cmd["WR"]), g.cmd["PREAB"]], S)
            bank = np.tile(np.r_[0, np.arange(g.banks), 0], S)
            rows = np.repeat(self.v_base + r, B2)
            rows[B2 - 1::B2] = -1
            cols = np.repeat(col, B2)
            cols[0::B2] = -1
            cols[B2 - 1::B2] = -1
            src = np.full((S, B2), -1, dtype=np.int64)
            src[:, 1:-1] = s_idx[:, None] * g.banks + np.arange(g.banks)[None, :]
            parts.append(Stream.from_columns(S * B2, gather=gather, cmd=cmd, bank=bank, row=rows, col=cols,
                                             src=src.ravel()))
        return Stream.concat(parts)

    @staticmethod
    def kv_payload(k_t: np.ndarray, V: np.ndarray, t: int, lanes: int = 16) -> np.ndarray:
        """Payload for kv_program: k_t (H, d) of token t, V (tokens >= t+1, H, d) of the sequence so far."""
        H, d = k_t.shape
        blk = np.zeros((lanes, H, d), dtype=np.float32)
        lo = lanes * (t // lanes)
        blk[: t + 1 - lo] = V[lo: t + 1]
        return np.concatenate([k_t.ravel(), blk.transpose(1, 2, 0).ravel()])


# ---- the whole model ---------------------------------------------------------------------------------------
@dataclass
class ModelLayout:
    model: ModelSpec
    g: Geometry
    policy: Policy
    layers: list[dict[str, Any]]
    lm_head: WeightLayout
    wpe: WeightLayout | None
    rows_used: int
    wte: WeightLayout | None = None     # the token-embedding table when untied from the LM head (LLaMA)

    @property
    def embedding_table(self) -> WeightLayout:
        """The matrix the embedding op reads token rows from: the LM head when tied (GPT), else wte."""
        return self.lm_head if self.wte is None else self.wte

    @property
    def bytes_reserved(self) -> int:
        return self.rows_used * self.g.row_bytes * self.g.banks * self.g.channels


def _weight_shapes(model: ModelSpec) -> tuple[tuple[str, int, int], ...]:
    """(role, outputs, inputs) of one block's weight matrices, in row order. A gated FFN keeps its gate and up
    projections as two matrices of the same d_ff x d_model shape (not one fused 2 d_ff x d_model matrix): the
    graph has them as two GEMVs, equal shapes put gate row o and up row o on the same channel and bank (the ASIC
    pairs them as they arrive) and they run the same stream; fusing would only save re-writing the input vector
    into the global buffer once per chunk."""
    d = model.d_model
    ffn = ((("ffn_gate", model.d_ff, d), ("ffn_up", model.d_ff, d)) if model.gated_ffn else
           (("ffn1", model.d_ff, d),))
    return (("qkv", model.q_dim + 2 * model.kv_dim, d), ("attn_out", d, model.q_dim)) + ffn + \
        (("ffn2", d, model.d_ff),)


def _block_shapes(model: ModelSpec, layer: int) -> tuple[tuple[str, int, int], ...]:
    """(key, outputs, inputs) of block `layer`'s weight matrices, in row order. A mixture-of-experts block holds
    its router (n_experts x d_model) and every expert's FFN, keyed `role@e` (any expert may be routed to, so all
    are placed, each like a dense FFN over every channel and bank)."""
    shapes = _weight_shapes(model)
    if not model.is_moe_layer(layer):
        return shapes
    attn, ffn = shapes[:2], shapes[2:]
    experts = tuple((f"{role}@{e}", n, k) for e in range(model.n_experts) for role, n, k in ffn)
    return attn + (("router", model.n_experts, model.d_model),) + experts


def layout_model(model: ModelSpec, spec: DramSpec, policy: Policy) -> ModelLayout:
    """Allocate rows for every weight matrix and the reserved K/V space; error if it does not fit."""
    g = Geometry.from_spec(spec)
    packed = policy.weight_layout == "packed"
    row = 0
    layers = []
    d = model.d_model
    for i in range(model.n_layers):
        ent: dict[str, Any] = {}
        for role, n, k in _block_shapes(model, i):
            w = WeightLayout(f"L{i}.{role}", n, k, row, g, packed)
            row += w.n_rows
            ent[role] = w
        if model.is_moe_layer(i):
            # a routing slot's op names its role only: every expert's matrices have the same shape, so one
            # expert's layout stands for the slot's timing (its stream's rows differ, not its timing)
            for role, _, _ in _weight_shapes(model)[2:]:
                ent[role] = ent[f"{role}@0"]
        att = AttentionLayout(i, model.n_heads, model.d_head, model.max_context, row, g, n_kv_heads=model.n_kv_heads)
        row += att.n_rows
        ent["attn"] = att
        layers.append(ent)
    lm = WeightLayout("lm_head", model.vocab, d, row, g, packed)
    row += lm.n_rows
    wpe = None
    if model.position == "learned":
        wpe = WeightLayout("wpe", model.max_context, d, row, g, packed)
        row += wpe.n_rows
    wte = None
    if not model.tied_embeddings:                  # its own table, read a row per token like the tied one
        wte = WeightLayout("wte", model.vocab, d, row, g, packed)
        row += wte.n_rows
    lay = ModelLayout(model, g, policy, layers, lm, wpe, row, wte)
    if row > g.rows:
        have = g.rows * g.row_bytes * g.banks * g.channels
        weights = model.weight_bytes
        kv = 2 * model.n_layers * model.max_context * model.kv_dim * model.dtype_bytes
        need_ch = math.ceil(row / g.rows * g.channels)
        raise UserError(
            f"{model.name} does not fit in {spec.name} with {g.channels} channel(s): the mapping needs "
            f"{lay.bytes_reserved / 2**30:.2f} GiB ({row} rows per bank; weights {weights / 2**30:.2f} GiB + K/V "
            f"reserved to max context {kv / 2**30:.2f} GiB, plus layout padding), the memory holds "
            f"{have / 2**30:.2f} GiB ({g.rows} rows per bank); use at least {1 << (need_ch - 1).bit_length()} channels")
    return lay
