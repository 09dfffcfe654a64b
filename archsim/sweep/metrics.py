"""Derived metrics across sweep points: arithmetic expressions over stats columns, evaluated safely.

An expression is parsed with `ast` and only numbers, + - * / **, unary minus/plus, parentheses and names
are allowed; there is no `eval`. A name is a column of the sweep's stats table (dotted paths such as
`hw.channels` work); `baseline.<name>` is that column in the baseline point, which is the point with the
metric's `baseline:` key values and the same values of every other axis.
"""
from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from archsim.errors import UserError, nearest

BASELINE = "baseline"
MAX_EXPR_CHARS = 1000
_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}

ErrorFn = Callable[[tuple[Any, ...], str | None, str], Exception]


@dataclass(frozen=True)
class Metric:
    name: str
    expr: str
    baseline: dict[str, Any] | None
    tree: ast.Expression
    names: tuple[str, ...]  # columns of the point itself
    baseline_names: tuple[str, ...]  # columns of the baseline point

    def to_dict(self) -> dict[str, Any]:
        return {"expr": self.expr, "baseline": self.baseline}


def encode_cell(value: Any) -> Any:
    """How an axis value is stored in a results column: scalars as they are, lists/mappings as JSON text."""
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    return value


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def parse_expression(expr: str) -> tuple[ast.Expression, tuple[str, ...], tuple[str, ...]]:
    """Parse and vet `expr`. Returns (tree, own column names, baseline column names); raises ValueError."""
    if not isinstance(expr, str) or not expr.strip():
        raise ValueError("expression must be a non-empty string")
    if len(expr) > MAX_EXPR_CHARS:
        raise ValueError(f"expression longer than {MAX_EXPR_CHARS} characters")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not a valid expression: {exc.msg}") from None
    own: list[str] = []
    base: list[str] = []

    def check(node: ast.AST) -> None:
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            check(node.left)
            check(node.right)
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            check(node.operand)
        elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
            pass
        elif isinstance(node, (ast.Name, ast.Attribute)) and _dotted(node) is not None:
            name = _dotted(node)
            assert name is not None
            if any(part.startswith("__") for part in name.split(".")):
                raise ValueError(f"{name!r}: names with double underscores are not allowed")
            if name == BASELINE:
                raise ValueError("`baseline` alone is not a value; write baseline.<stats column>")
            if name.startswith(BASELINE + "."):
                base.append(name[len(BASELINE) + 1:])
            else:
                own.append(name)
        else:
            what = type(node.op).__name__ if isinstance(node, (ast.BinOp, ast.UnaryOp)) else type(node).__name__
            raise ValueError(f"{what} is not allowed; only numbers, stats column names, + - * / ** and "
                             "parentheses")

    check(tree.body)
    return tree, tuple(dict.fromkeys(own)), tuple(dict.fromkeys(base))


def parse_metrics(raw: Any, axis_values: Mapping[str, list[Any]], error: ErrorFn) -> dict[str, Metric]:
    """Validate the sweep file's `metrics:` section. `error(where, key, problem)` builds the exception."""
    if not isinstance(raw, dict):
        raise error(("metrics",), None, "must be a mapping of name -> expression or {expr, baseline}")
    out: dict[str, Metric] = {}
    for name, spec in raw.items():
        where: tuple[Any, ...] = ("metrics", name)
        if not isinstance(name, str) or not name.isidentifier():
            raise error(where, None, f"metric names must be identifiers (letters, digits, _), got {name!r}")
        if isinstance(spec, str):
            spec = {"expr": spec}
        if not isinstance(spec, dict) or "expr" not in spec:
            raise error(where, None, "must be an expression string or a mapping with `expr` (and optionally `baseline`)")
        unknown = sorted(set(spec) - {"expr", "baseline"})
        if unknown:
            raise error(where + (unknown[0],), None, "unknown metric key; allowed: expr, baseline")
        try:
            tree, names, base_names = parse_expression(spec["expr"])
        except ValueError as exc:
            raise error(where + ("expr",), None, f"{exc}: {spec['expr']!r}") from None
        baseline = spec.get("baseline")
        if baseline is not None:
            if not isinstance(baseline, dict) or not baseline:
                raise error(where + ("baseline",), None, "must be a mapping {axis key path: value} selecting the baseline")
            for key, value in baseline.items():
                if key not in axis_values:
                    hint = nearest(str(key), axis_values)
                    allowed = ", ".join(axis_values) or "(the sweep has no axes)"
                    raise error(where + ("baseline", key), str(key),
                                f"baseline keys must be swept axis keys; axis keys: {allowed}"
                                + (f" (did you mean {', '.join(hint)}?)" if hint else ""))
                present = [encode_cell(v) for v in axis_values[key]]
                if encode_cell(value) not in present:
                    choices = ", ".join(repr(v) for v in dict.fromkeys(present))
                    raise error(where + ("baseline", key), str(key),
                                f"baseline value {value!r} is not one of the swept values: {choices}")
        elif base_names:
            raise error(where + ("expr",), None, "uses baseline.<column> but the metric has no `baseline:` mapping")
        out[name] = Metric(name, spec["expr"], baseline, tree, names, base_names)
    return out


def metric_from_dict(name: str, spec: dict[str, Any]) -> Metric:
    """Rebuild a Metric from a results manifest (raises UserError if the stored expression is not allowed)."""
    try:
        tree, names, base_names = parse_expression(spec["expr"])
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"metric {name}: {exc}") from None
    return Metric(name, spec["expr"], spec.get("baseline"), tree, names, base_names)


def evaluate(tree: ast.Expression, lookup: Callable[[str, bool], Any]) -> Any:
    """Evaluate a vetted tree; `lookup(name, from_baseline)` returns a Series or number for a column."""

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.BinOp):
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp):
            return _UNARY[type(node.op)](ev(node.operand))
        if isinstance(node, ast.Constant):
            # numpy floats: x/0 -> inf and huge powers -> inf instead of exceptions or huge Python ints
            return np.float64(node.value)
        name = _dotted(node)
        assert name is not None
        if name.startswith(BASELINE + "."):
            return lookup(name[len(BASELINE) + 1:], True)
        return lookup(name, False)

    with np.errstate(all="ignore"):
        return ev(tree.body)


def _numeric(frame: pd.DataFrame, name: str, metric: Metric) -> pd.Series:
    if name not in frame.columns:
        hint = nearest(name, [str(c) for c in frame.columns])
        raise UserError(f"metric {metric.name}: {name!r} is not a stats column"
                        + (f"; did you mean {', '.join(hint)}?" if hint else
                           f"; columns: {', '.join(map(str, frame.columns))}"))
    col = pd.to_numeric(frame[name], errors="coerce").astype("float64")
    if col.isna().all() and frame[name].notna().any():
        raise UserError(f"metric {metric.name}: column {name!r} is not numeric")
    return col


def compute_metrics(stats: pd.DataFrame, metrics: Mapping[str, Metric], axis_keys: list[str]) -> pd.DataFrame:
    """Return `stats` with one added column per metric (NaN where the baseline point is missing)."""
    out = stats.copy()
    for name, metric in metrics.items():
        if name in stats.columns:
            raise UserError(f"metric {name}: a stats column of that name already exists; rename the metric")
        own = {n: _numeric(stats, n, metric) for n in metric.names}
        base = _baseline_columns(stats, metric, axis_keys) if metric.baseline else {}
        value = evaluate(metric.tree, lambda n, from_base, b=base, o=own: b[n] if from_base else o[n])
        if np.isscalar(value):
            value = pd.Series(float(value), index=stats.index)
        out[name] = pd.Series(value, index=stats.index).astype("float64")
    return out


def _baseline_columns(stats: pd.DataFrame, metric: Metric, axis_keys: list[str]) -> dict[str, pd.Series]:
    assert metric.baseline is not None
    needed = {n: _numeric(stats, n, metric) for n in metric.baseline_names}
    mask = pd.Series(True, index=stats.index)
    for key, value in metric.baseline.items():
        if key not in stats.columns:
            return {n: pd.Series(np.nan, index=stats.index) for n in needed}
        mask &= stats[key] == encode_cell(value)
    group = [k for k in axis_keys if k not in metric.baseline and k in stats.columns]
    chosen = stats.loc[mask, group].copy()
    for n, col in needed.items():
        chosen[f"__baseline__{n}"] = col[mask]
    if group:
        chosen = chosen.drop_duplicates(subset=group, keep="first")
        merged = stats[group].merge(chosen, on=group, how="left")  # a left merge keeps the left row order
        merged.index = stats.index
    else:  # no other axes: one baseline point for everyone
        merged = pd.DataFrame(index=stats.index)
        for n in needed:
            merged[f"__baseline__{n}"] = chosen[f"__baseline__{n}"].iloc[0] if len(chosen) else np.nan
    return {n: merged[f"__baseline__{n}"].astype("float64") for n in needed}
