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
    p.add_argument("-o", "--out", metavar="DIR",
                   help="report directory (default: RESULTS/report/ for a sweep results directory, "
                   "<name>-report/ next to a run JSON file <name>.json)")
    p.add_argument("--force", action="store_true",
                   help="write into DIR even if it holds files archsim did not write (they are kept)")
    p.add_argument("--title", help="report title")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from archsim.output import check_distinct, check_writable
    from archsim.report import make_report

    out = Path(args.out) if args.out else default_out_dir(args.results[0])
    for result in args.results:
        check_distinct({"-o": out}, {"the input": result})
    check_writable(out, folder=True)
    outcome = make_report(args.results, out, title=args.title, force=args.force)
    if not args.quiet:
        print(f"report: {outcome.markdown} and {outcome.html} ({len(outcome.figures)} figures)")
        for kind, reason in outcome.skipped:
            print(f"  skipped {kind}: {reason}")
    return 0


def default_out_dir(first: str | Path) -> Path:
    """Where a report goes without -o: inside a sweep results directory (DIR/report), or next to a run
    JSON file (run.json -> run-report/). Never a shared folder such as the shipped reports/."""
    first = Path(first)
    if first.is_dir():
        return first / "report"
    return first.with_name(f"{first.stem}-report")
