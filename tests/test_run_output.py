"""`archsim run`'s generic summary (systems without a summary of their own: neupims, duplex, t3)."""
from __future__ import annotations

import pandas as pd

from archsim.summary import print_generic


def test_numbers_are_short_and_a_wide_few_row_table_is_turned_on_its_side(capsys):
    stats = {"model": "t-nlg", "k": 2128, "t3_s": 0.00011097894666666668, "finite": True, "skip": [1, 2]}
    df = pd.DataFrame([{"config": c, **{f"col{i}": i * 0.1 + j for i in range(10)}}
                       for j, c in enumerate(["sequential", "t3"])])
    print_generic("t3", stats, df)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "t3"
    # each stat with the unit its name declares (archsim.summary): t3_s is a time
    assert "  k       2,128" in out and "  t3      111 µs" in out and "  finite  yes" in out, out
    assert not any("skip" in line for line in out)                    # lists are not summary lines
    header = next(line for line in out if line.split()[:1] == ["config"])
    assert header.split() == ["config", "sequential", "t3"]           # configurations as columns
    assert any(line.split() == ["col3", "0.3", "1.3"] for line in out)


def test_narrow_or_long_tables(capsys):
    narrow = pd.DataFrame({"stage": ["A", "B"], "npu_s": [1.5e-6, 2.25e-6]})
    print_generic("x", {}, narrow)
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["stage", "npu_s"] and out[2].split() == ["A", "1.5", "µs"]    # with its unit
    print_generic("x", {}, pd.DataFrame({"i": range(31)}))
    assert "31 result rows: --csv FILE writes them" in capsys.readouterr().out
