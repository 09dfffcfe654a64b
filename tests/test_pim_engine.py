"""PIM channel engine, functional model and emitted streams (archsim.pim, archsim.systems.pimgpt.compiler)."""
from __future__ import annotations

import numpy as np
import pytest

from archsim.dram.checker import check_log
from archsim.dram.spec import load_spec
from archsim.engine.reuse import StreamChannels
from archsim.host.asic import softmax as asic_softmax
from archsim.pim.functional import FunctionalChannel, to_bf16
from archsim.systems.pimgpt.compiler import AttentionLayout, Geometry, WeightLayout


@pytest.fixture(scope="module")
def spec2():
    return load_spec("GDDR6_AiM_16Gbps", overrides={"org.channels": 2})


def _run_gemv(spec, W, x):
    g = Geometry.from_spec(spec)
    lay = WeightLayout("w", W.shape[0], W.shape[1], 10, g)
    mems = [FunctionalChannel(spec) for _ in range(g.channels)]
    lay.place(mems, W)
    y = np.zeros(W.shape[0], dtype=np.float32)
    for c in range(g.channels):
        outs = mems[c].execute(lay.program(c), x)
        idx, _ = lay.readout_map(c)
        vals = np.array(outs, dtype=np.float32).reshape(-1, 8)
        ok = idx >= 0
        np.add.at(y, idx[ok], vals[ok])      # the ASIC's partial-sum reduction (fp32)
    return y


def test_functional_gemv_matches_numpy(spec2):
    rng = np.random.default_rng(1)
    W = rng.standard_normal((300, 1500)).astype(np.float32)   # 2 GB chunks -> 2 partials per output
    x = rng.standard_normal(1500).astype(np.float32)
    y = _run_gemv(spec2, W, x)
    ref = to_bf16(W).astype(np.float64) @ to_bf16(x).astype(np.float64)
    # BF16 inputs, exact products, fp32 accumulation over <= 1500 terms: |err| <= 1e-5 * sum |w x|
    bound = 1e-5 * (np.abs(to_bf16(W)) @ np.abs(to_bf16(x)))
    assert np.all(np.abs(y - ref) <= bound + 1e-6)


def test_functional_attention_step_matches_numpy(spec2):
    g = Geometry.from_spec(spec2)
    H, d, Lmax, L = 4, 64, 64, 37
    att = AttentionLayout(0, H, d, Lmax, 0, g)
    rng = np.random.default_rng(2)
    K = to_bf16(rng.standard_normal((L, H, d)).astype(np.float32))
    V = to_bf16(rng.standard_normal((L, H, d)).astype(np.float32))
    q = to_bf16(rng.standard_normal((H, d)).astype(np.float32))
    mems = [FunctionalChannel(spec2) for _ in range(g.channels)]
    for t in range(L):                               # K/V appended token by token through WR commands
        payload = AttentionLayout.kv_payload(K[t], V, t)
        for c in range(g.channels):
            mems[c].execute(att.kv_program(c, t), payload)
    scores = np.full(H * L, np.nan, dtype=np.float32)
    for c in range(g.channels):
        outs = mems[c].execute(att.score_program(c, L), q.ravel())
        idx = att.score_readout(c, L)
        vals = np.array(outs, dtype=np.float32).reshape(-1, 8)
        scores[idx[idx >= 0]] = vals[idx >= 0]
    s = scores.reshape(H, L)
    p = to_bf16(asic_softmax(s, scale=1 / np.sqrt(d)))
    ctx = np.zeros(H * d, dtype=np.float32)
    for c in range(g.channels):
        outs = mems[c].execute(att.context_program(c, L), p.ravel())
        idx, _ = att.context_readout(c, L)
        np.add.at(ctx, idx.ravel(), np.array(outs, dtype=np.float32).ravel())
    ref_s = np.einsum("hd,thd->ht", q.astype(np.float64), K.astype(np.float64))
    assert np.allclose(s, ref_s, rtol=1e-5, atol=1e-4)
    ref_p = np.exp(ref_s / np.sqrt(d) - (ref_s / np.sqrt(d)).max(1, keepdims=True))
    ref_p /= ref_p.sum(1, keepdims=True)
    ref_ctx = np.einsum("ht,thd->hd", ref_p, V.astype(np.float64)).ravel()
    # p is rounded to BF16 before p.V (as on the hardware): relative error ~2^-9 per term
    assert np.allclose(ctx, ref_ctx, rtol=1e-2, atol=1e-2)


def _streams(spec):
    g = Geometry.from_spec(spec)
    w = WeightLayout("w", 200, 1100, 0, g)
    att = AttentionLayout(0, 4, 64, 64, w.n_rows, g)
    ops = []
    for c_op in (lambda c: w.program(c), lambda c: att.kv_program(c, 5), lambda c: att.kv_program(c, 6),
                 lambda c: att.score_program(c, 7), lambda c: att.context_program(c, 7)):
        ops.append([c_op(c) for c in range(g.channels)])
    return ops


@pytest.mark.parametrize("gap", [0, 40, 500])
@pytest.mark.parametrize("refresh", [False, True])
def test_checker_accepts_stream_logs(spec2, gap, refresh):
    e = StreamChannels(spec2, log=True, refresh=refresh)
    t = 0
    for op in _streams(spec2):
        ends, _ = e.run(None, [(s.cmd, s.bank, s.row, s.col) for s in op], t)
        t = int(ends.max()) + gap
    log = e.command_log()
    assert check_log(spec2, log) == []
    assert ("REFab" in set(log.command)) == refresh


def test_memo_restores_exact_state(spec2):
    ops = _streams(spec2)
    full = StreamChannels(spec2, memo=False)
    memo = StreamChannels(spec2, memo=True)
    t_f = t_m = 0
    for rep in range(3):
        for k, op in enumerate(ops):
            st = [(s.cmd, s.bank) for s in op]
            ef, cf = full.run(None, st, t_f)
            em, cm = memo.run(("op", k), st, t_m)
            assert (ef - t_f == em - t_m).all() and (cf == cm).all()
            t_f, t_m = int(ef.max()) + 7 * rep, int(em.max()) + 7 * rep
    assert memo.memo_hits > 0


def test_mac_cadence_and_activate_gate(spec2):
    """MACAB every nCCDL after nRCDRDMAC from ACTAB; the next ACTAB waits max(nRC, 4 nFAW) and nRP."""
    g = Geometry.from_spec(spec2)
    w = WeightLayout("w", 32 * g.channels, 1024, 0, g)      # 2 slots per bank, one full row each
    e = StreamChannels(spec2, log=True)
    s = w.program(0)
    e.run(None, [(s.cmd, s.bank, s.row, s.col)] + [None] * (g.channels - 1), 0)
    df = e.command_log()
    tm = spec2.timing
    act = df[df.command == "ACTAB"].cycle.to_numpy()
    mac = df[df.command == "MACAB"].cycle.to_numpy()
    pre = df[df.command == "PREAB"].cycle.to_numpy()
    assert mac[0] - act[0] == tm["nRCDRDMAC"]
    assert (np.diff(mac[:64]) == tm["nCCDL"]).all()
    assert act[1] - pre[0] >= tm["nRP"] and act[1] - act[0] >= max(tm["nRC"], tm["nFAWAB"])
    assert act[1] - pre[0] == tm["nRP"] or act[1] - act[0] == max(tm["nRC"], tm["nFAWAB"])


def test_stream_text_round_trip(spec2):
    from archsim.pim.stream import from_text, to_text

    g = Geometry.from_spec(spec2)
    s = WeightLayout("w", 40, 700, 3, g).program(0)
    back = from_text(to_text(s, spec2), spec2)
    for f in ("cmd", "row", "col"):
        assert (getattr(back, f) == getattr(s, f)).all()


# ---- timing-only streams and the multi-channel kernel (simulation speed, issue #3) ----------------------------
def _flat_equal(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("channels", [1, 2, 8])
def test_timing_streams_equal_programs(channels):
    """The vectorised (cmd, bank) generators equal the full streams command for command."""
    from archsim.systems.pimgpt.compiler import flat_streams

    spec = load_spec("GDDR6_AiM_16Gbps", overrides={"org.channels": channels})
    g = Geometry.from_spec(spec)
    # (heads, d_head, max context, KV heads): one group per channel, several groups (> GB size), fewer heads than
    # channels; GQA with 2, 4 and 8 query heads per KV head (the last: the rep q fill the global buffer)
    for H, d, Lmax, kv in ((4, 64, 64, None), (40, 128, 2048, None), (3, 64, 100, None), (8, 64, 300, 4),
                           (32, 128, 1100, 8), (16, 128, 90, 2)):
        att = AttentionLayout(0, H, d, Lmax, 5, g, n_kv_heads=kv)
        for L in sorted({1, 15, 16, 17, Lmax // 2 + 3, Lmax - 1, Lmax, 1024, 1025} & set(range(1, Lmax + 1))):
            for timing, program, arg in ((att.score_timing, att.score_program, L),
                                         (att.context_timing, att.context_program, L),
                                         (att.kv_timing, att.kv_program, L - 1)):
                want = flat_streams([program(c, arg) for c in range(channels)])
                assert _flat_equal(timing(arg), want), (H, d, L, program.__name__)
    for n, k, packed in ((200, 1100, True), (1000, 700, False), (3, 64, True)):
        w = WeightLayout("w", n, k, 3, g, packed)
        for o in sorted({0, 1, 17, n // 2, n - 1} & set(range(n))):
            c, s = w.element_reads(o)
            c2, cmd, bank = w.element_reads_timing(o)
            assert c == c2 and np.array_equal(s.cmd, cmd) and np.array_equal(np.maximum(s.bank, 0), bank)
        assert _flat_equal(w.timing(), flat_streams([w.program(c) for c in range(channels)]))


@pytest.mark.parametrize("memo", [False, True])
def test_run_flat_equals_per_channel_run(spec2, memo):
    """One kernel call for all channels (run_flat) == run() channel by channel, including the end state."""
    from archsim.systems.pimgpt.compiler import flat_streams

    ops = _streams(spec2)
    ref = StreamChannels(spec2, memo=False)
    fl = StreamChannels(spec2, memo=memo)
    t_r = t_f = 0
    for rep in range(2):
        for k, op in enumerate(ops):
            ends, counts = ref.run(None, [(s.cmd, s.bank) for s in op], t_r)
            end, cnt = fl.run_flat(("op", k), lambda op=op: flat_streams(op), t_f)
            assert end - t_f == int(ends.max()) - t_r and (cnt == counts.sum(axis=0)).all()
            t_r, t_f = int(ends.max()) + 11 * rep, end + 11 * rep
    fl.sync()
    assert (np.maximum(ref.ms.S.ready - t_r, 0) == np.maximum(fl.ms.S.ready - t_f, 0)).all()
    if memo:
        assert fl.memo_hits > 0


def test_state_ids_follow_the_arrays(spec2):
    """A virtual state (id, base) shifted by delta gets the id that the materialised arrays give."""
    ops = _streams(spec2)
    e = StreamChannels(spec2, memo=True)
    t = 0
    for op in ops + ops:
        ends, _ = e.run(("x", len(op[0])), [(s.cmd, s.bank) for s in op], t)
        t = int(ends.max())
        for delta in (0, 1, 5, 37, 10_000):
            sid = e.state_id(t + delta)
            probe = StreamChannels(spec2, memo=True)
            e.sync()
            for name in ("ready", "hist", "hist_pos", "open_row", "last_open_cmd", "last_open_row"):
                getattr(probe.ms.S, name)[:] = getattr(e.ms.S, name)
            assert probe.state_id(t + delta) == 0          # first state interned by the probe
            same = [np.array_equal(x, y) for x, y in zip(probe._states[0][:4], e._states[sid][:4], strict=True)]
            assert all(same), delta
