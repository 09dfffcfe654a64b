"""The which-PIM study (issue 37): a study file's intent mapped onto every design, refused with a reason where a
design cannot hold a point, run through the sweep machinery, reported in the common metric schema; bad study
files are one line naming the key and line; the report's findings hold to its table."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

from archsim.cli import main
from archsim.errors import UserError
from archsim.study import RESULT_COLUMNS, parse_study, plan_study, run_study
from archsim.study.report import findings

ROOT = Path(__file__).resolve().parent.parent

TINY = """\
name: tiny
systems: [pimgpt, neupims, duplex, t3]
models: [gpt3-small]
memory: [hbm2 x 1]
batch: [2]
input_len: 16
output_len: 4
tp: [1, 2]
options:
  neupims: {layers: 1}
  pimgpt: {decode_tokens: 1}
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("study")
    (d / "tiny.yaml").write_text(TINY)
    out = run_study(d / "tiny.yaml", d / "out", jobs=1, progress=False)
    return out, d


def test_every_point_runs_or_says_why(tiny):
    outcome, d = tiny
    r = pd.read_csv(d / "out" / "results.csv")
    assert list(r.columns) == list(RESULT_COLUMNS)
    assert len(r) == 8 and outcome.failed == 0
    assert set(r.status) <= {"ok", "refused"}
    assert (r[r.status == "refused"].reason.str.len() > 10).all()
    # PIM-GPT has no multi-device mode, T3 needs a collective: exactly those two are refused
    refused = set(zip(r[r.status == "refused"].system, r[r.status == "refused"].tp, strict=True))
    assert refused == {("pimgpt", 2), ("t3", 1)}
    ok = r[r.status == "ok"]
    assert (ok.decode_tokens_per_s > 0).all() and (ok.energy_per_token_j > 0).all()
    # the common schema: tokens/s is batch / step, energy is the sum of its parts
    assert ok.decode_tokens_per_s.to_numpy() == pytest.approx((ok.batch / ok.decode_step_s).to_numpy(), rel=1e-9)
    parts = ok[[f"energy_per_token_{p}_j" for p in ("dram", "pim", "compute", "io", "static")]].sum(axis=1)
    assert ok.energy_per_token_j.to_numpy() == pytest.approx(parts.to_numpy(), rel=1e-9)
    for s in ok.scope:
        sc = json.loads(s)
        assert sc["layers"] >= sc["layers_simulated"] >= 1 and isinstance(sc["not_modelled"], list)


def test_every_design_gets_the_same_memory(tiny):
    """Same stacks, channels and capacity at a point, each design in its PIM style."""
    from archsim.dram.spec import load_spec

    _, d = tiny
    r = pd.read_csv(d / "out" / "results.csv")
    caps = set()
    for row in r[r.status == "ok"].itertuples():
        cfg = json.loads(row.config)
        preset = cfg.get("preset") or cfg.get("memory_preset")
        channels = (cfg.get("channels") or (cfg.get("dram") or {}).get("org", {}).get("channels")
                    or load_spec(preset).channels * cfg.get("stacks", 1))
        spec = load_spec(preset, {"org.channels": channels})
        caps.add((spec.capacity_bytes, round(spec.peak_bw_bytes_per_s)))
    assert len(caps) == 1, caps


def test_the_report_states_only_what_its_table_holds(tiny):
    _, d = tiny
    r = pd.read_csv(d / "out" / "results.csv")
    text = (d / "out" / "README.md").read_text()
    for sentence in findings(r):
        assert sentence in text
    ok = r[r.status == "ok"]
    for (_m, _mem, _b, tp), g in ok.groupby(["model", "memory", "batch", "tp"]):
        best = g.sort_values("decode_tokens_per_s", ascending=False).iloc[0]
        lean = g.sort_values("energy_per_token_j").iloc[0]
        line = next(s for s in findings(r) if f", {tp} device(s):" in s)
        assert f"{best['design']} decodes fastest" in line and f"{lean['design']} spends the least" in line
    for f in ("tokens_per_s.png", "energy_per_token.png", "decode_step.png", "pareto.png"):
        assert (d / "out" / f).stat().st_size > 1000


def test_a_second_run_resumes_without_simulating(tiny):
    _, d = tiny
    first = (d / "out" / "results.csv").read_text()
    again = run_study(d / "tiny.yaml", d / "out", jobs=1, progress=False, report=False)
    assert again.results.to_csv(index=False) == first          # the stored points, byte for byte
    # each stored point records the digests of the input files it ran with, which the resume checked
    from archsim.sweep.store import ResultsStore, load_manifest

    store = ResultsStore(d / "out" / "points")
    recorded = {p["config"]["system"]: store.recorded_inputs(p["point_hash"])
                for p in load_manifest(store.root)["points"] if store.is_done(p["point_hash"])}
    assert "mappings/neupims.yaml" in recorded["neupims"] and "mappings/pimgpt.yaml" in recorded["pimgpt"]
    assert "archsim/presets/t3/t3_paper.yaml" in recorded["t3_decode"]


@pytest.mark.parametrize("text, where", [
    (TINY.replace("systems: [pimgpt", "systems: [upmem, pimgpt"), "systems: 'upmem': no study adapter"),
    (TINY.replace("hbm2 x 1", "hbm9 x 1"), "memory: 'hbm9 x 1': must be `<generation> x <stacks>`"),
    (TINY.replace("gpt3-small", "gpt9"), "models:"),
    (TINY.replace("batch: [2]", "batch: [0]"), "batch: must be a int >= 1"),
    (TINY + "flavour: spicy\n", "flavour: unknown key"),
    (TINY.replace("output_len: 4", "output_len: [4, 8]"), "one input_len and one output_len"),
    (TINY.replace("neupims: {layers: 1}", "bogus: {layers: 1}"), "options: must map designs"),
])
def test_a_bad_study_file_is_one_line_naming_the_key(text, where):
    with pytest.raises(UserError) as exc:
        parse_study(text, "s.yaml")
    assert where in str(exc.value) and str(exc.value).startswith("s.yaml"), str(exc.value)


def test_the_cli_plans_and_refuses_bad_input(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(TINY)
    assert main(["study", "s.yaml", "-o", "out", "--plan"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 8 and "refused: PIM-GPT has no multi-device mode" in out
    (tmp_path / "bad.yaml").write_text(TINY.replace("hbm2 x 1", "hbm2 x 0"))
    assert main(["study", "bad.yaml", "-o", "out2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("archsim: error: bad.yaml:") and err.count("\n") == 1


def test_features_a_design_does_not_model_are_refused_never_stood_in(tmp_path, monkeypatch):
    """Llama on PIM-GPT (GQA and the gated FFN modelled, issue 37) is refused only for its device count at tp 4,
    and planned at tp 1; Llama and Mixtral on NeuPIMs (GQA, the gated FFN, RMSNorm and MoE modelled, issue 37)
    and on T3 (tensor-parallel experts, issue 37) are planned at tp 4. A design that did not declare MoE (T3
    before issue 37's experts, re-created here) is refused with the feature named, not run dense."""
    study = parse_study(TINY.replace("models: [gpt3-small]", "models: [mixtral-8x7b, llama3-8b]")
                        .replace("hbm2 x 1", "hbm3 x 4").replace("tp: [1, 2]", "tp: [4]"), "s.yaml")
    got = {(p.intent.system, p.intent.model): p for p in plan_study(study, tmp_path)}
    assert got[("neupims", "mixtral-8x7b")].config is not None, got[("neupims", "mixtral-8x7b")].reason
    assert got[("t3", "mixtral-8x7b")].config is not None, got[("t3", "mixtral-8x7b")].reason
    assert "multi-device" in got[("pimgpt", "llama3-8b")].reason
    assert got[("neupims", "llama3-8b")].config is not None, got[("neupims", "llama3-8b")].reason
    one = parse_study(TINY.replace("models: [gpt3-small]", "models: [llama3-8b]").replace("hbm2 x 1", "hbm3 x 4")
                      .replace("tp: [1, 2]", "tp: [1]"), "s.yaml")
    pim = [p for p in plan_study(one, tmp_path) if p.intent.system == "pimgpt"]
    assert len(pim) == 1 and pim[0].config is not None and pim[0].config["model"] == "llama3-8b", pim[0].reason
    assert got[("duplex", "mixtral-8x7b")].config is not None        # Duplex models MoE and GQA
    assert got[("t3", "llama3-8b")].config is not None               # T3's decode sizes GQA and gated FFN
    assert not math.isnan(got[("duplex", "llama3-8b")].config["devices"])
    from archsim import registry

    monkeypatch.setattr(registry.get("t3_decode"), "features", frozenset({"gqa", "gated_ffn"}))
    dense_only = {(p.intent.system, p.intent.model): p for p in plan_study(study, tmp_path)}
    assert dense_only[("t3", "mixtral-8x7b")].config is None
    assert "mixture-of-experts FFN (8 experts, 2 per token): not modelled by T3" in \
        dense_only[("t3", "mixtral-8x7b")].reason


def test_neupims_request_trace_is_named_relative_to_the_working_directory(tmp_path, monkeypatch):
    """A study's NeuPIMs request trace inside the working directory is named relative to it (no machine's path in
    a committed results.csv; the same point hash in another clone), outside it by its absolute path."""
    from archsim.systems.neupims.study import trace

    it = next(i for i in parse_study(TINY, "tiny.yaml").intents if i.system == "neupims")
    monkeypatch.chdir(tmp_path)
    inside = trace(it, tmp_path / "out" / "inputs")
    assert inside == f"out/inputs/requests-{it.batch}x{it.input_len}+{it.output_len}.csv"
    assert (tmp_path / inside).is_file()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    outside = trace(it, tmp_path / "out" / "inputs")
    assert outside == str((tmp_path / inside).resolve())


def test_gqa_model_on_neupims_runs(tmp_path):
    """The smallest study of a GQA model on NeuPIMs (Llama-3-8B: 8 KV heads for 32 query heads, SwiGLU, RMSNorm;
    one layer simulated) runs to an ok row."""
    (tmp_path / "s.yaml").write_text(TINY.replace("models: [gpt3-small]", "models: [llama3-8b]")
                                     .replace("systems: [pimgpt, neupims, duplex, t3]", "systems: [neupims]")
                                     .replace("hbm2 x 1", "hbm3 x 4").replace("tp: [1, 2]", "tp: [4]")
                                     .replace("  pimgpt: {decode_tokens: 1}\n", ""))
    rows = run_study(tmp_path / "s.yaml", tmp_path / "out", jobs=1, progress=False, report=False).results
    assert list(rows["status"]) == ["ok"], rows["reason"].tolist()
    assert rows["decode_tokens_per_s"].iloc[0] > 0 and rows["model"].iloc[0] == "llama3-8b"


# -- each design's point at its paper's own configuration is its paper report's row ---------------------------
def _paper_point(system: str, model: str, batch: int, tp: int, input_len: int, output_len: int, **options):
    from archsim.study.plan import plan
    from archsim.study.spec import Intent, Memory

    p = plan(Intent(system, model, Memory("paper"), batch, input_len, output_len, tp, options), Path("."))
    assert p.config is not None, p.reason
    return p.config


def test_pimgpt_at_its_paper_configuration_is_its_report_row():
    """The report's main table: every model decoded over contexts 1..1024 on the paper's 8 GDDR6-AiM channels."""
    from archsim import api

    cfg = _paper_point("pimgpt", "gpt2-small", 1, 1, 0, 1024, decode_tokens=1024)
    row = pd.read_csv(ROOT / "reports" / "pimgpt" / "models.csv").set_index("model").loc["gpt2-small"]
    s = api.run(cfg).stats
    assert s["decode_step_s"] * 1e3 == pytest.approx(row["latency_per_token_ms"], rel=1e-12)


def test_duplex_at_its_paper_configuration_is_its_report_row():
    """The report's main comparison: (1024, 1024), batch 64, 128 requests, the paper's devices: the study's
    config is the report's (the devices given rather than looked up), so its throughput is the row's."""
    import importlib.util

    from archsim import registry

    spec = importlib.util.spec_from_file_location("dx_report", ROOT / "reports" / "duplex" / "make_report.py")
    rep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rep)
    over = dict(rep.SYSTEMS)["Duplex"]
    want = {"system": "duplex", "model": "mixtral-8x7b", "requests": 128, "input_len": 1024, "output_len": 1024,
            "max_batch": 64, **over}
    got = _paper_point("duplex", "mixtral-8x7b", 64, 4, 1024, 1024, requests=128)
    resolved = registry.resolve_config(dict(got))
    assert resolved == {**registry.resolve_config(dict(want)), "devices": 4}


@pytest.mark.slow
def test_duplex_paper_point_reproduces_the_committed_row():
    from archsim import api

    row = pd.read_csv(ROOT / "reports" / "duplex" / "comparison.csv")
    row = row[(row.model == "mixtral-8x7b") & (row.system == "Duplex")].iloc[0]
    s = api.run(_paper_point("duplex", "mixtral-8x7b", 64, 4, 1024, 1024, requests=128)).stats
    assert s["throughput_tokens_per_s"] == pytest.approx(row["tokens_per_s"], rel=1e-9)


def test_neupims_at_its_paper_configuration_is_its_report_row():
    """The report's grid (reports/neupims/throughput.csv): GPT3-7B on the paper's device (32 HBM2 channels with
    dual row buffers), TP 4, ShareGPT batches, two layers simulated. The study's point at the paper's memory with
    the paper's dataset resolves to the very config of the report's row, so the committed run (named by its
    config's content, reports/neupims/run_cache.py) is that point's run, and its throughput is the row's."""
    from archsim import registry
    from archsim.results import load_result

    got = registry.resolve_config(dict(_paper_point("neupims", "gpt3-7b", 256, 4, 0, 1, dataset="sharegpt",
                                                    layers=2)))
    want = registry.resolve_config({"system": "neupims", "model": "gpt3-7b", "dataset": "sharegpt", "batch": 256,
                                    "layers": 2})
    assert got == want
    sys.path.insert(0, str(ROOT / "reports" / "neupims"))
    import run_cache  # the report names a run by its config's content

    run = run_cache.run_path(ROOT / "reports" / "neupims" / "runs", {"system": "neupims", "model": "gpt3-7b",
                                                                     "dataset": "sharegpt", "batch": 256, "layers": 2})
    assert load_result(run).manifest["config"] == got
    rows = pd.read_csv(ROOT / "reports" / "neupims" / "throughput.csv")
    row = rows[(rows.system == "NeuPIMs") & (rows.model == "gpt3-7b") & (rows.dataset == "sharegpt")
               & (rows.batch == 256)]
    assert len(row) == 1
    # the same simulation: the simulated layers' tokens/s are the row's
    assert row.iloc[0]["simulated_tokens_per_s"] == pytest.approx(load_result(run).stats["tokens_per_s"], rel=1e-12)
    # and the whole model's: the system's common metrics extrapolate with NeuPIMs' stage formula, as the report
    # does (archsim.systems.neupims.modes.whole_model_cycles; the point re-simulated, ~5 s)
    from archsim import api

    point = api.run(got)
    assert point.stats["scope"]["extrapolation"].startswith("NeuPIMs' stage formula")
    assert point.stats["decode_tokens_per_s"] == pytest.approx(row.iloc[0]["tokens_per_s"], rel=1e-9)


def test_t3_decode_at_its_paper_configuration_simulates_the_report_sublayer():
    """T3's report times one sublayer of 1024 tokens on the paper's device; a decode step of 1024 requests runs
    that very simulation for its out-projection: its time is the report's T3-MCA row."""
    from archsim import api

    cfg = _paper_point("t3", "mega-gpt2", 1024, 8, 0, 2)
    row = pd.read_csv(ROOT / "reports" / "t3" / "results.csv")
    row = row[(row.model == "mega-gpt2") & (row.tp == 8) & (row.sublayer == "op_fwd")].iloc[0]
    res = api.run(cfg)
    op = res.df.set_index("part").loc["op_fwd"]
    assert op["seconds"] * 1e6 == pytest.approx(row["sequential_us"] / row["speedup_t3_mca"], rel=1e-9)


def test_the_committed_study_is_the_shipped_study_file_planned_today(tmp_path):
    """reports/which_pim was run from studies/which_pim.yaml: one row per planned point, the same points refused
    (with today's reasons) and every other one ran; a design that learns a feature must re-run the study."""
    from archsim.study.spec import load_study

    study = load_study(ROOT / "studies" / "which_pim.yaml")
    planned = {(p.intent.system, p.intent.model, p.intent.memory.label, p.intent.batch, p.intent.tp): p
               for p in plan_study(study, tmp_path)}
    rows = pd.read_csv(ROOT / "reports" / "which_pim" / "results.csv")
    assert set(RESULT_COLUMNS) <= set(rows.columns)
    assert len(rows) == len(planned)
    for r in rows.itertuples():
        p = planned[(r.system, r.model, r.memory, r.batch, r.tp)]
        if p.config is None:
            assert r.status == "refused" and r.reason == p.reason, (r.system, r.model, r.reason, p.reason)
        else:
            assert r.status == "ok" and r.decode_tokens_per_s > 0 and r.energy_per_token_j > 0, r


def test_figures_draw_a_panel_whose_points_are_all_refused(tmp_path):
    """A study whose every design refuses some (batch, devices) panel (T3's Mixtral at tp 1: capacity) still
    draws its figures: the refused panel shows its x marks on a log axis with a positive range."""
    from archsim.study.report import figures

    base = {"system": "t3", "design": "T3", "model": "mixtral-8x7b", "memory": "hbm2 x 4", "batch": 64}
    ok = {**base, "tp": 4, "status": "ok", "decode_tokens_per_s": 1900.0, "energy_per_token_j": 0.06,
          "decode_step_s": 0.033}
    refused = {**base, "tp": 1, "status": "refused", "decode_tokens_per_s": float("nan"),
               "energy_per_token_j": float("nan"), "decode_step_s": float("nan")}
    names = figures(pd.DataFrame([ok, refused]), tmp_path)
    assert names == ["tokens_per_s.png", "energy_per_token.png", "decode_step.png", "pareto.png"]
    assert all((tmp_path / n).stat().st_size > 0 for n in names)
