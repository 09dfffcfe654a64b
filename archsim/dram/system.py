"""Trace-driven DRAM runs: trace -> address mapping -> event-driven controllers -> stats, energy, log.

Registered as system `dram-trace` (see archsim.systems), and exposed as archsim.run_trace().
"""
from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from archsim import energy as energy_mod
from archsim.dram import mapping as mapping_mod
from archsim.dram.controller import ControllerConfig
from archsim.dram.spec import DramSpec, check_capacity, load_spec
from archsim.engine import dram_kernel as K
from archsim.errors import ConfigError, UserError
from archsim.results import Result, make_manifest
from archsim.systems import register

SLOT_NAMES = ["ACT", "PRE", "PREA", "RD", "WR", "RDA", "WRA", "REFab", "REFpb"]


@dataclass
class CommandLog:
    """Every command issued: cycle, command name, address (channel, pseudo-channel, rank, bank group, bank, row,
    column). Rows/columns are -1 where a command has none."""

    df: pd.DataFrame

    def write(self, path: str | Path) -> None:
        from archsim.results import atomic_write_text

        atomic_write_text(path, self.df.to_csv(index=False))

    @classmethod
    def read(cls, path: str | Path) -> CommandLog:
        path = Path(path)
        if not path.is_file():
            raise UserError(f"{path}: command log not found")
        try:
            df = pd.read_csv(path)
        except Exception as exc:  # pandas raises many types for malformed CSV
            raise UserError(f"{path}: not a readable command log CSV ({exc})") from None
        need = ["cycle", "command", "channel", "pseudochannel", "rank", "bankgroup", "bank", "row", "column"]
        missing = [c for c in need if c not in df.columns]
        if missing:
            raise UserError(f"{path}: command log lacks columns {', '.join(missing)}; expected {', '.join(need)}")
        return cls(df[need])


def kernel_tables(spec: DramSpec) -> dict[str, Any]:
    """Integer tables the kernel needs, derived once per spec."""
    t = spec.tables()
    counts = spec.counts
    n_levels = len(counts)
    nodes_per_level = np.cumprod(counts)
    level_off = np.concatenate([[0], np.cumsum(nodes_per_level)[:-1]]).astype(np.int64)
    n_banks = int(nodes_per_level[-1])
    b = np.arange(n_banks, dtype=np.int64)
    node_of = np.zeros((n_banks, n_levels), dtype=np.int64)
    for k in range(n_levels):
        below = int(np.prod(counts[k + 1:])) if k + 1 < n_levels else 1
        node_of[:, k] = level_off[k] + b // below
    order = np.argsort(t["con_prev"], kind="stable")
    prev = t["con_prev"][order]
    n_cmds = len(spec.commands)
    con_start = np.searchsorted(prev, np.arange(n_cmds), side="left").astype(np.int64)
    con_end = np.searchsorted(prev, np.arange(n_cmds), side="right").astype(np.int64)
    window = t["con_window"][order]
    # A window row counts issues of its whole set of preceding commands: one shared history per
    # (original row, following command), so any preceding command pushes exactly once into each.
    win_id = np.full(len(order), -1, dtype=np.int64)
    ids: dict[tuple[int, int], int] = {}
    for pos, j in enumerate(order):
        if window[pos] > 1:
            row = spec.constraints[j]
            win_id[pos] = ids.setdefault((row["group"], row["next"]), len(ids))
    win_rows = np.arange(len(ids))
    return {
        "node_of": node_of, "cmd_scope": t["cmd_scope"], "con_start": con_start, "con_end": con_end,
        "con_level": t["con_level"][order], "con_next": t["con_next"][order], "con_lat": t["con_lat"][order],
        "con_window": window, "con_win_id": win_id, "n_nodes": int(nodes_per_level.sum()),
        "n_windows": int(len(win_rows)), "max_window": int(window.max(initial=1)),
        "cmd_ids": np.array([spec.cmd(n) for n in SLOT_NAMES], dtype=np.int64),
    }


def _cfg_array(spec: DramSpec, ctrl: ControllerConfig, log: bool, max_cycles: int) -> np.ndarray:
    cfg = np.zeros(K.N_CFG, dtype=np.int64)
    cfg[K.CFG_QCAP_R] = ctrl.read_queue
    cfg[K.CFG_QCAP_W] = ctrl.write_queue
    cfg[K.CFG_WM_HIGH] = max(1, int(round(ctrl.write_high_watermark * ctrl.write_queue)))
    cfg[K.CFG_WM_LOW] = int(round(ctrl.write_low_watermark * ctrl.write_queue))
    cfg[K.CFG_CLOSED_ROW] = ctrl.row_policy == "closed"
    cfg[K.CFG_REFRESH] = {"none": K.REFRESH_NONE, "allbank": K.REFRESH_ALLBANK, "perbank": K.REFRESH_PERBANK}[ctrl.refresh]
    cfg[K.CFG_DUAL_BUS] = spec.command_bus == "dual"
    cfg[K.CFG_FE_WIDTH] = ctrl.frontend_width
    cfg[K.CFG_LOG] = log
    cfg[K.CFG_NCL] = spec.timing["nCL"]
    cfg[K.CFG_NCWL] = spec.timing["nCWL"]
    cfg[K.CFG_NBL] = spec.timing["nBL"]
    cfg[K.CFG_NREFI] = spec.timing["nREFI"]
    cfg[K.CFG_NREFIPB] = spec.timing["nREFIpb"]
    cfg[K.CFG_BANKS_PER_RANK] = spec.banks_per_rank
    cfg[K.CFG_MAX_CYCLES] = max_cycles
    return cfg


def _progress_enabled(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty() and os.environ.get("CI", "").lower() not in ("1", "true", "yes")


def _draw(done: int, total: int, t0: float) -> None:
    frac = done / total if total else 1.0
    width = 30
    bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
    rate = done / max(time.perf_counter() - t0, 1e-9)
    sys.stderr.write(f"\r[{bar}] {done}/{total} requests  {rate / 1e3:.0f} K req/s ")
    sys.stderr.flush()


def simulate_trace(spec: DramSpec, ctrl: ControllerConfig, addr: np.ndarray, is_write: np.ndarray,
                   arrive: np.ndarray, engine: str = "numba", log: bool = False, quiet: bool = True,
                   max_cycles: int = 1 << 60) -> dict[str, Any]:
    """Run the kernel. Returns raw arrays: per-request enqueue/done/kind, command counts, log, timing."""
    n = len(addr)
    dec = mapping_mod.decode(spec, addr, ctrl.mapping)
    tabs = kernel_tables(spec)
    cfg = _cfg_array(spec, ctrl, log, max_cycles)
    req_enq = np.full(n, -1, dtype=np.int64)
    req_done = np.full(n, -1, dtype=np.int64)
    req_kind = np.zeros(n, dtype=np.int64)
    n_cmds = len(spec.commands)
    log_cap = (3 * n + 1024) if log else 1
    progress = np.zeros(4, dtype=np.int64)
    fn = K.simulate_jit if engine == "numba" else K.simulate
    if engine not in ("numba", "python"):
        raise UserError(f"engine {engine!r}: must be numba or python")
    arrive = np.asarray(arrive, dtype=np.int64)
    while True:
        cmd_count = np.zeros((spec.channels, n_cmds), dtype=np.int64)
        log_arrays = [np.zeros(log_cap, dtype=np.int64) for _ in range(5)]
        args = (dec["channel"], dec["bank"], dec["row"], dec["column"], np.asarray(is_write, dtype=np.bool_), arrive,
                tabs["node_of"], tabs["cmd_scope"], tabs["con_start"], tabs["con_end"], tabs["con_level"],
                tabs["con_next"], tabs["con_lat"], tabs["con_window"], tabs["con_win_id"], tabs["n_nodes"],
                tabs["n_windows"], tabs["max_window"], tabs["cmd_ids"], cfg, spec.channels,
                req_enq, req_done, req_kind, cmd_count, *log_arrays, progress)
        t0 = time.perf_counter()
        if _progress_enabled(quiet) and engine == "numba":
            box: dict[str, Any] = {}
            # the kernel releases the GIL (nogil=True), so this thread can draw progress while it runs
            th = threading.Thread(target=lambda b=box, a=args: b.setdefault("out", fn(*a)), daemon=True)
            th.start()
            while th.is_alive():
                th.join(0.25)
                _draw(int(progress[0]), n, t0)
            sys.stderr.write("\n")
            status, end_clk, n_log = box["out"]
        else:
            status, end_clk, n_log = fn(*args)
        wall = time.perf_counter() - t0
        if status == K.LOG_FULL:
            log_cap *= 2
            req_enq[:] = -1
            req_done[:] = -1
            req_kind[:] = 0
            progress[:] = 0
            continue
        break
    if status == K.DEADLOCK:  # pragma: no cover - would be a simulator bug
        raise RuntimeError("DRAM kernel deadlocked: no event pending while requests remain")
    if status == K.TIMEOUT:
        raise UserError(f"simulation exceeded max_cycles={max_cycles}")
    out = {"req_enq": req_enq, "req_done": req_done, "req_kind": req_kind, "cmd_count": cmd_count,
           "end_cycle": int(end_clk), "wall_s": wall, "decoded": dec,
           "scheduler_passes": int(progress[2]), "bank_candidates_scanned": int(progress[3])}
    if log:
        out["log"] = [a[:n_log] for a in log_arrays]
    return out


def command_log_frame(spec: DramSpec, raw_log: list[np.ndarray]) -> CommandLog:
    clk, cmd, bank, row, col = raw_log
    counts = spec.counts
    rem = bank.copy()
    parts = {}
    for lvl, n in zip(("bank", "bankgroup", "rank", "pseudochannel", "channel"), counts[::-1], strict=True):
        parts[lvl] = rem % n
        rem = rem // n
    names = np.array(spec.command_names)
    df = pd.DataFrame({"cycle": clk, "command": names[cmd], "channel": parts["channel"],
                       "pseudochannel": parts["pseudochannel"], "rank": parts["rank"],
                       "bankgroup": parts["bankgroup"], "bank": parts["bank"], "row": row, "column": col})
    return CommandLog(df)


def run_trace(trace: Any, preset: str | DramSpec = "DDR4_3200AA_x8_8Gb", channels: int | None = None,
              mapping: str | None = None, controller: dict[str, Any] | ControllerConfig | None = None,
              overrides: dict[str, Any] | list[str] | None = None, log: bool = False, engine: str = "numba",
              quiet: bool = True, seed: int = 0) -> Result:
    """Simulate a memory trace on a DRAM preset.

    trace:      a path (Ramulator 2 or DRAMsim3 format, optionally .gz), an archsim.dram.trace.Trace, or a
                dict {kind: random|stream, requests: N, read_fraction: 0.8, span_bytes, seed} for a synthetic one.
    preset:     preset name (see `archsim presets list`), a preset YAML path, or a loaded DramSpec.
    channels:   override the preset's channel count. mapping: e.g. "RoBaRaCoCh". controller: ControllerConfig
                fields. overrides: {"timing.nRCD": 20} or ["timing.nRCD=20"].
    Returns a Result: .stats (dict), .df (one row per channel), .manifest; with log=True also
    .extra["command_log"] (a CommandLog).
    """
    from archsim.dram import trace as trace_mod

    spec = preset if isinstance(preset, DramSpec) else load_spec(preset, overrides=dict(overrides or {}) if isinstance(overrides, dict) else overrides)
    if channels is not None:
        if isinstance(channels, bool) or not isinstance(channels, int) or channels < 1 or channels & (channels - 1):
            raise ConfigError("channels", f"must be a power of two >= 1, got {channels!r}")
        spec = load_spec(spec.raw, overrides={"org.channels": channels})
    ctrl = controller if isinstance(controller, ControllerConfig) else ControllerConfig.from_dict(controller)
    if mapping is not None:
        ctrl = ControllerConfig.from_dict({**ctrl.to_dict(), "mapping": mapping})
    if isinstance(trace, dict):
        # A synthetic trace spans 2 GiB by default, or the whole device when it is smaller.
        trace = {"span_bytes": min(2 << 30, spec.capacity_bytes), **trace}
        tr = trace_mod.synthetic_trace(access_bytes=spec.access_bytes, **trace)
        trace_desc: Any = dict(trace)
    elif isinstance(trace, trace_mod.Trace):
        tr = trace
        trace_desc = tr.source
    else:
        tr = trace_mod.read_trace(trace)
        trace_desc = str(trace)
    if len(tr) == 0:
        raise UserError(f"{trace_desc}: empty trace")
    check_capacity(spec, int(tr.addr.max()), source=str(tr.source))
    raw = simulate_trace(spec, ctrl, tr.addr, tr.is_write, tr.arrive, engine=engine, log=log, quiet=quiet)
    return _result(spec, ctrl, tr, raw, trace_desc, seed, engine, log)


def _result(spec: DramSpec, ctrl: ControllerConfig, tr: Any, raw: dict[str, Any], trace_desc: Any, seed: int,
            engine: str, log: bool) -> Result:
    n = len(tr)
    cycles = raw["end_cycle"]
    seconds = cycles * spec.tCK_s
    is_write = np.asarray(tr.is_write, dtype=bool)
    lat = (raw["req_done"] - raw["req_enq"])[~is_write]
    kind = raw["req_kind"]
    counts = raw["cmd_count"]
    names = spec.command_names
    total_counts = {name: int(counts[:, i].sum()) for i, name in enumerate(names)}
    bytes_moved = n * spec.access_bytes
    bw = bytes_moved / seconds if seconds > 0 else 0.0
    energy_all = energy_mod.dram_energy_pj(spec, total_counts, cycles, spec.channels)
    stats: dict[str, Any] = {
        "preset": spec.name, "channels": spec.channels, "mapping": ctrl.mapping, "engine": engine,
        "cycles": cycles, "seconds": seconds, "tCK_ps": spec.tCK_ps,
        "requests": n, "reads": int((~is_write).sum()), "writes": int(is_write.sum()),
        "bytes": bytes_moved, "bandwidth_GBps": bw / 1e9,
        "peak_bandwidth_GBps": spec.peak_bw_bytes_per_s / 1e9,
        "bandwidth_pct_of_peak": 100.0 * bw / spec.peak_bw_bytes_per_s,
        "row_hits": int((kind == 0).sum()), "row_misses": int((kind == 1).sum()),
        "row_conflicts": int((kind == 2).sum()),
        "row_hit_rate": float((kind == 0).mean()),
        "read_latency_mean_cycles": float(lat.mean()) if lat.size else 0.0,
        "read_latency_p50_cycles": float(np.percentile(lat, 50)) if lat.size else 0.0,
        "read_latency_p99_cycles": float(np.percentile(lat, 99)) if lat.size else 0.0,
        "read_latency_mean_ns": float(lat.mean() * spec.tCK_ps / 1000) if lat.size else 0.0,
        "commands": total_counts,
        "energy_pj": energy_all, "energy_total_pj": energy_mod.total(energy_all),
        "energy_pj_per_bit": energy_mod.total(energy_all) / (bytes_moved * 8),
        "wall_s": raw["wall_s"],
    }
    ch = raw["decoded"]["channel"]
    rows = []
    for c in range(spec.channels):
        sel = ch == c
        cnt = {name: int(counts[c, i]) for i, name in enumerate(names)}
        e = energy_mod.dram_energy_pj(spec, cnt, cycles, 1)
        lat_c = (raw["req_done"] - raw["req_enq"])[sel & ~is_write]
        rows.append({"channel": c, "requests": int(sel.sum()), "reads": int((sel & ~is_write).sum()),
                     "writes": int((sel & is_write).sum()), "row_hits": int((kind[sel] == 0).sum()),
                     "row_misses": int((kind[sel] == 1).sum()), "row_conflicts": int((kind[sel] == 2).sum()),
                     "read_latency_mean_cycles": float(lat_c.mean()) if lat_c.size else 0.0,
                     "bytes": int(sel.sum()) * spec.access_bytes, "cycles": cycles,
                     **{f"cmd_{k}": v for k, v in cnt.items()},
                     **{f"energy_{k}_pj": v for k, v in e.items()}})
    df = pd.DataFrame(rows)
    config = {"system": "dram-trace", "preset": spec.name, "dram": spec.raw, "controller": ctrl.to_dict(),
              "trace": trace_desc, "engine": engine}
    result = Result(stats=stats, df=df, manifest=make_manifest("dram-trace", config, seed=seed))
    if log:
        result.extra["command_log"] = command_log_frame(spec, raw["log"])
    result.extra["spec"] = spec
    result.extra["raw"] = raw
    return result


ALLOWED_KEYS = ("system", "preset", "channels", "mapping", "controller", "dram", "trace", "engine")


def resolve(config: dict[str, Any]) -> dict[str, Any]:
    """Fill the controller's defaults, so sweeps can vary any controller.* key without naming it in `base`."""
    for key in config:
        if key not in ALLOWED_KEYS:
            raise ConfigError(key, f"unknown key for system dram-trace; allowed: {', '.join(sorted(ALLOWED_KEYS))}")
    out = dict(config)
    out["controller"] = {**ControllerConfig().to_dict(), **(config.get("controller") or {})}
    out.setdefault("engine", "numba")
    return out


@register("dram-trace", resolve=resolve)
def run_config(config: dict[str, Any], seed: int = 0) -> Result:
    """System entry for sweeps: keys preset, channels, mapping, controller{}, dram{timing overrides}, trace."""
    config = resolve(config)
    if "trace" not in config:
        raise ConfigError("trace", "missing: a trace path or {kind: random|stream, requests: N}")
    trace = config["trace"]
    if isinstance(trace, dict):
        trace = {"seed": seed, **trace}
    overrides = {}
    for section, values in (config.get("dram") or {}).items():
        if isinstance(values, dict):
            for k, v in values.items():
                overrides[f"{section}.{k}"] = v
        else:
            overrides[section] = values
    return run_trace(trace, preset=config.get("preset", "DDR4_3200AA_x8_8Gb"), channels=config.get("channels"),
                     mapping=config.get("mapping"), controller=config.get("controller"), overrides=overrides,
                     engine=config.get("engine", "numba"), seed=seed)
