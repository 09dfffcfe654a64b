"""The channel kernel is compiled without numba's negative-index wrap-around (archsim/engine/nowrap.py): the
hook is active, it is scoped to the modules that register, and the kernel never indexes out of bounds (its
tests run under numba's bounds checking, which then rejects a negative index)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pytest

from archsim.engine import nowrap

ROOT = Path(__file__).resolve().parent.parent


def test_channel_kernel_compiles_without_wraparound():
    import archsim.engine.channel  # noqa: F401  (registers itself)

    assert nowrap.active("archsim.engine.channel"), "numba's index hook moved: the kernel would keep the wrap"


def test_only_registered_modules_lose_the_wrap():
    import nowrap_probe  # (tests/ is on sys.path, as for engine_cases)

    @numba.njit(boundscheck=True)
    def get_here(a, i):
        return a[i]

    a = np.arange(5)
    assert get_here(a, -1) == 4                 # this module: numba's wrap, as ever
    assert nowrap_probe.get(a, 3) == 3
    with pytest.raises(IndexError):             # registered module: -1 is out of bounds, not the last element
        nowrap_probe.get(a, -1)


@pytest.mark.slow
def test_kernel_tests_pass_under_bounds_checking(tmp_path):
    """The engine's own tests (every kernel variant, the reference comparisons, streaming, NeuPIMs, NMC) with
    every index bounds-checked, in a fresh numba cache (a checked kernel must not reach the project's cache)."""
    files = ["test_engine_vs_reference.py", "test_engine_demos.py", "test_engine_groups.py",
             "test_dram_property.py", "test_nmc.py", "test_neupims_memory.py", "test_neupims_attention.py",
             "test_pimgpt_reuse.py", "test_dram_controller.py"]
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                          *[str(ROOT / "tests" / f) for f in files]],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
