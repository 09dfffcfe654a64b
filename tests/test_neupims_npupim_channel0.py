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


def test_an_interval_across_the_logits_attend_boundary_counts_for_one_operation(tmp_path):
    """The code's logs are in 1,000-cycle intervals and the attend starts where the logits end, mid-interval: the
    interval holding that cycle goes to the operation holding most of it (code_channels.op_rows), not to both.
    Counted for both, channel 31's last logits READRES made its attend's PIM work start before the attend did
    (attend_pim_first -836 and every write of its attend inside its PIM work), and a channel done early had its
    logits end moved to the attend's first READRES. The intervals at the stage's own start and end still count."""
    import code_channels
    import code_writes

    # logits 1200..5300, attend 5300..9100: the interval 5000..5999 is the attend's (700 of its 1,000 cycles),
    # 1000..1999 the logits' and 9000..9999 the attend's though mostly outside
    (tmp_path / "PIM_stage_B.tsv").write_text(
        "OpName\tStartCycle\tEndCycle\t\nlayer0.attn.NeuPIMSAttend\t5300\t9100\t\n"
        "layer0.attn.NeuPIMSLogitSoftmax\t1200\t5300\t\n")
    for ch in range(code_writes.CHANNELS):
        # channel 0: logits READRES in 1000..2999 only, attend's first in 5000 (written there), its last in 9000;
        # channel 1: logits READRES up to 4000, then the attend's from 5000 on
        reads = {1000: 4, 2000: 4, 3000: 0, 4000: 4 if ch else 0, 5000: 2, 6000: 0, 7000: 2, 8000: 0, 9000: 2}
        writes = {5000: 64}
        (tmp_path / f"mem_io_B_ch_{ch}.tsv").write_text("StartCycle\tChannelID\tMemoryWrites\tPIMReads\t\n" + "".join(
            f"{t}\t{ch}\t{writes.get(t, 0)}\t{r}\t\n" for t, r in sorted(reads.items())))
    ends = code_channels.build(tmp_path).set_index("channel")
    assert ends.loc[0, "logits_end"] == 3000 - 1200 and ends.loc[1, "logits_end"] == 5000 - 1200
    assert ends.loc[0, "logits_busy_intervals"] == 2 and ends.loc[0, "attend_busy_intervals"] == 3
    assert ends.loc[0, "attend_end"] == 10000 - 5300
    df = code_writes.build(tmp_path).set_index("channel")
    assert df.loc[0, "logits_pim_last"] == 2000 - 1200 and df.loc[0, "logits_write_bytes"] == 0
    assert df.loc[0, "attend_pim_first"] == 5000 - 5300 and df.loc[0, "attend_pim_last"] == 9000 - 5300
    assert df.loc[0, "attend_write_bytes"] == 64 and df.loc[0, "attend_pim_intervals"] == 5
    assert (df["attend_pim_first"] == -300).all() and (df["logits_write_bytes"] == 0).all()


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


def test_channel0_without_refresh_columns_follow_from_the_codes_run_and_the_none_arm():
    """npupim_refresh_toggle.csv's channel-0 ends without refresh: the code's are code_channels_norefresh.csv's
    (again from the code's run without refresh where it is on this machine), archsim's the `refresh: false` run's;
    channel 0's gap under the staggered refresh is exactly its gap without refresh plus the two refresh costs'
    difference."""
    import code_channels

    df = pd.read_csv(FOLDER / "npupim_refresh_toggle.csv").set_index("stage")
    none = pd.read_csv(FOLDER / "code_channels_norefresh.csv").set_index("channel")
    b = df.loc["B"]
    for part in ("logits", "attend"):
        assert b[f"code_ch0_{part}_end_norefresh"] == none.loc[0, f"{part}_end"]
        assert b[f"code_ch0_{part}_refresh_cost"] == b[f"code_ch0_{part}_end"] - b[f"code_ch0_{part}_end_norefresh"]
        for arm in ("together", "staggered"):
            assert b[f"archsim_ch0_{part}_refresh_cost_{arm}"] == (b[f"archsim_ch0_{part}_end_{arm}"]
                                                                   - b[f"archsim_ch0_{part}_end_none"])
        assert b[f"diff_pct_ch0_{part}_none"] == round(
            100 * (b[f"archsim_ch0_{part}_end_none"] / b[f"code_ch0_{part}_end_norefresh"] - 1), 1)
        assert b[f"ch0_{part}_gap_staggered"] == b[f"archsim_ch0_{part}_end_staggered"] - b[f"code_ch0_{part}_end"]
        assert b[f"ch0_{part}_gap_staggered"] == b[f"ch0_{part}_gap_none"] + b[f"ch0_{part}_gap_refresh_staggered"]
    run = Path(f"{RUN}_norefresh")
    if run.exists():
        pd.testing.assert_frame_equal(code_channels.build(run), none.reset_index())


def test_channel0_without_refresh_sentence_words_its_comparison_from_the_rows(tmp_path):
    """The sentence says the code's refresh costs channel 0 more than archsim's staggered one only while the rows
    do; with a made-up table where archsim's costs more, it says no more."""
    mr = _make_report()
    df = pd.read_csv(FOLDER / "npupim_refresh_toggle.csv")
    b = df["stage"] == "B"
    more = df.loc[b, "code_ch0_logits_refresh_cost"].iloc[0] > df.loc[b, "archsim_ch0_logits_refresh_cost_staggered"].iloc[0]
    text = mr._channel0_without_refresh(Claims(FOLDER))
    assert ("costs channel 0 more than archsim's" in text) == bool(more)
    shutil.copy(FOLDER / "code_channels_norefresh.csv", tmp_path)
    off = df.copy()
    off.loc[b, "archsim_ch0_logits_refresh_cost_staggered"] = off.loc[b, "code_ch0_logits_refresh_cost"] + 1
    off.to_csv(tmp_path / "npupim_refresh_toggle.csv", index=False)
    assert "costs channel 0 no more than archsim's" in mr._channel0_without_refresh(Claims(tmp_path))


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
    for name in ("code_writes.csv", "refresh_toggle.csv", "refresh_cost.csv", "code_channels_norefresh.csv"):
        shutil.copy(FOLDER / name, tmp_path)
    off = df.copy()
    b = off["stage"] == "B"
    off.loc[b, "archsim_ch0_logits_end_staggered"] = off.loc[b, "code_ch0_logits_end"] * 0.5
    off.loc[b, "abs_err_ch0_logits_staggered"] = (off.loc[b, "archsim_ch0_logits_end_staggered"]
                                                  - off.loc[b, "code_ch0_logits_end"]).abs()
    off.to_csv(tmp_path / "npupim_refresh_toggle.csv", index=False)
    text = mr._npupim_channel0(Claims(tmp_path))
    assert text.split("channel 0's logits end goes from")[1].split(",")[1].strip() == "away from the code"


def test_npupim_refresh_toggle_without_refresh_columns_follow_from_the_runs():
    """The no-refresh columns: the code's are code_norefresh.csv's (the code's run with its refresh pushed past the
    run's end), each refresh cost is a side's cycles with refresh minus without, and `closer` compares the arms'
    distances from the code's cost."""
    df = pd.read_csv(FOLDER / "npupim_refresh_toggle.csv").set_index("stage")
    norefresh = pd.read_csv(FOLDER / "code_norefresh.csv")
    norefresh = norefresh[norefresh["case"] == "npupim-baseline_gpt3-7B_tp4_bs512_clb0_norefresh"].set_index("stage")
    assert (df["code_cycles_norefresh"] == norefresh.loc[df.index, "code_cycles"]).all()
    ops = dict(x.split("=") for x in norefresh.loc["B", "pim_ops"].split(";"))
    assert df.loc["B", "code_logits_cycles_norefresh"] == int(ops["NeuPIMSLogitSoftmax"])
    assert df.loc["B", "code_attend_cycles_norefresh"] == int(ops["NeuPIMSAttend"])
    for part in ("", "logits_", "attend_"):
        rows = ["B"] if part else list(df.index)
        sub = df.loc[rows]
        assert (sub[f"code_{part}refresh_cost"] == sub[f"code_{part}cycles"] - sub[f"code_{part}cycles_norefresh"]).all()
        for arm in ("together", "staggered"):
            cost = sub[f"archsim_{part}cycles_{arm}"] - sub[f"archsim_{part}cycles_none"]
            assert (sub[f"archsim_{part}refresh_cost_{arm}"] == cost).all()
            assert (sub[f"refresh_cost_{part}off_{arm}"] == (cost - sub[f"code_{part}refresh_cost"]).abs()).all()
        assert (sub[f"refresh_cost_{part}closer"].astype(bool)
                == (sub[f"refresh_cost_{part}off_staggered"] < sub[f"refresh_cost_{part}off_together"])).all()


def test_refresh_stagger_is_on_only_in_the_npu_pim_branchs_mapping():
    """refresh_stagger: the code's NPU+PIM with its issue path (npu_pim_code_issue) takes it, whose refresh cost it
    matches (npupim_refresh_toggle.csv); every other shipped NeuPIMs mapping keeps the default."""
    from archsim import paths
    from archsim.systems.neupims.config import setup

    small = {"model": "gpt3-small", "layers": 1, "batch": 8}
    names = [n for n in paths.shipped_names("mappings") if n.startswith(("neupims", "npu_pim"))]
    assert "npu_pim_code_issue" in names and len(names) > 4
    for name in names:
        policy = setup({"system": "npu_pim", **small, "mapping": name}).policy
        assert policy.refresh_stagger == (name == "npu_pim_code_issue"), name


def test_driver_replaces_newton_config_lines_in_a_copy(tmp_path):
    """run_neupims.py --newton-set: the memory config and its NewtonSim device config copied into the log folder,
    the named line replaced, the checkout untouched; a key the device config does not set is a usage error (exit 2)."""
    import json

    import pytest
    sys.path.insert(0, str(ROOT / "benchmarks" / "neupims_code"))
    import run_neupims

    sim = tmp_path / "sim"
    (sim / "src").mkdir(parents=True)
    (sim / "configs").mkdir()
    ini = sim / "configs" / "dev.ini"
    ini.write_text("[timing]\ntCK = 1\ntREFI = 3900\ntREFIb = 128\n")
    mem = sim / "configs" / "mem.json"
    mem.write_text(json.dumps({"dram_type": "newton", "pim_config_path": "../configs/dev.ini"}))
    logs = tmp_path / "logs"
    logs.mkdir()
    out = run_neupims.newton_config_with(str(sim), str(mem), ["tREFI=100000000"], str(logs))
    copied = json.loads(Path(out).read_text())
    assert Path(copied["pim_config_path"]).parent == logs
    text = Path(copied["pim_config_path"]).read_text()
    assert "tREFI = 100000000\n" in text and "tREFIb = 128" in text and "tCK = 1" in text
    assert "tREFI = 3900" in ini.read_text()
    with pytest.raises(SystemExit) as exc:
        run_neupims.newton_config_with(str(sim), str(mem), ["tNOPE=1"], str(logs))
    assert exc.value.code == 2


def test_paragraph_words_the_refresh_cost_comparison_from_the_rows(tmp_path):
    """'the staggered rule the closer' only while the staggered arm's refresh cost is nearer the code's; a made-up
    table where it is not says the together rule is."""
    mr = _make_report()
    df = pd.read_csv(FOLDER / "npupim_refresh_toggle.csv")
    text = mr._npupim_channel0(Claims(FOLDER))
    b = df["stage"] == "B"
    closer = bool(df.loc[b, "refresh_cost_off_staggered"].iloc[0] < df.loc[b, "refresh_cost_off_together"].iloc[0])
    assert ("the staggered rule the closer" in text) == closer
    for name in ("code_writes.csv", "refresh_toggle.csv", "refresh_cost.csv", "code_channels_norefresh.csv"):
        shutil.copy(FOLDER / name, tmp_path)
    off = df.copy()
    off.loc[b, "refresh_cost_off_staggered"] = off.loc[b, "refresh_cost_off_together"] + 1
    off.to_csv(tmp_path / "npupim_refresh_toggle.csv", index=False)
    assert "the together rule the closer" in mr._npupim_channel0(Claims(tmp_path))


def test_refresh_cost_table_follows_from_its_runs_and_the_codes():
    """refresh_cost.csv: the NPU+PIM case's rows are npupim_refresh_toggle.csv's (the same runs), the code's cycles
    with refresh are vs_code's inputs (code_results.csv) and without it code_norefresh.csv's, and each cost and
    distance follows from its cycles."""
    df = pd.read_csv(FOLDER / "refresh_cost.csv")
    code = pd.read_csv(FOLDER / "code_results.csv")
    norefresh = pd.read_csv(FOLDER / "code_norefresh.csv")
    assert set(df["case"]) >= {"npupim-baseline_gpt3-7B_tp4_bs512_clb0", "gpt3-7B_tp4_bs512_clb0_sbi-off"}
    for _, r in df[df["part"] == "B"].iterrows():
        assert r["code_cycles"] == code[(code["case"] == r["case"]) & (code["stage"] == "B")]["code_cycles"].iloc[0]
        mine = norefresh[(norefresh["case"] == r["case"] + "_norefresh") & (norefresh["stage"] == "B")]
        assert r["code_cycles_norefresh"] == mine["code_cycles"].iloc[0]
    tog = pd.read_csv(FOLDER / "npupim_refresh_toggle.csv").set_index("stage").loc["B"]
    npupim = df[df["case"] == "npupim-baseline_gpt3-7B_tp4_bs512_clb0"].set_index("part")
    for part, key in (("B", ""), ("logits", "logits_"), ("attend", "attend_")):
        assert npupim.loc[part, "archsim_cycles_none"] == tog[f"archsim_{key}cycles_none"]
        assert npupim.loc[part, "archsim_cycles_staggered"] == tog[f"archsim_{key}cycles_staggered"]
        assert npupim.loc[part, "code_refresh_cost"] == tog[f"code_{key}refresh_cost"]
    assert (df["code_refresh_cost"] == df["code_cycles"] - df["code_cycles_norefresh"]).all()
    for arm in ("together", "staggered"):
        cost = df[f"archsim_cycles_{arm}"] - df["archsim_cycles_none"]
        assert (df[f"archsim_refresh_cost_{arm}"] == cost).all()
        assert (df[f"refresh_cost_off_{arm}"] == (cost - df["code_refresh_cost"]).abs()).all()
    assert (df["staggered_closer"] == (df["refresh_cost_off_staggered"] < df["refresh_cost_off_together"])).all()


def test_refresh_cost_sentence_words_its_directions_from_the_rows(tmp_path):
    """'cheaper' only while archsim's default refresh costs NeuPIMs' stage B less than the code's does, 'slower'
    only while archsim's attend without refresh is slower than the code's on every case; made-up rows flip both."""
    mr = _make_report()
    df = pd.read_csv(FOLDER / "refresh_cost.csv")
    text = mr._refresh_cost(Claims(FOLDER))
    neu = df[df["case"].str.endswith("sbi-off")]
    b, att = neu[neu["part"] == "B"], neu[neu["part"] == "attend"]
    cheaper = b["archsim_refresh_cost_together"].sum() < b["code_refresh_cost"].sum()
    assert ("sets a refresh cheaper" in text) == cheaper
    assert ("against an attend slower" in text) == bool(att["diff_pct_none"].min() > 0)
    off = df.copy()
    rows = off["case"].str.endswith("sbi-off")
    off.loc[rows, "archsim_refresh_cost_together"] = off.loc[rows, "code_refresh_cost"] + 1
    off.loc[rows, "diff_pct_none"] = -1.0
    off.to_csv(tmp_path / "refresh_cost.csv", index=False)
    text = mr._refresh_cost(Claims(tmp_path))
    assert "sets a refresh dearer" in text and "against an attend not slower" in text
