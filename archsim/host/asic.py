"""PIM-GPT's non-linear ASIC: the algorithms it runs, their add/mul counts, latency and energy.

The ASIC has only floating-point adders and multipliers (`lanes` of each) plus integer adds on bit patterns.
Everything else is built from them (PIM-GPT, Wu, Wang & Lu 2024):

* exp(x): clamp, range reduction x = k ln2 + r (k by magic-number rounding, Cody-Waite two-constant ln2),
  a degree-`exp_taylor_degree` Taylor polynomial of e^r in Horner form, and 2^k by an integer add to the
  exponent field.
* 1/d: magic-constant seed (one integer subtract on the bit pattern) + `reciprocal_nr_iterations` Newton
  steps y <- y (2 - d y). A division a/b is a * (1/b).
* 1/sqrt(x): the Quake-III seed 0x5F3759DF - (bits >> 1) + `rsqrt_nr_iterations` Newton steps
  y <- y (1.5 - 0.5 x y^2).
* GELU (tanh form) = x * sigmoid(2u) = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3);
  SiLU = x / (1 + exp(-x)); softmax, LayerNorm and RMSNorm from the above; residual add; partial-sum adds.

Bit shifts and sign flips are wiring and cost nothing. A compare (max/min/clamp) is a subtraction on an adder.

The numpy implementations below run these exact algorithms on float32 through an `OpCounter`, so the tests
can check both that they are accurate (against numpy's exact functions) and that `op_counts()` -- the closed
forms the timing and energy model uses -- counts exactly the operations the algorithms perform.

Latency of an op = ceil(max(adder ops, multiplier ops) / lanes)       (adders and multipliers run in parallel)
                 + rows x (passes + serial scalar ops + reductions x ceil(log2 lanes)) x pipeline depth
(each pass over a vector must drain before the next one uses its reduced result; the scalar reciprocal /
rsqrt chains and the adder-tree tails are on the critical path of every row). Energy = op counts x
per-op energy + buffer (SRAM) traffic; vector I/O to/from the PIM chips over GDDR6 is accounted separately.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from archsim import schema
from archsim.errors import UserError, unknown_name
from archsim.schema import REQUIRED, opt
from archsim.workload.graph import ATTENTION_KINDS, MATMUL_KINDS, Op

if TYPE_CHECKING:
    import pandas as pd

PRESET_DIR = Path(__file__).resolve().parent.parent / "presets" / "asic"

_F32 = np.float32
LOG2E = _F32(1.4426950408889634)
LN2_HI = _F32(0.693359375)            # ln 2 split so that k * LN2_HI is exact for |k| < 2^11 (Cody-Waite)
LN2_LO = _F32(-2.1219444005469057e-4)
ROUND_MAGIC = _F32(12582912.0)        # 1.5 * 2^23: x + M - M rounds x to an integer in float32
ROUND_MAGIC_BITS = np.int32(0x4B400000)
RECIP_MAGIC = np.int32(0x7EF311C3)    # seed for 1/d: max relative error 5.1 % (checked in tests)
RSQRT_MAGIC = np.int32(0x5F3759DF)    # Quake-III seed for 1/sqrt(x): max relative error 3.4 %
EXP_LO = _F32(-87.0)                  # exp clamp: keeps 2^k * p a normal float32 (k >= -126)
EXP_HI = _F32(88.0)                   # e^88 = 1.65e38 < float32 max
SIGMOID_EXP_HI = _F32(80.0)           # 1 + e^80 keeps the reciprocal's seed in the normal range
GELU_C = _F32(-2.0 * math.sqrt(2.0 / math.pi))           # -2 sqrt(2/pi)
GELU_C3 = _F32(-2.0 * math.sqrt(2.0 / math.pi) * 0.044715)


def _taylor_coefficients(degree: int) -> list[np.float32]:
    return [_F32(1.0 / math.factorial(i)) for i in range(degree + 1)]


# ---- functional model ---------------------------------------------------------------------------------
@dataclass
class OpCounter:
    """Executes float32 arithmetic element-wise and counts every hardware operation it stands for."""

    fadd: int = 0     # floating-point add / subtract
    fmul: int = 0     # floating-point multiply
    cmp: int = 0      # compare / max / min / clamp (a subtract on an adder)
    iadd: int = 0     # integer add on a float's bit pattern (exponent tricks)

    def add(self, a: Any, b: Any) -> np.ndarray:
        r = np.add(a, b, dtype=_F32)
        self.fadd += r.size
        return r

    def sub(self, a: Any, b: Any) -> np.ndarray:
        r = np.subtract(a, b, dtype=_F32)
        self.fadd += r.size
        return r

    def mul(self, a: Any, b: Any) -> np.ndarray:
        r = np.multiply(a, b, dtype=_F32)
        self.fmul += r.size
        return r

    def maximum(self, a: Any, b: Any) -> np.ndarray:
        r = np.maximum(a, b).astype(_F32)
        self.cmp += r.size
        return r

    def minimum(self, a: Any, b: Any) -> np.ndarray:
        r = np.minimum(a, b).astype(_F32)
        self.cmp += r.size
        return r

    def int_add(self, a: Any, b: Any) -> np.ndarray:
        r = np.add(a, b, dtype=np.int32)
        self.iadd += r.size
        return r

    def int_sub(self, a: Any, b: Any) -> np.ndarray:
        r = np.subtract(a, b, dtype=np.int32)
        self.iadd += r.size
        return r

    def sum(self, a: np.ndarray) -> np.ndarray:
        """Sum over the last axis (an adder tree: n-1 adds per row)."""
        r = np.sum(a, axis=-1, dtype=_F32, keepdims=True)
        self.fadd += a.size - r.size
        return r

    def max(self, a: np.ndarray) -> np.ndarray:
        r = np.max(a, axis=-1, keepdims=True).astype(_F32)
        self.cmp += a.size - r.size
        return r


def _f32(x: Any) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=_F32)


def exp_taylor(x: Any, degree: int = 6, dp: OpCounter | None = None, hi: np.float32 = EXP_HI) -> np.ndarray:
    """e^x from adds and multiplies: clamp, range reduction, Horner Taylor polynomial, exponent add."""
    dp = dp if dp is not None else OpCounter()
    x = dp.minimum(dp.maximum(_f32(x), EXP_LO), hi)
    big = dp.add(dp.mul(x, LOG2E), ROUND_MAGIC)
    kf = dp.sub(big, ROUND_MAGIC)                       # k = round(x / ln2) as a float
    k = dp.int_sub(big.view(np.int32), ROUND_MAGIC_BITS)  # ... and as an integer (low mantissa bits)
    r = dp.sub(x, dp.mul(kf, LN2_HI))
    r = dp.sub(r, dp.mul(kf, LN2_LO))                   # |r| <= ln2 / 2
    coef = _taylor_coefficients(degree)
    p = np.full(r.shape, coef[degree], dtype=_F32)
    for i in range(degree - 1, -1, -1):
        p = dp.add(dp.mul(p, r), coef[i])
    return dp.int_add(p.view(np.int32), k << 23).view(_F32)   # p * 2^k: add k to the exponent field


def reciprocal_nr(d: Any, iterations: int = 3, dp: OpCounter | None = None) -> np.ndarray:
    """1/d for positive normal d: magic-constant seed + Newton-Raphson y <- y (2 - d y)."""
    dp = dp if dp is not None else OpCounter()
    d = _f32(d)
    y = dp.int_sub(RECIP_MAGIC, d.view(np.int32)).view(_F32)
    for _ in range(iterations):
        y = dp.mul(y, dp.sub(_F32(2.0), dp.mul(d, y)))
    return y


def rsqrt_fast(x: Any, iterations: int = 2, dp: OpCounter | None = None) -> np.ndarray:
    """1/sqrt(x) for positive normal x: Quake-III bit trick + Newton steps y <- y (1.5 - 0.5 x y^2)."""
    dp = dp if dp is not None else OpCounter()
    x = _f32(x)
    y = dp.int_sub(RSQRT_MAGIC, x.view(np.int32) >> 1).view(_F32)   # the shift is wiring
    half_x = dp.mul(x, _F32(0.5))
    for _ in range(iterations):
        y = dp.mul(y, dp.sub(_F32(1.5), dp.mul(half_x, dp.mul(y, y))))
    return y


def gelu_tanh(x: Any, degree: int = 6, recip_iterations: int = 3, dp: OpCounter | None = None) -> np.ndarray:
    """tanh-GELU as x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3)))  (identical to 0.5 x (1 + tanh u))."""
    dp = dp if dp is not None else OpCounter()
    x = _f32(x)
    v = dp.mul(dp.add(dp.mul(dp.mul(x, x), GELU_C3), GELU_C), x)     # -2u
    den = dp.add(exp_taylor(v, degree, dp, hi=SIGMOID_EXP_HI), _F32(1.0))
    return dp.mul(x, reciprocal_nr(den, recip_iterations, dp))


def silu(x: Any, degree: int = 6, recip_iterations: int = 3, dp: OpCounter | None = None) -> np.ndarray:
    """x * sigmoid(x) = x / (1 + exp(-x)); the negation is a sign-bit flip."""
    dp = dp if dp is not None else OpCounter()
    x = _f32(x)
    den = dp.add(exp_taylor(np.negative(x), degree, dp, hi=SIGMOID_EXP_HI), _F32(1.0))
    return dp.mul(x, reciprocal_nr(den, recip_iterations, dp))


def softmax(x: Any, scale: float | None = None, degree: int = 6, recip_iterations: int = 3,
            dp: OpCounter | None = None) -> np.ndarray:
    """Row softmax over the last axis; `scale` (1/sqrt(d_head) for attention) is applied first."""
    dp = dp if dp is not None else OpCounter()
    s = _f32(x)
    if scale is not None:
        s = dp.mul(s, _F32(scale))
    e = exp_taylor(dp.sub(s, dp.max(s)), degree, dp)
    return dp.mul(e, reciprocal_nr(dp.sum(e), recip_iterations, dp))


def layernorm(x: Any, gamma: Any, beta: Any, eps: float = 1e-5, rsqrt_iterations: int = 2,
              dp: OpCounter | None = None) -> np.ndarray:
    """LayerNorm over the last axis; 1/n is a constant, 1/sqrt(var + eps) the fast inverse square root."""
    dp = dp if dp is not None else OpCounter()
    x = _f32(x)
    inv_n = _F32(1.0 / x.shape[-1])
    c = dp.sub(x, dp.mul(dp.sum(x), inv_n))
    var = dp.mul(dp.sum(dp.mul(c, c)), inv_n)
    rs = rsqrt_fast(dp.add(var, _F32(eps)), rsqrt_iterations, dp)
    return dp.add(dp.mul(dp.mul(c, rs), _f32(gamma)), _f32(beta))


def rmsnorm(x: Any, gamma: Any, eps: float = 1e-6, rsqrt_iterations: int = 2,
            dp: OpCounter | None = None) -> np.ndarray:
    dp = dp if dp is not None else OpCounter()
    x = _f32(x)
    ms = dp.mul(dp.sum(dp.mul(x, x)), _F32(1.0 / x.shape[-1]))
    rs = rsqrt_fast(dp.add(ms, _F32(eps)), rsqrt_iterations, dp)
    return dp.mul(dp.mul(x, rs), _f32(gamma))


def rope_angles_step(cos: Any, sin: Any, step_cos: Any, step_sin: Any, dp: OpCounter | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """RoPE angles of the next position from this one's: (cos, sin) of t theta_i rotated by the constant
    (cos theta_i, sin theta_i) -- angle addition, 4 multiplies and 2 adds per frequency, no trigonometry on the
    add/multiply datapath. Decode advances one position per step, so one update per token suffices."""
    dp = dp if dp is not None else OpCounter()
    c, s_ = _f32(cos), _f32(sin)
    return (dp.sub(dp.mul(c, step_cos), dp.mul(s_, step_sin)), dp.add(dp.mul(s_, step_cos), dp.mul(c, step_sin)))


def rope(x: Any, cos: Any, sin: Any, dp: OpCounter | None = None) -> np.ndarray:
    """Rotary position embedding of head vectors x (..., d_head) with the angles' cos / sin (d_head / 2): element
    i pairs with i + d_head / 2 (the LLaMA "rotate half" convention); 2 multiplies + 1 add per element."""
    dp = dp if dp is not None else OpCounter()
    x = _f32(x)
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    c, s_ = _f32(cos), _f32(sin)
    return np.concatenate([dp.sub(dp.mul(x1, c), dp.mul(x2, s_)), dp.add(dp.mul(x2, c), dp.mul(x1, s_))], axis=-1)


def partial_sum(parts: Any, dp: OpCounter | None = None) -> np.ndarray:
    """Add the partial GEMV results of row-chunks: parts has shape (n_parts, n)."""
    dp = dp if dp is not None else OpCounter()
    parts = _f32(parts)
    acc = parts[0]
    for p in parts[1:]:
        acc = dp.add(acc, p)
    return acc


# ---- closed-form op counts -----------------------------------------------------------------------------
@dataclass(frozen=True)
class OpCounts:
    """Hardware operations of one ASIC op, plus what its critical path and buffer traffic look like."""

    fadd: int = 0
    fmul: int = 0
    cmp: int = 0
    iadd: int = 0
    rows: int = 1               # independent vectors processed one after another
    passes: int = 0             # sweeps over each row that must drain before the next starts
    reductions: int = 0         # adder-tree reductions per row (max / sum)
    serial_ops: int = 0         # dependent scalar ops per row (reciprocal / rsqrt chains, 1/n scaling)
    sram_read_elems: int = 0
    sram_write_elems: int = 0

    @property
    def adder_ops(self) -> int:
        return self.fadd + self.cmp + self.iadd

    @property
    def total_ops(self) -> int:
        return self.adder_ops + self.fmul


@dataclass(frozen=True)
class _Prim:
    fadd: int
    fmul: int
    cmp: int
    iadd: int

    @property
    def total(self) -> int:
        return self.fadd + self.fmul + self.cmp + self.iadd


def _exp(degree: int) -> _Prim:
    # clamp (2 cmp); x*log2e (mul); +M, -M (2 add); k (iadd); Cody-Waite (2 mul, 2 sub); Horner (N mul, N add);
    # exponent insert (iadd)
    return _Prim(fadd=4 + degree, fmul=3 + degree, cmp=2, iadd=2)


def _recip(iterations: int) -> _Prim:
    return _Prim(fadd=iterations, fmul=2 * iterations, cmp=0, iadd=1)


def _rsqrt(iterations: int) -> _Prim:
    return _Prim(fadd=iterations, fmul=1 + 3 * iterations, cmp=0, iadd=1)


ASIC_KINDS = ("softmax", "layernorm", "rmsnorm", "gelu", "silu", "relu", "mul", "residual_add", "rope",
              "embedding", "reduce", "exp", "reciprocal", "rsqrt")


def _counts(kind: str, elems: int, rows: int, *, parts: int = 1, degree: int = 6, recip_iterations: int = 3,
            rsqrt_iterations: int = 2, scaled: bool = True, freqs: int = 0) -> OpCounts:
    """Counts for `elems` elements spread over `rows` rows (rows of different length are fine); `freqs`: the
    RoPE angles (d_head / 2) a rope op advances by one position first."""
    E, R = elems, rows
    if E == 0:
        return OpCounts(rows=R)
    ex, rc, rq = _exp(degree), _recip(recip_iterations), _rsqrt(rsqrt_iterations)

    def sigmoid_like(extra_fadd: int, extra_fmul: int) -> OpCounts:
        # x * 1/(1 + exp(v)): v costs extra_*; then exp, +1, reciprocal, final multiply
        return OpCounts(fadd=E * (extra_fadd + ex.fadd + 1 + rc.fadd), fmul=E * (extra_fmul + ex.fmul + rc.fmul + 1),
                        cmp=E * ex.cmp, iadd=E * (ex.iadd + rc.iadd), rows=1, passes=1,
                        sram_read_elems=E, sram_write_elems=E)

    if kind == "softmax":
        return OpCounts(fadd=E + E * ex.fadd + (E - R) + R * rc.fadd,
                        fmul=(E if scaled else 0) + E * ex.fmul + R * rc.fmul + E,
                        cmp=(E - R) + E * ex.cmp, iadd=E * ex.iadd + R * rc.iadd,
                        rows=R, passes=3, reductions=2, serial_ops=rc.total,
                        sram_read_elems=3 * E, sram_write_elems=2 * E)
    if kind == "layernorm":
        return OpCounts(fadd=(E - R) + E + (E - R) + R + R * rq.fadd + E,
                        fmul=R + E + R + R * rq.fmul + 2 * E,
                        iadd=R * rq.iadd, rows=R, passes=3, reductions=2, serial_ops=3 + rq.total,
                        sram_read_elems=5 * E, sram_write_elems=2 * E)
    if kind == "rmsnorm":
        return OpCounts(fadd=(E - R) + R + R * rq.fadd, fmul=E + R + R * rq.fmul + 2 * E,
                        iadd=R * rq.iadd, rows=R, passes=2, reductions=1, serial_ops=2 + rq.total,
                        sram_read_elems=3 * E, sram_write_elems=E)
    if kind == "gelu":
        return sigmoid_like(extra_fadd=1, extra_fmul=3)
    if kind == "silu":
        return sigmoid_like(extra_fadd=0, extra_fmul=0)
    if kind == "relu":
        return OpCounts(cmp=E, passes=1, sram_read_elems=E, sram_write_elems=E)
    if kind == "mul":
        return OpCounts(fmul=E, passes=1, sram_read_elems=2 * E, sram_write_elems=E)
    if kind in ("residual_add", "embedding"):
        return OpCounts(fadd=E, passes=1, sram_read_elems=2 * E, sram_write_elems=E)
    if kind == "rope":   # angles advanced one position (rope_angles_step), then x*cos -/+ rotate(x)*sin (rope)
        return OpCounts(fadd=E + 2 * freqs, fmul=2 * E + 4 * freqs, passes=1 + (freqs > 0),
                        sram_read_elems=3 * E + 4 * freqs, sram_write_elems=E + 2 * freqs)
    if kind == "reduce":
        if parts < 1:
            raise UserError(f"op_counts('reduce'): parts must be >= 1, got {parts}")
        if parts == 1:
            return OpCounts(rows=1)
        return OpCounts(fadd=(parts - 1) * E, passes=1, sram_read_elems=parts * E, sram_write_elems=E)
    prim = {"exp": ex, "reciprocal": rc, "rsqrt": rq}.get(kind)
    if prim is not None:
        return OpCounts(fadd=E * prim.fadd, fmul=E * prim.fmul, cmp=E * prim.cmp, iadd=E * prim.iadd, passes=1,
                        sram_read_elems=E, sram_write_elems=E)
    raise unknown_name("ASIC op kind", kind, ASIC_KINDS)


def op_counts(kind: str, n: int, rows: int = 1, *, parts: int = 1, degree: int = 6, recip_iterations: int = 3,
              rsqrt_iterations: int = 2, scaled: bool = True, freqs: int = 0) -> OpCounts:
    """Operations the ASIC performs for `rows` vectors of length `n` of op `kind`.

    kind: softmax (scaled by 1/sqrt(d_head) unless scaled=False), layernorm, rmsnorm, gelu, silu, relu, mul,
    residual_add, rope (after advancing `freqs` angles one position), embedding (position add), reduce (`parts`
    partial vectors of length n),
    exp / reciprocal / rsqrt (per element).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0 or isinstance(rows, bool) or not isinstance(rows, int) \
            or rows < 1:
        raise UserError(f"op_counts: n must be an integer >= 0 and rows >= 1, got n={n!r}, rows={rows!r}")
    return _counts(kind, n * rows, rows, parts=parts, degree=degree, recip_iterations=recip_iterations,
                   rsqrt_iterations=rsqrt_iterations, scaled=scaled, freqs=freqs)


# ---- configuration -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AsicAlgorithms:
    """How the ASIC computes the non-linear functions (module doc)."""

    exp_taylor_degree: int = opt(REQUIRED, "degree of the Taylor polynomial of e^r after range reduction",
                                 minimum=1)
    reciprocal_nr_iterations: int = opt(REQUIRED, "Newton steps of 1/d after the magic-constant seed", minimum=1)
    rsqrt_nr_iterations: int = opt(REQUIRED, "Newton steps of 1/sqrt(x) after the Quake-III seed", minimum=1)


@dataclass(frozen=True)
class ReferenceEnergies:
    """Energies of one operation at the reference node, pJ."""

    fp32_add_pj: float = opt(REQUIRED, "fp32 add", minimum=0)
    fp32_mul_pj: float = opt(REQUIRED, "fp32 multiply", minimum=0)
    fp16_add_pj: float = opt(REQUIRED, "fp16 add", minimum=0)
    fp16_mul_pj: float = opt(REQUIRED, "fp16 multiply", minimum=0)
    int32_add_pj: float = opt(REQUIRED, "int32 add (the exponent-field adds of the bit tricks)", minimum=0)
    sram_read_64bit_pj: float = opt(REQUIRED, "one 64-bit access of the vector buffer (SRAM)", minimum=0)


@dataclass(frozen=True)
class AsicEnergy:
    """Energies at a reference node, scaled to the ASIC's (switched capacitance ~ feature size, E ~ C V^2)."""

    reference_node_nm: float = opt(REQUIRED, "node of the reference energies, nm", minimum=1)
    reference_supply_v: float = opt(REQUIRED, "supply of the reference energies, V", minimum=0.1)
    target_node_nm: float = opt(REQUIRED, "the ASIC's node, nm", minimum=1)
    target_supply_v: float = opt(REQUIRED, "the ASIC's supply, V", minimum=0.1)
    at_reference_node: ReferenceEnergies = opt(ReferenceEnergies, "energies at the reference node")


@dataclass(frozen=True)
class AsicIo:
    """The GDDR6 I/O between the ASIC and the PIM memory."""

    channels: int = opt(REQUIRED, "channels", minimum=1)
    channel_bandwidth_bytes_per_s: float = opt(REQUIRED, "bandwidth of one channel, bytes/s", minimum=1)
    dq_pj_per_bit: float = opt(REQUIRED, "I/O energy per bit, pJ", minimum=0)


@dataclass(frozen=True)
class AsicConfig:
    """The ASIC beside PIM-GPT's memory (archsim/presets/asic/<name>.yaml): timing, algorithms, energies, I/O."""

    clock_hz: float = opt(REQUIRED, "clock, Hz", minimum=1)
    lanes: int = opt(REQUIRED, "fp32 add and multiply lanes", minimum=1)
    pipeline_depth_cycles: int = opt(REQUIRED, "latency of one pipelined add or multiply, cycles", minimum=1)
    datapath: str = opt("fp32", "precision inside the datapath", choices=("fp32", "fp16"))
    algorithms: AsicAlgorithms = opt(AsicAlgorithms, "how non-linear functions are computed")
    energy: AsicEnergy = opt(AsicEnergy, "operation energies")
    io: AsicIo = opt(AsicIo, "the I/O to the PIM memory")
    pim_row_bytes: int = opt(REQUIRED, "PIM row the ASIC adds partial sums over, bytes", minimum=1)
    name: str = opt("", "the preset's name (default: its file's)")
    source: str = opt("", "where its numbers come from")

    def __post_init__(self) -> None:
        schema.validate(self)

    @classmethod
    def load(cls, name_or_path: str | Path = "pimgpt_asic", preset_overrides: dict[str, Any] | None = None,
             blame: str = "--set", **overrides: Any) -> AsicConfig:
        """Read a preset (see archsim/presets/asic/) or a user YAML; `preset_overrides` (by key path, an error
        names `blame`) and keyword overrides (key paths with `.` as `__`: algorithms__exp_taylor_degree) win."""
        over = {**(preset_overrides or {}), **{key.replace("__", "."): value for key, value in overrides.items()}}
        config, path = schema.load_preset(cls, "ASIC", PRESET_DIR, name_or_path, over, blame=blame)
        return replace(config, name=config.name or path.stem, source=config.source or str(path))


def load_asic(name_or_path: str | Path) -> AsicConfig:
    """An ASIC preset (`AsicConfig.load`): what a config's `asic_overrides` override (archsim.keypaths)."""
    return AsicConfig.load(name_or_path)


@dataclass(frozen=True)
class EnergyTable:
    """Per-operation energies at the ASIC's node and the GDDR6 I/O figures of an ASIC preset."""

    fadd_pj: float
    fmul_pj: float
    iadd_pj: float
    sram_pj_per_byte: float
    node_scale: float
    channels: int
    channel_bandwidth_bytes_per_s: float
    dq_pj_per_bit: float
    pim_row_bytes: int
    source: str

    @classmethod
    def of(cls, config: AsicConfig) -> EnergyTable:
        e, ref, io = config.energy, config.energy.at_reference_node, config.io
        # Classical scaling: switched capacitance ~ feature size, energy ~ C V^2.
        scale = (e.target_node_nm / e.reference_node_nm) * (e.target_supply_v / e.reference_supply_v) ** 2
        fp32 = config.datapath == "fp32"
        return cls(
            fadd_pj=float(ref.fp32_add_pj if fp32 else ref.fp16_add_pj) * scale,
            fmul_pj=float(ref.fp32_mul_pj if fp32 else ref.fp16_mul_pj) * scale,
            iadd_pj=float(ref.int32_add_pj) * scale,
            sram_pj_per_byte=float(ref.sram_read_64bit_pj) / 8.0 * scale,
            node_scale=scale,
            channels=io.channels,
            channel_bandwidth_bytes_per_s=float(io.channel_bandwidth_bytes_per_s),
            dq_pj_per_bit=float(io.dq_pj_per_bit),
            pim_row_bytes=config.pim_row_bytes,
            source=config.source,
        )


PIM_KINDS = MATMUL_KINDS + ATTENTION_KINDS     # PIM-GPT runs every VMM in the DRAM banks


class AsicModel:
    """Latency and energy of graph ops on the ASIC, plus ASIC<->PIM vector transfers (PIM-GPT split)."""

    def __init__(self, config: AsicConfig | None = None):
        self.config = config if config is not None else AsicConfig.load()
        self.energy = EnergyTable.of(self.config)
        self._elem_bytes = 4 if self.config.datapath == "fp32" else 2

    # -- counts ----------------------------------------------------------------------------------------
    def partials(self, op: Op) -> int:
        """Row-chunks a PIM VMM is split into (the ASIC adds their partial results)."""
        if op.kind not in PIM_KINDS:
            return 1
        row_elems = max(1, self.energy.pim_row_bytes // op.dtype_bytes)
        return max(1, math.ceil(op.k / row_elems))

    def op_counts(self, op: Op) -> OpCounts:
        a = self.config.algorithms
        kw = dict(degree=a.exp_taylor_degree, recip_iterations=a.reciprocal_nr_iterations,
                  rsqrt_iterations=a.rsqrt_nr_iterations)
        if op.kind in PIM_KINDS:
            return _counts("reduce", op.elements, 1, parts=self.partials(op), **kw)
        if op.kind == "kv_append":
            return OpCounts()                                      # data movement only
        if op.kind == "embedding":
            return _counts("embedding", op.flops, 1, **kw)          # position add (0 without a learned table)
        if op.kind in ("softmax", "layernorm", "rmsnorm"):
            return _counts(op.kind, op.elements, op.groups * op.m, **kw)
        if op.kind == "rope":                                      # op.k: the rotated vectors' length (d_head)
            return _counts("rope", op.elements, 1, freqs=op.k // 2, **kw)
        return _counts(op.kind, op.elements, 1, **kw)

    # -- latency ---------------------------------------------------------------------------------------
    def cycles_for(self, counts: OpCounts) -> int:
        c = self.config
        if counts.total_ops == 0:
            return 0
        throughput = math.ceil(max(counts.adder_ops, counts.fmul) / c.lanes)
        tree = math.ceil(math.log2(c.lanes)) if c.lanes > 1 else 0
        per_row = counts.passes + counts.serial_ops + counts.reductions * tree
        # Independent rows (heads, tokens) issue back to back into the pipelined datapath, so one row's
        # dependency chain is exposed, not one per row: Graham's list-scheduling bound, throughput + chain.
        return throughput + per_row * c.pipeline_depth_cycles

    def latency_parts(self, op: Op) -> tuple[int, int]:
        """(issue, drain) ASIC clock cycles of `op`, summing to `latency_cycles(op)`: the datapath takes new
        work after `issue` cycles (throughput), the result is ready `drain` cycles later (one row's dependency
        chain through the pipeline). Work queued behind the op overlaps its drain."""
        counts = self.op_counts(op)
        total = self.cycles_for(counts)
        if total == 0:
            return 0, 0
        issue = math.ceil(max(counts.adder_ops, counts.fmul) / self.config.lanes)
        return issue, total - issue

    def latency_cycles(self, op: Op, include_io: bool = False) -> int:
        """ASIC clock cycles of `op` (its own datapath only, unless include_io adds the GDDR6 transfers)."""
        cycles = self.cycles_for(self.op_counts(op))
        if include_io:
            cycles += math.ceil(self.io(op)["io_s"] * self.config.clock_hz)
        return cycles

    def latency_s(self, op: Op, include_io: bool = False) -> float:
        return self.latency_cycles(op, include_io) / self.config.clock_hz

    # -- energy ----------------------------------------------------------------------------------------
    def compute_energy_pj(self, counts: OpCounts) -> float:
        e = self.energy
        return (counts.fadd + counts.cmp) * e.fadd_pj + counts.fmul * e.fmul_pj + counts.iadd * e.iadd_pj

    def sram_energy_pj(self, counts: OpCounts) -> float:
        return (counts.sram_read_elems + counts.sram_write_elems) * self._elem_bytes * self.energy.sram_pj_per_byte

    def energy_pj(self, op: Op, include_io: bool = False) -> float:
        """ASIC energy of `op`: arithmetic + vector-buffer traffic (+ GDDR6 I/O if include_io)."""
        counts = self.op_counts(op)
        total = self.compute_energy_pj(counts) + self.sram_energy_pj(counts)
        if include_io:
            total += self.io(op)["io_energy_pj"]
        return total

    # -- I/O -------------------------------------------------------------------------------------------
    def transfer(self, bytes_per_channel: float, channels: int = 1) -> tuple[float, float]:
        """(seconds, pJ) to move `bytes_per_channel` over each of `channels` GDDR6 channels in parallel."""
        e = self.energy
        if channels < 1 or channels > e.channels:
            raise UserError(f"transfer: channels must be 1..{e.channels}, got {channels}")
        seconds = bytes_per_channel / e.channel_bandwidth_bytes_per_s
        return seconds, bytes_per_channel * channels * 8 * e.dq_pj_per_bit

    def io(self, op: Op) -> dict[str, float]:
        """Vector traffic between the ASIC and the PIM chips that `op` needs under PIM-GPT's split.

        Weight VMMs: the input vector is broadcast to every channel's global buffer; partial results come
        back spread over the channels. Attention VMMs: each head's q / probabilities go only to the channel
        that holds that head's K/V, so inputs are split, not broadcast. kv_append: the new K/V rows are
        written into PIM. Embedding: the gathered table rows are read from PIM. ASIC-only ops move nothing.
        """
        ch = self.energy.channels
        to_pc = from_pc = 0.0          # bytes per channel (channels transfer in parallel)
        to_total = from_total = 0.0    # bytes on all wires
        if op.kind in MATMUL_KINDS:
            to_pc, to_total = op.act_read_bytes, op.act_read_bytes * ch
            from_total = op.act_write_bytes * self.partials(op)
            from_pc = from_total / ch
        elif op.kind in ATTENTION_KINDS:
            to_total = op.act_read_bytes
            to_pc = to_total / ch
            from_total = op.act_write_bytes * self.partials(op)
            from_pc = from_total / ch
        elif op.kind == "kv_append":
            to_total = op.kv_write_bytes
            to_pc = to_total / ch
        elif op.kind == "embedding":
            from_total = op.weight_bytes
            rows_gathered = op.m * (2 if op.flops else 1)
            from_pc = from_total / min(ch, rows_gathered)
        bw = self.energy.channel_bandwidth_bytes_per_s
        io_s = (to_pc + from_pc) / bw          # input must arrive before the VMM, output leaves after it
        io_pj = (to_total + from_total) * 8 * self.energy.dq_pj_per_bit
        return {"io_to_pim_bytes": float(to_total), "io_from_pim_bytes": float(from_total), "io_s": io_s,
                "io_energy_pj": io_pj}

    # -- reports ---------------------------------------------------------------------------------------
    def breakdown(self, op: Op) -> dict[str, Any]:
        """Everything the ASIC model knows about one op, as a flat dict (one row of a tidy table)."""
        counts = self.op_counts(op)
        cycles = self.cycles_for(counts)
        io = self.io(op)
        compute_pj, sram_pj = self.compute_energy_pj(counts), self.sram_energy_pj(counts)
        asic_s = cycles / self.config.clock_hz
        return {
            "name": op.name, "kind": op.kind, "layer": op.layer,
            "unit": "pim" if op.kind in PIM_KINDS else ("io" if op.kind == "kv_append" else "asic"),
            "partials": self.partials(op),
            "fadd": counts.fadd, "fmul": counts.fmul, "cmp": counts.cmp, "iadd": counts.iadd,
            "asic_cycles": cycles, "asic_s": asic_s, **io,
            "asic_compute_energy_pj": compute_pj, "asic_sram_energy_pj": sram_pj,
            "energy_pj": compute_pj + sram_pj + io["io_energy_pj"],
            "total_s": asic_s + io["io_s"],
        }

    def graph_breakdown(self, graph: list[Op]) -> pd.DataFrame:
        """One row per op: ASIC work and ASIC<->PIM traffic (PIM compute time itself is not modelled here)."""

        import pandas as pd

        df = pd.DataFrame([self.breakdown(op) for op in graph])
        df["layer"] = df["layer"].astype("Int64")
        return df

    def with_config(self, **overrides: Any) -> AsicModel:
        return AsicModel(replace(self.config, **overrides))
