"""Progress of long work: a status line redrawn on stderr while a run goes on (DESIGN.md: "Long work shows
progress"). Simulation code reports how far it is with `report(...)` (cheap: it stores four numbers); the
CLI draws them with `live(...)` from a background thread, only on a terminal, never under --quiet or CI=true,
and only once a run has lasted `DELAY_S` (short runs print nothing).

    with progress.live("neupims", enabled=progress.wanted(quiet)):
        ... progress.report("requests", done=3, total=16, simulated_s=0.042, detail="120 iterations")
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

DELAY_S = 2.0      # runs shorter than this show no progress line
EVERY_S = 0.5

_HELD = threading.Event()      # set while another status line (a kernel compile's) has the terminal

_state: dict[str, Any] = {"what": "", "done": 0, "total": None, "simulated_s": None, "detail": "", "t0": None}


def report(what: str, done: int, total: int | None = None, simulated_s: float | None = None,
           detail: str = "") -> None:
    """Record progress: `done` of `total` `what` (e.g. requests), the simulated time reached, a short detail."""
    if _state["what"] != what or _state["t0"] is None:
        _state["t0"] = time.monotonic()     # the ETA counts from the first report of this kind of work
    _state.update(what=what, done=done, total=total, simulated_s=simulated_s, detail=detail)


def wanted(quiet: bool = False, stream: Any = None) -> bool:
    """A progress line only on a terminal, never under --quiet or CI=true."""
    stream = stream or sys.stderr
    ci = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
    return not quiet and not ci and hasattr(stream, "isatty") and stream.isatty()


def line(label: str, elapsed_s: float, width: int = 100) -> str:
    """The status line of the recorded progress."""
    from archsim.units import fmt_time

    s = _state
    parts = [label]
    if s["what"]:
        done, total = s["done"], s["total"]
        if total:
            filled = int(20 * min(done / total, 1.0))
            parts.append(f"[{'#' * filled}{'.' * (20 - filled)}] {done:,}/{total:,} {s['what']}")
        else:
            parts.append(f"{done:,} {s['what']}")
        if s["detail"]:
            parts.append(s["detail"])
        if s["simulated_s"] is not None:
            parts.append(f"simulated {fmt_time(s['simulated_s'])}")
    parts.append(f"{_clock(elapsed_s)} elapsed")
    if s["what"] and s["total"] and s["done"] and s["t0"] is not None:
        spent = time.monotonic() - s["t0"]
        parts.append(f"ETA {_clock(spent / s['done'] * (s['total'] - s['done']))}")
    return "  ".join(parts)[: width - 1]


def _clock(seconds: float) -> str:
    seconds = int(round(max(seconds, 0)))
    h, rest = divmod(seconds, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


@contextlib.contextmanager
def held() -> Iterator[None]:
    """The run's status line is not drawn while the block runs (another one, a kernel compile's, is)."""
    _HELD.set()
    try:
        yield
    finally:
        _HELD.clear()


@contextlib.contextmanager
def ticker(text: Callable[[float], str | None], stream: Any, every_s: float, delay_s: float = 0.0,
           name: str = "archsim-progress") -> Iterator[None]:
    """While the block runs, redraw one status line on `stream` from a daemon thread: first after `delay_s`, then
    every `every_s`. `text(elapsed_s)` gives the line, or None to skip a tick. The line is cleared at the end if
    anything was drawn. The one thread pattern behind the run's progress line and the compile notice."""
    stop = threading.Event()
    drawn = [False]
    t0 = time.monotonic()

    def draw() -> None:
        if stop.wait(delay_s):
            return
        while True:
            shown = text(time.monotonic() - t0)
            if shown is not None:
                with contextlib.suppress(OSError, ValueError):
                    stream.write("\r" + shown)
                    stream.flush()
                    drawn[0] = True
            if stop.wait(every_s):
                return

    thread = threading.Thread(target=draw, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if drawn[0]:
            with contextlib.suppress(OSError, ValueError):
                width = shutil.get_terminal_size((100, 20)).columns
                stream.write("\r" + " " * (width - 1) + "\r")     # cleared: what follows starts at column 0
                stream.flush()


@contextlib.contextmanager
def live(label: str, enabled: bool, stream: Any = None) -> Iterator[None]:
    """Redraw the status line every EVERY_S seconds while the block runs (if enabled); clear it at the end."""
    _state.update(what="", done=0, total=None, simulated_s=None, detail="", t0=None)
    if not enabled:
        yield
        return

    def text(elapsed_s: float) -> str | None:
        if _HELD.is_set():
            return None         # a kernel compile's line has the terminal
        width = shutil.get_terminal_size((100, 20)).columns
        return line(label, elapsed_s, width).ljust(width - 1)

    with ticker(text, stream or sys.stderr, EVERY_S, delay_s=DELAY_S):
        yield
