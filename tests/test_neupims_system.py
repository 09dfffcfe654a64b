"""The NeuPIMs system and its baselines (archsim.systems.neupims): small decode iterations, every layer simulated.

These run one or two layers of small models at small batch. That the committed report (reports/neupims/)
re-simulates from this code is tests/test_neupims_report.py (one row by default, every row marked slow).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from archsim import api
from archsim.dram.checker import check_log
from archsim.errors import ConfigError, UserError
from archsim.systems.neupims.baselines import gpu_iteration_s
from archsim.systems.neupims.config import NPU_ATTENTION, IterationMode, Policy, ServingMode, resolve, setup
from archsim.systems.neupims.decode import DecodeSimulator, _attention_streams
from archsim.systems.neupims.device import assign, build_device
from archsim.systems.neupims.modes import sample_batch
from archsim.workload import serving

# GPT-3 Small (d_model 768, 12 heads of 64) on one device keeps a layer to ~0.2 M DRAM commands
SMALL = {"model": "gpt3-small", "layers": 1, "batch": 8}


def _sim(system: str, refresh: bool = True, log: bool = True, **extra):
    cfg = setup({"system": system, **SMALL, **extra})
    dev = build_device(cfg)
    return cfg, dev, DecodeSimulator(dev, refresh=refresh, log=log)


def _contexts(n: int, seed: int = 0) -> list[int]:
    return sample_batch("sharegpt", n, np.random.default_rng(seed))


@pytest.mark.parametrize("system,sub_batch", [("neupims", True), ("neupims", False), ("npu_pim", True),
                                              ("npu_only", False)])
def test_every_command_stream_passes_the_checker(system, sub_batch):
    cfg, dev, sim = _sim(system, sub_batch=sub_batch)
    ctx = _contexts(8)
    sim.iteration(ctx, assign(dev, ctx, "gmlbp"), sub_batch)
    log = sim.ms.command_log()
    assert len(log) > 10_000
    assert check_log(dev.spec, log) == []


def test_stage_plan_follows_the_six_stage_pipeline_and_the_serialized_baseline():
    for sub_batch, names in ((True, ["A", "B", "C", "D", "E", "F"]), (False, ["A", "B", "E"] * 2)):
        dev = build_device(setup({"system": "neupims", **SMALL, "layers": 2, "sub_batch": sub_batch}))
        sim = DecodeSimulator(dev, refresh=False)
        ctx = _contexts(8, 1)
        end = sim.iteration(ctx, assign(dev, ctx, "gmlbp"), sub_batch)
        assert [s.name for s in sim.stages] == names
        # stages are back to back (a barrier ends each) and the iteration ends with the last one
        for a, b in zip(sim.stages, sim.stages[1:], strict=False):
            assert b.start == a.end
        assert end == sim.stages[-1].end == sum(s.end - s.start for s in sim.stages)
        # each stage ends when its slower side ends
        for s in sim.stages:
            assert s.end == max(s.npu_end, s.pim_end, s.start)


def test_attention_commands_match_the_compiled_streams():
    """Every COMP / READRES / GWRITE the compiler emits for the batch's requests and heads is issued once."""
    cfg, dev, sim = _sim("neupims", refresh=False, log=False, sub_batch=False)
    ctx = _contexts(8, 2)
    sim.iteration(ctx, assign(dev, ctx, "gmlbp"), False)
    want = {"COMP": 0, "READRES": 0, "GWRITE": 0}
    for L in ctx:
        for h in range(dev.heads):
            lg, at, _rows, _k = _attention_streams(sim.compiler, L, h)
            for name in want:
                c = dev.spec.cmd(name)
                want[name] += int((lg[0] == c).sum()) + int((at[0] == c).sum())
    # q of row_elems / d_head heads arrives with one GWRITE; every attend chunk needs its own
    per_gwrite = sim.compiler.row_elems // sim.compiler.dk
    chunks = sum(math.ceil(L / sim.compiler.row_elems) for L in ctx) * dev.heads
    assert want["GWRITE"] == len(ctx) * math.ceil(dev.heads / per_gwrite) + chunks
    got = sim.stages[1].commands
    assert {k: got.get(k, 0) for k in want} == want


def test_gemm_stage_is_above_its_bounds_and_memory_bound_at_small_batch():
    """A decode QKV GEMM at batch 8 is bound by streaming its weights: slower than the weight bytes at peak
    bandwidth, slower than the arrays' compute, and within 2x of the bandwidth bound."""
    cfg, dev, sim = _sim("neupims", refresh=False, log=False, model="gpt3-7b")
    st = sim.run_stage("A", 0, [("gemm", 0, "qkv", 8)], None, 0)
    k, n = sim.gemm_shapes["qkv"]
    spec = dev.spec
    peak_bytes_per_cycle = spec.channels * spec.access_bytes / spec.timing["nBL"]
    bw_bound = k * n * 2 / peak_bytes_per_cycle
    compute_bound = st.npu_busy / dev.npu.arrays
    cycles = st.end - st.start
    assert cycles >= bw_bound and cycles >= compute_bound
    assert cycles <= 2 * bw_bound
    assert st.commands["RD"] * spec.access_bytes >= k * n * 2


def test_blocked_mode_serves_only_pim_while_a_gemv_runs():
    """npu_pim (one row buffer, blocked arbitration): strictly between the issue of a GEMV's first command
    (SEG_START) and its last (SEG_END) no NPU command issues on that channel; with dual row buffers (neupims)
    the NPU does issue inside GEMVs."""
    from archsim.engine.channel import SEG_END, SEG_START

    inside = {}
    for system in ("npu_pim", "neupims"):
        cfg, dev, sim = _sim(system, refresh=False, sub_batch=True)
        ctx = _contexts(16, 3)
        sim.iteration(ctx, assign(dev, ctx, "gmlbp"), True)
        log = sim.ms.command_log()
        count = segments = 0
        names = dev.spec.command_names
        for ch, entries in sim.stream_flags.items():
            on_ch = log[log["channel"] == ch]
            pim = on_ch[on_ch["source"] == "pim"]
            npu = on_ch[on_ch["source"] == "npu"]["cycle"].to_numpy()
            # the PIM source's issued commands are the stream's, plus the closes / row restores the engine
            # inserts (docs/channel-engine.md 3.3), never equal to the command they precede: match greedily
            j, start = 0, None
            for cyc, cmd in zip(pim["cycle"].to_numpy(), pim["command"].to_numpy(), strict=True):
                if j < len(entries) and names[entries[j][0]] == cmd:
                    flags = entries[j][1]
                    j += 1
                    if flags & SEG_START:
                        start = cyc
                    if flags & SEG_END:
                        count += int(((npu > start) & (npu < cyc)).sum())
                        segments += 1
            assert j == len(entries)
        assert segments > 100
        inside[system] = count
    assert inside["npu_pim"] == 0
    assert inside["neupims"] > 0


def test_dual_row_buffers_beat_blocked_single_buffer_with_interleaving():
    base = {"model": "gpt3-small", "layers": 2, "batch": 64, "refresh": False, "sub_batch": True}
    dual = api.run({"system": "neupims", **base})
    single = api.run({"system": "npu_pim", **base})
    assert dual.stats["tokens_per_s"] > single.stats["tokens_per_s"]


def test_results_are_deterministic_and_utilisations_are_fractions():
    cfg = {"system": "neupims", **SMALL, "refresh": False}
    a, b = api.run(cfg, seed=3), api.run(cfg, seed=3)
    assert a.stats["simulated_cycles"] == b.stats["simulated_cycles"]
    st = a.tables["stages"]
    for col in ("npu_util", "pim_util", "mem_bw_util"):
        assert ((st[col] >= 0) & (st[col] <= 1)).all(), col
    assert a.stats["tokens_per_s"] == pytest.approx(8 / a.stats["iteration_s"])
    assert a.stats["dram_energy_per_token_j"] > 0
    tl = a.tables["timeline"]            # what `archsim report` draws as the unit-busy timeline
    assert set(tl["unit"]) == {"NPU", "PIM"} and (tl["end_s"] > tl["start_s"]).all()
    assert tl["end_s"].max() == pytest.approx(a.stats["iteration_s"])


def test_gpu_roofline_is_the_roofline_of_its_operators():
    su = setup({"system": "gpu_roofline", "model": "gpt3-7b", "batch": 4})
    model = su.model
    ctx = [100, 200, 300, 400]
    sec, parts = gpu_iteration_s(su, ctx)
    bw = 1555e9 * 0.85
    E, tp = 4096, 4
    weights = (E * 3 * E + E * E + 2 * E * 4 * E) // tp * 2
    kv = sum(ctx) * 2 * E // tp * 2
    # batch 4 decode is memory-bound: weights + KV at the sustained bandwidth (activations are < 0.5 %)
    assert parts["gemm_s"] + parts["attention_s"] == pytest.approx((weights + kv) / bw * model.n_layers, rel=5e-3)
    assert sec == pytest.approx(sum(parts.values()))


def test_gpu_only_is_eager_kernels_host_bound_at_small_batch_and_never_faster_than_the_roofline():
    """The paper's GPU-only (PyTorch eager on an A100): per layer max(host dispatch of its 30 kernels, their
    device rooflines); at batch 1 the host decides: 30 x the host cost per kernel per layer (the preset's 33 us,
    or the band's other end given as gpu_host_overhead_s)."""
    # GPT3-7B on 4 devices: 3.5 GB of weights a device, ~2 ms of HBM at batch 1, under 32 x 30 x 10 us of host
    # time (GPT3-175B on 8 is device-bound at 10 us: 44 GB a device)
    for host in (None, 10e-6):
        cfg = {"system": "gpu_only", "model": "gpt3-7b", "tp": 4, "batch": 1}
        if host:
            cfg["gpu_host_overhead_s"] = host
        sec, parts = gpu_iteration_s(setup(cfg), [100])
        assert parts["kernels_per_layer"] == 30
        assert sec == pytest.approx(32 * 30 * (host or 33e-6), rel=1e-9), sec
        assert parts["device_s"] < parts["host_s"], parts
    for batch in (4, 64, 512):
        ctx = sample_batch("sharegpt", batch, np.random.default_rng(batch))
        eager, ep = gpu_iteration_s(setup({"system": "gpu_only", "model": "gpt3-7b", "batch": batch}), ctx)
        roof, _ = gpu_iteration_s(setup({"system": "gpu_roofline", "model": "gpt3-7b", "batch": batch}), ctx)
        assert eager >= roof, (batch, eager, roof)
        assert eager == pytest.approx(max(ep["host_s"], ep["device_s"]) + ep["allreduce_s"]), ep


def test_npu_pim_defaults_to_the_papers_naive_baseline():
    cfg = resolve({"system": "npu_pim"})
    assert (cfg["mapping"], cfg["sub_batch"], cfg["channel_assignment"]) == ("npu_pim", False, "round_robin")
    assert cfg["preset"] == "NeuPIMs_HBM2_Single"
    full = resolve({"system": "neupims"})
    assert (full["mapping"], full["sub_batch"], full["channel_assignment"]) == ("neupims", True, "gmlbp")
    # the ablation ladder's steps are the same system under the naive mapping
    step = resolve({"system": "neupims", "mapping": "npu_pim"})
    assert (step["sub_batch"], step["channel_assignment"], step["preset"]) == (False, "round_robin",
                                                                               "NeuPIMs_HBM2_Dual")


def test_npu_attention_pipelined_pays_one_pipeline_fill_not_one_per_gemm():
    """npu_only attention: with every head's q.K^T and s.V in one pipeline the array time per request and
    head is the weight blocks' preload offsets (H cycles each under the bounded rule), not a 2H - 1 preload
    plus a H + W - 2 drain per GEMM. Same KV traffic either way."""
    ctx = [230] * 8
    out = {}
    for mode in NPU_ATTENTION:
        cfg, dev, sim = _sim("npu_only", refresh=False, log=False, npu_attention=mode)
        st = sim.run_stage("B", 0, [("npu_attention", 0, ctx)], None, 0)
        out[mode] = st
    p, g = out["pipelined"], out["per_gemm"]
    assert p.commands == g.commands, (p.commands, g.commands)
    assert p.npu_busy < 0.7 * g.npu_busy, (p.npu_busy, g.npu_busy)
    assert p.end <= g.end, (p.end, g.end)


def test_serving_mode_reports_ttft_and_tbt_percentiles(tmp_path):
    trace = tmp_path / "t.csv"
    serving.write_trace(trace, [serving.Request(i, 0.0, 20 + 10 * i, 3 + i % 3) for i in range(6)])
    r = api.run({"system": "neupims", "model": "gpt3-small", "layers": 1, "mode": "serving", "requests": 6,
                 "batch": 4, "refresh": False, "sub_batch": False, "dataset": str(trace)}, seed=1)
    reqs = r.tables["requests"]
    assert len(reqs) == 6 and reqs["finish_s"].notna().all()
    s = r.stats
    assert 0 < s["tbt_p50_s"] <= s["tbt_p90_s"] <= s["tbt_p99_s"]
    assert 0 < s["ttft_p50_s"] <= s["ttft_p99_s"]
    assert s["tokens_per_s"] == pytest.approx(reqs["output_tokens"].sum() / s["makespan_s"])
    # each decode iteration's duration is one token interval of every request in it
    d = r.df.loc[r.df["decode_tokens"] > 0, "duration_s"]
    assert d.min() <= s["tbt_p50_s"] <= s["tbt_p99_s"] <= d.max()


def test_a_batch_whose_kv_cache_does_not_fit_says_how_much_it_needs():
    dev = build_device(setup({"system": "neupims", "model": "gpt3-7b", "batch": 4}))
    assign(dev, [2048] * 64, "gmlbp")        # 64 x 2048 tokens x 0.5 MiB = 64 GiB fits next to the weights
    with pytest.raises(UserError, match=r"need [0-9.]+ GiB of KV cache"):
        assign(dev, [2048] * 256, "gmlbp")   # 256 GiB: not in 4 x 32 GB


def test_weights_that_do_not_fit_the_tp_group_are_a_user_error():
    with pytest.raises(UserError, match=r"weights .* GB per device .* more than the .* of NeuPIMs_HBM2_Dual"):
        build_device(setup({"system": "neupims", "model": "gpt3-175b", "tp": 8}))


@pytest.mark.parametrize("key,value,match", [
    ("dataset", "sharegtp", "unknown dataset 'sharegtp'"),
    ("mode", "batch", "must be one of iteration, serving"),
    ("tp", 3, "tp must divide it"),
    ("sub_batch", "yes", "must be one of True, False"),
    ("batch", 0, "must be an integer >= 1"),
    ("bogus", 1, "unknown key for system neupims"),
    ("npu_attention", "fused", "must be one of pipelined, per_gemm"),
])
def test_bad_config_names_the_key(key, value, match):
    with pytest.raises(ConfigError, match=match):
        resolve({"system": "neupims", key: value})


def test_malformed_trace_names_the_line(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.1,x,5\n")
    with pytest.raises(UserError, match="trace.csv:3"):
        api.run({"system": "neupims", "model": "gpt3-7b", "layers": 1, "batch": 2, "dataset": str(path)})


def test_all_five_systems_are_registered():
    from archsim import registry

    assert {"neupims", "npu_pim", "npu_only", "gpu_only", "gpu_roofline"} <= set(registry.names())
    assert math.isfinite(api.run({"system": "gpu_only", "model": "gpt3-7b", "batch": 64}).stats["tokens_per_s"])
    assert serving.DATASETS


def test_tp_all_reduce_is_a_ring_over_the_link_and_ideal_by_default():
    cfg = setup({"system": "neupims", "model": "gpt3-7b", "tp": 4})
    assert DecodeSimulator(build_device(cfg), refresh=False)._allreduce(1 << 20) == 0
    cfg = setup({"system": "neupims", "model": "gpt3-7b", "tp": 4, "link_bytes_per_s": 64e9,
                     "link_latency_s": 1e-6})
    sim = DecodeSimulator(build_device(cfg), refresh=False)
    # reduce-scatter + all-gather: 2 (p-1)/p of the bytes over the link, 2 (p-1) hop latencies (1 GHz cycles)
    assert sim._allreduce(1 << 20) == math.ceil((2 * 3 / 4 * (1 << 20) / 64e9 + 6e-6) * 1e9)


def test_config_resolves_once_into_a_typed_frozen_setup_with_a_sub_config_per_mode():
    """`setup` turns the config into typed values once; the mode's own knobs sit in its own dataclass, built
    from the same top-level key paths the CLI and sweeps use."""
    import dataclasses

    su = setup({"system": "neupims", "model": "gpt3-7b", "mode": "serving", "requests": 7, "max_iterations": 3})
    assert su.mode == ServingMode(requests=7, max_iterations=3), su.mode
    assert setup({"system": "neupims", "samples": 2}).mode == IterationMode(samples=2)
    assert su.policy == Policy(attention="pim", sub_batch=True, channel_assignment="gmlbp", kv_base_row="half",
                               request_queue=4096, name="neupims")
    assert (su.tp, su.layers, su.model.name, su.npu.arrays) == (4, 32, "gpt3-7b", 8), su
    assert su.resolved == resolve({"system": "neupims", "model": "gpt3-7b", "mode": "serving", "requests": 7,
                                     "max_iterations": 3})
    with pytest.raises(dataclasses.FrozenInstanceError):
        su.batch = 1


def test_a_run_loads_the_model_policy_and_npu_once(monkeypatch):
    """Before the typed setup a run loaded the model three times and the NPU config twice."""
    import archsim.npu.config as npu_config
    import archsim.workload.spec as workload_spec
    from archsim.systems.neupims import config as N  # where the run's config is resolved and loaded

    calls = {"load_model": 0, "load_npu_config": 0, "_policy": 0}
    # the config module imports the model and NPU loaders when it resolves (it stays light for --help)
    owners = {"load_model": workload_spec, "load_npu_config": npu_config, "_policy": N}
    for name in calls:
        real = getattr(owners[name], name)

        def counted(*a, _real=real, _name=name, **k):
            calls[_name] += 1
            return _real(*a, **k)
        monkeypatch.setattr(owners[name], name, counted)
    api.run({"system": "neupims", **SMALL, "refresh": False, "mode": "serving", "requests": 2, "batch": 2})
    assert calls == {"load_model": 1, "load_npu_config": 1, "_policy": 1}, calls


def test_request_queue_is_the_mapping_policys_npu_window(tmp_path):
    """Mapping policy `request_queue`: the entries of the NPU's read and write queues per channel. 32 (the
    controller's default) unless the mapping says otherwise; every shipped NeuPIMs-family mapping takes NeuPIMs'
    simulator's window, its 128-entry command queue per bank x 32 banks (HBM2_8Gb_x128_dualpim.ini:58-61)."""
    plain = tmp_path / "plain.yaml"
    plain.write_text(_mapping_file("neupims").read_text().replace("\nrequest_queue: 4096\n", "\n"))
    for mapping, depth in (("neupims", 128 * 32), ("npu_pim", 128 * 32), ("npu_pim_issue", 128 * 32),
                           ("neupims_code", 128 * 32), ("npu_only", 3 * 32), (str(plain), 32)):
        cfg = setup({"system": "neupims", **SMALL, "mapping": mapping})
        assert cfg.policy.request_queue == depth, mapping
        sim = DecodeSimulator(build_device(cfg), refresh=False)
        assert sim.ms.ctrl.read_queue == sim.ms.ctrl.write_queue == depth, mapping
    bad = tmp_path / "bad.yaml"
    bad.write_text(_mapping_file("neupims").read_text().replace("\nrequest_queue: 4096\n", "\nrequest_queue: 0\n"))
    with pytest.raises(ConfigError, match="request_queue"):
        setup({"system": "neupims", **SMALL, "mapping": str(bad)})


def _mapping_file(name: str):
    from archsim import paths
    return paths.resolve("mappings", name)


def test_a_deeper_npu_window_keeps_the_npu_reading_beside_pim(tmp_path):
    """With sub-batch interleaving the NPU streams weights while PIM opens row sets, and every G_ACT holds the
    rank's ACTs for tFAW: a 32-entry read queue covers two rows of the NPU's stream, so the NPU stalls at each
    G_ACT burst; the window of NeuPIMs' per-bank command queues lets it open banks ahead, so the stages where
    both work (C, D, E) end sooner."""
    shallow = tmp_path / "shallow.yaml"
    shallow.write_text(_mapping_file("neupims").read_text().replace("\nrequest_queue: 4096\n", "\nrequest_queue: 32\n"))
    ctx = _contexts(16, 3)
    out = {}
    for name, mapping in (("32", str(shallow)), ("4096", "neupims")):
        cfg, dev, sim = _sim("neupims", refresh=False, sub_batch=True, mapping=mapping)
        sim.iteration(ctx, assign(dev, ctx, "gmlbp"), True)
        out[name] = sum(s.end - s.start for s in sim.stages if s.name in ("C", "D", "E"))
    assert out["4096"] < out["32"], out


@pytest.mark.parametrize("system,sub_batch", [("neupims", True), ("npu_only", False)])
def test_npu_operators_tile_each_stage_in_program_order(system, sub_batch):
    """The per-operator record (result table npu_ops, which vs_code_ops.csv holds beside the code's per-operation
    log): a stage's NPU operators run back to back from its start to its NPU end, in the program's order."""
    res = api.run({"system": system, **SMALL, "layers": 2, "sub_batch": sub_batch}, seed=0)
    ops, stages = res.tables["npu_ops"], res.tables["stages"].query("sample == 0")
    assert len(ops) and set(ops["op"]) <= {"qkv", "proj", "ffn1", "ffn2", "add", "layernorm", "gelu", "allreduce",
                                         "npu_attention"}
    for _, st in stages.iterrows():
        mine = ops[(ops["stage"] == st["stage"]) & (ops["layer"] == st["layer"])]
        if not len(mine):
            continue
        starts, ends = mine["start_cycle"].to_numpy(), (mine["start_cycle"] + mine["cycles"]).to_numpy()
        assert starts[0] == st["start_cycle"] and ends[-1] == st["npu_end_cycle"]
        assert (starts[1:] == ends[:-1]).all() and (mine["cycles"] >= 0).all()


def test_attend_start_is_the_mapping_policys_and_checked(tmp_path):
    """Mapping policy `attend_start`: `head` (the default) unless the mapping says otherwise; neupims_code takes
    NeuPIMs' code's operation barrier (`all_logits`); anything else is refused naming the key."""
    for mapping, start in (("neupims", "head"), ("npu_pim", "head"), ("neupims_code", "all_logits")):
        assert setup({"system": "neupims", **SMALL, "mapping": mapping}).policy.attend_start == start, mapping
    bad = tmp_path / "bad.yaml"
    bad.write_text(_mapping_file("neupims").read_text() + "\nattend_start: sometimes\n")
    with pytest.raises(ConfigError, match="attend_start"):
        setup({"system": "neupims", **SMALL, "mapping": str(bad)})


def test_all_logits_holds_every_channels_attend_until_the_last_logits(tmp_path):
    """`attend_start: all_logits`: a channel with one short request finishes its logits long before a channel
    with a long one, and starts its attend GEMVs only once that channel's logits and softmaxes are done (the
    stage records the release); with `head` it goes on by itself and ends sooner."""
    barrier = tmp_path / "barrier.yaml"
    barrier.write_text(_mapping_file("neupims").read_text() + "\nattend_start: all_logits\n")
    reqs = [(32, 0), (1024, 1)]
    out = {}
    for start, mapping in (("head", "neupims"), ("all_logits", str(barrier))):
        cfg, dev, sim = _sim("neupims", refresh=False, mapping=mapping)
        st = sim.run_stage("B", 0, [], (0, reqs), 0)
        log = sim.ms.command_log()
        short = log[(log["channel"] == 0) & (log["source"] != "npu")]
        long_ = log[(log["channel"] == 1) & (log["source"] != "npu")]
        logits_cmds = {ch: len(sim._channel_plan(ch, (L,)).logits.cmd) for L, ch in reqs}
        out[start] = (st, short, long_, logits_cmds)
    st, short, long_, logits_cmds = out["head"]
    assert st.attend_start == -1
    assert short["cycle"].max() < long_["cycle"].iloc[logits_cmds[1] - 1]    # done before the long one's logits
    st, short, long_, logits_cmds = out["all_logits"]
    assert st.attend_start >= long_["cycle"].iloc[logits_cmds[1] - 1]        # after the last logits command
    assert (short["cycle"] < st.attend_start).sum() == logits_cmds[0]        # the short channel waited
    assert short["cycle"].min() >= 0 and short["cycle"].iloc[logits_cmds[0]] >= st.attend_start
    assert out["all_logits"][1]["cycle"].max() > out["head"][1]["cycle"].max()


def test_pim_reserves_banks_is_the_mapping_policys_controller_rule(tmp_path):
    """Mapping policy `pim_reserves_banks`: whether a waiting PIM open keeps the NPU from opening its banks (the
    engine's controller.stream_reserve). True (archsim's controller) unless the mapping says otherwise;
    neupims_code takes NewtonSim's rule (no bank reserved for PIM); anything but a boolean is refused."""
    for mapping, reserve in (("neupims", True), ("npu_pim", True), ("neupims_code", False)):
        cfg = setup({"system": "neupims", **SMALL, "mapping": mapping})
        assert cfg.policy.pim_reserves_banks is reserve, mapping
        assert DecodeSimulator(build_device(cfg), refresh=False).ms.ctrl.stream_reserve is reserve, mapping
    bad = tmp_path / "bad.yaml"
    bad.write_text(_mapping_file("neupims").read_text() + "\npim_reserves_banks: maybe\n")
    with pytest.raises(ConfigError, match="pim_reserves_banks"):
        setup({"system": "neupims", **SMALL, "mapping": str(bad)})


def test_the_codes_standard_issues_one_command_a_cycle():
    """DRAM standard neupims_code: NeuPIMs' device as its NewtonSim controller issues commands, one a cycle per
    channel (neupims_controller.cc:62-83); HBM2's own (neupims) keeps separate row and column buses. Everything else
    of the device is the same, and vs_code.py runs the NeuPIMs cases on it (not its baselines)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reports" / "neupims"))
    import vs_code

    hbm2 = build_device(setup({"system": "neupims", **SMALL})).spec
    code = build_device(setup({"system": "neupims", **SMALL, "dram": {"standard": "neupims_code"}})).spec
    assert (hbm2.command_bus, code.command_bus) == ("dual", "single")
    assert code.timing == hbm2.timing and code.command_names == hbm2.command_names
    assert vs_code.config("gpt3-7B_tp4_bs256_genclb0_sbi-on")["dram"] == {"standard": "neupims_code"}
    assert "dram" not in vs_code.config("npupim-baseline_gpt3-7B_tp4_bs512_clb0")


def test_refresh_stagger_and_npu_controller_are_mapping_policies(tmp_path):
    """Mapping policies `refresh_stagger` (the ranks of a channel refresh in turn, NewtonSim's RANK_LEVEL_STAGGERED)
    and `npu_controller` (`bank_queues`: NewtonSim's two-level queues for the NPU, the engine's dramsim3 convention
    with 128-entry bank queues) are off in every shipped mapping, so no other run changes; a value outside their
    choices is refused naming the key, and bank queues beside PIM attention are not built (issue 33)."""
    for mapping in ("neupims", "npu_pim", "neupims_code"):
        pol = setup({"system": "neupims", **SMALL, "mapping": mapping}).policy
        assert (pol.refresh_stagger, pol.npu_controller) == (False, "frfcfs"), mapping
    base = _mapping_file("neupims_code").read_text()
    for key, value in (("refresh_stagger", "often"), ("npu_controller", "fifo")):
        bad = tmp_path / f"bad_{key}.yaml"
        bad.write_text(base + f"\n{key}: {value}\n")
        with pytest.raises(ConfigError, match=key):
            setup({"system": "neupims", **SMALL, "mapping": str(bad)})
    code = tmp_path / "code_controller.yaml"
    code.write_text(base.replace("\nattention: pim\n", "\nattention: npu\n")
                    + "\nnpu_controller: bank_queues\nrefresh_stagger: true\n")
    cfg = setup({"system": "neupims", **SMALL, "mapping": str(code)})
    ctrl = DecodeSimulator(build_device(cfg), refresh=True).ms.ctrl
    assert (ctrl.bank_command_queue, ctrl.read_queue, ctrl.write_queue, ctrl.refresh_stagger) == (128, 32, 32, True)
    default = DecodeSimulator(build_device(setup({"system": "neupims", **SMALL})), refresh=True).ms.ctrl
    assert (default.bank_command_queue, default.refresh_stagger) == (0, False)
    beside_pim = tmp_path / "beside_pim.yaml"
    beside_pim.write_text(base + "\nnpu_controller: bank_queues\n")
    with pytest.raises(NotImplementedError, match="issue 33"):
        DecodeSimulator(build_device(setup({"system": "neupims", **SMALL, "mapping": str(beside_pim)})))


def test_bank_queues_serve_the_npus_stream_out_of_order():
    """With NewtonSim's bank queues the NPU's QKV GEMM (stage A, no PIM) is served bank by bank, round robin, and a
    read of an address already queued is merged with it (DRAMsim3's pending reads); archsim's FR-FCFS serves the
    oldest row hit first and reads every request. Both command logs pass the checker; the stage's length differs."""
    import tempfile
    from pathlib import Path

    base = _mapping_file("neupims_code").read_text().replace("\nattention: pim\n", "\nattention: npu\n")
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for arm, extra in (("frfcfs", ""), ("bank_queues", "\nnpu_controller: bank_queues\n")):
            path = Path(tmp) / f"{arm}.yaml"
            path.write_text(base + extra)
            cfg, dev, sim = _sim("neupims", mapping=str(path), batch=32)
            qkv, _ = sim.layer_ops(0, 32)
            st = sim.run_stage("A", 0, qkv, None, 0)
            log = sim.ms.command_log()
            out[arm] = (st, log[(log["command"] == "RD") & (log["cycle"] < st.end)])
            assert check_log(dev.spec, log) == []
    (a, rd_a), (b, rd_b) = out["frfcfs"], out["bank_queues"]
    assert 0 < len(rd_b) <= len(rd_a)
    assert a.end != b.end
