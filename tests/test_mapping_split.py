"""A field split around others in the mapping string (issue 39: Ramulator 2.1's HBM2 layout with
CacheLineInterleave(interleave_bits=1), without changing the access size): where each bit lands, a bijection
(exhaustively on a small device), the numba decode agrees with the field-by-field one, mappings without a split
decode as before, and bad splits give one-line errors."""
from __future__ import annotations

import numpy as np
import pytest

from archsim.dram import mapping as M
from archsim.dram.spec import load_spec
from archsim.errors import UserError

HBM2 = load_spec("HBM2_2Gbps_PC")          # 8 channels, 32 B accesses, 32 columns per row
SMALL = load_spec("HBM2_2Gbps_PC", overrides={"org.channels": 4, "org.rows": 8})


def _global_bank(spec, f):
    b = f["channel"]
    for lvl, n in zip(("pseudochannel", "rank", "bankgroup", "bank"), spec.counts[1:], strict=True):
        b = b * n + f[lvl]
    return b


def test_ramulators_interleave_bits_layout():
    """RoBaPcCoChCo1 on HBM2: 5 offset bits, column bit 0 at address bit 5, the 3 channel bits at 6..8 (one
    column bit above the offset: Ramulator's CacheLineInterleave(interleave_bits=1)), column bits 1..4 at 9..12,
    then the pseudo-channel, bank group, bank and row as in RoBaPcCoCh."""
    rng = np.random.default_rng(0)
    addr = rng.integers(0, HBM2.capacity_bytes, 20000, dtype=np.uint64) & ~np.uint64(31)
    f = M.decode_fields(HBM2, addr, "RoBaPcCoChCo1")
    bits = lambda lo, n: ((addr >> np.uint64(lo)) & np.uint64((1 << n) - 1)).astype(np.int64)  # noqa: E731
    assert np.array_equal(f["column"] & 1, bits(5, 1)) and np.array_equal(f["channel"], bits(6, 3))
    assert np.array_equal(f["column"] >> 1, bits(9, 4))
    plain = M.decode_fields(HBM2, addr, "RoBaPcCoCh")    # above bit 13 the same fields in the same places
    for level in ("pseudochannel", "bankgroup", "bank", "row"):
        assert np.array_equal(f[level], plain[level]), level


@pytest.mark.parametrize("mapping", ["RoBaPcCoChCo1", "RoCo2BaPcCoChCo1", "RoBaCoChCo2", "RoBaRaCoChBa1",
                                     "Co3RoBaPcChCo"])
def test_split_mapping_is_a_bijection_exhaustively(mapping):
    n = SMALL.capacity_bytes // SMALL.access_bytes
    addr = np.arange(n, dtype=np.uint64) * np.uint64(SMALL.access_bytes)
    dec = M.decode(SMALL, addr, mapping)                       # the numba kernel after the bit moves
    key = (dec["bank"] * SMALL.rows + dec["row"]) * SMALL.columns + dec["column"]
    assert len(np.unique(key)) == n
    f = M.decode_fields(SMALL, addr, mapping)
    assert np.array_equal(dec["bank"], _global_bank(SMALL, f)) and np.array_equal(dec["column"], f["column"])
    vec = np.stack([f[k] for k in M.VECTOR_LEVELS], axis=1)
    assert np.array_equal(M.encode_many(SMALL, vec, mapping), addr)
    assert M.encode(SMALL, *(int(v) for v in vec[7]), mapping=mapping) == int(addr[7])


def test_a_split_moves_bits_and_an_unsplit_mapping_moves_none():
    assert M.address_moves(HBM2, "RoBaPcCoCh") == [] and not M.is_split("RoBaPcCoCh")
    assert M.parse_mapping("RoBaPcCoChCo1") == M.parse_mapping("RoBaPcCoCh")
    assert M.address_moves(HBM2, "RoBaPcCoChCo1") != []


def test_constant_fields_sees_through_the_split():
    # addresses that differ only in bit 5: under the split that is column bit 0, the channel stays put
    addr = np.array([0, 32], dtype=np.uint64)
    assert "channel" in M.constant_fields(HBM2, addr, "RoBaPcCoChCo1")
    assert "channel" not in M.constant_fields(HBM2, addr, "RoBaPcCoCh")


@pytest.mark.parametrize("mapping,words", [
    ("RoBaPcCoChCo", "appears twice"),
    ("RoBaPcCo1Ch", "splits a field named more than once"),
    ("RoBaPcCo1ChCo1", "on every part but one"),
    ("RoBaPcCoChCo0", "at least 1"),
    ("RoBaPcCoChCo9", "has 5 column bits"),
    ("RoBaPcCoChCo1,Ch^Ro", "not supported"),
])
def test_bad_splits(mapping, words):
    with pytest.raises(UserError, match=words):
        M.Decoder(HBM2, mapping)
