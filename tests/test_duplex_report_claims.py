"""reports/duplex/README.md's issue-34 sentences held to the report's own tables (vs_llmsimulator.csv,
comparison.csv, interference.csv, llmsimulator_runs.csv): every number or direction the prose states is
re-derived here from the CSV it comes from."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

REPORT = Path(__file__).resolve().parent.parent / "reports" / "duplex"
MODELS = ["mixtral-8x7b", "glam", "grok-1", "llama3-70b", "opt-66b"]
MOE = ["mixtral-8x7b", "glam", "grok-1"]
VARIANTS = ["Duplex", "Duplex+PE", "Duplex+PE+ET"]


@pytest.fixture(scope="module")
def readme() -> str:
    return (REPORT / "README.md").read_text()


@pytest.fixture(scope="module")
def tp() -> pd.DataFrame:
    return pd.read_csv(REPORT / "comparison.csv").pivot(index="model", columns="system", values="tokens_per_s")


@pytest.fixture(scope="module")
def vs() -> pd.DataFrame:
    return pd.read_csv(REPORT / "vs_llmsimulator.csv")


def test_both_command_path_readings_are_run_for_every_model_and_variant(tp):
    for m in MODELS:
        for v in VARIANTS:
            assert tp.loc[m, v] > 0 and tp.loc[m, f"{v} (shared column bus)"] > 0


def test_pe_over_plain_duplex_sentence_matches_the_table(readme, tp):
    for label, sfx in (("own path", ""), ("shared column bus", " (shared column bus)")):
        m = re.search(rf"\+PE over plain Duplex, same command path:.*?{label} ([^;(]+)", readme, re.S)
        assert m, label
        stated = dict(re.findall(r"([\w.-]+) ([\d.]+)x", m.group(1)))
        assert set(stated) == set(MOE)
        for model, v in stated.items():
            assert float(v) == pytest.approx(tp.loc[model, "Duplex+PE" + sfx] / tp.loc[model, "Duplex" + sfx],
                                             abs=5e-4)


def test_the_aware_split_is_never_below_plain_duplex_and_the_readme_says_so(readme, tp):
    """Done-when: +PE >= plain Duplex on every model, with the interference-aware split, on both paths."""
    ratios = [tp.loc[m, "Duplex+PE" + s] / tp.loc[m, "Duplex" + s] for m in MODELS
              for s in ("", " (shared column bus)")]
    assert min(ratios) >= 1 - 1e-9, ratios
    assert re.search(r"\+PE is at least plain Duplex on every model on both command paths:\s+yes", readme)
    lost = [m for m in MODELS if min(tp.loc[m, "Duplex+PE (table split)"] / tp.loc[m, "Duplex"],
                                     tp.loc[m, "Duplex+PE (shared column bus, table split)"]
                                     / tp.loc[m, "Duplex (shared column bus)"]) < 1]
    m = re.search(r"The lookup-table split falls below plain\s+Duplex on: ([^.]+)\.", readme)
    assert m and [x.strip() for x in m.group(1).split(",")] == (lost or ["no model"])


def test_prefill_attention_slowdown_sentence_matches_interference_csv(readme):
    inter = pd.read_csv(REPORT / "interference.csv")
    att = inter[inter.pair == "attention"]
    own, shared = att[att.system.isin(VARIANTS)], att[att.system == "Duplex (shared column bus)"]
    m = re.search(r"xPU slow-down ([\d.]+)-([\d.]+)x\s+on its own path, ([\d.]+)-([\d.]+)x on the shared", readme)
    assert m
    got = [float(x) for x in m.groups()]
    want = [own.xpu_slowdown.min(), own.xpu_slowdown.max(), shared.xpu_slowdown.min(), shared.xpu_slowdown.max()]
    assert got == pytest.approx(want, abs=5e-3)
    assert want[2] > want[1]          # the shared bus slows prefill attention more than the own path


def test_vs_llmsimulator_has_the_papers_models_and_both_modes(vs):
    runs = pd.read_csv(REPORT / "llmsimulator_runs.csv")
    assert set(vs.fork) <= set(runs.source) and {"helios"} <= set(vs.fork)
    assert set(MODELS) - {"grok-1"} <= set(vs.model)
    for r in vs.itertuples():
        ref = runs[(runs.model == r.model) & (runs.source == r.fork) & (runs.input_len == 1024)
                   & (runs.output_len == 1024) & (runs.batch == 64)]
        assert r.llmsim_tokens_per_s in set(ref.tokens_per_s)
        assert r.roofline_over_llmsim == pytest.approx(r.archsim_roofline_tokens_per_s / r.llmsim_tokens_per_s)
        assert r.engine_over_llmsim == pytest.approx(r.archsim_engine_tokens_per_s / r.llmsim_tokens_per_s)
        # the two causes multiply to engine / roofline
        assert r.cause_logic_pim_engine_timing * r.cause_interference == pytest.approx(
            r.archsim_engine_tokens_per_s / r.archsim_roofline_tokens_per_s, rel=1e-9)
        assert r.roofline_within_5pct == (abs(r.roofline_over_llmsim - 1) <= 0.05)


def test_the_within_5pct_sentence_counts_the_table(readme, vs):
    m = re.search(r"within 5% of LLMSimulator on (\d+) of (\d+) rows", readme)
    assert m and (int(m.group(1)), int(m.group(2))) == (int(vs.roofline_within_5pct.sum()), len(vs))
    for r in vs[~vs.roofline_within_5pct].itertuples():
        assert f"{r.model} {r.system} ({r.fork}) {r.roofline_over_llmsim:.3f}" in readme
