"""The NeuPIMs report's run cache is keyed on the content of a run's inputs, not on their names
(reports/neupims/run_cache.py): an edited mapping gets a new key (its stale run is not reused), a comment does
not, a preset's `extends` is followed, a controller convention's file is an input of the runs that use one, every
committed run is named by the key of the inputs it was made from, and today's simulator still makes one of them."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "reports" / "neupims"))

import run_cache  # noqa: E402

from archsim import api, inputs  # noqa: E402
from archsim.results import config_hash, load_result  # noqa: E402

RUNS = ROOT / "reports" / "neupims" / "runs"
CFG = {"system": "neupims", "npu": "neupims_code", "model": "gpt3-7b", "tp": 4, "batch": 32, "sub_batch": False,
       "layers": 1, "dataset": "workloads/datasets/neupims_traces/micro/uni32.csv"}


@pytest.fixture
def mapping_copy(tmp_path: Path) -> Path:
    path = tmp_path / "neupims_code_copy.yaml"
    path.write_text((ROOT / "mappings" / "neupims_code.yaml").read_text())
    return path


def test_an_edited_mapping_gets_a_new_key(mapping_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    cfg = {**CFG, "mapping": str(mapping_copy)}
    before = run_cache.run_key(cfg)
    text = mapping_copy.read_text()
    assert "\nrequest_queue: 4096\n" in text
    mapping_copy.write_text(text.replace("\nrequest_queue: 4096\n", "\nrequest_queue: 32\n"))
    edited = run_cache.run_key(cfg)
    assert edited != before                     # same name, other content: another run
    mapping_copy.write_text(text)
    assert run_cache.run_key(cfg) == before     # the content back: the same run
    mapping_copy.write_text("# a comment is no input\n" + text)
    assert run_cache.run_key(cfg) == before


def test_the_named_files_and_what_they_extend_are_inputs(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text("timing: {nRCD: 14}\n")
    (tmp_path / "dev.yaml").write_text("extends: base\norg: {channels: 2}\n")
    got = run_cache.input_digests({"preset": str(tmp_path / "dev.yaml")})
    assert {Path(p).name for p in got} == {"base.yaml", "dev.yaml"}
    (tmp_path / "base.yaml").write_text("timing: {nRCD: 15}\n")
    assert run_cache.input_digests({"preset": str(tmp_path / "dev.yaml")}) != got
    # the shipped device of a NeuPIMs run: its preset, the standard the preset names and those the standard
    # extends and includes, the mapping, the NPU preset, the model and the trace
    shipped = run_cache.input_digests({"preset": "NeuPIMs_HBM2_Dual", "mapping": "neupims_code", "npu": "neupims_code",
                                       "model": "gpt3-7b", "dram": {"standard": "neupims_code"}})
    for rel in ("archsim/presets/dram/NeuPIMs_HBM2_Dual.yaml", "archsim/presets/dram/standards/neupims.yaml",
                "archsim/presets/dram/standards/neupims_code.yaml", "archsim/presets/dram/standards/jedec.yaml",
                "archsim/presets/dram/standards/extensions/newton.yaml", "mappings/neupims_code.yaml",
                "archsim/presets/npu/neupims_code.yaml", "workloads/models/gpt3-7b.yaml"):
        assert rel in shipped


def test_every_committed_run_is_named_by_its_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose inputs changed since it was made no longer carries their key: re-run the report
    (make_report.py, vs_code.py and the toggles re-run exactly the runs whose inputs changed)."""
    monkeypatch.chdir(ROOT)         # the traces and the toggles' mapping copies are repo-relative paths
    stale = []
    for path in sorted(RUNS.glob("*.json")):
        cfg = json.loads(path.read_text())["manifest"]["config"]
        key = config_hash({"config": cfg, "inputs": run_cache.input_digests(cfg)})
        if path.name != f"{cfg['system']}-{key}.json":
            stale.append(path.name)
    assert not stale, f"runs made from other inputs than today's: {stale}"


def test_an_edited_controller_convention_gets_a_new_key(mapping_copy: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`npu_controller: bank_queues` runs the NPU on the engine's `dramsim3` convention, whose controller keys
    (posted writes, merged reads, the row-hit cap, ...) are in controller_conventions.yaml: editing them must re-run
    those runs (posted_writes false moves uni32's stage A on that controller), and leave the runs of
    archsim's own controller alone."""
    monkeypatch.chdir(ROOT)
    conventions = tmp_path / "controller_conventions.yaml"
    text = inputs.CONVENTIONS_FILE.read_text()
    conventions.write_text(text)
    monkeypatch.setattr(inputs, "CONVENTIONS_FILE", conventions)
    plain = {**CFG, "mapping": str(mapping_copy)}
    queues_mapping = tmp_path / "bank_queues.yaml"
    queues_mapping.write_text(mapping_copy.read_text().replace("\nattention: pim\n", "\nattention: npu\n")
                              + "npu_controller: bank_queues\n")
    queues = {**CFG, "mapping": str(queues_mapping)}
    before = run_cache.run_key(queues), run_cache.run_key(plain)
    assert "\n    posted_writes: true\n" in text
    conventions.write_text(text.replace("\n    posted_writes: true\n", "\n    posted_writes: false\n", 1))
    after = run_cache.run_key(queues), run_cache.run_key(plain)
    assert after[0] != before[0]
    assert after[1] == before[1]


def test_a_committed_run_is_what_todays_simulator_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Code is not in the key: a change of the simulator that moves a committed run's cycles must be caught. The
    smallest comparison run (uni32-off of vs_code.py, one layer, 32 tokens per channel) re-made here."""
    import vs_code

    monkeypatch.chdir(ROOT)
    cfg = vs_code.config("uni32-off")
    committed = load_result(run_cache.run_path(RUNS, cfg)).tables["stages"]
    fresh = api.run(cfg, seed=0).tables["stages"]
    cols = ["sample", "stage", "cycles", "n_ACT", "n_RD", "n_WR", "n_G_ACT", "n_COMP", "n_READRES"]
    assert fresh[cols].to_dict("records") == committed[cols].to_dict("records"), \
        "the simulator no longer makes this committed run: re-run the NeuPIMs report's scripts (run_cache.py)"
