"""Array indexing without negative wrap-around, for the modules that ask for it.

numba treats every signed array index as possibly negative and wraps it (`i < 0 -> i + n`): per access a
compare, an add, a select and the dimension's length kept live. The channel kernel makes ~350 array
accesses per pass with indices read from its own state, where LLVM cannot prove them non-negative, and
never indexes from the end; without the wrap its kernel time falls by ~17-20 % (docs/performance.md).
numba has no option for it (its maintainers' answer: index with unsigned integers, which would put a cast
at every one of those accesses), so this module narrows numba's index fix-up: in functions compiled from a
registered module a signed index is used as it is; everywhere else numba behaves as before.

A negative index in a registered module then reads outside its array instead of from the end. The kernel's
tests run it with numba's bounds checking on (`NUMBA_BOUNDSCHECK=1`, which checks after the fix-up, so a
negative index fails there): tests/test_engine_indices.py.
"""
from __future__ import annotations

import numba.np.arrayobj as _arrayobj
from numba.core import types

_TAGS: set[str] = set()          # mangled module prefixes, e.g. "7archsim6engine7channel"
_numba_fix = getattr(_arrayobj, "fix_integer_index", None)    # (None if numba renames it: then no effect)


def mangled_prefix(module: str) -> str:
    """The prefix numba's name mangling gives the functions of `module` (each dotted part length-prefixed)."""
    return "".join(f"{len(part)}{part}" for part in module.split("."))


def _fix_integer_index(context, builder, idxty, idx, size):
    if idxty.signed and _TAGS:
        name = builder.function.name
        if any(tag in name for tag in _TAGS):
            return context.cast(builder, idx, idxty, types.intp)
    return _numba_fix(context, builder, idxty, idx, size)


def register(module: str) -> None:
    """Compile the functions of `module` (its dotted name) without negative-index wrap-around."""
    if _numba_fix is None:
        return
    _TAGS.add(mangled_prefix(module))
    _arrayobj.fix_integer_index = _fix_integer_index


def active(module: str) -> bool:
    """Whether `module`'s functions are compiled without wrap-around (numba still calls the hook)."""
    return mangled_prefix(module) in _TAGS and _arrayobj.fix_integer_index is _fix_integer_index
