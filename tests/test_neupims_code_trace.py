"""reports/neupims/code_trace.py reads a channel-0 log of NeuPIMs' simulator: read order, refreshes and G_ACTs
during another rank's tRFC, on a small hand-made log; a log whose run is not code_results.csv's is refused."""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reports" / "neupims"))

import code_trace  # noqa: E402

CODE = pd.DataFrame({"case": "uni32-off", "stage": ["A", "B", "E"], "code_cycles": [100, 50, 10]})


def _write(tmp: Path, lines: list[str], a: int = 100) -> Path:
    (tmp / "_summary.tsv").write_text(f"Stage\ttotal_cycles\tpim_cycles\tmem_bw_util\t\nA\t{a}\t0\t0\t\nB\t50\t0\t0\t\n"
                                      "E\t10\t0\t0\t\n")
    log = tmp / "ch0.log"
    log.write_text("\n".join(lines) + "\n")
    return log


def test_reads_refreshes_and_gacts(tmp_path, monkeypatch):
    monkeypatch.setattr(code_trace, "FIRST", 2)
    addr = [code_trace._address(0, 0, b, 0, 0) for b in range(3)]
    lines = [f"1 T {addr[0]} READ", f"2 T {addr[1]} READ", f"3 T {addr[2]} READ",
             "10 C 0 0 0 2 0 0",          # the third request served first
             "20 C 0 0 0 0 0 0", "40 C 0 0 0 1 0 0",
             "110 C 7 0 -1 -1 -1 -1",     # rank 0 refreshes in stage B
             "120 C 11 1 0 0 5 -1",       # rank 1's G_ACT during rank 0's tRFC
             "125 C 11 0 0 0 5 -1"]       # rank 0's own (still in tRFC, but its own rank)
    got = code_trace.measure(_write(tmp_path, lines), CODE).set_index("metric")["value"]
    assert got["a_last_read_cycle"] == 40 and got["a_reads"] == 3
    assert got["a_first1000_served_cycle"] == 40 and got["a_served_by_then"] == 3
    assert (got["b_refreshes"], got["b_gact"], got["b_gact_during_refresh"]) == (1, 2, 1)
    assert (got["refresh_median_gap"], got["refresh_rank_alternates"]) == (0, 1)     # one refresh: no gap


def test_refresh_gaps_and_ranks(tmp_path):
    """The median gap between channel 0's REFRESHes over the whole log, and whether the ranks take turns."""
    refs = ["50 C 7 0 -1 -1 -1 -1", "100 C 7 1 -1 -1 -1 -1", "151 C 7 0 -1 -1 -1 -1", "199 C 7 1 -1 -1 -1 -1"]
    got = code_trace.measure(_write(tmp_path, ["1 T 0 READ", "2 C 0 0 0 0 0 0", *refs]), CODE).set_index("metric")
    assert (got.loc["refresh_median_gap", "value"], got.loc["refresh_rank_alternates", "value"]) == (50, 1)
    refs[1] = "100 C 7 0 -1 -1 -1 -1"       # rank 0 twice in a row
    got = code_trace.measure(_write(tmp_path, ["1 T 0 READ", "2 C 0 0 0 0 0 0", *refs]), CODE).set_index("metric")
    assert got.loc["refresh_rank_alternates", "value"] == 0


def test_another_run_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="not the same run"):
        code_trace.measure(_write(tmp_path, ["1 T 0 READ"], a=99), CODE)


def test_attend_tiles(tmp_path):
    code = CODE.assign(case="uni512-off", pim_ops=["", "NeuPIMSLogitSoftmax=20;NeuPIMSAttend=30", ""])
    lines = ["105 C 17 -1 -1 -1 1 1",       # a logits GEMV, before the attend
             "121 C 17 -1 -1 -1 2 1", "126 C 14 0 0 0 -1 -1", "127 C 14 0 0 1 -1 -1",
             "141 C 17 -1 -1 -1 3 1", "146 C 14 0 0 0 -1 -1"]
    got = code_trace.measure_attend(_write(tmp_path, lines), code).set_index("metric")["value"]
    assert (got["attend_gemvs"], got["attend_gemv_to_pim_precharge"], got["attend_gemv_period"]) == (2, 5, 20)
