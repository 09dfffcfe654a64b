"""From a study's intents to runs: each design's adapter (`archsim/systems/<name>/study.py`) maps an intent
onto its own system's config, or refuses it with a one-line reason (a feature its design does not hold, a
device count it has no mode for); the checks every design shares (model features, capacity) are here, so no
point ever runs as a silent stand-in.

An adapter module declares:
    DESIGN    the design's name in tables ("PIM-GPT")
    STYLE     its PIM style, one phrase
    RUNS_AS   the registered system it runs as ("pimgpt")
    COMPUTE   the compute beside the memory, one phrase (stated per point)
    MEMORY    {generation: DRAM preset of one stack} (the same stacks every design gets)
    config(intent, model, files) -> dict   the system config (input files it writes go in `files`), or raises
                                           Refusal
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from archsim.study.intent import Intent, Refusal


@dataclass
class Planned:
    intent: Intent
    config: dict[str, Any] | None          # None: refused
    reason: str = ""                       # why refused
    compute: str = ""
    style: str = ""
    design: str = ""


def adapters() -> dict[str, ModuleType]:
    """Every design with a study adapter: archsim/systems/<name>/study.py, keyed by <name>."""
    import archsim.systems as pkg

    out = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.ispkg:
            try:
                out[info.name] = importlib.import_module(f"archsim.systems.{info.name}.study")
            except ModuleNotFoundError as exc:
                if exc.name != f"archsim.systems.{info.name}.study":
                    raise
    return out


def adapter_names() -> list[str]:
    return sorted(adapters())


def stack_bytes(preset: str) -> int:
    """Capacity of one stack: the preset's memory at its own channel count (a shipped preset is one stack)."""
    from archsim.dram.spec import load_spec

    return load_spec(preset).capacity_bytes


def _unmodelled(runs_as: str, model: Any) -> list[str]:
    from archsim import registry
    from archsim.summary import FEATURES

    modelled = registry.model_features(runs_as) or frozenset()
    return [text for key, probe in FEATURES.items() for has, text in [probe(model)] if has and key not in modelled]


def plan(intent: Intent, files: Path) -> Planned:
    """The run of one intent, or its refusal."""
    from archsim import registry
    from archsim.errors import UserError
    from archsim.workload.spec import load_model

    ad = adapters()[intent.system]
    model = load_model(intent.model)
    base = {"compute": ad.COMPUTE, "style": ad.STYLE, "design": ad.DESIGN}
    missing = _unmodelled(ad.RUNS_AS, model)
    if missing:
        return Planned(intent, None, f"{model.name} has {'; '.join(missing)}: not modelled by {ad.DESIGN}",
                       **base)
    if intent.memory.generation != "paper":
        # the same rule for every design: the weights and the batch's KV cache at its longest context
        held = intent.tp * intent.memory.stacks * stack_bytes(ad.MEMORY[intent.memory.generation])
        kv = intent.batch * (intent.input_len + intent.output_len) * model.kv_bytes_per_token
        if model.weight_bytes + kv > held:
            return Planned(intent, None, f"{model.name}'s weights ({model.weight_bytes / 2**30:.1f} GiB) and the "
                           f"batch's KV cache ({kv / 2**30:.1f} GiB) do not fit in {intent.tp} device(s) of "
                           f"{intent.memory.label} ({held / 2**30:.0f} GiB)", **base)
    try:
        cfg = ad.config(intent, model, files)
        registry.resolve_config(dict(cfg))          # the system's own checks of the config, before any run
    except Refusal as exc:
        return Planned(intent, None, str(exc), **base)
    except UserError as exc:
        return Planned(intent, None, f"{ad.DESIGN}: {exc}", **base)
    return Planned(intent, cfg, **base)
