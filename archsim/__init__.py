"""archsim: cycle-accurate, event-driven simulator for PIM and NPU accelerators for transformer inference."""
from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "run_trace", "run", "load_result", "recost"]


def __getattr__(name: str):
    # Lazy so that `import archsim` stays cheap (numba is imported only when a simulation runs).
    if name in ("run_trace", "run"):
        from archsim import api

        return getattr(api, name)
    if name == "load_result":  # archsim.load_result(path): a --json file back into a Result
        from archsim.results import load_result

        return load_result
    if name == "recost":  # archsim.recost(result, preset): energy under another preset's table
        from archsim.energy import recost

        return recost
    raise AttributeError(name)
