"""Issue #8.8: archsim.load_result reads a --json file back into a Result."""
from __future__ import annotations

import json

import pandas as pd
import pytest

import archsim
from archsim.errors import UserError


def test_round_trip_dram_trace(tmp_path):
    res = archsim.run_trace({"kind": "random", "requests": 200, "seed": 1}, preset="DDR4_3200AA_x8_8Gb")
    path = tmp_path / "r.json"
    res.write_json(path)
    back = archsim.load_result(path)
    from archsim.results import Result

    assert isinstance(back, Result)
    assert back.manifest == json.loads(json.dumps(res.manifest, default=str))
    assert back.stats["cycles"] == res.stats["cycles"]
    assert back.stats.keys() == res.stats.keys()
    assert list(back.df.columns) == list(res.df.columns) and len(back.df) == len(res.df)
    pd.testing.assert_frame_equal(back.df, res.df, check_dtype=False)
    back.write_json(tmp_path / "again.json")       # and it writes the same file again
    assert (tmp_path / "again.json").read_text() == path.read_text()


def test_round_trip_extra_tables(tmp_path):
    from archsim.results import Result, load_result

    res = Result(stats={"x": 1.5}, df=pd.DataFrame({"op": ["a", "b"], "t": [1, 2]}), manifest={"seed": 3},
                 tables={"timeline": pd.DataFrame({"unit": ["pim"], "start": [0.0], "end": [1.0]})})
    res.write_json(tmp_path / "t.json")
    back = load_result(tmp_path / "t.json")
    assert back.stats == {"x": 1.5} and back.manifest == {"seed": 3}
    pd.testing.assert_frame_equal(back.tables["timeline"], res.tables["timeline"])
    pd.testing.assert_frame_equal(back.df, res.df)


@pytest.mark.parametrize("text, message", [
    (None, "result file not found"),
    ("{nope", "invalid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"stats": {}, "manifest": {}}', "table: missing"),
    ('{"stats": [], "table": [], "manifest": {}}', "stats: a list"),
])
def test_bad_files_are_user_errors(tmp_path, text, message):
    path = tmp_path / "bad.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(UserError, match=message):
        archsim.load_result(path)
