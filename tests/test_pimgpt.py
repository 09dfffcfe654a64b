"""PIM-GPT end to end (archsim.systems.pimgpt.system): claims of the paper that the model must reproduce."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from archsim import api
from archsim.cli import main
from archsim.errors import UserError
from archsim.systems.pimgpt.system import PimGptSimulator, run_pimgpt


def test_memoised_equals_full_simulation():
    a = PimGptSimulator({"model": "gpt2-small", "tokens": 3, "baselines": [], "memo": True})
    b = PimGptSimulator({"model": "gpt2-small", "tokens": 3, "baselines": [], "memo": False})
    for t in range(3):
        a.run_token(t)
        b.run_token(t)
    assert a.token_cycles == b.token_cycles
    for role in a.acc:
        assert (a.acc[role]["counts"] == b.acc[role]["counts"]).all()
        assert a.acc[role]["pim_cycles"] == b.acc[role]["pim_cycles"]
    assert a.engine.memo_hits > 0


def test_checker_accepts_emitted_streams():
    from archsim.dram.checker import check_log

    sim = PimGptSimulator({"model": "gpt2-small", "tokens": 2, "baselines": []}, log=True)
    for t in range(2):
        sim.run_token(t)
    df = sim.engine.command_log()
    assert len(df) > 1_000_000
    assert check_log(sim.spec, df) == []


def test_row_hit_rate_and_result_shape():
    r = run_pimgpt("gpt2-small", tokens=4, baselines=[])
    s = r.stats
    assert s["row_hit_rate"] >= 0.95
    assert set(s["energy_per_token_by_component_j"]) == {"dram_array", "pim_mac", "global_buffer", "io", "asic",
                                                         "background"}
    assert abs(r.df["share"].sum() - 1) < 1e-9
    assert {"qkv", "ffn1", "ffn2", "attn_score", "attn_context", "softmax", "lm_head"} <= set(r.df["op"])
    # the weight stream time is at least the weight bytes over the peak MAC bandwidth (16 banks x 32 B / nCCDL)
    model_bytes = 124e6 * 2
    peak = s["channels"] * 16 * 32 / (2 * 0.5e-9)
    assert s["latency_per_token_s"] >= model_bytes / peak


def test_kv_growth_raises_latency():
    r = run_pimgpt("gpt2-small", tokens=40, baselines=[])
    lat = r.extra["token_latency_s"]
    assert lat[-1] > lat[0]


def test_channel_scaling_of_pim_time():
    """8 -> 16 channels: the PIM part speeds up >= 1.8x (the ASIC part does not change)."""
    pim = {}
    for ch in (8, 16):
        r = run_pimgpt("gpt2-medium", tokens=2, channels=ch, baselines=[])
        pim[ch] = r.df["pim_cycles"].sum()
    assert pim[8] / pim[16] >= 1.8


def test_channel_scaling_end_to_end():
    """GPT3-XL, the paper's reference model. 8 -> 16 channels halves every GEMV's rows per bank; what does not
    scale is per-channel fixed work (the input vector is broadcast to every channel's global buffer) and the
    ASIC, so smaller models scale less: reports/pimgpt lists every model (1.69x-1.85x over 1024 tokens)."""
    lat = {ch: run_pimgpt("gpt3-xl", tokens=2, channels=ch, baselines=[]).stats["latency_per_token_s"]
           for ch in (8, 16)}
    assert lat[8] / lat[16] >= 1.8


def test_channel_scaling_grows_with_model_size():
    ratio = {}
    for model in ("gpt2-small", "gpt3-xl"):
        lat = {ch: run_pimgpt(model, tokens=2, channels=ch, baselines=[]).stats["latency_per_token_s"]
               for ch in (8, 16)}
        ratio[model] = lat[8] / lat[16]
    assert 1.6 < ratio["gpt2-small"] < ratio["gpt3-xl"] <= 2.0


def test_asic_share_gpt3_xl_small():
    """Paper: 1.16 %. Ours ~4 % with a 128-lane ASIC (sized to the 8 channels' I/O) running fp32-accurate
    Taylor / Newton-Raphson algorithms, one op after another as in PIM-GPT's engine."""
    assert run_pimgpt("gpt3-xl", tokens=2, baselines=[]).stats["asic_share"] < 0.05


@pytest.mark.xfail(strict=True, reason="1 GHz -> 100 MHz costs ~1.37x (paper <= 1.20x): with ASIC and PIM "
                   "serialised, <= 1.25x needs an ASIC share <= ~2.8 % at 1 GHz; ours is ~4 % (see reports/pimgpt)")
def test_asic_clock_sensitivity():
    a = run_pimgpt("gpt3-xl", tokens=2, baselines=[]).stats["latency_per_token_s"]
    b = run_pimgpt("gpt3-xl", tokens=2, baselines=[], asic_clock_hz=1e8).stats["latency_per_token_s"]
    assert b / a <= 1.25


def test_asic_clock_sensitivity_is_bounded_by_asic_share():
    """Serialised ASIC and PIM: slowing the ASIC 10x adds exactly 9x its share (up to cycle rounding)."""
    a = run_pimgpt("gpt3-xl", tokens=2, baselines=[])
    b = run_pimgpt("gpt3-xl", tokens=2, baselines=[], asic_clock_hz=1e8)
    ratio = b.stats["latency_per_token_s"] / a.stats["latency_per_token_s"]
    assert ratio == pytest.approx(1 + 9 * a.stats["asic_share"], rel=0.02)


def test_baselines_and_registry(tmp_path):
    r = api.run({"system": "pimgpt", "model": "gpt2-small", "tokens": 3})
    s = r.stats
    for tag in ("t4", "xeon_gold_6154"):
        assert s[f"speedup_vs_{tag}"] > 1 and s[f"energy_efficiency_vs_{tag}"] > 1
    assert r.manifest["config"]["model"] == "gpt2-small"


def test_cli_run_and_errors(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["run", "--model", "gpt2-small", "--tokens", "2", "--no-baselines", "--json", str(out),
                 "--csv", str(tmp_path / "r.csv")]) == 0
    assert json.loads(out.read_text())["stats"]["tokens"] == 2
    assert main(["run", "--model", "gpt2-smal", "--tokens", "2"]) == 2
    err = capsys.readouterr().err
    assert "known: " in err and "gpt2-large" in err      # the shipped names (other systems ship more models)
    assert main(["run", "--system", "nosuch", "--tokens", "2"]) == 2
    assert "known:" in capsys.readouterr().err
    assert main(["run", "--model", "gpt2-xl", "--channels", "4", "--tokens", "1"]) == 2
    err = capsys.readouterr().err
    assert "needs" in err and "holds" in err
    with pytest.raises(UserError):
        run_pimgpt("gpt2-small", tokens=5000)


def test_compile_writes_channel_and_host_streams(tmp_path):
    from archsim import isa

    assert main(["compile", "--model", "gpt2-small", "-o", str(tmp_path), "--layers", "1", "--context", "3"]) == 0
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [f"channel{c}.pim.asm" for c in range(8)] + ["host.asm"]
    isa.assemble(isa.load("host"), (tmp_path / "host.asm").read_text())
    text = (tmp_path / "channel0.pim.asm").read_text()
    assert "MACAB" in text and "SYNC" in text
    isa.assemble(isa.load("pim"), "\n".join(text.splitlines()[:5000]))


@pytest.mark.slow
@pytest.mark.parametrize("model", ["gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl", "gpt3-small",
                                   "gpt3-medium", "gpt3-large", "gpt3-xl"])
def test_row_hit_rate_all_models_full_context(model):
    r = run_pimgpt(model, tokens=1024, baselines=[])
    assert r.stats["row_hit_rate"] >= 0.95
    assert np.isfinite(r.stats["energy_per_token_j"])


def _acc_equal(a, b):
    assert a.token_cycles == b.token_cycles
    assert list(a.acc) == list(b.acc)                      # same roles, same order (DataFrame rows)
    for role in a.acc:
        x, y = a.acc[role], b.acc[role]
        for f in ("kind", "ops", "pim_cycles", "asic_cycles", "asic_energy_pj"):
            assert x[f] == y[f], (role, f)
        assert (x["counts"] == y["counts"]).all(), role


def test_layer_memo_equals_full_simulation():
    """Fast path (one-layer plans, timing streams, op + layer memo with fixed-point replay) == the per-op
    reference path with no memo at all, every op's cycles, counts and ASIC energy (bit for bit)."""
    T = 4
    fast = PimGptSimulator({"model": "gpt2-small", "tokens": T, "baselines": [], "memo": True})
    flat = PimGptSimulator({"model": "gpt2-small", "tokens": T, "baselines": [], "memo": False})
    ref = PimGptSimulator({"model": "gpt2-small", "tokens": T, "baselines": [], "memo": False})
    assert fast._fast and flat._fast
    ref._fast = False                                      # full graph, Stream-based streams, every op simulated
    for t in range(T):
        for sim in (fast, flat, ref):
            sim.run_token(t)
    _acc_equal(fast, ref)
    _acc_equal(flat, ref)
    n = fast.model.n_layers
    assert fast.layer_memo_misses <= 2 * T                 # layers 0 and 1 of a token; the rest replayed
    assert fast.layer_memo_hits == n * T - fast.layer_memo_misses
    assert flat.layer_memo_hits == 0 and flat.engine.memo_hits == 0


def test_layer_memo_result_identical_to_reference_path():
    """The whole Result (stats apart from simulator counters, per-op DataFrame, token latencies)."""
    cfg = {"model": "gpt2-medium", "tokens": 3, "channels": 16, "baselines": []}
    a = PimGptSimulator(cfg).run()
    sim = PimGptSimulator({**cfg, "memo": False})
    sim._fast = False
    b = sim.run()
    strip = lambda s: {k: v for k, v in s.items() if not k.startswith("sim_")}  # noqa: E731
    assert strip(a.stats) == strip(b.stats)
    assert a.df.equals(b.df)
    assert np.array_equal(a.extra["token_latency_s"], b.extra["token_latency_s"])
    assert a.stats["sim_layer_memo_hits"] > 0


def test_one_layer_template_checks():
    sim = PimGptSimulator({"model": "gpt3-xl", "tokens": 5, "baselines": []})
    assert sim._fast and sim._nblock > 0 and set(sim._struct) == {0}
    assert not PimGptSimulator({"model": "gpt2-small", "tokens": 1, "baselines": []}, log=True)._fast


def _report_row(model: str) -> dict:
    import pandas as pd

    table = pd.read_csv(Path(__file__).resolve().parents[1] / "reports" / "pimgpt" / "models.csv")
    return table.set_index("model").loc[model].to_dict()


@pytest.mark.parametrize("model", ["gpt2-small", pytest.param("gpt3-xl", marks=pytest.mark.slow),
                                   pytest.param("gpt2-xl", marks=pytest.mark.slow)])
def test_committed_report_matches_simulation(model):
    """reports/pimgpt was generated by this code: re-simulating 1024 tokens gives the same numbers
    (tolerance 1e-9 relative: only CSV float formatting separates them)."""
    row = _report_row(model)
    s = run_pimgpt(model, tokens=1024).stats
    assert s["latency_per_token_s"] * 1e3 == pytest.approx(row["latency_per_token_ms"], rel=1e-9)
    assert s["energy_per_token_j"] * 1e3 == pytest.approx(row["energy_per_token_mJ"], rel=1e-9)
    assert s["speedup_vs_t4"] == pytest.approx(row["speedup_vs_t4"], rel=1e-9)
    assert s["row_hit_rate"] >= 0.95


# ---- omit_ops (the per-cause toggles of reports/pimgpt) and the report's step breakdown ----------------------
def test_omit_ops_removes_exactly_those_ops_and_their_time():
    """A step without K/V appends has no kv_append row and is shorter by about what the appends took in the full
    step (the DRAM state the next op sees differs, so not to the cycle); the template and per-op paths agree."""
    full = PimGptSimulator({"model": "gpt2-small", "tokens": 4, "baselines": []})
    cut = PimGptSimulator({"model": "gpt2-small", "tokens": 4, "baselines": [], "omit_ops": ["kv_append"]})
    per_op = PimGptSimulator({"model": "gpt2-small", "tokens": 4, "baselines": [], "omit_ops": ["kv_append"],
                              "memo": False})
    per_op._fast = False
    a, b, c = full.run_token(3), cut.run_token(3), per_op.run_token(3)
    assert b == c, (b, c)
    kinds = set(cut.result(0.0, 0).df["kind"])
    assert "kv_append" not in kinds and "attn_score" in kinds
    kv = full.result(0.0, 0).df.set_index("kind").loc["kv_append", "pim_cycles"]
    assert a - b == pytest.approx(kv, rel=0.05), (a, b, kv)


def test_omit_ops_is_serial_only_and_checks_kinds(capsys):
    with pytest.raises(UserError, match="omit_ops: works with schedule: serial only"):
        PimGptSimulator({"model": "gpt2-small", "tokens": 1, "baselines": [], "omit_ops": ["softmax"],
                         "schedule": "overlap"})
    assert main(["run", "--system", "pimgpt", "--tokens", "1", "--set", "omit_ops=[kv_apend]"]) == 2
    err = capsys.readouterr().err
    assert "omit_ops: must be one of" in err and "kv_append" in err, err
    assert main(["run", "--system", "pimgpt", "--model", "gpt2-small", "--tokens", "1", "--set", "baselines=[]",
                 "--set", "omit_ops=[kv_append]", "--json", "-"]) == 0
    assert "kv_append" not in {row["kind"] for row in json.loads(capsys.readouterr().out)["table"]}


def _report_csv(name: str):
    import pandas as pd

    return pd.read_csv(Path(__file__).resolve().parents[1] / "reports" / "pimgpt" / f"{name}.csv")


def test_committed_breakdown_runs_re_simulate():
    """reports/pimgpt/breakdown_runs.csv: the serial GPT-2 XL step at context 512, and the toggles of the K/V
    appends and of everything but the weight GEMVs, re-simulated from code (one step each, ~1 s)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("pimgpt_report", Path(__file__).resolve().parents[1] / "reports" /
                                                  "pimgpt" / "make_report.py")
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    runs = _report_csv("breakdown_runs").set_index("run")["ms"]
    assert report.step_ms("gpt2-xl", 512) == pytest.approx(runs["serial (the paper's engine)"], rel=1e-9)
    assert report.step_ms("gpt2-xl", 512, omit_ops=["kv_append"]) == pytest.approx(runs["no K/V appends"], rel=1e-9)
    only = report.step_ms("gpt2-xl", 512, omit_ops=["kv_append", *report.ATTENTION], **report.FREE_ASIC)
    assert only == pytest.approx(runs["weight GEMVs only (ASIC free, no attention, no K/V)"], rel=1e-9)
    # each toggle saves time, and the weight GEMVs alone stay above the weight-streaming bound
    assert (runs.drop("serial (the paper's engine)") < runs["serial (the paper's engine)"]).all(), runs
    assert (_report_csv("breakdown_runs")["x_bound"] > 1.0).all()


def test_committed_baseline_rows_recompute():
    """reports/pimgpt/baselines.csv (launch-bound and device-bound T4, Xeon) from the baseline model."""
    from archsim.host.baselines import Baseline
    from archsim.workload import build_graph, load_model

    table = _report_csv("baselines")
    assert set(table["baseline"]) == {"t4", "t4-graphs", "xeon-gold-6154"}
    for row in table.itertuples():
        d = Baseline.load(row.baseline).decode_token(build_graph(load_model(row.model), "decode", context_len=512))
        assert d["latency_s"] * 1e3 == pytest.approx(row.latency_ms, rel=1e-9)
        assert d["energy_j"] * 1e3 == pytest.approx(row.energy_mJ, rel=1e-9)
