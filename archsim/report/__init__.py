"""Reports: tables and plots (Markdown + self-contained HTML) from sweep results and single runs.

    from archsim.report import make_report
    make_report(["results/my-sweep", "run.json"], "reports/my-sweep")
"""
from __future__ import annotations

from archsim.report.build import ReportOutcome, make_report
from archsim.report.inputs import Source, load_inputs

__all__ = ["ReportOutcome", "Source", "load_inputs", "make_report"]
