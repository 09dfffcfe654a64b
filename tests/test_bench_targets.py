"""benchmarks/run_all.py (`make bench`): figures found in a benchmark's JSON and judged against targets.yaml."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
import run_all  # noqa: E402


def test_lookup_follows_dots_and_picks_list_entries():
    data = {"cases": [{"case": "a", "x": 1.0}, {"case": "b", "x": 2.0}], "all": {"wall_s": 3.5}}
    assert run_all.lookup(data, "cases[case=b].x") == 2.0
    assert run_all.lookup(data, "all.wall_s") == 3.5
    with pytest.raises(StopIteration):
        run_all.lookup(data, "cases[case=zz].x")


@pytest.mark.parametrize("fig,value,want", [
    ({"max": 30}, 29.9, "met"), ({"max": 30}, 30.1, "NOT met"),
    ({"min": 1e6}, 1e6, "met"), ({"min": 1e6}, 0.99e6, "NOT met"),
    ({}, 5.0, ""), ({"max": 1}, None, "not measured"),
])
def test_verdict_at_the_boundary(fig, value, want):
    assert run_all.verdict(fig, value) == want


def test_a_missing_figure_is_reported_not_measured():
    bench = {"script": "x.py", "figures": [{"name": "n", "at": "nope", "unit": "s", "max": 1}]}
    (row,) = run_all.rows_of(bench, {"other": 1})
    assert row["verdict"] == "not measured" and row["value"] is None


def test_every_target_names_a_benchmark_and_a_key_it_writes():
    """The leaf key of each figure's path appears in its benchmark's source (a renamed key fails here, not
    silently as 'not measured' in `make bench`)."""
    for bench in run_all.load_targets():
        src = (BENCH / bench["script"]).read_text(encoding="utf-8")
        assert "--json" in src, bench["script"]
        for fig in bench["figures"]:
            leaf = re.sub(r"\[.*\]", "", fig["at"].split(".")[-1])
            assert f'"{leaf}"' in src, f"{bench['script']}: no key {leaf!r} for figure {fig['name']!r}"
