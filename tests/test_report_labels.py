"""Generic report figures (issue 27 item 12): axis labels in words with units, readable log ticks, one colour
per component in every figure."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure

from archsim.report.figures import axis_label, readable_log_axis, tick_text
from archsim.report.palette import COMPONENTS, color_of

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("col, text", [
    ("latency_per_token_s", "latency per token (s)"),
    ("bandwidth_pct_of_peak", "bandwidth (% of peak)"),
    ("speedup_vs_8ch", "speedup vs 8ch (x)"),
    ("energy_per_token_j", "energy per token (J)"),
    ("hw.channels", "hw channels"),
    ("read_latency_mean_cycles", "read latency mean (cycles)"),
])
def test_axis_labels_are_words_with_units(col, text):
    assert axis_label(col) == text
    assert axis_label("latency_per_token_s", "m") == "latency per token (ms)"


def test_log_ticks_are_plain_numbers():
    fig = Figure()
    ax = fig.add_subplot()
    ax.plot([20, 60], [3e9, 4e11])
    ax.set_xscale("log")
    ax.set_yscale("log")
    readable_log_axis(ax, "x")
    readable_log_axis(ax, "y")
    fig.canvas.draw()
    xs = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    ys = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert xs and ys and not any("10^" in t or "times" in t or "e+" in t for t in xs + ys), (xs, ys)
    assert "50" in xs and "100 G" in ys, (xs, ys)
    assert tick_text(0.25) == "0.25" and tick_text(2e12) == "2 T"


def test_component_colours_are_fixed_and_distinct():
    assert color_of("read") == color_of("read_energy_pj") == color_of("Read") == color_of("energy_read_pj")
    assert color_of("dram_refresh") == color_of("refresh")
    assert color_of("some new unit") == color_of("some new unit")          # stable for unknown names too
    aliases = ("act", "xpu", "allreduce", "t3", "sequential", "bank_pim", "buffer", "dram_array", "duplex", "t4", "xeon",
               "cpu")      # another name of a component (dram_array: act_pre; duplex: logic_pim; t4: gpu; xeon: host)
    named = {k: v for k, v in COMPONENTS.items() if k not in aliases}
    dup = [c for c in set(named.values()) if list(named.values()).count(c) > 1]
    assert not dup, f"components sharing a colour: {[k for k, v in named.items() if v in dup]}"
    assert len({color_of(n) for n in ("read", "write", "act_pre", "refresh", "background")}) == 5
    assert np.all([isinstance(color_of(n), str) for n in ("pim", "npu", "asic")])


# reports whose figures take every component colour from archsim.report.palette: every report with figures
PALETTE_SCRIPTS = ("dram_trace_cycles/make_report.py", "duplex/make_report.py", "pimgpt/make_report.py",
                   "t3/make_report.py", "t3/experiments.py", "dram_fidelity/make_report.py", "neupims/make_report.py")
_LITERAL_COLOUR = re.compile(r"""colou?rs?\s*=\s*[\[{]?\s*["'](?!black["']|k["']|white["'])[^"']+["']""")


@pytest.mark.parametrize("script", PALETTE_SCRIPTS)
def test_report_scripts_take_component_colours_from_the_palette(script):
    """Issue 27 item 12: one colour per component in every report. A figure script names no colour of its
    own (black reference lines and white text on a bar aside): it asks archsim.report.palette.color_of for the component's."""
    text = (ROOT / "reports" / script).read_text()
    literal = [m.group(0) for m in _LITERAL_COLOUR.finditer(text)]
    assert not literal, f"reports/{script} names colours itself: {literal}"
    assert "color_of(" in text, f"reports/{script} does not use archsim.report.palette"


def test_pimgpt_figures_redraw_from_the_committed_tables(tmp_path):
    import importlib.util
    import shutil

    for name in ("models", "breakdown_parts", "breakdown_runs"):
        shutil.copy(ROOT / "reports" / "pimgpt" / f"{name}.csv", tmp_path)
    spec = importlib.util.spec_from_file_location("pimgpt_report", ROOT / "reports" / "pimgpt" / "make_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.redraw_figures(1024, tmp_path)
    assert all((tmp_path / f"{f}.png").stat().st_size > 10_000 for f in ("speedup", "energy", "breakdown"))
    assert module.part_component("weight GEMVs (PIM)") == "weight_gemv"
    assert module.part_component("ASIC ops, serialised") == "asic"
