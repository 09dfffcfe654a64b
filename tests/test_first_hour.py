"""The first hour (issue 35): the set-up says what it waits for at least every 10 s, a compile shows a progress
line on a terminal with an honest expected time, and the summaries and reports a newcomer reads first say what
bounds them, in the units the console uses."""
from __future__ import annotations

import fcntl
import io
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from archsim import heartbeat, progress, warm
from archsim.engine import compiling

ROOT = Path(__file__).resolve().parent.parent


def test_heartbeat_says_what_a_slow_step_waits_for_at_every_beat():
    """A fake slow step (1.2 s, beats of 0.25 s): a line at the start, one per beat while it runs, one at the end;
    the step's exit code passes through."""
    out = io.StringIO()
    t0 = time.monotonic()
    code = heartbeat.run("sleeping for the test", [sys.executable, "-c", "import time; time.sleep(1.2)"],
                         every=0.25, out=out)
    lines = out.getvalue().splitlines()
    assert code == 0 and time.monotonic() - t0 >= 1.2
    assert lines[0] == "setup: sleeping for the test ..." and lines[-1].startswith("setup: sleeping for the test: done")
    beats = [line for line in lines if line.startswith("setup: still sleeping for the test (")]
    assert len(beats) >= 3, lines
    assert heartbeat.run("failing", [sys.executable, "-c", "raise SystemExit(3)"], every=1, out=io.StringIO()) == 3


def test_every_install_step_of_make_setup_runs_under_the_heartbeat(tmp_path):
    """`make -n` prints the set-up's commands: every one that installs or makes the venv is wrapped, and the
    wrapper's beat is at most 10 s (no step of `make setup` stays silent longer)."""
    venv = tmp_path / "venv"
    proc = subprocess.run(["make", "-n", "-B", "setup", f"{venv}/.installed-test", f"VENV={venv}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout.replace("\\\n", " ")
    steps = [line for line in text.splitlines() if re.search(r"pip install|-m venv|uv pip", line)]
    assert len(steps) >= 5, text
    unwrapped = [line for line in steps if "-m archsim.heartbeat" not in line]
    assert not unwrapped, f"install steps without the heartbeat: {unwrapped}"
    assert heartbeat.EVERY_S <= 10 and warm.HEARTBEAT_S <= 10


def test_waiting_for_the_warm_up_says_so_while_it_waits(tmp_path, monkeypatch, capsys):
    """`make demo` waits for the background compile: while another process holds the lock, a line per beat."""
    monkeypatch.setattr(warm, "HEARTBEAT_S", 0.2)
    lock = tmp_path / "warm.lock"
    holder = open(lock, "a")      # noqa: SIM115 (held across the thread below)
    fcntl.flock(holder, fcntl.LOCK_EX)
    threading.Timer(0.9, holder.close).start()      # closing releases the lock
    with open(lock, "a") as fh:
        warm._lock_saying(fh, "waiting for the test's compile")
    lines = [line for line in capsys.readouterr().err.splitlines() if "waiting for the test's compile" in line]
    assert len(lines) >= 3, lines


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_cold_compile_shows_a_progress_line_on_a_terminal(monkeypatch):
    monkeypatch.setattr(compiling, "TICK_S", 0.1)
    monkeypatch.delenv("CI", raising=False)
    term = _Terminal()
    with compiling.ticker("the test kernel", stream=term):
        time.sleep(0.45)
    text = term.getvalue()
    assert "compiling the test kernel:" in text and "s elapsed" in text and "s of CPU" in text
    assert compiling.COMPILE_RANGE in text, text
    assert text.endswith("\r") and not text.rsplit("\r", 2)[-2].strip(), text    # cleared at the end
    monkeypatch.setenv("CI", "true")          # none under CI (nor --quiet, nor without a terminal)
    quiet = _Terminal()
    with compiling.ticker("the test kernel", stream=quiet):
        time.sleep(0.25)
    assert quiet.getvalue() == ""


def test_the_run_progress_line_waits_while_a_compile_has_the_terminal(monkeypatch):
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    monkeypatch.setattr(progress, "EVERY_S", 0.05)
    term = _Terminal()
    with progress.live("run:", enabled=True, stream=term):
        time.sleep(0.2)
        drawn = len(term.getvalue())
        with progress.held():
            time.sleep(0.1)             # (a draw under way when the hold began may finish)
            before = len(term.getvalue())
            time.sleep(0.3)
            assert len(term.getvalue()) == before, "the run's line was drawn over the compile's"
        time.sleep(0.2)
    assert drawn > 0 and len(term.getvalue()) > before     # drawn before and after the hold


def test_the_compile_notice_states_the_measured_range():
    """The notice's figures are the measured ones (docs/performance.md, cold start), idle and loaded."""
    assert compiling.COMPILE_RANGE in compiling.COMPILE_EXPECTED
    readme = (ROOT / "README.md").read_text()
    assert compiling.COMPILE_RANGE in readme, "README must state the range the notice states"


def _pimgpt_result(tags: list[str], tokens: int = 64, context_start: int = 0):
    from archsim.results import Result

    stats = {"model": "gpt2-small", "channels": 8, "banks_per_channel": 16, "preset": "GDDR6_AiM_16Gbps",
             "asic_clock_hz": 1e9, "tokens": tokens, "latency_per_token_s": 1.4e-4, "latency_first_token_s": 1.4e-4,
             "latency_last_token_s": 1.4e-4, "tokens_per_s": 7000.0, "energy_per_token_j": 1e-3,
             "energy_per_token_by_component_j": {"dram_array": 1e-3}, "row_hit_rate": 0.98, "asic_share": 0.08,
             "sim_wall_s": 1.0, "sim_commands_simulated": 10, "sim_memo_hits": 0, "sim_memo_misses": 0}
    for i, tag in enumerate(tags):
        stats[f"speedup_vs_{tag}"] = 10.0 + i
        stats[f"energy_efficiency_vs_{tag}"] = 20.0 + i
    df = pd.DataFrame([{"op": "qkv", "kind": "gemv", "seconds": 1e-3, "seconds_per_token": 3.35e-5, "share": 0.2,
                        "pim_cycles": 10, "cycles": 10, "row_hit_rate": 0.98}])
    return Result(stats=stats, df=df, manifest={"config": {"context_start": context_start}})


@pytest.mark.parametrize("tags", [["t4", "t4_graphs", "xeon_gold_6154"], ["t4_graphs"], ["a100_40gb", "t4"]])
def test_every_requested_baseline_is_printed_from_the_data(tags, capsys):
    from archsim.systems.pimgpt.summary import print_pimgpt

    print_pimgpt(_pimgpt_result(tags, tokens=64, context_start=100))
    out = capsys.readouterr().out
    shown = re.findall(r"^  vs (\S+) ", out, flags=re.M)
    assert shown == tags, out
    assert out.count("(contexts 101-164)") == len(tags) + 1 and "note: speed-ups are of this run's 64 decode steps" in out
    assert "33.5 µs" in out and "ms/token" not in out      # the per-op table in the console's units


def test_a_run_without_baselines_has_no_speed_up_note(capsys):
    from archsim.systems.pimgpt.summary import print_pimgpt

    print_pimgpt(_pimgpt_result([]))
    out = capsys.readouterr().out
    assert " vs " not in out and "speed-ups" not in out


def _trace_stats(bandwidth_gbps: float, offered_gbps: float = 32.0, peak_gbps: float = 256.0) -> dict:
    return {"preset": "HBM2_2Gbps_PC", "channels": 8, "mapping": None, "cycles": 1000, "seconds": 1e-6,
            "tCK_ps": 1000.0, "requests": 1000, "reads": 800, "writes": 200, "bytes": 32000,
            "bandwidth_GBps": bandwidth_gbps, "peak_bandwidth_GBps": peak_gbps,
            "bandwidth_pct_of_peak": 100 * bandwidth_gbps / peak_gbps, "frontend_width": 1,
            "frontend_bandwidth_GBps": offered_gbps, "row_hits": 1, "row_misses": 0, "row_conflicts": 0,
            "row_hit_rate": 1.0, "read_latency_mean_cycles": 1.0, "read_latency_p50_cycles": 1.0,
            "read_latency_p99_cycles": 1.0, "commands": {"RD": 1}, "energy_pj": {"read": 1.0},
            "energy_total_pj": 1.0, "energy_pj_per_bit": 1.0, "wall_s": 0.1}


@pytest.mark.parametrize("bandwidth, offered, peak, expect", [
    (26.7, 32.0, 256.0, "the bound here"),         # a stream on HBM2: the front end is what limits it
    (10.0, 32.0, 256.0, "this run used 31% of it"),  # a random trace: the banks are, not the front end
    (10.9, 40.96, 25.6, None),                     # DDR4: one request per cycle offers more than the peak
])
def test_the_trace_summary_says_when_the_front_end_bounds_it(bandwidth, offered, peak, expect, capsys):
    from archsim.systems.dram_trace.summary import print_trace_summary

    print_trace_summary(_trace_stats(bandwidth, offered, peak), "synthetic:stream:1000")
    rows = [line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("front end")]
    if expect is None:
        assert not rows
    else:
        assert len(rows) == 1 and expect in rows[0] and "1 request of 32 B per cycle" in rows[0], rows
        if expect != "the bound here":
            assert "the bound here" not in rows[0]


def test_report_tables_use_the_console_units():
    from archsim.report.document import Table, to_markdown

    df = pd.DataFrame([{"run": "a", "latency_per_token_s": 0.0001411, "row_hit_rate": 0.9817, "tokens_per_s": 12410.0,
                        "npu_util": 0.42, "utilisation": 0.00012, "cycles": 18059356, "speedup": 3.2},
                       {"run": "b", "latency_per_token_s": 0.0335, "row_hit_rate": 0.5, "tokens_per_s": 7035.0,
                        "npu_util": 0.1, "utilisation": 0.5, "cycles": 12, "speedup": 1.0}])
    md = to_markdown([Table(df)])
    head, _, row_a, row_b = md.splitlines()[:4]
    assert head == ("| run | latency per token | row hit rate | tokens / s | npu util | utilisation | cycles | speedup |")
    assert row_a == "| a | 141.1 µs | 98.2 % | 12,410.0 | 42.0 % | 0.012 % | 18,059,356 cycles | 3.20x |"
    assert row_b == "| b | 33.5 ms | 50.0 % | 7,035.0 | 10.0 % | 50.0 % | 12 cycles | 1.00x |"


def test_the_timeline_figure_says_which_step_it_shows(tmp_path):
    from archsim.report.figures import timeline_figures
    from archsim.report.inputs import Source

    table = pd.DataFrame([{"run": "r", "unit": "PIM", "op": "qkv", "start_s": 0.0, "end_s": 1e-6},
                          {"run": "r", "unit": "ASIC", "op": "ln1", "start_s": 1e-6, "end_s": 2e-6}])
    stats = pd.DataFrame([{"run": "r", "timeline_of": "decode step 64 of 64 (context 64)"}])
    figs, _ = timeline_figures([Source("run", tmp_path / "r.json", "r", stats, table)])
    assert "decode step 64 of 64 (context 64) of the single run" in figs[0].caption, figs[0].caption
    assert "decode step 64 of 64" in figs[0].figure.axes[0].get_title()

