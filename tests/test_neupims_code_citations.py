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
# a citation of a baseline branch's file (`[npu+pim] Scheduler.cc:252-264`): the test reads the main tree's sources
BRANCH = re.compile(r"\[npu[+-](?:pim|only)\] [\w/]*$")


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
                if BRANCH.search(line[:m.start()]):
                    continue        # a file of another branch (`[npu+pim] Scheduler.cc`), not of this tree
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


NPUPIM = Path(os.environ.get("NEUPIMS_NPUPIM_SRC", str(SRC.parent / "src-npupim")))   # the npu+pim branch's tree
OPS = Path("src") / "operations"
NS_REL = Path("extern") / "NewtonSim" / "src"
# the uni cases' and the NPU+PIM baseline's explanations (reports/neupims/README.md): each citation as the report
# prints it, the tree and file it points into, and what those lines must hold for the sentence to be true
EXPLANATION_CITATIONS = [
    # 128-entry command queues per bank served round robin, a queue's first ready command, only a queue's first
    # entry may precharge
    ("NS/neupims_command_queue.cc:75-90, 119-150, 336-360", SRC, NS_REL / "neupims_command_queue.cc",
     ("GetNextQueue()", "GetFirstReadyInQueue(queue, refresh_slack)",
      "prev_itr->Bank() == cmd.Bank()", "ArbitratePrecharge(cmd_it, queue)")),
    # refresh: RANK_LEVEL_STAGGERED by default, one rank every tREFI / ranks
    ("NS/configuration.cc:284", SRC, NS_REL / "configuration.cc", ('"RANK_LEVEL_STAGGERED"',)),
    ("NS/refresh.cc:13-28", SRC, NS_REL / "refresh.cc", ("refresh_interval_ = config_.tREFI / config_.ranks",)),
    # a channel command's next G_ACT: the first bank whose command is ready
    ("NS/channel_state.cc:154-186", SRC, NS_REL / "channel_state.cc",
     ("CommandType::G_ACT", "GetReadyCommand(cmd, clk)", "num_ready == num_total_banks")),
    # a PIM_PRECHARGE waits tRTP after a COMPS_READRES; the next GEMV waits 2 (max(k, 6) + 1)
    ("NS/timing.cc:429-441", SRC, NS_REL / "timing.cc",
     ("same_rank[static_cast<int>(CommandType::COMPS_READRES)]", "{CommandType::PIM_PRECHARGE, read_to_precharge}")),
    ("NS/channel_state.cc:484-505", SRC, NS_REL / "channel_state.cc",
     ("std::max(cmd.num_comps, 6)", "comps_readres_delay = comp_to_comp * (num_comps + 1)")),
    # the attend: a GWRITE and dk / banks V tiles per head and page-sized chunk
    ("NeuPIMSAttend.cc:82, 152-200, 281", SRC, OPS / "NeuPIMSAttend.cc",
     ("chunks = ceil((double)seq_len / _page_size)", "Opcode::PIM_GWRITE", "Opcode::PIM_HEADER",
      "_tiles_per_chunk = ceil((double)_dk / _banks_per_channel)")),
    # the npu+pim branch: COMP and READRES as separate instructions, one PIM instruction a cycle, PIM mode per tile
    ("NeuPIMSLogitSoftmax.cc:231-252", NPUPIM, OPS / "NeuPIMSLogitSoftmax.cc",
     ("DramType::NEWTON", "Opcode::PIM_COMP", "Opcode::PIM_READRES")),
    ("NeuPIMSAttend.cc:204-225", NPUPIM, OPS / "NeuPIMSAttend.cc",
     ("DramType::NEWTON", "Opcode::PIM_COMP", "Opcode::PIM_READRES")),
    ("NeuPIMSystolicWS.cc:150-178", NPUPIM, Path("src") / "NeuPIMSystolicWS.cc",
     ("if (!_ld_inst_queue_for_pim.empty())", "push_memory_request(mem_request);", "_ld_inst_queue_for_pim.pop();")),
    # the PIM mode: entered at an admitted PIM_HEADER (if its estimate fits before the next refresh), left with the
    # GEMV's last command; no read or write enters while the PIM queue holds a command
    ("NS/newton_command_queue.cc:332-346, 464-468", NPUPIM, NS_REL / "newton_command_queue.cc",
     ("CanMeetRefreshDeadline(cmd_it, refresh_slack)", "is_pim_mode_ = true;", "if (cmd.IsLastPIMCmd())",
      "is_pim_mode_ = false;")),
    ("NS/newton_command_queue.cc:153-165", NPUPIM, NS_REL / "newton_command_queue.cc",
     ("bool NewtonCommandQueue::WillAcceptCommand", "if (pim_queue_.size() > 0)", "return false;")),
    # the staggered refresh's slack and the GEMV estimate it is held to
    ("NS/refresh.cc:13-37", NPUPIM, NS_REL / "refresh.cc",
     ("refresh_interval_ = config_.tREFI / config_.ranks", "refresh_interval_ - (clk_ % refresh_interval_)")),
    ("NS/channel_state.cc:271-329", NPUPIM, NS_REL / "channel_state.cc",
     ("int ChannelState::EstimatePIMOperationLatency", "config_.tFAW * (num_gact / 2 - 1)")),
    # the softmax results' MOVOUT after a request's logits GEMVs; its writes into the per-channel request queues
    ("NeuPIMSLogitSoftmax.cc:270-290", NPUPIM, OPS / "NeuPIMSLogitSoftmax.cc", ("Opcode::SOFTMAX", "Opcode::MOVOUT")),
    ("NeuPIMSystolicWS.cc:221-254", NPUPIM, Path("src") / "NeuPIMSystolicWS.cc",
     ("void NeuPIMSystolicWS::pim_st_queue_cycle()", "Opcode::MOVOUT", "push_memory_request(access);")),
    ("Core.cc:230-246", NPUPIM, Path("src") / "Core.cc",
     ("void Core::push_memory_request", "_memory_request_queues[channel].push(request);")),
]


def _lines(path: Path, spans: str) -> str:
    """The text of `spans` ("a-b, c, d-e") of `path`."""
    lines = path.read_text().splitlines()
    out = []
    for span in spans.split(", "):
        a, _, b = span.partition("-")
        out += lines[int(a) - 1:int(b or a)]
    return "\n".join(out)


@pytest.mark.skipif(not (TIMING.exists() and NPUPIM.exists()), reason="NeuPIMs' simulator sources are not on this machine")
@pytest.mark.parametrize(("citation", "tree", "rel", "needs"), EXPLANATION_CITATIONS, ids=[c[0] for c in EXPLANATION_CITATIONS])
def test_the_explanations_cite_lines_that_do_what_the_report_says(citation, tree, rel, needs):
    assert citation in (ROOT / "reports" / "neupims" / "README.md").read_text()
    cited = _lines(tree / rel, citation.split(":", 1)[1])
    for need in needs:
        assert need in cited, (citation, need)
    if rel.name == "NeuPIMSystolicWS.cc":       # one instruction a cycle there; the NeuPIMs tree drains the queue
        main = (SRC / rel).read_text()
        assert "while (!_ld_inst_queue_for_pim.empty())" in main and "while" not in cited
