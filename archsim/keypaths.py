"""Key paths: the one definition of which config keys exist. Sweep axes (archsim.sweep.spec) and the CLI's
--set / --config (archsim.commands.common) both validate against config_leaves(); a system's typed schema
(archsim.registry) types the values.
"""
from __future__ import annotations

import math
from typing import Any

from archsim.registry import names, resolve_config, schema_of


class Leaves(dict):
    """config_leaves(): {key path: current value}, knowing its system (whose schema types the values)."""

    system: str = ""


class NotSettable(str):
    """A key path a `keys` hook lists to explain why it cannot be set (e.g. a derived DRAM timing); the
    string is the reason. key_problem() reports it instead of "unknown key path"."""


def config_leaves(config: dict[str, Any]) -> dict[str, Any]:
    """Every settable key path of `config`'s system -> its current value: the leaves of the resolved config
    (the system's defaults filled in) plus the keys its `keys` hook adds (e.g. dram.timing.nRCD from the
    preset). A null value means "any type"."""
    import copy

    from archsim.config import flatten

    resolved = resolve_config(copy.deepcopy(config))
    leaves = Leaves(flatten(resolved))
    leaves.system = resolved["system"]
    cls = schema_of(resolved["system"])
    if cls is not None:
        _schema_leaves(cls, resolved, leaves)
    return leaves


def _schema_leaves(cls: type, resolved: dict[str, Any], leaves: dict[str, Any]) -> None:
    """The settable keys a resolved config leaves out, from its schema: an optional key (absent unless given) at
    its documented default; the keys of a section the config gives as a mapping or not at all (e.g. a synthetic
    trace, controller keys left at their defaults), and the section itself where a plain value may replace it
    (`trace: FILE`); and the values of the preset an `overrides_of` mapping overrides (`dram.timing.nRCD`,
    `mapping_overrides.weights.layout`)."""
    from archsim import schema

    for key in schema.keys(cls):
        if key.optional and ("." not in key.path and key.scalar() or _is_list(key.type)):
            leaves.setdefault(key.path, key.default)
        if key.overrides_of is not None:
            leaves.update({k: v for k, v in _preset_leaves(key, resolved).items() if k not in leaves})
        sub = schema.section_of(key.type)
        current = _get(resolved, key.path)
        if sub is None or not (current is None or isinstance(current, dict)):
            continue
        if any(m is not sub for m in schema._members(key.type) if m is not type(None)):
            leaves.setdefault(key.path, None)       # a plain value may stand for the section
        for inner in schema.keys(sub, key.path + "."):
            if inner.path.count(".") == key.path.count(".") + 1 and (inner.scalar() or _is_list(inner.type)):
                leaves.setdefault(inner.path, inner.default)


def _get(data: dict[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _preset_leaves(key: Any, resolved: dict[str, Any]) -> dict[str, Any]:
    """{key path: value} of the preset whose overrides `key` holds (its `overrides_of`)."""
    import importlib

    from archsim import schema

    ref, loader = key.overrides_of
    name = _get(resolved, ref) or schema.lookup(schema_of(resolved["system"]), ref).default
    module, _, fn = loader.partition(":")
    preset = getattr(importlib.import_module(module), fn)(name)   # the system's layer names its loader
    if isinstance(preset, dict):            # the preset's key paths already (a DRAM preset's, with derived forms)
        return {f"{key.path}.{k}": v for k, v in preset.items()}
    # its identity (name, source) is not a value to override
    return {k: v for k, v in schema.leaves(preset, key.path + ".").items()
            if k not in (f"{key.path}.name", f"{key.path}.source")}


def _is_list(tp: Any) -> bool:
    from typing import get_origin

    from archsim import schema

    return any(get_origin(m) is list for m in schema._members(tp))


def sections(leaves: dict[str, Any]) -> set[str]:
    """Dotted paths of the mappings that hold the leaves."""
    return {key.rsplit(".", n)[0] for key in leaves for n in range(1, key.count(".") + 1)}


def key_problem(key: str, leaves: dict[str, Any], where: str = "the base config (nor the system's defaults)",
                also: tuple[str, ...] = ()) -> str | None:
    """Why `key` is not a settable key path (None if it is), with the nearest valid ones."""
    from archsim.errors import nearest

    if isinstance(leaves.get(key), NotSettable):
        return str(leaves[key])
    system = getattr(leaves, "system", "")
    leaves = {k: v for k, v in leaves.items() if not isinstance(v, NotSettable)}
    if key in leaves or key in also:
        return None
    if key in sections(leaves):
        inside = sorted(k for k in leaves if k.startswith(key + "."))
        return ("is a section of the base config, not a value; set one of its keys: "
                + ", ".join(inside[:12]) + (" ..." if len(inside) > 12 else ""))
    msg = f"unknown key path: not in {where}"
    hint = nearest(key, list(leaves) + list(also), n=4)
    parent = key.rsplit(".", 1)[0] if "." in key else ""
    siblings = sorted(k for k in leaves if parent and k.startswith(parent + "."))
    if hint:
        msg += f"; did you mean {', '.join(hint)}?"
    elif siblings:
        msg += f"; keys under {parent}: {', '.join(siblings[:20])}" + (" ..." if len(siblings) > 20 else "")
    else:
        msg += f"; valid key paths: {', '.join(sorted(leaves)[:20])}" + (" ..." if len(leaves) > 20 else "")
    if system:
        msg += f" (every key: `archsim run --system {system} --help`)"
    return msg


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def type_problem(value: Any, base_value: Any, where: str = "the base config") -> str | None:
    """Why `value` cannot replace `base_value` (None if it can). A null base value accepts anything."""
    if base_value is None:
        return None
    want, got = _kind(base_value), _kind(value)
    if want == got or (want == "a number" and got == "an integer"):
        return None
    hint = ""
    if isinstance(value, str) and want in ("a number", "an integer"):
        try:
            if not math.isfinite(float(value)):
                return f"must be a finite number, got {value!r}"
            hint = f" (YAML reads {value} as text: give the mantissa a dot and the exponent a sign, e.g. 1.0e+11)"
        except ValueError:
            pass
    return f"value {value!r} is {got}, but {where} has {want} here ({base_value!r}); expected {want}{hint}"


def value_problem(key: str, value: Any, leaves: dict[str, Any], where: str | None = None,
                  system: str | None = None) -> str | None:
    """Why `value` cannot be set at `key` (None if it can): the system's schema decides where it describes the
    key (type, allowed values, range), else the type of the current value (type_problem). `system`: the system
    whose schema decides (default: the one `leaves` are of)."""
    from archsim import schema

    if not schema.finite(value):
        return f"must be a finite number, got {value!r}"
    system = system or getattr(leaves, "system", "")
    cls = schema_of(system) if system else None
    spec = None
    if cls is not None:
        spec = schema.lookup(cls, key)
    if spec is not None and schema.section_of(spec.type) is None:
        return spec.problem(value)
    return type_problem(value, leaves.get(key), where=where or (f"the {system} config" if system else "the base config"))


def coerce_value(key: str, value: Any, system: str) -> Any:
    """A command-line value made the schema's type where YAML read it otherwise (archsim.schema.Key.coerce)."""
    cls = schema_of(system)
    if cls is None:
        return value
    from archsim import schema

    spec = schema.lookup(cls, key)
    return value if spec is None else spec.coerce(value)


def set_key(config: dict[str, Any], key_path: str, value: Any) -> None:
    """Set a dotted key path, creating missing sections (a key may exist only in the system's defaults)."""
    from archsim.errors import ConfigError

    node = config
    *parents, last = key_path.split(".")
    for i, k in enumerate(parents):
        node = node.setdefault(k, {})
        if not isinstance(node, dict):
            where = ".".join(parents[: i + 1])
            raise ConfigError(key_path, f"{where} is {node!r}, not a mapping; set {where} itself instead")
    node[last] = value


Override = tuple[str, Any, str, "int | None"]   # (key path, value, source for errors, line in source)


def apply_overrides(config: dict[str, Any], overrides: list[Override]) -> dict[str, Any]:
    """`config` (which names its system) with `overrides` applied in order, each key path and value checked
    against config_leaves() of the config so far (so `preset=...` before `dram.timing.*` checks the new
    preset's timings). The check sweeps apply to their axes; errors are ConfigErrors naming the source."""
    import copy

    from archsim.errors import ConfigError

    out = copy.deepcopy(config)
    for i, (key, value, source, line) in enumerate(overrides):
        if key == "system":
            if value != out.get("system"):
                raise ConfigError(key, f"is {out.get('system')!r} here; choose the system with --system "
                                  f"(known: {', '.join(names())})", source=source, line=line)
            continue
        spec = _schema_value(key, out["system"])
        if spec is not None:
            # a value of the system's own schema is checked against it alone, before the config is resolved:
            # a bad value is reported without loading the models and presets (a fraction of a second)
            value = spec.coerce(value)
            problem = value_problem(key, value, {}, system=out["system"])
        else:
            try:
                leaves = config_leaves(out)
            except ConfigError as exc:  # the config so far is invalid (e.g. an earlier override's value)
                raise _where_set(exc, overrides[:i]) or ConfigError(exc.key_path, exc.problem,
                                                                   source=exc.source or source, line=exc.line) from None
            problem = key_problem(key, leaves, where=f"the keys of system {out['system']}")
            if problem is None:
                value = coerce_value(key, value, out["system"])
                problem = value_problem(key, value, leaves)
        if problem is not None:
            raise ConfigError(key, problem, source=source, line=line)
        set_key(out, key, copy.deepcopy(value))
    try:
        resolve_config(copy.deepcopy(out))   # the system's own checks of the values (ranges, combinations)
    except ConfigError as exc:
        raise _where_set(exc, overrides) or exc from None
    return out


def _schema_value(key: str, system: str) -> Any:
    """The schema Key of `key` when the system's schema declares it as a value (not a section or a preset's
    leaf), else None."""
    from archsim import schema

    cls = schema_of(system)
    spec = schema.lookup(cls, key) if cls is not None else None
    if spec is None or schema.section_of(spec.type) is not None or spec.overrides_of is not None:
        return None
    return spec


def _where_set(exc: Any, overrides: list[Override]) -> Any:
    """A system's check failed on a value without saying where it came from: the same error naming the
    override that set it (`--set memory_mapping=XYZ`, the --config file and line), or None."""
    from archsim.errors import ConfigError

    setters = [o for o in overrides if _related(o[0], exc.key_path)]
    if exc.source is not None or not setters:
        return None
    _, _, source, line = setters[-1]
    return ConfigError(exc.key_path, exc.problem, source=source, line=line)


def _related(set_path: str, error_path: str) -> bool:
    """Whether setting `set_path` set the value at `error_path` (the same key, a parent or a child of it)."""
    return (set_path == error_path or error_path.startswith(set_path + ".")
            or set_path.startswith(error_path + "."))
