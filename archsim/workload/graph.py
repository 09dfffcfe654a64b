"""Operator graphs of one decode step or one prefill pass of a decoder-only transformer.

Shape conventions (all counts are elements; byte fields say so):

* gemv / gemm            out[m, n] = in[m, k] . W[k, n];  m = batch x tokens (gemv when m == 1).
* attn_score             per group (batch x n_heads): q[m, k=d_head] . K^T[k, n=keys];  m = query tokens.
* attn_context           per group: p[m, k=keys] . V[k, n=d_head].
* vector ops             `groups` x `m` rows of `n` elements (softmax rows are per head).
* kv_append              m = batch x new tokens, n = 2 x kv_dim (the new K and V rows).

Decode step with `context_len = L`: the new token sits at position L-1 and attends to L keys (the L-1 cached
ones plus its own, appended first). Prefill of `prompt_len = P`: every weight op is a GEMM with m = batch x P,
attention is causal (query i sees keys 0..i), so score/context/softmax count the P(P+1)/2 visible pairs.
Only the last position feeds the final norm and the LM head (that is all next-token prediction needs).

`flops` counts a multiply-add as 2. Vector ops carry a nominal flops-per-element figure (`VECTOR_FLOPS`) for
rooflines; the ASIC model (archsim.host.asic) has the exact add/mul counts of its own algorithms.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from archsim.errors import NotModelled, UserError
from archsim.workload.spec import ModelSpec

if TYPE_CHECKING:
    import pandas as pd

MATMUL_KINDS = ("gemv", "gemm")
ATTENTION_KINDS = ("attn_score", "attn_context")
VECTOR_KINDS = ("layernorm", "rmsnorm", "softmax", "gelu", "silu", "relu", "mul", "residual_add", "rope",
                "embedding", "kv_append")
OP_KINDS = MATMUL_KINDS + ATTENTION_KINDS + VECTOR_KINDS

# Nominal flops per element for vector ops (roofline use only):
#  layernorm: mean add, centre sub, square mul, var add, scale mul, gamma mul, beta add (+ per-row scalars) ~ 7
#  rmsnorm: square, add, scale, gamma ~ 4;  softmax: max, sub, exp, sum, divide ~ 5
#  gelu (tanh form): x^3 (2), fma (2), scale, tanh, add, 2 muls ~ 8;  silu: exp, add, divide, mul ~ 4
#  rope: 2 mul + 1 add per element;  embedding: token + position add (learned positions) ~ 1
VECTOR_FLOPS = {"layernorm": 7, "rmsnorm": 4, "softmax": 5, "gelu": 8, "silu": 4, "relu": 1, "mul": 1,
                "residual_add": 1, "rope": 3, "embedding": 1, "kv_append": 0}


@dataclass(frozen=True)
class Op:
    """One operator of the graph. Byte counts are at the model's storage dtype (`dtype_bytes`)."""

    name: str
    kind: str
    layer: int | None            # block index, None for embedding / final norm / LM head
    m: int
    n: int
    k: int = 1
    groups: int = 1
    flops: int = 0
    weight_bytes: int = 0        # parameters read (incl. bias / gamma / beta, embedding rows gathered)
    act_read_bytes: int = 0      # activations read
    act_write_bytes: int = 0     # activations written
    kv_read_bytes: int = 0       # KV cache read
    kv_write_bytes: int = 0      # KV cache written
    dtype_bytes: int = 2
    has_bias: bool = False
    phase: str = "decode"
    role: str = ""               # what the op is in the model: qkv, attn_out, ffn1, ffn2, lm_head, ln1 ...
    # names of the ops whose outputs this op reads (its data dependencies; the K/V cache counts as the output
    # of this step's kv_append); not part of equality, so ops of different layers compare by shape
    inputs: tuple[str, ...] = field(default=(), compare=False)

    @property
    def bytes_read(self) -> int:
        return self.weight_bytes + self.act_read_bytes + self.kv_read_bytes

    @property
    def bytes_written(self) -> int:
        return self.act_write_bytes + self.kv_write_bytes

    @property
    def bytes_total(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def op_per_byte(self) -> float:
        """Arithmetic intensity (flops per byte moved); what Duplex-style Op/B dispatch looks at."""
        return self.flops / self.bytes_total if self.bytes_total else 0.0

    @property
    def elements(self) -> int:
        """Elements written (outputs of a matmul, visible pairs of a causal softmax, new K/V elements)."""
        return self.bytes_written // self.dtype_bytes

    @property
    def is_matmul(self) -> bool:
        return self.kind in MATMUL_KINDS or self.kind in ATTENTION_KINDS

    def to_dict(self) -> dict:
        row = asdict(self)
        row.pop("inputs")
        row.update(bytes_read=self.bytes_read, bytes_written=self.bytes_written,
                   bytes_total=self.bytes_total, op_per_byte=self.op_per_byte)
        return row


class OpGraph(list):
    """An ordered list of `Op` (execution order) plus the spec and phase it was built for."""

    def __init__(self, ops: list[Op], spec: ModelSpec, phase: str, context_len: int, batch: int):
        super().__init__(ops)
        self.spec = spec
        self.phase = phase
        self.context_len = context_len   # decode: keys attended; prefill: prompt length
        self.batch = batch

    @property
    def flops(self) -> int:
        return sum(op.flops for op in self)

    @property
    def bytes_total(self) -> int:
        return sum(op.bytes_total for op in self)

    def kind_counts(self, layer: int | None = None) -> Counter:
        return Counter(op.kind for op in self if layer is None or op.layer == layer)

    def layer_ops(self, layer: int) -> list[Op]:
        return [op for op in self if op.layer == layer]

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd  # imported when a frame is asked for (the CLI's help reads OP_KINDS only)

        df = pd.DataFrame([op.to_dict() for op in self])
        df["layer"] = df["layer"].astype("Int64")   # keep block indices integer next to the None rows
        return df


def _check_int(name: str, value: object, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"build_graph: {name} must be an integer, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        upper = f" and <= {maximum}" if maximum is not None else ""
        raise UserError(f"build_graph: {name} must be >= {minimum}{upper}, got {value}")
    return value


def build_graph(spec: ModelSpec, phase: str = "decode", context_len: int | None = None,
                prompt_len: int | None = None, batch: int = 1) -> OpGraph:
    """Operator graph of one decode step (`context_len` keys attended) or one prefill (`prompt_len` tokens)."""
    batch = _check_int("batch", batch, 1)
    if spec.n_experts > 1 and (phase != "decode" or batch != 1):
        raise NotModelled(f"{spec.name}: the operator graph of a mixture-of-experts FFN is modelled for one "
                          f"token (decode at batch 1: its experts_per_token experts), not for {phase} at batch "
                          f"{batch}, whose tokens route to experts unevenly (system duplex models that)")
    if phase == "decode":
        if context_len is None:
            raise UserError("build_graph: phase='decode' needs context_len (keys the new token attends to)")
        ctx = _check_int("context_len", context_len, 1, spec.max_context)
        tokens = 1
    elif phase == "prefill":
        if prompt_len is None:
            raise UserError("build_graph: phase='prefill' needs prompt_len")
        ctx = _check_int("prompt_len", prompt_len, 1, spec.max_context)
        tokens = ctx
    else:
        raise UserError(f"build_graph: phase must be 'decode' or 'prefill', got {phase!r}")
    return OpGraph(_Builder(spec, phase, ctx, tokens, batch).ops(), spec, phase, ctx, batch)


class _Builder:
    def __init__(self, spec: ModelSpec, phase: str, ctx: int, tokens: int, batch: int):
        self.s = spec
        self.phase = phase
        self.ctx = ctx            # keys per sequence
        self.tokens = tokens      # query tokens per sequence in this pass
        self.b = batch
        self.B = spec.dtype_bytes
        # Visible (query, key) pairs per head: 1 x ctx for decode, causal triangle for prefill.
        self.pairs = ctx if phase == "decode" else ctx * (ctx + 1) // 2
        self.rows = batch * tokens

    # ---- op factories ---------------------------------------------------------------------------
    def linear(self, name: str, layer: int | None, k: int, n: int, rows: int, role: str,
               bias: bool | None = None, inputs: tuple[str, ...] = ()) -> Op:
        bias = self.s.bias if bias is None else bias
        B = self.B
        flops = 2 * rows * n * k + (rows * n if bias else 0)
        return Op(name=name, kind="gemv" if rows == 1 else "gemm", layer=layer, m=rows, n=n, k=k,
                  flops=flops, weight_bytes=(k * n + (n if bias else 0)) * B, act_read_bytes=rows * k * B,
                  act_write_bytes=rows * n * B, dtype_bytes=B, has_bias=bias, phase=self.phase, role=role,
                  inputs=inputs)

    def vector(self, name: str, layer: int | None, kind: str, n: int, rows: int, role: str, *,
               groups: int = 1, inputs: int = 1, weight_elems: int = 0, elements: int | None = None,
               reads: tuple[str, ...] = (), k: int = 1) -> Op:
        B = self.B
        elems = groups * rows * n if elements is None else elements
        return Op(name=name, kind=kind, layer=layer, m=rows, n=n, k=k, groups=groups,
                  flops=VECTOR_FLOPS[kind] * elems, weight_bytes=weight_elems * B,
                  act_read_bytes=inputs * elems * B, act_write_bytes=elems * B, dtype_bytes=B,
                  phase=self.phase, role=role, inputs=reads)

    def norm(self, name: str, layer: int | None, rows: int, role: str, reads: tuple[str, ...] = ()) -> Op:
        return self.vector(name, layer, self.s.norm, self.s.d_model, rows, role, weight_elems=self.s.norm_params,
                           reads=reads)

    def attention(self, layer: int, q_src: str, kv: str) -> list[Op]:
        """q . K^T, softmax, p . V; q comes from op `q_src`, K and V from the cache op `kv`."""
        s, B, b, p = self.s, self.B, self.b, f"L{layer}."
        groups = b * s.n_heads
        kv_elems = b * s.n_kv_heads * self.ctx * s.d_head     # each cached K (or V) element read once
        score = Op(name=p + "attn_score", kind="attn_score", layer=layer, m=self.tokens, n=self.ctx,
                   k=s.d_head, groups=groups, flops=2 * groups * self.pairs * s.d_head,
                   act_read_bytes=groups * self.tokens * s.d_head * B, act_write_bytes=groups * self.pairs * B,
                   kv_read_bytes=kv_elems * B, dtype_bytes=B, phase=self.phase, role="attn_score",
                   inputs=(q_src, kv))
        softmax = self.vector(p + "softmax", layer, "softmax", self.ctx, self.tokens, "softmax",
                              groups=groups, elements=groups * self.pairs, reads=(score.name,))
        context = Op(name=p + "attn_context", kind="attn_context", layer=layer, m=self.tokens, n=s.d_head,
                     k=self.ctx, groups=groups, flops=2 * groups * self.pairs * s.d_head,
                     act_read_bytes=groups * self.pairs * B, act_write_bytes=groups * self.tokens * s.d_head * B,
                     kv_read_bytes=kv_elems * B, dtype_bytes=B, phase=self.phase, role="attn_context",
                     inputs=(softmax.name, kv))
        return [score, softmax, context]

    def ffn(self, layer: int, rows: int, p: str) -> list[Op]:
        """One FFN (a dense block's, or one expert's) reading `{layer}.ln2`; op names start with `p`."""
        s, d, src = self.s, self.s.d_model, f"L{layer}.ln2"
        if s.gated_ffn:
            return [self.linear(p + "ffn_gate", layer, d, s.d_ff, rows, "ffn_gate", inputs=(src,)),
                    self.linear(p + "ffn_up", layer, d, s.d_ff, rows, "ffn_up", inputs=(src,)),
                    self.vector(p + s.activation, layer, s.activation, s.d_ff, rows, "act", reads=(p + "ffn_gate",)),
                    self.vector(p + "ffn_mul", layer, "mul", s.d_ff, rows, "ffn_mul", inputs=2,
                                reads=(p + s.activation, p + "ffn_up")),
                    self.linear(p + "ffn_down", layer, s.d_ff, d, rows, "ffn2", inputs=(p + "ffn_mul",))]
        return [self.linear(p + "ffn1", layer, d, s.d_ff, rows, "ffn1", inputs=(src,)),
                self.vector(p + s.activation, layer, s.activation, s.d_ff, rows, "act", reads=(p + "ffn1",)),
                self.linear(p + "ffn2", layer, s.d_ff, d, rows, "ffn2", inputs=(p + s.activation,))]

    def moe_ffn(self, layer: int, rows: int) -> list[Op]:
        """A mixture-of-experts FFN for one token: the router GEMV (d_model -> n_experts, no bias), its gating
        (a softmax over the experts' logits, the top experts_per_token kept), each routed expert's FFN (ops
        `L{i}.x{j}.*`, j the routing slot: which expert fills a slot is the token's, the shapes are alike), and
        their outputs scaled by the gates and summed."""
        s, d, p = self.s, self.s.d_model, f"L{layer}."
        k = s.experts_per_token
        ops = [self.linear(p + "router", layer, d, s.n_experts, rows, "router", bias=False, inputs=(p + "ln2",)),
               self.vector(p + "router_gate", layer, "softmax", s.n_experts, rows, "router_gate",
                           reads=(p + "router",))]
        outs = []
        for j in range(k):
            ops += self.ffn(layer, rows, f"{p}x{j}.")
            outs.append(ops[-1].name)
        ops.append(self.vector(p + "moe_scale", layer, "mul", d, rows, "moe_scale", elements=k * rows * d,
                               reads=(p + "router_gate", *outs)))
        ops.append(self.vector(p + "moe_sum", layer, "residual_add", d, rows, "moe_sum", inputs=2,
                               elements=(k - 1) * rows * d, reads=(p + "moe_scale",)))
        return ops

    # ---- the graph ------------------------------------------------------------------------------
    def ops(self) -> list[Op]:
        s, B, rows = self.s, self.B, self.rows
        d = s.d_model
        ops: list[Op] = []
        # Embedding: gather `rows` token rows (+ position rows for a learned table) and add them.
        pos = s.position == "learned"
        ops.append(Op(name="embed", kind="embedding", layer=None, m=rows, n=d,
                      flops=rows * d if pos else 0, weight_bytes=rows * d * B * (2 if pos else 1),
                      act_write_bytes=rows * d * B, dtype_bytes=B, phase=self.phase, role="embedding"))
        x = "embed"                                    # the residual stream entering the next block
        for i in range(s.n_layers):
            p = f"L{i}."
            ops.append(self.norm(p + "ln1", i, rows, "ln1", reads=(x,)))
            ops.append(self.linear(p + "qkv", i, d, s.q_dim + 2 * s.kv_dim, rows, "qkv", inputs=(p + "ln1",)))
            q_src = p + "qkv"
            if s.position == "rope":
                ops.append(self.vector(p + "rope", i, "rope", s.q_dim + s.kv_dim, rows, "rope", reads=(q_src,),
                                       k=s.d_head))         # k: the length of the rotated head vectors
                q_src = p + "rope"
            kv_bytes = rows * 2 * s.kv_dim * B
            ops.append(Op(name=p + "kv_append", kind="kv_append", layer=i, m=rows, n=2 * s.kv_dim,
                          act_read_bytes=kv_bytes, kv_write_bytes=kv_bytes, dtype_bytes=B, phase=self.phase,
                          role="kv_append", inputs=(q_src, p + "qkv") if s.position == "rope" else (p + "qkv",)))
            ops.extend(self.attention(i, q_src, p + "kv_append"))
            ops.append(self.linear(p + "attn_out", i, s.q_dim, d, rows, "attn_out", inputs=(p + "attn_context",)))
            ops.append(self.vector(p + "residual1", i, "residual_add", d, rows, "residual1", inputs=2,
                                   reads=(p + "attn_out", x)))
            ops.append(self.norm(p + "ln2", i, rows, "ln2", reads=(p + "residual1",)))
            if s.is_moe_layer(i):
                moe = self.moe_ffn(i, rows)
                ops.extend(moe)
                last = moe[-1].name
            elif s.gated_ffn:
                ops.append(self.linear(p + "ffn_gate", i, d, s.d_ff, rows, "ffn_gate", inputs=(p + "ln2",)))
                ops.append(self.linear(p + "ffn_up", i, d, s.d_ff, rows, "ffn_up", inputs=(p + "ln2",)))
                ops.append(self.vector(p + s.activation, i, s.activation, s.d_ff, rows, "act",
                                       reads=(p + "ffn_gate",)))
                ops.append(self.vector(p + "ffn_mul", i, "mul", s.d_ff, rows, "ffn_mul", inputs=2,
                                       reads=(p + s.activation, p + "ffn_up")))
                ops.append(self.linear(p + "ffn_down", i, s.d_ff, d, rows, "ffn2", inputs=(p + "ffn_mul",)))
                last = p + "ffn_down"
            else:
                ops.append(self.linear(p + "ffn1", i, d, s.d_ff, rows, "ffn1", inputs=(p + "ln2",)))
                ops.append(self.vector(p + s.activation, i, s.activation, s.d_ff, rows, "act", reads=(p + "ffn1",)))
                ops.append(self.linear(p + "ffn2", i, s.d_ff, d, rows, "ffn2", inputs=(p + s.activation,)))
                last = p + "ffn2"
            ops.append(self.vector(p + "residual2", i, "residual_add", d, rows, "residual2", inputs=2,
                                   reads=(last, p + "residual1")))
            x = p + "residual2"
        # Only each sequence's last position is needed to predict the next token.
        ops.append(self.norm("ln_f", None, self.b, "ln_f", reads=(x,)))
        # The LM head has no bias in GPT-2/3 or LLaMA; tied or not, it streams vocab x d weights.
        ops.append(self.linear("lm_head", None, d, s.vocab, self.b, "lm_head", bias=False, inputs=("ln_f",)))
        return ops
