"""A resumed sweep notices an edited input file (archsim.inputs): a finished point whose mapping, preset or
trace changed since it ran is run again with a line naming the file, an unchanged one is kept, and a point
stored before digests were recorded is kept with one line saying how many were left unchecked. The digest
itself: a YAML file by its parsed data (a comment is no input), the files a file names followed."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from sweep_fixtures import write_sweep

from archsim import inputs, paths
from archsim.sweep import load_results, run_sweep
from archsim.sweep.store import INPUTS_KEY, ResultsStore

SHIPPED_PRESET = "DDR4_3200AA_x8_8Gb"
PRESET_FILE = paths.PACKAGE_DIR / "presets" / "dram" / f"{SHIPPED_PRESET}.yaml"


def test_a_comment_is_no_input_a_value_is(tmp_path: Path) -> None:
    preset = tmp_path / "dev.yaml"
    text = PRESET_FILE.read_text()
    preset.write_text(text)
    before = inputs.input_digests({"preset": str(preset)})
    preset.write_text("# a comment is no input\n" + text)
    assert inputs.input_digests({"preset": str(preset)}) == before
    assert "\n  nRCD: 22\n" in text
    preset.write_text(text.replace("\n  nRCD: 22\n", "\n  nRCD: 23\n"))
    after = inputs.input_digests({"preset": str(preset)})
    assert inputs.changed_files(before, after) == [str(preset.resolve())]


def test_a_file_named_by_a_file_is_followed(tmp_path: Path) -> None:
    # a preset names its standard (shipped), which names the standards it extends; a user's file `extends` a
    # file beside it
    got = inputs.input_digests({"preset": str(PRESET_FILE)})
    assert {"archsim/presets/dram/standards/ddr4.yaml", "archsim/presets/dram/standards/jedec.yaml"} <= set(got)
    (tmp_path / "base.yaml").write_text("timing: {nRCD: 14}\n")
    (tmp_path / "dev.yaml").write_text("extends: base\norg: {channels: 2}\n")
    before = inputs.input_digests({"preset": str(tmp_path / "dev.yaml")})
    assert {Path(p).name for p in before} == {"base.yaml", "dev.yaml"}
    (tmp_path / "base.yaml").write_text("timing: {nRCD: 15}\n")
    after = inputs.input_digests({"preset": str(tmp_path / "dev.yaml")})
    assert inputs.changed_files(before, after) == [str((tmp_path / "base.yaml").resolve())]


def test_each_systems_named_files_are_inputs() -> None:
    """The keys of every system that name files: T3's preset, its memory preset and ring; PIM-GPT's ASIC; the
    GEMM's NPU preset inside its `npu` section; Duplex's devices preset and the DRAM preset it names; and a
    key the resolver leaves out (dram-trace's `preset`) by the default the system's schema documents."""
    from archsim import registry

    def files(cfg: dict) -> set[str]:
        return set(inputs.input_digests(registry.resolve_config(cfg)))

    assert {"archsim/presets/t3/t3_paper.yaml", "archsim/presets/interconnect/t3_ring.yaml",
            "archsim/presets/dram/HBM2_2Gbps_NMC.yaml"} <= files({"system": "t3_decode"})
    assert {"archsim/presets/asic/pimgpt_asic.yaml", "mappings/pimgpt.yaml"} <= files({"system": "pimgpt"})
    assert "archsim/presets/npu/neupims_npu.yaml" in files({"system": "gemm"})
    assert {"archsim/presets/duplex/devices.yaml", "archsim/presets/dram/HBM3_Duplex.yaml"} <= files(
        {"system": "duplex"})
    trace = {"system": "dram-trace", "trace": {"kind": "random", "requests": 10}}
    assert f"archsim/presets/dram/{SHIPPED_PRESET}.yaml" in files(trace)


def _sweep(tmp_path: Path) -> tuple[Path, Path]:
    """A two-point dram-trace sweep: the shipped DDR4 preset, and a copy of it in tmp_path (same content)."""
    copy = tmp_path / "my_ddr4.yaml"
    copy.write_text(PRESET_FILE.read_text())
    body = {"name": "inputs", "base": {"system": "dram-trace", "preset": SHIPPED_PRESET, "channels": 1,
                                       "trace": {"kind": "random", "requests": 300}},
            "axes": [{"grid": {"preset": [SHIPPED_PRESET, str(copy)]}}]}
    return write_sweep(tmp_path, body), copy


def _cycles(out: Path) -> dict[str, int]:
    stats = load_results(out)[0]
    return {Path(p).stem: int(c) for p, c in zip(stats["preset"], stats["cycles"], strict=True)}


def test_resume_reruns_exactly_the_point_whose_input_changed(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path, copy = _sweep(tmp_path)
    out = tmp_path / "res"
    assert run_sweep(path, out, jobs=1, progress=False).succeeded == 2
    first = _cycles(out)
    assert first["my_ddr4"] == first[SHIPPED_PRESET]        # the same content under two names
    capsys.readouterr()

    again = run_sweep(path, out, jobs=1, progress=False)
    assert (again.skipped, again.succeeded, again.unchecked) == (2, 0, 0)
    assert capsys.readouterr().err == ""

    copy.write_text(copy.read_text().replace("\n  nRCD: 22\n", "\n  nRCD: 40\n"))
    edited = run_sweep(path, out, jobs=1, progress=False)
    assert (edited.skipped, edited.succeeded) == (1, 1)
    err = capsys.readouterr().err
    assert "input file(s) changed since it ran" in err and str(copy.resolve()) in err, err
    now = _cycles(out)
    assert now[SHIPPED_PRESET] == first[SHIPPED_PRESET]
    assert now["my_ddr4"] > first["my_ddr4"]                 # a longer nRCD: the re-run point's result moved

    assert run_sweep(path, out, jobs=1, progress=False).succeeded == 0      # and is now current


def test_a_point_stored_without_digests_is_kept_and_counted(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path, copy = _sweep(tmp_path)
    out = tmp_path / "res"
    run_sweep(path, out, jobs=1, progress=False)
    store = ResultsStore(out)
    legacy = next(p for p in json.loads((out / "manifest.json").read_text())["points"]
                  if p["config"]["preset"] == str(copy))["point_hash"]
    table = pq.read_table(store.table_path(legacy))         # as an older archsim stored it: no input digests
    meta = {k: v for k, v in table.schema.metadata.items() if k != INPUTS_KEY}
    pq.write_table(table.replace_schema_metadata(meta), store.table_path(legacy))
    assert store.recorded_inputs(legacy) is None
    copy.write_text(copy.read_text().replace("\n  nRCD: 22\n", "\n  nRCD: 40\n"))
    capsys.readouterr()

    kept = run_sweep(path, out, jobs=1, progress=False)
    assert (kept.skipped, kept.succeeded, kept.unchecked) == (2, 0, 1)
    err = capsys.readouterr().err
    assert err.count("kept 1 finished point(s) stored without the digests") == 1 and "--force" in err, err

    forced = run_sweep(path, out, jobs=1, progress=False, force=True)
    assert forced.succeeded == 2
    assert store.recorded_inputs(legacy) == inputs.input_digests(
        {"system": "dram-trace", "preset": str(copy), "trace": {"kind": "random", "requests": 300}})
