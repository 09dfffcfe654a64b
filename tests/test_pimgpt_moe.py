"""PIM-GPT with a mixture-of-experts FFN (issue 37): every expert placed like a dense FFN, the router GEMV on PIM,
the gating (softmax over the chosen experts' logits) on the ASIC, the token's experts_per_token experts run.

The golden check runs a tiny Mixtral-like model (4 experts, top-2, GQA, SwiGLU) token by token through the
functional PIM channels with the compiler's layout and streams, and compares with a float64 numpy forward pass;
the timing checks hold a MoE block to its dense counterpart."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_pimgpt_llama import TINY, FunctionalPimGpt, _reference, _weights

from archsim.dram.spec import load_spec
from archsim.host import asic
from archsim.systems.pimgpt.compiler import layout_model, load_policy
from archsim.workload import build_graph

MOE = dataclasses.replace(TINY, name="tiny-moe", n_experts=4, experts_per_token=2)
FFN_ROLES = ("ffn_gate", "ffn_up", "ffn2")


@pytest.fixture(scope="module")
def spec2():
    return load_spec("GDDR6_AiM_16Gbps", overrides={"org.channels": 2})


def _moe_weights(m, rng):
    W = _weights(m, rng)
    dense = _weights(dataclasses.replace(m, n_experts=1), rng)      # (only for its experts' matrices)
    for i, Wl in enumerate(W["layers"]):
        Wl["router"] = (rng.standard_normal((m.n_experts, m.d_model)) / np.sqrt(m.d_model)).astype(np.float32)
        Wl["experts"] = []
        for e in range(m.n_experts):
            src = dense["layers"][(i + e) % m.n_layers] if e else Wl
            Wl["experts"].append({r: (src[r] if e == 0 else np.roll(src[r], e, axis=0)) for r in FFN_ROLES})
    return W


class FunctionalMoe(FunctionalPimGpt):
    """The tiny model's dense parts as FunctionalPimGpt places them (each MoE block's `ffn_*` roles are expert 0's
    layout, and expert 0's matrices are the block's own), plus the router and the other experts."""

    def __init__(self, m, spec, W):
        super().__init__(m, spec, W)
        for i, ent in enumerate(self.lay.layers):
            ent["router"].place(self.mems, W["layers"][i]["router"])
            for e in range(1, m.n_experts):
                for role in FFN_ROLES:
                    ent[f"{role}@{e}"].place(self.mems, W["layers"][i]["experts"][e][role])
        self.routed: list[list[int]] = []

    def ffn(self, i, h):
        m, lay = self.m, self.lay.layers[i]
        logits = self.gemv(lay["router"], h)
        top = [int(e) for e in np.argsort(-logits, kind="stable")[:m.experts_per_token]]
        self.routed.append(top)
        gates = asic.softmax(logits[top][None, :])[0]
        out = np.zeros(m.d_model, np.float32)
        for gate, e in zip(gates, top, strict=True):
            y = asic.silu(self.gemv(lay[f"ffn_gate@{e}"], h)) * self.gemv(lay[f"ffn_up@{e}"], h)
            out += gate * self.gemv(lay[f"ffn2@{e}"], y)
        return out


def _moe_reference(m, W, toks):
    """float64: the dense reference with each block's FFN replaced by the top-k experts, gated by a softmax over
    their router logits."""
    f = np.float64

    def ffn_of(i):
        def ffn(h):
            Wl = W["layers"][i]
            logits = Wl["router"].astype(f) @ h
            top = np.argsort(-logits, kind="stable")[:m.experts_per_token]
            g = np.exp(logits[top] - logits[top].max())
            g /= g.sum()
            out = np.zeros(m.d_model)
            for gate, e in zip(g, top, strict=True):
                E = {r: v.astype(f) for r, v in Wl["experts"][e].items()}
                a = E["ffn_gate"] @ h
                out += gate * (E["ffn2"] @ (a / (1 + np.exp(-a)) * (E["ffn_up"] @ h)))
            return out
        return ffn

    return _reference(dataclasses.replace(m, n_experts=1), W, toks, ffns=[ffn_of(i) for i in range(m.n_layers)])


def test_tiny_moe_decode_matches_numpy(spec2):
    m = MOE
    rng = np.random.default_rng(11)
    W = _moe_weights(m, rng)
    toks = [int(x) for x in rng.integers(0, m.vocab, 12)]
    sim = FunctionalMoe(m, spec2, W)
    got = [sim.step(tok, t) for t, tok in enumerate(toks)]
    ref = _moe_reference(m, W, toks)
    for t, (y, r) in enumerate(zip(got, ref, strict=True)):
        assert np.linalg.norm(y - r) / np.linalg.norm(r) < 2e-2, t
    # the tokens used more than the top-2 of one fixed pair of experts: routing is the token's
    assert len({e for top in sim.routed for e in top}) > 2


def test_moe_layout_places_every_expert_and_the_router(spec2):
    lay = layout_model(MOE, spec2, load_policy())
    ent = lay.layers[0]
    assert (ent["router"].n, ent["router"].k) == (MOE.n_experts, MOE.d_model)
    for e in range(MOE.n_experts):
        assert (ent[f"ffn_gate@{e}"].n, ent[f"ffn_gate@{e}"].k) == (MOE.d_ff, MOE.d_model)
    # the experts' rows do not overlap
    starts = sorted(ent[f"{r}@{e}"].base_row for e in range(MOE.n_experts) for r in FFN_ROLES)
    assert len(set(starts)) == len(starts)
    dense = layout_model(dataclasses.replace(MOE, n_experts=1, experts_per_token=1), spec2, load_policy())
    assert lay.rows_used > dense.rows_used


def test_moe_graph_runs_the_routed_experts():
    g = build_graph(MOE, "decode", context_len=5)
    layer = [op for op in g if op.layer == 0]
    assert sum(op.role == "ffn_gate" for op in layer) == MOE.experts_per_token
    assert [op.role for op in layer if op.role.startswith(("router", "moe"))] == ["router", "router_gate",
                                                                                  "moe_scale", "moe_sum"]
    # weights read per token: the active parameters (the embedding table read one row, not whole)
    read = sum(op.weight_bytes for op in g)
    emb_table = MOE.vocab * MOE.d_model * MOE.dtype_bytes
    assert read == MOE.active_params * MOE.dtype_bytes - emb_table + MOE.d_model * MOE.dtype_bytes


def test_moe_graph_refuses_batched_and_prefill():
    from archsim.errors import NotModelled

    with pytest.raises(NotModelled, match="duplex"):
        build_graph(MOE, "prefill", prompt_len=8)


def test_moe_step_costs_k_expert_ffns_and_the_router(tmp_path):
    """On PIM the MoE block's FFN GEMVs take experts_per_token times the dense block's cycles (same shapes, every
    expert laid out alike), the router GEMV comes on top; attention is the dense model's."""
    from archsim.api import run

    def per_op(m):
        path = tmp_path / f"{m.name}.yaml"
        keys = ("name", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_head", "d_ff", "vocab", "max_context",
                "dtype", "norm", "activation", "gated_ffn", "position", "bias", "tied_embeddings", "n_experts",
                "experts_per_token")
        path.write_text("".join(f"{k}: {str(getattr(m, k)).lower() if isinstance(getattr(m, k), bool) else getattr(m, k)}\n"
                                for k in keys))
        return run({"system": "pimgpt", "model": str(path), "tokens": 4}).df.set_index("op")
    dense = dataclasses.replace(MOE, name="tiny-dense", n_experts=1, experts_per_token=1)
    a, b = per_op(dense), per_op(MOE)
    k = MOE.experts_per_token
    # (within 5 %: a GEMV's cycles depend a little on the rows the op before it left open, the router's or an
    # expert's here, the norm's in the dense model)
    for role in FFN_ROLES:
        assert b.loc[role, "ops"] == k * a.loc[role, "ops"]
        assert b.loc[role, "pim_cycles"] == pytest.approx(k * a.loc[role, "pim_cycles"], rel=0.05), role
    for role in ("qkv", "attn_score", "attn_context", "attn_out", "lm_head"):
        assert b.loc[role, "pim_cycles"] == pytest.approx(a.loc[role, "pim_cycles"], rel=0.05), role
    assert b.loc["router", "pim_cycles"] > 0 and "router" not in a.index
