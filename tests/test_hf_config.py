"""Issue #8.2: HF config.json of the GPT-2, OPT, LLaMA/Mistral, Mixtral and Falcon families.

The fixtures under tests/fixtures/hf/ carry the public field names and values of the released configs
(trimmed to the fields that matter); parameter counts are checked against the published sizes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from archsim.errors import ConfigError, NotModelled
from archsim.workload import build_graph, load_model
from archsim.workload.spec import hf_family

HF = Path(__file__).parent / "fixtures" / "hf"


def _cfg(name: str) -> dict:
    return json.loads((HF / name).read_text())


def _write(tmp_path, cfg: dict, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return path


@pytest.mark.parametrize("fixture, family, published", [
    ("gpt2.json", "gpt2", 124.44e6),
    ("opt-125m.json", "opt", 125e6),
    ("tinyllama-1.1b.json", "llama", 1.1e9),
    ("mistral-7b.json", "llama", 7.24e9),
    ("mixtral-8x7b.json", "mixtral", 46.7e9),
    ("falcon-7b.json", "falcon", 6.92e9),
    ("falcon-40b-refinedweb.json", "falcon", 41.3e9),
])
def test_families_and_published_sizes(fixture, family, published):
    assert hf_family(_cfg(fixture)) == family
    spec = load_model(HF / fixture)
    assert abs(spec.n_params / published - 1) < 0.01, spec.n_params


def test_opt_is_not_taken_for_llama():
    spec = load_model(HF / "opt-125m.json")
    assert (spec.d_model, spec.n_layers, spec.n_heads, spec.d_ff, spec.vocab, spec.max_context) == \
        (768, 12, 12, 3072, 50272, 2048)
    assert (spec.norm, spec.position, spec.activation, spec.bias, spec.gated_ffn, spec.tied_embeddings,
            spec.dtype) == ("layernorm", "learned", "relu", True, False, True, "fp16")
    assert len(build_graph(spec, context_len=8)) > 0


def test_mistral_gqa():
    spec = load_model(HF / "mistral-7b.json")
    assert (spec.n_heads, spec.n_kv_heads, spec.d_head, spec.kv_dim, spec.family) == (32, 8, 128, 1024, "mistral")


def test_mixtral_experts_counted_in_params():
    spec = load_model(HF / "mixtral-8x7b.json")
    assert (spec.n_experts, spec.experts_per_token) == (8, 2)
    dense = load_model(HF / "mistral-7b.json")
    # eight FFNs per layer and a router instead of one FFN; everything else as Mistral-7B
    assert spec.n_params - dense.n_params == 32 * (7 * dense.expert_params + 4096 * 8)
    assert abs(spec.active_params / 12.9e9 - 1) < 0.01       # Mixtral's published active parameters
    # one token's graph runs its experts_per_token experts (issue 37); a batched one is not modelled
    assert sum(op.role == "router" for op in build_graph(spec, context_len=4)) == spec.n_layers
    with pytest.raises(NotModelled, match="mixture-of-experts"):
        build_graph(spec, context_len=4, batch=2)


def test_falcon_kv_heads():
    f7 = load_model(HF / "falcon-7b.json")
    assert (f7.n_kv_heads, f7.d_head, f7.d_ff, f7.max_context, f7.bias, f7.position) == (1, 64, 4 * 4544, 2048,
                                                                                       False, "rope")
    assert f7.q_dim + 2 * f7.kv_dim == 4672                 # Falcon-7B's fused query_key_value width
    f40 = load_model(HF / "falcon-40b-refinedweb.json")
    assert (f40.n_heads, f40.n_kv_heads, f40.n_layers) == (128, 8, 60)
    new = dict(_cfg("falcon-7b.json"), new_decoder_architecture=True, num_kv_heads=71, multi_query=False)
    assert spec_kv(new) == 71
    assert spec_kv(dict(_cfg("falcon-7b.json"), multi_query=False)) == 71
    assert spec_kv(dict(_cfg("falcon-7b.json"), ffn_hidden_size=1000), "d_ff") == 1000


def spec_kv(cfg: dict, field: str = "n_kv_heads"):
    from archsim.workload.spec import spec_from_hf_config

    return getattr(spec_from_hf_config(cfg), field)


@pytest.mark.parametrize("fixture, drop, message", [
    ("mistral-7b.json", "hidden_size", "hidden_size: missing (needed for a llama config)"),
    ("opt-125m.json", "ffn_dim", "ffn_dim: missing (needed for an opt config)"),
    ("mixtral-8x7b.json", "num_local_experts", "num_local_experts: missing (needed for a mixtral config)"),
    ("falcon-7b.json", "num_attention_heads", "num_attention_heads: missing (or n_head) (needed for a falcon config)"),
    ("gpt2.json", "n_positions", None),     # n_ctx stands in
])
def test_missing_field_names_field_and_family(tmp_path, fixture, drop, message):
    cfg = _cfg(fixture)
    del cfg[drop]
    path = _write(tmp_path, cfg)
    if message is None:
        load_model(path)
        return
    with pytest.raises(ConfigError) as exc:
        load_model(path)
    assert str(exc.value) == f"{path}: {message}"


def test_unknown_model_type_lists_supported(tmp_path):
    path = _write(tmp_path, dict(_cfg("mistral-7b.json"), model_type="bert"))
    with pytest.raises(ConfigError, match=r"model_type: 'bert' is not supported; supported: .*falcon.*mistral"):
        load_model(path)


def test_family_from_architectures_without_model_type(tmp_path):
    cfg = _cfg("opt-125m.json")
    del cfg["model_type"]
    assert load_model(_write(tmp_path, cfg)).activation == "relu"


def test_opt_350m_projection_is_not_modelled(tmp_path):
    path = _write(tmp_path, dict(_cfg("opt-125m.json"), hidden_size=1024, num_attention_heads=16, ffn_dim=4096,
                                 num_hidden_layers=24, word_embed_proj_dim=512))
    with pytest.raises(NotModelled, match="word_embed_proj_dim: 512"):
        load_model(path)


def test_bad_value_names_hf_key(tmp_path):
    path = _write(tmp_path, dict(_cfg("mixtral-8x7b.json"), num_experts_per_tok=9))
    with pytest.raises(ConfigError, match="num_experts_per_tok: 9 is more than n_experts = 8"):
        load_model(path)
