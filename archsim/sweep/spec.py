"""Sweep files: parse, validate against the base config, expand into points.

A sweep file is YAML::

    name: gemv-sizes                 # results go to results/<name>/ unless -o is given
    imports: [my_systems]            # optional: modules that register systems, imported in every worker
    base: {system: toy-roofline, gemv: {rows: 1024, cols: 1024}}   # or a path to a YAML config file
    seed: 0                          # base seed; each point's seed is derived from it (see "Seeds")
    seed_by: workload                # optional: workload (default) | point | [key paths]
    axes:                            # Cartesian product across axes
      - grid: {gemv.rows: [1024, 4096], hw.bytes_per_s: [1.0e+11, 2.0e+11]} # product within the axis
      - zip: {gemv.cols: [256, 512], gemv.batch: [1, 2]}                     # paired, equal lengths
      - points: [{gemv.rows: 64}, {gemv.rows: 128, gemv.cols: 64}]           # explicit assignments
    metrics:
      speedup: {expr: "baseline.latency_s / latency_s", baseline: {hw.bytes_per_s: 1.0e+11}}
      gflops: "flops / latency_s / 1e9"

Every swept key path must be a leaf of the *resolved* base config (the base with the system's defaults,
see archsim.registry.resolve_config) and every value must have that leaf's type. A `seed` key in an axis
sets the run seed of those points explicitly instead of deriving it. All checks run before any point does.
(YAML 1.1 reads `1e11` as text: write floats in exponent form as `1.0e+11`.)

Seeds. A point's seed is f(base seed, the values of the keys named by `seed_by`), so points that agree on
those keys get the same seed, whatever their other keys and order:

* `seed_by: workload` (the default): the workload keys, i.e. the point's resolved config without the
  top-level keys in HARDWARE_KEYS (the system, the DRAM preset and its overrides, channels, address
  mapping, controller, ASIC, baselines and simulation options such as engine). For dram-trace that
  leaves `trace`, for pimgpt `model` and `tokens`. Points that differ only in hardware then see the same
  random workload (e.g. the same synthetic trace), so a metric comparing them with a baseline compares
  hardware, not random draws.
* `seed_by: point`: every point gets its own seed from its whole resolved config (archsim <= 0.1.0).
* `seed_by: [trace.kind, trace.requests]`: a seed per distinct value set of the listed key paths.

A `seed` axis overrides all of these for its points.
"""
from __future__ import annotations

import copy
import hashlib
import importlib
import itertools
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from archsim import keypaths, registry
from archsim.config import Doc, get_path, load_yaml, load_yaml_text
from archsim.errors import ConfigError, UserError, nearest
from archsim.inputs import input_digests
from archsim.limits import MAX_SWEEP_POINTS
from archsim.results import config_hash
from archsim.sweep.metrics import Metric, parse_metrics

TOP_KEYS = ("name", "description", "imports", "base", "seed", "seed_by", "axes", "metrics")
# Top-level config keys that describe the hardware or how it is simulated, not the workload: they do not
# change a point's derived seed (see "Seeds" above).
HARDWARE_KEYS = ("system", "preset", "channels", "mapping", "mapping_overrides", "controller", "dram", "asic",
                 "asic_clock_hz", "baselines", "engine", "memo", "refresh", "timeline", "hw",
                 # NeuPIMs: NPU preset, scheduling policy, tensor parallelism and its link, the GPU baseline
                 "npu", "sub_batch", "channel_assignment", "tp", "link_bytes_per_s", "link_latency_s", "gpu",
                 # Duplex: device kind and count, Logic-PIM timing model, replicas
                 "device", "devices", "pim_timing", "data_parallel")
AXIS_KINDS = ("grid", "zip", "points")
SEED_KEY = "seed"

PathKey = tuple[Any, ...]  # a location inside the sweep file: ("axes", 0, "grid", "gemv.rows", 2)


@dataclass(frozen=True)
class Point:
    """One run of a sweep."""

    index: int
    axes: dict[str, Any]  # every axis key path -> the value this point runs with
    config: dict[str, Any]  # base config with this point's values applied (what the system receives)
    seed: int
    config_hash: str  # hash of the resolved config
    point_hash: str  # hash of (resolved config, seed): names the point's files in the results store
    # content digest of every input file the resolved config names (archsim.inputs.input_digests): not part of
    # point_hash (the stores' file names stay), recorded beside the results so a resume sees an edited file
    inputs: dict[str, str]

    def label(self) -> str:
        return _label(self.axes)


@dataclass
class Sweep:
    name: str
    source: str  # the sweep file as named in messages
    text: str  # the sweep file contents (recorded in the results manifest)
    data: dict[str, Any]  # the parsed sweep file
    base: dict[str, Any]
    base_seed: int
    imports: list[str]
    import_paths: list[str]  # prepended to sys.path in workers so `imports` next to the sweep file resolve
    axis_keys: list[str]
    metrics: dict[str, Metric]
    points: list[Point] = field(default_factory=list)
    seed_by: str | list[str] = "workload"  # see "Seeds" in the module docstring
    # `archsim sweep --config/--set` overrides of `base` as "key=value" (already applied to base and points)
    base_overrides: list[str] = field(default_factory=list)


def _fmt(path: PathKey) -> str:
    """("axes", 0, "grid", "gemv.rows") -> "axes[0].grid.gemv.rows", the form archsim.config records lines by."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class _Ctx:
    """Where we are reading from, to build ConfigErrors with file and line."""

    def __init__(self, doc: Doc):
        self.doc = doc

    def line(self, where: PathKey) -> int | None:
        for n in range(len(where), 0, -1):  # the nearest enclosing node that has a line
            line = self.doc.line(_fmt(where[:n]))
            if line is not None:
                return line
        return None

    def error(self, where: PathKey, key_path: str | None, problem: str) -> ConfigError:
        key = key_path if key_path is not None else _fmt(where)
        if key_path is not None and where:
            problem = f"{problem} (at {_fmt(where)})"
        return ConfigError(key, problem, source=self.doc.source, line=self.line(where))


# ----------------------------------------------------------------------------------------------------------
# config helpers


_sections = keypaths.sections
_set = keypaths.set_key


def _get(config: dict[str, Any], key_path: str) -> Any:
    try:
        return get_path(config, key_path)
    except KeyError:  # a resolver may drop a key for some values; the point then runs without it
        return None


def derive_seed(base_seed: int, resolved_hash: str) -> int:
    """Deterministic seed from a base seed and a hash, independent of point order and of the other points."""
    digest = hashlib.sha256(f"{base_seed}/{resolved_hash}".encode()).hexdigest()
    return int(digest[:8], 16)


def seed_keys(resolved: dict[str, Any], seed_by: str | list[str]) -> dict[str, Any]:
    """The part of a point's resolved config its seed is derived from (see "Seeds")."""
    if seed_by == "point":
        return resolved
    if seed_by == "workload":
        return {k: v for k, v in resolved.items() if k not in HARDWARE_KEYS}
    return {k: _get(resolved, k) for k in seed_by}


def point_seed(base_seed: int, resolved: dict[str, Any], seed_by: str | list[str]) -> int:
    """The derived seed of a point whose resolved config is `resolved`."""
    keys = seed_keys(resolved, seed_by)
    if seed_by == "point":
        return derive_seed(base_seed, config_hash(resolved))
    return derive_seed(base_seed, config_hash({"seed_by": seed_by, "values": keys}))


def _point_hash(resolved: dict[str, Any], seed: int) -> str:
    # The seed is part of a point's identity: an explicit seed axis runs one config several times.
    return config_hash({"config": resolved, "seed": seed})


# ----------------------------------------------------------------------------------------------------------
# loading


def load_sweep(sweep: str | Path | dict[str, Any], *, source: str | None = None,
               base_overrides: list[keypaths.Override] | None = None, max_points: int | None = MAX_SWEEP_POINTS,
               plan: PlanHook | None = None) -> Sweep:
    """Read, validate and expand a sweep file (a path, or an already parsed dict). Raises UserError.

    base_overrides: (key path, value, source, line) items applied to the base config first, checked like
    axis keys (archsim.keypaths.apply_overrides); `archsim sweep --set/--config` passes them. A sweep of more
    than max_points points (None: no limit) is refused before its points are expanded; `plan(points, axes)`
    is told the point count and the axes first, and `plan(checked, None)` how many are checked as they are."""
    if isinstance(sweep, dict):
        text = yaml.safe_dump(sweep, sort_keys=False)
        src = source or "<sweep>"
        base_dir = Path.cwd()
    else:
        path = Path(sweep)
        src = source or str(path)
        if not path.is_file():
            raise UserError(f"{src}: sweep file not found" if not path.exists() else
                            f"{src}: not a regular file; expected a sweep file (YAML)")
        from archsim.config import read_text

        text = read_text(path, "sweep file")
        base_dir = path.resolve().parent
    return parse_sweep(text, src, base_dir=base_dir, base_overrides=base_overrides, max_points=max_points,
                       plan=plan)


PlanHook = Callable[[int, "list[str] | None"], None]


def parse_sweep(text: str, source: str, *, base_dir: Path | None = None,
                base_overrides: list[keypaths.Override] | None = None, max_points: int | None = MAX_SWEEP_POINTS,
                plan: PlanHook | None = None) -> Sweep:
    base_dir = base_dir or Path.cwd()
    doc = load_yaml_text(text, source)
    ctx = _Ctx(doc)
    data = doc.data
    name, imports = _name_and_imports(data, source, ctx)
    import_paths = [str(base_dir)]
    _import_modules(imports, import_paths, ctx)
    base = _load_base(data.get("base"), base_dir, ctx)
    base_seed, seed_by = _seeds(data, ctx)
    base = _with_overrides(base, base_overrides, ctx)
    try:
        # every settable key path: the resolved base's leaves plus the system's extra keys (keypaths.config_leaves)
        leaves = keypaths.config_leaves(base)
    except ConfigError as exc:  # the system's resolver rejected the base config
        raise ctx.error(("base",), exc.key_path, exc.problem) from None
    except UserError as exc:
        raise ctx.error(("base", "system"), "system", str(exc)) from None
    sections = _sections(leaves)

    axes_raw = data.get("axes", []) or []
    if not isinstance(axes_raw, list):
        raise ctx.error(("axes",), None, "must be a list of axes: {grid: ...}, {zip: ...} or {points: [...]}")
    axis_sets, axis_keys = _read_axes(axes_raw, leaves, sections, ctx)
    _check_seed_by_keys(seed_by, leaves, sections, ctx)
    count = math.prod(len(a.assignments) for a in axis_sets)
    if plan is not None:
        plan(count, [f"{a.kind} {' x '.join(map(str, a.shape))} ({', '.join(a.keys)})" for a in axis_sets])
    if max_points is not None and count > max_points:
        raise ctx.error(("axes",), None, f"{count:,} points, more than the limit of {max_points:,} a sweep runs "
                        f"unless asked (every point is checked first, then simulated); give --max-points {count} "
                        "to run it anyway, or sweep fewer values")

    sweep = Sweep(name=name, source=source, text=text, data=data, base=base, base_seed=base_seed,
                  imports=list(imports), import_paths=import_paths, axis_keys=axis_keys, metrics={},
                  seed_by=seed_by,
                  base_overrides=[f"{k}={format_value(v)}" for k, v, *_ in (base_overrides or []) if k != "system"])
    sweep.points = _expand(sweep, axis_sets, leaves, ctx, plan)
    # Baselines are checked against the values points actually run with (as stored in the results).
    axis_values = {k: [p.axes[k] for p in sweep.points] for k in axis_keys}
    sweep.metrics = parse_metrics(data.get("metrics") or {}, axis_values, ctx.error)
    return sweep


def _name_and_imports(data: dict[str, Any], source: str, ctx: _Ctx) -> tuple[str, list[str]]:
    """The sweep file's top-level keys checked; its `name` (default: the file's stem) and `imports`."""
    for key in data:
        if key not in TOP_KEYS:
            hint = nearest(str(key), TOP_KEYS)
            extra = f" (did you mean {', '.join(hint)}?)" if hint else ""
            raise ctx.error((key,), None, f"unknown sweep-file key; allowed: {', '.join(TOP_KEYS)}{extra}")
    name = data.get("name", Path(source).stem)
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name.startswith("."):
        raise ctx.error(("name",), None, f"must be a non-empty name usable as a directory name, got {name!r}")
    imports = data.get("imports", []) or []
    if not isinstance(imports, list) or not all(isinstance(m, str) and m for m in imports):
        raise ctx.error(("imports",), None, "must be a list of module names, e.g. [my_package.my_systems]")
    return name, imports


def _seeds(data: dict[str, Any], ctx: _Ctx) -> tuple[int, Any]:
    """(seed, seed_by): the base seed and how points derive theirs (workload, point or a list of key paths)."""
    base_seed = data.get("seed", 0)
    if isinstance(base_seed, bool) or not isinstance(base_seed, int) or base_seed < 0:
        raise ctx.error(("seed",), None, f"must be an integer >= 0, got {base_seed!r}")
    seed_by = data.get("seed_by", "workload")
    if not (seed_by in ("workload", "point") or (isinstance(seed_by, list) and seed_by
                                                  and all(isinstance(k, str) and k for k in seed_by))):
        raise ctx.error(("seed_by",), None, f"must be workload, point or a list of config key paths, got {seed_by!r}")
    return base_seed, seed_by


def _with_overrides(base: dict[str, Any], base_overrides: list[keypaths.Override] | None,
                    ctx: _Ctx) -> dict[str, Any]:
    """The base config (which must name its system) with the command line's --config / --set overrides."""
    system = base.get("system")
    if not isinstance(system, str):
        raise ctx.error(("base", "system") if "system" in base else ("base",), "system",
                        f"base config must name a system (a string); known systems: {', '.join(registry.names())}")
    if not base_overrides:
        return base
    if "system" in base:   # a --config file naming another system than base's
        for key, value, src, line in base_overrides:
            if key == "system" and value != system:
                raise ConfigError("system", f"is {value!r}, but the sweep's base is system {system!r}",
                                  source=src, line=line)
    return keypaths.apply_overrides(base, [o for o in base_overrides if o[0] != "system"])


def _check_seed_by_keys(seed_by: Any, leaves: dict[str, Any], sections: set[str], ctx: _Ctx) -> None:
    if not isinstance(seed_by, list):
        return
    for i, key in enumerate(seed_by):
        if key not in leaves and key not in sections:
            hint = nearest(key, list(leaves) + sorted(sections))
            raise ctx.error(("seed_by", i), None, f"{key!r} is not a key path of the resolved base config"
                            + (f" (did you mean {', '.join(hint)}?)" if hint else ""))


def _import_modules(modules: list[str], paths: list[str], ctx: _Ctx) -> None:
    for p in reversed(paths):
        if p not in sys.path:
            sys.path.insert(0, p)
    for i, mod in enumerate(modules):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name and mod.startswith(exc.name):
                raise ctx.error(("imports", i), None,
                                f"module {mod!r} not found (searched the sweep file's folder and sys.path)") from None
            raise


def _load_base(base: Any, base_dir: Path, ctx: _Ctx) -> dict[str, Any]:
    if isinstance(base, str):  # a path to a config file, relative to the sweep file
        path = Path(base).expanduser()
        path = path if path.is_absolute() else base_dir / path
        if not path.is_file():
            raise ctx.error(("base",), None, f"config file {str(path)!r} not found")
        base = load_yaml(path).data
    if not isinstance(base, dict) or not base:
        raise ctx.error(("base",), None, "must be a config mapping with a `system:` key (or a path to one)")
    return base


@dataclass
class _Axis:
    where: PathKey
    kind: str
    keys: list[str]
    assignments: list[dict[str, Any]]
    shape: list[int]        # values per key of a grid (their product is its length); else [its length]


def _read_axes(axes_raw: list[Any], leaves: dict[str, Any], sections: set[str],
               ctx: _Ctx) -> tuple[list[_Axis], list[str]]:
    axes: list[_Axis] = []
    owner: dict[str, int] = {}
    for i, axis in enumerate(axes_raw):
        where: PathKey = ("axes", i)
        if not isinstance(axis, dict) or len(axis) != 1:
            raise ctx.error(where, None, "each axis must be a mapping with exactly one of: " + ", ".join(AXIS_KINDS))
        kind, body = next(iter(axis.items()))
        if kind not in AXIS_KINDS:
            hint = nearest(str(kind), AXIS_KINDS)
            extra = f" (did you mean {', '.join(hint)}?)" if hint else ""
            raise ctx.error(where + (kind,), None, f"unknown axis kind; allowed: {', '.join(AXIS_KINDS)}{extra}")
        where = where + (kind,)
        if kind in ("grid", "zip"):
            assignments, keys = _read_lists(kind, body, where, leaves, sections, ctx)
        else:
            assignments, keys = _read_points(body, where, leaves, sections, ctx)
        for key in keys:
            if key in owner:
                raise ctx.error(where + (key,), key, f"swept by two axes (axes[{owner[key]}] and axes[{i}]); "
                                                     "put paired values in one zip axis")
            owner[key] = i
        shape = [len(body[k]) for k in keys] if kind == "grid" else [len(assignments)]
        axes.append(_Axis(where, kind, keys, assignments, shape))
    axis_keys = [k for a in axes for k in a.keys]
    return axes, axis_keys


def _read_lists(kind: str, body: Any, where: PathKey, leaves: dict[str, Any],
                sections: set[str], ctx: _Ctx) -> tuple[list[dict[str, Any]], list[str]]:
    if not isinstance(body, dict) or not body:
        raise ctx.error(where, None, f"empty {kind} axis: give at least one key path with a list of values, "
                                     f"e.g. {{{kind}: {{hw.channels: [8, 16]}}}}")
    columns: dict[str, list[Any]] = {}
    for key, values in body.items():
        key = _check_key(key, where + (key,), leaves, sections, ctx)
        if not isinstance(values, list):
            raise ctx.error(where + (key,), key, f"{kind} values must be a list, got {values!r}")
        if not values:
            raise ctx.error(where + (key,), key, f"empty axis: the {kind} list has no values")
        for j, v in enumerate(values):
            _check_value(key, v, where + (key, j), leaves, ctx)
        columns[key] = values
    keys = list(columns)
    if kind == "grid":
        assignments = [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*columns.values())]
    else:
        lengths = {k: len(v) for k, v in columns.items()}
        if len(set(lengths.values())) > 1:
            listing = ", ".join(f"{k}: {n}" for k, n in lengths.items())
            raise ctx.error(where, None, f"zip lists must have equal lengths, got {listing}")
        assignments = [dict(zip(keys, combo, strict=True)) for combo in zip(*columns.values(), strict=True)]
    return assignments, keys


def _read_points(body: Any, where: PathKey, leaves: dict[str, Any], sections: set[str],
                 ctx: _Ctx) -> tuple[list[dict[str, Any]], list[str]]:
    if not isinstance(body, list) or not body:
        raise ctx.error(where, None, "empty points axis: give a non-empty list of {key.path: value} mappings")
    keys: list[str] = []
    assignments: list[dict[str, Any]] = []
    for j, entry in enumerate(body):
        if not isinstance(entry, dict) or not entry:
            raise ctx.error(where + (j,), None, f"each point must be a non-empty {{key.path: value}} mapping, got {entry!r}")
        point: dict[str, Any] = {}
        for key, value in entry.items():
            key = _check_key(key, where + (j, key), leaves, sections, ctx)
            _check_value(key, value, where + (j, key), leaves, ctx)
            point[key] = value
            if key not in keys:
                keys.append(key)
        assignments.append(point)
    return assignments, keys


def _check_key(key: Any, where: PathKey, leaves: dict[str, Any], sections: set[str],
               ctx: _Ctx) -> str:
    if not isinstance(key, str):
        raise ctx.error(where, str(key), "key paths must be strings like hw.channels")
    problem = keypaths.key_problem(key, leaves, also=(SEED_KEY,))
    if problem:
        raise ctx.error(where, key, problem)
    return key


def _check_value(key: str, value: Any, where: PathKey, leaves: dict[str, Any],
                 ctx: _Ctx) -> None:
    if key == SEED_KEY:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ctx.error(where, key, f"seed values must be integers >= 0, got {value!r}")
        return
    problem = keypaths.value_problem(key, value, leaves, where="the base config")
    if problem:
        raise ctx.error(where, key, problem)


CHECK_REPORT_EVERY = 200     # points: how often a long expansion says how far it is


def _expand(sweep: Sweep, axes: list[_Axis], leaves: dict[str, Any], ctx: _Ctx,
            plan: PlanHook | None = None) -> list[Point]:
    points: list[Point] = []
    seen: dict[str, str] = {}
    for index, combo in enumerate(itertools.product(*(a.assignments for a in axes))):
        if plan is not None and index and index % CHECK_REPORT_EVERY == 0:
            plan(index, None)
        values: dict[str, Any] = {}
        for assignment in combo:
            values.update(assignment)
        config = copy.deepcopy(sweep.base)
        for key, value in values.items():
            if key != SEED_KEY:
                _set(config, key, copy.deepcopy(value))
        try:
            resolved = registry.resolve_config(copy.deepcopy(config))
        except UserError as exc:
            # a system's check of the point's config names the key; "<config>:" would only be noise here
            what = f"{exc.key_path}: {exc.problem}" if isinstance(exc, ConfigError) and exc.source is None else exc
            raise ctx.error(("axes",), None, f"point {index} ({_label(values)}): {what}") from None
        chash = config_hash(resolved)
        seed = values[SEED_KEY] if SEED_KEY in values else point_seed(sweep.base_seed, resolved, sweep.seed_by)
        phash = _point_hash(resolved, seed)
        # Axis values as the point runs them, including keys a `points` entry left at the base value.
        axis_values = {k: (seed if k == SEED_KEY else _get(resolved, k)) for k in sweep.axis_keys}
        if phash in seen:
            raise ctx.error(("axes",), None, f"two points are the same run: ({seen[phash]}) and "
                                             f"({_label(axis_values)}); remove the duplicate")
        seen[phash] = _label(axis_values)
        points.append(Point(index=index, axes=axis_values, config=config, seed=seed,
                            config_hash=chash, point_hash=phash, inputs=input_digests(resolved)))
    return points


def format_value(value: Any) -> str:
    """Short display form of an axis value (1e+11 rather than 100000000000.0)."""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _label(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={format_value(v)}" for k, v in values.items()) or "base"
