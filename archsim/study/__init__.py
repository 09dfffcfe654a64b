"""Cross-design studies (issue 37): every PIM design on the same model, batch and memory, in one command.

    archsim study studies/which_pim.yaml -o OUT

reads a study file (archsim.study.spec: the intent), maps each point onto each design's own system
(archsim.study.plan and archsim/systems/<name>/study.py: one config, or a refusal with its reason), runs the
configs through the sweep machinery (parallel, resumable, Dask: OUT/points/), and writes OUT/results.csv (one
row per point, the common metric schema of archsim.metrics, status ok / refused / failed and the reason) and a
report with the comparison table and figures (archsim.study.report).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from archsim.study.plan import Planned, plan
from archsim.study.spec import Study, load_study, parse_study

__all__ = ["load_study", "parse_study", "run_study", "StudyOutcome", "RESULT_COLUMNS"]

AXES = ("system", "model", "memory", "batch", "tp")
RESULT_COLUMNS = ("system", "design", "model", "memory", "batch", "tp", "input_len", "output_len",
                  "decode_tokens_per_s", "decode_step_s", "ttft_s", "energy_per_token_j",
                  "energy_per_token_dram_j", "energy_per_token_pim_j", "energy_per_token_compute_j",
                  "energy_per_token_io_j", "energy_per_token_static_j", "status", "reason", "style", "compute",
                  "scope", "runs_as", "config")


@dataclass
class StudyOutcome:
    study: Study
    out: Path
    results: pd.DataFrame
    failed: int


def _point(study: Study, p: Planned) -> Any:
    from archsim import registry
    from archsim.inputs import input_digests
    from archsim.results import config_hash
    from archsim.sweep.spec import Point

    resolved = registry.resolve_config(dict(p.config))
    chash = config_hash(resolved)
    return Point(index=0, axes={"system": p.intent.system, "model": p.intent.model,
                                "memory": p.intent.memory.label, "batch": p.intent.batch, "tp": p.intent.tp},
                 config=p.config, seed=study.seed, config_hash=chash,
                 point_hash=config_hash({"config": resolved, "seed": study.seed}), inputs=input_digests(resolved))


def plan_study(study: Study, out: Path) -> list[Planned]:
    return [plan(it, out / "inputs") for it in study.intents]


def run_study(path: str | Path, out: str | Path, *, jobs: int | None = None, executor: str = "local",
              scheduler: str | None = None, force: bool = False, progress: bool | None = None,
              report: bool = True) -> StudyOutcome:
    """Plan, run and report a study into `out` (resumable: finished points are kept)."""
    import dataclasses

    from archsim.output import write_text
    from archsim.sweep.runner import run_sweep
    from archsim.sweep.spec import Sweep

    study = load_study(path)
    out = Path(out)
    planned = plan_study(study, out)
    points, seen = [], set()
    for p in planned:
        if p.config is None:
            continue
        pt = _point(study, p)
        if pt.point_hash not in seen:
            seen.add(pt.point_hash)
            points.append(dataclasses.replace(pt, index=len(points)))
    sweep = Sweep(name=study.name, source=study.source, text=study.text, data=study.data, base={},
                  base_seed=study.seed, imports=[], import_paths=[], axis_keys=list(AXES), metrics={},
                  points=points)
    outcome = run_sweep(sweep, out / "points", jobs=jobs, executor=executor, scheduler=scheduler, force=force,
                        progress=progress)
    results = collect(study, planned, out / "points")
    write_text(out / "results.csv", results.to_csv(index=False))
    if report:
        from archsim.study.report import write_report

        write_report(study, results, out)
    return StudyOutcome(study, out, results, len(outcome.failed))


def collect(study: Study, planned: list[Planned], points_dir: Path) -> pd.DataFrame:
    """One row per intent: its common metrics (a finished point), or its refusal or failure."""
    from archsim.sweep.store import load_failures, load_results

    stats, _ = load_results(points_dir)
    failures = {f.get("point_hash"): f for f in load_failures(points_dir)}
    rows = []
    for p in planned:
        it = p.intent
        row: dict[str, Any] = {"system": it.system, "design": p.design, "model": it.model,
                               "memory": it.memory.label, "batch": it.batch, "tp": it.tp,
                               "input_len": it.input_len, "output_len": it.output_len, "style": p.style,
                               "compute": p.compute}
        if p.config is None:
            rows.append({**row, "status": "refused", "reason": p.reason})
            continue
        ph = _point(study, p).point_hash
        row["runs_as"] = p.config["system"]
        row["config"] = json.dumps(p.config, sort_keys=True)
        got = stats[stats["point_hash"] == ph] if len(stats) else stats
        if len(got):
            s = got.iloc[0]
            for c in RESULT_COLUMNS:
                if c.startswith(("decode_", "ttft_", "energy_per_token")) and c in s:
                    row[c] = float(s[c]) if s[c] is not None else math.nan
            row["scope"] = s.get("scope", "")
            rows.append({**row, "status": "ok", "reason": ""})
        else:
            f = failures.get(ph, {})
            first = str(f.get("error", "not run")).splitlines()[0] if f else "not run"
            if f.get("user_error"):          # the design's own check refused the point when it ran
                rows.append({**row, "status": "refused", "reason": f"{p.design}: {first}"})
                continue
            rows.append({**row, "status": "failed", "reason": f"{f.get('error_type', 'Error')}: {first}" if f
                         else "not run (the sweep stopped before it)"})
    df = pd.DataFrame(rows)
    for c in RESULT_COLUMNS:
        if c not in df.columns:
            df[c] = math.nan if c.startswith(("decode_", "ttft_", "energy_")) else ""
    return df[list(RESULT_COLUMNS)]
