"""Per-channel PIM command streams: column arrays (one entry per command) + ISA text form (isa/pim.yaml).

Commands are numbered as in the DRAM spec (archsim.dram.spec, standard gddr6_aim), so the engine can use
them as indices into the constraint tables directly. Fields a command does not have hold -1 (row/col of
PREAB, ...). `src` points into `gather` (n, 16): the element indices of the op's input vector a WR/WRGB burst
carries (-1 = zero padding); the functional model uses it, timing does not.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from archsim.dram.spec import DramSpec

_FIELDS = ("cmd", "bank", "row", "col", "gb", "clr", "src")


@dataclass
class Stream:
    cmd: np.ndarray
    bank: np.ndarray
    row: np.ndarray
    col: np.ndarray
    gb: np.ndarray
    clr: np.ndarray
    src: np.ndarray
    gather: np.ndarray = field(default_factory=lambda: np.zeros((0, 16), dtype=np.int64))

    def __len__(self) -> int:
        return int(self.cmd.shape[0])

    @classmethod
    def empty(cls) -> Stream:
        z = np.zeros(0, dtype=np.int64)
        return cls(*(z.copy() for _ in _FIELDS))

    @classmethod
    def from_columns(cls, n: int, gather: np.ndarray | None = None, **cols: np.ndarray | int) -> Stream:
        arrays = {}
        for name in _FIELDS:
            v = cols.get(name, -1)
            arrays[name] = np.broadcast_to(np.asarray(v, dtype=np.int64), (n,)).copy()
        g = np.zeros((0, 16), dtype=np.int64) if gather is None else np.asarray(gather, dtype=np.int64)
        return cls(**arrays, gather=g)

    @staticmethod
    def concat(parts: list[Stream]) -> Stream:
        parts = [p for p in parts if len(p)]
        if not parts:
            return Stream.empty()
        out = {name: np.concatenate([getattr(p, name) for p in parts]) for name in _FIELDS}
        # re-base src into the concatenated gather table
        offset = 0
        srcs = []
        for p in parts:
            s = p.src.copy()
            s[s >= 0] += offset
            srcs.append(s)
            offset += p.gather.shape[0]
        out["src"] = np.concatenate(srcs)
        # only parts with gather rows: an empty part's table has a nominal width (Stream.empty: 16), not this
        # PIM's lane count, and would make the concatenation fail
        gather = np.concatenate([p.gather for p in parts if p.gather.shape[0]]) if offset \
            else np.zeros((0, 16), dtype=np.int64)
        return Stream(**out, gather=gather)

    def counts(self, n_cmds: int) -> np.ndarray:
        return np.bincount(self.cmd, minlength=n_cmds).astype(np.int64)


# ISA text ----------------------------------------------------------------------------------------------
# Which stream columns fill which ISA fields (isa/pim.yaml).
_ISA_FIELDS = {"ACT": ("bank", "row"), "PRE": ("bank",), "PREA": (), "RD": ("bank", "row", "col"),
               "WR": ("bank", "row", "col"), "RDA": ("bank", "row", "col"), "WRA": ("bank", "row", "col"),
               "REFab": (), "REFpb": ("bank",), "ACTAB": ("row",), "PREAB": (), "MACAB": ("row", "col", "gb", "clr"),
               "RDMAC": ("bank",), "EWMUL": ("row", "col", "gb"), "EWADD": ("row", "col", "gb"), "AF": ("gb",),
               "WRGB": ("gb",)}
_ISA_NAME = {"bank": "bank", "row": "row", "col": "col", "gb": "gb_offset", "clr": "clr"}


def to_text(stream: Stream, spec: DramSpec, sync_at: list[int] | None = None) -> str:
    """ISA assembly text (one instruction per line, `archsim.isa` syntax). SYNC lines after the given
    command positions mark op boundaries (the host waits for the channel there)."""
    from archsim import isa as isa_mod

    pim = isa_mod.load("pim")
    names = spec.command_names
    sync = set(sync_at or [])
    lines = []
    cols = {k: getattr(stream, k) for k in ("bank", "row", "col", "gb", "clr")}
    for i, c in enumerate(stream.cmd.tolist()):
        name = names[c]
        fields = _ISA_FIELDS[name]
        if name == "AF":   # AF carries a function code in gb (see compile notes); isa field `func`
            lines.append(f"AF func={int(cols['gb'][i])}")
        else:
            lines.append(" ".join([name] + [f"{_ISA_NAME[f]}={int(cols[f][i])}" for f in fields]))
        if i in sync:
            lines.append("SYNC")
    text = "\n".join(lines) + ("\n" if lines else "")
    # Validate a sample through the real assembler (the full stream can be millions of lines).
    isa_mod.assemble(pim, "\n".join(lines[:2000]), source="<generated>")
    return text


def from_text(text: str, spec: DramSpec, source: str = "<asm>") -> Stream:
    """Parse ISA text back into a stream (SYNC/NOP/TMOD are dropped: they carry no DRAM timing)."""
    from archsim import isa as isa_mod

    pim = isa_mod.load("pim")
    instrs = isa_mod.parse(pim, text, source=source)
    rows = []
    for ins in instrs:
        if ins.mnemonic in ("SYNC", "NOP", "TMOD"):
            continue
        f = ins.fields
        rows.append((spec.cmd(ins.mnemonic), f.get("bank", 0 if ins.mnemonic != "AF" else 0),
                     f.get("row", -1), f.get("col", -1), f.get("gb_offset", f.get("func", -1)), f.get("clr", -1)))
    if not rows:
        return Stream.empty()
    a = np.array(rows, dtype=np.int64)
    return Stream.from_columns(len(a), cmd=a[:, 0], bank=a[:, 1], row=a[:, 2], col=a[:, 3], gb=a[:, 4],
                               clr=a[:, 5])
