"""The NeuPIMs report's citations of NewtonSim's timing table point at the lines that say what the prose says.

NeuPIMs' released simulator is built outside the repository (benchmarks/neupims_code/README.md); the test reads its
NewtonSim sources when they are there (NEUPIMS_SRC, default /work/ext/neupims/src) and skips otherwise."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = Path(os.environ.get("NEUPIMS_SRC", "/work/ext/neupims/src"))
TIMING = SRC / "extern" / "NewtonSim" / "src" / "timing.cc"

# the files that state "a G_ACT holds its rank's ACTs (and G_ACTs) for tFAW" with a timing.cc line range
G_ACT_CLAIMS = ["reports/neupims/README.md", "reports/neupims/make_report.py", "reports/neupims/claims.json",
                "docs/presets.md", "archsim/presets/dram/standards/extensions/newton.yaml",
                "tests/test_dram_latency.py", "tests/test_neupims_attention.py"]
CITE = re.compile(r"timing\.cc:(\d+)-(\d+)")


@pytest.mark.skipif(not TIMING.exists(), reason="NeuPIMs' simulator sources are not on this machine")
def test_g_act_tfaw_citations_cover_the_g_act_rows():
    lines = TIMING.read_text().splitlines()
    checked = 0
    for rel in G_ACT_CLAIMS:
        for line in (ROOT / rel).read_text().splitlines():
            if "tFAW" not in line and "nFAW" not in line and "four-activate" not in line:
                continue
            for m in CITE.finditer(line):
                a, b = int(m.group(1)), int(m.group(2))
                cited = "\n".join(lines[a - 1:b])
                assert "same_rank[static_cast<int>(CommandType::G_ACT)]" in cited, (rel, m.group(0))
                assert "{CommandType::ACTIVATE, config.tFAW}" in cited, (rel, m.group(0))
                assert "{CommandType::G_ACT, config.tFAW}" in cited, (rel, m.group(0))
                checked += 1
    assert checked >= len(G_ACT_CLAIMS)
