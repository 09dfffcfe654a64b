"""archsim.progress: the status line of long runs (issue 27 item 7): what it shows, and when it is drawn."""
from __future__ import annotations

import io
import time

from archsim import progress


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_line_shows_done_total_simulated_time_and_eta():
    with progress.live("neupims:", enabled=False):
        progress.report("requests", 4, 16, simulated_s=0.0421, detail="120 iterations")
        text = progress.line("neupims:", 75.0, width=200)
    assert "4/16 requests" in text and "120 iterations" in text and "simulated 42.1 ms" in text, text
    assert "1:15 elapsed" in text and "ETA 0:00" in text, text


def test_quiet_under_ci_no_tty_or_quiet(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    assert progress.wanted(stream=Tty())
    assert not progress.wanted(quiet=True, stream=Tty())
    assert not progress.wanted(stream=io.StringIO())
    monkeypatch.setenv("CI", "true")
    assert not progress.wanted(stream=Tty())


def test_drawn_only_for_long_runs_and_cleared(monkeypatch):
    monkeypatch.setattr(progress, "DELAY_S", 0.05)
    monkeypatch.setattr(progress, "EVERY_S", 0.02)
    out = Tty()
    with progress.live("run:", enabled=True, stream=out):
        progress.report("requests", 1, 2, simulated_s=1e-3)
        time.sleep(0.3)
    text = out.getvalue()
    assert "1/2 requests" in text and text.endswith("\r"), text
    short = Tty()
    monkeypatch.setattr(progress, "DELAY_S", 5.0)
    with progress.live("run:", enabled=True, stream=short):
        pass
    assert short.getvalue() == ""


def test_serving_reports_requests_done():
    from archsim.workload.serving import ContinuousBatcher, Request

    reqs = [Request(i, 0.0, 4, 3) for i in range(5)]
    with progress.live("x", enabled=False):
        ContinuousBatcher(2, 10**9, 10, lambda batch: 1e-3).run(reqs)
        text = progress.line("x", 1.0)
    assert "5/5 requests" in text and "iterations" in text, text


def test_duplex_serving_reports_requests_done():
    from archsim.systems.duplex.serving import DuplexBatcher
    from archsim.workload.serving import Request

    reqs = [Request(i, 0.0, 4, 3) for i in range(6)]
    with progress.live("x", enabled=False):
        DuplexBatcher(2, 10**9, 10, lambda batch: 1e-3).run(reqs)
        text = progress.line("x", 1.0)
    assert "6/6 requests" in text and "iterations" in text, text


def test_pimgpt_reports_tokens_and_simulated_time():
    from archsim.systems.pimgpt.system import run_pimgpt

    with progress.live("pimgpt", enabled=False):
        res = run_pimgpt("gpt2-small", tokens=2, baselines=[])
        text = progress.line("pimgpt", 1.0, width=200)
    assert "2/2 tokens" in text and "simulated" in text, text
    assert res.stats["tokens"] == 2


def test_neupims_iteration_reports_layers_done_and_simulated_time():
    # A full-model NeuPIMs iteration runs for a minute: its line counts layers (over every sample) as they end,
    # with sub-batch interleaving too (where a layer ends inside a stage pair).
    from archsim.api import run

    for sub_batch in (False, True):
        with progress.live("neupims", enabled=False):
            res = run({"system": "neupims", "model": "gpt3-7b", "batch": 4, "layers": 2, "samples": 2,
                              "sub_batch": sub_batch})
            text = progress.line("neupims", 1.0, width=200)
        assert "4/4 layers" in text and "simulated" in text and "sample 2 of 2" in text, (sub_batch, text)
        assert res.stats["tokens_per_s"] > 0
