"""NeuPIMs on Llama-class and MoE models (issue 37): grouped-query attention (K/V per KV head, the group's query
heads as more GEMVs over the same K rows), the QKV GEMM's K/V columns and the KV cache per KV head; the gated FFN
and RMSNorm; the MoE router and experts' GEMMs by their routed token counts; GPT-3 (MHA) unchanged."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from archsim import api
from archsim.errors import ConfigError
from archsim.systems.neupims.config import setup
from archsim.systems.neupims.decode import DecodeSimulator
from archsim.systems.neupims.device import build_device

ROOT = Path(__file__).resolve().parent.parent

CONTEXTS = (300, 700)


def _model(tmp_path, n_kv_heads: int, **extra) -> str:
    """A tiny model file: 8 query heads of 128, `n_kv_heads` KV heads, 2 layers."""
    path = tmp_path / f"tiny-kv{n_kv_heads}{''.join(sorted(extra))}.yaml"
    fields = {"name": path.stem, "d_model": 1024, "n_layers": 2, "n_heads": 8, "n_kv_heads": n_kv_heads,
              "d_head": 128, "d_ff": 2816, "vocab": 1000, "max_context": 4096, **extra}
    path.write_text("".join(f"{k}: {v}\n" for k, v in fields.items()))
    return str(path)


def _sim(model: str, system: str = "neupims", tp: int = 1) -> DecodeSimulator:
    su = setup({"system": system, "model": model, "tp": tp, "batch": len(CONTEXTS), "layers": 1})
    return DecodeSimulator(build_device(su), refresh=False)


def _count(cmds, spec, name: str) -> int:
    return int((cmds == spec.cmd(name)).sum())


@pytest.mark.parametrize("n_kv_heads", [8, 4, 2, 1])
def test_k_reads_scale_with_kv_heads_v_reads_with_query_heads(tmp_path, n_kv_heads):
    """One unit's attention streams for two requests: the logits' K row sets (G_ACTs) are per KV head (its group's
    queries share each open row set), their GEMVs (COMP, READRES) per query head; the attend re-opens the group's
    V^T rows per query head (the global buffer holds one head's scores); the KV rows a request takes are per KV
    head (times the passes of a group wider than the global buffer)."""
    sim = _sim(_model(tmp_path, n_kv_heads))
    comp, spec = sim.compiler, sim.dev.spec
    plan = sim._channel_plan(0, CONTEXTS)
    per_gwrite = comp.row_elems // comp.dk
    k_sets = sum(math.ceil(math.ceil(L / comp.banks) / per_gwrite) for L in CONTEXTS)
    v_sets = sum(math.ceil(comp.dk / comp.banks) * math.ceil(L / comp.row_elems) for L in CONTEXTS)
    rounds = sum(math.ceil(L / comp.banks) for L in CONTEXTS)
    acts = len(comp.group_banks)
    # a group wider than the global buffer's row_elems / dk query heads passes over its K rows once per fill
    passes = math.ceil(8 // n_kv_heads / per_gwrite)
    assert _count(plan.logits.cmd, spec, "G_ACT") == n_kv_heads * passes * k_sets * acts
    assert _count(plan.logits.cmd, spec, "READRES") == 8 * rounds
    assert _count(plan.logits.cmd, spec, "COMP") == 8 * rounds * comp.dk // 16
    assert _count(plan.attend.cmd, spec, "G_ACT") == 8 * v_sets * acts
    # q of up to row_elems / dk query heads per GWRITE, whatever the grouping
    assert _count(plan.logits.cmd, spec, "GWRITE") == len(CONTEXTS) * math.ceil(8 / per_gwrite)
    assert len(plan.softmax) == 8 * len(CONTEXTS) and len(plan.seg_heads) == len(plan.logits.start) - 1
    assert sorted(h for g in plan.seg_heads for h in g) == list(range(8 * len(CONTEXTS)))
    # the rows the requests' K, V^T (and q / score staging rows) take: per KV head
    last = max(p.pos[p.valid].max() for p in (plan.logits, plan.attend)) - sim.kv_row0 + 1
    per_head = sum(math.ceil(math.ceil(L / comp.banks) / per_gwrite)
                   + math.ceil(comp.dk / comp.banks) * math.ceil(L / comp.row_elems) + 2 for L in CONTEXTS)
    spill = max(math.ceil(L / comp.row_elems) for L in CONTEXTS)      # a score chunk's staging rows past the last
    assert (n_kv_heads - 1) * per_head < last <= n_kv_heads * per_head + spill


@pytest.mark.parametrize("n_kv_heads", [8, 2])
def test_qkv_gemm_and_kv_capacity_follow_kv_heads(tmp_path, n_kv_heads):
    sim = _sim(_model(tmp_path, n_kv_heads), tp=2)
    assert sim.gemm_shapes["qkv"] == (1024, (1024 + 2 * n_kv_heads * 128) // 2)
    assert sim.gemm_shapes["proj"] == (512, 1024)
    dev = sim.dev
    assert dev.kv_heads == n_kv_heads // 2 and dev.group == 8 // n_kv_heads
    per_token = 2 * 2 * n_kv_heads * 128 * 2 // 2          # K and V, 2 layers, fp16, over tp 2
    free = dev.spec.capacity_bytes - dev.model.weight_bytes // 2
    assert dev.capacity_tokens_per_channel == free // dev.pim_units // per_token


def test_npu_only_loads_kv_heads(tmp_path):
    """npu_only streams each request's K and V per KV head: a GQA model reads fewer bursts than its MHA twin."""
    reads = {}
    for kv in (8, 2):
        r = api.run({"system": "npu_only", "model": _model(tmp_path, kv), "tp": 1, "batch": 4, "layers": 1,
                     "dataset": "sharegpt"})
        st = r.tables["stages"]
        reads[kv] = int(st[st["stage"] == "B"]["n_RD"].sum())
    assert reads[2] < reads[8]


def test_gqa_refusals(tmp_path):
    model = _model(tmp_path, 2)
    with pytest.raises(ConfigError, match="KV heads"):
        setup({"system": "neupims", "model": model, "tp": 4})
    with pytest.raises(ConfigError, match="token_rows"):
        setup({"system": "neupims", "model": model, "tp": 1, "kv_layout": "token_rows"})


def test_gqa_run_end_to_end(tmp_path):
    """A tiny GQA model through a whole NeuPIMs iteration: the attention's PIM G_ACTs fall with the KV heads
    and its COMPs (one GEMV per query head) do not."""
    got = {}
    for kv in (8, 2):
        r = api.run({"system": "neupims", "model": _model(tmp_path, kv), "tp": 1, "batch": 4, "layers": 1,
                     "dataset": "sharegpt"})
        st = r.tables["stages"]
        got[kv] = (int(st["n_G_ACT"].sum()), int(st["n_COMP"].sum()), r.stats["tokens_per_s"])
    assert got[2][0] < got[8][0]
    assert got[2][1] == got[8][1]


# GPT-3-7B (MHA), batch 8 of sharegpt, 2 layers: cycles and DRAM energy per token as the simulator gave them
# before GQA was modelled (branch n37-gqa's base, 2e0c5a4); the MHA path must not move by one cycle
MHA_BEFORE = {("neupims", "head_rows"): (557101, 0.004217698830000001),
              ("neupims", "token_rows"): (554650, 0.00421168935),
              ("npu_only", "head_rows"): (310940, 0.002304299856),
              ("npu_pim", "head_rows"): (314188, 0.00223654755)}


@pytest.mark.parametrize("system, layout", sorted(MHA_BEFORE))
def test_mha_unchanged_bit_for_bit(system, layout, tmp_path):
    # the mappings as they were then: the controller's 32-entry window (the shipped ones now take NeuPIMs'
    # simulator's 4096, issue 33), everything else as shipped
    mapping = {"npu_pim": "npu_pim"}.get(system, "neupims")
    text = (ROOT / "mappings" / f"{mapping}.yaml").read_text()
    assert "\nrequest_queue: 4096\n" in text
    (tmp_path / "m.yaml").write_text(text.replace("\nrequest_queue: 4096\n", "\nrequest_queue: 32\n"))
    cfg = {"system": system, "model": "gpt3-7b", "batch": 8, "layers": 2, "samples": 1,
           "mapping": str(tmp_path / "m.yaml")}
    if layout == "token_rows":
        cfg["kv_layout"] = layout
    s = api.run(cfg).stats
    assert (s["simulated_cycles"], s["dram_energy_per_token_j"]) == MHA_BEFORE[(system, layout)]


def test_gated_ffn_and_rmsnorm_program(tmp_path):
    """A SwiGLU model: gate and up GEMMs of d_ff, SiLU and the element-wise product on the vector unit, the down
    GEMM; RMSNorm and RoPE where the model says so. A GPT-style model keeps LayerNorm, one FFN GEMM and GELU."""
    gated = _sim(_model(tmp_path, 2, gated_ffn="true", norm="rmsnorm", activation="silu", position="rope"), tp=2)
    assert gated.gemm_shapes == {"qkv": (1024, 768), "proj": (512, 1024), "ffn_gate": (1024, 1408),
                                 "ffn_up": (1024, 1408), "ffn2": (1408, 1024)}
    qkv, post = gated.layer_ops(0, 4)
    # RoPE rotates the device's q (512) and k (128) rows after the QKV GEMM
    assert qkv == [("vector", "rmsnorm", 1024, 4), ("gemm", 0, "qkv", 4), ("vector", "rope", 640, 4)]
    assert [op[1] if op[0] == "vector" else op[2] if op[0] == "gemm" else op[0] for op in post] == [
        "proj", "allreduce", "add", "rmsnorm", "ffn_gate", "silu", "ffn_up", "mul", "ffn2", "allreduce", "add"]
    assert ("vector", "silu", 1408, 4) in post and ("vector", "mul", 1408, 4) in post
    plain = _sim(_model(tmp_path, 8))
    qkv, post = plain.layer_ops(0, 4)
    assert qkv == [("vector", "layernorm", 1024, 4), ("gemm", 0, "qkv", 4)]
    assert [op[2] for op in post if op[0] == "gemm"] == ["proj", "ffn1", "ffn2"]
    assert ("vector", "gelu", 2816, 4) in post


def test_vector_operators_of_llama_layers():
    """RMSNorm takes one reduction tree where LayerNorm takes two; SiLU, the product and RoPE are element-wise."""
    from archsim.npu.config import load_npu_config
    from archsim.npu.vector import addtree_levels, vector_iters, vector_row_cycles

    npu = load_npu_config("neupims_npu")
    lat = dict.fromkeys(npu.vector.latency_cycles, 1) | {"add_tree": 3, "mul": 2, "exp": 5, "sqrt": 7, "add": 1}
    npu = dataclasses.replace(npu, vector=dataclasses.replace(npu.vector, latency_cycles=lat, size_zero_ops=()))
    n = 4096
    it, tree = vector_iters(n, npu.vector.lanes), addtree_levels(n, npu.vector.lanes)
    assert vector_row_cycles(npu, "rmsnorm", n) == tree * 3 + 2 + 7 + it * 3 * 2
    assert vector_row_cycles(npu, "rmsnorm", n) < vector_row_cycles(npu, "layernorm", n)
    assert vector_row_cycles(npu, "silu", n) == it * (5 + 1 + 2 * 2)
    assert vector_row_cycles(npu, "mul", n) == it * 2
    assert vector_row_cycles(npu, "relu", n) == it * 1
    assert vector_row_cycles(npu, "rope", n) == it * (2 * 2 + 1)


def test_gated_run_end_to_end(tmp_path):
    """A whole iteration of a tiny Llama-style model (GQA, SwiGLU, RMSNorm): its NPU program runs the gate and up
    GEMMs, and its FFN weights (three d_model x d_ff matrices) make the Proj+FFN stages longer than those of the
    same model with one FFN input GEMM."""
    ends = {}
    for gated in (True, False):
        extra = {"gated_ffn": "true", "norm": "rmsnorm", "activation": "silu"} if gated else {}
        r = api.run({"system": "neupims", "model": _model(tmp_path, 2, **extra), "tp": 1, "batch": 4,
                     "layers": 1, "dataset": "sharegpt", "sub_batch": False})
        ops = r.tables["npu_ops"]
        names = set(ops["op"])
        assert ({"ffn_gate", "ffn_up", "silu", "mul", "rmsnorm"} <= names) == gated
        assert ({"ffn1", "gelu", "layernorm"} <= names) == (not gated)
        st = r.tables["stages"]
        ends[gated] = int(st[st["stage"] == "E"]["cycles"].sum())
    assert ends[True] > ends[False]


MOE = {"gated_ffn": "true", "norm": "rmsnorm", "activation": "silu", "n_experts": 4, "experts_per_token": 2}


def test_moe_layer_program(tmp_path):
    """An MoE layer: the router GEMM (d_model x n_experts, whole on every device) and its softmax, then each
    expert's gated FFN over the tokens routed to it (uniform routing's expected counts, as Duplex's); an expert no
    token reaches runs nothing. Every expert is split over the tp devices as the dense FFN is."""
    from archsim.systems.duplex.compiler import routing_counts

    sim = _sim(_model(tmp_path, 2, **MOE), tp=2)
    m = sim.dev.model
    assert sim.gemm_shapes["router"] == (1024, 4)
    assert all(sim.gemm_shapes[f"e{e}.{n}"] == sim.gemm_shapes[n] for e in range(4)
               for n in ("ffn_gate", "ffn_up", "ffn2"))
    for b in (1, 3, 8):
        ops = sim._ffn_ops(0, b)
        assert ops[:2] == [("gemm", 0, "router", b), ("vector", "softmax", 4, b)]
        counts = routing_counts(m, b, "uniform", layer=0)
        assert sum(counts) == b * 2
        rows = {op[2]: op[3] for op in ops if op[0] == "gemm" and op[2] != "router"}
        assert rows == {f"e{e}.{n}": int(c) for e, c in enumerate(counts) if c for n in ("ffn_gate", "ffn_up", "ffn2")}
    assert len({op[2].split(".")[0] for op in sim._ffn_ops(0, 1) if op[0] == "gemm"} - {"router"}) == 2


def test_moe_every_other_layer(tmp_path):
    """moe_every 2 (GLaM): block 0 holds the dense FFN, block 1 the router and the experts."""
    sim = _sim(_model(tmp_path, 8, n_experts=4, experts_per_token=2, moe_every=2))
    sim_layers = sim.dev.layers
    assert sim_layers == 1 and sim.layer_gemms(0) == ["qkv", "proj", "ffn1", "ffn2"]
    assert sim.layer_gemms(1) == ["qkv", "proj", "router", *(f"e{e}.{n}" for e in range(4) for n in ("ffn1", "ffn2"))]
    assert [op[2] for op in sim._ffn_ops(0, 2) if op[0] == "gemm"] == ["ffn1", "ffn2"]


def test_moe_run_end_to_end_and_gpu_refusal(tmp_path):
    """A tiny MoE model through a whole iteration: the NPU runs the router and the experts; with every expert
    reached (batch 4, 2 of 4 experts per token) its FFN stage reads four experts' weights and takes longer than its
    dense twin's. The GPU baselines do not model MoE and refuse it."""
    model = _model(tmp_path, 2, **MOE)
    dense = _model(tmp_path, 2, gated_ffn="true", norm="rmsnorm", activation="silu")
    ends = {}
    for name, path in (("moe", model), ("dense", dense)):
        r = api.run({"system": "neupims", "model": path, "tp": 1, "batch": 4, "layers": 1, "dataset": "sharegpt",
                     "sub_batch": False})
        names = set(r.tables["npu_ops"]["op"])
        assert ({"router", "e0.ffn_gate", "e3.ffn2"} <= names) == (name == "moe")
        st = r.tables["stages"]
        ends[name] = int(st[st["stage"] == "E"]["cycles"].sum())
    assert ends["moe"] > ends["dense"]
    with pytest.raises(ConfigError, match="mixture-of-experts"):
        setup({"system": "gpu_only", "model": model, "tp": 1})
