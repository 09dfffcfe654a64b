"""The channel kernel's numba cache is keyed on the content of every module it is built from
(archsim/engine/kernel_cache.py): an edit of an imported constant alone recompiles instead of running a stale
kernel. Shown on a probe package with the same layout (a kernel module importing a constant from a sibling
module), in fresh processes, as a `git pull` would leave it."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from archsim.engine import channel, kernel_cache

ROOT = Path(__file__).resolve().parent.parent



def _probe(tmp: Path, keyed: bool) -> Path:
    """A package whose kernel module bakes in a constant of a sibling module, as the channel kernel does."""
    pkg = tmp / "probe"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "consts.py").write_text("SCALE = 3\n")
    register = "from archsim.engine import kernel_cache\nkernel_cache.register(__name__, __file__)\n"
    (pkg / "kern.py").write_text("import numba\nfrom probe.consts import SCALE\n" + (register if keyed else "")
                                 + "\n\n@numba.njit(cache=True)\ndef scaled(x):\n    return x * SCALE\n")
    return pkg


def _run(tmp: Path) -> tuple[int, int]:
    """scaled(2) in a new process, and how many times numba loaded it from its cache there."""
    code = "from probe.kern import scaled; r = scaled(2); print(r, sum(scaled.stats.cache_hits.values()))"
    # No .pyc of the probe: Python checks one by mtime (whole seconds) and size, and "SCALE = 3" edited to
    # "SCALE = 4" within the same second keeps both, so Python itself would import the old constant.
    env = {"PYTHONPATH": f"{tmp}:{ROOT}", "PATH": "/usr/bin:/bin", "NUMBA_CACHE_DIR": str(tmp / "cache"),
           "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    value, hits = out.stdout.split()
    return int(value), int(hits)


def test_an_edited_import_recompiles_the_kernel(tmp_path):
    pkg = _probe(tmp_path, keyed=True)
    assert _run(tmp_path) == (6, 0)                    # compiled and saved
    assert _run(tmp_path) == (6, 1)                    # loaded from the cache
    (pkg / "consts.py").write_text("SCALE = 4\n")      # the constant the kernel bakes in, edited alone
    assert _run(tmp_path) == (8, 0)                    # recompiled: the new constant


def test_numba_alone_would_run_the_stale_kernel(tmp_path):
    """Why the module exists: numba's own key is the kernel file's content, so the edit goes unseen."""
    pkg = _probe(tmp_path, keyed=False)
    assert _run(tmp_path) == (6, 0)
    (pkg / "consts.py").write_text("SCALE = 4\n")
    assert _run(tmp_path) == (6, 1)                    # stale: the old constant, from the cache


def test_the_channel_kernel_is_keyed_on_its_imports():
    names = {p.relative_to(ROOT).as_posix() for p in kernel_cache.stamped_files(channel.__file__)}
    # the constants the kernel bakes in (effects, controller roles), its state layout and code-generation patches
    assert {"archsim/engine/channel.py", "archsim/dram/effects.py", "archsim/dram/roles.py",
            "archsim/engine/state.py", "archsim/engine/nowrap.py", "archsim/engine/field_access.py",
            "archsim/engine/kernel_cache.py"} <= names, names
    stamp = kernel_cache.content_stamp(kernel_cache.stamped_files(channel.__file__))
    assert channel.advance._cache._cache_file._source_stamp == stamp
