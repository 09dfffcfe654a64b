"""Issue #8.6: report figures a reader can trust: energy bars with background energy, speed-ups on a linear
axis from 0, timelines with a legend, colours that do not repeat, categories as bars, and a results table
with tokens/s, energy/token and bandwidth."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from archsim.report import load_inputs, make_report
from archsim.report.figures import (
    _param_figure,
    energy_figures,
    palette,
    speedup_figures,
    timeline_figures,
)
from archsim.report.inputs import Source


def _run_json(path: Path, stats: dict, table: list[dict], tables: dict | None = None) -> Path:
    body = {"stats": stats, "table": table, "manifest": {"config_hash": "x", "seed": 0}}
    if tables:
        body["tables"] = tables
    path.write_text(json.dumps(body))
    return path


def _pimgpt_like(tmp_path: Path) -> Path:
    # As PIM-GPT writes it: operators own the dynamic energy; background power is only in the stats.
    comps = {"dram_array": 2e-3, "pim_mac": 1e-4, "io": 1e-4, "asic": 1e-5, "background": 5e-4}
    table = [{"op": "qkv", "seconds": 1e-3, "energy_dram_array_pj": 1e9 * 4, "energy_pim_mac_pj": 2e8,
              "energy_io_pj": 2e8, "energy_asic_pj": 2e7}]
    return _run_json(tmp_path / "pim.json", {"tokens": 2, "tokens_per_s": 500.0, "latency_per_token_s": 2e-3,
                                             "energy_per_token_j": sum(comps.values()),
                                             "energy_per_token_by_component_j": comps, "speedup_vs_t4": 3.5,
                                             "speedup_vs_xeon": 40.0}, table)


def test_energy_includes_background(tmp_path):
    figs, _ = energy_figures(load_inputs([_pimgpt_like(tmp_path)]))
    data = figs[0].data
    assert data.loc[0, "background_energy_j"] == pytest.approx(5e-4)
    assert data.drop(columns="run").sum(axis=1)[0] == pytest.approx(2.71e-3)
    ax = figs[0].figure.axes[0]
    assert "per token" in ax.get_xlabel() and ax.get_xlim()[0] == 0


def test_energy_components_short_of_the_total_are_shown(tmp_path):
    # A DRAM-style run whose table has no background column but whose stats state the total.
    path = _run_json(tmp_path / "d.json", {"energy_total_pj": 10e6, "bandwidth_GBps": 20.0},
                     [{"channel": 0, "energy_read_pj": 3e6, "energy_write_pj": 2e6}])
    data = energy_figures(load_inputs([path]))[0][0].data
    assert data.loc[0, "unattributed_energy_j"] == pytest.approx(5e-6)


def test_mixed_energy_bases_use_whole_runs(tmp_path):
    other = _run_json(tmp_path / "d.json", {"energy_total_pj": 1e9}, [{"channel": 0, "energy_read_pj": 1e9}])
    data = energy_figures(load_inputs([_pimgpt_like(tmp_path), other]))[0][0].data
    assert data.set_index("run").loc["pim", "background_energy_j"] == pytest.approx(2 * 5e-4)   # x 2 tokens


def test_speedups_linear_from_zero(tmp_path):
    figs, _ = speedup_figures(load_inputs([_pimgpt_like(tmp_path)]))
    ax = figs[0].figure.axes[0]
    assert ax.get_xscale() == "linear" and ax.get_xlim()[0] == 0 and ax.get_xlim()[1] >= 40
    huge = _run_json(tmp_path / "h.json", {"speedup_vs_a": 2.0, "speedup_vs_b": 5000.0}, [])
    ax = speedup_figures(load_inputs([huge]))[0][0].figure.axes[0]
    assert ax.get_xscale() == "log" and "log scale" in ax.get_xlabel()


def test_timeline_has_legend_and_distinct_colours(tmp_path):
    rows = [{"unit": "pim" if i % 2 else "asic", "op": f"op{i}", "start_s": i * 1e-6, "end_s": (i + 0.9) * 1e-6}
            for i in range(25)]
    path = _run_json(tmp_path / "t.json", {"seconds": 1.0}, [], {"timeline": rows})
    fig = timeline_figures(load_inputs([path]))[0][0].figure
    assert fig.legends, "the timeline needs a legend"
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert len(labels) == 20 and labels[-1] == "other ops"
    colours = {to_rgba(h.get_facecolor()) for h in fig.legends[0].legend_handles[:-1]}
    assert len(colours) == 19 and to_rgba("white") not in colours    # "other ops" is drawn hatched
    layered = [{"unit": "pim", "op": f"L{i}.{op}", "start_s": i, "end_s": i + 0.5}
               for i in range(30) for op in ("qkv", "ffn1")]
    path = _run_json(tmp_path / "l.json", {"seconds": 1.0}, [], {"timeline": layered})
    fig = timeline_figures(load_inputs([path]))[0][0].figure
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["qkv", "ffn1"]   # roles, not 60 layer ops


@pytest.mark.parametrize("n", [1, 10, 11, 20, 21, 40])
def test_palette_does_not_repeat(n):
    assert len({to_rgba(c) for c in palette(n)}) == n


def _sweep_source(n_lines: int = 12) -> Source:
    models = ["gpt2-small", "gpt2-xl", "gpt3-xl"]
    rows = [{"run": f"m={m}, c={c}", "model": m, "channels": c, "seconds": 1.0 + i + c, "tokens_per_s": 10.0 * c}
            for c in range(1, n_lines + 1) for i, m in enumerate(models)]
    stats = pd.DataFrame(rows)
    return Source("sweep", Path("x"), "s", stats, pd.DataFrame(), axis_keys=["model", "channels"], n_points=len(rows))


def test_categorical_axis_is_bars_not_lines():
    fig = _param_figure(_sweep_source(), "model", ["seconds", "tokens_per_s"]).figure
    for ax in fig.axes:
        lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 1 and ln.get_linestyle() not in ("None", "none")]
        assert not lines, "categories must not be joined by lines"
        bars = [p for p in ax.patches if isinstance(p, Rectangle)]
        assert len(bars) == 3 * 12
        assert len({to_rgba(b.get_facecolor()) for b in bars}) == 12      # 12 series, 12 colours
    numeric = _param_figure(_sweep_source(3), "channels", ["seconds"]).figure.axes[0]
    assert [ln for ln in numeric.get_lines() if isinstance(ln, Line2D) and len(ln.get_xdata()) == 3]


def test_results_table_headline_columns(tmp_path):
    stats = {f"stat_{i}": float(i) for i in range(12)}
    pim = _run_json(tmp_path / "pim.json", {**stats, "tokens_per_s": 500.0, "energy_per_token_j": 2e-3}, [])
    dram = _run_json(tmp_path / "dram.json", {**stats, "bandwidth_GBps": 21.5}, [])
    out = make_report([pim, dram], tmp_path / "rep")
    md = out.markdown.read_text()
    headers = [line.split(" | ") for line in md.splitlines() if line.startswith("| run | ")]
    assert headers[0][1:3] == ["tokens / s", "energy per token"]    # the PIM-GPT-style run, labelled as the console does
    assert headers[1][1] == "bandwidth"                                     # the DRAM-style run
    assert not np.isnan(pd.read_csv(tmp_path / "rep" / "runs.csv")["bandwidth_GBps"]).all()
