"""Transformer model specs: archsim YAML (workloads/models/*.yaml) or a HuggingFace-style config.json.

A shipped name ("gpt2-xl") resolves to workloads/models/<name>.yaml; anything else is treated as a path to
the user's file. Both formats end up as one validated, frozen `ModelSpec`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from archsim.config import Doc, load_yaml, require_choice, require_int
from archsim.errors import ConfigError, NotModelled, UserError, unknown_name
from archsim.paths import resolve, shipped_dir

# Bytes per element of each storage type.
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "int8": 1}
NORMS = ["layernorm", "rmsnorm"]
ACTIVATIONS = ["gelu", "relu", "silu"]
POSITIONS = ["learned", "rope", "none"]

_REQUIRED = ("d_model", "n_layers", "n_heads", "vocab", "max_context")
_OPTIONAL = ("name", "family", "published_params", "d_head", "d_ff", "n_kv_heads", "dtype", "norm",
             "activation", "gated_ffn", "position", "bias", "tied_embeddings", "source", "n_experts",
             "experts_per_token", "moe_every")


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
    n_experts: int = 1              # mixture of experts: FFN copies per layer (1 = a dense FFN)
    experts_per_token: int = 1      # experts each token is routed to (Mixtral: 2 of 8)
    moe_every: int = 1              # every k-th block has the MoE FFN, the others a dense one (GLaM: 2)
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
    def expert_params(self) -> int:
        """Weights + biases of one FFN (one expert of a mixture-of-experts layer)."""
        d = self.d_model
        ffn = d * self.d_ff * (2 if self.gated_ffn else 1) + self.d_ff * d
        if self.bias:
            ffn += self.d_ff * (2 if self.gated_ffn else 1) + d
        return ffn

    @property
    def router_params(self) -> int:
        """The expert router (a d_model x n_experts gate, no bias); zero for a dense FFN."""
        return self.d_model * self.n_experts if self.n_experts > 1 else 0

    @property
    def attention_params(self) -> int:
        """Q, K, V and output projections of one block (with biases)."""
        d = self.d_model
        attn = d * (self.q_dim + 2 * self.kv_dim) + self.q_dim * d
        if self.bias:
            attn += (self.q_dim + 2 * self.kv_dim) + d
        return attn

    @property
    def layer_params(self) -> int:
        """Weights + biases + norm parameters of one transformer block with the MoE FFN (every expert
        counted; the only kind of block when moe_every = 1)."""
        ffn = self.n_experts * self.expert_params + self.router_params
        return self.attention_params + ffn + 2 * self.norm_params

    @property
    def dense_layer_params(self) -> int:
        """Parameters of a block with a dense FFN (the blocks between MoE blocks when moe_every > 1)."""
        return self.attention_params + self.expert_params + 2 * self.norm_params

    @property
    def n_moe_layers(self) -> int:
        """Blocks with the MoE FFN: every moe_every-th block (blocks moe_every-1, 2 moe_every-1, ...)."""
        return self.n_layers // self.moe_every if self.n_experts > 1 else 0

    def is_moe_layer(self, layer: int) -> bool:
        return self.n_experts > 1 and (layer + 1) % self.moe_every == 0

    @property
    def active_params(self) -> int:
        """Parameters one token uses: like n_params, but only experts_per_token experts per MoE block."""
        moe_layers = self.n_layers if self.moe_every == 1 else self.n_moe_layers
        idle = moe_layers * (self.n_experts - self.experts_per_token) * self.expert_params
        return self.n_params - idle

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
        if self.moe_every == 1:
            blocks = self.n_layers * self.layer_params
        else:
            blocks = self.n_moe_layers * self.layer_params + (self.n_layers - self.n_moe_layers) * self.dense_layer_params
        return self.embedding_params + blocks + self.norm_params + self.lm_head_params

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
        from archsim.config import read_json

        data = read_json(path, "model file")
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
    """HF configs name the width n_embd (GPT-2 style) or hidden_size (the others), never d_model, and
    usually say model_type / architectures."""
    return "d_model" not in data and any(k in data for k in ("n_embd", "hidden_size", "model_type", "architectures"))


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
    n_experts = require_int(doc, "n_experts", data.get("n_experts", 1), minimum=1)
    experts_per_token = require_int(doc, "experts_per_token", data.get("experts_per_token", 1), minimum=1)
    if experts_per_token > n_experts:
        raise doc.error("experts_per_token", f"{experts_per_token} is more than n_experts = {n_experts}")
    moe_every = require_int(doc, "moe_every", data.get("moe_every", 1), minimum=1)
    if moe_every > n_layers:
        raise doc.error("moe_every", f"{moe_every} is more than n_layers = {n_layers}")
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
        n_experts=n_experts,
        experts_per_token=experts_per_token,
        moe_every=moe_every,
        family=str(data.get("family", "")),
        published_params=published,
        source=str(data.get("source", "")),
    )


# ---- HuggingFace config.json -------------------------------------------------------------------------
# HF activation names -> ours. gelu_new / gelu_pytorch_tanh are the tanh approximation GPT-2 uses.
_HF_ACT = {"gelu": "gelu", "gelu_new": "gelu", "gelu_fast": "gelu", "gelu_pytorch_tanh": "gelu",
           "quick_gelu": "gelu", "relu": "relu", "silu": "silu", "swish": "silu"}
_HF_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}

# model_type / architectures[0] -> the family whose field names the config uses.
HF_FAMILIES = ("gpt2", "opt", "llama", "mixtral", "falcon")
_HF_MODEL_TYPES = {"gpt2": "gpt2", "opt": "opt", "llama": "llama", "mistral": "llama", "mixtral": "mixtral",
                   "falcon": "falcon", "RefinedWeb": "falcon", "RefinedWebModel": "falcon"}
_HF_ARCHITECTURES = {"GPT2LMHeadModel": "gpt2", "OPTForCausalLM": "opt", "LlamaForCausalLM": "llama",
                     "MistralForCausalLM": "llama", "MixtralForCausalLM": "mixtral", "FalconForCausalLM": "falcon",
                     "RWForCausalLM": "falcon"}


def hf_family(cfg: dict[str, Any], source: str = "config.json") -> str:
    """Which field-name family a HF config uses (one of HF_FAMILIES), from `model_type`, else
    `architectures`, else (configs without either) n_embd -> gpt2, hidden_size -> llama."""
    model_type = cfg.get("model_type")
    if model_type is not None:
        if model_type not in _HF_MODEL_TYPES:
            raise ConfigError("model_type", f"{model_type!r} is not supported; supported: "
                              f"{', '.join(sorted(_HF_MODEL_TYPES))}", source=source)
        return _HF_MODEL_TYPES[model_type]
    archs = cfg.get("architectures")
    if archs:
        arch = archs[0] if isinstance(archs, list) else archs
        if arch not in _HF_ARCHITECTURES:
            raise ConfigError("architectures", f"{arch!r} is not supported; supported: "
                              f"{', '.join(sorted(_HF_ARCHITECTURES))} (or set model_type)", source=source)
        return _HF_ARCHITECTURES[arch]
    return "gpt2" if "n_embd" in cfg else "llama"


def spec_from_hf_config(cfg: dict[str, Any], source: str = "config.json", default_name: str = "model") -> ModelSpec:
    """Translate a HuggingFace config.json into a ModelSpec. The family (see `hf_family`) decides the
    field names and the architecture:

    * gpt2: n_embd, n_layer, n_head, n_positions (or n_ctx), vocab_size, n_inner (default 4 n_embd),
      activation_function; LayerNorm, learned positions, biases, tied LM head.
    * opt: hidden_size, num_hidden_layers, num_attention_heads, ffn_dim, max_position_embeddings,
      vocab_size, activation_function (relu); like gpt2 otherwise. OPT-350m's word_embed_proj_dim
      (embeddings narrower than the model) is not modelled.
    * llama (also mistral): hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads
      (GQA, default num_attention_heads), intermediate_size, max_position_embeddings, vocab_size,
      hidden_act, head_dim (optional); gated FFN, RMSNorm, RoPE, no biases, untied LM head.
    * mixtral: llama fields plus num_local_experts and num_experts_per_tok (mixture-of-experts FFN).
    * falcon: hidden_size, n_head or num_attention_heads, n_layer or num_hidden_layers, vocab_size,
      ffn_hidden_size (default 4 hidden_size), num_kv_heads (or n_head_kv; 1 with multi_query unless
      new_decoder_architecture), max_position_embeddings (default 2048), bias, alibi; GELU,
      LayerNorm, RoPE (no position encoding with alibi), tied LM head.
    """
    family = hf_family(cfg, source)
    hf = _HfFields(cfg, family, source)
    name = str(cfg.get("_name_or_path") or default_name).rstrip("/").split("/")[-1] or default_name
    data: dict[str, Any] = {"name": name, "family": str(cfg.get("model_type") or family)}
    read = {"gpt2": _gpt2_opt_fields, "opt": _gpt2_opt_fields, "llama": _llama_fields, "mixtral": _llama_fields,
            "falcon": _falcon_fields}[family]
    act_key, act = read(hf, data)
    key_of = hf.key_of
    if act not in _HF_ACT:
        raise ConfigError(act_key, f"unsupported activation {act!r}; supported: {', '.join(sorted(_HF_ACT))}",
                          source=source)
    data["activation"] = _HF_ACT[act]
    data["dtype"] = _HF_DTYPE.get(str(cfg.get("torch_dtype", "bfloat16")), "bf16")
    data["source"] = f"HF config {source} ({family} family)"
    if data.get("d_ff") is None:
        data.pop("d_ff", None)
    try:
        return spec_from_mapping(Doc(data=data, source=source), default_name=name)
    except ConfigError as exc:
        # Report the HF key the user wrote, not our internal name.
        raise ConfigError(key_of.get(exc.key_path, exc.key_path), exc.problem, source=source) from None


class _HfFields:
    """Reads a HuggingFace config's fields for one family, remembering which HF key each of ours came from
    (errors name the key the user wrote)."""

    def __init__(self, cfg: dict[str, Any], family: str, source: str) -> None:
        self.cfg, self.family, self.source = cfg, family, source
        self.key_of: dict[str, str] = {}

    def get(self, *keys: str, default: Any = None) -> Any:
        """The first of `keys` the config sets; else the default; else an error naming the family."""
        for k in keys:
            if self.cfg.get(k) is not None:
                return self.cfg[k]
        if default is None:
            alt = f" (or {', '.join(keys[1:])})" if len(keys) > 1 else ""
            article = "an" if self.family[0] in "aeio" else "a"
            raise ConfigError(keys[0], f"missing{alt} (needed for {article} {self.family} config)", source=self.source)
        return default

    def used(self, *keys: str) -> str:
        """Which of `keys` the config uses (for error messages)."""
        return next((k for k in keys if self.cfg.get(k) is not None), keys[0])

    def take(self, data: dict[str, Any], ours: str, *keys: str, default: Any = None) -> None:
        data[ours] = self.get(*keys, default=default)
        self.key_of[ours] = keys[0]


def _gpt2_opt_fields(hf: _HfFields, data: dict[str, Any]) -> tuple[str, Any]:
    cfg, gpt2 = hf.cfg, hf.family == "gpt2"
    hf.take(data, "d_model", *(("n_embd",) if gpt2 else ("hidden_size",)))
    hf.take(data, "n_layers", *(("n_layer",) if gpt2 else ("num_hidden_layers",)))
    hf.take(data, "n_heads", *(("n_head",) if gpt2 else ("num_attention_heads",)))
    hf.take(data, "vocab", "vocab_size")
    hf.take(data, "max_context", *(("n_positions", "n_ctx") if gpt2 else ("max_position_embeddings",)))
    data["d_ff"] = cfg.get("n_inner") if gpt2 else hf.get("ffn_dim")     # gpt2 None: the default 4 x n_embd
    hf.key_of["d_ff"] = "n_inner" if gpt2 else "ffn_dim"
    proj = cfg.get("word_embed_proj_dim")
    if not gpt2 and proj is not None and proj != data["d_model"]:
        raise NotModelled(f"{hf.source}: word_embed_proj_dim: {proj} differs from hidden_size {data['d_model']} "
                          "(embedding projection, as in OPT-350m) is not modelled yet; supported: "
                          "word_embed_proj_dim equal to hidden_size")
    data.update(norm="layernorm", position="learned", bias=bool(cfg.get("enable_bias", True)), gated_ffn=False,
                tied_embeddings=bool(cfg.get("tie_word_embeddings", True)))
    return "activation_function", cfg.get("activation_function", "gelu_new" if gpt2 else "relu")


def _llama_fields(hf: _HfFields, data: dict[str, Any]) -> tuple[str, Any]:
    cfg = hf.cfg
    for ours, key in (("d_model", "hidden_size"), ("n_layers", "num_hidden_layers"),
                      ("n_heads", "num_attention_heads"), ("d_ff", "intermediate_size"), ("vocab", "vocab_size"),
                      ("max_context", "max_position_embeddings")):
        hf.take(data, ours, key)
    hf.take(data, "n_kv_heads", "num_key_value_heads", default=data["n_heads"])
    if cfg.get("head_dim") is not None:
        data["d_head"] = cfg["head_dim"]
        hf.key_of["d_head"] = "head_dim"
    if hf.family == "mixtral":
        hf.take(data, "n_experts", "num_local_experts")
        hf.take(data, "experts_per_token", "num_experts_per_tok")
    data.update(norm="rmsnorm", position="rope", bias=bool(cfg.get("attention_bias", False)),
                gated_ffn=True, tied_embeddings=bool(cfg.get("tie_word_embeddings", False)))
    return "hidden_act", cfg.get("hidden_act", "silu")


def _falcon_fields(hf: _HfFields, data: dict[str, Any]) -> tuple[str, Any]:
    cfg = hf.cfg
    data["d_model"] = hf.get("hidden_size")
    data["n_heads"] = hf.get("num_attention_heads", "n_head")
    data["n_layers"] = hf.get("num_hidden_layers", "n_layer")
    data["vocab"] = hf.get("vocab_size")
    data["max_context"] = hf.get("max_position_embeddings", default=2048)
    data["d_ff"] = hf.get("ffn_hidden_size", default=4 * int(data["d_model"]))
    # Falcon-40B's first release (model_type RefinedWeb) has the new decoder without naming it.
    if cfg.get("new_decoder_architecture") or cfg.get("model_type") == "RefinedWeb":
        data["n_kv_heads"] = hf.get("num_kv_heads", "n_head_kv")
    elif cfg.get("multi_query", True):      # Falcon's default: one K/V head shared by all heads
        data["n_kv_heads"] = 1
    else:
        data["n_kv_heads"] = data["n_heads"]
    hf.key_of.update(d_model="hidden_size", n_heads=hf.used("num_attention_heads", "n_head"),
                     n_layers=hf.used("num_hidden_layers", "n_layer"), vocab="vocab_size",
                     max_context="max_position_embeddings", d_ff="ffn_hidden_size",
                     n_kv_heads=hf.used("num_kv_heads", "n_head_kv"))
    data.update(norm="layernorm", position="none" if cfg.get("alibi") else "rope",
                bias=bool(cfg.get("bias", False)), gated_ffn=False,
                tied_embeddings=bool(cfg.get("tie_word_embeddings", True)))
    return "activation", cfg.get("activation", "gelu")
