"""Study files: the intent of a cross-design comparison, read and checked before anything runs.

A study file (YAML) names what an architect wants to compare, not any system's keys:

    name: which_pim
    systems: [pimgpt, neupims, duplex, t3]          # PIM designs (archsim/systems/<name>/study.py)
    models: [gpt3-7b, llama3-8b, mixtral-8x7b]
    memory: [hbm2 x 4, hbm3 x 4]                    # generation x stacks per device, or `paper`
    batch: [1, 64]
    input_len: 512                                  # prompt tokens already in the KV cache
    output_len: 128                                 # tokens decoded per request
    tp: [1, 4]                                      # devices a model is sliced over
    options: {neupims: {layers: 2}}                 # per design: what trades accuracy for time (stated)

Every combination is a point; each design maps a point onto its own system's keys (or refuses it with a
one-line reason). Errors name the file, the key and its line (archsim's error convention).
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archsim.config import Doc, load_yaml_text, read_text
from archsim.errors import UserError
from archsim.study.intent import Intent, Memory

KEYS = ("name", "description", "systems", "models", "memory", "batch", "input_len", "output_len", "tp",
        "options", "seed")
GENERATIONS = ("hbm2", "hbm3")
MAX_POINTS = 2000          # a study above this is refused (a typo in a list can multiply it)


@dataclass
class Study:
    name: str
    source: str
    text: str
    data: dict[str, Any]
    intents: list[Intent]
    seed: int = 0


def _list(doc: Doc, key: str, kind: type, minimum: int | None = None) -> list[Any]:
    value = doc.data.get(key)
    items = value if isinstance(value, list) else [value]
    if value is None or not items:
        raise doc.error(key, f"missing: a {kind.__name__} or a non-empty list of them")
    for v in items:
        if isinstance(v, bool) or not isinstance(v, kind) or (minimum is not None and v < minimum):
            bound = f" >= {minimum}" if minimum is not None else ""
            raise doc.error(key, f"must be a {kind.__name__}{bound} or a list of them, got {v!r}")
    if len(set(items)) != len(items):
        raise doc.error(key, f"lists a value twice: {items}")
    return list(items)


def _memory(doc: Doc, text: Any) -> Memory:
    if text == "paper":
        return Memory("paper")
    m = re.fullmatch(r"\s*(\w+)\s*x\s*(\d+)\s*", str(text))
    if not m or m.group(1) not in GENERATIONS or int(m.group(2)) < 1:
        raise doc.error("memory", f"{text!r}: must be `<generation> x <stacks>` with a generation of "
                        f"{', '.join(GENERATIONS)} and stacks >= 1 (e.g. hbm3 x 4), or paper")
    return Memory(m.group(1), int(m.group(2)))


def parse_study(text: str, source: str) -> Study:
    from archsim.study.plan import adapter_names
    from archsim.workload.spec import load_model

    doc = load_yaml_text(text, source)
    unknown = sorted(set(doc.data) - set(KEYS))
    if unknown:
        raise doc.error(unknown[0], f"unknown key; allowed: {', '.join(KEYS)}")
    name = doc.data.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise doc.error("name", f"must be a name of letters, digits, _ . - (it names the results), got {name!r}")
    known = adapter_names()
    systems = _list(doc, "systems", str)
    for s in systems:
        if s not in known:
            raise doc.error("systems", f"{s!r}: no study adapter; designs: {', '.join(known)}")
    models = _list(doc, "models", str)
    for m in models:
        try:
            load_model(m)
        except UserError as exc:
            raise doc.error("models", str(exc)) from None
    memories = [_memory(doc, m) for m in (doc.data.get("memory") if isinstance(doc.data.get("memory"), list)
                                          else [doc.data.get("memory")])]
    batches = _list(doc, "batch", int, 1)
    tps = _list(doc, "tp", int, 1) if "tp" in doc.data else [1]
    in_len = _list(doc, "input_len", int, 0)
    out_len = _list(doc, "output_len", int, 1)
    if len(in_len) != 1 or len(out_len) != 1:
        raise doc.error("input_len", "one input_len and one output_len per study (every point decodes the "
                        "same requests)")
    options = doc.data.get("options") or {}
    if not isinstance(options, dict) or any(k not in systems or not isinstance(v, dict) for k, v in options.items()):
        raise doc.error("options", f"must map designs of `systems` ({', '.join(systems)}) to mappings of options")
    seed = doc.data.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise doc.error("seed", f"must be an integer, got {seed!r}")
    n = len(systems) * len(models) * len(memories) * len(batches) * len(tps)
    if n > MAX_POINTS:
        raise doc.error("systems", f"{n} points (systems x models x memory x batch x tp) is above the limit of "
                        f"{MAX_POINTS}; split the study")
    intents = [Intent(s, m, mem, b, in_len[0], out_len[0], tp, dict(options.get(s, {})))
               for s, m, mem, b, tp in itertools.product(systems, models, memories, batches, tps)]
    return Study(name=name, source=source, text=text, data=doc.data, intents=intents, seed=seed)


def load_study(path: str | Path) -> Study:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: study file not found")
    return parse_study(read_text(path, "study file"), str(path))
