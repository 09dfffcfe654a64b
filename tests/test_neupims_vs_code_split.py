"""vs_code.csv's split of a PIM stage into its two operations (logits and softmaxes, then the attend), the code's
per-operation cycles beside archsim's split at the attend's release."""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "reports" / "neupims"))
import vs_code  # noqa: E402

HERE = ROOT / "reports" / "neupims"


def test_split_reads_the_codes_operations_and_archsims_release():
    code = pd.Series({"pim_ops": "NeuPIMSLogitSoftmax=840;NeuPIMSAttend=7106"})
    ours = pd.Series({"start_cycle": 1000, "cycles": 6690, "pim_end_cycle": 1000 + 6600, "attend_release_cycle": 735})
    assert vs_code.attend_split(code, ours) == {"code_logits_cycles": 840, "archsim_logits_cycles": 735,
                                                "code_attend_cycles": 7106, "archsim_attend_cycles": 6600 - 735}
    # per-head attend (no release recorded), or a code stage without PIM operations: no split
    assert vs_code.attend_split(code, ours.copy().replace({735: -1})) == {}
    assert vs_code.attend_split(pd.Series({"pim_ops": float("nan")}), ours) == {}


def test_committed_split_adds_up_to_each_sides_pim_span():
    vs = pd.read_csv(HERE / "vs_code.csv")
    code = pd.read_csv(HERE / "code_results.csv").set_index(["case", "stage"])
    split = vs[vs["code_logits_cycles"].notna()]
    assert len(split) >= 15
    for _, r in split.iterrows():
        span = code.loc[(r["case"], r["stage"]), "pim_span_cycles"]
        assert abs(r["code_logits_cycles"] + r["code_attend_cycles"] - span) <= 5, (r["case"], r["stage"])
        assert 0 < r["archsim_logits_cycles"] and 0 < r["archsim_attend_cycles"]
        assert r["archsim_logits_cycles"] + r["archsim_attend_cycles"] <= r["archsim_cycles"], (r["case"], r["stage"])
        assert r["attend_diff_pct"] == round(100 * (r["archsim_attend_cycles"] / r["code_attend_cycles"] - 1), 1)
