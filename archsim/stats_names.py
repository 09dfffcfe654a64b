"""A system's stats names, read from the code that builds its stats (so the declaration cannot drift from it).

A system declares `stats = from_code((fn, "stats"), ...)` (archsim.registry.System): the names are the string keys
that `fn` puts into its variable `stats`: keys of a dict literal assigned to it, `stats["name"] = ...`,
`stats.update(name=...)` and `stats.update({...})`. An f-string key (`f"speedup_{c}"`) becomes a pattern
(`speedup_*`). A bare function (no variable name) contributes the keys of the dict literal it returns. The
source is parsed once, on first use (a sweep's metric check), not when the system is imported; `fn` may be
named as "module:qualified.name", so a light declaration need not import the simulator.
tests/test_stats_names.py runs every system small and checks that the names cover what it returns.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

Fn = Callable[..., Any] | str          # a function, or its "module:qualified.name"
Source = Fn | tuple[Fn, str] | tuple[str, ...]


def _key(node: ast.AST | None) -> str | None:
    """A dict key or subscript as a name (a constant string) or a pattern (an f-string, `*` per field)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "*" for v in node.values)
    return None


def _is(node: ast.AST, var: str) -> bool:
    return isinstance(node, ast.Name) and node.id == var


def _dict_keys(node: ast.AST | None) -> list[str]:
    if not isinstance(node, ast.Dict):
        return []
    return [k for k in map(_key, node.keys) if k is not None]


def _assigned(node: ast.AST, var: str) -> list[str]:
    """Names that one statement or call puts into `var`."""
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        out = []
        for t in targets:
            if _is(t, var):
                out += _dict_keys(node.value)
            elif isinstance(t, ast.Subscript) and _is(t.value, var) and _key(t.slice) is not None:
                out.append(_key(t.slice))
        return out
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update"
            and _is(node.func.value, var)):
        return [kw.arg for kw in node.keywords if kw.arg] + [k for a in node.args for k in _dict_keys(a)]
    return []


def _function(fn: Fn) -> Callable[..., Any]:
    """`fn`, or the function "module:qualified.name" names."""
    if not isinstance(fn, str):
        return fn
    import importlib

    module, _, qualname = fn.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def names_in(fn: Callable[..., Any], var: str | None) -> list[str]:
    """The stats names `fn` writes into its variable `var` (or, var None, the keys of the dicts it returns)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    out: list[str] = []
    for node in ast.walk(tree):
        if var is None:
            if isinstance(node, ast.Return):
                out += _dict_keys(node.value)
        else:
            out += _assigned(node, var)
    return out


class from_code:     # noqa: N801 (used like a function: stats = from_code(...))
    """The stats names of a system as the union over its stats-building functions (parsed once, lazily)."""

    def __init__(self, *sources: Source):
        self.sources = sources
        self._names: tuple[str, ...] | None = None

    def __call__(self) -> tuple[str, ...]:
        if self._names is None:
            found: list[str] = []
            for src in self.sources:
                if isinstance(src, tuple) and all(isinstance(s, str) and ":" not in s for s in src):
                    found += src       # names declared as data (e.g. archsim.metrics.NAMES, the common schema)
                    continue
                ref, var = src if isinstance(src, tuple) else (src, None)
                fn = _function(ref)
                names = names_in(fn, var)
                if not names:
                    raise RuntimeError(f"{fn.__qualname__}: no stats names found for {var!r} (archsim.stats_names)")
                found += names
            self._names = tuple(dict.fromkeys(found))
        return self._names
