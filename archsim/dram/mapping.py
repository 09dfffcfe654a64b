"""Address mapping: byte address -> (channel, pseudo-channel, rank, bank group, bank, row, column).

Mapping strings list fields from the most significant bits to the least, Ramulator style (`RoBaRaCoCh`) or
DRAMsim3 style (`rorabgbachco`). Tokens: Ro row, Co column, Ch channel, Pc pseudo-channel, Ra rank,
Bg bank group, Ba bank. When Bg is not named it shares Ba's place (bank-group bits lowest, so neighbouring
banks sit in different groups); when Pc is not named it shares Ch's place (pseudo-channel bits lowest).
The low log2(access_bytes) bits are the offset inside one access. A field may be split around others by
naming it more than once with the bit count of every part but one (its lowest part first gets its lowest bits):
`RoBaPcCoChCo1` puts column bit 0 right above the offset, the channel above it and the other column bits above
the channel (Ramulator 2.1's CacheLineInterleave(interleave_bits=1) on HBM2).

Address hashing (as GPU and HBM memory controllers do) is part of the mapping string: after the field order,
comma-separated clauses `TARGET^SOURCE[^SOURCE...]` XOR address bits into the bits of a target field:

    RoRaBgBaChCo,Ch^Ro            channel bit i ^= row bit i (for every channel bit)
    RoRaBgBaChCo,Ch^Ro3,Bg^Ro     channel bit i ^= row bit 3+i; bank-group bit i ^= row bit i
    RoRaBgBaChCo,Ch0^Ad16^Ad21    channel bit 0 ^= byte-address bits 16 and 21

A target is a field (Ch, Pc, Ra, Bg, Ba) or one bit of it (`Ch2`). A source is a field (Ro, Co, or any of the
above; from its bit 0), a field from one of its bits on (`Ro3`), or a bit of the byte address (`Ad16`);
for a whole-field target, target bit i takes source bit start + i. Sources may not be bits that some clause
hashes, so the mapping stays a bijection (decode XORs each hashed bit with the parity of its unhashed
sources; encode applies the same XOR). Without clauses a mapping decodes exactly as before hashing existed.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from archsim.errors import UserError

if TYPE_CHECKING:   # annotations only: dram/spec imports this module (parse_mapping, DEFAULT_MAPPING)
    import numpy as np

    from archsim.dram.spec import DramSpec
# numpy is imported by the functions that use it: parsing a mapping (a config check) does not load it

TOKENS = {"ro": "row", "co": "column", "ch": "channel", "pc": "pseudochannel", "ra": "rank",
          "bg": "bankgroup", "ba": "bank"}
DEFAULT_MAPPING = "RoBaRaCoCh"

# Order of the per-level columns of an address-vector array (see encode_many).
VECTOR_LEVELS = ("channel", "pseudochannel", "rank", "bankgroup", "bank", "row", "column")


def _sizes(spec: DramSpec) -> dict[str, int]:
    return {"channel": spec.counts[0], "pseudochannel": spec.counts[1], "rank": spec.counts[2],
            "bankgroup": spec.counts[3], "bank": spec.counts[4], "row": spec.rows, "column": spec.columns}


HASH_TARGETS = ("ch", "pc", "ra", "bg", "ba")
_CLAUSE_TERM = re.compile(r"([A-Za-z]{2})(\d*)$")


def split_mapping(text: str) -> tuple[str, list[str]]:
    """(field order, hash clauses) of a mapping string (module doc)."""
    parts = [p.strip() for p in str(text).strip().split(",")]
    return parts[0], parts[1:]


def _parse_clauses(text: str, clauses: list[str]) -> list[tuple[tuple[str, int | None], list[tuple[str, int | None]]]]:
    """Hash clauses -> [((target field, bit or None), [(source field or 'address', bit or None), ...])];
    checks the syntax only (bit ranges need the device: hash_masks)."""
    out = []
    for clause in clauses:
        terms = [t.strip() for t in clause.split("^")]
        if len(terms) < 2 or not all(terms):
            raise UserError(f"mapping {text!r}: hash clause {clause!r} must be TARGET^SOURCE[^SOURCE...], "
                            "e.g. Ch^Ro, Ch^Ro3 or Ch0^Ad16^Ad21")
        parsed = []
        for i, term in enumerate(terms):
            m = _CLAUSE_TERM.match(term)
            key = m and m.group(1).lower()
            allowed = HASH_TARGETS if i == 0 else tuple(TOKENS) + ("ad",)
            if not m or key not in allowed:
                what = "target" if i == 0 else "source"
                names = ", ".join(t.capitalize() for t in allowed)
                raise UserError(f"mapping {text!r}: hash clause {clause!r}: {what} {term!r} must be one of "
                                f"{names}, optionally followed by a bit number")
            if key == "ad" and not m.group(2):
                raise UserError(f"mapping {text!r}: hash clause {clause!r}: {term!r} needs a bit number (Ad16)")
            parsed.append(("address" if key == "ad" else TOKENS[key], int(m.group(2)) if m.group(2) else None))
        out.append((parsed[0], parsed[1:]))
    return out


_ORDER_TOKEN = re.compile(r"([A-Za-z]{2})(\d*)")


def _order_tokens(text: str, order: str) -> list[tuple[str, int | None]]:
    """The field order as (field, bit count or None), most significant first. A field named more than once is
    split: every part but one gives its bit count, the part without one takes the field's remaining bits, and
    the parts take the field's bits from the least significant part up (RoBaPcCoChCo1: column bit 0 below the
    channel, the other column bits above it)."""
    parts = _ORDER_TOKEN.findall(order)
    if "".join(k + n for k, n in parts) != order or not parts:
        raise UserError(f"mapping {text!r}: expected two-letter fields like RoBaRaCoCh or rorabgbachco, a split "
                        f"field's parts with bit counts (RoBaPcCoChCo1) "
                        f"(fields: {', '.join(t.capitalize() for t in TOKENS)})")
    tokens: list[tuple[str, int | None]] = []
    for key, n in parts:
        if key.lower() not in TOKENS:
            raise UserError(f"mapping {text!r}: unknown field {key!r}; allowed: {', '.join(t.capitalize() for t in TOKENS)}")
        tokens.append((TOKENS[key.lower()], int(n) if n else None))
    for (key, n), (f, bits) in zip(parts, tokens, strict=True):
        counts = [b for g, b in tokens if g == f]
        if len(counts) > 1 and all(b is None for b in counts):
            raise UserError(f"mapping {text!r}: field {key!r} appears twice (to split a field, give the bit count "
                            "of every part but one, e.g. RoBaPcCoChCo1)")
        if bits is not None and (len(counts) == 1 or bits == 0 or sum(b is None for b in counts) != 1):
            raise UserError(f"mapping {text!r}: {key}{n}: a bit count splits a field named more than once, on every "
                            "part but one, and is at least 1 (e.g. RoBaPcCoChCo1)")
    return tokens


def _expanded(text: str) -> list[tuple[str, int | None]]:
    """The mapping's field parts, most significant first, with the fields it does not name placed (module doc):
    the bank group below the bank, the pseudo-channel below the channel, the rank above the bank."""
    order, clauses = split_mapping(text)
    _parse_clauses(str(text), clauses)
    tokens = _order_tokens(str(text), order)
    names = {f for f, _ in tokens}
    for need in ("row", "column", "channel", "bank"):
        if need not in names:
            raise UserError(f"mapping {text!r}: must contain Ro, Co, Ch and Ba (missing {need})")
    out: list[tuple[str, int | None]] = []
    for f, bits in tokens:
        if bits is None and f == "bank" and "bankgroup" not in names:
            out += [("bank", None), ("bankgroup", None)]  # MSB..LSB order: bank above bank group
        elif bits is None and f == "channel" and "pseudochannel" not in names:
            out += [("channel", None), ("pseudochannel", None)]
        else:
            out.append((f, bits))
    if "rank" not in names:
        out.insert(out.index(("bank", None)), ("rank", None))
    return out


def parse_mapping(text: str) -> list[str]:
    """Field names from the least significant to the most significant, a split field at the place of its part
    without a bit count (hash clauses are checked for syntax and otherwise ignored here: hash_masks resolves
    them). This order is the mapping's *canonical* address, where every field is contiguous (field_layout)."""
    return [f for f, bits in _expanded(text) if bits is None][::-1]


def is_split(mapping: str) -> bool:
    """Whether the mapping splits a field (RoBaPcCoChCo1)."""
    return any(bits is not None for _, bits in _expanded(mapping))


def _segments(spec: DramSpec, mapping: str) -> list[tuple[str, int, int]]:
    """The address's field parts from the least significant up: (field, bits, the field's bit it starts at)."""
    sizes = _sizes(spec)
    parts = _expanded(mapping)[::-1]
    total = {f: int(sizes[f]).bit_length() - 1 for f in sizes}
    counted = {f: sum(b for g, b in parts if g == f and b is not None) for f in total}
    for f, n in counted.items():
        if n > total[f]:
            raise UserError(f"mapping {mapping!r}: the parts of {f} give {n} bits; {spec.name} has {total[f]} "
                            f"{f} bits")
    out, start = [], dict.fromkeys(total, 0)
    for f, bits in parts:
        n = bits if bits is not None else total[f] - counted[f]
        out.append((f, n, start[f]))
        start[f] += n
    return out


def address_moves(spec: DramSpec, mapping: str) -> list[tuple[int, int]]:
    """A split mapping's address -> its canonical address (every field contiguous, field_layout) as bit moves:
    [(mask of address bits, shift)], bits outside every mask staying put; empty for a mapping without splits."""
    if not is_split(mapping):
        return []
    canon = field_layout(spec, mapping)
    delta: dict[int, int] = {}
    at = int(spec.access_bytes).bit_length() - 1
    for f, n, first in _segments(spec, mapping):
        for k in range(n):
            delta[at + k] = canon[f][0] + first + k - (at + k)
        at += n
    moves: dict[int, int] = {}
    for bit, d in delta.items():
        if d:
            moves[d] = moves.get(d, 0) | 1 << bit
    return [(mask, d) for d, mask in sorted(moves.items())]


def _move_bits(addr: np.ndarray, moves: list[tuple[int, int]], inverse: bool = False) -> np.ndarray:
    """Apply address_moves (inverse=True: canonical -> the mapping's address)."""
    import numpy as np

    if inverse:
        moves = [(mask << d if d > 0 else mask >> -d, -d) for mask, d in moves]
    moved = 0
    for mask, _ in moves:
        moved |= mask
    out = addr & np.uint64(~moved & (2**64 - 1))
    for mask, d in moves:
        part = addr & np.uint64(mask)
        out |= part << np.uint64(d) if d > 0 else part >> np.uint64(-d)
    return out


def field_layout(spec: DramSpec, mapping: str = DEFAULT_MAPPING) -> dict[str, tuple[int, int]]:
    """Where each level sits in a byte address under `mapping`: {level: (lowest bit, number of bits)} for
    every level in VECTOR_LEVELS (a level the device has one of takes 0 bits). The low log2(access_bytes)
    bits are the offset inside one access; bits above the last field are ignored. For a mapping that splits a
    field, the layout of its canonical address (address_moves)."""
    sizes = _sizes(spec)
    shift = int(spec.access_bytes).bit_length() - 1
    out: dict[str, tuple[int, int]] = {}
    for f in parse_mapping(mapping):
        bits = int(sizes[f]).bit_length() - 1
        out[f] = (shift, bits)
        shift += bits
    return out


def hash_masks(spec: DramSpec, mapping: str = DEFAULT_MAPPING) -> dict[int, int]:
    """The mapping's hashing as {hashed byte-address bit: mask of the address bits XORed into it} (empty for
    a mapping without hash clauses). Raises UserError for a bit outside its field or the address, or a source
    that is itself hashed (the mapping would not be a bijection)."""
    _, clauses = split_mapping(mapping)
    if not clauses:
        return {}
    if is_split(mapping):
        raise UserError(f"mapping {mapping!r}: hash clauses on a mapping that splits a field are not supported "
                        "(give one or the other)")
    layout = field_layout(spec, mapping)
    top = max(s + b for s, b in layout.values())
    low = int(spec.access_bytes).bit_length() - 1
    out: dict[int, int] = {}
    for clause, ((tf, tbit), sources) in zip(clauses, _parse_clauses(mapping, clauses), strict=True):
        t0, tn = layout[tf]
        if tn == 0:
            raise UserError(f"mapping {mapping!r}: hash clause {clause!r}: {spec.name} has one {tf}, nothing to hash")
        if tbit is not None and tbit >= tn:
            raise UserError(f"mapping {mapping!r}: hash clause {clause!r}: {tf} has {tn} bits (0..{tn - 1}), "
                            f"got bit {tbit}")
        bits = [tbit] if tbit is not None else list(range(tn))
        for i, b in enumerate(bits):
            mask = 0
            for sf, sbit in sources:
                start = sbit or 0
                if sf == "address":
                    a = start + i
                    if not low <= a < top:
                        raise UserError(f"mapping {mapping!r}: hash clause {clause!r}: address bit {a} is outside "
                                        f"the mapped bits {low}..{top - 1} of {spec.name}")
                else:
                    s0, sn = layout[sf]
                    if start + i >= sn:
                        raise UserError(f"mapping {mapping!r}: hash clause {clause!r}: {sf} has {sn} bits, "
                                        f"needs bit {start + i}")
                    a = s0 + start + i
                mask ^= 1 << a
            out[t0 + b] = out.get(t0 + b, 0) ^ mask
    for t, mask in out.items():
        clash = [b for b in out if mask >> b & 1]
        if clash:
            raise UserError(f"mapping {mapping!r}: address bit {clash[0]} is hashed and also a source of bit {t}'s "
                            "hash; sources must be unhashed bits (else the mapping is not a bijection)")
    return {t: m for t, m in out.items() if m}


def _parity(x: np.ndarray) -> np.ndarray:
    """Parity (0/1) of each uint64."""
    import numpy as np

    x = x.copy()
    for s in (32, 16, 8, 4, 2, 1):
        x ^= x >> np.uint64(s)
    return x & np.uint64(1)


def _apply_hash(addr: np.ndarray, masks: dict[int, int]) -> np.ndarray:
    """XOR every hashed bit with the parity of its sources (its own inverse: sources are never hashed)."""
    import numpy as np

    out = addr.copy()
    for bit, mask in masks.items():
        out ^= _parity(addr & np.uint64(mask)) << np.uint64(bit)
    return out


def decode(spec: DramSpec, addr: np.ndarray, mapping: str = DEFAULT_MAPPING) -> dict[str, np.ndarray]:
    """Vectorised decode of byte addresses. Returns int64 arrays channel, bank (global bank id: channel,
    pseudochannel, rank, bank group, bank as mixed-radix digits), row, column."""
    return Decoder(spec, mapping)(addr)


class Decoder:
    """`decode` for one device and mapping, its tables built once (for drivers that decode many small
    batches of addresses, e.g. an NPU's DMA tile by tile)."""

    def __init__(self, spec: DramSpec, mapping: str = DEFAULT_MAPPING):
        import numpy as np

        layout = field_layout(spec, mapping)
        if any(s + b > 64 for s, b in layout.values()):
            raise UserError(f"mapping {mapping!r}: {spec.name}'s address fields need more than 64 address bits")
        sizes = _sizes(spec)
        # a level without bits reads as 0 (mask 0; its shift is then irrelevant, so keep it in range)
        self.shift = np.array([layout[f][0] if layout[f][1] else 0 for f in VECTOR_LEVELS], dtype=np.uint64)
        self.mask = np.array([(1 << layout[f][1]) - 1 for f in VECTOR_LEVELS], dtype=np.uint64)
        self.mult = np.array([sizes[f] for f in VECTOR_LEVELS], dtype=np.int64)
        self.moves = address_moves(spec, mapping)       # a split field: to the canonical address first
        masks = hash_masks(spec, mapping)
        self.xor = None
        if masks:
            # xor[j, k]: the sources of bit k of level j (VECTOR_LEVELS order; only channel..bank are hashed)
            self.xor = np.zeros((5, 64), dtype=np.uint64)
            for bit, m in masks.items():
                f = next(f for f in VECTOR_LEVELS[:5] if layout[f][0] <= bit < layout[f][0] + layout[f][1])
                self.xor[VECTOR_LEVELS.index(f), bit - layout[f][0]] = m

    def __call__(self, addr: np.ndarray) -> dict[str, np.ndarray]:
        # numba: imported when first used
        import numpy as np

        from archsim.dram.fast_mapping import decode_hashed_into, decode_into

        a = np.asarray(addr, dtype=np.uint64)
        shape = a.shape
        a = np.ascontiguousarray(a).reshape(-1)
        if self.moves:
            a = _move_bits(a, self.moves)
        n = len(a)
        out = {k: np.empty(n, dtype=np.int64) for k in ("channel", "bank", "row", "column")}
        if self.xor is not None:
            decode_hashed_into(a, self.shift, self.mask, self.mult, self.xor, out["channel"], out["bank"],
                               out["row"], out["column"])
        else:
            decode_into(a, self.shift, self.mask, self.mult, out["channel"], out["bank"], out["row"], out["column"])
        return {k: v.reshape(shape) for k, v in out.items()}   # the input's shape (a scalar gives 0-d arrays)


def encode(spec: DramSpec, channel: int, pseudochannel: int, rank: int, bankgroup: int, bank: int, row: int,
           column: int, mapping: str = DEFAULT_MAPPING) -> int:
    """Inverse of decode for one address (used by tests and compilers to place data)."""
    import numpy as np

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
    moves = address_moves(spec, mapping)
    if moves:
        return int(_move_bits(np.array([addr], dtype=np.uint64), moves, inverse=True)[0])
    masks = hash_masks(spec, mapping)
    return int(_apply_hash(np.array([addr], dtype=np.uint64), masks)[0]) if masks else addr


def encode_many(spec: DramSpec, vec: np.ndarray, mapping: str = DEFAULT_MAPPING) -> np.ndarray:
    """Vectorised encode: an (n x 7) integer array of (channel, pseudochannel, rank, bankgroup, bank, row,
    column) per request -> n byte addresses (uint64). Raises ValueError for a value out of its range
    (callers with user input check first and name the file)."""
    import numpy as np

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
    moves = address_moves(spec, mapping)
    if moves:
        return _move_bits(addr, moves, inverse=True)
    masks = hash_masks(spec, mapping)
    return _apply_hash(addr, masks) if masks else addr


def decode_fields(spec: DramSpec, addr: np.ndarray, mapping: str = DEFAULT_MAPPING) -> dict[str, np.ndarray]:
    """Vectorised decode into every level: channel, pseudochannel, rank, bankgroup, bank (within its
    group), row and column, each an int64 array (the inverse of encode_many)."""
    import numpy as np

    sizes = _sizes(spec)
    a = np.asarray(addr, dtype=np.uint64)
    masks = hash_masks(spec, mapping)
    if masks:
        a = _apply_hash(a, masks)
    moves = address_moves(spec, mapping)
    if moves:
        a = _move_bits(a, moves)
    a = a >> np.uint64(int(spec.access_bytes).bit_length() - 1)
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
    import numpy as np

    addr = np.asarray(addr, dtype=np.uint64)
    if len(addr) == 0:
        return []
    sizes = _sizes(spec)
    if hash_masks(spec, mapping):
        # a hashed field depends on other bits' parity: decode (in slices) and compare
        first = {f: int(v[0]) for f, v in decode_fields(spec, addr[:1], mapping).items()}
        varies: set[str] = set()
        for i in range(0, len(addr), 1 << 16):
            parts = decode_fields(spec, addr[i:i + (1 << 16)], mapping)
            varies |= {f for f in VECTOR_LEVELS[:5] if bool(np.any(parts[f] != first[f]))}
        return [f for f in VECTOR_LEVELS[:5] if sizes[f] > 1 and f not in varies]
    # A field is constant iff none of its bits differ from the first address's: one pass, no decode (in
    # slices, so the temporary stays small: fresh memory is what costs most in a long trace's run)
    differ = 0
    for i in range(0, len(addr), 1 << 16):
        differ |= int(np.bitwise_or.reduce(addr[i:i + (1 << 16)] ^ addr[0]))
    moves = address_moves(spec, mapping)
    if moves:       # the bits that differ, where the canonical address has them (a bit permutation)
        differ = int(_move_bits(np.array([differ], dtype=np.uint64), moves)[0])
    layout = field_layout(spec, mapping)
    return [f for f in VECTOR_LEVELS[:5] if sizes[f] > 1 and not (differ >> layout[f][0]) & ((1 << layout[f][1]) - 1)]
