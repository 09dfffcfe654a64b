"""System `duplex`: xPU + Logic-PIM serving and its baselines (config.py: its config; system.py: the run;
compiler.py: devices, mapping policy and operator costs; serving.py: Duplex's continuous batcher and request
traces)."""
from __future__ import annotations

from typing import Any

from archsim import metrics
from archsim.registry import System, register
from archsim.stats_names import from_code
from archsim.systems.duplex.config import EXAMPLES, MODEL_FEATURES, DuplexConfig, resolve

SIMULATION = "archsim.systems.duplex.system"   # imported when a run starts (help and errors do not load it)


@register
class Duplex(System):
    """Duplex: serving on xPU + Logic-PIM devices (or the baselines GPU, 2xGPU, Bank-PIM, BankGroup-PIM) under
    continuous batching, operators dispatched by Op/B, Logic-PIM's bundle commands on the channel engine."""

    name = "duplex"
    config = DuplexConfig
    examples = EXAMPLES
    features = MODEL_FEATURES
    stats = from_code((f"{SIMULATION}:DuplexRun.run", "stats"), "archsim.systems.duplex.serving:serving_metrics",
                      metrics.NAMES)
    resolve = staticmethod(resolve)

    @classmethod
    def run(cls, config: dict[str, Any], seed: int = 0) -> Any:
        from archsim.systems.duplex.system import run

        return run(config, seed)
