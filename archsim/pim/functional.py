"""Functional model of one GDDR6-AiM channel: bank arrays hold BF16 values, the global buffer holds the BF16
input vector, every bank's MAC multiplies 16 BF16 pairs exactly (a BF16 x BF16 product fits in fp32) and
sums them with a 4-level fp32 adder tree into an fp32 accumulator. Results leave through RDMAC as fp32.

Bank memory is sparse (a row is allocated on first write) so a channel of 16 x 16K x 2 KB costs nothing
until used. Commands are interpreted in stream order; timing is the engine's business, not this one's.
"""
from __future__ import annotations

import numpy as np

from archsim.dram.spec import DramSpec
from archsim.errors import NotModelled
from archsim.pim.stream import Stream


def to_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest BF16 (ties to even); returned as float32 holding BF16 values."""
    a = np.ascontiguousarray(x, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    out = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(a), a, out).astype(np.float32)


def _tree_sum16(p: np.ndarray) -> np.ndarray:
    """Sum the last axis (16) with a balanced fp32 adder tree (the MAC unit's reduction order)."""
    while p.shape[-1] > 1:
        p = (p[..., 0::2] + p[..., 1::2]).astype(np.float32)
    return p[..., 0]


class FunctionalChannel:
    """Data state of one PIM channel: sparse bank rows, global buffer, accumulators, open rows."""

    def __init__(self, spec: DramSpec):
        self.spec = spec
        self.banks = spec.banks_per_channel
        self.lanes = spec.access_bytes // 2
        self.cols = spec.columns
        self.rows: dict[int, np.ndarray] = {}          # row -> (banks, row elements) float32 (BF16 values)
        gb_bytes = int(spec.raw.get("pim", {}).get("global_buffer_bytes", spec.row_bytes))
        self.gb = np.zeros(gb_bytes // 2, dtype=np.float32)
        self.acc = np.zeros(self.banks, dtype=np.float32)
        if int(spec.raw.get("pim", {}).get("accumulator_bytes", 4)) != 4:
            raise NotModelled(f"preset {spec.name}: pim.accumulator_bytes other than 4 (fp32) is modelled in "
                              "timing and energy only; the functional (numerical) PIM model keeps fp32 accumulators")
        self.per_burst = spec.access_bytes // 4         # fp32 accumulators per RDMAC burst
        self.open_row = np.full(self.banks, -1, dtype=np.int64)
        self.names = spec.command_names

    def row(self, r: int) -> np.ndarray:
        a = self.rows.get(r)
        if a is None:
            a = np.zeros((self.banks, self.cols * self.lanes), dtype=np.float32)
            self.rows[r] = a
        return a

    def store(self, bank: int, row: int, elem: int, values: np.ndarray) -> None:
        """Direct placement (the one-time weight load, not part of the timed decode)."""
        v = to_bf16(np.asarray(values, dtype=np.float32))
        self.row(row)[bank, elem:elem + len(v)] = v

    def execute(self, s: Stream, x: np.ndarray | None = None) -> np.ndarray:
        """Run a stream; WR/WRGB payloads are gathered from `x` via s.gather. Returns RDMAC/RD output
        (one row of 8 fp32 accumulators per RDMAC; RD bursts are returned as 16 values each, flattened)."""
        L = self.lanes
        xs = None if x is None else np.concatenate([to_bf16(np.asarray(x, dtype=np.float32).ravel()), [0.0]])
        out: list[np.ndarray] = []
        n = self.names
        for i in range(len(s)):
            name = n[s.cmd[i]]
            b, r, c = int(s.bank[i]), int(s.row[i]), int(s.col[i])
            if name == "ACTAB":
                if (self.open_row >= 0).any():
                    raise RuntimeError(f"command {i}: ACTAB with banks open {self.open_row}")
                self.open_row[:] = r
            elif name == "ACT":
                if self.open_row[b] >= 0:
                    raise RuntimeError(f"command {i}: ACT to open bank {b}")
                self.open_row[b] = r
            elif name in ("PREAB", "PREA"):
                self.open_row[:] = -1
            elif name == "PRE":
                self.open_row[b] = -1
            elif name == "MACAB":
                if (self.open_row != r).any():
                    raise RuntimeError(f"command {i}: MACAB row {r} but open rows are {self.open_row}")
                w = self.row(r)[:, c * L:(c + 1) * L]
                g = self.gb[s.gb[i] * L:(s.gb[i] + 1) * L]
                if s.clr[i] == 1:
                    self.acc[:] = 0.0
                self.acc = (self.acc + _tree_sum16((w * g[None, :]).astype(np.float32))).astype(np.float32)
            elif name == "RDMAC":
                out.append(self.acc[b:b + self.per_burst].copy())
            elif name == "WRGB":
                if xs is None:
                    raise RuntimeError("WRGB needs an input vector")
                self.gb[s.gb[i] * L:(s.gb[i] + 1) * L] = xs[s.gather[s.src[i]]]
            elif name in ("WR", "WRA"):
                if self.open_row[b] != r:
                    raise RuntimeError(f"command {i}: WR to bank {b} row {r}, open {self.open_row[b]}")
                if xs is None:
                    raise RuntimeError("WR needs an input vector")
                self.row(r)[b, c * L:(c + 1) * L] = xs[s.gather[s.src[i]]]
                if name == "WRA":
                    self.open_row[b] = -1
            elif name in ("RD", "RDA"):
                if self.open_row[b] != r:
                    raise RuntimeError(f"command {i}: RD from bank {b} row {r}, open {self.open_row[b]}")
                out.append(self.row(r)[b, c * L:(c + 1) * L].copy())
                if name == "RDA":
                    self.open_row[b] = -1
            elif name in ("EWMUL", "EWADD"):
                rr = self.row(r)
                g = self.gb[s.gb[i] * L:(s.gb[i] + 1) * L]
                blk = rr[:, c * L:(c + 1) * L]
                rr[:, c * L:(c + 1) * L] = to_bf16(blk * g if name == "EWMUL" else blk + g)
            else:
                raise NotImplementedError(f"functional model of {name} (issue #3)")
        if not out:
            return np.zeros((0, self.per_burst), dtype=np.float32)
        return out
