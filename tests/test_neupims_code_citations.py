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


# the three rules of the code the comparison's configuration takes (mapping and DRAM standard neupims_code), each
# with the files that cite them; a citation must point at the lines that do what the text says
RULE_FILES = ["reports/neupims/README.md", "reports/neupims/make_report.py", "reports/neupims/claims.json",
              "docs/presets.md", "mappings/neupims_code.yaml", "archsim/presets/dram/standards/neupims_code.yaml",
              "reports/neupims/vs_code.py"]
NS = SRC / "extern" / "NewtonSim" / "src"


def _cited(rel_src: str, pattern: str, needs: tuple[str, ...]) -> list[tuple[str, str]]:
    """Every (file, cited text) where a RULE_FILES line holds one of `needs` and cites `pattern`:a-b[, c-d]."""
    cite = re.compile(pattern + r":(\d+)-(\d+)(?:, (\d+)-(\d+))?")
    lines = (SRC / rel_src).read_text().splitlines()
    out = []
    for rel in RULE_FILES:
        text = (ROOT / rel).read_text()
        for line in text.splitlines():
            if not any(n in line for n in needs):
                continue
            for m in cite.finditer(line):
                spans = [(int(m.group(i)), int(m.group(i + 1))) for i in (1, 3) if m.group(i)]
                out.append((rel, "\n".join("\n".join(lines[a - 1:b]) for a, b in spans)))
    return out


@pytest.mark.skipif(not TIMING.exists(), reason="NeuPIMs' simulator sources are not on this machine")
def test_attend_barrier_citations_show_the_program_order_and_its_release():
    """Rule 1 (attend_start: all_logits): StageProgram.cc must show NeuPIMSAttend after NeuPIMSLogitSoftmax and an
    operation's children made executable only when it finishes (src/StageProgram.cc:241-259, once cited for it, is
    projection_block); Scheduler.cc the next operation started only once the current one's tiles are all out."""
    stage = _cited("src/StageProgram.cc", r"StageProgram\.cc", ("Scheduler.cc:648-729",))
    assert len(stage) >= 4, stage
    for rel, text in stage:
        assert text.index("NeuPIMSLogitSoftmax") < text.index("NeuPIMSAttend"), rel
        assert "_executable_operations.push_back" in text and "void StageProgram::finish_operation" in text, rel
    sched = _cited("src/scheduler/Scheduler.cc", r"Scheduler\.cc", ("NeuPIMSAttend", "attend"))
    assert sched
    for rel, text in sched:
        assert "_executable_tile_queue1.empty()" in text and "get_executable_operations().front()" in text, rel


@pytest.mark.skipif(not TIMING.exists(), reason="NeuPIMs' simulator sources are not on this machine")
def test_one_command_a_cycle_and_no_bank_reserved_citations():
    """Rule 3 (command_bus: single): the controller's tick issues the one command its queue picks; rule 2
    (pim_reserves_banks: false): the NPU's queues skip only the row a GEMV reserved and the bank being GWRITE-d."""
    tick = _cited("extern/NewtonSim/src/neupims_controller.cc", r"neupims_controller\.cc",
                  ("one command a cycle", "one command per cycle"))
    assert len(tick) >= 4, tick
    for rel, text in tick:
        assert "void NeuPIMSController::ClockTick()" in text and text.count("IssueCommand(") == 1, rel
        assert "GetCommandToIssue" in text, rel
    queue = (NS / "neupims_command_queue.cc").read_text().splitlines()
    cited = "\n".join(queue[341 - 1:352])
    assert "reserved_row_for_pim_ == cmd_it->Row()" in cited and "gwrite_target_" in cited
    for rel in ("reports/neupims/README.md", "reports/neupims/make_report.py", "mappings/neupims_code.yaml"):
        assert "reserves no bank" in (ROOT / rel).read_text() and ":341-352)" in (ROOT / rel).read_text(), rel
