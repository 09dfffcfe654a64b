"""A small, deterministic, CPU-bound system for sweep and report tests: `toy-roofline`.

It times a GEMV (rows x cols, batch vectors) and an activation with a roofline model,
max(flops / peak, bytes / bandwidth), and returns a Result shaped like the real systems' (per-op rows with
unit busy intervals, Op/B, flops, seconds and energy by component). Knobs for tests:

    work_s:  CPU seconds to burn per run (process CPU time, so parallel speed-up is real, not wall-clock)
    fail_if: {gemv field: value} -> raise ValueError when the GEMV has that value
    die_if:  {gemv field: value} -> the worker process kills itself (SIGKILL) when the GEMV has that value
    run_log: path of a file that gets one line "<config_hash> <seed>" appended per finished run

Import this module (sweep-file `imports: [sweep_fixtures]`, tests/ on PYTHONPATH) to register the system.
"""
from __future__ import annotations

import os
import random
import time
from typing import Any

import pandas as pd

from archsim.config import deep_merge
from archsim.registry import System, register
from archsim.results import Result, config_hash, make_manifest

DEFAULTS: dict[str, Any] = {
    "system": "toy-roofline",
    "gemv": {"rows": 1024, "cols": 1024, "batch": 1},
    "hw": {
        "peak_flops_per_s": 1.0e12,
        "bytes_per_s": 1.0e11,
        "bytes_per_element": 2,
        "pj_per_flop": 0.5,
        "pj_per_byte": 8.0,
    },
    "work_s": 0.0,
    "fail_if": {},
    "die_if": {},
    "run_log": "",
}


def resolve(config: dict[str, Any]) -> dict[str, Any]:
    """The config with defaults filled in."""
    return deep_merge(DEFAULTS, config)


def _burn(cpu_seconds: float) -> None:
    end = time.process_time() + cpu_seconds
    x = 0
    while time.process_time() < end:
        for i in range(2000):
            x += i * i


@register
class ToyRoofline(System):
    """A GEMV and its epilogue on a roofline (a toy for sweep and report tests)."""

    name = "toy-roofline"
    resolve = staticmethod(resolve)

    @classmethod
    def run(cls, config: dict[str, Any], seed: int = 0) -> Result:
        return run_toy(config, seed)


def run_toy(config: dict[str, Any], seed: int) -> Result:
    cfg = resolve(config)
    g, hw = cfg["gemv"], cfg["hw"]
    for key, value in (cfg["fail_if"] or {}).items():
        if g.get(key) == value:
            raise ValueError(f"toy-roofline: asked to fail for gemv.{key}={value}")
    for key, value in (cfg["die_if"] or {}).items():
        if g.get(key) == value:
            import signal

            os.kill(os.getpid(), signal.SIGKILL)   # as the OOM killer would
    _burn(float(cfg["work_s"]))

    bpe = hw["bytes_per_element"]
    rows, cols, batch = g["rows"], g["cols"], g["batch"]
    ops = [
        # op, unit, flops, bytes
        ("gemv", "pim", 2 * rows * cols * batch, (rows * cols + cols * batch + rows * batch) * bpe),
        ("activation", "asic", 4 * rows * batch, 2 * rows * batch * bpe),
    ]
    rows_out = []
    t = 0.0
    for op, unit, flops, nbytes in ops:
        seconds = max(flops / hw["peak_flops_per_s"], nbytes / hw["bytes_per_s"])
        energy_pj = flops * hw["pj_per_flop"] + nbytes * hw["pj_per_byte"]
        rows_out.append({"op": op, "unit": unit, "component": unit, "start_s": t, "end_s": t + seconds,
                         "seconds": seconds, "flops": flops, "bytes": nbytes, "op_per_byte": flops / nbytes,
                         "energy_pj": energy_pj})
        t += seconds
    df = pd.DataFrame(rows_out)
    stats = {
        "latency_s": t,
        "flops": int(df["flops"].sum()),
        "bytes": int(df["bytes"].sum()),
        "throughput_flops_per_s": float(df["flops"].sum() / t),
        "energy_pj": float(df["energy_pj"].sum()),
        "peak_flops_per_s": hw["peak_flops_per_s"],
        "peak_bytes_per_s": hw["bytes_per_s"],
        "sample": random.Random(seed).random(),  # shows the seed reaches the system
    }
    if cfg["run_log"]:
        # O_APPEND writes of one short line are atomic, so concurrent workers do not interleave.
        fd = os.open(cfg["run_log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, f"{config_hash(cfg)} {seed}\n".encode())
        finally:
            os.close(fd)
    return Result(stats=stats, df=df, manifest=make_manifest("toy-roofline", cfg, seed))


# ----------------------------------------------------------------------------------------------------------
# helpers for the sweep and report tests

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


def write_sweep(directory: Any, body: dict[str, Any] | str, name: str = "sweep.yaml") -> Any:
    """Write a sweep file (a dict is dumped as YAML) and return its path."""
    from pathlib import Path

    import yaml

    path = Path(directory) / name
    path.write_text(body if isinstance(body, str) else yaml.safe_dump(body, sort_keys=False))
    return path


def toy_sweep(name: str = "toy", **base: Any) -> dict[str, Any]:
    """A 2 x 2 x 2 sweep of toy-roofline with a speedup metric."""
    return {
        "name": name,
        "imports": ["sweep_fixtures"],
        "base": {"system": "toy-roofline", "gemv": {"rows": 1024, "cols": 1024, "batch": 1}, **base},
        "seed": 7,
        "axes": [
            {"grid": {"gemv.rows": [1024, 2048], "hw.bytes_per_s": [1.0e11, 2.0e11]}},
            {"zip": {"gemv.cols": [256, 512], "gemv.batch": [1, 4]}},
        ],
        "metrics": {
            "speedup": {"expr": "baseline.latency_s / latency_s", "baseline": {"hw.bytes_per_s": 1.0e11}},
            "gflops": "flops / latency_s / 1e9",
        },
    }


def subprocess_env() -> dict[str, str]:
    """Environment for `python -m archsim.cli` children: tests/ importable, no progress bar."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (TESTS_DIR, env.get("PYTHONPATH", "")) if p)
    env["CI"] = "true"
    return env
