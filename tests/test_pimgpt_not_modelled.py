"""Issue #8.1: features PIM-GPT does not model are a user error (one line, exit 2), not a traceback."""
from __future__ import annotations

import json

import pytest

from archsim.cli import main
from archsim.errors import NotModelled, UserError
from archsim.systems.pimgpt.compiler import load_policy

LLAMA = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 8,
         "num_key_value_heads": 2, "intermediate_size": 688, "max_position_embeddings": 512,
         "vocab_size": 1000, "hidden_act": "silu", "rms_norm_eps": 1e-5}


def test_not_modelled_is_a_user_error():
    assert issubclass(NotModelled, UserError)


def test_llama_on_pimgpt_runs(tmp_path, capsys):
    """A LLaMA-style HF config (GQA, gated FFN, RMSNorm, RoPE) runs on PIM-GPT (issue 37)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA))
    assert main(["run", "--model", str(path), "--tokens", "2", "--no-baselines", "--quiet"]) == 0


def test_moe_on_pimgpt_runs(tmp_path, capsys):
    """A Mixtral-style HF config (4 experts, top-2) runs on PIM-GPT (issue 37; tests/test_pimgpt_moe.py)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, "model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2}))
    assert main(["run", "--model", str(path), "--tokens", "1", "--no-baselines", "--quiet"]) == 0


def test_unmodelled_policy_value_is_not_modelled(tmp_path):
    with pytest.raises(NotModelled, match=r"attention\.head_to_channel: 'blocked' is not modelled yet; "
                                          r"supported: round_robin \(system pimgpt\)"):
        load_policy("pimgpt", {"attention.head_to_channel": "blocked"})
