"""Transformer model specs: archsim YAML (workloads/models/*.yaml) or a HuggingFace-style config.json.

A shipped name ("gpt2-xl") resolves to workloads/models/<name>.yaml; anything else is treated as a path to
the user's file. Both formats end up as one validated, frozen `ModelSpec`.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from archsim.config import Doc, load_yaml, require_choice, require_int
from archsim.errors import ConfigError, UserError, unknown_name
from archsim.paths import resolve, shipped_dir

# Bytes per element of each storage type.
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "int8": 1}
NORMS = ["layernorm", "rmsnorm"]
ACTIVATIONS = ["gelu", "relu", "silu"]
POSITIONS = ["learned", "rope", "none"]

_REQUIRED = ("d_model", "n_layers", "n_heads", "vocab", "max_context")
_OPTIONAL = ("name", "family", "published_params", "d_head", "d_ff", "n_kv_heads", "dtype", "norm",
             "activation", "gated_ffn", "position", "bias", "tied_embeddings", "source")


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer. Counts are elements; sizes in bytes say so in their name."""

    name: str
    d_model: int
    n_layers: int
    n_heads: int
    d_head: int
    d_ff: int
    vocab: int
    max_context: int
    n_kv_heads: int
    dtype: str = "bf16"
    norm: str = "layernorm"
    activation: str = "gelu"
    gated_ffn: bool = False         # SwiGLU-style FFN: gate and up projections, then an elementwise product
    position: str = "learned"       # learned absolute table (adds parameters) / rope / none
    bias: bool = True               # biases on every projection (GPT-2/3) or none (LLaMA)
    tied_embeddings: bool = True    # LM head shares the token-embedding matrix
    family: str = ""
    published_params: int | None = None
    source: str = ""

    # ---- derived sizes -------------------------------------------------------------------------
    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def q_dim(self) -> int:
        """Width of the query projection (n_heads x d_head); equals d_model for GPT-2/3."""
        return self.n_heads * self.d_head

    @property
    def kv_dim(self) -> int:
        """Width of each of the K and V projections (n_kv_heads x d_head; smaller than q_dim under GQA)."""
        return self.n_kv_heads * self.d_head

    @property
    def norm_params(self) -> int:
        return 2 * self.d_model if self.norm == "layernorm" else self.d_model

    @property
    def layer_params(self) -> int:
        """Weights + biases + norm parameters of one transformer block."""
        d = self.d_model
        attn = d * (self.q_dim + 2 * self.kv_dim) + self.q_dim * d
        ffn_in = d * self.d_ff * (2 if self.gated_ffn else 1)
        ffn = ffn_in + self.d_ff * d
        biases = 0
        if self.bias:
            biases = (self.q_dim + 2 * self.kv_dim) + d + self.d_ff * (2 if self.gated_ffn else 1) + d
        return attn + ffn + biases + 2 * self.norm_params

    @property
    def embedding_params(self) -> int:
        tok = self.vocab * self.d_model
        pos = self.max_context * self.d_model if self.position == "learned" else 0
        return tok + pos

    @property
    def lm_head_params(self) -> int:
        """Extra LM-head parameters (zero when tied to the token embedding)."""
        return 0 if self.tied_embeddings else self.vocab * self.d_model

    @property
    def n_params(self) -> int:
        """All parameters: embeddings (token + learned position), blocks, final norm, untied LM head."""
        return self.embedding_params + self.n_layers * self.layer_params + self.norm_params + self.lm_head_params

    @property
    def n_params_non_embedding(self) -> int:
        return self.n_params - self.embedding_params - self.lm_head_params

    @property
    def weight_bytes(self) -> int:
        return self.n_params * self.dtype_bytes

    @property
    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes one token adds across all layers (K and V)."""
        return 2 * self.n_layers * self.kv_dim * self.dtype_bytes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---- loading ----------------------------------------------------------------------------------------
def models_dir() -> Path:
    return shipped_dir("workloads") / "models"


def list_models() -> list[str]:
    """Names of the shipped model specs."""
    base = models_dir()
    if not base.is_dir():
        return []
    return sorted(p.stem for p in base.iterdir() if p.suffix in (".yaml", ".yml", ".json"))


def _looks_like_path(text: str) -> bool:
    return "/" in text or "\\" in text or text.endswith((".yaml", ".yml", ".json")) or Path(text).exists()


def load_model(name_or_path: str | Path) -> ModelSpec:
    """Load a shipped model by name (see `list_models()`) or a user file: archsim YAML, a HF config.json, or
    a HF model folder holding one."""
    text = str(name_or_path)
    if not _looks_like_path(text):
        if text not in list_models():
            raise unknown_name("model", text, list_models())
        path = resolve("workloads", text)
    else:
        path = Path(text).expanduser()
        if path.is_dir() and (path / "config.json").is_file():   # a HF model folder
            path = path / "config.json"
        if not path.is_file():
            raise UserError(f"{path}: model file not found (shipped models: {', '.join(list_models())})")
    return load_model_file(path)


def load_model_file(path: str | Path) -> ModelSpec:
    path = Path(path)
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
        except OSError as exc:
            raise UserError(f"{path}: cannot read ({exc.strerror})") from None
        if not isinstance(data, dict):
            raise UserError(f"{path}: expected a JSON object at the top level")
        doc = Doc(data=data, source=str(path))
    else:
        doc = load_yaml(path)
    default_name = path.parent.name if path.stem == "config" else path.stem
    if is_hf_config(doc.data):
        return spec_from_hf_config(doc.data, source=doc.source, default_name=default_name)
    return spec_from_mapping(doc, default_name=default_name)


def is_hf_config(data: dict[str, Any]) -> bool:
    """HF configs name the width n_embd (GPT-2 style) or hidden_size (LLaMA style), never d_model."""
    return "d_model" not in data and ("n_embd" in data or "hidden_size" in data)


def _bool(doc: Doc, key: str, default: bool) -> bool:
    value = doc.data.get(key, default)
    if not isinstance(value, bool):
        raise doc.error(key, f"must be true or false, got {value!r}")
    return value


def spec_from_mapping(doc: Doc | dict[str, Any], default_name: str = "model", source: str = "<model>") -> ModelSpec:
    """Validate an archsim model mapping (the workloads/models/*.yaml schema)."""
    if not isinstance(doc, Doc):
        doc = Doc(data=dict(doc), source=source)
    data = doc.data
    unknown = sorted(set(data) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise doc.error(unknown[0], f"unknown key; allowed keys: {', '.join(_REQUIRED + _OPTIONAL)}")
    for key in _REQUIRED:
        if key not in data:
            raise doc.error(key, f"missing (required keys: {', '.join(_REQUIRED)})")
    d_model = require_int(doc, "d_model", data["d_model"], minimum=1)
    n_layers = require_int(doc, "n_layers", data["n_layers"], minimum=1)
    n_heads = require_int(doc, "n_heads", data["n_heads"], minimum=1)
    vocab = require_int(doc, "vocab", data["vocab"], minimum=1)
    max_context = require_int(doc, "max_context", data["max_context"], minimum=1)
    if "d_head" in data:
        d_head = require_int(doc, "d_head", data["d_head"], minimum=1)
    else:
        if d_model % n_heads:
            raise doc.error("n_heads", f"d_model = {d_model} is not divisible by n_heads = {n_heads}; "
                                       f"give d_head explicitly or choose a divisor of d_model")
        d_head = d_model // n_heads
    d_ff = require_int(doc, "d_ff", data.get("d_ff", 4 * d_model), minimum=1)
    n_kv_heads = require_int(doc, "n_kv_heads", data.get("n_kv_heads", n_heads), minimum=1)
    if n_heads % n_kv_heads:
        raise doc.error("n_kv_heads", f"n_heads = {n_heads} must be a multiple of n_kv_heads = {n_kv_heads}")
    published = data.get("published_params")
    if published is not None:
        published = require_int(doc, "published_params", published, minimum=1)
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise doc.error("name", f"must be a non-empty string, got {name!r}")
    return ModelSpec(
        name=name,
        d_model=d_model,
        n_layers=n_layers,
        n_heads=n_heads,
        d_head=d_head,
        d_ff=d_ff,
        vocab=vocab,
        max_context=max_context,
        n_kv_heads=n_kv_heads,
        dtype=require_choice(doc, "dtype", data.get("dtype", "bf16"), list(DTYPE_BYTES)),
        norm=require_choice(doc, "norm", data.get("norm", "layernorm"), NORMS),
        activation=require_choice(doc, "activation", data.get("activation", "gelu"), ACTIVATIONS),
        gated_ffn=_bool(doc, "gated_ffn", False),
        position=require_choice(doc, "position", data.get("position", "learned"), POSITIONS),
        bias=_bool(doc, "bias", True),
        tied_embeddings=_bool(doc, "tied_embeddings", True),
        family=str(data.get("family", "")),
        published_params=published,
        source=str(data.get("source", "")),
    )


# HF activation names -> ours. gelu_new / gelu_pytorch_tanh are the tanh approximation GPT-2 uses.
_HF_ACT = {"gelu": "gelu", "gelu_new": "gelu", "gelu_fast": "gelu", "gelu_pytorch_tanh": "gelu",
           "quick_gelu": "gelu", "relu": "relu", "silu": "silu", "swish": "silu"}
_HF_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def spec_from_hf_config(cfg: dict[str, Any], source: str = "config.json", default_name: str = "model") -> ModelSpec:
    """Translate a HuggingFace config.json (GPT-2 or LLaMA key names) into a ModelSpec.

    GPT-2 style: n_embd, n_layer, n_head, n_positions (or n_ctx), vocab_size, n_inner, activation_function.
    LLaMA style: hidden_size, num_hidden_layers, num_attention_heads, intermediate_size,
    num_key_value_heads, max_position_embeddings, vocab_size, hidden_act (gated FFN, RMSNorm, RoPE, no bias).
    """

    def need(key: str, alternatives: tuple[str, ...] = ()) -> Any:
        for k in (key,) + alternatives:
            if k in cfg and cfg[k] is not None:
                return cfg[k]
        raise ConfigError(key, "missing" + (f" (or {', '.join(alternatives)})" if alternatives else ""),
                          source=source)

    dtype = _HF_DTYPE.get(str(cfg.get("torch_dtype", "bfloat16")), "bf16")
    name = str(cfg.get("_name_or_path") or default_name).rstrip("/").split("/")[-1] or default_name
    if "n_embd" in cfg:
        act_key = "activation_function"
        act = cfg.get(act_key, "gelu_new")
        data: dict[str, Any] = {
            "name": name,
            "family": str(cfg.get("model_type", "gpt2")),
            "d_model": need("n_embd"),
            "n_layers": need("n_layer"),
            "n_heads": need("n_head"),
            "d_ff": cfg.get("n_inner") if cfg.get("n_inner") is not None else None,
            "vocab": need("vocab_size"),
            "max_context": need("n_positions", ("n_ctx",)),
            "norm": "layernorm",
            "position": "learned",
            "bias": True,
            "tied_embeddings": bool(cfg.get("tie_word_embeddings", True)),
            "gated_ffn": False,
        }
        key_of = {"d_model": "n_embd", "n_layers": "n_layer", "n_heads": "n_head", "d_ff": "n_inner",
                  "vocab": "vocab_size", "max_context": "n_positions"}
    else:
        act_key = "hidden_act"
        act = cfg.get(act_key, "silu")
        heads = need("num_attention_heads")
        data = {
            "name": name,
            "family": str(cfg.get("model_type", "llama")),
            "d_model": need("hidden_size"),
            "n_layers": need("num_hidden_layers"),
            "n_heads": heads,
            "n_kv_heads": cfg.get("num_key_value_heads") or heads,
            "d_ff": need("intermediate_size"),
            "vocab": need("vocab_size"),
            "max_context": need("max_position_embeddings"),
            "norm": "rmsnorm" if "rms_norm_eps" in cfg or "layer_norm_eps" not in cfg else "layernorm",
            "position": "rope",
            "bias": bool(cfg.get("attention_bias", False)),
            "tied_embeddings": bool(cfg.get("tie_word_embeddings", False)),
            "gated_ffn": True,
        }
        if cfg.get("head_dim") is not None:
            data["d_head"] = cfg["head_dim"]
        key_of = {"d_model": "hidden_size", "n_layers": "num_hidden_layers", "n_heads": "num_attention_heads",
                  "n_kv_heads": "num_key_value_heads", "d_ff": "intermediate_size", "vocab": "vocab_size",
                  "max_context": "max_position_embeddings", "d_head": "head_dim"}
    if act not in _HF_ACT:
        raise ConfigError(act_key, f"unsupported activation {act!r}; supported: {', '.join(sorted(_HF_ACT))}",
                          source=source)
    data["activation"] = _HF_ACT[act]
    data["dtype"] = dtype
    data["source"] = f"HF config {source}"
    if data.get("d_ff") is None:
        data.pop("d_ff", None)
    try:
        return spec_from_mapping(Doc(data=data, source=source), default_name=name)
    except ConfigError as exc:
        # Report the HF key the user wrote, not our internal name.
        raise ConfigError(key_of.get(exc.key_path, exc.key_path), exc.problem, source=source) from None
