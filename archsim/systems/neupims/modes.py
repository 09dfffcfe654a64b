"""The two run modes: `iteration` (sampled batches, one decode iteration each, every layer) and `serving`
(continuous batching, TTFT / TBT), and the batches they decode.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from archsim import progress
from archsim.dram import latency
from archsim.engine.compiling import clock, sim_seconds
from archsim.errors import ConfigError, UserError
from archsim.npu.systolic import schedule_gemm
from archsim.results import Result, make_manifest
from archsim.systems.duplex.compiler import routing_counts
from archsim.systems.neupims.baselines import gpu_iteration_s
from archsim.systems.neupims.config import Setup, _is_trace
from archsim.systems.neupims.decode import DecodeSimulator, StageStats
from archsim.systems.neupims.device import Device, assign, build_device
from archsim.workload import serving


def sample_batch(dataset: str, batch: int, rng: np.random.Generator) -> list[int]:
    """Context lengths of a running batch in steady state: each request's length bias and step of generation
    as continuous batching produces them (archsim.workload.serving.sample_running_batch), from a named
    dataset's length histograms or a request trace's prompt and output lengths."""
    if _is_trace(dataset):
        reqs = serving.read_trace(dataset)
        counts = serving.running_context_counts([r.prompt_tokens for r in reqs], [r.output_tokens for r in reqs])
        return serving.sample_running_batch(serving.HistogramDist(tuple(counts.tolist())), batch, rng)
    return serving.sample_running_batch(serving.RUNNING[dataset], batch, rng)


def snapshot_batch(su: Setup, sample: int) -> serving.Snapshot | None:
    """The batch snapshot a run decodes (sample s of a named set takes its file s mod count), or None when the
    dataset is a length distribution or a request trace."""
    if su.dataset in serving.SNAPSHOT_SETS:
        files = serving.snapshot_files(su.dataset)
        snap = serving.read_snapshot(files[sample % len(files)])
    elif _is_trace(su.dataset) and serving.is_snapshot(su.dataset):
        snap = serving.read_snapshot(su.dataset)
    else:
        return None
    if len(snap.seq_lens) != su.batch:
        raise ConfigError("batch", f"the batch snapshot {snap.source} holds {len(snap.seq_lens)} requests; set batch "
                          f"to {len(snap.seq_lens)}, got {su.batch}")
    return snap


def batch_of(su: Setup, dev: Device | None, rng: np.random.Generator, sample: int) -> tuple[list[int], list[int] | None]:
    """(context lengths, the PIM unit holding each request's KV cache) of iteration sample `sample`: a batch
    snapshot's own, else a sampled batch placed by the run's channel assignment (None without a device)."""
    snap = snapshot_batch(su, sample)
    if snap is not None:
        if dev is not None and max(snap.channels) >= dev.pim_units:
            raise UserError(f"{snap.source}: ch_idx {max(snap.channels)} is beyond the {dev.pim_units} PIM units of "
                            f"{dev.spec.name}")
        return list(snap.seq_lens), list(snap.channels)
    ctx = sample_batch(su.dataset, su.batch, rng)
    return ctx, (assign(dev, ctx, su.channel_assignment) if dev is not None else None)


def _stage_frame(stages: list[StageStats], dev: Device) -> pd.DataFrame:
    ns = dev.spec.tCK_ps / 1000
    rows = []
    for s in stages:
        dur = max(s.end - s.start, 1)
        bursts = sum(s.commands.get(c, 0) for c in ("RD", "RDA", "WR", "WRA"))
        comps = s.commands.get("COMP", 0)
        rows.append({
            "stage": s.name, "layer": s.layer, "start_cycle": s.start, "cycles": s.end - s.start,
            "seconds": (s.end - s.start) * ns * 1e-9,
            "npu_util": s.npu_busy / (dur * dev.npu.arrays),
            "pim_util": comps * latency.gap(dev.spec, "COMP", "COMP") / (dur * dev.pim_units),
            "mem_bw_util": bursts * dev.spec.timing["nBL"] / (dur * dev.spec.channels * dev.spec.counts[1]),  # per data bus
            "npu_end_cycle": s.npu_end, "pim_end_cycle": s.pim_end,
            # mean over the PIM units of the time from the stage's start to the unit's last GEMV, less the time it
            # waited at the attend barrier with nothing queued (what NeuPIMs' summary reports as pim_cycles, the
            # mean over channels of the cycles with PIM commands queued)
            "pim_unit_cycles": (sum(e - s.start - _barrier_wait(s, u) for u, e in s.pim_unit_end.items())
                                / dev.pim_units if s.pim_unit_end else 0.0),
            "vector_cycles": s.vector_busy,
            # attend_start all_logits: when the attend GEMVs were released, from the stage's start (-1: per head)
            "attend_release_cycle": s.attend_start - s.start if s.attend_start >= 0 else -1,
            "link_cycles": s.link_busy, **{f"n_{k}": v for k, v in s.commands.items()},
            # mapping policy pim_issue per_cycle: the PIM instructions the core handed over, one per NPU cycle, and
            # when the last of them entered (from the stage's start); absent otherwise
            **({"pim_instructions": s.pim_instructions, "pim_last_entry_cycle": s.pim_last_entry - s.start}
               if s.pim_instructions else {}),
        })
    return pd.DataFrame(rows).fillna(0)


def _barrier_wait(s: StageStats, unit: int) -> int:
    """Cycles PIM unit `unit` waited, its logits done, for the stage's attend release (`attend_start:
    all_logits`); 0 without the barrier."""
    if s.attend_start < 0:
        return 0
    return max(s.attend_start - s.pim_unit_logits_end.get(unit, s.attend_start), 0)


def _energy_j(dev: Device, stage_df: pd.DataFrame, cycles: int) -> dict[str, float]:
    """DRAM energy of one device by component (J): the post-pass over the command counts (NeuPIMs compares
    memory energy, its Table 5)."""
    from archsim import energy as energy_mod

    counts = {c[2:]: int(stage_df[c].sum()) for c in stage_df.columns if c.startswith("n_")}
    pj = energy_mod.dram_energy_pj(dev.spec, counts, cycles, dev.spec.channels)
    return {k: v * 1e-12 for k, v in pj.items()}


def run_iteration_mode(su: Setup, seed: int) -> Result:
    rng = np.random.default_rng(seed)
    timer = clock()       # simulation time: a first run's kernel compile apart (sim_compile_s)
    samples = su.mode.samples
    rows, stage_frames = [], []
    if su.gpu_system:
        for s in range(samples):
            ctx, _ = batch_of(su, None, rng, s)
            sec, parts = gpu_iteration_s(su, ctx)
            rows.append({"sample": s, "batch": len(ctx), "mean_context": float(np.mean(ctx)), "seconds": sec,
                         "tokens_per_s": len(ctx) / sec, **parts})
        df = pd.DataFrame(rows)
        stats = {"tokens_per_s": float(df["tokens_per_s"].mean()), "iteration_s": float(df["seconds"].mean()),
                 "wall_s": sim_seconds(timer)}
        return Result(stats=stats, df=df, manifest=make_manifest(su.system, su.resolved, seed=seed))
    dev = build_device(su)
    sim_cycles = 0
    for s in range(samples):
        ctx, chans = batch_of(su, dev, rng, s)
        sim = DecodeSimulator(dev, refresh=su.refresh)

        def on_layer(k, cycle, s=s):
            progress.report("layers", s * dev.layers + k, samples * dev.layers,
                            cycle * dev.spec.tCK_ps * 1e-12, f"sample {s + 1} of {samples}")

        end = sim.iteration(ctx, chans, su.sub_batch, on_layer=on_layer)
        sec = end * dev.spec.tCK_ps * 1e-12
        sf = _stage_frame(sim.stages, dev)
        sf.insert(0, "sample", s)
        stage_frames.append(sf)
        if s == 0:
            ops = _ops_frame(sim.stages)
            units = _pim_units_frame(sim.stages)
        e = _energy_j(dev, sf, end)
        rows.append({"sample": s, "batch": len(ctx), "mean_context": float(np.mean(ctx)), "cycles": end,
                     "seconds": sec, "tokens_per_s": len(ctx) / sec,
                     "npu_util": float((sf["npu_util"] * sf["cycles"]).sum() / end),
                     "pim_util": float((sf["pim_util"] * sf["cycles"]).sum() / end),
                     "mem_bw_util": float((sf["mem_bw_util"] * sf["cycles"]).sum() / end),
                     "energy_j": sum(e.values()) * dev.tp, "kernel_wall_s": sim.ms.wall_s})
        sim_cycles += end
    df = pd.DataFrame(rows)
    stages = pd.concat(stage_frames, ignore_index=True)
    wall = sim_seconds(timer)
    tok = float(df["batch"].sum())
    stats = {"tokens_per_s": float(df["tokens_per_s"].mean()), "iteration_s": float(df["seconds"].mean()),
             "npu_util": float(df["npu_util"].mean()), "pim_util": float(df["pim_util"].mean()),
             "mem_bw_util": float(df["mem_bw_util"].mean()),
             "dram_energy_per_token_j": float(df["energy_j"].sum() / tok),
             "simulated_cycles": int(sim_cycles), "wall_s": wall, "cycles_per_s": sim_cycles / wall}
    stats.update(_common(su, dev, df, stages))
    stats["timeline_of"] = f"sample 0's decode iteration ({dev.layers} layer{'s' * (dev.layers != 1)})"
    res = Result(stats=stats, df=df, manifest=make_manifest(su.system, su.resolved, seed=seed))
    res.tables["stages"] = stages
    res.tables["timeline"] = _timeline(stages[stages["sample"] == 0], dev)
    res.tables["npu_ops"] = ops
    res.tables["pim_units"] = units
    return res


def _pim_units_frame(stages: list[StageStats]) -> pd.DataFrame:
    """Sample 0's PIM units, stage by stage: when each finished its last logits GEMV and its last attention GEMV,
    in DRAM cycles from the stage's start (how the channels finish in turn under `pim_issue: per_cycle`;
    reports/neupims/issue_channels.py holds them beside the code's per-channel ends)."""
    rows = [{"stage": s.name, "layer": s.layer, "unit": u,
             "logits_end_cycle": s.pim_unit_logits_end.get(u, s.start) - s.start, "end_cycle": e - s.start}
            for s in stages for u, e in sorted(s.pim_unit_end.items())]
    return pd.DataFrame(rows, columns=["stage", "layer", "unit", "logits_end_cycle", "end_cycle"])


def _ops_frame(stages: list[StageStats]) -> pd.DataFrame:
    """Sample 0's NPU operators, stage by stage in program order: start and duration in DRAM cycles."""
    rows = [{"stage": s.name, "layer": s.layer, "op": name, "start_cycle": t0, "cycles": t1 - t0}
            for s in stages for name, t0, t1 in s.npu_ops]
    return pd.DataFrame(rows, columns=["stage", "layer", "op", "start_cycle", "cycles"])


STAGE_FORMULA = "NeuPIMs' stage formula, T(N) = A + B + (C + D)(N - 1) + E + F"
PROPORTIONAL = "proportional: the simulated layers' time x layers / layers simulated"


def layer_kinds(model: Any) -> list[bool]:
    """Each layer's kind for `whole_model_cycles`: whether its FFN is MoE."""
    return [model.is_moe_layer(layer) for layer in range(model.n_layers)]


def whole_model_cycles(stages: pd.DataFrame, n_layers: int, layers: int, kinds: list[Any] | None = None,
                       column: str = "cycles") -> tuple[float, str]:
    """One sample's decode step of the whole model in cycles, from its first `layers` layers simulated
    (`stages`: that sample's rows of the stages table, columns stage, layer, cycles), and how it was
    extrapolated; `column`: another quantity each stage adds up (a command count, `n_RD`) the same way. With
    sub-batch interleaving the layers chain through the steady stages C and D, so the first layer's A, B and the
    last one's E, F are paid once per step: the simulated time plus (N - L) x the mean
    simulated C + D (exact to 0.1 % against a run of all 32 layers of GPT3-7B at batch 512, where scaling the
    time by N / L overstates it by 9.6 %). Layers of several kinds (`kinds`, one per model layer: an MoE FFN
    every k-th block, GLaM) differ in the FFN their C, D and E, F carry: T(N) = A + B + the sum over layers
    0..N-2 of their kind's mean simulated C + D + E, F of the last layer's kind (the simulated E + F moved by the
    two kinds' C + D difference), when the simulated layers hold a C + D of every kind needed. Without
    interleaving every layer is the same A + B + E: the simulated time x N / L. Otherwise (one interleaved
    layer, or a kind not simulated) proportional too, and the returned method says so."""
    t = float(stages[column].sum())
    if layers == n_layers:
        return t, "every layer simulated"
    if layers < 2 or not set(stages["stage"]) >= {"C", "D"}:
        return t * n_layers / layers, PROPORTIONAL
    cd = stages[stages["stage"].isin(["C", "D"])]
    if kinds is None or len(set(kinds)) == 1:
        return t + (n_layers - layers) * float(cd[column].sum()) / (layers - 1), STAGE_FORMULA
    per_layer = cd.groupby("layer")[column].sum()
    cd_of = {k: float(np.mean([c for layer, c in per_layer.items() if kinds[layer] == k]))
             for k in {kinds[layer] for layer in per_layer.index}}
    if not {*kinds[:n_layers - 1], kinds[n_layers - 1]} <= cd_of.keys():
        return t * n_layers / layers, PROPORTIONAL + " (the simulated layers hold no C + D of every layer kind)"
    ab = float(stages.loc[stages["stage"].isin(["A", "B"]), column].sum())
    ef = float(stages.loc[stages["stage"].isin(["E", "F"]), column].sum())
    ef += cd_of[kinds[n_layers - 1]] - cd_of[kinds[layers - 1]]
    return ab + sum(cd_of[k] for k in kinds[:n_layers - 1]) + ef, STAGE_FORMULA + " by layer kind"


def _common(su: Setup, dev: Device, df: pd.DataFrame, stages: pd.DataFrame) -> dict[str, Any]:
    """The common metric schema (archsim.metrics) of an iteration-mode run: the decode step of the whole model
    (whole_model_cycles), its DRAM energy split into `dram` (activates, reads, writes, refresh), `pim` (the PIM
    commands) and `static` (background), priced on the whole model's command counts (each stage's counts
    extrapolated as its cycles are) and time, and the NPU's MACs of the whole model at the study's per-MAC
    energy (`compute`). Not modelled: the TP links' energy, the embedding and LM head, the prefill."""
    from archsim import energy as energy_mod
    from archsim import metrics
    from archsim.energy import PIM_COMPONENT

    m, tp = su.model, su.tp
    tok = float(df["batch"].sum())
    kinds = layer_kinds(m)
    counts = [c for c in stages.columns if c.startswith("n_")]
    step, dram_j, how = 0.0, dict.fromkeys(["background", "refresh", PIM_COMPONENT], 0.0), ""
    samples = stages.groupby("sample")
    for _, g in samples:
        cycles, how = whole_model_cycles(g, m.n_layers, dev.layers, kinds)
        step += cycles * dev.spec.tCK_ps * 1e-12 / samples.ngroups
        n = {c[2:]: round(whole_model_cycles(g, m.n_layers, dev.layers, kinds, column=c)[0]) for c in counts}
        for k, v in energy_mod.dram_energy_pj(dev.spec, n, round(cycles), dev.spec.channels).items():
            dram_j[k] = dram_j.get(k, 0.0) + v * 1e-12 * dev.tp
    E, F = m.d_model, m.d_ff
    Q, KV = m.q_dim, m.kv_dim                     # MHA: Q = KV = E; GQA: K and V per KV head
    ffn = (3 if m.gated_ffn else 2) * E * F
    per_token = E * (Q + 2 * KV) + Q * E + ffn      # QKV, projection, FFN GEMMs
    # an MoE layer: the router and experts_per_token experts' FFNs in place of the dense FFN
    moe_extra = sum(kinds) * (E * m.n_experts + (m.experts_per_token - 1) * ffn)
    macs = float(df["batch"].sum()) * (per_token * m.n_layers + moe_extra)     # the whole model, all samples
    if su.variant.pim_arbitration is None:
        macs += float((df["batch"] * df["mean_context"]).sum()) * 2 * Q * m.n_layers   # q.K^T and s.V on the NPU
    pim, static = dram_j[PIM_COMPONENT], dram_j["background"]
    parts = {"dram": (sum(dram_j.values()) - pim - static) / tok, "pim": pim / tok,
             "compute": macs * metrics.DEFAULT_MAC_PJ * 1e-12 / tok, "static": static / tok}
    sc = metrics.scope(layers_simulated=dev.layers, layers=m.n_layers, devices=tp, extrapolation=how,
                       not_modelled=["embedding and LM head", "prefill (iteration mode)"],
                       compute_energy=f"{metrics.DEFAULT_MAC_PJ} pJ per NPU MAC (archsim.metrics.DEFAULT_MAC_PJ)")
    return metrics.common(step, int(df["batch"].mean()), parts, sc)


def _timeline(stages: pd.DataFrame, dev: Device) -> pd.DataFrame:
    """Per stage, when the NPU and the PIM side were busy (start of the stage to each side's last event),
    in the columns `archsim report` draws as a unit-busy timeline."""
    s = dev.spec.tCK_ps * 1e-12
    rows = []
    for _, r in stages.iterrows():
        op = f"{r['stage']}{int(r['layer'])}"
        for unit, end in (("NPU", r["npu_end_cycle"]), ("PIM", r["pim_end_cycle"])):
            if end > r["start_cycle"]:
                rows.append({"unit": unit, "op": op, "start_s": r["start_cycle"] * s, "end_s": end * s})
    return pd.DataFrame(rows, columns=["unit", "op", "start_s", "end_s"])


def run_serving_mode(su: Setup, seed: int) -> Result:
    """Continuous batching over a request stream: every decode iteration simulates the first `su.layers` layers
    on the channel engine and takes the whole model's time from them (whole_model_cycles; the DRAM state carries
    over between iterations in simulated cycles), prefill the whole model's on standalone NPUs, the GPU baselines
    the whole model's. So `layers` trades simulation time for the extrapolation's error, as in iteration mode."""
    import dataclasses

    timer = clock()       # simulation time: a first run's kernel compile apart (sim_compile_s)
    model, layers, mode = su.model, su.model.n_layers, su.mode
    kinds = layer_kinds(model)
    if _is_trace(su.dataset):
        requests = serving.read_trace(su.dataset)[:mode.requests]
    else:
        requests = serving.generate_requests(mode.requests, su.dataset, seed=seed)
    dev = None if su.gpu_system else build_device(su)
    channel_of: dict[int, int] = {}
    sim_cycles = [0]
    state: dict[str, Any] = {}

    npu = su.npu
    prefill_cache: dict[int, float] = {}

    def prefill_s(prompt: int) -> float:
        """The prompt on standalone NPUs (one per TP shard, the same NPU model): every GEMM of a layer with the
        tile model on its arrays (N split over the arrays; prompt GEMMs are compute-bound, so DMA is not
        simulated), q.K^T and s.V per head, x layers."""
        if prompt not in prefill_cache:
            E, F, tp, dk = model.d_model, model.d_ff, su.tp, model.d_head
            cycles = 0
            Q, KV = model.q_dim, model.kv_dim
            ffn_in = [(E, F // tp)] * (2 if model.gated_ffn else 1)     # a gated FFN's gate and up GEMMs
            ffn = [*ffn_in, (F // tp, E)]

            def gemms(rows: int, shapes) -> int:
                return sum(schedule_gemm(npu, rows, k, math.ceil(n / npu.arrays)).compute_only_cycles()
                           for k, n in shapes)
            cycles += gemms(prompt, [(E, (Q + 2 * KV) // tp), (Q // tp, E)])
            dense = gemms(prompt, ffn)
            # an MoE layer: the router, then each expert's FFN over its routed prompt tokens (uniform routing)
            moe_layers = [layer for layer in range(layers) if kinds[layer]]
            moe = sum(gemms(prompt, [(E, model.n_experts)]) + sum(gemms(int(c), ffn) for c in
                      routing_counts(model, prompt, "uniform", layer=layer) if c) for layer in moe_layers)
            heads = model.n_heads // tp
            per_head = (schedule_gemm(npu, prompt, dk, prompt).compute_only_cycles()
                        + schedule_gemm(npu, prompt, prompt, dk).compute_only_cycles())
            cycles += math.ceil(heads / npu.arrays) * per_head
            prefill_cache[prompt] = (layers * cycles + (layers - len(moe_layers)) * dense + moe) / npu.clock_hz
        return prefill_cache[prompt]

    def iteration_s(batch: serving.Batch) -> float:
        decode = [e for e in batch.entries if e.phase == "decode"]
        pre = max((prefill_s(e.new_tokens) for e in batch.entries if e.phase == "prefill"), default=0.0)
        if not decode:
            return pre
        ctx = [e.context_tokens for e in decode]
        if dev is None:
            return max(pre, gpu_iteration_s(dataclasses.replace(su, layers=layers), ctx)[0])
        # a request keeps the channel its KV cache was placed on at admission (greedy on current loads)
        new = [i for i, e in enumerate(decode) if e.request_id not in channel_of]
        if new:
            loads = [0.0] * dev.pim_units
            load_fn = serving.mha_load_fn(model, dev.tp)
            for e in decode:
                if e.request_id in channel_of:
                    loads[channel_of[e.request_id]] += load_fn(e.context_tokens)
            sub = [ctx[i] for i in new]
            if su.channel_assignment == "gmlbp":
                chans = serving.assign_channels_gmlbp(sub, dev.pim_units, load_fn, initial_loads=loads)
            else:
                chans = [(len(channel_of) + j) % dev.pim_units for j in range(len(sub))]
            for i, ch in zip(new, chans, strict=True):
                channel_of[decode[i].request_id] = ch
        chans = [channel_of[e.request_id] for e in decode]
        # one device for the whole run: its DRAM state (open rows, refresh phase) carries over between iterations
        if "sim" not in state:
            state["sim"] = DecodeSimulator(dev, refresh=su.refresh)
        sim = state["sim"]
        start = state.get("clock", 0)
        k0 = len(sim.stages)
        end = sim.iteration(ctx, chans, su.sub_batch, start=start)
        state["clock"] = end
        sim_cycles[0] += end - start
        stages = pd.DataFrame([(st.name, st.layer, st.end - st.start) for st in sim.stages[k0:]],
                              columns=["stage", "layer", "cycles"])
        whole, state["extrapolation"] = whole_model_cycles(stages, layers, dev.layers, kinds)
        return max(pre, whole * dev.spec.tCK_ps * 1e-12)

    cap = (dev.kv_capacity_bytes if dev is not None else su.tp * 40 * 2**30 - model.weight_bytes)
    batcher = serving.ContinuousBatcher(su.batch, int(cap), model.kv_bytes_per_token, iteration_s,
                                        max_iterations=mode.max_iterations)
    out = batcher.run(requests)
    it = out.iterations_df()
    rq = out.requests_df()
    tbt = np.repeat(it["duration_s"].to_numpy(), it["decode_tokens"].to_numpy())
    ttft = (rq["first_token_s"] - rq["arrival_s"]).to_numpy()
    wall = sim_seconds(timer)
    stats = {"tokens_per_s": out.output_tokens_per_s, "makespan_s": out.makespan_s, "iterations": len(it),
             "wall_s": wall, "simulated_cycles": sim_cycles[0],
             "extrapolation": state.get("extrapolation", "every layer (an analytic model)")}
    for p in (50, 90, 99):
        stats[f"tbt_p{p}_s"] = float(np.percentile(tbt, p)) if len(tbt) else 0.0
        stats[f"ttft_p{p}_s"] = float(np.percentile(ttft, p))
    res = Result(stats=stats, df=it, manifest=make_manifest(su.system, su.resolved, seed=seed))
    res.tables["requests"] = rq
    return res
