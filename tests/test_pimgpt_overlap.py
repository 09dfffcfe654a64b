"""PIM-GPT with ASIC/PIM overlap on the event loop (`schedule: overlap`, archsim.systems.pimgpt.overlap, issue #7)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from archsim.errors import ConfigError
from archsim.host.asic import AsicModel
from archsim.systems.pimgpt.overlap import OverlapRunner
from archsim.systems.pimgpt.system import PimGptSimulator, run_pimgpt
from archsim.workload import build_graph, load_model


@pytest.mark.parametrize("model", ["gpt2-small", "gpt2-xl", "gpt3-xl"])
@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_graph_inputs_name_earlier_ops(model, phase):
    """Op.inputs are data dependencies: each names an op earlier in the graph; every op but the embedding
    reads something; the K/V cache is read from this step's kv_append."""
    m = load_model(model)
    g = build_graph(m, phase, context_len=7) if phase == "decode" else build_graph(m, phase, prompt_len=7)
    seen: dict[str, str] = {}
    for op in g:
        assert op.inputs or op.kind == "embedding", op.name
        for name in op.inputs:
            assert name in seen, (op.name, name)
        if op.kind in ("attn_score", "attn_context"):
            assert seen[op.inputs[1]] == "kv_append"
        seen[op.name] = op.kind
    assert "inputs" not in g.to_frame().columns              # the tidy frame is unchanged


def test_asic_latency_parts_sum_to_latency():
    asic = AsicModel()
    for op in build_graph(load_model("gpt2-small"), "decode", context_len=300):
        issue, drain = asic.latency_parts(op)
        assert issue + drain == asic.latency_cycles(op) and issue >= 0 and drain >= 0, op.name


def _check_schedule(runner: OverlapRunner) -> None:
    """Every task starts after every task it reads from has made its results ready, and no unit idles while a
    task of it is ready (work-conserving: a start is the later of its inputs' readiness and its unit's last
    end), so the timeline is the one a hand schedule of the same graph gives."""
    pieces = runner.tasks
    for p in pieces:
        ready = max((d.done.end_ps for d in p.deps), default=0)
        assert p.task.start_ps >= ready, (p.name, [d.name for d in p.deps])
        if p.unit == "ASIC":
            assert p.done.start_ps == p.task.end_ps and p.done.end_ps - p.task.end_ps == runner.asic.ps(p.drain)
    asic = sorted((p.task for p in pieces if p.unit == "ASIC"), key=lambda t: (t.start_ps, t.end_ps))
    for a, b in zip(asic, asic[1:], strict=False):
        assert b.start_ps >= a.end_ps                       # one piece at a time on the datapath
    by_task = {id(p.task): p for p in pieces}
    prev_end = 0
    for task in asic:
        p = by_task[id(task)]
        ready = max((d.done.end_ps for d in p.deps), default=task.start_ps)
        assert task.start_ps == runner.asic.ps(runner.asic.cycle_at(max(ready, prev_end))), p.name
        prev_end = task.end_ps
    for p in pieces:                                         # PIM streams are enqueued as soon as they are ready
        if p.unit == "PIM":
            ready = max((d.done.end_ps for d in p.deps), default=p.task.start_ps)
            assert p.task.start_ps == runner.mem.ps(runner.mem.cycle_at(ready)), p.name


def test_overlap_respects_dependencies_and_beats_serial():
    T = 3
    ser = PimGptSimulator({"model": "gpt2-small", "tokens": T, "baselines": [], "memo": False})
    ov = PimGptSimulator({"model": "gpt2-small", "tokens": T, "baselines": [], "schedule": "overlap"})
    for t in (0, 1, 200):
        a = ser.run_token(t)
        b = ov.run_token(t)
        _check_schedule(ov._overlap)
        assert b <= a, t
    assert b < a                                            # at L = 201 softmax and p.V pipeline per channel
    # same commands and ASIC work as the serial engine; only the time differs
    for role, x in ser.acc.items():
        y = ov.acc[role]
        assert np.array_equal(x["counts"], y["counts"]) and x["asic_cycles"] == y["asic_cycles"], role
        assert x["asic_energy_pj"] == y["asic_energy_pj"], role
    # the overlap schedule counts the commands it simulates, as the serial one does (it once reported 0)
    assert ov.engine.commands_simulated == ser.engine.commands_simulated > 0, \
        (ov.engine.commands_simulated, ser.engine.commands_simulated)


def test_one_piece_per_op_is_the_serial_engine():
    """With one PIM and one ASIC task per op the data dependencies form a chain, and the event loop reproduces
    the serial engine cycle for cycle."""
    ser = PimGptSimulator({"model": "gpt2-small", "tokens": 3, "baselines": [], "memo": False})
    ov = PimGptSimulator({"model": "gpt2-small", "tokens": 3, "baselines": [], "schedule": "overlap"})
    ov._overlap = OverlapRunner(ov, pieces="op")
    for t in (0, 1, 2):
        assert ser.run_token(t) == ov.run_token(t)
    with pytest.raises(ValueError, match="pieces"):
        OverlapRunner(ov, pieces="head")


def test_attention_edges_by_hand():
    """gpt2-small on 8 channels: 12 heads, head h on channel h mod 8 (channels 0-3 hold two heads, 4-7 one).
    Softmax is one piece per head (rows are independent). Channel 5's p.V program (head 5, the only
    global-buffer chunk at L = 8) reads head 5's softmax row and head 5's V: it depends on the softmax piece of
    head 5 and the K/V append of channel 5 only. The attention output GEMV of every channel reads the whole
    context vector: it depends on all 12 per-head context reductions. LayerNorm needs the whole vector: one
    piece, after every piece of the residual add."""
    sim = PimGptSimulator({"model": "gpt2-small", "tokens": 8, "baselines": [], "schedule": "overlap"})
    sim._token_id = 0
    graph = build_graph(sim.model, "decode", context_len=8)
    pieces = sim._overlap.plan(graph, 7, 8)
    by = {p.name: p for p in pieces}
    ctx5 = by["L0.attn_context/pim/ch5/h5/j0"]
    assert sorted(d.name for d in ctx5.deps) == ["L0.kv_append/asic/5", "L0.softmax/asic/5"]
    sm5 = by["L0.softmax/asic/5"]
    assert list(sm5.writes) == list(5 * 8 + np.arange(8))          # head 5's row of 8 scores
    assert [d.name for d in sm5.deps] == ["L0.attn_score/asic/5"]  # channel 5's q.K^T (head 5)
    sm8 = by["L0.softmax/asic/8"]
    assert [d.name for d in sm8.deps] == ["L0.attn_score/asic/0"]  # head 8 lives on channel 0
    ctx_red = [p for p in pieces if p.name.startswith("L0.attn_context/asic/")]
    assert len(ctx_red) == 12
    out0 = by["L0.attn_out/pim/ch0"]
    assert sorted(d.name for d in out0.deps) == sorted(p.name for p in ctx_red)
    assert len([p for p in pieces if p.name.startswith("L0.ln2/")]) == 1
    assert len(by["L0.ln2/asic"].deps) == 8                  # every piece of residual1 (per attn_out channel)


def test_schedule_key():
    base = run_pimgpt("gpt2-small", tokens=2, baselines=[])
    ser = run_pimgpt("gpt2-small", tokens=2, baselines=[], schedule="serial")
    strip = lambda s: {k: v for k, v in s.items() if not k.startswith("sim_")}  # noqa: E731
    assert strip(base.stats) == strip(ser.stats) and base.df.equals(ser.df)
    assert "schedule" not in base.manifest["config"]                 # the default keeps configs' hashes
    with pytest.raises(ConfigError, match="schedule"):
        run_pimgpt("gpt2-small", tokens=2, schedule="parallel")
    ov = run_pimgpt("gpt2-small", tokens=2, baselines=[], schedule="overlap", timeline=True)
    assert ov.stats["latency_per_token_s"] <= base.stats["latency_per_token_s"]
    assert ov.stats["commands"] == base.stats["commands"]
    tl = ov.tables["timeline"]                                     # the pieces, per unit, of the last step
    assert {"ASIC", "PIM ch0"} <= set(tl.unit) and (tl.end_s > tl.start_s).all()
    assert ov.extra["token_latency_s"][-1] * 0.99 <= tl.end_s.max() <= ov.extra["token_latency_s"][-1]  # + last drain


@pytest.mark.parametrize("refresh", [False, True])
def test_checker_accepts_overlap_streams(tmp_path, refresh):
    """The command log of overlapped steps (PIM pieces of different ops on different channels at once, with
    and without refresh) passes the independent checker, and the per-op counts (plus the refresh row) add up
    to every command the engine issued."""
    from archsim.dram.checker import check_log

    src = (Path(__file__).resolve().parents[1] / "workloads" / "models" / "gpt2-small.yaml").read_text()
    path = tmp_path / "gpt2-1layer.yaml"
    path.write_text(src.replace("n_layers: 12", "n_layers: 1").replace("vocab: 50257", "vocab: 2048")
                    .replace("name: gpt2-small", "name: gpt2-1layer"))     # a small LM head keeps the log short
    sim = PimGptSimulator({"model": str(path), "tokens": 40, "baselines": [], "schedule": "overlap",
                           "refresh": refresh}, log=True)
    for t in (0, 39):
        sim.run_token(t)
    df = sim.engine.command_log()
    assert ("REFab" in set(df.command)) == refresh
    assert check_log(sim.spec, df) == []
    assert int(sum(a["counts"] for a in sim.acc.values()).sum()) == len(df)
