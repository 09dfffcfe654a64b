"""Issue 26 item 1 (cold start): `make setup` compiles the demo's kernel in the background (archsim.warm) and
`make demo` waits for it; both only help if the warm-up compiles the very kernel the demo then loads."""
from __future__ import annotations

import fcntl
import subprocess
import sys
import threading
import time

import pytest

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
    from archsim.engine.memory import MemorySystem

    ms = MemorySystem(load_spec("HBM2_2Gbps_PC"), ControllerConfig(), requests=4)
    assert ms.kernel == "lean" and ms._signature() == _signature_of(warm.KERNELS["trace"])


def test_warm_compiles_the_general_kernel():
    """`make test` warms the general kernel as well: the one T3's device sets (two rw sources, ports) run."""
    from archsim.dram.controller import ControllerConfig
    from archsim.dram.spec import load_spec
    from archsim.engine.memory import MemorySystem

    two = [{"name": "compute", "kind": "rw"}, {"name": "comm", "kind": "rw"}]
    ms = MemorySystem(load_spec("HBM2_2Gbps_PC"), ControllerConfig(), sources=two, arbitration="threshold")
    assert ms.kernel == "general" and ms._signature() == _signature_of(warm.KERNELS["general"])


def test_warm_compiles_the_neupims_kernels(tmp_path):
    """`make test` (and `make setup`) warm NeuPIMs' kernel: the one its DecodeSimulator runs under the mapping's
    deep request window (pim_dual_deep), and its NPU+PIM baseline's (pim_blocked_deep); `make test` also warms the
    shallow window's (pim_dual: a mapping with a 32-entry window)."""
    from pathlib import Path

    from archsim.systems.neupims.config import setup
    from archsim.systems.neupims.decode import DecodeSimulator
    from archsim.systems.neupims.device import build_device

    shipped = (Path(__file__).resolve().parent.parent / "mappings" / "neupims.yaml").read_text()
    assert "\nrequest_queue: 4096\n" in shipped
    shallow = tmp_path / "neupims_q32.yaml"
    shallow.write_text(shipped.replace("\nrequest_queue: 4096\n", "\nrequest_queue: 32\n"))
    for name, kernel, mapping, system in (("neupims", "pim_dual_deep", "neupims", "neupims"),
                                          ("neupims-shallow", "pim_dual", str(shallow), "neupims"),
                                          ("npu_pim", "pim_blocked_deep", None, "npu_pim")):
        cfg = {"system": system, "model": "gpt3-small", "layers": 1, "batch": 8}
        dev = build_device(setup(cfg | ({"mapping": mapping} if mapping else {})))
        ms = DecodeSimulator(dev, refresh=True).ms
        assert ms.kernel == kernel and ms._signature() == _signature_of(warm.KERNELS[name]), name


def test_threaded_warm_ups_compile_the_threaded_kernels_tests_run():
    """pimgpt-threads, general-threads and trace-threads build a two-thread system of the same state types as their one-thread
    kernel (so advance_shard is compiled for the very state the threaded tests pass it)."""
    for name in ("pimgpt", "general", "trace"):
        ms = warm.KERNELS[f"{name}-threads"]()
        assert ms.threads == 2 and ms._coord is not None, name
        assert ms._signature() == _signature_of(warm.KERNELS[name]), f"{name}-threads: another state type"


def test_make_test_warms_only_kernels_that_exist():
    """The Makefile's WARM list for `make test` names KERNELS (the warm-up runs in the background at set-up: a
    wrong name would only show in .venv/warm.log); each kernel variant once, so its group runs in one process."""
    from pathlib import Path

    line = next(ln for ln in (Path(__file__).resolve().parents[1] / "Makefile").read_text().splitlines()
                if ln.startswith("test test-all: WARM"))
    names = line.split("=", 1)[1].split()
    assert names and all(n in warm.KERNELS for n in names), f"{names} vs {list(warm.KERNELS)}"
    groups = warm.variant_groups(names)
    kinds = [warm.KERNELS[g[0]]().kernel for g in groups]
    assert len(set(kinds)) == len(kinds), f"two groups compile the same kernel variant: {groups} -> {kinds}"


def test_variant_groups_keep_a_kernel_with_its_threaded_form():
    assert warm.variant_groups(["general", "neupims", "pimgpt", "general-threads", "pimgpt-threads", "trace"]) == [
        ["general", "general-threads"], ["neupims"], ["pimgpt", "pimgpt-threads"], ["trace"]]


def test_side_by_side_warm_up_runs_every_group(tmp_path):
    """Several kernels: child processes, one per variant; a cached kernel loads in a fraction of a second."""
    proc = subprocess.run([sys.executable, "-m", "archsim.warm", "trace", "general", "--jobs", "2",
                           "--lock", str(tmp_path / "warm.lock")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "trace " in proc.stderr and "general " in proc.stderr and "failed" not in proc.stderr, proc.stderr


def test_a_failed_child_is_reported(capsys):
    """A warm-up process that fails is named on stderr (the job then compiles that kernel itself)."""
    took = warm.warm_side_by_side(["no-such-kernel"], jobs=2)
    assert list(took) == ["no-such-kernel"]
    assert "warming no-such-kernel failed (exit 2)" in capsys.readouterr().err


def test_unknown_kernel_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        warm.main(["bogus", "--lock", str(tmp_path / "warm.lock")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown kernel 'bogus'" in err and "general" in err, err


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


def _free_entry_sig(ms) -> tuple:
    import numba
    from numba import types

    return (numba.typeof(ms.S), types.int64, types.int64)


def test_the_second_process_skips_a_helper_the_first_has_claimed(tmp_path):
    """compile_helpers (the second process) compiles only the helpers it claims first, and marks each done."""
    ms = warm.KERNELS["pimgpt"]()
    names = [name for name, _ in warm.STREAM_HELPERS]
    for name in names:
        if name != "_free_entry":                     # the cheapest helper is left to it; the rest are taken
            assert warm._claim(tmp_path, name)
    warm.compile_helpers(ms, tmp_path)
    assert (tmp_path / "_free_entry").exists() and not warm._claim(tmp_path, "_free_entry")
    assert not any((tmp_path / name).exists() for name in names if name != "_free_entry")


def test_the_first_process_waits_for_a_claimed_helper_until_it_is_done(tmp_path):
    """A helper the second process has claimed: the first waits for its mark (not for the process), then loads
    it; a helper nobody claimed yet: the first claims it and compiles at once."""
    from archsim.engine import channel

    ms = warm.KERNELS["pimgpt"]()
    fn = channel._free_entry
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert warm._claim(tmp_path, "_free_entry")                    # as the second process would
        threading.Timer(0.5, (tmp_path / "_free_entry").touch).start()
        t0 = time.monotonic()
        with warm.waiting_for_helpers(child, tmp_path, {"_free_entry", "_complete"}):
            fn.compile(_free_entry_sig(ms))
            waited = time.monotonic() - t0
            channel._complete.compile((_free_entry_sig(ms)[0], *[_free_entry_sig(ms)[1]] * 3))
        assert 0.4 <= waited < 30, waited
        assert not warm._claim(tmp_path, "_complete")                  # claimed by the first, so the second skips it
        assert child.poll() is None                                    # it did not wait for the process to end
    finally:
        child.kill()
        child.wait()


def test_the_first_process_stops_waiting_when_the_second_exits(tmp_path):
    """The second process died before marking its helper: the first compiles it itself instead of hanging."""
    from archsim.engine import channel

    ms = warm.KERNELS["pimgpt"]()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    assert warm._claim(tmp_path, "_free_entry")
    t0 = time.monotonic()
    with warm.waiting_for_helpers(child, tmp_path, {"_free_entry"}):
        channel._free_entry.compile(_free_entry_sig(ms))
    assert time.monotonic() - t0 >= 0.3 and child.returncode == 0
    assert channel._free_entry.overloads           # compiled (or loaded) after all
