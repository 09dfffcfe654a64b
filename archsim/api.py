"""Python API that mirrors the CLI, for notebooks and scripts."""
from __future__ import annotations

from typing import Any

from archsim.results import Result


def run(config: dict[str, Any], seed: int = 0) -> Result:
    """Run any registered system; config["system"] names it (see archsim.systems)."""
    from archsim import registry
    from archsim.errors import ConfigError

    if "system" not in config:
        raise ConfigError("system", f"missing; known systems: {', '.join(registry.names())}")
    return registry.run(config, seed)


def run_trace(trace: Any, preset: str = "DDR4_3200AA_x8_8Gb", **kwargs: Any) -> Result:
    """Simulate a memory trace (path, or arrays) on a DRAM preset. See archsim.systems.dram_trace.system.run_trace."""
    from archsim.systems.dram_trace.system import run_trace as _run_trace

    return _run_trace(trace, preset=preset, **kwargs)
