"""System `gemm`: one GEMM on one systolic array (system.py: its config and run)."""
from __future__ import annotations

from typing import Any

from archsim.registry import System, register
from archsim.results import Result
from archsim.stats_names import from_code
from archsim.systems.gemm import system


@register
class Gemm(System):
    """One GEMM on one systolic array: the array alone (memory ideal) or every load and store through the channel
    engine (memory dram); SCALE-Sim 3.0's compute cycles beside it."""

    name = "gemm"
    config = system.GemmConfig
    stats = from_code((system.run_gemm, "stats"))
    examples = "  archsim run --system gemm --set m=64 --set k=300 --set n=256 --set memory=dram"
    resolve = staticmethod(system.resolve)

    @classmethod
    def run(cls, config: dict[str, Any], seed: int = 0) -> Result:
        return system.run_config(config, seed)
