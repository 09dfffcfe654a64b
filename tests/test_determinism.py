"""The same command twice gives the same result (issue 35): for every registered system, a small `archsim run
--config C --json OUT` in this test process and again in a fresh one (its own hash seed: a result that hung on
the order of a set or a dict would differ; and this process has run other tests before, so state one run leaves
behind for the next would show) writes byte-identical JSON once the timings of the simulator itself (wall and
compile seconds, and rates derived from them) are taken out."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from archsim import registry
from archsim.results import without_timings

# one small run per registered system
SMALL: dict[str, dict] = {
    "dram-trace": {"preset": "DDR4_3200AA_x8_8Gb", "trace": {"kind": "random", "requests": 300}},
    "pimgpt": {"model": "gpt2-small", "tokens": 2, "timeline": True},
    "gemm": {"m": 8, "k": 16, "n": 8, "memory": "dram"},
    "duplex": {"device": "duplex", "requests": 2, "input_len": 64, "output_len": 2, "max_batch": 2},
    "t3": {"model": "mega-gpt2", "sublayer": "op_fwd", "tp": 16, "tokens": 256},
    "t3_decode": {"model": "mega-gpt2", "tp": 16, "batch": 2, "context": 64},
    "neupims": {"model": "gpt3-small", "layers": 1, "batch": 2, "samples": 1},
    "npu_pim": {"model": "gpt3-small", "layers": 1, "batch": 2, "samples": 1},
    "npu_only": {"model": "gpt3-small", "layers": 1, "batch": 2, "samples": 1},
    "gpu_only": {"model": "gpt3-small", "layers": 1, "batch": 2, "samples": 1},
    "gpu_roofline": {"model": "gpt3-small", "layers": 1, "batch": 2, "samples": 1},
}

def test_every_system_has_a_small_run_here():
    # archsim's own systems (a test module may register a toy system in the same worker: sweep_fixtures)
    shipped = {name for name in registry.names() if registry.get(name).__module__.startswith("archsim.")}
    assert set(SMALL) == shipped, "add a small config for each new system"


def _run(system: str, config_path, out_path, cwd) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}     # each process its own hash seed
    env["CI"] = "true"
    proc = subprocess.run([sys.executable, "-m", "archsim.cli", "run", "--config", str(config_path), "--quiet",
                           "--json", str(out_path)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, f"{system}: exit {proc.returncode}\n{proc.stderr}"


@pytest.mark.parametrize("system", list(SMALL))
def test_the_same_run_twice_gives_the_same_json(system, tmp_path, monkeypatch):
    from archsim.cli import main

    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"system": system, **SMALL[system]}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CI", "true")
    assert main(["run", "--config", str(config), "--quiet", "--json", str(tmp_path / "run1.json")]) == 0
    _run(system, config, tmp_path / "run2.json", tmp_path)
    texts = [json.dumps(without_timings(json.loads((tmp_path / f"run{i}.json").read_text())), sort_keys=True)
             for i in (1, 2)]
    assert texts[0] == texts[1], f"{system}: two runs of one command differ beyond their timings"
