"""Trace-driven DRAM runs: trace -> address mapping -> event-driven controllers -> stats, energy, log.

The simulation of system `dram-trace` (declared in archsim.systems.dram_trace), also exposed as
archsim.run_trace().
"""
from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from archsim import energy as energy_mod
from archsim.config import parse_override
from archsim.dram import mapping as mapping_mod
from archsim.dram.controller import ControllerConfig
from archsim.dram.spec import DramSpec, check_capacity, load_spec
from archsim.dram.trace import SYNTHETIC_KINDS
from archsim.engine.memory import MemorySystem
from archsim.errors import ConfigError, UserError
from archsim.results import Result, make_manifest
from archsim.systems.dram_trace.config import DEFAULT_PRESET, SYNTHETIC_KEYS, resolve, with_mapping

if TYPE_CHECKING:
    import pandas as pd  # imported where used: a plain trace run never needs it (slow to import)

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
        import pandas as pd

        from archsim.config import size_text
        from archsim.dram.trace import MAX_TRACE_BYTES

        path = Path(path)
        if not path.is_file():
            raise UserError(f"{path}: command log not found" if not path.exists() else
                            f"{path}: not a regular file; expected a command log CSV")
        if path.stat().st_size > MAX_TRACE_BYTES:     # as a trace: a log is read whole into memory
            raise UserError(f"{path}: command log is larger than {size_text(MAX_TRACE_BYTES)} (the limit)")
        try:
            df = pd.read_csv(path)
        except Exception as exc:  # pandas raises many types for malformed CSV
            raise UserError(f"{path}: not a readable command log CSV ({exc})") from None
        need = ["cycle", "command", "channel", "pseudochannel", "rank", "bankgroup", "bank", "row", "column"]
        missing = [c for c in need if c not in df.columns]
        if missing:
            raise UserError(f"{path}: command log lacks columns {', '.join(missing)}; expected {', '.join(need)}")
        return cls(df[need])


def _progress_enabled(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty() and os.environ.get("CI", "").lower() not in ("1", "true", "yes")


def _draw(done: int, total: int, t0: float) -> None:
    frac = done / total if total else 1.0
    width = 30
    bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
    rate = done / max(time.perf_counter() - t0, 1e-9)
    sys.stderr.write(f"\r[{bar}] {done}/{total} requests  {rate / 1e3:.0f} K req/s ")
    sys.stderr.flush()


class Phases:
    """Wall and CPU (process) seconds per phase of a run, in order: mark(name) closes the phase that began
    at the previous mark. benchmarks/bench_trace_cli.py reports them (Result.extra["timings_s"], ["cpu_s"])."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self._last = (time.perf_counter(), time.process_time())

    def mark(self, name: str) -> None:
        now = (time.perf_counter(), time.process_time())
        self.wall[name] = self.wall.get(name, 0.0) + now[0] - self._last[0]
        self.cpu[name] = self.cpu.get(name, 0.0) + now[1] - self._last[1]
        self._last = now


# Requests decoded and enqueued at a time. The driver keeps the port's backlog near one chunk and reuses the
# pool slots of served requests, so memory stays ~10 chunks of requests whatever the trace's length (on this
# VM, memory a process touches for the first time costs ~3 ms per MB: a whole-trace pool cost more than the
# simulation; docs/performance.md).
STREAM_CHUNK = 1 << 15


def simulate_trace(spec: DramSpec, ctrl: ControllerConfig, addr: np.ndarray, is_write: np.ndarray,
                   arrive: np.ndarray, engine: str = "numba", log: bool = False, quiet: bool = True,
                   max_cycles: int = 1 << 60, phases: Phases | None = None, chunk: int = STREAM_CHUNK
                   ) -> dict[str, Any]:
    """A trace run is one driver of the channel engine: one port offers the trace's requests in order
    (`ctrl.frontend_width` per cycle), and the engine runs until the last one is done. The trace streams
    through in chunks of `chunk` requests (the same results for any chunk size: the engine is only ever
    advanced to a cycle the port's backlog cannot run dry before). Returns raw arrays: per-request
    enqueue/done/class and channel, command counts, log, timing."""
    if engine != "numba":
        raise UserError(f"engine {engine!r}: the channel engine runs under numba (the independent reference "
                        "scheduler is archsim.engine.reference)")
    addr, is_write = np.asarray(addr, dtype=np.uint64), np.asarray(is_write, dtype=bool)
    arrive = np.broadcast_to(np.asarray(arrive, dtype=np.int64), addr.shape)
    n = len(addr)
    phases = phases or Phases()
    mapping = ctrl.mapping or spec.default_mapping
    chunk = max(int(chunk), 1)
    i64 = np.int64
    req_enq, req_done = np.empty(n, i64), np.empty(n, i64)
    req_kind, channel = np.empty(n, np.int8), np.empty(n, np.int32)     # row class 0-2; channel
    ms = MemorySystem(spec, ctrl, log=log, requests=min(n, 4 * chunk), max_cycles=max_cycles)
    width = ctrl.frontend_width
    port = ms.add_port("mem", width=width)
    busy: list[tuple[int, int, int]] = []     # (first slot, first request, last request + 1), enqueue order
    free: list[int] = []                      # first slots of reclaimed regions of `chunk` slots

    def harvest(everything: bool = False) -> None:
        """Copy out the results of served regions and reclaim their slots."""
        keep = []
        for slot, lo, hi in busy:
            if everything or ms.served(slot, slot + hi - lo):
                pool = ms.S
                req_enq[lo:hi] = pool.r_enq[slot:slot + hi - lo]
                req_done[lo:hi] = pool.r_done[slot:slot + hi - lo]
                req_kind[lo:hi] = pool.r_class[slot:slot + hi - lo]
                if hi - lo == chunk:
                    free.append(slot)
            else:
                keep.append((slot, lo, hi))
        busy[:] = keep

    def enqueue(lo: int) -> int:
        hi = min(lo + chunk, n)
        dec = mapping_mod.decode(spec, addr[lo:hi], mapping)
        channel[lo:hi] = dec["channel"]
        phases.mark("decode")
        if not free:
            harvest()
        slot = free.pop() if free and hi - lo == chunk else None
        ids = ms.enqueue_requests(port, dec["channel"], dec["bank"], dec["row"], dec["column"], is_write[lo:hi],
                                  arrive[lo:hi], -1, slot=slot)
        busy.append((int(ids[0]), lo, hi))
        phases.mark("engine_setup")
        return hi

    def backlog() -> int:
        return int(ms.S.p_tail[port] - ms.S.p_head[port])

    def run() -> None:
        nxt = 0
        low = max(chunk, width)      # a backlog of at least `width`: every advance below moves the clock
        while nxt < n:
            while nxt < n and backlog() < low:
                nxt = enqueue(nxt)
            if nxt < n:
                # the port offers at most `width` requests a cycle, so it cannot run dry before this cycle
                ms.advance(ms.clock + backlog() // width)
                phases.mark("kernel")
        ms.run()
        harvest(everything=True)
        phases.mark("kernel")  # the engine's runs, including loading it from numba's cache in a new process

    phases.mark("engine_setup")
    if _progress_enabled(quiet):
        t0 = time.perf_counter()
        failed: list[BaseException] = []

        def run_catching() -> None:
            try:
                run()
            except BaseException as exc:    # re-raised below, in the caller's thread
                failed.append(exc)

        # the kernel releases the GIL (nogil=True), so this thread can draw progress while it runs
        th = threading.Thread(target=run_catching, daemon=True)
        th.start()
        while th.is_alive():
            th.join(0.25)
            _draw(int(ms.S.progress[0]), n, t0)
        sys.stderr.write("\n")
        if failed:
            raise failed[0]
    else:
        run()
    S = ms.S
    out = {"req_enq": req_enq, "req_done": req_done, "req_kind": req_kind, "channel": channel,
           "cmd_count": S.cmd_count, "end_cycle": int(req_done.max()) if n else 0, "wall_s": ms.wall_s,
           "engine": ms, "phases": phases, "pre_cycles": S.pre_cycles.copy(), "pre_since": S.pre_since.copy()}
    if log:
        k = int(S.n_log[0])
        out["log"] = [S.log_clk[:k], S.log_cmd[:k], S.log_bank[:k], S.log_row[:k], S.log_col[:k]]
    return out


def command_log_frame(spec: DramSpec, raw_log: list[np.ndarray]) -> CommandLog:
    import pandas as pd

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


def run_trace(trace: Any, preset: str | DramSpec = DEFAULT_PRESET, channels: int | None = None,
              mapping: str | None = None, controller: dict[str, Any] | ControllerConfig | None = None,
              overrides: dict[str, Any] | list[str] | None = None, log: bool = False, engine: str = "numba",
              quiet: bool = True, seed: int = 0) -> Result:
    """Simulate a memory trace on a DRAM preset.

    trace:      a path (Ramulator 2 or DRAMsim3 format, optionally .gz), an archsim.dram.trace.Trace, or a
                dict {kind: random|stream, requests: N, read_fraction: 0.8, span_bytes, seed} for a synthetic one
                (seed: the run's `seed` when the dict gives none).
    preset:     preset name (see `archsim presets list`), a preset YAML path, or a loaded DramSpec.
    channels:   override the preset's channel count. mapping: e.g. "RoBaRaCoCh". controller: ControllerConfig
                fields. overrides: {"timing.nRCD": 20} or ["timing.nRCD=20"].
    Returns a Result: .stats (dict), .df (one row per channel), .manifest; with log=True also
    .extra["command_log"] (a CommandLog).
    """
    phases = Phases()
    su = trace_setup(trace, preset=preset, channels=channels, mapping=mapping, controller=controller,
                     overrides=overrides, engine=engine, seed=seed)
    phases.mark("setup")  # spec and controller
    return _run(su, seed, log=log, quiet=quiet, phases=phases)


# ---- the run's config resolved once -------------------------------------------------------------------------
@dataclass(frozen=True)
class TraceFile:
    """trace: a trace file (Ramulator 2 or DRAMsim3 format, optionally .gz); key path `trace`."""

    path: str


@dataclass(frozen=True)
class SyntheticSource:
    """trace: a synthetic trace, {kind, requests, ...} (key paths trace.<key>) or the shorthand synthetic:KIND:N;
    every generator argument filled (archsim.dram.trace.synthetic_trace)."""

    kind: str
    requests: int
    read_fraction: float
    span_bytes: int               # given, else the device's capacity up to 2 GiB
    seed: int                     # given, else the run's
    start: int
    desc: Any = field(compare=False)   # what the manifest records: the mapping as run, or the shorthand


@dataclass(frozen=True)
class LoadedTrace:
    """trace: an archsim.dram.trace.Trace already in memory (the Python API)."""

    trace: Any


# the trace's source is the run's variant: each kind with its own fields
TRACE_SOURCES: dict[str, type] = {"file": TraceFile, "synthetic": SyntheticSource, "loaded": LoadedTrace}


@dataclass(frozen=True)
class Setup:
    """A trace run's config resolved once (the preset loaded once, with its overrides and channel count; the
    controller with its address mapping and the convention's front end for the standard), passed to `_run`."""

    spec: DramSpec
    controller: ControllerConfig
    source: TraceFile | SyntheticSource | LoadedTrace
    engine: str


def trace_setup(trace: Any, preset: str | DramSpec = DEFAULT_PRESET, channels: int | None = None,
                mapping: str | None = None, controller: dict[str, Any] | ControllerConfig | None = None,
                overrides: dict[str, Any] | list[str] | None = None, engine: str = "numba", seed: int = 0) -> Setup:
    """run_trace's arguments resolved and typed (the one place both entries, run_trace and the registered
    system, build a run from)."""
    if channels is not None and (isinstance(channels, bool) or not isinstance(channels, int) or channels < 1
                                 or channels & (channels - 1)):
        raise ConfigError("channels", f"must be a power of two >= 1, got {channels!r}")
    if isinstance(preset, DramSpec):
        spec = preset if channels is None else load_spec(preset.raw, overrides={"org.channels": channels})
    else:
        # the channel count is one more override of the preset (after the others: it wins), so its files are
        # read once
        items = [parse_override(o) for o in overrides] if isinstance(overrides, list) else list((overrides or {}).items())
        if channels is not None:
            items.append(("org.channels", channels))
        spec = load_spec(preset, overrides=dict(items))
    ctrl = controller if isinstance(controller, ControllerConfig) else ControllerConfig.from_dict(controller)
    if mapping is not None:
        ctrl = with_mapping(ctrl.to_dict(), mapping)
    if ctrl.mapping is None:
        ctrl = ControllerConfig.from_dict({**ctrl.to_dict(), "mapping": spec.default_mapping})
    ctrl = ctrl.for_standard(spec.raw.get("standard", ""))
    return Setup(spec=spec, controller=ctrl, source=_source(trace, spec, seed), engine=engine)


def _source_kind(trace: Any) -> str:
    """The name (in TRACE_SOURCES) of the kind of source `trace` is."""
    from archsim.dram import trace as trace_mod

    if isinstance(trace, dict) or (isinstance(trace, str) and trace.startswith("synthetic:")):
        return "synthetic"
    return "loaded" if isinstance(trace, trace_mod.Trace) else "file"


def _source(trace: Any, spec: DramSpec, seed: int) -> TraceFile | SyntheticSource | LoadedTrace:
    kind = TRACE_SOURCES[_source_kind(trace)]
    if kind is TraceFile:
        return TraceFile(path=str(trace))
    if kind is LoadedTrace:
        return LoadedTrace(trace=trace)
    # A synthetic trace spans 2 GiB by default, or the whole device when it is smaller.
    span = min(2 << 30, spec.capacity_bytes)
    if isinstance(trace, str):
        from archsim.dram.trace import parse_synthetic

        name, n = parse_synthetic(trace)
        given: dict[str, Any] = {"kind": name, "requests": n, "seed": seed, "span_bytes": span}
        desc: Any = trace
    else:
        _check_synthetic(trace)
        given = desc = {"span_bytes": span, **trace}
    fill = {"read_fraction": SYNTHETIC_KEYS["read_fraction"], "start": SYNTHETIC_KEYS["start"], "seed": seed}
    return SyntheticSource(**{**fill, **given}, desc=desc)


def _check_synthetic(trace: dict[str, Any]) -> None:
    """A synthetic trace given as a mapping: known keys, kind and requests given."""
    for key in trace:
        if key not in SYNTHETIC_KEYS:
            raise ConfigError(f"trace.{key}", f"unknown key of a synthetic trace; allowed: {', '.join(SYNTHETIC_KEYS)}")
    for key in ("kind", "requests"):
        if key not in trace:
            raise ConfigError(f"trace.{key}", f"missing: a synthetic trace needs kind ({'|'.join(SYNTHETIC_KINDS)}) "
                              "and requests")


def _read(source: TraceFile | SyntheticSource | LoadedTrace, spec: DramSpec, ctrl: ControllerConfig,
          log: bool) -> tuple[Any, Any]:
    """(the trace, what the manifest records of it)."""
    from archsim.dram import trace as trace_mod

    if isinstance(source, SyntheticSource):
        tr = trace_mod.synthetic_trace(kind=source.kind, requests=source.requests, read_fraction=source.read_fraction,
                                       span_bytes=source.span_bytes, access_bytes=spec.access_bytes,
                                       seed=source.seed, start=source.start)
        return tr, source.desc
    if isinstance(source, LoadedTrace):
        return source.trace, source.trace.source
    return _read_while_loading_engine(source.path, spec, ctrl, log), source.path


def _run(su: Setup, seed: int, log: bool, quiet: bool, phases: Phases) -> Result:
    from archsim.dram import trace as trace_mod

    spec, ctrl = su.spec, su.controller
    tr, trace_desc = _read(su.source, spec, ctrl, log)
    phases.mark("read")
    if getattr(tr, "vec", None) is not None:
        tr.addr = trace_mod.to_addresses(tr, spec, ctrl.mapping)
    if len(tr) == 0:
        raise UserError(f"{trace_desc}: empty trace")
    check_capacity(spec, int(tr.addr.max()), source=str(tr.source))
    for w in trace_mod.trace_warnings(tr, spec, ctrl.mapping):
        print(f"archsim: warning: {w}", file=sys.stderr)
    phases.mark("check")
    raw = simulate_trace(spec, ctrl, tr.addr, tr.is_write, tr.arrive, engine=su.engine, log=log, quiet=quiet,
                         phases=phases)
    result = _result(spec, ctrl, tr, raw, trace_desc, seed, su.engine, log)
    phases.mark("stats")
    result.extra["timings_s"], result.extra["cpu_s"] = phases.wall, phases.cpu
    return result


def _read_while_loading_engine(path: Any, spec: DramSpec, ctrl: ControllerConfig, log: bool) -> Any:
    """read_trace(path), while another thread loads the channel kernel from numba's cache (~0.05 s): the parser
    releases the GIL, so both proceed on two cores. The parser is loaded first, here: the first compiled function
    a process loads pays numba's one-time initialisation, under numba's compiler lock, and the loading thread
    would otherwise hold that lock while the parser waited for it."""
    from archsim.dram import fast_trace
    from archsim.dram import trace as trace_mod

    fast_trace.load()
    try:
        probe = MemorySystem(spec, ctrl, log=log, requests=1)
    except Exception:   # noqa: BLE001  (the run builds its own engine and reports the error there)
        return trace_mod.read_trace(path)
    if probe.kernel_cached() is False:   # a cold cache: the whole input is checked before minutes of compile
        return trace_mod.read_trace(path)

    def load_kernel() -> None:
        try:
            probe.load_kernel()
        except Exception:   # noqa: BLE001  (only a head start: the run builds its own engine and reports any error)
            pass

    loader = threading.Thread(target=load_kernel, name="archsim-load-kernel", daemon=True)
    loader.start()
    try:
        return trace_mod.read_trace(path)
    finally:
        # also after a read error: a process must not exit while a thread is inside LLVM (it aborts). With a
        # cold cache (a first run) that error then waits for the kernel's compile.
        loader.join()


def _result(spec: DramSpec, ctrl: ControllerConfig, tr: Any, raw: dict[str, Any], trace_desc: Any, seed: int,
            engine: str, log: bool) -> Result:
    n = len(tr)
    nch = spec.channels
    # Ramulator 2.1's convention: the run ends when the front end has handed over the last request (its
    # memory clock then is the cycle that request entered its queue), not when the queued requests complete
    cycles = int(raw["req_enq"].max()) if ctrl.run_end == "last_accept" and n else raw["end_cycle"]
    seconds = cycles * spec.tCK_s
    is_write = np.asarray(tr.is_write, dtype=bool)
    kind = raw["req_kind"]
    counts = raw["cmd_count"]
    names = spec.command_names
    total_counts = {name: int(counts[:, i].sum()) for i, name in enumerate(names)}
    bytes_moved = n * spec.access_bytes
    bw = bytes_moved / seconds if seconds > 0 else 0.0
    # per refresh node (rank), the cycles every bank was closed and none refreshing, up to the run's end
    pre = energy_mod.precharged_cycles(raw["pre_cycles"], raw["pre_since"], cycles).reshape(nch, -1)
    energy_all = energy_mod.dram_energy_pj(spec, total_counts, cycles, spec.channels,
                                           precharged=(int(pre.sum()), pre.size))
    # Per-channel counts and exact (integer) latency sums in one pass; a mean is sum / count, which equals
    # numpy's mean of the same values (exact while sums stay below 2**53, as numpy's float sum needs too).
    from archsim.dram.fast_stats import request_stats

    rs = request_stats(raw["channel"], is_write, kind, raw["req_enq"], raw["req_done"], nch)
    per_req, per_read, per_kind, lat_sum, lat = rs["per_req"], rs["per_read"], rs["per_kind"], rs["lat_sum"], rs["lat"]
    n_read = len(lat)
    n_kind = per_kind.sum(axis=0)
    lat_mean = int(lat_sum.sum()) / n_read if n_read else 0.0
    # lat is this function's own array: partition it in place (the same order statistics, no copy)
    p50, p99 = (float(v) for v in np.percentile(lat, [50, 99], overwrite_input=True)) if n_read else (0.0, 0.0)
    stats: dict[str, Any] = {
        "preset": spec.name, "channels": spec.channels, "mapping": ctrl.mapping, "engine": engine,
        "cycles": cycles, "seconds": seconds, "tCK_ps": spec.tCK_ps, "convention": ctrl.convention,
        "last_done_cycle": raw["end_cycle"], "last_accept_cycle": int(raw["req_enq"].max()) if n else 0,
        "requests": n, "reads": n_read, "writes": n - n_read,
        "bytes": bytes_moved, "bandwidth_GBps": bw / 1e9,
        "peak_bandwidth_GBps": spec.peak_bw_bytes_per_s / 1e9,
        "bandwidth_pct_of_peak": 100.0 * bw / spec.peak_bw_bytes_per_s,
        # what the front end can offer: frontend_width requests of access_bytes per cycle (a bound of its own)
        "frontend_width": ctrl.frontend_width,
        "frontend_bandwidth_GBps": ctrl.frontend_width * spec.access_bytes / spec.tCK_s / 1e9,
        "row_hits": int(n_kind[0]), "row_misses": int(n_kind[1]),
        "row_conflicts": int(n_kind[2]),
        # (over the requests served by a command of their own: posted_writes / merge_reads answer some without)
        "row_hit_rate": int(n_kind[0]) / int(n_kind.sum()) if int(n_kind.sum()) else float("nan"),
        "read_latency_mean_cycles": lat_mean,
        "read_latency_p50_cycles": p50,
        "read_latency_p99_cycles": p99,
        "read_latency_mean_ns": lat_mean * spec.tCK_ps / 1000,
        "commands": total_counts,
        # (the per-state background's input: precharged node-cycles summed over that many refresh nodes)
        "precharged_cycles": int(pre.sum()), "refresh_nodes": int(pre.size),
        "energy_pj": energy_all, "energy_total_pj": energy_mod.total(energy_all),
        "energy_pj_per_bit": energy_mod.total(energy_all) / (bytes_moved * 8),
        "wall_s": raw["wall_s"],
    }
    rows = []
    for c in range(nch):
        cnt = {name: int(counts[c, i]) for i, name in enumerate(names)}
        e = energy_mod.dram_energy_pj(spec, cnt, cycles, 1, precharged=(int(pre[c].sum()), pre.shape[1]))
        nr = int(per_read[c])
        rows.append({"channel": c, "requests": int(per_req[c]), "reads": nr,
                     "writes": int(per_req[c]) - nr, "row_hits": int(per_kind[c, 0]),
                     "row_misses": int(per_kind[c, 1]), "row_conflicts": int(per_kind[c, 2]),
                     "read_latency_mean_cycles": int(lat_sum[c]) / nr if nr else 0.0,
                     "bytes": int(per_req[c]) * spec.access_bytes, "cycles": cycles,
                     **{f"cmd_{k}": v for k, v in cnt.items()},
                     **{f"energy_{k}_pj": v for k, v in e.items()}})
    df = rows  # Result makes it a DataFrame when first read
    config = {"system": "dram-trace", "preset": spec.name, "dram": spec.raw, "controller": ctrl.to_dict(),
              "trace": trace_desc, "engine": engine}
    result = Result(stats=stats, df=df, manifest=make_manifest("dram-trace", config, seed=seed))
    if log:
        result.extra["command_log"] = command_log_frame(spec, raw["log"])
    result.extra["spec"] = spec
    result.extra["raw"] = raw
    return result



def run_config(config: dict[str, Any], seed: int = 0) -> Result:
    """System entry: the config (DramTraceConfig's keys) resolved once into a `Setup`, then simulated."""
    phases = Phases()
    su = setup(config, seed)
    phases.mark("setup")
    return _run(su, seed, log=False, quiet=True, phases=phases)


def setup(config: dict[str, Any], seed: int = 0) -> Setup:
    """A dram-trace config resolved and typed: what `run_config` passes down."""
    config = resolve(config)
    if "trace" not in config:
        raise ConfigError("trace", "missing: a trace path or {kind: random|stream, requests: N}")
    trace = config["trace"]
    if isinstance(trace, dict):
        _check_synthetic(trace)
        trace = {"seed": seed, **trace}
    elif not isinstance(trace, str):
        raise ConfigError("trace", f"must be a trace path or {{kind: random|stream, requests: N}}, got {trace!r}")
    overrides = {}
    for section, values in (config.get("dram") or {}).items():
        if isinstance(values, dict):
            for k, v in values.items():
                overrides[f"{section}.{k}"] = v
        else:
            overrides[section] = values
    return trace_setup(trace, preset=config.get("preset", DEFAULT_PRESET), channels=config.get("channels"),
                       mapping=config.get("mapping"), controller=config.get("controller"), overrides=overrides,
                       engine=config.get("engine", "numba"), seed=seed)
