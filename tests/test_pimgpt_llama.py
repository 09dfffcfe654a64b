"""PIM-GPT on LLaMA-style models (issue 37): grouped-query attention, the gated (SwiGLU) FFN, RMSNorm and RoPE.

The golden check runs a tiny llama-like model (2 query heads per KV head) token by token through the functional
PIM channels (archsim.pim.functional: every GEMV, q.K^T, p.V and K/V append is the compiler's command stream)
and the ASIC's algorithms (archsim.host.asic), and compares with a float64 numpy forward pass of the same
(BF16-stored) weights."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from archsim.dram.spec import load_spec
from archsim.host import asic
from archsim.pim.functional import FunctionalChannel, to_bf16
from archsim.systems.pimgpt.compiler import AttentionLayout, Geometry, layout_model, load_policy
from archsim.workload.spec import ModelSpec

TINY = ModelSpec(name="tiny-llama", d_model=128, n_layers=2, n_heads=4, n_kv_heads=2, d_head=32, d_ff=1100,
                 vocab=96, max_context=64, dtype="bf16", norm="rmsnorm", activation="silu", gated_ffn=True,
                 position="rope", bias=False, tied_embeddings=False)
ROPE_BASE = 10000.0
EPS = 1e-5


@pytest.fixture(scope="module")
def spec2():
    return load_spec("GDDR6_AiM_16Gbps", overrides={"org.channels": 2})


def _weights(m: ModelSpec, rng: np.random.Generator) -> dict:
    """BF16-representable weights (what the banks hold), scaled so activations stay O(1)."""
    def mat(n, k):
        return to_bf16(rng.standard_normal((n, k)).astype(np.float32) / np.float32(math.sqrt(k)))

    def gain(n):
        return (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    d = m.d_model
    layers = [{"qkv": mat(m.q_dim + 2 * m.kv_dim, d), "attn_out": mat(d, m.q_dim), "ffn_gate": mat(m.d_ff, d),
               "ffn_up": mat(m.d_ff, d), "ffn2": mat(d, m.d_ff), "g1": gain(d), "g2": gain(d)}
              for _ in range(m.n_layers)]
    return {"layers": layers, "wte": mat(m.vocab, d), "lm_head": mat(m.vocab, d), "gf": gain(d)}


class FunctionalPimGpt:
    """The tiny model on functional PIM channels: the compiler's layout and streams, the ASIC's algorithms."""

    def __init__(self, m: ModelSpec, spec, W: dict):
        self.m, self.W = m, W
        self.lay = layout_model(m, spec, load_policy())
        self.g = self.lay.g
        self.mems = [FunctionalChannel(spec) for _ in range(self.g.channels)]
        for i, ent in enumerate(self.lay.layers):
            for role in ("qkv", "attn_out", "ffn_gate", "ffn_up", "ffn2"):
                ent[role].place(self.mems, W["layers"][i][role])
        self.lay.lm_head.place(self.mems, W["lm_head"])
        self.lay.wte.place(self.mems, W["wte"])
        self.V = [np.zeros((m.max_context, m.n_kv_heads, m.d_head), np.float32) for _ in range(m.n_layers)]
        self.K = [np.zeros_like(v) for v in self.V]
        half = m.d_head // 2
        theta = ROPE_BASE ** (-np.arange(half) / half)
        self.step_cos, self.step_sin = np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)
        self.cos, self.sin = np.ones(half, np.float32), np.zeros(half, np.float32)     # angles of position 0
        self.scores: list[np.ndarray] = []

    def gemv(self, w, x: np.ndarray) -> np.ndarray:
        y = np.zeros(w.n, dtype=np.float32)
        for c in range(self.g.channels):
            outs = self.mems[c].execute(w.program(c), x)
            idx, _ = w.readout_map(c)
            vals = np.array(outs, dtype=np.float32).reshape(-1, self.g.acc_per_burst)
            np.add.at(y, idx[idx >= 0], vals[idx >= 0])        # the ASIC adds the chunks' partial sums
        return y

    def embed(self, tok: int) -> np.ndarray:
        w = self.lay.wte
        c, prog = w.element_reads(tok)
        vals = np.concatenate(self.mems[c].execute(prog))
        pieces, at = [], 0
        for cols, width in zip(w.chunk_cols, w.widths, strict=True):
            pieces.append(vals[at:at + width])
            at += cols * self.g.lanes
        return np.concatenate(pieces)

    def attention(self, i: int, q: np.ndarray, k: np.ndarray, v: np.ndarray, t: int) -> np.ndarray:
        m, att, L = self.m, self.lay.layers[i]["attn"], t + 1
        self.K[i][t], self.V[i][t] = to_bf16(k), to_bf16(v)
        payload = AttentionLayout.kv_payload(self.K[i][t], self.V[i], t, self.g.lanes)
        for c in range(self.g.channels):
            self.mems[c].execute(att.kv_program(c, t), payload)
        s = np.full(m.n_heads * L, np.nan, dtype=np.float32)
        for c in range(self.g.channels):
            idx = att.score_readout(c, L)
            vals = np.array(self.mems[c].execute(att.score_program(c, L), q.ravel()), np.float32).reshape(idx.shape)
            s[idx[idx >= 0]] = vals[idx >= 0]
        s = s.reshape(m.n_heads, L)
        self.scores.append(s)
        p = asic.softmax(s, scale=1 / math.sqrt(m.d_head))
        ctx = np.zeros(m.q_dim, dtype=np.float32)
        for c in range(self.g.channels):
            idx, _ = att.context_readout(c, L)
            outs = self.mems[c].execute(att.context_program(c, L), p.ravel())
            np.add.at(ctx, idx.ravel(), np.array(outs, dtype=np.float32).ravel())
        return ctx

    def step(self, tok: int, t: int) -> np.ndarray:
        m, W = self.m, self.W
        if t > 0:
            self.cos, self.sin = asic.rope_angles_step(self.cos, self.sin, self.step_cos, self.step_sin)
        x = self.embed(tok)
        for i in range(m.n_layers):
            Wl, lay = W["layers"][i], self.lay.layers[i]
            qkv = self.gemv(lay["qkv"], asic.rmsnorm(x, Wl["g1"], EPS))
            q = self.q = asic.rope(qkv[:m.q_dim].reshape(m.n_heads, m.d_head), self.cos, self.sin)
            k = asic.rope(qkv[m.q_dim:m.q_dim + m.kv_dim].reshape(m.n_kv_heads, m.d_head), self.cos, self.sin)
            v = qkv[m.q_dim + m.kv_dim:].reshape(m.n_kv_heads, m.d_head)
            x = x + self.gemv(lay["attn_out"], self.attention(i, q, k, v, t))
            x = x + self.ffn(i, asic.rmsnorm(x, Wl["g2"], EPS))
        return self.gemv(self.lay.lm_head, asic.rmsnorm(x, W["gf"], EPS))

    def ffn(self, i: int, h: np.ndarray) -> np.ndarray:
        """Block i's SwiGLU FFN (tests/test_pimgpt_moe.py overrides it with the routed experts)."""
        lay = self.lay.layers[i]
        return self.gemv(lay["ffn2"], asic.silu(self.gemv(lay["ffn_gate"], h)) * self.gemv(lay["ffn_up"], h))


def _reference(m: ModelSpec, W: dict, toks: list[int], ffns: list | None = None) -> list[np.ndarray]:
    """float64 numpy: RMSNorm, RoPE (exact angles), GQA attention (query head h reads KV head h // rep), SwiGLU
    (or ffns[i](h), block i's own FFN: tests/test_pimgpt_moe.py's experts)."""
    f = np.float64
    rep, half, d = m.n_heads // m.n_kv_heads, m.d_head // 2, m.d_head
    theta = ROPE_BASE ** (-np.arange(half) / half)

    def rms(x, g):
        return x / np.sqrt(np.mean(x * x) + EPS) * g

    def rot(x, t):
        c, s = np.cos(t * theta), np.sin(t * theta)
        return np.concatenate([x[..., :half] * c - x[..., half:] * s, x[..., half:] * c + x[..., :half] * s], -1)

    K = [np.zeros((0, m.n_kv_heads, d)) for _ in range(m.n_layers)]
    V = [np.zeros((0, m.n_kv_heads, d)) for _ in range(m.n_layers)]
    logits = []
    for t, tok in enumerate(toks):
        x = W["wte"][tok].astype(f)
        for i in range(m.n_layers):
            Wl = {k: v.astype(f) for k, v in W["layers"][i].items() if isinstance(v, np.ndarray)}
            qkv = Wl["qkv"] @ rms(x, Wl["g1"])
            q = rot(qkv[:m.q_dim].reshape(m.n_heads, d), t)
            K[i] = np.concatenate([K[i], rot(qkv[m.q_dim:m.q_dim + m.kv_dim].reshape(1, m.n_kv_heads, d), t)])
            V[i] = np.concatenate([V[i], qkv[m.q_dim + m.kv_dim:].reshape(1, m.n_kv_heads, d)])
            kh = np.repeat(K[i], rep, axis=1)                 # query head h -> KV head h // rep
            vh = np.repeat(V[i], rep, axis=1)
            s = np.einsum("hd,thd->ht", q, kh) / math.sqrt(d)
            p = np.exp(s - s.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            x = x + Wl["attn_out"] @ np.einsum("ht,thd->hd", p, vh).ravel()
            h = rms(x, Wl["g2"])
            if ffns is not None:
                x = x + ffns[i](h)
                continue
            gate = Wl["ffn_gate"] @ h
            x = x + Wl["ffn2"] @ (gate / (1 + np.exp(-gate)) * (Wl["ffn_up"] @ h))
        logits.append(W["lm_head"].astype(f) @ rms(x, W["gf"].astype(f)))
    return logits


def test_tiny_llama_decode_matches_numpy(spec2):
    """Logits of 20 decode steps (contexts 1..20: K/V spill past the 16 banks) within BF16 activation rounding of
    the float64 forward pass; the GQA scores equal q . K of the query head's KV head to fp32 accuracy."""
    m = TINY
    rng = np.random.default_rng(7)
    W = _weights(m, rng)
    toks = [int(x) for x in rng.integers(0, m.vocab, 20)]
    sim = FunctionalPimGpt(m, spec2, W)
    got = [sim.step(tok, t) for t, tok in enumerate(toks)]
    ref = _reference(m, W, toks)
    for t, (y, r) in enumerate(zip(got, ref, strict=True)):
        # every GEMV input is rounded to BF16 (2^-9 relative) and the layers compound it: a few 1e-3
        err = np.linalg.norm(y - r) / np.linalg.norm(r)
        assert err < 2e-2, (t, err)
        assert np.argmax(y) == np.argmax(r) or np.sort(r)[-1] - np.sort(r)[-2] < 0.05, t
    # scores of the last step of layer 1 (rep = 2: heads 0,1 read KV head 0, heads 2,3 read KV head 1)
    s, L = sim.scores[-1], len(toks)
    rep = m.n_heads // m.n_kv_heads
    q = to_bf16(sim.q).astype(np.float64)                     # the global buffer holds q in BF16
    want = np.einsum("hd,thd->ht", q, np.repeat(sim.K[1][:L].astype(np.float64), rep, axis=1))
    assert s.shape == (m.n_heads, L) and np.allclose(s, want, rtol=1e-5, atol=1e-4)
    assert not np.allclose(s[0], s[2])                        # different KV heads give different scores


@pytest.mark.parametrize("n_heads,n_kv_heads,d_head,lmax", [(4, 2, 32, 40), (8, 2, 64, 70), (12, 4, 32, 33),
                                                           (16, 1, 64, 20)])
def test_gqa_attention_matches_numpy(spec2, n_heads, n_kv_heads, d_head, lmax):
    """q . K^T and p . V through the streams: query head h uses KV head h // rep; K/V stored once per KV head."""
    g = Geometry.from_spec(spec2)
    att = AttentionLayout(0, n_heads, d_head, lmax, 0, g, n_kv_heads=n_kv_heads)
    rep = n_heads // n_kv_heads
    rng = np.random.default_rng(n_heads * 100 + n_kv_heads)
    L = lmax
    K = to_bf16(rng.standard_normal((L, n_kv_heads, d_head)).astype(np.float32))
    V = to_bf16(rng.standard_normal((L, n_kv_heads, d_head)).astype(np.float32))
    q = to_bf16(rng.standard_normal((n_heads, d_head)).astype(np.float32))
    mems = [FunctionalChannel(spec2) for _ in range(g.channels)]
    for t in range(L):
        payload = AttentionLayout.kv_payload(K[t], V, t)
        for c in range(g.channels):
            mems[c].execute(att.kv_program(c, t), payload)
    scores = np.full(n_heads * L, np.nan, dtype=np.float32)
    for c in range(g.channels):
        idx = att.score_readout(c, L)
        vals = np.array(mems[c].execute(att.score_program(c, L), q.ravel()), dtype=np.float32).reshape(idx.shape)
        scores[idx[idx >= 0]] = vals[idx >= 0]
    s = scores.reshape(n_heads, L)
    Kh = np.repeat(K.astype(np.float64), rep, axis=1)
    assert np.allclose(s, np.einsum("hd,thd->ht", q.astype(np.float64), Kh), rtol=1e-5, atol=1e-4)
    p = to_bf16(rng.random((n_heads, L)).astype(np.float32))
    ctx = np.zeros(n_heads * d_head, dtype=np.float32)
    for c in range(g.channels):
        idx, _ = att.context_readout(c, L)
        np.add.at(ctx, idx.ravel(), np.array(mems[c].execute(att.context_program(c, L), p.ravel()),
                                             dtype=np.float32).ravel())
    want = np.einsum("ht,thd->hd", p.astype(np.float64), np.repeat(V.astype(np.float64), rep, axis=1)).ravel()
    assert np.allclose(ctx, want, rtol=1e-5, atol=1e-4)
    # K/V reserved once per KV head: the layout's rows equal a multi-head layout of n_kv_heads heads
    mha = AttentionLayout(0, n_kv_heads, d_head, lmax, 0, g)
    assert att.n_rows == mha.n_rows
    # the K/V append writes exactly what a multi-head layout of the KV heads writes
    for c in range(g.channels):
        assert np.array_equal(att.kv_program(c, 5).cmd, mha.kv_program(c, 5).cmd)


def test_rope_and_angle_recurrence_match_numpy():
    half = 64
    theta = 500000.0 ** (-np.arange(half) / half)
    c, s = np.ones(half, np.float32), np.zeros(half, np.float32)
    dp = asic.OpCounter()
    for _ in range(1000):
        c, s = asic.rope_angles_step(c, s, np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32), dp)
    assert np.allclose(c, np.cos(1000 * theta), atol=2e-4) and np.allclose(s, np.sin(1000 * theta), atol=2e-4)
    assert (dp.fmul, dp.fadd) == (1000 * 4 * half, 1000 * 2 * half)
    x = np.random.default_rng(0).standard_normal((5, 2 * half)).astype(np.float32)
    dp = asic.OpCounter()
    y = asic.rope(x, c, s, dp)
    ang = 1000 * theta
    ref = np.concatenate([x[:, :half] * np.cos(ang) - x[:, half:] * np.sin(ang),
                          x[:, half:] * np.cos(ang) + x[:, :half] * np.sin(ang)], axis=1)
    assert np.allclose(y, ref, atol=1e-3)
    assert (dp.fmul, dp.fadd) == (2 * x.size, x.size)
    # the closed form the timing and energy use = one angle step + the rotation, as the algorithms count them
    dp = asic.OpCounter()
    c, s = asic.rope_angles_step(c, s, np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32), dp)
    asic.rope(x, c, s, dp)
    want = asic.op_counts("rope", x.size, freqs=half)
    assert (want.fadd, want.fmul, want.cmp, want.iadd) == (dp.fadd, dp.fmul, dp.cmp, dp.iadd)


def test_rope_op_costs_its_angles_and_rotation():
    """The graph's rope op carries d_head (k), so the ASIC charges the angle step of d_head / 2 frequencies."""
    from archsim.workload import build_graph, load_model

    m = load_model("llama3-8b")
    op = next(o for o in build_graph(m, "decode", context_len=100) if o.kind == "rope")
    assert op.k == m.d_head and op.elements == m.q_dim + m.kv_dim
    model = asic.AsicModel()
    c = model.op_counts(op)
    assert (c.fadd, c.fmul) == (op.elements + m.d_head, 2 * op.elements + 2 * m.d_head)
    assert model.latency_cycles(op) > model.latency_cycles(dataclasses.replace(op, k=1))   # k=1: rotation only


def test_gated_ffn_layout_and_mha_rows_unchanged(spec2):
    """Gate and up are two d_ff x d_model matrices with equal placement (gate row o and up row o in the same
    bank); a GPT model's layout is the paper's (no gate/up roles, KV heads = heads)."""
    lay = layout_model(TINY, spec2, load_policy())
    ent = lay.layers[0]
    assert {"ffn_gate", "ffn_up", "ffn2"} <= set(ent) and "ffn1" not in ent
    assert ent["ffn_gate"].segs[0][1].tolist() == ent["ffn_up"].segs[0][1].tolist()
    assert lay.wte is not None and lay.embedding_table is lay.wte
    gpt = dataclasses.replace(TINY, name="tiny-gpt", n_kv_heads=4, gated_ffn=False, norm="layernorm",
                              activation="gelu", position="learned", bias=True, tied_embeddings=True)
    lay2 = layout_model(gpt, spec2, load_policy())
    assert set(lay2.layers[0]) == {"qkv", "attn_out", "ffn1", "ffn2", "attn"} and lay2.wte is None
    assert lay2.layers[0]["attn"].rep == 1


def test_llama_overlap_schedule_respects_gqa_and_rope_dependencies(tmp_path):
    """schedule: overlap on a LLaMA-style model: each piece reads its query heads' q / p and its KV head's K/V
    (the rotated k from the rope op, v from the QKV output); same commands and ASIC work as serial, never slower."""
    import json

    from test_pimgpt_overlap import _check_schedule

    from archsim.systems.pimgpt.system import PimGptSimulator

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
                                "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 688,
                                "max_position_embeddings": 512, "vocab_size": 1000, "hidden_act": "silu"}))
    ser = PimGptSimulator({"model": str(path), "tokens": 3, "baselines": [], "memo": False})
    ov = PimGptSimulator({"model": str(path), "tokens": 3, "baselines": [], "schedule": "overlap"})
    for t in (0, 1, 40):
        a, b = ser.run_token(t), ov.run_token(t)
        _check_schedule(ov._overlap)
        assert b <= a, t
    kv = [p for p in ov._overlap.tasks if p.op.kind == "kv_append" and p.unit == "PIM"]
    assert kv and all({name.split(".")[-1] for name, _ in p.reads} == {"rope", "qkv"} for p in kv)
    for role, x in ser.acc.items():
        y = ov.acc[role]
        assert np.array_equal(x["counts"], y["counts"]) and x["asic_cycles"] == y["asic_cycles"], role
