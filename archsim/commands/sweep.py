"""`archsim sweep SWEEP.yaml`: run a sweep file's points in parallel into a resumable results directory."""
from __future__ import annotations

import argparse
import sys

from archsim.commands.common import add_parser, add_set_option, config_file_overrides, set_overrides
from archsim.limits import MAX_SWEEP_POINTS


class Terminated(BaseException):
    """The sweep process received SIGTERM."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_parser(
        subparsers, "sweep",
        help="run a sweep file (grid/zip/points over a base config) locally or on Dask",
        description="Expand a sweep file into points and run them in parallel. Each finished point is "
        "stored at once (DIR/points/<hash>.parquet), so an interrupted sweep resumes where it stopped (a "
        "finished point whose input files - mapping, presets, model, trace - changed since is run again); "
        "failed points are recorded in DIR/failures/ and do not stop the others.",
    )
    p.add_argument("sweep_file", metavar="SWEEP.yaml", help="sweep file")
    p.add_argument("-o", "--out", metavar="DIR", help="results directory (default: results/<sweep name>/)")
    p.add_argument("-j", "--jobs", type=int, metavar="N",
                   help="worker processes (default: all usable cores; with dask and no scheduler: workers to start)")
    p.add_argument("--executor", choices=("local", "dask"), default=None,
                   help="local worker processes (default) or a Dask distributed cluster")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="Dask scheduler address (implies --executor dask; without it dask starts a LocalCluster)")
    p.add_argument("--force", action="store_true", help="rerun points that already have results (without it, a finished point is rerun only if "
                   "an input file its config names changed since)")
    p.add_argument("--max-points", type=int, metavar="N", default=MAX_SWEEP_POINTS,
                   help="refuse a sweep of more points than this (each is checked, then simulated)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary (failures still shown)")
    add_set_option(p, config_help="YAML file of overrides of the sweep's base config, e.g. "
                   "{dram: {timing: {nRCD: 20}}} (applied before --set; recorded in the results manifest)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from archsim.errors import UserError
    from archsim.sweep import load_sweep, run_sweep

    executor = args.executor or ("dask" if args.scheduler else "local")
    file_system, overrides = config_file_overrides(args.override_file) if args.override_file else (None, [])
    if file_system is not None:
        overrides.insert(0, ("system", file_system, args.override_file, None))
    overrides += set_overrides(args)
    if args.max_points < 1:
        raise UserError(f"--max-points must be an integer >= 1, got {args.max_points}")

    def plan(points: int, axes: list[str] | None) -> None:
        """The plan before anything is expanded; then how many points are checked, for a long sweep."""
        if args.quiet:
            return
        if axes is not None:
            print(f"sweep {args.sweep_file}: {points:,} point{'s' * (points != 1)} ({'; '.join(axes) or 'the base'}); "
                  "checking each point's config before any runs", flush=True)
            plan.total = points  # type: ignore[attr-defined]
        else:
            print(f"  checked {points:,} of {plan.total:,} points", flush=True)  # type: ignore[attr-defined]

    sweep = load_sweep(args.sweep_file, base_overrides=overrides, max_points=args.max_points, plan=plan)
    from archsim.output import check_writable

    check_writable(args.out, folder=True)
    import signal

    def stop(signum: int, _frame: object) -> None:
        raise Terminated(signum)

    # SIGTERM (timeout, job schedulers) ends the sweep like Ctrl-C: workers stopped, the lock released, the
    # finished points kept; the same command resumes.
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        outcome = run_sweep(sweep, args.out, jobs=args.jobs, executor=executor, scheduler=args.scheduler,
                            force=args.force, progress=False if args.quiet else None)
    except Terminated:
        print("archsim: sweep stopped by SIGTERM; finished points are kept, rerun the same command to resume",
              file=sys.stderr)
        return 128 + signal.SIGTERM
    finally:
        signal.signal(signal.SIGTERM, previous)
    if not args.quiet:
        print(f"sweep {outcome.name}: {outcome.total} points: {outcome.skipped} already done, "
              f"{outcome.succeeded} ran, {len(outcome.failed)} failed in {outcome.wall_s:.1f} s "
              f"-> {outcome.results_dir}")
    for failed in outcome.failed:
        print(f"  FAILED {failed.point_hash} ({failed.label}): {failed.error.splitlines()[0] if failed.error else ''}"
              f" [see {failed.record}]", file=sys.stderr)
    if outcome.failed:
        print(f"archsim: {len(outcome.failed)} of {outcome.total} points failed; rerun the same command to retry "
              "them (finished points are kept)", file=sys.stderr)
        return 1
    return 0
