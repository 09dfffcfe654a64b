"""Safe arithmetic expressions over named values (timing latencies, derived metrics).

Only numbers, names, + - * / // %, unary minus, parentheses and the functions max/min/ceil/floor are
allowed: expressions come from data files and users, so nothing is ever passed to eval().
"""
from __future__ import annotations

import ast
import math
from collections.abc import Mapping

_FUNCS = {"max": max, "min": min, "ceil": math.ceil, "floor": math.floor}
_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}


class ExprError(ValueError):
    pass


def parse(text: str) -> ast.Expression:
    try:
        tree = ast.parse(str(text), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"not an arithmetic expression: {text!r} ({exc.msg})") from None
    for node in ast.walk(tree):
        ok = isinstance(node, ast.Expression | ast.BinOp | ast.UnaryOp | ast.Constant | ast.Name | ast.Call
                        | ast.Load | ast.USub | ast.UAdd) or type(node) in _BINOPS
        if not ok:
            raise ExprError(f"{text!r}: {type(node).__name__} is not allowed (only arithmetic, names, max/min/ceil/floor)")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in _FUNCS):
            raise ExprError(f"{text!r}: only the functions {', '.join(_FUNCS)} are allowed")
        if isinstance(node, ast.Constant) and not isinstance(node.value, int | float):
            raise ExprError(f"{text!r}: only numeric constants are allowed")
    return tree


def names(text: str) -> set[str]:
    """Names an expression refers to (function names excluded)."""
    tree = parse(text)
    funcs = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - funcs


def evaluate(text: str | int | float, env: Mapping[str, float]) -> float:
    if isinstance(text, int | float):
        return text
    return _eval(parse(text).body, env, str(text))


def _eval(node: ast.AST, env: Mapping[str, float], text: str):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise ExprError(f"{text!r}: unknown name {node.id!r}")
        return env[node.id]
    if isinstance(node, ast.UnaryOp):
        val = _eval(node.operand, env, text)
        return -val if isinstance(node.op, ast.USub) else val
    if isinstance(node, ast.BinOp):
        return _BINOPS[type(node.op)](_eval(node.left, env, text), _eval(node.right, env, text))
    if isinstance(node, ast.Call):
        return _FUNCS[node.func.id](*[_eval(a, env, text) for a in node.args])
    raise ExprError(f"{text!r}: unsupported element {type(node).__name__}")  # pragma: no cover
