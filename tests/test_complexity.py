"""No function in archsim/ exceeds cyclomatic complexity 25 (issue 36, item 5; 40 since issue 25), but the
channel kernel's numba functions, each named with the count it may not exceed (splitting them costs speed
where numba does not inline a call: benchmarks/before_after.py measures each split).

The count is radon's (`radon cc`), recomputed here with the stdlib `ast` so that the default suite needs no
new dependency: 1 per function, +1 per if / conditional expression / for / while (+1 more for a loop's
`else`) / assert / comprehension (+1 per `if` in it), +1 per except handler and a try's `else`, +n-1 per
boolean operator of n operands, +1 per match case (the wildcard `_` excepted). Nested functions and classes
are counted on their own, not in the enclosing function. When radon is installed, a second test checks
that the two counts agree on every function of archsim/.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "archsim"
LIMIT = 25
# The channel kernel (numba): its step functions, by name, at most their count today; nothing else may exceed
# LIMIT, and an allowance a function no longer needs must go (test_no_function_above_the_limit).
KERNEL_ALLOWANCES: dict[str, int] = {
    "archsim/engine/channel.py::_issue_bank_state": 39,
    "archsim/engine/channel.py::_stream_cand": 35,
    "archsim/engine/channel.py::_offer": 30,
    "archsim/engine/channel.py::advance": 29,
    "archsim/engine/channel.py::_step_decide": 27,
    "archsim/engine/channel.py::_step": 27,
    "archsim/engine/channel.py::_arbitrate": 27,
}
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _own_nodes(fn: ast.AST):
    """The nodes of a function's body, not descending into nested functions or classes."""
    stack = [n for n in fn.body if not isinstance(n, _FUNCS + (ast.ClassDef,))]
    while stack:
        n = stack.pop()
        yield n
        for child in ast.iter_child_nodes(n):
            if not isinstance(child, _FUNCS + (ast.ClassDef,)):
                stack.append(child)


def complexity(fn: ast.AST) -> int:
    cc = 1
    for n in _own_nodes(fn):
        if isinstance(n, (ast.If, ast.IfExp, ast.Assert)):
            cc += 1
        elif isinstance(n, (ast.For, ast.AsyncFor, ast.While)):
            cc += 1 + bool(n.orelse)
        elif isinstance(n, ast.Try | getattr(ast, "TryStar", ast.Try)):
            cc += len(n.handlers) + bool(n.orelse)
        elif isinstance(n, ast.BoolOp):
            cc += len(n.values) - 1
        elif isinstance(n, ast.comprehension):
            cc += 1 + len(n.ifs)
        elif isinstance(n, ast.Match):
            wildcard = any(isinstance(c.pattern, ast.MatchAs) and c.pattern.pattern is None for c in n.cases)
            cc += max(0, len(n.cases) - wildcard)
    return cc


def function_complexities(source: str, rel: str) -> dict[str, tuple[int, int]]:
    """'path::Class.func' -> (complexity, line) for every function and method of one module."""
    out: dict[str, tuple[int, int]] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, _FUNCS):
                key = f"{rel}::{prefix}{child.name}"
                if key in out:      # a property's getter and setter share a name
                    key = f"{key}@{child.lineno}"
                out[key] = (complexity(child), child.lineno)
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(ast.parse(source), "")
    return out


def all_complexities() -> dict[str, tuple[int, int]]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).as_posix()
        out.update(function_complexities(path.read_text(encoding="utf-8"), rel))
    return out


def test_no_function_above_the_limit() -> None:
    cc = all_complexities()
    over = {k: v for k, v in cc.items() if v[0] > KERNEL_ALLOWANCES.get(k, LIMIT)}
    assert not over, (f"functions above cyclomatic complexity {LIMIT} (split them into named steps) or above "
                      "their kernel allowance: "
                      + ", ".join(f"{k} (line {line}): {c}" for k, (c, line) in sorted(over.items())))
    stale = [k for k in KERNEL_ALLOWANCES if k not in cc or cc[k][0] <= LIMIT]
    assert not stale, f"kernel allowances for functions that no longer need them (remove them): {stale}"


def test_the_count_sees_branches() -> None:
    src = '''
def f(x, ys):
    if x and ys or not x:          # if +1, two boolean operators +2
        return [y for y in ys if y]  # comprehension +1, its if +1
    for y in ys:                   # +1, else +1
        pass
    else:
        pass
    try:
        x = 1 / x
    except ZeroDivisionError:      # +1
        pass
    def inner(z):                  # counted on its own
        return z if z else 0
    return x
'''
    got = function_complexities(src, "m.py")
    assert got["m.py::f"][0] == 9, got
    assert got["m.py::f.inner"][0] == 2, got


def test_the_count_equals_radons() -> None:
    from radon.complexity import cc_visit  # a test dependency (pyproject [test]): this check always runs
    ours = {(k.partition("@")[0], line): c for k, (c, line) in all_complexities().items()}
    diff = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).as_posix()
        for block in cc_visit(path.read_text(encoding="utf-8")):
            if not hasattr(block, "closures"):      # classes: their methods are listed on their own
                continue
            key = f"{rel}::{block.classname + '.' if block.classname else ''}{block.name}"
            got = ours.get((key, block.lineno))
            if got is None:
                diff.append(f"{key} (line {block.lineno}): radon only")
            elif got != block.complexity:
                diff.append(f"{key} (line {block.lineno}): ours {got}, radon {block.complexity}")
    assert not diff, "counts differ from radon: " + "; ".join(diff[:20])
