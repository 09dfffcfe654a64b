"""numba's on-disk cache of a kernel module, keyed on the content of every module the kernel is built from.

numba keys a cached function on the content of its own source file (a sha256 of the file). The channel kernel
also bakes in what it imports: the command effects and controller roles as integer constants, the state's field
layout, and the code generation that `nowrap` and `field_access` patch in. An edit of one of those modules alone
(a `git pull`, a local change) left numba's key unchanged, so an old kernel ran with new tables. A module that
calls `register(__name__, __file__)` before its first `@njit(cache=True)` gets a cache whose stamp is the content
of the module *and* of every archsim module it imports at its top level (read from its import statements, so a
new import is covered without a list to keep): any change there is a cold cache, i.e. a recompile.

Everything else of numba's cache is unchanged: where it lives (`NUMBA_CACHE_DIR` or `__pycache__` beside the
source), the index key (signature, CPU, numba version, bytecode) and the file names.
"""
from __future__ import annotations

import ast
import hashlib
from pathlib import Path

from numba.core import caching

_STAMPED: dict[str, tuple[Path, ...]] = {}      # resolved kernel file -> the files its stamp covers


def sources(module: str, module_file: str | Path) -> tuple[Path, ...]:
    """`module_file` (module `module`) and the files of the modules of its own package (archsim) it imports at
    its top level (function-level imports run at call time, not at compile time, and are left out)."""
    path = Path(module_file).resolve()
    package = module.split(".")[0]
    root = path.parents[module.count(".") + (path.name == "__init__.py")]   # the directory holding `package/`
    found = [path]
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] != package:
                continue
            base = root.joinpath(*name.split("."))
            for cand in (base.with_suffix(".py"), base / "__init__.py"):
                if cand.is_file() and cand not in found:
                    found.append(cand)
    return tuple(found)


def content_stamp(files: tuple[Path, ...]) -> bytes:
    """sha256 over each file's name and content, in order."""
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.digest()


class _ContentKeyed:
    """A locator mixin: the source stamp covers the kernel module's imports too; only for registered files."""

    _py_file: str

    def get_source_stamp(self) -> bytes:
        return content_stamp(_STAMPED[str(Path(self._py_file).resolve())])

    @classmethod
    def from_function(cls, py_func, py_file):
        if str(Path(py_file).resolve()) not in _STAMPED:
            return None
        return super().from_function(py_func, py_file)


class _UserDirLocator(_ContentKeyed, caching.UserProvidedCacheLocator):
    """NUMBA_CACHE_DIR, content-keyed."""


class _InTreeLocator(_ContentKeyed, caching.InTreeCacheLocator):
    """__pycache__ beside the source, content-keyed."""


def register(module: str, module_file: str) -> None:
    """Key numba's cache of every `cache=True` function of `module` (file `module_file`) on the content of the
    module and of its top-level archsim imports. Call it before the module's first decorator runs."""
    _STAMPED[str(Path(module_file).resolve())] = sources(module, module_file)
    classes = caching.CacheImpl._locator_classes
    for loc in (_InTreeLocator, _UserDirLocator):       # numba takes the first that answers: user dir first
        if loc not in classes:
            classes.insert(0, loc)


def stamped_files(module_file: str) -> tuple[Path, ...]:
    """The files whose content keys `module_file`'s cache (empty if it is not registered)."""
    return _STAMPED.get(str(Path(module_file).resolve()), ())
