"""Address mapping: byte address -> (channel, pseudo-channel, rank, bank group, bank, row, column).

Mapping strings list fields from the most significant bits to the least, Ramulator style (`RoBaRaCoCh`) or
DRAMsim3 style (`rorabgbachco`). Tokens: Ro row, Co column, Ch channel, Pc pseudo-channel, Ra rank,
Bg bank group, Ba bank. When Bg is not named it shares Ba's place (bank-group bits lowest, so neighbouring
banks sit in different groups); when Pc is not named it shares Ch's place (pseudo-channel bits lowest).
The low log2(access_bytes) bits are the offset inside one access.
"""
from __future__ import annotations

import re

import numpy as np

from archsim.dram.spec import DramSpec
from archsim.errors import UserError

TOKENS = {"ro": "row", "co": "column", "ch": "channel", "pc": "pseudochannel", "ra": "rank",
          "bg": "bankgroup", "ba": "bank"}
DEFAULT_MAPPING = "RoBaRaCoCh"

# Order of the per-level columns of an address-vector array (see encode_many).
VECTOR_LEVELS = ("channel", "pseudochannel", "rank", "bankgroup", "bank", "row", "column")


def _sizes(spec: DramSpec) -> dict[str, int]:
    return {"channel": spec.counts[0], "pseudochannel": spec.counts[1], "rank": spec.counts[2],
            "bankgroup": spec.counts[3], "bank": spec.counts[4], "row": spec.rows, "column": spec.columns}


def parse_mapping(text: str) -> list[str]:
    """Field names from the least significant to the most significant."""
    raw = str(text).strip()
    parts = re.findall(r"[A-Za-z]{2}", raw)
    if "".join(parts) != raw or not parts:
        raise UserError(f"mapping {text!r}: expected two-letter fields like RoBaRaCoCh or rorabgbachco "
                        f"(fields: {', '.join(t.capitalize() for t in TOKENS)})")
    fields = []
    for p in parts:
        key = p.lower()
        if key not in TOKENS:
            raise UserError(f"mapping {text!r}: unknown field {p!r}; allowed: {', '.join(t.capitalize() for t in TOKENS)}")
        if TOKENS[key] in fields:
            raise UserError(f"mapping {text!r}: field {p!r} appears twice")
        fields.append(TOKENS[key])
    for need in ("row", "column", "channel", "bank"):
        if need not in fields:
            raise UserError(f"mapping {text!r}: must contain Ro, Co, Ch and Ba (missing {need})")
    # implicit placements
    out: list[str] = []
    for f in fields:
        if f == "bank" and "bankgroup" not in fields:
            out += ["bank", "bankgroup"]  # MSB..LSB order: bank above bank group
        elif f == "channel" and "pseudochannel" not in fields:
            out += ["channel", "pseudochannel"]
        else:
            out.append(f)
    if "rank" not in out:
        out.insert(out.index("bank"), "rank")
    return out[::-1]


def field_layout(spec: DramSpec, mapping: str = DEFAULT_MAPPING) -> dict[str, tuple[int, int]]:
    """Where each level sits in a byte address under `mapping`: {level: (lowest bit, number of bits)} for
    every level in VECTOR_LEVELS (a level the device has one of takes 0 bits). The low log2(access_bytes)
    bits are the offset inside one access; bits above the last field are ignored."""
    sizes = _sizes(spec)
    shift = int(spec.access_bytes).bit_length() - 1
    out: dict[str, tuple[int, int]] = {}
    for f in parse_mapping(mapping):
        bits = int(sizes[f]).bit_length() - 1
        out[f] = (shift, bits)
        shift += bits
    return out


def decode(spec: DramSpec, addr: np.ndarray, mapping: str = DEFAULT_MAPPING) -> dict[str, np.ndarray]:
    """Vectorised decode of byte addresses. Returns int64 arrays channel, bank (global bank id: channel,
    pseudochannel, rank, bank group, bank as mixed-radix digits), row, column."""
    from archsim.dram.fast_mapping import decode_into  # numba: imported when first used

    layout = field_layout(spec, mapping)
    if any(s + b > 64 for s, b in layout.values()):
        raise UserError(f"mapping {mapping!r}: {spec.name}'s address fields need more than 64 address bits")
    sizes = _sizes(spec)
    # a level without bits reads as 0 (mask 0; its shift is then irrelevant, so keep it in range)
    shift = np.array([layout[f][0] if layout[f][1] else 0 for f in VECTOR_LEVELS], dtype=np.uint64)
    mask = np.array([(1 << layout[f][1]) - 1 for f in VECTOR_LEVELS], dtype=np.uint64)
    mult = np.array([sizes[f] for f in VECTOR_LEVELS], dtype=np.int64)
    a = np.asarray(addr, dtype=np.uint64)
    shape = a.shape
    a = np.ascontiguousarray(a).reshape(-1)
    n = len(a)
    out = {k: np.empty(n, dtype=np.int64) for k in ("channel", "bank", "row", "column")}
    decode_into(a, shift, mask, mult, out["channel"], out["bank"], out["row"], out["column"])
    return {k: v.reshape(shape) for k, v in out.items()}   # the input's shape (a scalar gives 0-d arrays)


def encode(spec: DramSpec, channel: int, pseudochannel: int, rank: int, bankgroup: int, bank: int, row: int,
           column: int, mapping: str = DEFAULT_MAPPING) -> int:
    """Inverse of decode for one address (used by tests and compilers to place data)."""
    sizes = {"channel": spec.counts[0], "pseudochannel": spec.counts[1], "rank": spec.counts[2],
             "bankgroup": spec.counts[3], "bank": spec.counts[4], "row": spec.rows, "column": spec.columns}
    values = {"channel": channel, "pseudochannel": pseudochannel, "rank": rank, "bankgroup": bankgroup,
              "bank": bank, "row": row, "column": column}
    addr = 0
    shift = int(spec.access_bytes).bit_length() - 1
    for f in parse_mapping(mapping):
        bits = int(sizes[f]).bit_length() - 1
        if not 0 <= values[f] < sizes[f]:
            raise ValueError(f"{f}={values[f]} out of range 0..{sizes[f] - 1}")
        addr |= values[f] << shift
        shift += bits
    return addr


def encode_many(spec: DramSpec, vec: np.ndarray, mapping: str = DEFAULT_MAPPING) -> np.ndarray:
    """Vectorised encode: an (n x 7) integer array of (channel, pseudochannel, rank, bankgroup, bank, row,
    column) per request -> n byte addresses (uint64). Raises ValueError for a value out of its range
    (callers with user input check first and name the file)."""
    vec = np.asarray(vec)
    if vec.ndim != 2 or vec.shape[1] != len(VECTOR_LEVELS):
        raise ValueError(f"encode_many: expected an (n x {len(VECTOR_LEVELS)}) array, got shape {vec.shape}")
    sizes = _sizes(spec)
    addr = np.zeros(len(vec), dtype=np.uint64)
    shift = int(spec.access_bytes).bit_length() - 1
    for f in parse_mapping(mapping):
        col = vec[:, VECTOR_LEVELS.index(f)]
        bad = np.flatnonzero((col < 0) | (col >= sizes[f]))
        if len(bad):
            raise ValueError(f"{f}={int(col[bad[0]])} out of range 0..{sizes[f] - 1} (row {int(bad[0])})")
        addr |= col.astype(np.uint64) << np.uint64(shift)
        shift += int(sizes[f]).bit_length() - 1
    return addr


def decode_fields(spec: DramSpec, addr: np.ndarray, mapping: str = DEFAULT_MAPPING) -> dict[str, np.ndarray]:
    """Vectorised decode into every level: channel, pseudochannel, rank, bankgroup, bank (within its
    group), row and column, each an int64 array (the inverse of encode_many)."""
    sizes = _sizes(spec)
    a = np.asarray(addr, dtype=np.uint64) >> np.uint64(int(spec.access_bytes).bit_length() - 1)
    parts: dict[str, np.ndarray] = {}
    for f in parse_mapping(mapping):
        bits = int(sizes[f]).bit_length() - 1
        parts[f] = (a & np.uint64((1 << bits) - 1)).astype(np.int64)
        a = a >> np.uint64(bits)
    return {f: parts[f] for f in VECTOR_LEVELS}


def constant_fields(spec: DramSpec, addr: np.ndarray, mapping: str = DEFAULT_MAPPING) -> list[str]:
    """Address fields (channel, pseudochannel, rank, bankgroup, bank) that have more than one value in the
    device but the same value in every address of `addr`: the trace never spreads over them under this
    mapping (e.g. a trace that uses one channel of two). Empty for an empty `addr`."""
    addr = np.asarray(addr, dtype=np.uint64)
    if len(addr) == 0:
        return []
    # A field is constant iff none of its bits differ from the first address's: one pass, no decode (in
    # slices, so the temporary stays small: fresh memory is what costs most in a long trace's run)
    differ = 0
    for i in range(0, len(addr), 1 << 16):
        differ |= int(np.bitwise_or.reduce(addr[i:i + (1 << 16)] ^ addr[0]))
    sizes = _sizes(spec)
    layout = field_layout(spec, mapping)
    return [f for f in VECTOR_LEVELS[:5] if sizes[f] > 1 and not (differ >> layout[f][0]) & ((1 << layout[f][1]) - 1)]
