"""The standards' extensions (presets/dram/standards/extensions/*.yaml): where they live and the options they
offer. Light to import (no numpy): a system's config schema shows an extension's options in its help."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from archsim.config import load_yaml

EXTENSION_DIR = Path(__file__).resolve().parent.parent / "presets" / "dram" / "standards" / "extensions"


def extension_options(name: str) -> dict[str, dict[str, Any]]:
    """The `options:` of extension NAME: {option: {"default", "help", "values"}} (for config help and docs)."""
    data = load_yaml(EXTENSION_DIR / f"{name}.yaml").data
    return {k: {"default": v.get("default"), "help": v.get("help", ""), "values": list(v.get("values") or {})}
            for k, v in (data.get("options") or {}).items()}
