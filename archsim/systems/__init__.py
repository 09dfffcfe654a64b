"""Registry of simulatable systems: name -> function(config: dict, seed: int) -> archsim.results.Result.

`archsim.api.run(config)` dispatches on config["system"]. Sweeps and reports only use this interface, so
every system (DRAM trace runs, PIM-GPT, ...) is sweepable as soon as it registers here.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from archsim.errors import unknown_name

RunFn = Callable[[dict[str, Any], int], Any]
ResolveFn = Callable[[dict[str, Any]], dict[str, Any]]
KeysFn = Callable[[dict[str, Any]], dict[str, Any]]
_REGISTRY: dict[str, RunFn] = {}
# Optional per-system hook returning the config with defaults filled in. Sweeps validate swept key paths
# against the *resolved* config, so a key the system defaults is sweepable without repeating it in `base`.
_RESOLVERS: dict[str, ResolveFn] = {}
# Optional per-system hook: keys(resolved config) -> {key path: current value} of the settable keys that the
# resolved config does not spell out (e.g. dram.timing.* of the DRAM preset). See config_leaves().
_KEYS: dict[str, KeysFn] = {}
# Per-system typed schema (archsim.schema): a dataclass whose fields carry type, default, help and allowed values.
# Overrides (--set, --config, CLI flags) and sweep axes are type-checked against it; `run --help` lists it.
_SCHEMAS: dict[str, type] = {}
# Modules that register systems on import (kept lazy so importing archsim stays cheap).
_PROVIDERS = ["archsim.systems.dram_trace", "archsim.systems.pimgpt", "archsim.systems.neupims",
              "archsim.systems.duplex", "archsim.systems.t3", "archsim.systems.gemm"]


def register(name: str, resolve: ResolveFn | None = None, keys: KeysFn | None = None,
             schema: type | None = None) -> Callable[[RunFn], RunFn]:
    """Decorator registering a system's run function; `resolve(config) -> config` optionally fills defaults,
    `keys(resolved) -> {key path: value}` optionally adds settable keys the resolved config leaves out,
    `schema` is the system's typed config dataclass (archsim.schema)."""

    def deco(fn: RunFn) -> RunFn:
        _REGISTRY[name] = fn
        for table, hook in ((_RESOLVERS, resolve), (_KEYS, keys), (_SCHEMAS, schema)):
            if hook is not None:
                table[name] = hook
            else:
                table.pop(name, None)
        return fn

    return deco


def _load_providers() -> None:
    import importlib

    for mod in _PROVIDERS:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:  # a provider not built yet must not break the others
            if exc.name != mod:
                raise


def names() -> list[str]:
    _load_providers()
    return sorted(_REGISTRY)


def get(name: str) -> RunFn:
    _load_providers()
    if name not in _REGISTRY:
        raise unknown_name("system", name, _REGISTRY)
    return _REGISTRY[name]


def schema_of(name: str) -> type | None:
    """The typed config dataclass of a system (None for a system registered without one)."""
    get(name)
    return _SCHEMAS.get(name)


def resolve_config(config: dict[str, Any]) -> dict[str, Any]:
    """`config` with its system's defaults filled in (unchanged if the system registered no resolver)."""
    from archsim.errors import ConfigError

    if "system" not in config:
        raise ConfigError("system", f"missing; known systems: {', '.join(names())}")
    name = config["system"]
    get(name)  # unknown system -> UserError with the nearest names
    resolver = _RESOLVERS.get(name)
    return resolver(config) if resolver else config


# ----------------------------------------------------------------------------------------------------------
# Key paths: the one definition of which config keys exist. Sweep axes (archsim.sweep.spec) and the CLI's
# --set / --config (archsim.commands.common) both validate against config_leaves().


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
    hook = _KEYS.get(resolved["system"])
    if hook is not None:
        for key, value in hook(resolved).items():
            leaves.setdefault(key, value)
    return leaves


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
            float(value)
            hint = f" (YAML reads {value} as text: give the mantissa a dot and the exponent a sign, e.g. 1.0e+11)"
        except ValueError:
            pass
    return f"value {value!r} is {got}, but {where} has {want} here ({base_value!r}); expected {want}{hint}"


def value_problem(key: str, value: Any, leaves: dict[str, Any], where: str | None = None) -> str | None:
    """Why `value` cannot be set at `key` (None if it can): the system's schema decides where it describes the
    key (type, allowed values, range), else the type of the current value (type_problem)."""
    system = getattr(leaves, "system", "")
    cls = _SCHEMAS.get(system) if system else None
    spec = None
    if cls is not None:
        from archsim import schema

        spec = schema.lookup(cls, key)
    if spec is not None and schema.section_of(spec.type) is None:
        return spec.problem(value)
    return type_problem(value, leaves.get(key), where=where or (f"the {system} config" if system else "the base config"))


def coerce_value(key: str, value: Any, system: str) -> Any:
    """A command-line value made the schema's type where YAML read it otherwise (archsim.schema.Key.coerce)."""
    cls = _SCHEMAS.get(system)
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
    for key, value, source, line in overrides:
        if key == "system":
            if value != out.get("system"):
                raise ConfigError(key, f"is {out.get('system')!r} here; choose the system with --system "
                                  f"(known: {', '.join(names())})", source=source, line=line)
            continue
        try:
            leaves = config_leaves(out)
        except ConfigError as exc:  # the config so far is invalid (e.g. an earlier override's value)
            raise ConfigError(exc.key_path, exc.problem, source=exc.source or source, line=exc.line) from None
        problem = key_problem(key, leaves, where=f"the keys of system {out['system']}")
        if problem is None:
            value = coerce_value(key, value, out["system"])
            problem = value_problem(key, value, leaves)
        if problem is not None:
            raise ConfigError(key, problem, source=source, line=line)
        set_key(out, key, copy.deepcopy(value))
    resolve_config(copy.deepcopy(out))   # the system's own checks of the values (ranges, combinations)
    return out
