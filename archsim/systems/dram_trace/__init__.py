"""System `dram-trace`: trace-driven DRAM runs (config.py: its config; system.py: the simulation, also exposed as
archsim.run_trace(); summary.py: what a run prints)."""
from __future__ import annotations

import json
from typing import Any

from archsim.registry import System, register
from archsim.stats_names import from_code
from archsim.systems.dram_trace.config import EXAMPLES, DramTraceConfig, resolve

SIMULATION = "archsim.systems.dram_trace.system"   # imported when a run starts (help and errors do not load it)


def _summary(result: Any, cfg: dict[str, Any]) -> None:
    from archsim.systems.dram_trace.summary import print_trace_summary

    trace = cfg.get("trace")
    print_trace_summary(result.stats, trace if isinstance(trace, str) else json.dumps(trace))


@register
class DramTrace(System):
    """A memory trace (a file, or a synthetic one) through address mapping and event-driven memory controllers on
    any DRAM standard: cycles, bandwidth, row hits, latency, energy, and optionally every command."""

    name = "dram-trace"
    config = DramTraceConfig
    examples = EXAMPLES
    stats = from_code((f"{SIMULATION}:_result", "stats"))
    resolve = staticmethod(resolve)
    summary = staticmethod(_summary)

    @classmethod
    def run(cls, config: dict[str, Any], seed: int = 0) -> Any:
        from archsim.systems.dram_trace.system import run_config

        return run_config(config, seed)
