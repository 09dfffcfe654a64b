"""`archsim report RESULTS... -o DIR`: Markdown + HTML report with figures from sweeps and single runs."""
from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report",
        help="make a Markdown + HTML report with figures from sweep results and run JSON files",
        description="Build report.md and a self-contained report.html with figures (PNG + SVG, each with "
        "its data as CSV) from sweep results directories and/or single-run JSON files written by --json. "
        "Figures whose data is missing are skipped and the report says why.",
    )
    p.add_argument("results", nargs="+", metavar="RESULTS", help="sweep results directory or run JSON file")
    p.add_argument("-o", "--out", metavar="DIR", help="report directory (default: reports/<first input name>/)")
    p.add_argument("--title", help="report title")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from archsim.report import make_report

    first = Path(args.results[0])
    out = Path(args.out) if args.out else Path("reports") / (first.stem if first.is_file() else first.resolve().name)
    outcome = make_report(args.results, out, title=args.title)
    if not args.quiet:
        print(f"report: {outcome.markdown} and {outcome.html} ({len(outcome.figures)} figures)")
        for kind, reason in outcome.skipped:
            print(f"  skipped {kind}: {reason}")
    return 0
