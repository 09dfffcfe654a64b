"""Sweeps: many runs of one system over a grid of configs, locally or on Dask, into a resumable store.

    from archsim.sweep import load_sweep, run_sweep, load_results
    outcome = run_sweep("sweeps/dram_presets_x_mapping.yaml", jobs=4)
    stats, table = load_results(outcome.results_dir)

See archsim.sweep.spec for the sweep-file format and archsim.sweep.store for the results layout.
"""
from __future__ import annotations

from archsim.sweep.metrics import Metric, compute_metrics, parse_expression
from archsim.sweep.runner import FailedPoint, SweepOutcome, run_sweep
from archsim.sweep.spec import Point, Sweep, load_sweep
from archsim.sweep.store import load_failures, load_manifest, load_results

__all__ = [
    "FailedPoint",
    "Metric",
    "Point",
    "Sweep",
    "SweepOutcome",
    "compute_metrics",
    "load_failures",
    "load_manifest",
    "load_results",
    "load_sweep",
    "parse_expression",
    "run_sweep",
]
