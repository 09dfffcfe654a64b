"""PIM-GPT ASIC model (functional algorithms, op counts, latency/energy) and GPU/CPU baselines."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from archsim.errors import ConfigError, UserError
from archsim.host import (
    AsicConfig,
    AsicModel,
    Baseline,
    OpCounter,
    exp_taylor,
    gelu_tanh,
    layernorm,
    op_counts,
    partial_sum,
    reciprocal_nr,
    rmsnorm,
    rsqrt_fast,
    silu,
    softmax,
)
from archsim.host.baselines import PRESET_DIR
from archsim.workload import build_graph, load_model

RNG = np.random.default_rng(1234)
F64 = np.float64


def rel_err(got, ref):
    return float(np.max(np.abs(np.asarray(got, F64) / ref - 1)))


# ---- functional algorithms vs numpy ------------------------------------------------------------------
def test_exp_taylor_accuracy():
    x = np.linspace(-80, 80, 200_001, dtype=np.float32)
    ref = np.exp(x.astype(F64))
    # Degree 6 after range reduction: truncation <= 1.2e-7, so within a few float32 ulps.
    assert rel_err(exp_taylor(x, degree=6), ref) < 1e-6
    # The degree matters: each term buys accuracy; degree 3 is only BF16-grade.
    errs = [rel_err(exp_taylor(x, degree=n), ref) for n in (2, 3, 4, 5)]
    assert errs == sorted(errs, reverse=True)
    assert 1e-4 < errs[1] < 2e-3
    # Clamping keeps extreme inputs finite.
    assert np.all(np.isfinite(exp_taylor(np.array([-1e4, 1e4], np.float32))))


def test_reciprocal_newton_raphson_accuracy_and_convergence():
    d = RNG.uniform(1e-3, 1e4, 100_000).astype(np.float32)
    ref = 1.0 / d.astype(F64)
    seed = rel_err(reciprocal_nr(d, iterations=0), ref)
    assert 0.04 < seed <= 0.0506                      # magic-constant seed: <= 5.1 %
    one, two = rel_err(reciprocal_nr(d, 1), ref), rel_err(reciprocal_nr(d, 2), ref)
    assert one <= seed**2 * 1.01 and two <= one**2 * 1.01 + 1e-7   # quadratic convergence
    assert rel_err(reciprocal_nr(d, 3), ref) < 1e-6
    # a / b as a * (1/b)
    a = RNG.uniform(-5, 5, 1000).astype(np.float32)
    b = RNG.uniform(0.5, 50, 1000).astype(np.float32)
    np.testing.assert_allclose(a * reciprocal_nr(b), a.astype(F64) / b, rtol=1e-6)


def test_fast_inverse_sqrt_accuracy():
    x = RNG.uniform(1e-4, 1e4, 100_000).astype(np.float32)
    ref = 1.0 / np.sqrt(x.astype(F64))
    assert 0.03 < rel_err(rsqrt_fast(x, iterations=0), ref) < 0.035    # Quake-III seed: 3.4 %
    assert rel_err(rsqrt_fast(x, iterations=1), ref) < 2e-3
    assert rel_err(rsqrt_fast(x, iterations=2), ref) < 5e-6


def test_gelu_and_silu_accuracy():
    x = np.linspace(-12, 12, 100_001, dtype=np.float32)
    xd = x.astype(F64)
    ref = 0.5 * xd * (1 + np.tanh(np.sqrt(2 / np.pi) * (xd + 0.044715 * xd**3)))
    np.testing.assert_allclose(gelu_tanh(x), ref, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(silu(x), xd / (1 + np.exp(-xd)), rtol=2e-6, atol=3e-6)


def test_softmax_layernorm_rmsnorm_partial_sums_accuracy():
    x = RNG.normal(0, 4, (6, 333)).astype(np.float32)
    xd = x.astype(F64) * 0.125
    ref = np.exp(xd - xd.max(-1, keepdims=True))
    ref /= ref.sum(-1, keepdims=True)
    got = softmax(x, scale=0.125)
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-9)
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=2e-6)

    gamma, beta = RNG.normal(size=333).astype(np.float32), RNG.normal(size=333).astype(np.float32)
    xd = x.astype(F64)
    norm = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(layernorm(x, gamma, beta), norm * gamma + beta, rtol=1e-5, atol=5e-5)
    rms = xd / np.sqrt((xd**2).mean(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(rmsnorm(x, gamma), rms * gamma, rtol=1e-5, atol=5e-5)

    parts = RNG.normal(size=(7, 1600)).astype(np.float32)
    np.testing.assert_allclose(partial_sum(parts), parts.astype(F64).sum(0), rtol=1e-5, atol=1e-5)


# ---- the closed-form counts describe exactly what the algorithms do -----------------------------------
def _run(kind, n, rows, degree, rec, rsq):
    dp = OpCounter()
    x = RNG.normal(0, 2, (rows, n)).astype(np.float32)
    g = RNG.normal(size=n).astype(np.float32)
    if kind == "softmax":
        softmax(x, scale=0.1, degree=degree, recip_iterations=rec, dp=dp)
    elif kind == "layernorm":
        layernorm(x, g, g, rsqrt_iterations=rsq, dp=dp)
    elif kind == "rmsnorm":
        rmsnorm(x, g, rsqrt_iterations=rsq, dp=dp)
    elif kind == "gelu":
        gelu_tanh(x, degree=degree, recip_iterations=rec, dp=dp)
    elif kind == "silu":
        silu(x, degree=degree, recip_iterations=rec, dp=dp)
    elif kind == "exp":
        exp_taylor(x, degree=degree, dp=dp)
    elif kind == "reciprocal":
        reciprocal_nr(np.abs(x) + 0.5, iterations=rec, dp=dp)
    elif kind == "rsqrt":
        rsqrt_fast(np.abs(x) + 0.5, iterations=rsq, dp=dp)
    return dp


@pytest.mark.parametrize("kind", ["softmax", "layernorm", "rmsnorm", "gelu", "silu", "exp", "reciprocal", "rsqrt"])
@pytest.mark.parametrize("degree,rec,rsq", [(6, 3, 2), (3, 1, 1), (9, 4, 3)])
def test_op_counts_match_instrumented_algorithms(kind, degree, rec, rsq):
    n, rows = 97, 5
    dp = _run(kind, n, rows, degree, rec, rsq)
    c = op_counts(kind, n, rows, degree=degree, recip_iterations=rec, rsqrt_iterations=rsq)
    if kind not in ("softmax", "layernorm", "rmsnorm"):     # elementwise: rows do not matter
        c = op_counts(kind, n * rows, degree=degree, recip_iterations=rec, rsqrt_iterations=rsq)
    assert (c.fadd, c.fmul, c.cmp, c.iadd) == (dp.fadd, dp.fmul, dp.cmp, dp.iadd)


def test_op_counts_closed_forms():
    # softmax of one row of n: per element 1 scale mul + exp (9 mul, 10 add, 2 cmp, 2 iadd at degree 6)
    # + subtract + normalise; per row max (n-1 cmp), sum (n-1 add), one reciprocal (6 mul, 3 add, 1 iadd).
    n = 1000
    c = op_counts("softmax", n)
    assert (c.fmul, c.fadd, c.cmp, c.iadd) == (11 * n + 6, 11 * n + (n - 1) + 3, (n - 1) + 2 * n, 2 * n + 1)
    assert op_counts("residual_add", n).fadd == n
    assert op_counts("reduce", n, parts=4).fadd == 3 * n and op_counts("reduce", n, parts=1).total_ops == 0
    with pytest.raises(UserError, match="unknown ASIC op kind 'tanh'.*known:.*softmax"):
        op_counts("tanh", 4)
    with pytest.raises(UserError, match="n must be an integer"):
        op_counts("softmax", -1)


# ---- ASIC timing and energy --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def asic():
    return AsicModel()


@pytest.fixture(scope="module")
def gpt3xl_graph():
    return build_graph(load_model("gpt3-xl"), context_len=1024)


def test_asic_clock_scaling_is_exactly_inverse_for_asic_only_part(asic, gpt3xl_graph):
    slow = asic.with_config(clock_hz=asic.config.clock_hz / 10)
    fast_df, slow_df = asic.graph_breakdown(gpt3xl_graph), slow.graph_breakdown(gpt3xl_graph)
    assert (fast_df["asic_cycles"] == slow_df["asic_cycles"]).all()
    assert slow_df["asic_s"].sum() == pytest.approx(10 * fast_df["asic_s"].sum(), rel=1e-12)
    # GDDR6 transfers do not depend on the ASIC clock, so end to end it is less than 10x.
    assert slow_df["io_s"].sum() == pytest.approx(fast_df["io_s"].sum())
    ratio = slow_df["total_s"].sum() / fast_df["total_s"].sum()
    assert 1 < ratio < 10
    op = next(o for o in gpt3xl_graph if o.kind == "softmax")
    assert slow.latency_s(op) == pytest.approx(10 * asic.latency_s(op))


def test_asic_latency_model(asic, gpt3xl_graph):
    cfg = asic.config
    soft = next(o for o in gpt3xl_graph if o.kind == "softmax")     # 16 heads x 1024 keys
    c = asic.op_counts(soft)
    assert c.rows == 16
    tree = math.ceil(math.log2(cfg.lanes))
    # throughput + ONE row's dependency chain: the 16 independent heads interleave in the pipeline
    chain = (c.passes + c.serial_ops + c.reductions * tree) * cfg.pipeline_depth_cycles
    expected = math.ceil(max(c.adder_ops, c.fmul) / cfg.lanes) + chain
    assert asic.latency_cycles(soft) == expected
    # Doubling the lanes halves the throughput part; the (longer-tree) chain stays exposed.
    wide = asic.with_config(lanes=2 * cfg.lanes)
    wide_chain = (c.passes + c.serial_ops + c.reductions * (tree + 1)) * cfg.pipeline_depth_cycles
    assert wide.latency_cycles(soft) == math.ceil(max(c.adder_ops, c.fmul) / (2 * cfg.lanes)) + wide_chain
    assert wide.latency_cycles(soft) < asic.latency_cycles(soft)
    assert asic.latency_cycles(soft, include_io=True) == asic.latency_cycles(soft)   # no I/O for ASIC ops


def test_asic_energy_table_and_scaling(asic, gpt3xl_graph):
    e = asic.energy
    scale = 28 / 45                                   # classical C*V^2 scaling at 0.9 V (YAML)
    assert e.fadd_pj == pytest.approx(0.9 * scale) and e.fmul_pj == pytest.approx(3.7 * scale)
    assert e.sram_pj_per_byte == pytest.approx(10.0 / 8 * scale)
    gelu = next(o for o in gpt3xl_graph if o.kind == "gelu")
    c = asic.op_counts(gelu)
    arith = (c.fadd + c.cmp) * e.fadd_pj + c.fmul * e.fmul_pj + c.iadd * e.iadd_pj
    sram = (c.sram_read_elems + c.sram_write_elems) * 4 * e.sram_pj_per_byte
    assert asic.energy_pj(gelu) == pytest.approx(arith + sram)
    half = AsicModel(replace(asic.config, datapath="fp16"))
    assert half.energy_pj(gelu) < asic.energy_pj(gelu)


def test_asic_io_transfers_and_partial_sums(asic):
    spec = load_model("gpt2-xl")
    g = build_graph(spec, context_len=1024)
    by = {o.name: o for o in g}
    seconds, pj = asic.transfer(3200, channels=8)
    assert seconds == pytest.approx(3200 / 32e9) and pj == pytest.approx(3200 * 8 * 8 * 5.5)
    # FFN2 rows are 4 x 1600 = 6400 BF16 = 12.5 KB: 7 row-chunks of 2 KB -> 6 partial-vector adds.
    ffn2 = by["L0.ffn2"]
    assert asic.partials(ffn2) == 7 and asic.op_counts(ffn2).fadd == 6 * spec.d_model
    io = asic.io(ffn2)
    assert io["io_to_pim_bytes"] == ffn2.act_read_bytes * 8          # input broadcast to all 8 channels
    assert io["io_from_pim_bytes"] == ffn2.act_write_bytes * 7
    assert asic.partials(by["L0.attn_score"]) == 1 and asic.latency_cycles(by["L0.attn_score"]) == 0
    assert asic.io(by["L0.kv_append"])["io_to_pim_bytes"] == spec.kv_bytes_per_token / spec.n_layers
    df = asic.graph_breakdown(g)
    assert set(df["unit"]) == {"pim", "asic", "io"} and str(df["layer"].dtype) == "Int64"
    assert (df["energy_pj"] >= df["io_energy_pj"]).all()
    with pytest.raises(UserError, match="channels must be 1..8"):
        asic.transfer(10, channels=9)


def test_asic_config_errors(tmp_path):
    with pytest.raises(UserError, match="unknown ASIC preset 'pimgpt'.*pimgpt_asic"):
        AsicConfig.load("pimgpt")
    with pytest.raises(ConfigError, match="lanes: must be an integer >= 1, got 0"):
        AsicConfig.load(lanes=0)
    with pytest.raises(ConfigError, match="clocks_hz: unknown key"):
        AsicConfig.load(clocks_hz=1e9)
    bad = tmp_path / "asic.yaml"
    bad.write_text("clock_hz: 1.0e+9\nlanes: 8\npipeline_depth_cycles: 4\nalgorithms:\n  exp_taylor_degree: 6\n")
    with pytest.raises(ConfigError, match=r"asic\.yaml: algorithms\.reciprocal_nr_iterations: missing"):
        AsicConfig.load(bad)


# ---- GPU / CPU baselines -----------------------------------------------------------------------------
@pytest.fixture(scope="module", params=["t4", "xeon-gold-6154"])
def baseline(request):
    return Baseline.load(request.param)


def test_baseline_presets_and_aliases():
    t4, cpu = Baseline.load("t4"), Baseline.load("xeon-gold-6154")
    assert Baseline.load("gpu") == t4 and Baseline.load("cpu") == cpu
    # Xeon Gold 6154 peaks computed from its microarchitecture: 18 x 3.0 GHz x 2 FMA x 16 lanes x 2.
    assert cpu.peak_matmul_flops_per_s == pytest.approx(3.456e12)
    assert cpu.peak_bandwidth_bytes_per_s == pytest.approx(6 * 2.666e9 * 8)     # ~128 GB/s
    assert (t4.peak_bandwidth_bytes_per_s, t4.tdp_w, cpu.tdp_w) == (320e9, 70.0, 200.0)


def test_unknown_baseline_lists_known_ones(tmp_path):
    with pytest.raises(UserError) as exc:
        Baseline.load("t5")
    msg = str(exc.value)
    assert "unknown baseline 't5'" in msg and "xeon-gold-6154" in msg and "did you mean t4" in msg
    bad = tmp_path / "b.yaml"
    src = (PRESET_DIR / "t4.yaml").read_text().replace("    gelu: 8", "    gelu_new: 8")
    bad.write_text(src)
    with pytest.raises(ConfigError, match=r"framework\.kernels_per_op: missing kinds: gelu"):
        Baseline.load(bad)


@pytest.mark.parametrize("name", ["gpt2-small", "gpt3-xl"])
def test_roofline_is_a_lower_bound_for_every_op(baseline, name):
    g = build_graph(load_model(name), context_len=512)
    df = baseline.decode_token(g)["per_op"]
    peak_flops = max(baseline.peak_matmul_flops_per_s, baseline.peak_vector_flops_per_s)
    assert (df["roofline_s"] >= df["bytes"] / baseline.peak_bandwidth_bytes_per_s).all()
    assert (df["roofline_s"] >= df["flops"] / peak_flops).all()
    assert (df["latency_s"] > 0).all()
    ops = {op.name: op for op in g}
    scale = baseline.storage_bytes_per_element / 2
    for row in df.itertuples():
        if row.name in ops and row.kind != "kv_append":
            assert row.bytes == ops[row.name].bytes_total * scale


def test_latency_grows_with_model_size(baseline):
    for family in (["gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl"],
                   ["gpt3-small", "gpt3-medium", "gpt3-large", "gpt3-xl"]):
        lat = [baseline.decode_token(build_graph(load_model(n), context_len=512))["latency_s"] for n in family]
        assert lat == sorted(lat) and len(set(lat)) == 4


def test_kernel_overhead_is_kernels_times_overhead(baseline):
    g = build_graph(load_model("gpt2-medium"), context_len=256)
    r = baseline.decode_token(g)
    df = r["per_op"]
    kernels = sum(baseline.kernels(op) for op in g) + baseline.per_token_kernels
    assert r["kernels"] == kernels == df["kernels"].sum()
    assert r["overhead_s"] == pytest.approx(kernels * baseline.host_overhead_per_kernel_s)
    assert (df["overhead_s"] == df["kernels"] * baseline.host_overhead_per_kernel_s).all()
    assert r["latency_s"] == pytest.approx(df["latency_s"].sum())
    if baseline.overlap_host_and_device:
        # Two-stage pipeline: at least the slower stage, at most both stages back to back.
        assert max(r["overhead_s"], r["device_s"]) <= r["latency_s"] <= r["overhead_s"] + r["device_s"]
    else:
        assert r["latency_s"] == pytest.approx(r["overhead_s"] + r["device_s"])
    # energy: busy power while the device computes, host-gap power while it waits on the host
    gap = r["latency_s"] - r["device_s"]
    assert r["host_gap_s"] == pytest.approx(gap)
    assert r["energy_j"] == pytest.approx(baseline.busy_w * r["device_s"] + baseline.host_gap_w * gap)


def test_kernel_counts_follow_hf_gpt2_source():
    t4 = Baseline.load("t4")
    g = build_graph(load_model("gpt2-small"), context_len=64)
    assert sum(t4.kernels(op) for op in g.layer_ops(0)) == 30
    # The derivation in t4.yaml: 368 kernels per GPT-2-small token, 12.19 ms measured -> 33 us per kernel.
    assert t4.decode_token(g)["kernels"] == 368
    assert 12.19e-3 / 368 == pytest.approx(t4.host_overhead_per_kernel_s, rel=0.01)


def test_batch1_decode_is_launch_bound_and_hf_cache_concat_grows(baseline):
    g_short = build_graph(load_model("gpt2-small"), context_len=16)
    g_long = build_graph(load_model("gpt2-small"), context_len=1024)
    short, long = baseline.decode_token(g_short), baseline.decode_token(g_long)
    if baseline.device == "gpu":
        # Every op but the 77 MB LM-head GEMV finishes on the GPU faster than the host can launch it.
        bound = short["per_op"].set_index("name")["bound"]
        assert bound["lm_head"] == "memory" and (bound.drop("lm_head") == "overhead").all()
        assert short["busy_fraction"] < 0.25
    kv = [r["per_op"].query("kind == 'kv_append'")["bytes"].iloc[0] for r in (short, long)]
    assert kv[1] == pytest.approx(kv[0] * 1024 / 16)      # torch.cat rewrites the whole cache
    assert long["device_s"] > short["device_s"]
    # On the GPU the longer cache still hides behind the host's launches; the CPU pays it in full.
    assert long["latency_s"] >= short["latency_s"]
    if baseline.device == "cpu":
        assert long["latency_s"] - short["latency_s"] == pytest.approx(long["device_s"] - short["device_s"])


def test_energy_without_busy_and_gap_power_is_tdp_throughout(tmp_path):
    """A preset without power.busy_w / host_gap_w (e.g. a100-40gb) keeps the TDP x activity x latency rule."""
    a100 = Baseline.load("a100-40gb")
    assert a100.busy_w is None and a100.energy_j(2.0, 0.5) == pytest.approx(a100.tdp_w * a100.activity_factor * 2.0)
    t4 = Baseline.load("t4")
    # a launch-bound T4 step of 10 ms with 1 ms of kernels: 70 W for 1 ms, 15 W for 9 ms
    assert t4.energy_j(10e-3, 1e-3) == pytest.approx(70 * 1e-3 + 15 * 9e-3)


@pytest.mark.parametrize("name", ["gpt2-small", "gpt2-xl", "gpt3-xl"])
def test_t4_launch_bound_and_device_bound(name):
    """t4 (HF eager) waits on the host; t4-graphs (fused kernels in a CUDA graph) runs close to its device
    roofline; both stream the same weights, so the device-bound row is the faster one."""
    g = build_graph(load_model(name), context_len=512)
    eager, graphs = Baseline.load("t4").decode_token(g), Baseline.load("t4-graphs").decode_token(g)
    assert eager["overhead_s"] > 0.5 * eager["latency_s"], (eager["overhead_s"], eager["latency_s"])
    # device-bound: kernels plus one device-side gap each, in series; the gaps stay under a fifth of the step
    gap = Baseline.load("t4-graphs").host_overhead_per_kernel_s
    assert graphs["latency_s"] == pytest.approx(graphs["device_s"] + graphs["kernels"] * gap)
    assert graphs["latency_s"] < 1.2 * graphs["device_s"], (graphs["latency_s"], graphs["device_s"])
    assert graphs["kernels"] < eager["kernels"] / 3
    assert graphs["latency_s"] < eager["latency_s"]
    # the in-place KV append reads nothing back: less device traffic than torch.cat's full-cache copy
    assert graphs["device_s"] < eager["device_s"]
    # a device-bound T4 sits near its power cap, a launch-bound one mostly at its host-gap power
    assert graphs["power_w"] > eager["power_w"], (graphs["power_w"], eager["power_w"])
