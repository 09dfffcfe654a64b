"""T3 runs mixture-of-experts models as themselves (issue 37): tensor-parallel experts, every active expert's FC-2
GEMM updating the one output the fused reduce-scatter reduces; the decode step of a MoE model, of a model
mixing dense and MoE layers, and the study's Mixtral points."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from archsim.systems.t3.params import load_params
from archsim.systems.t3.shapes import SublayerShape, expert_row_starts, expert_tiles, moe_fc2_shape
from archsim.systems.t3.sim import CONFIGS, MOE_ORDERS, _Sim, simulate_sublayer
from archsim.workload.spec import load_model

MAPPING = "RoRaBgBaChCo,Ch^Ro"          # 4 channels (tests/test_t3.py's small memory)
# 16 tokens over 8 experts, 2 each: 4 tokens per expert; 5 tokens over 4: runs that wrap round the batch
MOE = SublayerShape("fc2_fwd", tokens=16, k=256, h=1024, experts=(4,) * 8)
WRAP = SublayerShape("fc2_fwd", tokens=5, k=128, h=512, experts=(3, 3, 2, 2))

TINY_MOE = """\
name: tiny-moe
d_model: 512
n_layers: 4
n_heads: 8
n_kv_heads: 2
d_head: 64
d_ff: 512
vocab: 1000
max_context: 2048
dtype: fp16
norm: rmsnorm
activation: silu
gated_ffn: true
position: rope
n_experts: 4
experts_per_token: {k}
moe_every: {every}
"""


@pytest.fixture(scope="module")
def params():
    return load_params(overrides={"memory.channels": 4, "memory.mapping": MAPPING})


def _model(tmp_path: Path, k: int = 2, every: int = 1, experts: int = 4) -> str:
    text = TINY_MOE.format(k=k, every=every).replace("n_experts: 4", f"n_experts: {experts}")
    path = tmp_path / f"tiny-moe-{experts}-{k}-{every}.yaml"
    path.write_text(text)
    return str(path)


def _decode(model: str, batch: int = 8, tp: int = 2):
    from archsim import api

    return api.run({"system": "t3_decode", "model": model, "tp": tp, "batch": batch, "context": 64})


@pytest.mark.parametrize("shape", [MOE, WRAP], ids=["moe", "wrapping-runs"])
def test_every_token_meets_its_experts_once_each(shape, params):
    """The experts' token runs cover every token experts_per_token times, never one expert twice, and every
    expert GEMM tile lands in one output tile of its chunk."""
    k = sum(shape.experts) // shape.tokens
    seen = np.zeros((shape.tokens, len(shape.experts)), int)
    for e, (start, count) in enumerate(zip(expert_row_starts(shape), shape.experts, strict=True)):
        seen[(start + np.arange(count)) % shape.tokens, e] += 1
    assert seen.max() == 1 and (seen.sum(axis=1) == k).all()
    for tiles in expert_tiles(shape, 4, params.gpu):
        for t in tiles:
            assert t.m0 + t.tm <= shape.tokens and t.a0 + t.tm <= shape.experts[t.expert]


@pytest.mark.parametrize("order", MOE_ORDERS)
@pytest.mark.parametrize("shape", [MOE, WRAP], ids=["moe", "wrapping-runs"])
def test_fused_moe_result_is_the_sum_of_every_expert_on_every_device(shape, order, params):
    """Functional: in either GEMM order, every configuration ends with each device's chunk equal to the sum over
    devices of every expert's product added into its tokens' rows; T3's tracker fired every output tile once."""
    runs = {c: simulate_sublayer(params, shape, 4, c, functional=True, moe_order=order) for c in CONFIGS}
    total = sum(runs["sequential"].extra["partials"].values())
    bounds = runs["sequential"].extra["chunk_bounds"]
    assert np.abs(total).sum() > 0
    for c, run in runs.items():
        for d in range(4):
            np.testing.assert_array_equal(run.outputs[d], total[:, bounds[d][0]:bounds[d][1]], err_msg=c)
        if c != "sequential":
            # every device's output tiles of stages 1..3 fired once: 3 per final tile
            assert run.tracker["fired"] == 3 * len(run.final_tiles) > 0
            assert set(run.dma_fires.values()) == {1}


def test_expert_order_runs_each_experts_gemm_whole_in_ring_order(params):
    """moe_order expert: device d's GEMM tiles are expert 0's in the staggered chunk order, then expert 1's, ...;
    chunk: every expert's tiles of the stage-0 chunk first. The same tiles either way, and the same traffic."""
    by = {o: _Sim(params, MOE, 4, "t3", devices="one", moe_order=o).order(0) for o in MOE_ORDERS}
    assert sorted(by["expert"], key=lambda t: (t.chunk, t.index)) == sorted(by["chunk"],
                                                                            key=lambda t: (t.chunk, t.index))
    experts = [t.expert for t in by["expert"]]
    assert experts == sorted(experts)
    first = [t.chunk for t in by["expert"] if t.expert == 0]
    assert [t.chunk for t in by["chunk"][:len(first)]] == [first[0]] * len(first)      # chunk: one chunk first
    assert len(set(first)) == 4 and first[0] == first[len(first) // 4 - 1]          # expert: its 4 chunks in turn
    runs = {o: simulate_sublayer(params, MOE, 4, "t3", devices="one", moe_order=o) for o in MOE_ORDERS}
    assert runs["expert"].traffic == runs["chunk"].traffic
    assert runs["expert"].extra["moe_order"] == "expert"


def test_moe_updates_count_every_expert(params):
    """T3's NMC updates of a MoE sublayer: each device updates locally what its experts write outside the
    stage-0 chunk (sum of the experts' tokens x H, 3 of 4 chunks) and receives the previous device's stage-0
    stores (every expert's) at stage 1 plus one DMA of the reduced tile at each later stage; the dense GEMM of
    the same tokens updates once per access."""
    moe = simulate_sublayer(params, MOE, 4, "t3", devices="one")
    dense = simulate_sublayer(params, dataclasses.replace(MOE, experts=()), 4, "t3", devices="one")
    acc = 32 // params.gpu.dtype_bytes                 # FP16 columns per 32 B access
    rows = sum(MOE.experts)
    assert moe.traffic["gemm_update"] == 3 * rows * MOE.h // 4 // acc
    assert moe.traffic["rs_update"] == (rows + 2 * MOE.tokens) * MOE.h // 4 // acc     # stage 1; DMAs of 2, 3
    assert dense.traffic["gemm_update"] == 3 * MOE.tokens * MOE.h // 4 // acc


def test_weights_read_are_the_active_experts_weights(params):
    """The experts' GEMMs read each active expert's K x H weights once (decode: one row of tiles), so the
    weight bytes scale with the active experts, and a dense GEMM reads one block."""
    eb = params.gpu.dtype_bytes
    for shape in (MOE, WRAP, dataclasses.replace(MOE, experts=(4, 4))):
        run = simulate_sublayer(params, shape, 4, "t3-mca", devices="one")
        assert run.extra["weight_read_bytes"] == len(shape.experts) * shape.k * shape.h * eb
    dense = simulate_sublayer(params, dataclasses.replace(MOE, experts=()), 4, "t3-mca", devices="one")
    assert dense.extra["weight_read_bytes"] == MOE.k * MOE.h * eb


def test_mixtral_fc2_shape_at_uniform_routing():
    """Mixtral's down projection at tp 4: d_ff / 4 rows of each expert's weights; uniform routing puts a
    batch of 64 at 16 tokens on each of the 8 experts, one request on 2 of them."""
    m = load_model("mixtral-8x7b")
    s = moe_fc2_shape(m, 4, 64)
    assert (s.k, s.h, s.experts) == (m.d_ff // 4, m.d_model, (16,) * 8)
    assert moe_fc2_shape(m, 4, 1).experts == (1, 1)


def test_tiny_moe_model_decodes_and_reads_its_active_experts(tmp_path):
    """A tiny MoE model runs end to end: the router, each active expert's FC-1 and the fused FC-2 in every MoE
    layer; the FC-2's weights read are the active experts' (d_ff / tp x d_model each)."""
    m = load_model(_model(tmp_path))
    for batch, active in ((1, 2), (8, 4)):
        res = _decode(_model(tmp_path), batch=batch)
        rows = res.df.set_index("part")
        assert list(rows.index) == ["qkv", "attention", "router", "fc1", "op_fwd", "fc2_fwd"]
        assert set(rows["layer"]) == {"moe"}
        assert rows.loc["fc2_fwd", "experts"] == rows.loc["fc1", "experts"] == active == res.stats["experts_active"]
        assert rows.loc["fc2_fwd", "weight_read_bytes"] == active * (m.d_ff // 2) * m.d_model * 2
        assert res.stats["decode_tokens_per_s"] > 0 and res.stats["energy_per_token_j"] > 0
        assert res.stats["scope"]["moe"]["tokens_per_active_expert"] == [batch * 2 // active] * active
        assert "router" in res.stats["scope"]["roofline"] and res.stats["scope"]["moe"]["order"] == "expert"


def test_more_experts_per_token_is_not_faster(tmp_path):
    """More experts per token: more active experts (more weights read) or more tokens per expert, never a
    shorter step; at 2 requests, 1 -> 2 experts per token doubles the active experts, so it is slower."""
    step = {k: _decode(_model(tmp_path, k=k), batch=2).stats["decode_step_s"] for k in (1, 2, 4)}
    assert step[1] < step[2] <= step[4]


def test_dense_layers_between_moe_layers_stay_dense(tmp_path):
    """moe_every 2: one dense and one MoE layer simulated, each weighted by half the layers: the step is the mean
    of the all-dense and the all-MoE model's, its dense rows are the dense model's."""
    from archsim import api

    mixed = _decode(_model(tmp_path, every=2))
    moe = _decode(_model(tmp_path))
    dense_path = tmp_path / "tiny-dense.yaml"
    dense_path.write_text(TINY_MOE.format(k=1, every=1).replace("n_experts: 4", "n_experts: 1"))
    dense = api.run({"system": "t3_decode", "model": str(dense_path), "tp": 2, "batch": 8, "context": 64})
    assert mixed.stats["scope"]["layers_simulated"] == 2 and mixed.stats["moe_layers"] == 2
    assert "layer" not in dense.df.columns
    got = mixed.df[mixed.df.layer == "dense"].drop(columns=["layer"]).dropna(axis=1).reset_index(drop=True)
    np.testing.assert_array_equal(got["seconds"], dense.df["seconds"])
    assert mixed.stats["decode_step_s"] == pytest.approx((dense.stats["decode_step_s"] + moe.stats["decode_step_s"]) / 2,
                                                        rel=1e-12)
    assert mixed.stats["energy_per_token_j"] == pytest.approx(
        (dense.stats["energy_per_token_j"] + moe.stats["energy_per_token_j"]) / 2, rel=1e-12)


def test_dense_model_runs_the_fused_sublayers_as_before(tmp_path):
    """A dense model's decode step is unchanged by the MoE path: its FC-2 row is the dense sublayer's
    simulation, and its rows carry no layer kind."""
    from archsim import api
    from archsim.systems.t3.decode import _params
    from archsim.systems.t3.shapes import sublayer_shape

    cfg = {"system": "t3_decode", "model": "gpt3-small", "tp": 2, "batch": 4, "context": 32, "configuration": "t3"}
    res = api.run(cfg)
    assert "layer" not in res.df.columns and "experts_active" not in res.stats
    assert list(res.df.part) == ["qkv", "fc1", "attention", "op_fwd", "fc2_fwd"]
    from archsim.systems.t3.decode import DEFAULTS

    params = _params({**DEFAULTS, **cfg})
    run = simulate_sublayer(params, sublayer_shape(load_model("gpt3-small"), "fc2_fwd", 2, 4), 2, "t3", devices="one")
    assert res.df.set_index("part").loc["fc2_fwd", "seconds"] == run.sublayer_s


def test_study_plans_mixtral_on_t3_at_tp4_and_refuses_tp1_for_capacity(tmp_path):
    """The study's T3 mapping runs Mixtral at tp 4 (the MoE feature is modelled); at tp 1 it is still refused,
    for its own reasons (its 87 GiB of weights on one device), not for MoE."""
    from archsim.study.plan import plan
    from archsim.study.spec import Intent, Memory

    for gen in ("hbm2", "hbm3"):
        ok = plan(Intent("t3", "mixtral-8x7b", Memory(gen, 4), 64, 512, 128, 4, {}), tmp_path)
        assert ok.config is not None and ok.config["tp"] == 4, ok.reason
        one = plan(Intent("t3", "mixtral-8x7b", Memory(gen, 4), 1, 512, 128, 1, {}), tmp_path)
        assert one.config is None and "mixture-of-experts" not in one.reason and "do not fit" in one.reason


def test_bidirectional_ring_reduces_every_experts_rows():
    """ring_directions 2 cuts each chunk by rows (first half forwards, second half backwards): an expert whose
    tokens cross the halves has tiles in both directions' chunks, and every device still ends with its chunk
    reduced, in every configuration (the preset's 32 channels)."""
    bi = dataclasses.replace(load_params(), ring_directions=2)
    shape = SublayerShape("fc2_fwd", tokens=256, k=64, h=384, experts=(96, 160, 100, 156))
    tiles = expert_tiles(shape, 4, bi.gpu, 2)
    assert {t.expert for t in tiles[0]} >= {0, 1} and {t.expert for t in tiles[4]} >= {1, 3}
    for c in CONFIGS:
        run = simulate_sublayer(bi, shape, 4, c, functional=True)
        total = sum(run.extra["partials"].values())
        for d, (lo, hi) in enumerate(run.extra["chunk_bounds"]):
            np.testing.assert_array_equal(run.outputs[d], total[:, lo:hi], err_msg=c)
