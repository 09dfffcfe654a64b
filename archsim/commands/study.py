"""`archsim study STUDY.yaml -o DIR`: every PIM design on the same model, batch and memory (archsim.study)."""
from __future__ import annotations

import argparse
import sys

from archsim.commands.common import add_parser


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_parser(
        subparsers, "study",
        help="run a cross-design study (models x memory x batch x devices x PIM designs) and report it",
        description="Map a study file's intent (models, memory generation and stacks, batch, lengths, devices, "
        "designs) onto each design's own system, run every point through the sweep machinery (parallel, "
        "resumable: DIR/points/), and write DIR/results.csv (the common metric schema, status and reason per "
        "point) and DIR/README.md with the comparison table and figures. A point a design cannot model is "
        "refused with a one-line reason, never run as a stand-in.",
    )
    p.add_argument("study_file", metavar="STUDY.yaml", help="study file (e.g. studies/which_pim.yaml)")
    p.add_argument("-o", "--out", metavar="DIR", required=True, help="results and report directory")
    p.add_argument("-j", "--jobs", type=int, metavar="N", help="worker processes (default: all usable cores)")
    p.add_argument("--executor", choices=("local", "dask"), default=None,
                   help="local worker processes (default) or a Dask distributed cluster")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="Dask scheduler address (implies --executor dask)")
    p.add_argument("--force", action="store_true", help="rerun points that already have results (without it, a finished point is rerun only if "
                   "an input file its config names changed since)")
    p.add_argument("--plan", action="store_true", help="print the points and refusals, run nothing")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from pathlib import Path

    from archsim.output import check_writable
    from archsim.study import load_study, plan_study, run_study

    study = load_study(args.study_file)
    check_writable(args.out, folder=True)
    if args.plan:
        for p in plan_study(study, Path(args.out)):
            it = p.intent
            what = f"runs as {p.config['system']}" if p.config is not None else f"refused: {p.reason}"
            print(f"{it.system:8s} {it.model:14s} {it.memory.label:9s} batch {it.batch:4d} tp {it.tp:2d}  {what}")
        return 0
    executor = args.executor or ("dask" if args.scheduler else "local")
    outcome = run_study(args.study_file, args.out, jobs=args.jobs, executor=executor, scheduler=args.scheduler,
                        force=args.force, progress=False if args.quiet else None)
    r = outcome.results
    if not args.quiet:
        print(f"study {study.name}: {len(r)} points: {int((r.status == 'ok').sum())} ran, "
              f"{int((r.status == 'refused').sum())} refused, {int((r.status == 'failed').sum())} failed "
              f"-> {outcome.out}/results.csv, {outcome.out}/README.md")
    for row in r[r.status == "failed"].itertuples():
        print(f"  FAILED {row.system} {row.model} {row.memory} batch {row.batch} tp {row.tp}: {row.reason}",
              file=sys.stderr)
    return 1 if outcome.failed else 0
