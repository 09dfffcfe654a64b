"""Issue 26 item 1 (cold start): `make setup` compiles the demo's kernel in the background (archsim.warm) and
`make demo` waits for it; both only help if the warm-up compiles the very kernel the demo then loads."""
from __future__ import annotations

import fcntl
import subprocess
import sys
import threading
import time

from archsim import warm


def _signature_of(builder) -> tuple:
    """The kernel signature a warm-up builder compiles, without compiling it."""
    return builder()._signature()


def test_warm_compiles_the_demos_kernel():
    from archsim.systems.pimgpt.system import PimGptSimulator

    want = _signature_of(warm.KERNELS["pimgpt"])
    for log in (False, True):            # the demo runs with --timeline
        sim = PimGptSimulator({"model": "gpt2-small", "tokens": 64}, log=log)
        assert sim.engine.ms._signature() == want, f"log={log}: the demo's kernel is not the one warmed"
        assert sim.engine.ms.kernel == "stream"


def test_warm_compiles_the_trace_kernel():
    from archsim.dram.controller import ControllerConfig
    from archsim.dram.spec import load_spec
    from archsim.engine.channel import MemorySystem

    ms = MemorySystem(load_spec("HBM2_2Gbps_PC"), ControllerConfig(), requests=4)
    assert ms.kernel == "lean" and ms._signature() == _signature_of(warm.KERNELS["trace"])


def test_warm_compiles_the_general_kernel():
    """`make test` warms the general kernel as well: the one T3's device sets (two rw sources, ports) run."""
    from archsim.dram.controller import ControllerConfig
    from archsim.dram.spec import load_spec
    from archsim.engine.channel import MemorySystem

    two = [{"name": "compute", "kind": "rw"}, {"name": "comm", "kind": "rw"}]
    ms = MemorySystem(load_spec("HBM2_2Gbps_PC"), ControllerConfig(), sources=two, arbitration="threshold")
    assert ms.kernel == "general" and ms._signature() == _signature_of(warm.KERNELS["general"])


def test_helper_plan_names_the_kernels_helpers():
    """warm.HELPERS / STREAM_HELPERS (compiled ahead by a second process) must name helpers of the kernel with
    their arity; the stream-only kernel's plan names none of those only rw sources and ports use (it never
    compiles them)."""
    import inspect

    from archsim.engine import channel

    for name, kinds in warm.HELPERS + warm.STREAM_HELPERS:
        fn = getattr(channel, name, None)
        assert fn is not None, f"warm.HELPERS names {name}, which archsim.engine.channel no longer has"
        fn = getattr(fn, "impl", fn)
        params = inspect.signature(fn.py_func).parameters
        assert len(params) == len(kinds), f"{name} takes {len(params)} arguments, warm.HELPERS gives {kinds}"
    general = [fn.py_func.__name__ for fn, _ in warm.helpers_of(warm.KERNELS["general"]())]
    stream = [fn.py_func.__name__ for fn, _ in warm.helpers_of(warm.KERNELS["pimgpt"]())]
    assert general == [name for name, _ in warm.HELPERS]
    assert stream == [name for name, _ in warm.STREAM_HELPERS]
    assert not {name for name, _ in warm.STREAM_HELPERS} & {fn.__name__ for fn in vars(channel).values()
                                                            if hasattr(fn, "impl")}


def test_wait_returns_without_a_warm_up(tmp_path):
    t0 = time.monotonic()
    assert warm.main(["--wait", "--lock", str(tmp_path / "none.lock")]) == 0
    assert time.monotonic() - t0 < 1


def test_wait_blocks_while_a_warm_up_holds_the_lock(tmp_path):
    lock = tmp_path / "warm.lock"
    held = 0.5
    with lock.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        threading.Timer(held, lambda: fcntl.flock(fh, fcntl.LOCK_UN)).start()
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "archsim.warm", "--wait", "--lock", str(lock)], timeout=30)
        took = time.monotonic() - t0
    assert proc.returncode == 0
    assert took >= held * 0.9, f"--wait returned after {took:.2f} s while the lock was held {held} s"
