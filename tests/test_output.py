"""archsim.output, the one output writer (issue 27): nothing at an output path is destroyed, every failure is
one line, and an unwritable output is found before a simulation starts."""
from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from archsim.cli import main
from archsim.output import OutputError, check_writable, write_bytes, write_text


def test_regular_file_replaced_atomically_keeping_its_mode(tmp_path):
    p = tmp_path / "out.txt"
    write_text(p, "one\n")
    assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~_umask()
    p.chmod(0o640)
    ino = p.stat().st_ino
    write_text(p, "two\n")
    assert p.read_text() == "two\n" and p.stat().st_ino != ino          # a new file renamed into place
    assert stat.S_IMODE(p.stat().st_mode) == 0o640
    assert not list(tmp_path.glob(".*.tmp"))


def test_symlink_is_written_through(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(real.name)
    write_text(link, "new\n")
    assert link.is_symlink() and real.read_text() == "new\n"
    dangling = tmp_path / "dangling.txt"
    dangling.symlink_to("made-by-write.txt")
    write_text(dangling, "x\n")
    assert dangling.is_symlink() and (tmp_path / "made-by-write.txt").read_text() == "x\n"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_devices_are_written_in_place():
    write_bytes("/dev/null", b"data")
    with pytest.raises(OutputError, match=r"^/dev/full: cannot write: No space left on device"):
        write_bytes("/dev/full", b"data")
    assert Path("/dev/full").is_char_device() and Path("/dev/null").is_char_device()


def test_fifo_is_written_in_place_and_a_closed_reader_is_one_line(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(Path(fifo).read_bytes()))
    reader.start()
    write_bytes(fifo, b"through the pipe")
    reader.join(5)
    assert got == [b"through the pipe"] and stat.S_ISFIFO(fifo.stat().st_mode)

    def open_and_close():
        fd = os.open(fifo, os.O_RDONLY)
        os.close(fd)

    closer = threading.Thread(target=open_and_close)
    closer.start()
    import signal

    old = signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        with pytest.raises(OutputError, match="EPIPE"):
            for _ in range(50):                  # until the reader has gone
                write_bytes(fifo, b"x" * 65536 * 4)
    finally:
        signal.signal(signal.SIGPIPE, old)
        closer.join(5)


def test_check_writable_fails_early(tmp_path):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    for bad, match in ((tmp_path / "afile" / "out.json", "is not a directory"),
                       (tmp_path / "adir", "is a directory")):
        with pytest.raises(OutputError, match=match):
            check_writable(bad)
    with pytest.raises(OutputError, match="exists and is not a directory"):
        check_writable(tmp_path / "afile", folder=True)
    check_writable(tmp_path / "new" / "deeper" / "out.json")      # missing folders are created at write time
    check_writable(tmp_path / "adir", folder=True)
    check_writable("-")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "afile"]    # the checks created nothing


def test_isa_outputs_get_the_umask_mode_and_keep_symlinks(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("p.s").write_text("NOP\n")
    assert main(["isa", "asm", "p.s", "-o", "p.hex"]) == 0
    assert stat.S_IMODE(Path("p.hex").stat().st_mode) == 0o666 & ~_umask()     # not 0600
    assert main(["isa", "disasm", "p.hex", "-o", "p.txt"]) == 0
    assert stat.S_IMODE(Path("p.txt").stat().st_mode) == 0o666 & ~_umask()
    Path("link.hex").symlink_to("p.hex")
    assert main(["isa", "asm", "p.s", "-o", "link.hex"]) == 0
    assert Path("link.hex").is_symlink()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_report_folder_symlink_is_written_through(tmp_path):
    import sweep_fixtures  # noqa: F401  (registers toy-roofline)
    from sweep_fixtures import toy_sweep, write_sweep

    from archsim.report import make_report
    from archsim.sweep import run_sweep

    run_sweep(write_sweep(tmp_path, toy_sweep()), tmp_path / "res", jobs=1, progress=False)
    (tmp_path / "real-report").mkdir()
    (tmp_path / "rep").symlink_to("real-report")
    make_report([tmp_path / "res"], tmp_path / "rep")
    assert (tmp_path / "rep").is_symlink() and (tmp_path / "real-report" / "report.md").is_file()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_full_standard_output_is_one_line():
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "archsim.cli", "isa", "show", "pim"], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == \
        ["archsim: error: standard output: No space left on device"], proc.stderr
