"""A DRAM standard is data (archsim/presets/dram/standards/*.yaml); a preset picks a standard and gives its
organisation, timing and energy (archsim/presets/dram/*.yaml). This module loads and validates both, resolves
t*_ns values and derived parameters, and compiles the constraint rows into integer tables for the fast core.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from archsim import expr
from archsim.config import Doc, deep_merge, load_yaml, parse_override, require_choice, require_int, set_path
from archsim.errors import ConfigError, UserError, unknown_name

PRESET_DIR = Path(__file__).resolve().parent.parent / "presets" / "dram"
STANDARD_DIR = PRESET_DIR / "standards"

# Fixed hierarchy, outermost first. A standard that lacks a level has count 1 there.
LEVELS = ("channel", "pseudochannel", "rank", "bankgroup", "bank")
LEVEL_INDEX = {name: i for i, name in enumerate(LEVELS)}
ORG_KEYS = {"channels": "channel", "pseudochannels": "pseudochannel", "ranks": "rank",
            "bankgroups": "bankgroup", "banks_per_group": "bank"}
EFFECTS = ("open", "close", "close_all", "read", "write", "read_close", "write_close", "refresh_all",
           "refresh_bank", "pim", "open_all")
BUSES = ("row", "column")


@dataclass(frozen=True)
class Command:
    name: str
    index: int
    scope: int      # level index at which the command acts (bank, rank, channel ...)
    bus: str        # "row" or "column" command bus
    effect: str


@dataclass
class DramSpec:
    """A fully resolved DRAM device + organisation: what is legal and when (no policy)."""

    name: str
    standard: str
    source: str
    counts: tuple[int, int, int, int, int]          # per level, see LEVELS
    rows: int
    row_bytes: int
    access_bytes: int
    tCK_ps: float
    timing: dict[str, int]                          # every n* parameter, derived ones included
    commands: list[Command]
    constraints: list[dict[str, Any]]               # resolved rows (level, prev, next, latency, window)
    command_bus: str                                # "single" or "dual" (separate row/column buses)
    energy: dict[str, Any]
    raw: dict[str, Any] = field(repr=False, default_factory=dict)  # resolved preset dict (for manifests)

    # ---- derived sizes -------------------------------------------------------------------------
    @property
    def channels(self) -> int:
        return self.counts[0]

    @property
    def banks_per_channel(self) -> int:
        return int(np.prod(self.counts[1:]))

    @property
    def banks_per_rank(self) -> int:
        return self.counts[3] * self.counts[4]

    @property
    def total_banks(self) -> int:
        return int(np.prod(self.counts))

    @property
    def columns(self) -> int:
        """Column accesses (bursts of access_bytes) per row."""
        return self.row_bytes // self.access_bytes

    @property
    def capacity_bytes(self) -> int:
        return self.total_banks * self.rows * self.row_bytes

    @property
    def tCK_s(self) -> float:
        return self.tCK_ps * 1e-12

    @property
    def peak_bw_per_bus_bytes_per_s(self) -> float:
        """Peak of one data bus (a pseudo-channel, or the channel when there are none)."""
        return self.access_bytes / (self.timing["nBL"] * self.tCK_s)

    @property
    def peak_bw_bytes_per_s(self) -> float:
        return self.peak_bw_per_bus_bytes_per_s * self.counts[0] * self.counts[1]

    def cmd(self, name: str) -> int:
        for c in self.commands:
            if c.name == name:
                return c.index
        raise KeyError(name)

    @property
    def command_names(self) -> list[str]:
        return [c.name for c in self.commands]

    # ---- integer tables for the numba core ------------------------------------------------------
    def tables(self) -> dict[str, np.ndarray]:
        rows = self.constraints
        return {
            "con_level": np.array([r["level"] for r in rows], dtype=np.int64),
            "con_prev": np.array([r["prev"] for r in rows], dtype=np.int64),
            "con_next": np.array([r["next"] for r in rows], dtype=np.int64),
            "con_lat": np.array([r["latency"] for r in rows], dtype=np.int64),
            "con_window": np.array([r["window"] for r in rows], dtype=np.int64),
            "cmd_scope": np.array([c.scope for c in self.commands], dtype=np.int64),
            "counts": np.array(self.counts, dtype=np.int64),
        }

    def with_channels(self, channels: int) -> DramSpec:
        return load_spec(self.raw, overrides={"org.channels": channels})


# ------------------------------------------------------------------------------------------------
def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def standard_names() -> list[str]:
    return sorted(p.stem for p in STANDARD_DIR.glob("*.yaml") if p.stem != "jedec")


def preset_path(name_or_path: str | Path) -> Path:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return path
    candidate = PRESET_DIR / f"{name_or_path}.yaml"
    if candidate.is_file():
        return candidate
    # case-insensitive match for convenience
    for p in PRESET_DIR.glob("*.yaml"):
        if p.stem.lower() == str(name_or_path).lower():
            return p
    raise unknown_name("DRAM preset", str(name_or_path), preset_names())


def _load_standard(name: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    path = STANDARD_DIR / f"{name}.yaml"
    if not path.is_file():
        raise unknown_name("DRAM standard", name, standard_names())
    doc = load_yaml(path)
    data = dict(doc.data)
    base_name = data.get("extends")
    if base_name:
        if base_name in seen:
            raise ConfigError("extends", f"cycle through {' -> '.join(seen + (base_name,))}", source=str(path))
        base = _load_standard(base_name, seen + (name,))
        merged = dict(base)
        for key in ("name", "source", "levels", "command_bus"):
            if key in data:
                merged[key] = data[key]
        merged["commands"] = {**base.get("commands", {}), **data.get("commands", {})}
        merged["parameters"] = list(base.get("parameters", [])) + list(data.get("parameters", []))
        merged["derived"] = {**base.get("derived", {}), **data.get("derived", {})}
        merged["constraints"] = list(base.get("constraints", [])) + list(data.get("constraints", []))
        merged["_sources"] = base.get("_sources", []) + [str(path)]
        data = merged
    else:
        data["_sources"] = [str(path)]
    return data


def load_preset_dict(name_or_path: str | Path) -> tuple[dict[str, Any], Doc]:
    doc = load_yaml(preset_path(name_or_path))
    return doc.data, doc


def load_spec(preset: str | Path | dict[str, Any], overrides: dict[str, Any] | list[str] | None = None) -> DramSpec:
    """Load a preset (name, path or already-loaded dict), apply `overrides` ({'timing.nRCD': 20} or
    ['timing.nRCD=20']; paths relative to the preset, a leading 'dram.' is accepted) and validate."""
    if isinstance(preset, dict):
        doc = Doc(data=preset, source=str(preset.get("name", "<preset>")))
    else:
        _, doc = load_preset_dict(preset)
    data = deep_merge(doc.data, {})
    items: list[tuple[str, Any]] = []
    if isinstance(overrides, dict):
        items = list(overrides.items())
    elif overrides:
        items = [parse_override(o) for o in overrides]
    for key, value in items:
        key = key.removeprefix("dram.")
        parts = key.split(".")
        # Setting nX replaces a tX_ns of the preset and vice versa (one source of truth per parameter).
        if len(parts) == 2 and parts[0] == "timing":
            t = data.setdefault("timing", {})
            if parts[1].startswith("n"):
                t.pop("t" + parts[1][1:] + "_ns", None)
            elif parts[1].startswith("t") and parts[1].endswith("_ns"):
                t.pop("n" + parts[1][1:-3], None)
            t[parts[1]] = value
            continue
        set_path(data, key, value, source=f"--set dram.{key}", allow_new=False)
    try:
        return _build(data, doc)
    except ConfigError as exc:
        # A bad value that came from an override is the override's fault, not the preset file's line.
        overridden = {k.removeprefix("dram.") for k, _ in items}
        if exc.key_path in overridden:
            raise ConfigError(exc.key_path, exc.problem,
                              source=f"--set dram.{exc.key_path} (overriding {Path(doc.source).name})") from None
        raise


def _build(data: dict[str, Any], doc: Doc) -> DramSpec:
    src = doc.source
    for key in ("standard", "name", "org", "timing"):
        if key not in data:
            raise ConfigError(key, "missing (a preset needs standard, name, org, timing)", source=src)
    std = _load_standard(require_choice(doc, "standard", data["standard"], standard_names()))

    # --- organisation ---
    org = data["org"]
    if not isinstance(org, dict):
        raise doc.error("org", "must be a mapping")
    allowed_org = set(ORG_KEYS) | {"rows", "row_bytes", "access_bytes"}
    for key in org:
        if key not in allowed_org:
            raise doc.error(f"org.{key}", f"unknown key; allowed: {', '.join(sorted(allowed_org))}")
    counts = []
    for key, level in ORG_KEYS.items():
        value = require_int(doc, f"org.{key}", org.get(key, 1), minimum=1, power_of_two=True)
        if value > 1 and level not in std["levels"]:
            raise doc.error(f"org.{key}", f"{std['name']} has no {level} level (levels: {', '.join(std['levels'])}); must be 1")
        counts.append(value)
    rows = require_int(doc, "org.rows", org.get("rows"), minimum=1, power_of_two=True)
    row_bytes = require_int(doc, "org.row_bytes", org.get("row_bytes"), minimum=1, power_of_two=True)
    access_bytes = require_int(doc, "org.access_bytes", org.get("access_bytes"), minimum=1, power_of_two=True)
    if access_bytes > row_bytes:
        raise doc.error("org.access_bytes", f"must be <= org.row_bytes ({row_bytes}), got {access_bytes}")

    # --- timing ---
    timing_in = data["timing"]
    if not isinstance(timing_in, dict) or "tCK_ps" not in timing_in:
        raise doc.error("timing", "must be a mapping with tCK_ps and the n*/t*_ns parameters")
    tck = timing_in["tCK_ps"]
    if isinstance(tck, bool) or not isinstance(tck, int | float) or tck <= 0:
        raise doc.error("timing.tCK_ps", f"must be a number > 0 (picoseconds), got {tck!r}")
    derived = std.get("derived", {})
    # A standard may derive what its base lists as a parameter (DDR4: nRCDRD = nRCDWR = nRCD).
    params = [p for p in dict.fromkeys(std.get("parameters", [])) if p not in derived]
    timing: dict[str, int] = {}
    for key, value in timing_in.items():
        if key == "tCK_ps":
            continue
        if key.startswith("t") and key.endswith("_ns"):
            name = "n" + key[1:-3]
        else:
            name = key
        if name in derived:
            raise doc.error(f"timing.{key}", f"{name} is derived ({name} = {derived[name]}); set its inputs instead")
        if name not in params:
            hint = [p for p in params if p.lower() == name.lower()]
            raise doc.error(f"timing.{key}", f"unknown timing parameter for {std['name']}"
                            + (f"; did you mean {hint[0]}?" if hint else f"; allowed: {', '.join(params)}"))
        if key.startswith("t"):
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise doc.error(f"timing.{key}", f"must be a time in ns >= 0, got {value!r}")
            # JEDEC rounding: ceil(t / tCK), with a small guard against float noise (e.g. 15.0 / 0.625).
            cycles = max(1, math.ceil(value * 1000.0 / tck - 1e-6))
            if name in timing:
                raise doc.error(f"timing.{key}", f"{name} is given twice (as {name} and {key})")
            timing[name] = cycles
        else:
            if name in timing:
                raise doc.error(f"timing.{key}", f"{name} is given twice")
            timing[name] = require_int(doc, f"timing.{key}", value, minimum=1 if name != "nRTRS" else 0)
    missing = [p for p in params if p not in timing]
    if missing:
        raise doc.error("timing", f"missing parameters for {std['name']}: {', '.join(missing)}")
    env: dict[str, Any] = dict(timing)
    env["banks_per_rank"] = counts[3] * counts[4]
    for name, text in derived.items():
        try:
            env[name] = int(expr.evaluate(text, env))
        except expr.ExprError as exc:
            raise ConfigError(f"derived.{name}", str(exc), source=std["_sources"][-1]) from None
        timing[name] = env[name]

    # --- commands and constraints ---
    commands = []
    for i, (name, c) in enumerate(std["commands"].items()):
        scope = c.get("scope")
        if scope not in LEVEL_INDEX:
            raise ConfigError(f"commands.{name}.scope", f"must be one of {', '.join(LEVELS)}, got {scope!r}",
                              source=std["_sources"][-1])
        if c.get("bus") not in BUSES or c.get("effect") not in EFFECTS:
            raise ConfigError(f"commands.{name}", f"bus must be one of {BUSES} and effect one of {EFFECTS}",
                              source=std["_sources"][-1])
        commands.append(Command(name, i, LEVEL_INDEX[scope], c["bus"], c["effect"]))
    by_name = {c.name: c for c in commands}
    constraints = []
    for n, row in enumerate(std.get("constraints", [])):
        where = f"constraints[{n}]"
        if isinstance(row, dict):
            level, prev, nxt, lat, window = (row.get("level"), row.get("preceding"), row.get("following"),
                                             row.get("latency"), row.get("window", 1))
        else:
            if len(row) not in (4, 5):
                raise ConfigError(where, "must be [level, [preceding], [following], latency, window?]",
                                  source=std["_sources"][-1])
            level, prev, nxt, lat = row[:4]
            window = row[4] if len(row) == 5 else 1
        if level not in LEVEL_INDEX:
            raise ConfigError(f"{where}.level", f"must be one of {', '.join(LEVELS)}, got {level!r}",
                              source=std["_sources"][-1])
        try:
            latency = int(expr.evaluate(lat, env))
        except expr.ExprError as exc:
            raise ConfigError(f"{where}.latency", str(exc), source=std["_sources"][-1]) from None
        for p in [prev] if isinstance(prev, str) else prev:
            for f in [nxt] if isinstance(nxt, str) else nxt:
                if p not in by_name or f not in by_name:
                    bad = p if p not in by_name else f
                    raise ConfigError(where, f"unknown command {bad!r}; known: {', '.join(by_name)}",
                                      source=std["_sources"][-1])
                lv = LEVEL_INDEX[level]
                # A constraint is tracked at one node of `level`; both commands must act at or below it.
                if lv > by_name[p].scope or lv > by_name[f].scope:
                    raise ConfigError(where, f"level {level} is below the scope of {p} or {f}",
                                      source=std["_sources"][-1])
                constraints.append({"group": n, "level": lv, "prev": by_name[p].index, "next": by_name[f].index,
                                    "latency": max(0, latency), "window": int(window),
                                    "expr": str(lat), "prev_name": p, "next_name": f, "level_name": level})

    energy = data.get("energy", {}) or {}
    if energy:
        require_choice(doc, "energy.model", energy.get("model"), ["idd", "table"])
    return DramSpec(
        name=str(data["name"]), standard=std["name"], source=str(data.get("source", "")), counts=tuple(counts),
        rows=rows, row_bytes=row_bytes, access_bytes=access_bytes, tCK_ps=float(tck), timing=timing,
        commands=commands, constraints=constraints, command_bus=std.get("command_bus", "single"),
        energy=energy, raw=data,
    )


def check_capacity(spec: DramSpec, max_addr: int, source: str = "trace") -> None:
    if max_addr >= spec.capacity_bytes:
        raise UserError(
            f"{source}: address {max_addr:#x} is beyond the capacity of {spec.name} "
            f"({spec.capacity_bytes / 2**30:g} GiB = {spec.capacity_bytes:#x} bytes with {spec.channels} channels); "
            f"use more channels or a larger preset")


__all__ = ["DramSpec", "Command", "LEVELS", "load_spec", "preset_names", "preset_path", "check_capacity"]
