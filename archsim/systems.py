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
_REGISTRY: dict[str, RunFn] = {}
# Optional per-system hook returning the config with defaults filled in. Sweeps validate swept key paths
# against the *resolved* config, so a key the system defaults is sweepable without repeating it in `base`.
_RESOLVERS: dict[str, ResolveFn] = {}
# Modules that register systems on import (kept lazy so importing archsim stays cheap).
_PROVIDERS = ["archsim.dram.system", "archsim.pim.system"]


def register(name: str, resolve: ResolveFn | None = None) -> Callable[[RunFn], RunFn]:
    """Decorator registering a system's run function; `resolve(config) -> config` optionally fills defaults."""

    def deco(fn: RunFn) -> RunFn:
        _REGISTRY[name] = fn
        if resolve is not None:
            _RESOLVERS[name] = resolve
        else:
            _RESOLVERS.pop(name, None)
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


def resolve_config(config: dict[str, Any]) -> dict[str, Any]:
    """`config` with its system's defaults filled in (unchanged if the system registered no resolver)."""
    from archsim.errors import ConfigError

    if "system" not in config:
        raise ConfigError("system", f"missing; known systems: {', '.join(names())}")
    name = config["system"]
    get(name)  # unknown system -> UserError with the nearest names
    resolver = _RESOLVERS.get(name)
    return resolver(config) if resolver else config
