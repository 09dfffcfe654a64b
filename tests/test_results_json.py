"""Issue #38: Result.write_json writes a table given as row dicts without importing pandas, and the rows it
writes are the ones pandas' to_json writes (the --json files stay byte-identical)."""
from __future__ import annotations

import json
import random

import pandas as pd
import pytest

from archsim.results import Result, pandas_json_float, records_as_pandas_writes


def _pandas_rows(rows):
    return json.loads(pd.DataFrame(rows).to_json(orient="records"))


def _values(seed: int, n: int) -> list[float]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        v = rng.uniform(-1, 1) * 10 ** rng.uniform(-20, 20)
        pick = rng.random()
        if pick < 0.2:
            v = round(v, rng.randint(0, 12))        # short decimals, half-way cases among them
        elif pick > 0.9:
            v = rng.randint(0, 10**7) / rng.randint(1, 10**5)
        out.append(v)
    # the thresholds, half-way fractions and a carry into the whole part
    return out + [0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 0.99999999995, 5e-11, 1.5e-10, 1e16 - 1, 1e16, 1e-15,
                  9.99999999999e-16, 21362600.000000004, 45.00027397260274]


def test_floats_as_pandas_writes_them():
    values = _values(1, 50_000)
    got = [r["x"] for r in _pandas_rows({"x": values})]
    mine = [pandas_json_float(v) for v in values]
    assert [repr(v) for v in mine] == [repr(v) for v in got]


def test_rows_as_pandas_writes_them():
    rows = [{"channel": c, "name": f"ch/{c}\u00e9", "ints": c * 10**15, "mixed": c if c % 2 else c / 3,
             "f": 1 / (c + 3), "big": 2**62 + c} for c in range(8)]
    assert records_as_pandas_writes(rows) == _pandas_rows(rows)
    # a float column whose values are all whole: pandas writes 3.0, not 3
    rows = [{"a": 3.0, "b": 1}, {"a": 4, "b": 2}]
    mine = records_as_pandas_writes(rows)
    assert mine == _pandas_rows(rows) and [type(r["a"]) for r in mine] == [float, float]


@pytest.mark.parametrize("rows", [
    [],                                                   # no rows
    [{"a": 1}, {"b": 2}],                                 # different keys
    [{"a": 1, "b": 2}, {"b": 2, "a": 1}],                 # different key order
    [{"a": True}],                                        # bool
    [{"a": None}],                                        # missing value
    [{"a": float("nan")}], [{"a": float("inf")}],         # non-finite
    [{"a": 1}, {"a": "x"}],                               # mixed types
    [{"a": 2**63}],                                       # past int64
    [{"a": 2**53 + 1}, {"a": 0.5}],                       # an int float64 would round
])
def test_other_tables_go_to_pandas(rows):
    assert records_as_pandas_writes(rows) is None


def test_write_json_same_bytes_as_through_pandas(tmp_path):
    rows = [{"channel": c, "requests": 100 + c, "lat": (100 + c) / 7, "energy_pj": 21362600.000000004 * c}
            for c in range(4)]
    fast = Result(stats={"cycles": 5}, df=rows, manifest={"kind": "t"})
    slow = Result(stats={"cycles": 5}, df=pd.DataFrame(rows), manifest={"kind": "t"})
    fast.write_json(tmp_path / "fast.json")
    slow.write_json(tmp_path / "slow.json")
    assert (tmp_path / "fast.json").read_bytes() == (tmp_path / "slow.json").read_bytes()
    assert isinstance(fast.__dict__["_df"], list)        # the table was not made a DataFrame
