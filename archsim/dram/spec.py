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
from archsim.dram.effects import EFFECTS, Effect
from archsim.dram.extensions import EXTENSION_DIR, extension_options  # noqa: F401  (extension_options: re-exported)
from archsim.errors import ConfigError, UserError, unknown_name
from archsim.limits import (
    MAX_BANKS,
    MAX_CAPACITY_BYTES,
    MAX_CHANNELS,
    MAX_TIMING_CYCLES,
    TCK_PS_RANGE,
    TIMING_WHY,
)

PRESET_DIR = Path(__file__).resolve().parent.parent / "presets" / "dram"
STANDARD_DIR = PRESET_DIR / "standards"

# The address fields every preset has, outermost first (a standard that lacks one has count 1 there). A
# standard names its own levels over these fields (HBM3: `sid` over the rank field) and may add groups.
LEVELS = ("channel", "pseudochannel", "rank", "bankgroup", "bank")
ADDRESS_FIELDS = LEVELS
LEVEL_INDEX = {name: i for i, name in enumerate(LEVELS)}
ORG_KEYS = {"channels": "channel", "pseudochannels": "pseudochannel", "ranks": "rank",
            "bankgroups": "bankgroup", "banks_per_group": "bank"}
BUSES = ("row", "column")


@dataclass(frozen=True)
class Command:
    name: str
    index: int
    scope: int      # index into spec.levels: the level whose nodes are the command's targets
    bus: str        # "row" or "column" command bus
    effect: str     # one of EFFECTS (archsim.dram.effects: what the command does to its banks)
    buffer: int = 0         # row buffer the command uses (index into spec.row_buffers)
    latency: int = 0        # cycles from issue until its effect is complete (data returned / written)
    action: str = ""        # energy action name (counts x per-action energy, archsim.energy)

    @property
    def is_column(self) -> bool:
        return self.bus == "column"


@dataclass
class DramSpec:
    """A fully resolved DRAM device + organisation: what is legal and when (no policy)."""

    name: str
    standard: str
    source: str
    counts: tuple[int, int, int, int, int]          # per address field, see ADDRESS_FIELDS
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
    levels: list[str] = field(default_factory=lambda: list(LEVELS))   # the standard's levels (tree, then groups)
    level_parent: list[int] = field(default_factory=list)   # parent level index (-1 for the outermost)
    node_of: np.ndarray = field(default=None, repr=False)    # (total_banks, len(levels)) global node ids
    row_buffers: list[str] = field(default_factory=lambda: ["mem"])
    refresh_modes: tuple[str, ...] = ("allbank", "perbank", "none")
    options: dict[str, str] = field(default_factory=dict)    # extension options in force {"ext.option": value}
    rfm_command: int = -1       # the refresh-management command (`rfm_command:`, DDR5's RFMab), -1 none

    # ---- derived sizes -------------------------------------------------------------------------
    @property
    def channels(self) -> int:
        return self.counts[0]

    @property
    def default_mapping(self) -> str:
        """The preset's address mapping for trace runs that name none (`mapping:` in the preset file)."""
        from archsim.dram.mapping import DEFAULT_MAPPING

        return str(self.raw.get("mapping", DEFAULT_MAPPING))

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


def standard_lineage(name: str) -> list[str]:
    """The standard files `name` is built from, base first, e.g. ['jedec', 'ddr4', 'ddr4_ramulator2']."""
    return [Path(p).stem for p in _load_standard(name)["_sources"]]


def standard_command_cycles(name: str) -> dict[str, int]:
    """Command-bus cycles of the standard's multi-cycle commands (`command_cycles:`), {command: cycles}."""
    return {str(k): int(v) for k, v in (_load_standard(name).get("command_cycles") or {}).items()}


def standard_timings_from(name: str) -> str:
    """Where the standard's timings run from on a multi-cycle command: its `last` cycle (default) or `first`."""
    return str(_load_standard(name).get("timings_from", "last"))


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


def _load_standard(name: str, seen: tuple[str, ...] = (), options: dict[str, dict[str, str]] | None = None,
                   ) -> dict[str, Any]:
    """A shipped standard by name, or a user's standard file by path (it may extend a shipped one, and include
    PIM extensions: `include: {newton: {unit: pseudochannel}}`, see `_extension`). `options`: a preset's
    `extension_options` ({extension: {option: value}}), applied wherever the extension is included."""
    path = Path(name) if str(name).endswith((".yaml", ".yml")) else STANDARD_DIR / f"{name}.yaml"
    if not path.is_file():
        raise unknown_name("DRAM standard", name, standard_names())
    doc = load_yaml(path)
    data = dict(doc.data)
    base_name = data.get("extends")
    if base_name:
        if base_name in seen:
            raise ConfigError("extends", f"cycle through {' -> '.join(seen + (base_name,))}", source=str(path))
        base = _load_standard(base_name, seen + (name,), options)
    else:
        base = {"_sources": []}
    for ext, binding in _includes(data, str(path)):
        base = _merge_standard(base, _extension(ext, binding, str(path), (options or {}).get(ext)),
                               replace=("row_buffers", "groups"), extend=True)
    return _merge_standard(base, {**data, "_sources": [str(path)]})


# an extension adds to the row buffers and groups of the standard that includes it; a derived standard replaces them
_REPLACED_KEYS = ("name", "source", "levels", "command_bus", "row_buffers", "groups", "refresh_modes",
                  "command_cycles", "timings_from", "rfm_command")


def _merge_standard(base: dict[str, Any], data: dict[str, Any], replace: tuple[str, ...] = (),
                    extend: bool = False) -> dict[str, Any]:
    """`data` on top of `base`: its scalar keys replace the base's, its commands, parameters, derived timings and
    constraint rows come after the base's. extend=True (an extension): row buffers and groups are added."""
    merged = dict(base)
    for key in _REPLACED_KEYS:
        if key not in data or key in ("name", "source") and extend:
            continue
        if extend and key == "row_buffers":
            merged[key] = list(base.get(key, ["mem"])) + [b for b in data[key] if b not in base.get(key, ["mem"])]
        elif extend and key == "groups":
            merged[key] = {**base.get(key, {}), **data[key]}
        else:
            merged[key] = data[key]
    merged["commands"] = {**base.get("commands", {}), **data.get("commands", {})}
    merged["parameters"] = list(base.get("parameters", [])) + list(data.get("parameters", []))
    merged["derived"] = {**base.get("derived", {}), **data.get("derived", {})}
    merged["constraints"] = list(base.get("constraints", [])) + list(data.get("constraints", []))
    merged["_sources"] = list(base.get("_sources", [])) + list(data.get("_sources", []))
    merged["_options"] = {**base.get("_options", {}), **data.get("_options", {})}
    return merged




def _includes(data: dict[str, Any], src: str) -> list[tuple[str, dict[str, str]]]:
    """The standard's `include:` as (extension name, {placeholder level: level of this standard}) pairs."""
    inc = data.get("include") or {}
    if not isinstance(inc, dict):
        raise ConfigError("include", "must be a mapping {extension: {placeholder: level}}", source=src)
    out = []
    for ext, binding in inc.items():
        binding = binding or {}
        if not isinstance(binding, dict) or not all(isinstance(v, str) for v in binding.values()):
            raise ConfigError(f"include.{ext}", "must map the extension's placeholder levels to levels, e.g. "
                              "{unit: pseudochannel}", source=src)
        out.append((str(ext), binding))
    return out


def _extension(name: str, binding: dict[str, str], including: str, chosen: dict[str, str] | None = None,
               ) -> dict[str, Any]:
    """A PIM extension (standards/extensions/NAME.yaml): commands, parameters, derived timings, constraint rows,
    row buffers and groups to add to a standard. Its `placeholders:` are level names the including standard
    binds (e.g. `unit`: the level whose banks one PIM unit drives: channel on GDDR6, pseudochannel on HBM), so
    one definition of, e.g., AiM's all-bank rows serves every base memory. Its `options:` are modelling
    choices a preset makes (`extension_options: {NAME: {option: value}}`, else each option's default); a value
    changes fields of the extension's commands (e.g. the command bus of Logic-PIM's bundle reads)."""
    path = EXTENSION_DIR / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in EXTENSION_DIR.glob("*.yaml"))
        raise ConfigError(f"include.{name}", f"no PIM extension {name!r}; known: {', '.join(known)}", source=including)
    data = dict(load_yaml(path).data)
    data = _apply_options(name, data, chosen or {}, str(path))
    wanted = dict(data.pop("placeholders", {}) or {})
    if set(binding) != set(wanted):
        raise ConfigError(f"include.{name}", f"must bind exactly the placeholders {', '.join(sorted(wanted)) or '(none)'}"
                          f" ({'; '.join(f'{k}: {v}' for k, v in wanted.items())}), got {sorted(binding)}", source=including)

    def lv(level: Any) -> Any:
        return binding.get(level, level) if isinstance(level, str) else level

    data["commands"] = {n: {**c, "scope": lv(c.get("scope"))} if isinstance(c, dict) else c
                        for n, c in (data.get("commands") or {}).items()}
    data["groups"] = {n: {**g, "parent": lv(g.get("parent"))} if isinstance(g, dict) else g
                      for n, g in (data.get("groups") or {}).items()}
    rows = []
    for row in data.get("constraints") or []:
        if isinstance(row, dict):
            rows.append({**row, "level": lv(row.get("level"))})
        elif isinstance(row, list) and row:
            rows.append([lv(row[0]), *row[1:]])
        else:
            rows.append(row)
    data["constraints"] = rows
    if not data["groups"]:
        data.pop("groups")
    data["_sources"] = [str(path)]
    return data


def _apply_options(name: str, data: dict[str, Any], chosen: dict[str, str], src: str) -> dict[str, Any]:
    """The extension `data` with each of its `options:` set to the chosen value (else its default): the value's
    `commands:` fields replace the extension's. Records the values in `_options` ({"NAME.option": value})."""
    options = dict(data.pop("options", {}) or {})
    unknown = set(chosen) - set(options)
    if unknown:
        raise ConfigError(f"extension_options.{name}.{sorted(unknown)[0]}",
                          f"extension {name} has no such option; options: {', '.join(sorted(options)) or '(none)'}",
                          source=src)
    commands = {n: dict(c) for n, c in (data.get("commands") or {}).items()}
    picked = {}
    for opt_name, opt in options.items():
        values = opt.get("values") or {}
        value = chosen.get(opt_name, opt.get("default"))
        if value not in values:
            raise ConfigError(f"extension_options.{name}.{opt_name}",
                              f"must be one of {', '.join(values)}, got {value!r}", source=src)
        for cmd, fields in ((values[value] or {}).get("commands") or {}).items():
            if cmd not in commands:
                raise ConfigError(f"options.{opt_name}.values.{value}.commands.{cmd}",
                                  f"no command {cmd} in extension {name}", source=src)
            commands[cmd].update(fields)
        picked[f"{name}.{opt_name}"] = value
    return {**data, "commands": commands, "_options": picked}


def load_preset_dict(name_or_path: str | Path, seen: tuple[str, ...] = ()) -> tuple[dict[str, Any], Doc]:
    """A preset's mapping; `extends: OTHER_PRESET` takes every value of OTHER_PRESET that this file does not
    set (sections merged key by key), so a PIM variant of a memory states only what it adds."""
    doc = load_yaml(preset_path(name_or_path))
    base_name = doc.data.get("extends")
    if base_name is None:
        return doc.data, doc
    if not isinstance(base_name, str):
        raise doc.error("extends", f"must be a preset name, got {base_name!r}")
    if base_name in seen:
        raise doc.error("extends", f"cycle through {' -> '.join(seen + (base_name,))}")
    base, _ = load_preset_dict(base_name, seen + (str(name_or_path),))
    own = {k: v for k, v in doc.data.items() if k != "extends"}
    data = deep_merge({k: v for k, v in base.items() if k not in ("name", "source")}, own)
    return data, Doc(data=data, source=doc.source, lines=doc.lines)


def override_leaves(preset: str | Path | dict[str, Any], prefix: str = "dram.") -> dict[str, Any]:
    """The key paths load_spec's `overrides` accept for `preset` -> their preset values: every value of the
    preset file, plus the cycle form nX of each timing the preset gives in ns (tX_ns), since setting either
    form replaces the other. Systems expose these as their `dram.*` config keys (archsim.keypaths.config_leaves)."""
    from archsim.config import flatten

    if isinstance(preset, dict):
        data = preset
    else:
        data, _ = load_preset_dict(preset)
    out = {f"{prefix}{k}": v for k, v in flatten(data).items()}
    timing = data.get("timing") or {}
    tck = timing.get("tCK_ps")
    for key, value in timing.items():
        if key.startswith("t") and key.endswith("_ns") and isinstance(value, int | float) and tck:
            out.setdefault(f"{prefix}timing.n{key[1:-3]}", max(1, math.ceil(value * 1000.0 / tck - 1e-6)))
    std_name = data.get("standard")
    if isinstance(std_name, str) and not std_name.endswith((".yaml", ".yml")) and std_name in standard_names():
        from archsim.keypaths import NotSettable

        for name, text in _load_standard(std_name).get("derived", {}).items():
            out.setdefault(f"{prefix}timing.{name}", NotSettable(f"{name} is derived ({name} = {text}); set its inputs instead"))
    return out


def preset_leaves(preset: str | Path | dict[str, Any]) -> dict[str, Any]:
    """override_leaves without a prefix: what a config field of DRAM overrides (`overrides_of`) may set."""
    return override_leaves(preset, prefix="")


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
    for key in ("standard", "name", "org", "timing"):
        if key not in data:
            raise ConfigError(key, "missing (a preset needs standard, name, org, timing)", source=doc.source)
    std_name = data["standard"]
    if not str(std_name).endswith((".yaml", ".yml")):
        require_choice(doc, "standard", std_name, standard_names())
    opts = data.get("extension_options") or {}
    if not isinstance(opts, dict) or not all(isinstance(v, dict) for v in opts.values()):
        raise ConfigError("extension_options", "must map extension names to {option: value}, e.g. "
                          "{logic_pim: {command_path: own_path}}", source=doc.source)
    std = _load_standard(std_name, options=opts)
    missing = set(opts) - {k.split(".")[0] for k in std.get("_options", {})}
    if missing:
        raise ConfigError(f"extension_options.{sorted(missing)[0]}", f"standard {std_name} includes no extension "
                          f"with options of that name", source=doc.source)
    counts, rows, row_bytes, access_bytes = _organisation(data, doc, std)
    tck, timing, env = _timing(data, doc, std, counts)

    # levels, row buffers, commands and constraints (docs/channel-engine.md, section 1)
    levels, field_of, parent, groups = _levels(std, doc.source)
    node_of = _node_ids(counts, levels, field_of, parent, groups, std)
    level_of = _level_resolver(std, levels, field_of)
    buffers, commands = _commands(std, level_of, env)
    constraints = _constraints(std, commands, levels, parent, level_of, env)
    energy = data.get("energy", {}) or {}
    _check_energy(doc, energy, std, commands)
    rfm = _rfm_command(std, commands, levels)
    if "mapping" in data:
        from archsim.dram.mapping import parse_mapping

        try:
            parse_mapping(data["mapping"])
        except Exception as exc:
            raise doc.error("mapping", str(exc)) from None
    return DramSpec(
        name=str(data["name"]), standard=std["name"], source=str(data.get("source", "")), counts=tuple(counts),
        rows=rows, row_bytes=row_bytes, access_bytes=access_bytes, tCK_ps=float(tck), timing=timing,
        commands=commands, constraints=constraints, command_bus=std.get("command_bus", "single"),
        energy=energy, raw=data, levels=levels, level_parent=parent, node_of=node_of, row_buffers=buffers,
        refresh_modes=tuple(std.get("refresh_modes", ("allbank", "perbank", "none"))),
        options=dict(std.get("_options", {})), rfm_command=rfm,
    )


def _rfm_command(std: dict[str, Any], commands: list[Command], levels: list[str]) -> int:
    """The index of the standard's refresh-management command (`rfm_command:`), -1 if it names none: a refresh
    wider than a bank (the controller issues it like an all-bank refresh)."""
    name = std.get("rfm_command")
    if name is None:
        return -1
    src = std["_sources"][-1]
    by_name = {c.name: c for c in commands}
    if name not in by_name:
        raise ConfigError("rfm_command", f"unknown command {name!r}; known: {', '.join(by_name)}", source=src)
    c = by_name[name]
    if c.effect != Effect.REFRESH or c.scope >= levels.index("bank"):
        raise ConfigError("rfm_command", f"{name} must be a refresh (effect: refresh) wider than a bank",
                          source=src)
    return c.index


def _organisation(data: dict[str, Any], doc: Doc, std: dict[str, Any]) -> tuple[list[int], int, int, int]:
    """The preset's `org`: (counts per address field, rows, row_bytes, access_bytes)."""
    org = data["org"]
    if not isinstance(org, dict):
        raise doc.error("org", "must be a mapping")
    allowed_org = set(ORG_KEYS) | {"rows", "row_bytes", "access_bytes"}
    for key in org:
        if key not in allowed_org:
            raise doc.error(f"org.{key}", f"unknown key; allowed: {', '.join(sorted(allowed_org))}")
    counts = []
    for key, level in ORG_KEYS.items():
        value = require_int(doc, f"org.{key}", org.get(key, 1), minimum=1, power_of_two=True,
                            maximum=MAX_CHANNELS if key == "channels" else MAX_BANKS,
                            why="the most channels archsim simulates" if key == "channels" else "")
        std_fields = [next(iter(x.values())) if isinstance(x, dict) else x for x in std.get("levels", [])]
        if value > 1 and level not in std_fields:
            raise doc.error(f"org.{key}", f"{std['name']} has no {level} level (address fields: "
                            f"{', '.join(std_fields)}); must be 1")
        counts.append(value)
    rows = require_int(doc, "org.rows", org.get("rows"), minimum=1, power_of_two=True)
    row_bytes = require_int(doc, "org.row_bytes", org.get("row_bytes"), minimum=1, power_of_two=True)
    access_bytes = require_int(doc, "org.access_bytes", org.get("access_bytes"), minimum=1, power_of_two=True)
    if access_bytes > row_bytes:
        raise doc.error("org.access_bytes", f"must be <= org.row_bytes ({row_bytes}), got {access_bytes}")
    banks = math.prod(counts)
    if banks > MAX_BANKS:
        raise doc.error("org", f"{banks:,} banks in all ({' x '.join(map(str, counts))} channels x pseudochannels "
                        f"x ranks x bankgroups x banks); at most {MAX_BANKS:,} (the channel engine keeps state per "
                        "bank)")
    if banks * rows * row_bytes > MAX_CAPACITY_BYTES:
        raise doc.error("org", f"a capacity of {banks * rows * row_bytes:,} bytes (banks x rows x row_bytes); "
                        "addresses are at most 60 bits")
    return counts, rows, row_bytes, access_bytes


def _timing_entry(doc: Doc, std: dict[str, Any], key: str, value: Any, tck: float, params: list[str],
                  timing: dict[str, int]) -> None:
    """One `timing` key of the preset into timing[nX] (cycles; a tX_ns time is rounded up to whole cycles)."""
    derived = std.get("derived", {})
    name = "n" + key[1:-3] if key.startswith("t") and key.endswith("_ns") else key
    if name in derived:
        raise doc.error(f"timing.{key}", f"{name} is derived ({name} = {derived[name]}); set its inputs instead")
    if name not in params:
        hint = [p for p in params if p.lower() == name.lower()]
        raise doc.error(f"timing.{key}", f"unknown timing parameter for {std['name']}"
                        + (f"; did you mean {hint[0]}?" if hint else f"; allowed: {', '.join(params)}"))
    if key.startswith("t"):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
            raise doc.error(f"timing.{key}", f"must be a finite time in ns >= 0, got {value!r}")
        # JEDEC rounding: ceil(t / tCK), with a small guard against float noise (e.g. 15.0 / 0.625).
        cycles = max(1, math.ceil(value * 1000.0 / tck - 1e-6))
        if cycles > MAX_TIMING_CYCLES:
            raise doc.error(f"timing.{key}", f"is {cycles:,} cycles at tCK {tck:g} ps; at most "
                            f"{MAX_TIMING_CYCLES:,} ({TIMING_WHY})")
        if name in timing:
            raise doc.error(f"timing.{key}", f"{name} is given twice (as {name} and {key})")
        timing[name] = cycles
    else:
        if name in timing:
            raise doc.error(f"timing.{key}", f"{name} is given twice")
        timing[name] = require_int(doc, f"timing.{key}", value, minimum=1 if name != "nRTRS" else 0,
                                   maximum=MAX_TIMING_CYCLES, why=TIMING_WHY)


def _timing(data: dict[str, Any], doc: Doc, std: dict[str, Any],
            counts: list[int]) -> tuple[float, dict[str, int], dict[str, Any]]:
    """(tCK_ps, every timing parameter in cycles incl. the derived ones, the expression environment)."""
    timing_in = data["timing"]
    if not isinstance(timing_in, dict) or "tCK_ps" not in timing_in:
        raise doc.error("timing", "must be a mapping with tCK_ps and the n*/t*_ns parameters")
    tck = timing_in["tCK_ps"]
    low, high = TCK_PS_RANGE
    if isinstance(tck, bool) or not isinstance(tck, int | float) or not low <= tck <= high:
        raise doc.error("timing.tCK_ps", f"must be a number of picoseconds from {low:g} to {high:g} (1 THz to "
                        f"1 MHz), got {tck!r}")
    derived = std.get("derived", {})
    # A standard may derive what its base lists as a parameter (DDR4: nRCDRD = nRCDWR = nRCD).
    params = [p for p in dict.fromkeys(std.get("parameters", [])) if p not in derived]
    timing: dict[str, int] = {}
    for key, value in timing_in.items():
        if key != "tCK_ps":
            _timing_entry(doc, std, key, value, tck, params, timing)
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
        # a derived gap may be negative (AiM's nAFRD when the user's nRCDRDMAC exceeds nRCDRDAF): a pair any
        # order meets, which the kernel's `last + gap <= now` already reads as no wait; only its size is bounded
        if abs(env[name]) > MAX_TIMING_CYCLES:
            raise doc.error("timing", f"{name} = {derived[name]} is {env[name]:,} cycles; a derived timing is at "
                            f"most {MAX_TIMING_CYCLES:,} in size ({TIMING_WHY}): lower the parameters it derives "
                            "from")
        timing[name] = env[name]
    return tck, timing, env


def _level_resolver(std: dict[str, Any], levels: list[str], field_of: dict[str, str]):
    """level_of(name, where): the index of a level named in the standard (a command's scope, a row's level)."""
    level_index = {name: i for i, name in enumerate(levels)}
    std_src = std["_sources"][-1]

    def level_of(name: Any, where: str) -> int:
        if name in level_index:
            return level_index[name]
        # A field the standard does not have as a level (count 1) means the nearest enclosing level.
        if name in LEVEL_INDEX:
            k = LEVEL_INDEX[name]
            while k > 0 and LEVELS[k] not in field_of.values():
                k -= 1
            for lv, f in field_of.items():
                if f == LEVELS[k]:
                    return level_index[lv]
        raise ConfigError(where, f"unknown level {name!r}; levels of {std['name']}: {', '.join(levels)}", source=std_src)

    return level_of


def _command(std: dict[str, Any], i: int, name: str, c: Any, buffers: list[str], level_of, env: dict[str, Any]) -> Command:
    std_src = std["_sources"][-1]
    where = f"commands.{name}"
    if not isinstance(c, dict):
        raise ConfigError(where, "must be a mapping {scope, bus, effect, buffer?, latency?, action?}", source=std_src)
    scope = level_of(c.get("scope"), f"{where}.scope")
    if c.get("bus") not in BUSES:
        raise ConfigError(f"{where}.bus", f"must be one of {', '.join(BUSES)}, got {c.get('bus')!r}", source=std_src)
    if "effect" not in c:
        raise ConfigError(f"{where}.effect", f"missing; allowed: {', '.join(EFFECTS)}", source=std_src)
    if c["effect"] not in EFFECTS:
        raise ConfigError(f"{where}.effect", f"must be one of {', '.join(EFFECTS)}, got {c['effect']!r}",
                          source=std_src)
    buf = c.get("buffer", buffers[0])
    if buf not in buffers:
        raise ConfigError(f"{where}.buffer", f"no row buffer {buf!r}; row buffers of {std['name']}: "
                          f"{', '.join(buffers)}", source=std_src)
    try:
        lat = int(expr.evaluate(c.get("latency", 1), env))
    except expr.ExprError as exc:
        raise ConfigError(f"{where}.latency", str(exc), source=std_src) from None
    return Command(name, i, scope, c["bus"], c["effect"], buffers.index(buf), max(0, lat), str(c.get("action", name)))


def _commands(std: dict[str, Any], level_of, env: dict[str, Any]) -> tuple[list[str], list[Command]]:
    """(row buffer names, the commands of the standard in order)."""
    buffers = list(std.get("row_buffers", ["mem"]))
    if not buffers or len(set(buffers)) != len(buffers):
        raise ConfigError("row_buffers", f"must be a list of distinct names, got {buffers!r}", source=std["_sources"][-1])
    commands = [_command(std, i, name, c, buffers, level_of, env) for i, (name, c) in enumerate(std["commands"].items())]
    return buffers, commands


def _command_cycles(std: dict[str, Any], commands: list[Command]) -> dict[str, int]:
    """Command-bus cycles per command (`command_cycles:`; default 1), checked against the commands."""
    cycles = std.get("command_cycles") or {}
    std_src = std["_sources"][-1]
    names = [c.name for c in commands]
    if not isinstance(cycles, dict):
        raise ConfigError("command_cycles", "must be a mapping {command: cycles}", source=std_src)
    for name, n in cycles.items():
        if name not in names:
            raise ConfigError(f"command_cycles.{name}", f"unknown command; known: {', '.join(names)}", source=std_src)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"command_cycles.{name}", f"must be an integer >= 1, got {n!r}", source=std_src)
    return {c.name: int(cycles.get(c.name, 1)) for c in commands}


def _bus_rows(std: dict[str, Any], commands: list[Command], cycles: dict[str, int]) -> list[Any]:
    """A command of k > 1 bus cycles holds its command bus for k cycles: rows at the channel level from it to
    every command on the same bus (all commands on a single bus)."""
    dual = std.get("command_bus", "single") == "dual"
    rows = []
    for k in sorted(set(cycles.values()) - {1}):
        for bus in (BUSES if dual else (None,)):
            on_bus = [c.name for c in commands if bus is None or c.bus == bus]
            long = [c for c in on_bus if cycles[c] == k]
            if long:
                rows.append(["channel", long, on_bus, k])
    return rows


def _constraints(std: dict[str, Any], commands: list[Command], levels: list[str], parent: list[int], level_of,
                 env: dict[str, Any]) -> list[dict[str, Any]]:
    """The constraint rows, one per (preceding, following) command pair of every row of the standard.

    Multi-cycle commands (`command_cycles`): the standard's latencies run from the cycle a command is complete
    on the bus (its last), while a command is logged at its first cycle; so a row from a k-cycle command gains
    k - 1 cycles and a row to one loses k - 1 (JEDEC's timing reference; Ramulator 2.1 adjusts the same way).
    A standard whose latencies run from a command's first cycle says `timings_from: first` (LPDDR5, whose
    split activate ACT-1 + ACT-2 is timed from ACT-1): no adjustment, only the bus rows."""
    std_src = std["_sources"][-1]
    by_name = {c.name: c for c in commands}
    cycles = _command_cycles(std, commands)
    timings_from = std.get("timings_from", "last")
    if timings_from not in ("first", "last"):
        raise ConfigError("timings_from", f"must be first or last, got {timings_from!r}", source=std_src)
    constraints = []
    groups: dict[tuple[int, int], int] = {}    # (row, cycle adjustment) -> group id: one latency per group
    n_std = len(_merge_rows(std.get("constraints", []), std_src))
    rows = _merge_rows(std.get("constraints", []) + _bus_rows(std, commands, cycles), std_src)
    for n, (row, where) in enumerate(rows):
        level, prev, nxt, lat, window, sibling = row
        if sibling and level not in levels and level in LEVEL_INDEX:
            continue   # a level the standard lacks has one node: nothing is ever a sibling there
        lv = level_of(level, f"{where}.level")
        try:
            latency = int(expr.evaluate(lat, env))
        except expr.ExprError as exc:
            raise ConfigError(f"{where}.latency", str(exc), source=std_src) from None
        if sibling and (parent[lv] < 0 or window > 1):
            raise ConfigError(where, "a sibling row needs a level with a parent and window 1", source=std_src)
        for p in prev:
            for f in nxt:
                if p not in by_name or f not in by_name:
                    bad = p if p not in by_name else f
                    raise ConfigError(where, f"unknown command {bad!r}; known: {', '.join(by_name)}", source=std_src)
                # (bus occupancy rows count from the start)
                shift = cycles[p] - cycles[f] if n < n_std and timings_from == "last" else 0
                # (a row's group is its index; its pairs with another adjustment form groups after the rows)
                group = n if shift == 0 else groups.setdefault((n, shift), len(rows) + len(groups))
                text = str(lat) if shift == 0 else f"{lat} {'+' if shift > 0 else '-'} {abs(shift)} (command cycles)"
                constraints.append({"group": group, "level": lv, "prev": by_name[p].index, "next": by_name[f].index,
                                    "latency": max(0, latency + shift), "window": int(window),
                                    "sibling": bool(sibling), "expr": text, "prev_name": p, "next_name": f,
                                    "level_name": levels[lv]})
    return constraints


def _check_energy(doc: Doc, energy: dict[str, Any], std: dict[str, Any], commands: list[Command]) -> None:
    """The preset's `energy`: its model, and `actions` priced in units of ACT, RD, WR, REFab, REFpb."""
    if not energy:
        return
    require_choice(doc, "energy.model", energy.get("model"), ["idd", "table"])
    if "background" in energy:
        # idd: per_state (IDD2N while every bank of a rank is closed, IDD3N otherwise) or active (IDD3N always)
        require_choice(doc, "energy.background", energy["background"], ["per_state", "active"])
    acts = energy.get("actions") or {}
    if not isinstance(acts, dict):
        raise doc.error("energy.actions", "must be a mapping {action: expression over ACT, RD, WR, REFab, REFpb}")
    known = {c.action for c in commands}
    for action, text in acts.items():
        if action not in known:
            raise doc.error(f"energy.actions.{action}", "not an action of any command of standard "
                            f"{std['name']}; actions: {', '.join(sorted(known))}")
        try:
            bad = expr.names(str(text)) - {"ACT", "RD", "WR", "REFab", "REFpb"}
        except Exception as exc:
            raise doc.error(f"energy.actions.{action}", str(exc)) from None
        if bad:
            raise doc.error(f"energy.actions.{action}", f"unknown name {sorted(bad)[0]!r}; an action is "
                            "priced in units of ACT, RD, WR, REFab, REFpb")


def _levels(std: dict[str, Any], src: str) -> tuple[list[str], dict[str, str], list[int], dict[str, Any]]:
    """(level names: tree then groups, tree level -> address field, parent level per level, groups)."""
    std_src = std["_sources"][-1]
    tree: list[str] = []
    field_of: dict[str, str] = {}
    for i, item in enumerate(std.get("levels", [])):
        if isinstance(item, str):
            name, fld = item, item
        elif isinstance(item, dict) and len(item) == 1:
            name, fld = next(iter(item.items()))
        else:
            raise ConfigError(f"levels[{i}]", "must be a field name or {name: field}", source=std_src)
        if fld not in LEVEL_INDEX:
            raise ConfigError(f"levels[{i}]", f"unknown address field {fld!r}; allowed: {', '.join(LEVELS)}",
                              source=std_src)
        tree.append(name)
        field_of[name] = fld
    order = [LEVEL_INDEX[field_of[n]] for n in tree]
    if order != sorted(order) or len(set(order)) != len(order) or "channel" not in field_of.values() \
            or "bank" not in field_of.values():
        raise ConfigError("levels", f"must list address fields outermost first, from channel to bank; got {tree}",
                          source=std_src)
    parent = [i - 1 for i in range(len(tree))]
    groups = dict(std.get("groups", {}) or {})
    levels = list(tree)
    for name, g in groups.items():
        if not isinstance(g, dict) or g.get("parent") not in tree or "key" not in g:
            raise ConfigError(f"groups.{name}", f"must be {{parent: <tree level>, key: <expression>}}; tree levels: "
                              f"{', '.join(tree)}", source=std_src)
        levels.append(name)
        parent.append(tree.index(g["parent"]))
    return levels, field_of, parent, groups


def _node_ids(counts: list[int], levels: list[str], field_of: dict[str, str], parent: list[int],
              groups: dict[str, Any], std: dict[str, Any]) -> np.ndarray:
    """Global node id of every bank at every level (tree levels nest; a group splits its parent's banks by
    an expression of the bank's indices below that parent)."""
    total = int(np.prod(counts))
    b = np.arange(total, dtype=np.int64)
    idx = {}
    rem = b.copy()
    for f, n in zip(LEVELS[::-1], counts[::-1], strict=True):
        idx[f] = rem % n
        rem //= n
    out = np.zeros((total, len(levels)), dtype=np.int64)
    for k, name in enumerate(levels):
        if name in field_of:
            k_field = LEVEL_INDEX[field_of[name]]
            below = int(np.prod(counts[k_field + 1:]))
            out[:, k] = b // below
        else:
            g = groups[name]
            try:
                key = np.array([int(expr.evaluate(g["key"], {f: int(idx[f][x]) for f in LEVELS}))
                                for x in range(int(np.prod(counts[1:])))], dtype=np.int64)
            except expr.ExprError as exc:
                raise ConfigError(f"groups.{name}.key", str(exc), source=std["_sources"][-1]) from None
            key = np.tile(key, counts[0])
            out[:, k] = out[:, parent[k]] * (int(key.max()) + 1) + key
    return out


def _merge_rows(rows: list[Any], src: str) -> list[tuple[tuple, str]]:
    """Normalise constraint rows to (level, prev, next, latency, window, sibling); a row with `replace: true`
    replaces earlier rows with the same level, preceding and following lists."""
    out: list[tuple[tuple, str]] = []
    for n, row in enumerate(rows):
        where = f"constraints[{n}]"
        replace = False
        if isinstance(row, dict):
            unknown = set(row) - {"level", "preceding", "following", "latency", "window", "sibling", "replace"}
            if unknown:
                raise ConfigError(f"{where}.{sorted(unknown)[0]}", "unknown key; allowed: level, preceding, following, "
                                  "latency, window, sibling, replace", source=src)
            level, prev, nxt, lat = (row.get("level"), row.get("preceding"), row.get("following"), row.get("latency"))
            window, sibling, replace = row.get("window", 1), bool(row.get("sibling", False)), bool(row.get("replace"))
        else:
            if not isinstance(row, list) or len(row) not in (4, 5):
                raise ConfigError(where, "must be [level, [preceding], [following], latency, window?] or a mapping",
                                  source=src)
            level, prev, nxt, lat = row[:4]
            window = row[4] if len(row) == 5 else 1
            sibling = False
        prev = [prev] if isinstance(prev, str) else list(prev or [])
        nxt = [nxt] if isinstance(nxt, str) else list(nxt or [])
        if lat is None:
            raise ConfigError(f"{where}.latency", "missing", source=src)
        norm = (level, tuple(prev), tuple(nxt), lat, int(window), sibling)
        if replace:
            kept = [r for r in out if (r[0][0], r[0][1], r[0][2]) != (level, tuple(prev), tuple(nxt))]
            if len(kept) == len(out):
                raise ConfigError(where, f"replace: no earlier row [{level}, {prev}, {nxt}] to replace", source=src)
            out = kept
        out.append((norm, where))
    return out


def check_capacity(spec: DramSpec, max_addr: int, source: str = "trace") -> None:
    if max_addr >= spec.capacity_bytes:
        raise UserError(
            f"{source}: address {max_addr:#x} is beyond the capacity of {spec.name} "
            f"({spec.capacity_bytes / 2**30:g} GiB = {spec.capacity_bytes:#x} bytes with {spec.channels} channels); "
            f"use more channels or a larger preset")


__all__ = ["DramSpec", "Command", "LEVELS", "load_spec", "preset_names", "preset_path", "check_capacity"]
