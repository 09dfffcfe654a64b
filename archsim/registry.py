"""Registry of simulatable systems: each is one class (`System`) registered by name with `@register`.

`archsim.api.run(config)` dispatches on config["system"]. Sweeps, reports, `archsim run` and its help only use
this interface, so a system is sweepable and shown as soon as it registers. Each system is a package
`archsim/systems/<name>/` whose `__init__` declares its class(es); the registry finds them by walking the
`archsim.systems` package (no hand list), lazily, so importing archsim stays cheap. A declaration is light: its
config schema, examples and model features, with the simulation imported when `run` is called, so `--help`
and a bad-input error do not load the simulator (numba, pandas). A module outside archsim registers a system
the same way (sweeps import it through their `imports:` list).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from fnmatch import fnmatchcase
from typing import Any, ClassVar

from archsim.errors import unknown_name

# The stats names a system's result may carry: names, or shell-style patterns (`speedup_vs_*`) for families
# whose members depend on the run; a tuple, or a function returning them (called once, when first needed).
StatsNames = Iterable[str] | Callable[[], Iterable[str]]


class System:
    """A simulatable system, declared in one class. Subclass it, set the attributes, define
    `run(cls, config, seed) -> archsim.results.Result` as a classmethod, decorate with `@register`.
    A variant of a system (a baseline that differs in behaviour) is a subclass with its own `name`."""

    name: ClassVar[str]
    # its typed config dataclass (archsim.schema): overrides (--set, --config, CLI flags) and sweep axes are
    # type-checked against it, `run --help` lists it, its settable key paths derive from it (archsim.keypaths)
    config: ClassVar[type | None] = None
    # its stats names (StatsNames): a sweep checks the columns its metrics name against them before the first
    # point runs (undeclared: after its first point); tests/test_stats_names.py checks they cover what it returns
    stats: ClassVar[StatsNames | None] = None
    examples: ClassVar[str | None] = None           # `archsim run --system NAME --help` command lines
    # the model features it simulates (a subset of archsim.summary.FEATURES; None: undeclared)
    features: ClassVar[frozenset[str] | None] = None
    default: ClassVar[bool] = False                 # the system `archsim run` runs when none is named
    # extra CLI flags of `run` for this system, each `--set KEY=VALUE` under a friendlier name:
    # (dest, flag, key path, value to set or None for the flag's value, choices, help)
    flags: ClassVar[tuple[tuple[str, str, str, Any, list[str] | None, str], ...]] = ()
    # what `archsim run` prints after a run, summary(result, config) (None: archsim.summary.print_generic,
    # every stat with its unit and the stage and result tables)
    summary: ClassVar[Callable[[Any, dict[str, Any]], None] | None] = None

    @classmethod
    def resolve(cls, config: dict[str, Any]) -> dict[str, Any]:
        """The config with the system's defaults filled in. Sweeps validate swept key paths against the
        *resolved* config, so a key the system defaults is sweepable without repeating it in `base`."""
        return config

    @classmethod
    def describe(cls) -> str:
        """One paragraph for `run --help`: the first paragraph of the class's docstring."""
        return " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())



_SYSTEMS: dict[str, type[System]] = {}
# The package whose subpackages are the systems (each registers on import).
SYSTEMS_PACKAGE = "archsim.systems"
_loaded = False


def register(cls: type[System]) -> type[System]:
    """Class decorator: register `cls` under `cls.name` (a later registration of the name replaces it)."""
    if not (isinstance(cls, type) and issubclass(cls, System)):
        raise TypeError(f"{cls!r}: a system is a subclass of archsim.registry.System")
    if not isinstance(cls.__dict__.get("name"), str) or not cls.name:
        raise TypeError(f"{cls.__qualname__}: a registered system names itself (class attribute `name`)")
    if not callable(getattr(cls, "run", None)):
        raise TypeError(f"system {cls.name}: no run(config, seed) classmethod")
    _SYSTEMS[cls.name] = cls
    return cls


def unregister(name: str) -> None:
    """Forget a registered system (tests that register a toy system clean up with it)."""
    _SYSTEMS.pop(name, None)


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
    return sorted(_SYSTEMS)


def _load_own_package(name: str) -> None:
    """Import the package named after system `name` (dram-trace: archsim/systems/dram_trace/), if there is
    one: a command that runs one system (`archsim trace`) then does not import every other system's config
    (~0.05 s of CPU)."""
    import importlib
    import importlib.util

    package = name.replace("-", "_")
    if package.isidentifier() and importlib.util.find_spec(f"{SYSTEMS_PACKAGE}.{package}") is not None:
        importlib.import_module(f"{SYSTEMS_PACKAGE}.{package}")


def get(name: str) -> type[System]:
    """The registered class of system `name` (an unknown name is a UserError naming the nearest ones)."""
    if not _loaded:
        _load_own_package(name)
    if name not in _SYSTEMS:
        _load_providers()
    if name not in _SYSTEMS:
        raise unknown_name("system", name, _SYSTEMS)
    return _SYSTEMS[name]


def run(config: dict[str, Any], seed: int = 0) -> Any:
    """Simulate config["system"] (archsim.api.run adds the checks of a user's config)."""
    return get(config["system"]).run(config, seed)


def default_system() -> str:
    """The system `archsim run` runs when none is named (the one registered with `default = True`)."""
    chosen = [n for n in names() if _SYSTEMS[n].__dict__.get("default")]
    if len(chosen) != 1:
        raise RuntimeError(f"exactly one system declares default = True, found {chosen or 'none'}")
    return chosen[0]


def schema_of(name: str) -> type | None:
    """The typed config dataclass of a system (None for a system registered without one)."""
    return get(name).config


def resolve_config(config: dict[str, Any]) -> dict[str, Any]:
    """`config` with its system's defaults filled in."""
    from archsim.errors import ConfigError

    if "system" not in config:
        raise ConfigError("system", f"missing; known systems: {', '.join(names())}")
    return get(config["system"]).resolve(config)     # unknown system -> UserError with the nearest names


def stats_names(system: str) -> tuple[str, ...] | None:
    """The stats names (and name patterns) a run of `system` may return; None if it declares none."""
    declared = get(system).stats
    if declared is None:
        return None
    return tuple(declared() if callable(declared) else declared)   # archsim.stats_names.from_code parses once


def examples(name: str) -> str | None:
    """The `archsim run --system NAME --help` examples the system declares (None: none)."""
    return get(name).examples


def model_features(name: str) -> frozenset[str] | None:
    """The model features the system declares it simulates (None: undeclared)."""
    feats = get(name).features
    return frozenset(feats) if feats is not None else None


def declares(names: Iterable[str], column: str) -> bool:
    """Whether `column` is one of `names` or matches one of its patterns."""
    return any(column == n or fnmatchcase(column, n) for n in names)
