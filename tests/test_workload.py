"""Model specs and operator graphs (archsim.workload)."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from archsim.errors import ConfigError, UserError
from archsim.paths import resolve
from archsim.workload import OP_KINDS, build_graph, list_models, load_model

# Published sizes. GPT-2: the released checkpoints (openai/gpt-2 README / HF model cards), which count the
# token and position embeddings and count the tied LM head once -- the same convention as
# ModelSpec.n_params. GPT-3: Brown et al. 2020, Table 2.1.
PUBLISHED = {
    "gpt2-small": 124e6, "gpt2-medium": 355e6, "gpt2-large": 774e6, "gpt2-xl": 1558e6,
    "gpt3-small": 125e6, "gpt3-medium": 350e6, "gpt3-large": 760e6, "gpt3-xl": 1.3e9,
}
SHAPES = {  # name: (d_model, layers, heads, d_head, max_context)
    "gpt2-small": (768, 12, 12, 64, 1024), "gpt2-medium": (1024, 24, 16, 64, 1024),
    "gpt2-large": (1280, 36, 20, 64, 1024), "gpt2-xl": (1600, 48, 25, 64, 1024),
    "gpt3-small": (768, 12, 12, 64, 2048), "gpt3-medium": (1024, 24, 16, 64, 2048),
    "gpt3-large": (1536, 24, 16, 96, 2048), "gpt3-xl": (2048, 24, 16, 128, 2048),
}
LAYER_KINDS = Counter({"layernorm": 2, "gemv": 4, "kv_append": 1, "attn_score": 1, "softmax": 1,
                       "attn_context": 1, "residual_add": 2, "gelu": 1})


def test_every_shipped_name_resolves():
    assert set(PUBLISHED) <= set(list_models())
    for name in PUBLISHED:
        path = resolve("workloads", name)
        assert path.parent.name == "models" and path.stem == name
        spec = load_model(name)
        assert spec.name == name
        assert (spec.d_model, spec.n_layers, spec.n_heads, spec.d_head, spec.max_context) == SHAPES[name]
        assert spec.vocab == 50257 and spec.d_ff == 4 * spec.d_model and spec.dtype == "bf16"


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_matches_published_size(name):
    spec = load_model(name)
    assert abs(spec.n_params / PUBLISHED[name] - 1) < 0.03
    assert spec.published_params == PUBLISHED[name]


def test_gpt2_xl_parameter_count_by_hand():
    # Independent closed form: per block 12 d^2 weights + 13 d (qkv 3d, proj d, fc 4d, fc-proj d biases,
    # 2 LayerNorms 4d); wte + wpe; final LayerNorm 2d. 1,557,611,200 ~ "1.56B".
    d, L, V, T = 1600, 48, 50257, 1024
    expected = L * (12 * d * d + 13 * d) + V * d + T * d + 2 * d
    spec = load_model("gpt2-xl")
    assert spec.n_params == expected == 1_557_611_200
    assert spec.weight_bytes == 2 * expected
    assert spec.kv_bytes_per_token == 2 * L * d * 2


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_decode_flops_are_twice_the_parameters_plus_attention(name):
    spec = load_model(name)
    ctx = 512
    g = build_graph(spec, context_len=ctx)
    attention = sum(op.flops for op in g if op.kind in ("attn_score", "attn_context"))
    # q.K^T and p.V: 2 x 2 flops per (head, key, d_head) per layer.
    assert attention == 4 * spec.n_layers * spec.n_heads * spec.d_head * ctx
    matmul = sum(op.flops for op in g if op.kind == "gemv")
    # One multiply-add per weight (the LM head reuses wte) plus one add per bias.
    d, L, f = spec.d_model, spec.n_layers, spec.d_ff
    weights = L * (4 * d * d + 2 * d * f) + spec.vocab * d
    biases = L * (3 * d + d + f + d)
    assert matmul == 2 * weights + biases
    assert abs(g.flops / (2 * spec.n_params + attention) - 1) < 0.02


@pytest.mark.parametrize("name", ["gpt2-small", "gpt2-xl", "gpt3-xl"])
def test_decode_graph_structure(name):
    spec = load_model(name)
    g = build_graph(spec, context_len=100)
    assert len(g) == 13 * spec.n_layers + 3          # embed + 13 per block + ln_f + lm_head
    assert g[0].name == "embed" and g[-2].name == "ln_f" and g[-1].name == "lm_head"
    for layer in (0, spec.n_layers - 1):
        assert g.kind_counts(layer) == LAYER_KINDS
        names = [op.name.split(".", 1)[1] for op in g.layer_ops(layer)]
        assert names == ["ln1", "qkv", "kv_append", "attn_score", "softmax", "attn_context", "attn_out",
                         "residual1", "ln2", "ffn1", "gelu", "ffn2", "residual2"]
    assert {op.kind for op in g} <= set(OP_KINDS)
    by = {op.name: op for op in g}
    d = spec.d_model
    qkv, ffn1, ffn2, head = by["L3.qkv"], by["L3.ffn1"], by["L3.ffn2"], by["lm_head"]
    assert (qkv.kind, qkv.m, qkv.k, qkv.n, qkv.layer) == ("gemv", 1, d, 3 * d, 3)
    assert (ffn1.k, ffn1.n, ffn2.k, ffn2.n) == (d, 4 * d, 4 * d, d)
    assert (head.k, head.n, head.has_bias, head.layer) == (d, spec.vocab, False, None)
    score, soft = by["L3.attn_score"], by["L3.softmax"]
    assert (score.groups, score.m, score.n, score.k) == (spec.n_heads, 1, 100, spec.d_head)
    assert soft.elements == spec.n_heads * 100
    # A batch-1 GEMV streams its weights once: 2 flops per 2-byte weight -> ~1 flop/byte.
    assert 0.99 < qkv.op_per_byte < 1.0


def test_decode_bytes_add_up_to_the_model():
    spec = load_model("gpt2-medium")
    ctx = 300
    g = build_graph(spec, context_len=ctx)
    B = spec.dtype_bytes
    # Weights read per token: all parameters except the position table, of which one row is gathered
    # (and one row of wte for the embedding, on top of the full wte the tied LM head streams).
    expected = spec.n_params - spec.max_context * spec.d_model + 2 * spec.d_model
    assert sum(op.weight_bytes for op in g) == expected * B
    assert sum(op.kv_write_bytes for op in g) == spec.kv_bytes_per_token
    assert sum(op.kv_read_bytes for op in g) == spec.kv_bytes_per_token * ctx


def test_prefill_graph_is_gemm_with_causal_attention():
    spec = load_model("gpt2-small")
    P = 64
    g = build_graph(spec, phase="prefill", prompt_len=P)
    by = {op.name: op for op in g}
    assert by["L0.qkv"].kind == "gemm" and by["L0.qkv"].m == P
    pairs = P * (P + 1) // 2
    assert by["L0.attn_score"].flops == 2 * spec.n_heads * pairs * spec.d_head
    assert by["L0.softmax"].elements == spec.n_heads * pairs
    assert by["L0.kv_append"].kv_write_bytes == P * 2 * spec.d_model * spec.dtype_bytes
    assert by["lm_head"].m == 1 and by["ln_f"].m == 1          # only the last position is projected
    decode = build_graph(spec, context_len=1)
    assert by["L0.qkv"].flops == P * decode[2].flops
    # Weights are read once for all P rows, so a GEMM's op/byte grows with P.
    assert by["L0.qkv"].op_per_byte > 20 * decode[2].op_per_byte


def test_batched_decode_reads_weights_once():
    spec = load_model("gpt3-small")
    g1, g4 = build_graph(spec, context_len=64), build_graph(spec, context_len=64, batch=4)
    q1, q4 = g1[2], g4[2]
    assert (q4.kind, q4.m) == ("gemm", 4)
    assert q4.weight_bytes == q1.weight_bytes and q4.act_read_bytes == 4 * q1.act_read_bytes
    assert sum(op.kv_read_bytes for op in g4) == 4 * sum(op.kv_read_bytes for op in g1)


def test_graph_frame():
    df = build_graph(load_model("gpt2-small"), context_len=8).to_frame()
    assert {"name", "kind", "layer", "m", "n", "k", "flops", "weight_bytes", "kv_read_bytes", "op_per_byte"} <= set(df)
    assert str(df["layer"].dtype) == "Int64" and df["layer"].isna().sum() == 3


# ---- HuggingFace config.json ------------------------------------------------------------------------
def test_hf_gpt2_config_round_trip(tmp_path):
    cfg = {"model_type": "gpt2", "n_embd": 1024, "n_layer": 24, "n_head": 16, "n_positions": 1024,
           "vocab_size": 50257, "n_inner": None, "activation_function": "gelu_new", "torch_dtype": "float32"}
    folder = tmp_path / "gpt2-medium-hf"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    spec = load_model(folder / "config.json")
    ref = load_model("gpt2-medium")
    assert spec.name == "gpt2-medium-hf" and spec.dtype == "fp32"
    for field in ("d_model", "n_layers", "n_heads", "d_head", "d_ff", "vocab", "max_context", "norm", "activation",
                  "bias", "tied_embeddings", "position"):
        assert getattr(spec, field) == getattr(ref, field), field
    assert spec.n_params == ref.n_params
    assert len(build_graph(spec, context_len=10)) == len(build_graph(ref, context_len=10))
    assert load_model(str(folder)) == spec          # a HF model folder works too


def test_hf_llama_config_gqa_gated(tmp_path):
    # TinyLlama-1.1B's published config (1.1B parameters).
    cfg = {"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 22, "num_attention_heads": 32,
           "num_key_value_heads": 4, "intermediate_size": 5632, "max_position_embeddings": 2048,
           "vocab_size": 32000, "hidden_act": "silu", "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
           "torch_dtype": "bfloat16"}
    path = tmp_path / "tinyllama.json"
    path.write_text(json.dumps(cfg))
    spec = load_model(path)
    assert (spec.n_kv_heads, spec.kv_dim, spec.norm, spec.position, spec.gated_ffn, spec.bias) == \
        (4, 256, "rmsnorm", "rope", True, False)
    assert abs(spec.n_params / 1.1e9 - 1) < 0.03
    g = build_graph(spec, context_len=50)
    assert g.kind_counts(0) == Counter({"rmsnorm": 2, "gemv": 5, "rope": 1, "kv_append": 1, "attn_score": 1,
                                        "softmax": 1, "attn_context": 1, "residual_add": 2, "silu": 1,
                                        "mul": 1})
    assert sum(op.kv_write_bytes for op in g) == spec.kv_bytes_per_token == 2 * 22 * 256 * 2
    assert g[0].flops == 0          # RoPE: no position table to add


# ---- bad input --------------------------------------------------------------------------------------
def _write(tmp_path, text, name="m.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


GOOD = "d_model: 64\nn_layers: 2\nn_heads: 4\nvocab: 100\nmax_context: 32\n"


def test_minimal_yaml_defaults(tmp_path):
    spec = load_model(_write(tmp_path, GOOD))
    assert (spec.name, spec.d_head, spec.d_ff, spec.n_kv_heads, spec.dtype) == ("m", 16, 256, 4, "bf16")


def test_missing_key_names_file_and_key(tmp_path):
    p = _write(tmp_path, GOOD.replace("n_layers: 2\n", ""))
    with pytest.raises(ConfigError) as exc:
        load_model(p)
    assert exc.value.key_path == "n_layers" and str(p) in str(exc.value) and "missing" in str(exc.value)


def test_invalid_value_names_key_and_line(tmp_path):
    p = _write(tmp_path, GOOD.replace("vocab: 100", "vocab: -5"))
    with pytest.raises(ConfigError, match=r"m\.yaml:4: vocab: must be an integer >= 1, got -5"):
        load_model(p)
    with pytest.raises(ConfigError, match="dtype: must be one of bf16, fp16, fp32, int8"):
        load_model(_write(tmp_path, GOOD + "dtype: fp64\n"))
    with pytest.raises(ConfigError, match="n_layer: unknown key; allowed keys"):
        load_model(_write(tmp_path, GOOD + "n_layer: 3\n"))


def test_d_model_not_divisible_by_heads(tmp_path):
    with pytest.raises(ConfigError, match="d_model = 64 is not divisible by n_heads = 6"):
        load_model(_write(tmp_path, GOOD.replace("n_heads: 4", "n_heads: 6")))
    with pytest.raises(ConfigError, match="multiple of n_kv_heads"):
        load_model(_write(tmp_path, GOOD + "n_kv_heads: 3\n"))


def test_unknown_model_lists_known_ones():
    with pytest.raises(UserError) as exc:
        load_model("gpt2-xxl")
    msg = str(exc.value)
    assert "unknown model 'gpt2-xxl'" in msg and "gpt3-medium" in msg and "did you mean" in msg
    with pytest.raises(UserError, match="model file not found"):
        load_model("no/such/config.json")


def test_hf_config_errors(tmp_path):
    bad = {"n_embd": 64, "n_head": 4, "n_positions": 32, "vocab_size": 10}
    with pytest.raises(ConfigError) as exc:
        load_model(_write(tmp_path, json.dumps(bad), "config.json"))
    assert exc.value.key_path == "n_layer" and "config.json" in str(exc.value)
    with pytest.raises(ConfigError, match="n_head: d_model = 64 is not divisible by n_heads = 5"):
        load_model(_write(tmp_path, json.dumps({**bad, "n_layer": 2, "n_head": 5}), "c2.json"))
    with pytest.raises(ConfigError, match="activation_function: unsupported activation 'tanh'"):
        load_model(_write(tmp_path, json.dumps({**bad, "n_layer": 2, "activation_function": "tanh"}), "c3.json"))
    with pytest.raises(UserError, match=r"c4\.json:1: invalid JSON"):
        load_model(_write(tmp_path, "{not json", "c4.json"))


def test_build_graph_errors():
    spec = load_model("gpt2-small")
    with pytest.raises(UserError, match=r"context_len must be >= 1 and <= 1024, got 1025"):
        build_graph(spec, context_len=1025)
    with pytest.raises(UserError, match="needs context_len"):
        build_graph(spec)
    with pytest.raises(UserError, match="phase must be 'decode' or 'prefill'"):
        build_graph(spec, phase="train", context_len=4)
    with pytest.raises(UserError, match="batch must be an integer"):
        build_graph(spec, context_len=4, batch=1.5)
