"""Claims: the report prose's numbers and directions, each tied to the table (a CSV the report writes) it comes from.

A report generator writes its prose through a `Claims` collector: every number is a `Fact` (a CSV, the rows it
selects, a column and how they combine) formatted by the collector, every direction (higher, lower, toward,
rises, falls ...) a comparison of two facts or a trend over rows that the collector evaluates and words. Each
sentence that uses them is recorded with its facts in `claims.json` beside README.md. `verify(folder)` then
re-reads the CSVs and recomputes every fact and direction, checks every recorded sentence appears in README.md,
and checks that no other line of README.md's prose states a number or a direction word (tables, headings,
figures and the quoted paper values are exempt by construction: they are not prose lines, or they are facts
too). tests/test_report_claims.py runs it on every report that writes claims.json.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

AGGS = ("value", "min", "max", "mean", "geomean", "sum", "count")
RELATIONS = {"<": np.less, ">": np.greater, "<=": np.less_equal, ">=": np.greater_equal}
# words that state a direction or an ordering; a prose line with one must be a recorded claim
DIRECTION_WORDS = ("higher", "lower", "faster", "slower", "larger", "smaller", "rises", "falls", "grows",
                   "shrinks", "toward", "towards", "away from", "more than", "less than", "above", "below",
                   "increases", "decreases", "moves")


@dataclass(frozen=True)
class Fact:
    """A number read from a report table: rows of `csv` where every `where` column equals its value (a list: is
    one of), `column` combined by `agg`; `over` divides it by another fact (a ratio); `scale` multiplies (100 for
    a percentage); `offset` is added after (-100 for a percentage change of a ratio x 100). `Fact.zero()` is the
    zero a sign is compared with."""

    csv: str
    column: str
    where: dict[str, Any] = field(default_factory=dict)
    agg: str = "value"
    over: Fact | None = None
    scale: float = 1.0
    offset: float = 0.0

    @staticmethod
    def zero() -> Fact:
        return Fact("", "", scale=0.0)

    def value(self, folder: Path, cache: dict[str, pd.DataFrame] | None = None) -> float:
        if not self.csv and self.scale == 0.0:
            return self.offset
        cache = {} if cache is None else cache
        if self.csv not in cache:
            cache[self.csv] = pd.read_csv(folder / self.csv)
        df = cache[self.csv]
        for k, v in self.where.items():
            df = df[df[k].isin(v)] if isinstance(v, list) else df[df[k] == v]
        x = pd.to_numeric(df[self.column], errors="coerce").to_numpy(dtype=float)
        if self.agg == "value":
            if len(x) != 1:
                raise ValueError(f"{self.csv}: {self.where} selects {len(x)} rows, a value needs one")
            v = float(x[0])
        elif self.agg == "count":
            v = float(len(x))
        else:
            x = x[np.isfinite(x)]
            if not len(x):
                raise ValueError(f"{self.csv}: {self.where} selects no finite {self.column}")
            v = float({"min": np.min, "max": np.max, "mean": np.mean, "sum": np.sum,
                       "geomean": lambda a: np.exp(np.mean(np.log(a)))}[self.agg](x))
        if self.over is not None:
            v = v / self.over.value(folder, cache)
        return v * self.scale + self.offset


@dataclass
class _Sentence:
    text: str
    numbers: list[tuple[dict, str, str]]      # (fact, format, printed)
    directions: list[tuple[dict, str, dict, str]]   # (fact a, relation, fact b, word printed)


def _fact_dict(f: Fact) -> dict:
    d = asdict(f)
    return d


def _fact_of(d: dict) -> Fact:
    over = d.get("over")
    return Fact(**{**d, "over": _fact_of(over) if over else None})


class Claims:
    """Collects a report's facts while its prose is written (see the module doc)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.cache: dict[str, pd.DataFrame] = {}
        self.sentences: list[_Sentence] = []
        self._numbers: list[tuple[dict, str, str]] = []
        self._directions: list[tuple[dict, str, dict, str]] = []

    def num(self, fact: Fact, fmt: str = "{:.2f}") -> str:
        """The fact's value, formatted; recorded for the sentence being written."""
        printed = fmt.format(fact.value(self.folder, self.cache))
        self._numbers.append((_fact_dict(fact), fmt, printed))
        return printed

    def cmp(self, a: Fact, relation: str, b: Fact, words: tuple[str, str]) -> str:
        """words[0] if `a relation b` holds, else words[1]; the relation that holds is recorded."""
        va, vb = a.value(self.folder, self.cache), b.value(self.folder, self.cache)
        holds = bool(RELATIONS[relation](va, vb))
        rel = relation if holds else {"<": ">=", ">": "<=", "<=": ">", ">=": "<"}[relation]
        word = words[0] if holds else words[1]
        self._directions.append((_fact_dict(a), rel, _fact_dict(b), word))
        return word

    def say(self, text: str) -> str:
        """Record `text` (which used the facts since the last sentence) and return it."""
        self.sentences.append(_Sentence(text, self._numbers, self._directions))
        self._numbers, self._directions = [], []
        return text

    def write(self, path: Path | None = None) -> None:
        path = path or self.folder / "claims.json"
        path.write_text(json.dumps([asdict(s) for s in self.sentences], indent=1) + "\n")


def _prose_lines(readme: str) -> list[str]:
    """README lines that are prose: not table rows, headings, figures or code."""
    out, code = [], False
    for line in readme.splitlines():
        s = line.strip()
        if s.startswith("```"):
            code = not code
            continue
        if code or not s or s.startswith(("|", "#", "![")):
            continue
        out.append(re.sub(r"^([*-]|\d+\.) ", "", s))
    return out


def _states_something(line: str) -> bool:
    """A digit outside code spans, file names and identifiers, or a direction word."""
    bare = re.sub(r"`[^`]*`", "", line)
    bare = re.sub(r"\b[\w./-]*[A-Za-z][\w./-]*\d[\w./-]*\b", "", bare)      # names with digits: gpt3-7b, HBM2, A100
    bare = re.sub(r"\b\d[\w./-]*[A-Za-z][\w./-]*\b", "", bare)               # 1KB, 3x, 2nd written as units
    lower = f" {bare.lower()} "
    return bool(re.search(r"\d", bare)) or any(f" {w} " in lower or f" {w}," in lower or f" {w}." in lower
                                               for w in DIRECTION_WORDS)


def verify(folder: Path) -> list[str]:
    """Problems found re-checking a report's claims.json against its tables and README.md (empty: all hold)."""
    folder = Path(folder)
    sentences = json.loads((folder / "claims.json").read_text())
    readme = (folder / "README.md").read_text()
    cache: dict[str, pd.DataFrame] = {}
    errors: list[str] = []
    for s in sentences:
        if s["text"] not in readme:
            errors.append(f"claim not in README.md: {s['text'][:80]!r}")
        for fact, fmt, printed in s["numbers"]:
            got = fmt.format(_fact_of(fact).value(folder, cache))
            if got != printed:
                errors.append(f"{s['text'][:60]!r}: {fact['csv']} {fact['column']} {fact['where']} gives {got}, "
                              f"the prose says {printed}")
        for a, rel, b, word in s["directions"]:
            va, vb = _fact_of(a).value(folder, cache), _fact_of(b).value(folder, cache)
            if not (math.isfinite(va) and math.isfinite(vb) and RELATIONS[rel](va, vb)):
                errors.append(f"{s['text'][:60]!r}: {word!r} needs {va} {rel} {vb}")
    claimed = "\n".join(s["text"] for s in sentences)
    for line in _prose_lines(readme):
        if _states_something(line) and line not in claimed:
            errors.append(f"README.md states a number or direction outside any claim: {line[:100]!r}")
    return errors
