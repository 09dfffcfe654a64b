"""Issue 33, the NPU+PIM baseline's last stage-B gap (channel 0's own PIM execution): the code's softmax-result
writes per channel (reports/neupims/code_writes.py, from the npu+pim run's traffic logs) and the staggered-refresh
toggle on the per_cycle case (reports/neupims/npupim_refresh_toggle.py), and the report paragraph that reads them."""
from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "reports" / "neupims"
RUN = Path("/work/ext/neupims/runs/npupim-baseline_gpt3-7B_tp4_bs512_clb0")
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(FOLDER))

from reports.claims import Claims  # noqa: E402


def _make_report():
    spec = importlib.util.spec_from_file_location("neupims_make_report", FOLDER / "make_report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_code_writes_counts_the_writes_inside_each_channels_own_pim_work(tmp_path):
    """On a made-up run of two operations: a channel's writes are split into those inside its span of READRES
    intervals (first to last) and those outside, per operation; the first write inside is found; a channel with none
    inside says -1. And the committed table again from the code's run where it is on this machine."""
    import code_writes

    (tmp_path / "PIM_stage_B.tsv").write_text(
        "OpName\tStartCycle\tEndCycle\t\nlayer0.attn.NeuPIMSAttend\t5000\t9000\t\n"
        "layer0.attn.NeuPIMSLogitSoftmax\t1000\t5000\t\n")
    for ch in range(code_writes.CHANNELS):
        # (PIMReads, MemoryWrites) per interval; channel 0 reads in 1000-2999 and is written in 2000 and 4000
        rows = {1000: (4, 0), 2000: (4, 64 if ch == 0 else 0), 3000: (0, 0), 4000: (0, 128),
                5000: (2, 0), 6000: (2, 32), 7000: (0, 0), 8000: (0, 0)}
        (tmp_path / f"mem_io_B_ch_{ch}.tsv").write_text("StartCycle\tChannelID\tMemoryWrites\tPIMReads\t\n" + "".join(
            f"{t}\t{ch}\t{w}\t{r}\t\n" for t, (r, w) in sorted(rows.items())))
    df = code_writes.build(tmp_path).set_index("channel")
    assert df.loc[0, "logits_pim_first"] == 0 and df.loc[0, "logits_pim_last"] == 1000
    assert df.loc[0, "logits_write_bytes"] == 192 and df.loc[0, "logits_write_bytes_in_pim"] == 64
    assert df.loc[0, "logits_write_intervals_in_pim"] == 1 and df.loc[0, "logits_first_write_in_pim"] == 1000
    assert df.loc[1, "logits_write_bytes_in_pim"] == 0 and df.loc[1, "logits_first_write_in_pim"] == -1
    assert df.loc[1, "attend_write_bytes_in_pim"] == 32 and df.loc[1, "attend_pim_intervals"] == 2
    if RUN.exists():
        committed = pd.read_csv(FOLDER / "code_writes.csv")
        pd.testing.assert_frame_equal(code_writes.build(RUN), committed)


def test_npupim_refresh_toggle_table_follows_from_its_arms():
    """npupim_refresh_toggle.csv: its code columns are vs_code's and code_channels.csv's, the together arm is
    issue_toggle.csv's per_cycle arm (the same runs), and its error and direction columns follow from its cycles."""
    df = pd.read_csv(FOLDER / "npupim_refresh_toggle.csv").set_index("stage")
    issue = pd.read_csv(FOLDER / "issue_toggle.csv").set_index("stage")
    code_ch = pd.read_csv(FOLDER / "code_channels.csv").set_index("channel")
    assert list(df.index) == ["A", "B", "E", "block"]
    assert (df["code_cycles"] == issue["code_cycles"]).all()
    assert (df["archsim_cycles_together"] == issue["archsim_cycles_per_cycle"]).all()
    for part in ("logits", "attend"):
        assert df.loc["B", f"archsim_{part}_cycles_together"] == issue.loc["B", f"archsim_{part}_cycles_per_cycle"]
        assert df.loc["B", f"code_ch0_{part}_end"] == code_ch.loc[0, f"{part}_end"]
        for arm in ("together", "staggered"):
            err = abs(df.loc["B", f"archsim_ch0_{part}_end_{arm}"] - df.loc["B", f"code_ch0_{part}_end"])
            assert df.loc["B", f"abs_err_ch0_{part}_{arm}"] == err
        assert bool(df.loc["B", f"moved_ch0_{part}_toward_code"]) == (
            df.loc["B", f"abs_err_ch0_{part}_staggered"] < df.loc["B", f"abs_err_ch0_{part}_together"])
    for arm in ("together", "staggered"):
        assert ((df[f"archsim_cycles_{arm}"] - df["code_cycles"]).abs() == df[f"abs_err_{arm}"]).all()
    # the block is the sum of the stages on both sides
    for col in ("code_cycles", "archsim_cycles_together", "archsim_cycles_staggered"):
        assert df.loc["block", col] == df.loc[["A", "B", "E"], col].sum()


def test_channel0_paragraph_words_its_directions_from_the_rows(tmp_path):
    """The paragraph says the staggered refresh moves channel 0 toward the code only while its rows do; with a
    made-up table where the staggered arm ends channel 0's logits farther from the code, it says away."""
    mr = _make_report()
    text = mr._npupim_channel0(Claims(FOLDER))
    assert "channel 0's logits end goes from" in text and "not traced" in text
    df = pd.read_csv(FOLDER / "npupim_refresh_toggle.csv")
    expected = "toward the code" if bool(df.loc[df["stage"] == "B", "moved_ch0_logits_toward_code"].iloc[0]) \
        else "away from the code"
    assert text.split("channel 0's logits end goes from")[1].split(",")[1].strip() == expected
    for name in ("code_writes.csv", "refresh_toggle.csv"):
        shutil.copy(FOLDER / name, tmp_path)
    off = df.copy()
    b = off["stage"] == "B"
    off.loc[b, "archsim_ch0_logits_end_staggered"] = off.loc[b, "code_ch0_logits_end"] * 0.5
    off.loc[b, "abs_err_ch0_logits_staggered"] = (off.loc[b, "archsim_ch0_logits_end_staggered"]
                                                  - off.loc[b, "code_ch0_logits_end"]).abs()
    off.to_csv(tmp_path / "npupim_refresh_toggle.csv", index=False)
    text = mr._npupim_channel0(Claims(tmp_path))
    assert text.split("channel 0's logits end goes from")[1].split(",")[1].strip() == "away from the code"
