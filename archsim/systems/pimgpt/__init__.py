"""System `pimgpt`: PIM-GPT decode on GDDR6-AiM channels + the non-linear ASIC (config.py: its config;
system.py: the simulation; compiler.py: weight layout and PIM command streams; emit.py: `archsim compile`;
overlap.py: the overlapped schedule on the event loop; summary.py: what a run prints)."""
from __future__ import annotations

from typing import Any

from archsim import metrics
from archsim.registry import System, register
from archsim.stats_names import from_code
from archsim.systems.pimgpt.config import EXAMPLES, MODEL_FEATURES, PimGptConfig, resolve

SIMULATION = "archsim.systems.pimgpt.system"   # imported when a run starts (help and errors do not load it)


def _summary(result: Any, cfg: dict[str, Any]) -> None:
    from archsim.systems.pimgpt.summary import print_pimgpt

    print_pimgpt(result)


@register
class PimGpt(System):
    """PIM-GPT: decode a model token by token (every layer, the KV cache growing) on GDDR6-AiM PIM channels and
    the non-linear ASIC, against the T4 and Xeon baselines."""

    name = "pimgpt"
    default = True          # `archsim run` with no --system runs it (the quick start)
    config = PimGptConfig
    examples = EXAMPLES
    features = MODEL_FEATURES
    stats = from_code((f"{SIMULATION}:PimGptSimulator.result", "stats"),
                      (f"{SIMULATION}:PimGptSimulator.baselines", "out"), metrics.NAMES)
    flags = (("layout", "--layout", "mapping_overrides.weights.layout", None, ["packed", "row_aligned"],
              "weight layout (key mapping_overrides.weights.layout; default: the policy's)"),
             ("no_baselines", "--no-baselines", "baselines", [], None,
              "skip the T4 / Xeon comparison (key baselines=[])"))
    resolve = staticmethod(resolve)
    summary = staticmethod(_summary)

    @classmethod
    def run(cls, config: dict[str, Any], seed: int = 0) -> Any:
        from archsim.systems.pimgpt.system import run_config

        return run_config(config, seed)
