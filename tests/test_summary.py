"""archsim.summary: every system's summary with units read from the stat names, the per-stage table, and the
notes a run's output carries about its model (layers simulated, features the system does not model)."""
from __future__ import annotations

import pandas as pd
import pytest

from archsim.commands.run import modelled_features
from archsim.summary import format_value, label, model_notes, print_generic, stage_rows, summary_rows


@pytest.mark.parametrize("key, value, text", [
    ("iteration_s", 0.000687336, "687.3 µs"),
    ("dram_energy_pj", 1.98574e9, "1.99 mJ"),
    ("energy_per_token_j", 1.2e-3, "1.2 mJ"),
    ("simulated_cycles", 1194180, "1,194,180 cycles"),
    ("cycles", 1.19418e6, "1,194,180 cycles"),
    ("npu_util", 0.4213, "42.1 %"),
    ("bandwidth_pct_of_peak", 58.44, "58.4 %"),
    ("peak_bandwidth_GBps", 25.6, "25.6 GB/s"),
    ("data_movement_bytes", 3.2e9, "3.2 GB"),
    ("asic_clock_hz", 1e9, "1 GHz"),
    ("speedup_t3_mca", 1.318, "1.32x"),
    ("tokens_per_s", 1234.56, "1,234.6"),
    ("iterations", 10, "10"),
    ("energy_pj", {"read": 1e6, "write": 0, "act": 2e6}, "read 1 µJ, act 2 µJ"),
    ("finite", True, "yes"),
])
def test_values_carry_the_unit_of_their_name(key, value, text):
    assert format_value(key, value) == text


def test_labels_are_words_without_the_unit():
    assert label("iteration_s") == "iteration"
    assert label("energy_per_token_j") == "energy per token"
    assert label("tokens_per_s") == "tokens / s"
    assert label("bandwidth_pct_of_peak") == "bandwidth of peak"


def test_simulator_figures_come_last_on_one_line():
    rows = summary_rows({"wall_s": 2.5, "tokens_per_s": 10.0, "sim_compile_s": 0.05, "iteration_s": 0.1})
    assert [r[0] for r in rows] == ["tokens / s", "iteration", "simulator"]
    assert rows[-1][1] == "wall 2.50 s, compile 50 ms"


def test_neupims_like_summary_has_no_raw_numbers(capsys):
    stats = {"tokens_per_s": 7451.2, "iteration_s": 0.000687336, "npu_util": 0.5, "pim_util": 0.2,
             "mem_bw_util": 0.4, "energy_per_token_j": 3.1e-4, "simulated_cycles": 1194180, "wall_s": 30.2,
             "cycles_per_s": 1.19418e6}
    stages = pd.DataFrame({"stage": ["qkv", "attn", "qkv", "attn"], "layer": [0, 0, 1, 1],
                           "seconds": [1e-4, 3e-4, 1e-4, 3e-4], "npu_util": [0.9, 0.1, 0.9, 0.1]})
    print_generic("neupims", stats, tables={"stages": stages})
    out = capsys.readouterr().out
    for raw in ("0.000687336", "1.19418e+06", "e+0", "e-0"):
        assert raw not in out, out
    assert "687.3 µs" in out and "1,194,180 cycles" in out and "per stage" in out
    attn = next(line for line in out.splitlines() if line.strip().startswith("attn"))
    assert "600 µs" in attn and "75.0%" in attn and "10.0%" in attn, attn


def test_stage_rows_need_stage_and_seconds():
    assert stage_rows(pd.DataFrame({"x": [1]})) == [] and stage_rows(None) == []


def test_partial_layers_are_stated():
    notes = model_notes({"system": "neupims", "model": "gpt3-7b", "layers": 2}, frozenset())
    assert any("2 of gpt3-7b's 32 layers" in n and "tokens/s" in n for n in notes), notes
    assert model_notes({"system": "neupims", "model": "gpt3-7b", "layers": None}, frozenset()) == []


def test_unmodelled_features_are_stated():
    t3 = modelled_features("t3")
    assert t3 == frozenset()
    notes = model_notes({"system": "t3", "model": "mixtral-8x7b"}, t3)
    assert len(notes) == 1 and "mixture-of-experts FFN (8 experts, 2 per token)" in notes[0], notes
    assert "grouped-query attention" in notes[0] and "not modelled by system t3" in notes[0]
    # NeuPIMs models GQA, the gated FFN and MoE (issue 37): no note for Llama or Mixtral
    assert modelled_features("neupims") == frozenset({"gqa", "gated_ffn", "moe"})
    assert model_notes({"system": "neupims", "model": "llama3-70b"}, modelled_features("neupims")) == []
    assert model_notes({"system": "neupims", "model": "mixtral-8x7b"}, modelled_features("neupims")) == []
    # PIM-GPT models GQA (K/V per KV head), the gated FFN and MoE (issue 37): no note for any of them
    assert modelled_features("pimgpt") == frozenset({"gqa", "gated_ffn", "moe"})
    for model in ("llama3-70b", "mixtral-8x7b", "gpt3-7b"):
        assert model_notes({"system": "pimgpt", "model": model}, modelled_features("pimgpt")) == [], model


@pytest.mark.parametrize("system, words", [("duplex", "Duplex: serving on xPU"),
                                           ("t3", "tensor-parallel sublayer"),
                                           ("neupims", "its baselines are the variants npu_pim"),
                                           ("npu_only", "attention on the NPU"),
                                           ("dram-trace", "A memory trace")])
def test_run_help_describes_the_chosen_system(system, words, capsys):
    from archsim.cli import main

    assert main(["run", "--system", system, "--help"]) == 0
    out = capsys.readouterr().out
    assert words in " ".join(out.split()) and f"examples (system {system})" in out, out[:2000]
    assert "PIM-GPT: decode" not in out      # the chosen system's description (its class), not the default's
