"""`make test` runs the RTL co-simulations after every other test (tests/conftest.py; on several cores: the last
files handed out), so its progress dots start at once instead of after minutes of simulator builds (issue 27
item 7)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_rtl_tests_are_collected_last():
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "tests/rtl/test_rtl_cli.py", "tests/test_output.py"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300).stdout
    ids = [line for line in out.splitlines() if "::" in line]
    first_rtl = next(i for i, line in enumerate(ids) if line.startswith("tests/rtl/"))
    assert ids[first_rtl:] and all(line.startswith("tests/rtl/") for line in ids[first_rtl:]), ids
    assert first_rtl > 0, f"rtl tests collected first: {ids[:5]}"


def test_make_test_hands_out_files_in_collection_order():
    """`make test` runs on every core (pytest-xdist): files go to the workers in collection order only with
    --dist loadfile and --no-loadscope-reorder (xdist's default sorts files by test count, which would send the
    RTL co-simulations out in the middle of the run)."""
    line = next(ln for ln in (ROOT / "Makefile").read_text().splitlines() if ln.startswith("PYTEST "))
    opts = line.split("=", 1)[1].split()
    assert "--no-loadscope-reorder" in opts and opts[opts.index("--dist") + 1] == "loadfile", line
