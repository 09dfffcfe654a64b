"""Run one step of the set-up and say, at least every EVERY_S seconds, what it is waiting for (issue 35: under
load a niced install printed nothing for 472 s, and a newcomer cannot tell a slow step from a hung one).

    python -m archsim.heartbeat [--every S] "installing numba, numpy and PyYAML" -- CMD [ARG ...]

prints `setup: installing numba, numpy and PyYAML ...`, then `setup: still installing numba, numpy and PyYAML
(20 s)` every S seconds (default 10) while CMD runs, and `setup: ... done in 34 s` at the end. CMD's own output
passes through; its exit code is this one's. Standard library only: the Makefile runs it with the system Python,
before anything is installed (archsim/__init__.py imports nothing).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time

EVERY_S = 10.0


def run(what: str, cmd: list[str], every: float = EVERY_S, prefix: str = "setup", out=None) -> int:
    """Run `cmd`, printing `what` at the start, every `every` seconds while it runs and at the end."""
    out = out or sys.stdout
    say = lambda text: print(f"{prefix}: {text}", file=out, flush=True)  # noqa: E731
    say(f"{what} ...")
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(cmd)
    except OSError as exc:
        say(f"{what}: cannot start {cmd[0]} ({exc.strerror or exc})")
        return 127
    try:
        while True:
            try:
                code = proc.wait(timeout=every)
                break
            except subprocess.TimeoutExpired:
                say(f"still {what} ({time.monotonic() - t0:.0f} s)")
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait()
        raise
    took = time.monotonic() - t0
    say(f"{what}: done in {took:.0f} s" if code == 0 else f"{what}: failed (exit {code}) after {took:.0f} s")
    return code


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m archsim.heartbeat", description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=float, default=EVERY_S, help="seconds between two lines (default 10)")
    ap.add_argument("--prefix", default="setup", help="the word each line starts with (default setup)")
    ap.add_argument("what", help="what the command does, as a phrase: 'installing numba'")
    ap.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD [ARG ...]")
    a = ap.parse_args(argv)
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd or a.every <= 0:
        ap.error("give a command after --, and --every > 0")
    return run(a.what, cmd, a.every, a.prefix)


if __name__ == "__main__":
    sys.exit(main())
