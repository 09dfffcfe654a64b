"""Registry of simulatable systems: name -> function(config: dict, seed: int) -> archsim.results.Result.

`archsim.api.run(config)` dispatches on config["system"]. Sweeps and reports only use this interface, so
every system (DRAM trace runs, PIM-GPT, ...) is sweepable as soon as it registers here. Each system is a
package `archsim/systems/<name>/` whose `__init__` imports the module that calls `register(...)`; the registry
finds them by walking the `archsim.systems` package (no hand list), lazily so that importing archsim stays cheap.
A module outside archsim registers a system the same way (sweeps import it through their `imports:` list).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from fnmatch import fnmatchcase
from typing import Any

from archsim.errors import unknown_name

RunFn = Callable[[dict[str, Any], int], Any]
ResolveFn = Callable[[dict[str, Any]], dict[str, Any]]
# The stats names a system's result may carry: names, or shell-style patterns (`speedup_vs_*`) for families
# whose members depend on the run; a tuple, or a function returning them (called once, when first needed).
StatsNames = Iterable[str] | Callable[[], Iterable[str]]
_REGISTRY: dict[str, RunFn] = {}
# Optional per-system hook returning the config with defaults filled in. Sweeps validate swept key paths
# against the *resolved* config, so a key the system defaults is sweepable without repeating it in `base`.
_RESOLVERS: dict[str, ResolveFn] = {}
# Per-system typed schema (archsim.schema): a dataclass whose fields carry type, default, help and allowed values.
# Overrides (--set, --config, CLI flags) and sweep axes are type-checked against it; `run --help` lists it; its
# settable key paths derive from it (archsim.keypaths.config_leaves: a preset's values through `overrides_of`).
_SCHEMAS: dict[str, type] = {}
# Per-system declaration of its stats names (see StatsNames): a sweep checks the columns its metrics name
# against it before the first point runs (a system without one: after its first point). archsim.stats_names
# reads a declaration from the code that builds the stats; tests/test_stats_names.py runs every system small
# and checks that its declaration covers what it returns.
_STATS: dict[str, StatsNames] = {}
# Per-system `archsim run --system X --help` examples (command lines, one per line) and the model features it
# simulates (a subset of archsim.summary.FEATURES; None: undeclared), both declared where the system registers.
_EXAMPLES: dict[str, str] = {}
_FEATURES: dict[str, frozenset[str]] = {}
# The package whose subpackages are the systems (each registers on import).
SYSTEMS_PACKAGE = "archsim.systems"
_loaded = False


def register(name: str, resolve: ResolveFn | None = None, schema: type | None = None,
             stats: StatsNames | None = None, examples: str | None = None,
             features: Iterable[str] | None = None) -> Callable[[RunFn], RunFn]:
    """Decorator registering a system's run function; `resolve(config) -> config` optionally fills defaults,
    `schema` is the system's typed config dataclass (archsim.schema), `stats` declares its stats names,
    `examples` its `run --help` command lines, `features` the model features it simulates."""

    def deco(fn: RunFn) -> RunFn:
        _REGISTRY[name] = fn
        feats = frozenset(features) if features is not None else None
        for table, hook in ((_RESOLVERS, resolve), (_SCHEMAS, schema), (_STATS, stats), (_EXAMPLES, examples),
                            (_FEATURES, feats)):
            if hook is not None:
                table[name] = hook
            else:
                table.pop(name, None)
        return fn

    return deco


def _load_providers() -> None:
    """Import every package under archsim/systems/ once; each registers its system(s) on import."""
    global _loaded
    if _loaded:
        return
    import importlib
    import pkgutil

    package = importlib.import_module(SYSTEMS_PACKAGE)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.ispkg:
            importlib.import_module(f"{SYSTEMS_PACKAGE}.{info.name}")
    _loaded = True


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


def stats_names(system: str) -> tuple[str, ...] | None:
    """The stats names (and name patterns) a run of `system` may return; None if it declares none."""
    get(system)
    declared = _STATS.get(system)
    if declared is None:
        return None
    if callable(declared):
        declared = _STATS[system] = tuple(declared())
    return tuple(declared)


def examples(name: str) -> str | None:
    """The `archsim run --system NAME --help` examples the system declares (None: none)."""
    get(name)
    return _EXAMPLES.get(name)


def model_features(name: str) -> frozenset[str] | None:
    """The model features the system declares it simulates (None: undeclared)."""
    get(name)
    return _FEATURES.get(name)


def declares(names: Iterable[str], column: str) -> bool:
    """Whether `column` is one of `names` or matches one of its patterns."""
    return any(column == n or fnmatchcase(column, n) for n in names)
