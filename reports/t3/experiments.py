"""Experiments behind the T3 report (issue 34), each a run that toggles one cause or checks one resolution:

* `window`: every simulated row on the windowed driver (16 and 64 cycles) instead of the exact one -> window.csv;
* `tokens`: T3 and T3-MCA on every simulated row at 1008 tokens (1.6% fewer) -> experiments_tokens.csv;
  with `window`, the resolution of the T3-MCA-over-T3 headline;
* `bidir`: every row with the reduce-scatter on both directions of the ring -> results_bidir.csv;
* `causes`: the paper's main rows (Mega-GPT-2, T-NLG at TP 8 and 16) under one toggle at a time - the ring's
  directions, the GEMM's per-CU rate, the token count, what a held-back source's rows do (`mca_gate`), the
  threshold rule -> experiments_causes.csv;
* `l2`: the GEMM's DRAM reads in Sequential over T3 from the L2 alone (`_Sim.replay_l2`, equal to a timed
  run's) on every simulated row at 1024, 2048 and 4096 tokens -> experiments_l2.csv;
* `l2_wave`: the same ratio on the GEMM-bound rows of the paper's main set under a larger wave (two workgroups per
  CU, 256-row tiles, 256 x 256 tiles) and a shorter K step (64): the GEMM's tiling, which the paper does not
  state, as a cause of the gap to its 1.56x -> experiments_l2_wave.csv;
* `devices`: rows of the paper's main set with every device simulated (`devices: all`) instead of device 0 and
  its neighbours by ring symmetry (the report's rows), the one-device model's own resolution -> experiments_devices.csv;
* `mca`: T3-MCA's threshold x gate on T-NLG FC-2, TP 8 -> experiments_mca.csv, fig_mca.png;
* `nmc`: the NMC update's cost (adder latency nALU, and the RD + adder + WR form) against the 500B-class
  T3-MCA geomean, every 500B-class row -> experiments_nmc.csv, fig_nmc_cost.png;
* `hash`: the unhashed address layout on GPT-3 OP, TP 32 -> experiments_hash.csv;
* `jitter`: T3 on Mega-GPT-2's rows (TP 8 and 16) on the exact driver with every enqueue delayed by a seeded
  0..J cycles (J = 1, 4): how far a row moves under perturbations of a cycle, beside the windowed loop's gaps
  -> experiments_jitter.csv.

    .venv/bin/python reports/t3/experiments.py [--part window,tokens,...] [--tokens N] [-o DIR]

Rows are appended as they finish (a killed run resumes). make_report.py reads the CSVs into README.md.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import make_report as MR  # noqa: E402

MCA_CASE = ("t-nlg", "fc2_fwd", 8)
HASH_CASE = ("gpt3-175b", "op_fwd", 32)
UNHASHED = "RoRaBgBaChCo"
MAIN_CASES = [c for c in MR.CASES if c[0] in MR.MAIN]
BIG_CASES = [c for c in MR.CASES if c[0] in MR.BIG]
TOKENS_PERTURBED = 1008          # 1.6% fewer than the report's 1024
# toggle name -> (config keys, preset key paths, tokens or None for the report's); the first is the baseline
CAUSES = {
    "report defaults": ({}, {}, None),
    "ring on both directions": ({"ring_directions": 2}, {}, None),
    "GEMM at half the per-CU rate": ({}, {"gpu.flops_per_cu_cycle": 512}, None),
    "both directions, GEMM at half rate": ({"ring_directions": 2}, {"gpu.flops_per_cu_cycle": 512}, None),
    "2048 tokens": ({}, {}, 2048),
    "held-back rows kept (mca_gate all)": ({"mca_gate": "all"}, {}, None),
    "held-back source finishes its open rows (mca_gate row)": ({"mca_gate": "row"}, {}, None),
    "threshold from the first stage only (auto)": ({"mca_threshold": "auto"}, {}, None),
    "threshold 32 (fixed)": ({"mca_threshold": 32}, {}, None),
}
MCA_SWEEP = [(thr, gate) for gate in ("yield", "all", "row") for thr in (4, 16, 32, "auto", "dynamic")]
NMC_VARIANTS = [(f"NMC_ADD, nALU {a}", a, "command") for a in (4, 16, 48)] + [("RD + adder + WR", 4, "rd_wr")]


def part_window(out: Path, tokens: int) -> None:
    for w in (16, 64):
        MR.simulate_table(out / "window.csv", MR.CASES, MR.SUBLAYERS, tokens, keys={"window_cycles": w},
                          tags={"window": w}, copies=False)


def part_tokens(out: Path, tokens: int) -> None:
    MR.simulate_table(out / "experiments_tokens.csv", MR.CASES, MR.SUBLAYERS, TOKENS_PERTURBED,
                      keys={"configs": ["t3", "t3-mca"]}, copies=False)


DEVICE_CASES = [("mega-gpt2", 8), ("t-nlg", 8)]       # the main set at TP 8: every device fits in memory here


def part_devices(out: Path, tokens: int) -> None:
    MR.simulate_table(out / "experiments_devices.csv", DEVICE_CASES, ["op_fwd", "fc2_fwd"], tokens,
                      keys={"devices": "all"}, tags={"devices": "all"}, copies=False)


def part_bidir(out: Path, tokens: int) -> None:
    MR.simulate_table(out / "results_bidir.csv", MR.CASES, MR.SUBLAYERS, tokens, keys={"ring_directions": 2})


def _seed(csv: Path, src: pd.DataFrame | None, cases: list[tuple[str, int]], tags: dict) -> None:
    """Rows of `src` (a table run with the same config keys) for `cases` into `csv` under `tags`, so
    simulate_table does not run them again (the runs are deterministic: tests/test_t3_report.py re-simulates)."""
    if src is None:
        return
    rows = MR._read(csv.parent, csv.name)
    rows = [] if rows is None else rows.to_dict("records")
    have = {tuple(r[k] for k in MR.KEY + list(tags)) for r in rows}
    take = MR.distinct(src[src[["model", "tp"]].apply(tuple, axis=1).isin(cases)])
    new = [{**r, **tags} for r in take.to_dict("records") if tuple(r[k] for k in MR.KEY) + tuple(tags.values()) not in have]
    if new:
        pd.DataFrame(rows + new).to_csv(csv, index=False)


def part_causes(out: Path, tokens: int) -> None:
    # the defaults are results.csv's rows and both ring directions results_bidir.csv's, where already run
    _seed(out / "experiments_causes.csv", MR._read(out, "results.csv"), MAIN_CASES, {"toggle": "report defaults"})
    _seed(out / "experiments_causes.csv", MR._read(out, "results_bidir.csv"), MAIN_CASES,
          {"toggle": "ring on both directions"})
    for name, (keys, preset, tok) in CAUSES.items():
        MR.simulate_table(out / "experiments_causes.csv", MAIN_CASES, MR.SUBLAYERS, tok or tokens, keys=keys,
                          preset=preset, tags={"toggle": name}, copies=False)


def part_l2(out: Path, tokens: int) -> None:
    from archsim.systems.t3.params import load_params
    from archsim.systems.t3.shapes import sublayer_shape
    from archsim.systems.t3.sim import _Sim
    from archsim.workload.spec import load_model

    csv = out / "experiments_l2.csv"
    rows = MR._read(out, "experiments_l2.csv")
    rows = [] if rows is None else rows.to_dict("records")
    have = {(r["model"], r["tp"], r["sublayer"], r["tokens"]) for r in rows}
    res = pd.read_csv(out / "results.csv").set_index(["model", "tp", "sublayer"])
    params = load_params()
    for tok in (tokens, 2 * tokens, 4 * tokens):
        for model, tp in MR.CASES:
            for sub in MR.SUBLAYERS:
                if (model, tp, sub, tok) in have or MR.twin_of(model, tp, sub, tok):
                    continue
                shape = sublayer_shape(load_model(model), sub, tp, tok)
                reads = {c: _Sim(params, shape, tp, c, devices="one").replay_l2() for c in ("sequential", "t3")}
                rows.append({"model": model, "tp": tp, "sublayer": sub, "tokens": tok,
                             "gemm_read_bytes_sequential": reads["sequential"] * params.spec.access_bytes,
                             "gemm_read_bytes_t3": reads["t3"] * params.spec.access_bytes,
                             "gemm_read_ratio": reads["sequential"] / reads["t3"],
                             # GEMM-bound at the report's token count (GEMM and reduce-scatter both scale with it)
                             "gemm_bound": bool(res.loc[(model, tp, sub), "gemm_over_rs"] >= 1)})
                print(rows[-1], flush=True)
                pd.DataFrame(rows).to_csv(csv, index=False)


# GEMM tilings the paper does not state (its Accel-Sim GEMM traces): each replaces fields of the preset's GpuConfig
L2_WAVES = {"preset": {}, "2 workgroups per CU": {"cus": 160}, "256 x 128 tiles": {"tile_m": 256},
            "256 x 256 tiles": {"tile_m": 256, "tile_n": 256}, "K step 64": {"k_step": 64}}


def part_l2_wave(out: Path, tokens: int) -> None:
    from archsim.systems.t3.params import load_params
    from archsim.systems.t3.shapes import sublayer_shape
    from archsim.systems.t3.sim import _Sim
    from archsim.workload.spec import load_model

    base = load_params()
    res = pd.read_csv(out / "results.csv")
    main = res[res.model.isin(["mega-gpt2", "t-nlg"]) & (res.gemm_over_rs >= 1) & res.copy_of.isna()]
    rows = []
    for r in main.itertuples():
        shape = sublayer_shape(load_model(r.model), r.sublayer, r.tp, tokens)
        for name, fields in L2_WAVES.items():
            params = dataclasses.replace(base, gpu=dataclasses.replace(base.gpu, **fields))
            reads = {c: _Sim(params, shape, r.tp, c, devices="one").replay_l2() for c in ("sequential", "t3")}
            rows.append({"model": r.model, "tp": r.tp, "sublayer": r.sublayer, "tokens": tokens, "tiling": name,
                         "gemm_read_ratio": reads["sequential"] / reads["t3"]})
            print(rows[-1], flush=True)
    pd.DataFrame(rows).to_csv(out / "experiments_l2_wave.csv", index=False)


def _sweep_row(r, seq, **keys) -> dict:
    us = r.spec.tCK_s * 1e6
    traj = r.extra["threshold_trajectory"]
    return {**keys, "config": r.config, "sublayer_us": r.sublayer_s * 1e6, "speedup": seq.sublayer_s / r.sublayer_s,
            "gemm_us": r.gemm_cycles * us, "rs_end_us": r.rs_end_cycles * us,
            "comm_stall_cycles": r.extra["compute_stall_cycles"] - seq.extra["compute_stall_cycles"],
            "comm_latency_max_us": r.comm_latency_max * us,
            **({"threshold_min": min(traj), "threshold_max": max(traj)} if traj else {})}


def part_mca(out: Path, tokens: int) -> None:
    from archsim.systems.t3.params import load_params
    from archsim.systems.t3.shapes import sublayer_shape
    from archsim.systems.t3.sim import simulate_sublayer
    from archsim.workload.spec import load_model

    csv = out / "experiments_mca.csv"
    rows = MR._read(out, "experiments_mca.csv")
    rows = [] if rows is None else rows.to_dict("records")
    done = {(str(r["threshold"]), r["gate"]) for r in rows}
    model, sub, tp = MCA_CASE
    shape = sublayer_shape(load_model(model), sub, tp, tokens)
    key = {"case": f"{model} {sub} TP{tp}", "tokens": tokens}
    seq = simulate_sublayer(load_params(), shape, tp, "sequential", devices="one")
    if ("none", "-") not in done:
        for c in ("sequential", "t3"):
            r = seq if c == "sequential" else simulate_sublayer(load_params(), shape, tp, c, devices="one")
            rows.append({**_sweep_row(r, seq, **key), "threshold": "none", "gate": "-"})
        pd.DataFrame(rows).to_csv(csv, index=False)
    for thr, gate in MCA_SWEEP:
        if (str(thr), gate) in done:
            continue
        p = load_params(overrides={"mca.threshold": thr, "mca.gate": gate})
        r = simulate_sublayer(p, shape, tp, "t3-mca", devices="one")
        rows.append({**_sweep_row(r, seq, **key), "threshold": thr, "gate": gate})
        print(rows[-1], flush=True)
        pd.DataFrame(rows).to_csv(csv, index=False)


def _nmc_params(alu: int, form: str):
    from archsim.dram.spec import load_spec
    from archsim.systems.t3.params import load_params

    base = load_params()
    spec = load_spec(base.spec.raw["name"], overrides={"org.channels": base.spec.channels, "timing.nALU": alu})
    return dataclasses.replace(base, spec=spec, alu_latency_cycles=alu, nmc_update=form)


def _nmc_run(model: str, tp: int, sub: str, tokens: int, alu: int, form: str) -> dict:
    """T3 and T3-MCA of one row with the update's adder latency `alu` and form `form` (in a child process)."""
    from archsim.systems.t3.shapes import sublayer_shape
    from archsim.systems.t3.sim import simulate_sublayer
    from archsim.workload.spec import load_model

    p = _nmc_params(alu, form)
    shape = sublayer_shape(load_model(model), sub, tp, tokens)
    return {c: simulate_sublayer(p, shape, tp, c, devices="one").sublayer_s * 1e6 for c in ("t3", "t3-mca")}


def part_nmc(out: Path, tokens: int) -> None:
    """Every 500B-class row with each update variant; Sequential (plain writes, no updates) and the ideal
    overlap do not depend on it: their times are results.csv's."""
    from concurrent.futures import ProcessPoolExecutor

    from diagnose import access_costs

    csv = out / "experiments_nmc.csv"
    res = pd.read_csv(out / "results.csv")
    big = MR.distinct(res[res["model"].isin(MR.BIG)])
    rows = MR._read(out, "experiments_nmc.csv")
    rows = [] if rows is None else rows.to_dict("records")
    have = {(r["update"], r["model"], r["tp"], r["sublayer"]) for r in rows}
    for name, alu, form in NMC_VARIANTS:
        cost = access_costs(_nmc_params(alu, form))
        ratio = cost["nmc_update (NMC_ADD command)" if form == "command" else "nmc_update (RD, adder, WR)"] / cost["write"]
        for r in big.to_dict("records"):
            if (name, r["model"], r["tp"], r["sublayer"]) in have:
                continue
            if (alu, form) == NMC_VARIANTS[0][1:]:          # the report's own update: results.csv's row
                t = {"t3": r["sequential_us"] / r["speedup_t3"], "t3-mca": r["sequential_us"] / r["speedup_t3_mca"]}
            else:
                with ProcessPoolExecutor(max_workers=1, max_tasks_per_child=1) as ex:
                    t = ex.submit(_nmc_run, r["model"], r["tp"], r["sublayer"], tokens, alu, form).result()
            rows.append({"update": name, "nALU": alu, "update_vs_write": ratio, "model": r["model"], "tp": r["tp"],
                         "sublayer": r["sublayer"], "tokens": tokens, "speedup_t3": r["sequential_us"] / t["t3"],
                         "speedup_t3_mca": r["sequential_us"] / t["t3-mca"], "speedup_ideal": r["speedup_ideal"]})
            print(rows[-1], flush=True)
            pd.DataFrame(rows).to_csv(csv, index=False)


def part_hash(out: Path, tokens: int) -> None:
    model, sub, tp = HASH_CASE
    MR.simulate_table(out / "experiments_hash.csv", [(model, tp)], [sub], tokens,
                      keys={"memory_mapping": UNHASHED}, tags={"mapping": "unhashed"})


JITTER_CASES = [c for c in MR.CASES if c[0] == "mega-gpt2"]
JITTER_MAX = (0, 1, 4)            # 0: the exact driver itself (checks the row against results.csv)
JITTER_SEEDS = (0, 1, 2)


def _jitter_run(model: str, tp: int, sub: str, tokens: int, jitter: int, seed: int) -> dict:
    from archsim.systems.t3 import sim as t3
    from archsim.systems.t3 import system as t3sys

    su = t3sys.setup({"model": model, "tp": tp, "sublayer": sub, "tokens": tokens, "configs": ["t3"]})
    params = t3sys.variant_params(su.params, su.variants[0])
    run = t3.simulate_sublayer(params, su.shape, su.tp, "t3", devices=su.devices, ring=su.ring,
                               enqueue_jitter=(jitter, seed) if jitter else None)
    added = run.extra.get("enqueue_jitter", {}).get("cycles_added", 0)
    return {"t3_us": run.sublayer_s * 1e6, "t3_rs_end_cycles": run.rs_end_cycles, "cycles_added": added}


def part_jitter(out: Path, tokens: int) -> None:
    csv = out / "experiments_jitter.csv"
    old = MR._read(out, "experiments_jitter.csv")
    rows = [] if old is None else old.to_dict("records")
    have = {(r["model"], r["tp"], r["sublayer"], r["jitter_max_cycles"], r["seed"]) for r in rows}
    res = MR.distinct(pd.read_csv(out / "results.csv"))
    for _, r in res[[(m, tp) in JITTER_CASES for m, tp in zip(res["model"], res["tp"], strict=True)]].iterrows():
        for jit in JITTER_MAX:
            for seed in JITTER_SEEDS[:1] if jit == 0 else JITTER_SEEDS:
                if (r["model"], r["tp"], r["sublayer"], jit, seed) in have:
                    continue
                got = _jitter_run(r["model"], int(r["tp"]), r["sublayer"], tokens, jit, seed)
                rows.append({"model": r["model"], "tp": r["tp"], "sublayer": r["sublayer"], "tokens": tokens,
                             "jitter_max_cycles": jit, "seed": seed, **got,
                             "speedup_t3": r["sequential_us"] / got["t3_us"],
                             "speedup_t3_exact": r["speedup_t3"]})
                print(rows[-1], flush=True)
                pd.DataFrame(rows).to_csv(csv, index=False)


PARTS = {"window": part_window, "tokens": part_tokens, "bidir": part_bidir, "causes": part_causes, "l2": part_l2,
         "l2_wave": part_l2_wave, "devices": part_devices, "mca": part_mca, "nmc": part_nmc, "hash": part_hash,
         "jitter": part_jitter}


def figures(out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from archsim.report.palette import color_of

    made = []
    mca = MR._read(out, "experiments_mca.csv")
    if mca is not None:
        ref = mca[mca["threshold"].astype(str) == "none"]
        m = mca[mca["threshold"].astype(str) != "none"]
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.6))
        labels = list(dict.fromkeys(m["threshold"].astype(str)))
        gates = list(dict.fromkeys(m["gate"]))
        w = 0.8 / len(gates)
        for j, gate in enumerate(gates):
            sel = m[m["gate"] == gate]
            xs = [labels.index(str(t)) + (j - (len(gates) - 1) / 2) * w for t in sel["threshold"].astype(str)]
            style = {"color": color_of("t3_mca"), "alpha": (1.0, 0.6, 0.35)[j % 3],
                     "hatch": (None, "//", "..")[j % 3], "edgecolor": "black", "linewidth": 0.3}
            a1.bar(xs, sel["sublayer_us"], w, label=f"T3-MCA, gate {gate}", **style)
            a2.bar(xs, sel["gemm_us"], w, label=f"T3-MCA, gate {gate}", **style)
        for _, r in ref.iterrows():
            name = "Sequential" if r["config"] == "sequential" else "T3 (FR-FCFS, no MCA)"
            style = ":" if r["config"] == "sequential" else "--"
            a1.axhline(r["sublayer_us"], ls=style, color=color_of(r["config"]), label=name)
            a2.axhline(r["gemm_us"], ls=style, color=color_of(r["config"]), label=f"{name}: GEMM")
        for a in (a1, a2):
            a.set_xticks(range(len(labels)))
            a.set_xticklabels(labels)
            a.set_xlabel("MCA occupancy threshold (compute-queue entries per channel)")
            a.set_ylim(0, a.get_ylim()[1] * 1.35)
            a.legend(fontsize=7, loc="upper right", ncol=2)
        a1.set_ylabel("sublayer time (microseconds)")
        a2.set_ylabel("GEMM end (microseconds)")
        a1.set_title(f"{mca['case'].iloc[0]}, {int(mca['tokens'].iloc[0])} tokens: sublayer")
        a2.set_title("GEMM (T3-MCA's aim: shorten it)")
        fig.tight_layout()
        p = out / "fig_mca.png"
        fig.savefig(p, dpi=120)
        plt.close(fig)
        made.append(p)
    nmc = MR._read(out, "experiments_nmc.csv")
    if nmc is not None:
        g = MR.nmc_table(nmc)
        fig, ax = plt.subplots(figsize=(7.5, 4.6))
        names = [f"{r['update']}\n({r['update_vs_write']:.2f}x a write's DRAM time)" for _, r in g.iterrows()]
        ax.bar(range(len(g)), g["t3_mca_geomean"] * 100, 0.6, label="T3-MCA geomean (ours)", color=color_of("t3_mca"))
        ax.set_xticks(range(len(g)))
        ax.set_xticklabels(names, fontsize=7)
        ax.axhline(g["ideal_geomean"].iloc[0] * 100, ls="--", lw=2, color=color_of("ideal"),
                   label="ideal GEMM-RS overlap geomean (ours)")
        ax.axhline(MR.PAPER["big_t3_mca"][0] * 100, ls=":", color=color_of("paper"),
                   label=f"paper: T3-MCA geomean (+{MR.PAPER['big_t3_mca'][0]:.0%})")
        ax.set_xlabel("NMC update: form and adder latency nALU (cycles of 1 ns)")
        ax.set_ylabel("sublayer speed-up over Sequential (%)")
        ax.set_title(f"500B-class sublayers (GPT-3, PaLM, MT-NLG at TP 32; {int(g['rows'].iloc[0])} rows): "
                     "geomeans, like the paper's", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        p = out / "fig_nmc_cost.png"
        fig.savefig(p, dpi=120)
        plt.close(fig)
        made.append(p)
    return made


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", default=",".join(PARTS))
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("-o", "--out", type=Path, default=HERE, help="output folder (default: the report's own)")
    ap.add_argument("--figures-only", action="store_true")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.figures_only:
        for part in args.part.split(","):
            PARTS[part](args.out, args.tokens)
    for p in figures(args.out):
        print("wrote", p)


if __name__ == "__main__":
    main()
