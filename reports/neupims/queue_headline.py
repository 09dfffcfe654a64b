"""The headline with archsim's controller default beside it: every point of make_report's throughput grid, its
systems on the shallow default window (32-entry read and write queues per channel) where the headline's mappings
take the windows NeuPIMs' simulator gives them (`request_queue: 4096` for NeuPIMs and NPU+PIM, 96 for NPU-only;
docs/presets.md "The controller's window"); writes reports/neupims/queue_headline.csv.

Run:  .venv/bin/python reports/neupims/queue_headline.py [-o DIR] [--jobs N]
      (after make_report.py, whose runs it reads from DIR/runs: the headline's arm is those runs)

Every DRAM-simulated system of the headline (NeuPIMs, NPU+PIM in both readings, NPU-only) runs each point twice:
its mapping as shipped and a copy of it with only `request_queue` set to 32, written under DIR/runs. Columns:
model, dataset, batch, system (make_report's label), tokens_per_s_shipped, tokens_per_s_q32 (whole-model tokens/s
as the headline computes them; NaN where the batch does not fit), then one row per point and base with the
NeuPIMs ratio at each depth (system "NeuPIMs / <base>").
"""
from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import make_report  # noqa: E402
import vs_code  # noqa: E402

from archsim import paths, registry  # noqa: E402

HERE = Path(__file__).resolve().parent
SHALLOW = 32
SHIPPED = "shipped"        # the arm of the mappings as shipped (each system's own window)
ARMS = (SHIPPED, f"q{SHALLOW}")
SYSTEMS = ("NeuPIMs", "NPU+PIM", "NPU+PIM, the code's issue path", "NPU-only")
BASES = ("NPU+PIM", "NPU+PIM, the code's issue path", "NPU-only")


def shallow_mapping(runs: Path, mapping: str) -> str:
    """A copy of shipped mapping `mapping` with only its request window set to the controller's default, written
    to `runs`; its path as a config names it."""
    assert paths.resolve("mappings", mapping).read_text().count("\nrequest_queue: ") == 1, \
        f"mapping {mapping} no longer sets request_queue"
    return vs_code.mapping_with(runs, f"{mapping}_request_queue_{SHALLOW}.yaml", {"request_queue": SHALLOW}, mapping)


def jobs(runs: Path, layers: int) -> list[tuple[dict, str, dict]]:
    """(keys, arm, config) of every run: the headline's config per point and system, and its shallow copy."""
    out = []
    for m in make_report.MODELS:
        for d in make_report.DATASETS:
            for b in make_report.BATCHES:
                for label in SYSTEMS:
                    system, extra = make_report.VARIANTS[label]
                    mapping = extra.get("mapping", registry.get(system).mapping_default)
                    keys = {"model": m, "dataset": d, "batch": b, "system": label}
                    out.append((keys, SHIPPED, make_report.config(system, extra, m, d, b, layers)))
                    shallow = {**extra, "mapping": shallow_mapping(runs, mapping)}
                    out.append((keys, f"q{SHALLOW}", make_report.config(system, shallow, m, d, b, layers)))
    return out


def build(out: Path, layers: int, n_jobs: int) -> pd.DataFrame:
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    todo = jobs(runs, layers)
    with ProcessPoolExecutor(n_jobs) as ex:
        done = list(ex.map(make_report._run, [(cfg, runs) for _, _, cfg in todo]))
    rows: dict[tuple, dict] = {}
    for (keys, arm, cfg), path in zip(todo, done, strict=True):
        r = make_report.row(keys["system"], cfg, path)
        rows.setdefault(tuple(keys.values()), dict(keys))[f"tokens_per_s_{arm}"] = r["tokens_per_s"]
    df = pd.DataFrame(list(rows.values()))
    ratios = []
    for (m, d, b), g in df.groupby(["model", "dataset", "batch"], sort=False):
        by = g.set_index("system")
        for base in BASES:
            ratios.append({"model": m, "dataset": d, "batch": b, "system": f"NeuPIMs / {base}",
                           **{f"tokens_per_s_{arm}": by.at["NeuPIMs", f"tokens_per_s_{arm}"]
                              / by.at[base, f"tokens_per_s_{arm}"] for arm in ARMS}})
    df = pd.concat([df, pd.DataFrame(ratios)], ignore_index=True)
    df.to_csv(out / "queue_headline.csv", index=False)
    return df


def geomean_ratio(df: pd.DataFrame, base: str, arm: str) -> float:
    """NeuPIMs over `base` in arm `arm` (ARMS), geomean over the points where both ran."""
    x = df.loc[df["system"] == f"NeuPIMs / {base}", f"tokens_per_s_{arm}"].to_numpy(dtype=float)
    x = x[np.isfinite(x)]
    return float(np.exp(np.log(x).mean()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, default=HERE, help="output folder (default: the report's own)")
    ap.add_argument("--layers", type=int, default=2, help="layers simulated per model (make_report's default)")
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args(argv)
    os.chdir(ROOT)
    df = build(args.out.resolve(), args.layers, args.jobs)
    print(df.to_string(index=False))
    for base in BASES:
        print(f"NeuPIMs / {base}: " + ", ".join(f"{arm} {geomean_ratio(df, base, arm):.3f}x" for arm in ARMS)
              + " (geomean)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
