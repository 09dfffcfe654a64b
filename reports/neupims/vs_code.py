"""archsim beside NeuPIMs' own simulator on the same input, stage by stage: writes reports/neupims/vs_code.csv.

Run:  .venv/bin/python reports/neupims/vs_code.py [-o DIR] [--jobs J]

The simulator's cycles are measured rows (code_results.csv, one per case and stage, as
benchmarks/neupims_code/run_neupims.py prints them from a Release build of casys-kaist/NeuPIMs f299af3; the
command of each case is in CASES). archsim runs the same configuration by name: system neupims, NPU preset
`neupims_code`, mapping `mappings/neupims_code.yaml`, DRAM standard `neupims_code` (one command a cycle), the
same batch snapshot (dataset = the trace file), one
decoder block: with sub-batch interleaving two layers are simulated, so that stages C and D carry the next
layer's QKV as the code's single block does; without it one layer (stages A, B, E). Runs are cached under
DIR/runs like make_report.py's, named by their config's content (run_cache.py).

Columns: case, stage, code_cycles, archsim_cycles, diff_pct (archsim / code - 1), then the PIM-busy cycles
(the code's `pim_cycles`: per channel, cycles with PIM commands queued, mean over channels; archsim: per PIM
unit, the stage's start to its last attention GEMV, mean over units) and the memory-bandwidth utilisation as the
code defines it (`mem_bw_util`: read, write and READRES bursts x 2 cycles / channels / stage cycles; a PIM GEMV
counts one burst). Stages with PIM attention split in two where both simulators do: the logits and softmaxes
(the code's NeuPIMSLogitSoftmax operation; archsim: the stage's start to the attend's release) and the attend (the
code's NeuPIMSAttend; archsim: the release to its last attend GEMV's end), with logits_diff_pct and attend_diff_pct.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import run_cache  # noqa: E402

from archsim import api, paths  # noqa: E402
from archsim.results import load_result  # noqa: E402
from archsim.workload import serving  # noqa: E402

HERE = Path(__file__).resolve().parent
TRACES = "workloads/datasets/neupims_traces"
SIM = "configs/model_configs"
# case -> (model, tp, trace (repo-relative), sub-batch interleaving, the code's model config; its other inputs:
# --config configs/systolic_ws_128x128_dev.json --mem_config configs/memory_configs/neupims.json --sys_config
# configs/system_configs/sub-batch-{on,off}.json, the trace as --cli_config)
CASES = {
    "gpt3-7B_tp4_bs512_clb0_sbi-on": ("gpt3-7b", 4, f"{TRACES}/clb/share-gpt2-bs512-ms7B-tp4-clb-0.csv", True, f"{SIM}/gpt3-7B.json"),
    "gpt3-7B_tp4_bs512_clb0_sbi-off": ("gpt3-7b", 4, f"{TRACES}/clb/share-gpt2-bs512-ms7B-tp4-clb-0.csv", False, f"{SIM}/gpt3-7B.json"),
    "gpt3-7B_tp4_bs256_genclb0_sbi-on": ("gpt3-7b", 4, f"{TRACES}/generated/share-gpt2-bs256-ms7B-tp4-pp1-clb-0.csv", True, f"{SIM}/gpt3-7B.json"),
    "gpt3-7B_tp4_bs256_genclb0_sbi-off": ("gpt3-7b", 4, f"{TRACES}/generated/share-gpt2-bs256-ms7B-tp4-pp1-clb-0.csv", False, f"{SIM}/gpt3-7B.json"),
    # the code's gpt3-13B.json with n_tp 8 (the trace generator aborts for 13B at TP 4, batch 256)
    "gpt3-13B_tp8_bs256_genclb0_sbi-on": ("gpt3-13b", 8, f"{TRACES}/generated/share-gpt2-bs256-ms13B-tp8-pp1-clb-0.csv", True, "gpt3-13B.json with n_tp 8"),
    "gpt3-13B_tp8_bs256_genclb0_sbi-off": ("gpt3-13b", 8, f"{TRACES}/generated/share-gpt2-bs256-ms13B-tp8-pp1-clb-0.csv", False, "gpt3-13B.json with n_tp 8"),
    # one request of S tokens on every channel: the attention command streams in isolation
    **{f"uni{s}-off": ("gpt3-7b", 4, f"{TRACES}/micro/uni{s}.csv", False, f"{SIM}/gpt3-7B.json") for s in (32, 128, 512, 1024)},
    # the baselines as the released code defines them, on the case-1 trace: branch npu+pim (e51a4af) with its
    # newton.json (single row buffer, baseline_exp) and npupim.json; branch npu-only (57617ee) with dram.json and
    # npu-fusion.json (its stages A*, B*, E* cut from the per-operation log at FusedMHA)
    "npupim-baseline_gpt3-7B_tp4_bs512_clb0": ("gpt3-7b", 4, f"{TRACES}/clb/share-gpt2-bs512-ms7B-tp4-clb-0.csv", False,
                                               f"[npu+pim] {SIM}/gpt3-7B.json"),
    "npuonly-baseline_gpt3-7B_tp4_bs512_clb0": ("gpt3-7b", 4, f"{TRACES}/clb/share-gpt2-bs512-ms7B-tp4-clb-0.csv", False,
                                                f"[npu-only] {SIM}/gpt3-7B.json"),
}
CONFIG = {"system": "neupims", "npu": "neupims_code", "mapping": "neupims_code"}
# NeuPIMs' device as the code issues commands: one command a cycle per channel (standard neupims_code,
# neupims_controller.cc:62-83), where HBM2 (standard neupims) has separate row and column command buses
CODE_DRAM = {"standard": "neupims_code"}
# the baselines' systems in archsim: NPU+PIM on one blocked row buffer, NPU-only with the npu-only branch's array
BASELINE = {"npupim-baseline": {"system": "npu_pim"},
            "npuonly-baseline": {"system": "npu_only", "npu": "neupims_code_npu_only", "npu_attention": "fused_mha"}}
TOLERANCE = {"stage": 0.10, "block": 0.05}      # the target: every stage within 10 %, the block within 5 %


def config(case: str) -> dict:
    model, tp, trace, sbi, _ = CASES[case]
    return case_config(case, model, tp, trace, sbi)


def case_config(case: str, model: str, tp: int, trace: str, sbi: bool) -> dict:
    """archsim's config of a case of the code's: `model` at `tp` on the batch of `trace` (repo-relative), sub-batch
    interleaving `sbi`; a case named after a baseline (BASELINE's prefixes) runs that baseline's system."""
    batch = len(serving.read_snapshot(ROOT / trace).seq_lens)
    extra = next((v for k, v in BASELINE.items() if case.startswith(k)), {})
    cfg = {**CONFIG, **extra, "model": model, "tp": tp, "dataset": trace, "batch": batch, "sub_batch": sbi,
           "layers": 2 if sbi else 1}
    if cfg["system"] == "npu_only":
        del cfg["sub_batch"]        # nothing to interleave
    if cfg["system"] == "neupims":
        cfg["dram"] = dict(CODE_DRAM)
    return cfg


def _run(job: tuple[dict, Path]) -> Path:
    cfg, runs = job
    path = run_cache.run_path(runs, cfg)        # keyed on the config's content: an edited mapping re-runs
    old = load_result(path) if path.exists() else None
    if old is not None and not cfg["system"].startswith("gpu") and "npu_ops" not in old.tables:
        path.unlink()       # the run predates its npu_ops table: re-run
    if not path.exists():
        api.run(cfg, seed=0).write_json(path)
    return path


def stage_cycles(cfg: dict, runs: Path) -> dict[str, int]:
    """{stage: cycles} of sample 0 of the run of `cfg` (cached in `runs`): what the toggle tables compare."""
    st = load_result(_run((cfg, runs))).tables["stages"]
    st = st[st["sample"] == 0]
    return dict(zip(st["stage"], st["cycles"], strict=True))


def toggle_inputs(out: Path) -> tuple[pd.DataFrame, Path]:
    """(the code's stage cycles, the folder a toggle's runs and derived mappings go to) for output folder `out`."""
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    return pd.read_csv(HERE / "code_results.csv"), runs


def derived_mapping(runs: Path, filename: str, replace: dict[str, str] | None = None,
                    append: tuple[str, ...] = ()) -> str:
    """Mapping neupims_code with whole lines replaced ({line: new line}, each must be there) and lines appended,
    written to `runs`/`filename` (a toggle's arm); its path as a config names it."""
    text = paths.resolve("mappings", CONFIG["mapping"]).read_text()
    for line, new in (replace or {}).items():
        assert f"\n{line}\n" in text, f"mapping neupims_code no longer sets {line}"
        text = text.replace(f"\n{line}\n", f"\n{new}\n")
    if append:
        text = text.rstrip("\n") + "\n" + "".join(f"{line}\n" for line in append)
    path = runs / filename
    path.write_text(text)
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def mapping_with(runs: Path, filename: str, values: dict[str, object], mapping: str | None = None) -> str:
    """Shipped mapping `mapping` (default neupims_code) with each key of `values` set to its value (the key's line
    replaced, or appended where the mapping leaves it at its default), written to `runs`/`filename`; its path as a
    config names it."""
    name = mapping or CONFIG["mapping"]
    lines = paths.resolve("mappings", name).read_text().splitlines()
    for key, value in values.items():
        line = yaml.safe_dump({key: value}, default_flow_style=False).strip()
        at = [i for i, x in enumerate(lines) if x.startswith(f"{key}:")]
        assert len(at) <= 1, f"mapping {name} sets {key} twice"
        if at:
            lines[at[0]] = line
        else:
            lines.append(line)
    path = runs / filename
    path.write_text("\n".join(lines) + "\n")
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def with_key(runs: Path, filename: str, key: str, value: str) -> str:
    """Mapping neupims_code with `key: value` appended (derived_mapping); the mapping must not set the key."""
    text = paths.resolve("mappings", CONFIG["mapping"]).read_text()
    assert f"\n{key}:" not in text, f"mapping {CONFIG['mapping']} sets {key} itself"
    return derived_mapping(runs, filename, append=(f"{key}: {value}",))


def toggle_main(doc: str, build: Callable[[Path], pd.DataFrame], argv: list[str] | None,
                columns: list[str] | None = None) -> int:
    """A toggle script's command line: `-o DIR` (default: the report's own folder), the table built there and
    printed (its `columns`, default all)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, default=HERE, help="output folder (default: the report's own)")
    args = ap.parse_args(argv)
    os.chdir(ROOT)
    df = build(args.out.resolve())
    print((df if columns is None else df[columns]).to_string(index=False))
    return 0


def toggle_frame(rows: list[dict], arms: Iterable[str]) -> pd.DataFrame:
    """A toggle table: per arm its difference from the code in % and in cycles (a signed sum over stages would
    let one stage's excess cancel another's shortfall; the absolute errors do not)."""
    df = pd.DataFrame(rows)
    for arm in arms:
        df[f"diff_pct_{arm}"] = (100 * (df[f"archsim_cycles_{arm}"] / df["code_cycles"] - 1)).round(1)
        df[f"abs_err_{arm}"] = (df[f"archsim_cycles_{arm}"] - df["code_cycles"]).abs()
    return df


PARTS = ("", "logits_", "attend_")     # a PIM stage whole, and its logits and attend parts (attend_split)


def toggle_row(case: str, stage: str, arms: dict[str, dict], ref_arm: str) -> dict:
    """One row of a toggle table: the code's cycles of `stage` (from arm `ref_arm`'s rows) and, for each PIM part
    the code reports, its cycles beside every arm's archsim cycles (`arms`: arm -> {stage: vs-code row})."""
    ref = arms[ref_arm][stage]
    row = {"case": case, "stage": stage, "code_cycles": ref["code_cycles"]}
    for part in PARTS:
        if pd.isna(ref.get(f"code_{part}cycles")):
            continue
        row[f"code_{part}cycles"] = ref[f"code_{part}cycles"]
        for arm, rows in arms.items():
            row[f"archsim_{part}cycles_{arm}"] = rows[stage][f"archsim_{part}cycles"]
    return row


def part_errors(df: pd.DataFrame, arms: tuple[str, str]) -> pd.DataFrame:
    """A toggle table's error columns for the stage and each PIM part the code reports: per arm the difference
    from the code in % and in cycles, and whether the second arm is closer to the code than the first."""
    base, toggled = arms
    for part in PARTS:
        if f"code_{part}cycles" not in df:
            continue
        for arm in arms:
            df[f"abs_err_{part}{arm}"] = (df[f"archsim_{part}cycles_{arm}"] - df[f"code_{part}cycles"]).abs()
            df[f"diff_pct_{part}{arm}"] = (100 * (df[f"archsim_{part}cycles_{arm}"] / df[f"code_{part}cycles"] - 1)).round(1)
        moved = df[f"abs_err_{part}{toggled}"] < df[f"abs_err_{part}{base}"]
        df[f"moved_{part}toward_code"] = moved.where(df[f"code_{part}cycles"].notna())
    return df


def code_mem_bw_util(stage: pd.Series, channels: int) -> float:
    """NeuPIMs' mem_bw_util of a stage (Dram.cc:197-224, 264-272): reads, writes and READRES responses x the
    burst's 2 cycles / channels / stage cycles, in %."""
    bursts = sum(stage.get(f"n_{c}", 0) for c in ("RD", "RDA", "WR", "WRA", "READRES"))
    return 100.0 * bursts * 2 / channels / max(stage["cycles"], 1)


def attend_split(code_row: pd.Series, ours: pd.Series) -> dict:
    """A PIM stage's logits-and-softmax and attend parts, each simulator's: the code's from its PIM program's
    per-operation cycles (NeuPIMSLogitSoftmax, then NeuPIMSAttend), archsim's split at the attend's release
    (`attend_start: all_logits`); empty where either side has no such split."""
    ops = dict(x.split("=") for x in code_row["pim_ops"].split(";")) if isinstance(code_row.get("pim_ops"), str) else {}
    release = int(ours.get("attend_release_cycle", -1)) if pd.notna(ours.get("attend_release_cycle", -1)) else -1
    if "NeuPIMSLogitSoftmax" not in ops or "NeuPIMSAttend" not in ops or release < 0:
        return {}
    return {"code_logits_cycles": int(ops["NeuPIMSLogitSoftmax"]), "archsim_logits_cycles": release,
            "code_attend_cycles": int(ops["NeuPIMSAttend"]),
            "archsim_attend_cycles": int(ours["pim_end_cycle"] - ours["start_cycle"]) - release}


def rows_of(case: str, res, code: pd.DataFrame) -> list[dict]:
    st = res.tables["stages"]
    st = st[st["sample"] == 0].reset_index(drop=True)
    channels = 32
    out = []
    for _, r in code[code["stage"] != "block"].iterrows():
        ours = st[st["stage"] == r["stage"].rstrip("*")].iloc[0]      # the npu-only log's A*, B*, E*
        out.append({"case": case, "stage": r["stage"], "code_cycles": int(r["code_cycles"]),
                    "archsim_cycles": int(ours["cycles"]),
                    "code_pim_cycles": int(r["pim_cycles"]), "archsim_pim_cycles": round(float(ours["pim_unit_cycles"])),
                    "code_mem_bw_util_pct": round(float(r["mem_bw_util_pct"]), 2) if pd.notna(r["mem_bw_util_pct"]) else float("nan"),
                    "archsim_mem_bw_util_pct": round(code_mem_bw_util(ours, channels), 2),
                    **attend_split(r, ours)})
    blk = {"case": case, "stage": "block"}
    for k in ("code_cycles", "archsim_cycles", "code_pim_cycles", "archsim_pim_cycles"):
        blk[k] = sum(o[k] for o in out)
    for k, cyc in (("code_mem_bw_util_pct", "code_cycles"), ("archsim_mem_bw_util_pct", "archsim_cycles")):
        blk[k] = round(sum(o[k] * o[cyc] for o in out) / blk[cyc], 2)
    return out + [blk]


# the code's per-operation names (its log's operation ids, as code_results.csv's sa_ops holds them) -> archsim's
CODE_OPS = {"ln": "layernorm", "QKVgen": "qkv", "proj": "proj", "res": "add", "fc1": "ffn1", "gelu": "gelu",
            "fc2": "ffn2"}


def op_rows_of(case: str, res, code: pd.DataFrame) -> list[dict]:
    """The NPU's operators of every stage, the code's (its per-operation cycles, sa_ops) beside archsim's (the
    run's npu_ops table), in program order; archsim's all-reduce has no counterpart in the code's log (one
    device is simulated there) and is left out."""
    if "npu_ops" not in res.tables:
        return []
    ops = res.tables["npu_ops"]
    ops = ops[ops["op"] != "allreduce"]
    first = res.tables["stages"].query("sample == 0").groupby("stage")["layer"].min()
    out = []
    for _, r in code[(code["stage"] != "block") & code["sa_ops"].notna()].iterrows():
        stage = r["stage"].rstrip("*")
        ours = ops[(ops["stage"] == stage) & (ops["layer"] == first[stage])]
        theirs = [(name, int(c)) for name, c in (x.split("=") for x in r["sa_ops"].split(";"))]
        if [CODE_OPS.get(n) for n, _ in theirs] != ours["op"].tolist():
            continue            # a program whose operators do not pair one to one (the baselines' logs)
        code_start = 0          # the code's operators run one after another: each starts where the last ended
        for i, ((name, c), (_, o)) in enumerate(zip(theirs, ours.iterrows(), strict=True)):
            out.append({"case": case, "stage": r["stage"], "index": i, "op": o["op"], "code_op": name,
                        "code_cycles": c, "archsim_cycles": int(o["cycles"]), "code_start_in_stage": code_start,
                        "archsim_start_in_stage": int(o["start_cycle"] - ours["start_cycle"].min())})
            code_start += c
    return out


def build(out: Path, jobs: int = 1) -> pd.DataFrame:
    code = pd.read_csv(HERE / "code_results.csv")
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    cases = list(CASES)
    with ProcessPoolExecutor(jobs) as ex:
        results = list(ex.map(_run, [(config(c), runs) for c in cases]))
    rows, op_rows = [], []
    for case, path in zip(cases, results, strict=True):
        res = load_result(path)
        rows += rows_of(case, res, code[code["case"] == case])
        op_rows += op_rows_of(case, res, code[code["case"] == case])
    ops = pd.DataFrame(op_rows)
    if len(ops):
        ops["diff_pct"] = (100 * (ops["archsim_cycles"] / ops["code_cycles"] - 1)).round(1)
    ops.to_csv(out / "vs_code_ops.csv", index=False)
    df = pd.DataFrame(rows)
    df.insert(4, "diff_pct", (100 * (df["archsim_cycles"] / df["code_cycles"] - 1)).round(1))
    df["pim_diff_pct"] = (100 * (df["archsim_pim_cycles"] / df["code_pim_cycles"].where(df["code_pim_cycles"] > 0) - 1)).round(1)
    limit = df["stage"].map(lambda s: TOLERANCE["block" if s == "block" else "stage"])
    df["within_tolerance"] = (df["diff_pct"].abs() <= 100 * limit)
    for part in ("logits", "attend"):       # the PIM stage's two operations, archsim / code - 1
        df[f"{part}_diff_pct"] = (100 * (df[f"archsim_{part}_cycles"] / df[f"code_{part}_cycles"] - 1)).round(1)
    df.to_csv(out / "vs_code.csv", index=False)
    return df


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, default=HERE, help="output folder (default: the report's own)")
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args(argv)
    os.chdir(ROOT)          # the traces are repo-relative (they are part of the runs' config hashes)
    df = build(args.out.resolve(), args.jobs)
    print(df[["case", "stage", "code_cycles", "archsim_cycles", "diff_pct", "within_tolerance"]].to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
