"""Address hashing in the mapping string (issue 22): XOR of higher address bits into the channel, bank-group
and bank fields stays a bijection (property test over random addresses and hash clauses, exhaustive small
device), the numba decode agrees with the field-by-field decode, unhashed mappings decode as before, bad
clauses give one-line errors, and `archsim trace --address-mapping` takes a hashed mapping."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.dram import mapping as M
from archsim.dram.spec import load_spec
from archsim.errors import UserError

ROOT = Path(__file__).resolve().parent.parent
HBM = load_spec("HBM2_2Gbps_NMC", overrides={"org.channels": 32})
SMALL = load_spec("HBM2_2Gbps_PC", overrides={"org.channels": 4, "org.rows": 8})
ORDERS = ["RoRaBgBaChCo", "RoBaRaCoCh", "ChRaBaRoCo", "RoCoBaBgRaPcCh"]


def _global_bank(spec, f):
    b = f["channel"]
    for lvl, n in zip(("pseudochannel", "rank", "bankgroup", "bank"), spec.counts[1:], strict=True):
        b = b * n + f[lvl]
    return b


@st.composite
def hashed_mapping(draw, spec):
    """A field order and 1-4 random hash clauses whose sources are unhashed bits."""
    order = draw(st.sampled_from(ORDERS))
    layout = M.field_layout(spec, order)
    targets = [t for t, name in (("Ch", "channel"), ("Pc", "pseudochannel"), ("Bg", "bankgroup"), ("Ba", "bank"))
               if layout[name][1]]
    chosen = draw(st.lists(st.sampled_from(targets), min_size=1, max_size=3, unique=True))
    names = {"Ch": "channel", "Pc": "pseudochannel", "Bg": "bankgroup", "Ba": "bank"}
    hashed = {b for t in chosen for b in range(layout[names[t]][0], sum(layout[names[t]]))}
    top = max(s + n for s, n in layout.values())
    free = [b for b in range(layout["column"][0], top) if b not in hashed]
    clauses = []
    for t in chosen:
        s0, n = layout[names[t]]
        for k in range(n):
            srcs = draw(st.lists(st.sampled_from(free), min_size=1, max_size=4, unique=True))
            clauses.append(f"{t}{k}^" + "^".join(f"Ad{b}" for b in srcs))
    return ",".join([order] + clauses)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_hashed_mapping_is_a_bijection_on_random_addresses(data, seed):
    mapping = data.draw(hashed_mapping(HBM))
    rng = np.random.default_rng(seed)
    addr = rng.integers(0, HBM.capacity_bytes, 2000, dtype=np.uint64) & ~np.uint64(HBM.access_bytes - 1)
    f = M.decode_fields(HBM, addr, mapping)
    vec = np.stack([f[k] for k in M.VECTOR_LEVELS], axis=1)
    back = M.encode_many(HBM, vec, mapping)
    assert np.array_equal(back, addr), f"{mapping}: encode(decode(a)) != a for {int((back != addr).sum())} addresses"
    dec = M.decode(HBM, addr, mapping)        # the numba kernel
    assert np.array_equal(dec["channel"], f["channel"]) and np.array_equal(dec["bank"], _global_bank(HBM, f)), mapping
    assert np.array_equal(dec["row"], f["row"]) and np.array_equal(dec["column"], f["column"]), mapping
    one = M.encode(HBM, *(int(vec[0, j]) for j in range(7)), mapping=mapping)
    assert one == int(addr[0])


@pytest.mark.parametrize("mapping", ["RoRaBgBaChCo,Ch^Ro", "RoRaBgBaChCo,Ch^Ro1,Bg^Ro,Ba^Co2,Pc^Co",
                                     "RoBaRaCoCh,Ch0^Ad12^Ad17,Ch1^Co^Ro,Bg1^Ad19"])
def test_hashed_mapping_is_a_bijection_exhaustively(mapping):
    """Every access of a small device (4 channels x 2 pseudo-channels x 16 banks x 8 rows x 32 columns) decodes
    to a different (channel, bank, row, column), and back."""
    n = SMALL.capacity_bytes // SMALL.access_bytes
    addr = np.arange(n, dtype=np.uint64) * np.uint64(SMALL.access_bytes)
    dec = M.decode(SMALL, addr, mapping)
    key = ((dec["bank"] * SMALL.rows + dec["row"]) * SMALL.columns + dec["column"])
    assert len(np.unique(key)) == n == SMALL.total_banks * SMALL.rows * SMALL.columns
    f = M.decode_fields(SMALL, addr, mapping)
    assert np.array_equal(M.encode_many(SMALL, np.stack([f[k] for k in M.VECTOR_LEVELS], axis=1), mapping), addr)
    plain = M.decode(SMALL, addr, mapping.split(",")[0])
    assert not np.array_equal(plain["bank"], dec["bank"]), "the hash changed nothing"


@pytest.mark.parametrize("order", ORDERS)
def test_unhashed_mapping_decodes_as_before(order):
    """No clauses: the plain kernel, the plain bit slicing (and clauses that cancel out are no hashing)."""
    rng = np.random.default_rng(3)
    addr = rng.integers(0, 1 << 40, 5000, dtype=np.uint64)
    layout = M.field_layout(HBM, order)
    dec = M.decode(HBM, addr, order)
    f = {k: ((addr >> np.uint64(s)) & np.uint64((1 << n) - 1)).astype(np.int64) for k, (s, n) in layout.items()}
    assert np.array_equal(dec["channel"], f["channel"]) and np.array_equal(dec["bank"], _global_bank(HBM, f))
    assert np.array_equal(dec["row"], f["row"]) and np.array_equal(dec["column"], f["column"])
    assert M.hash_masks(HBM, order) == {} and M.hash_masks(HBM, order + ",Ch^Ro,Ch^Ro") == {}
    cancelled = M.decode(HBM, addr, order + ",Ch^Ro,Ch^Ro")
    assert all(np.array_equal(cancelled[k], dec[k]) for k in dec)


def test_hashing_spreads_a_column_slab_over_every_channel():
    """The issue's case: a GPT-3 TP-32 chunk (384 FP16 columns of a 1024 x 12288 output) camps on 8 of 32
    channels without hashing; XOR of row bits into the channel spreads it over all 32."""
    rows = np.arange(1024, dtype=np.uint64)[:, None] * np.uint64(12288 * 2)
    addr = (rows + np.arange(0, 384 * 2, 32, dtype=np.uint64)[None, :]).ravel()
    plain = len(np.unique(M.decode(HBM, addr, "RoRaBgBaChCo")["channel"]))
    hashed = len(np.unique(M.decode(HBM, addr, "RoRaBgBaChCo,Ch^Ro")["channel"]))
    assert (plain, hashed) == (8, 32), f"channels touched: unhashed {plain}, hashed {hashed}"


@pytest.mark.parametrize("mapping,words", [
    ("RoRaBgBaChCo,Ch^Ch", "sources must be unhashed"),
    ("RoRaBgBaChCo,Ch^Ro,Bg^Ch3", "sources must be unhashed"),
    ("RoRaBgBaChCo,Ro^Ch", "target 'Ro' must be one of Ch, Pc, Ra, Bg, Ba"),
    ("RoRaBgBaChCo,Ch^Xy", "source 'Xy'"),
    ("RoRaBgBaChCo,Ch", "must be TARGET^SOURCE"),
    ("RoRaBgBaChCo,Ch^Ad", "needs a bit number"),
    ("RoRaBgBaChCo,Ch^Ad90", "outside the mapped bits"),
    ("RoRaBgBaChCo,Ch^Ro14", "row has 15 bits"),
    ("RoRaBgBaChCo,Ch7^Ro", "channel has 5 bits"),
    ("RoRaBgBaChCo,Ra^Ro", "one rank"),
])
def test_bad_hash_clauses(mapping, words):
    with pytest.raises(UserError, match=words.replace("(", r"\(").replace("^", r"\^")):
        M.hash_masks(HBM, mapping)


def test_trace_cli_takes_a_hashed_mapping(tmp_path):
    """`archsim trace --address-mapping` with a hash clause: the stride that camps on one channel unhashed
    spreads over all of them."""
    trace = tmp_path / "t.trace"
    # a one-row stride (256 KB): the channel bits (11..13 of an 8-channel HBM2) never change without hashing
    trace.write_text("".join(f"LD {hex(i << 18)}\n" for i in range(64)))
    exe = [str(Path(sys.executable).parent / "archsim"), "trace", str(trace), "--preset", "HBM2_2Gbps_PC"]
    out = {}
    for mp in ("RoRaBgBaChCo", "RoRaBgBaChCo,Ch^Ro"):
        r = subprocess.run(exe + ["--address-mapping", mp, "--json", "-", "--quiet"], capture_output=True,
                           text=True, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        out[mp] = (json.loads(r.stdout), r.stderr)
    assert "same channel (1 of 8)" in out["RoRaBgBaChCo"][1] and "channel (1 of 8)" not in out["RoRaBgBaChCo,Ch^Ro"][1]
    assert out["RoRaBgBaChCo,Ch^Ro"][0]["stats"]["cycles"] < out["RoRaBgBaChCo"][0]["stats"]["cycles"]
    bad = subprocess.run(exe + ["--address-mapping", "RoRaBgBaChCo,Ch^Ch"], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "sources must be unhashed" in bad.stderr, bad.stderr
