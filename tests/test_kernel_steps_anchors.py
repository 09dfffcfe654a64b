"""benchmarks/kernel_steps.py counts the kernel's steps by editing a copy of it at named places: each place must
still be in the kernel's source exactly once (else the benchmark stops, and its figures in docs/performance.md can
no longer be re-run). Checked here without compiling anything."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_place_kernel_steps_edits_is_in_the_kernel_once():
    spec = importlib.util.spec_from_file_location("kernel_steps", ROOT / "benchmarks" / "kernel_steps.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert {name for name, *_ in mod.EDITS} == {"channel.py", "state.py"}
    for name, place, old, new in mod.EDITS:
        src = (ROOT / "archsim" / "engine" / name).read_text()
        assert src.count(old) == 1, f"{place} ({name})"
        assert old != new, place
