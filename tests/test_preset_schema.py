"""Presets as schemas (issue 36 item 1): every preset kind read by one loader (archsim.schema.load_preset),
errors at the file, key path and line, `extends:` and overrides by key path, `archsim presets show KIND/NAME`."""
from __future__ import annotations

import pytest

from archsim import preset_kinds, schema
from archsim.cli import main
from archsim.errors import ConfigError
from archsim.npu.config import NpuConfig, load_npu_config


@pytest.mark.parametrize("kind", preset_kinds.KINDS, ids=lambda k: k.name)
def test_every_shipped_preset_of_every_kind_loads_into_its_schema(kind):
    names = kind.names()
    assert names, f"no {kind.name} presets shipped"
    for name in names:
        preset = kind.load(name)
        assert isinstance(preset, kind.schema_class())


@pytest.mark.parametrize("kind", preset_kinds.KINDS, ids=lambda k: k.name)
def test_presets_show_prints_every_kind(kind, capsys):
    assert main(["presets", "show", f"{kind.name}/{kind.names()[0]}"]) == 0
    assert capsys.readouterr().out.strip()


def test_unknown_key_and_bad_value_name_file_key_and_line(tmp_path):
    path = tmp_path / "npu.yaml"
    base = (preset_kinds.kind("npu").directory / "neupims_npu.yaml").read_text()
    path.write_text(base.replace("  width: 128", "  widht: 128"))
    with pytest.raises(ConfigError) as info:
        load_npu_config(path)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "widht" in text)
    assert str(info.value).startswith(f"{path}:{line}: systolic.widht: unknown key; allowed keys: ")
    path.write_text(base.replace("  height: 128", "  height: -4"))
    with pytest.raises(ConfigError, match=r"npu\.yaml:\d+: systolic\.height: must be an integer >= 1, got -4"):
        load_npu_config(path)


def test_extends_takes_every_value_the_file_does_not_set(tmp_path):
    path = tmp_path / "small.yaml"
    path.write_text("extends: neupims_code\nsystolic:\n  height: 32\n")
    small, code = load_npu_config(path), load_npu_config("neupims_code")
    assert small.height == 32 and small.width == code.width and small.vector == code.vector
    assert small.ws_preload_rule == code.ws_preload_rule and small.dma == code.dma
    loop = tmp_path / "loop.yaml"
    loop.write_text("extends: loop\n")
    with pytest.raises(ConfigError, match="extends: cycle"):
        load_npu_config(loop)


def test_an_override_is_checked_and_blamed_on_where_it_was_given():
    assert load_npu_config(height=64).height == 64
    with pytest.raises(ConfigError, match=r"^--set: systolic\.height: must be an integer >= 1, got 0"):
        load_npu_config(height=0)
    with pytest.raises(ConfigError, match="heigth: not an NpuConfig field"):
        load_npu_config(heigth=64)


def test_a_required_key_a_file_leaves_out_is_missing_but_code_may_default_it(tmp_path):
    path = tmp_path / "npu.yaml"
    base = (preset_kinds.kind("npu").directory / "neupims_npu.yaml").read_text()
    path.write_text("\n".join(line for line in base.splitlines() if "accumulator_bytes" not in line) + "\n")
    with pytest.raises(ConfigError, match="memory.accumulator_bytes: missing"):
        load_npu_config(path)
    assert NpuConfig().accumulator_bytes == 1 << 20


def test_built_in_code_the_same_declarations_are_checked():
    with pytest.raises(ConfigError, match="dataflow: must be one of ws, os"):
        NpuConfig(dataflow="is")
    from archsim.interconnect.ring import RingConfig

    with pytest.raises(ConfigError, match="devices: must be an integer >= 2"):
        RingConfig(devices=1, link_bytes_per_s=1e9, hop_latency_s=0.0)


def test_a_list_of_a_tuple_field_is_held_as_a_tuple():
    code = load_npu_config("neupims_code")
    assert isinstance(code.vector.size_zero_ops, tuple) and code.vector.size_zero_ops
    hash(code.vector.size_zero_ops)


def test_keys_report_the_file_path_of_a_field_held_flat():
    paths = [k.path for k in schema.keys(NpuConfig)]
    assert "systolic.height" in paths and "memory.dma" in paths and "vector.lanes" in paths


def test_set_reaches_every_npu_and_asic_preset_value_by_its_key_path():
    """`--set npu_overrides.<path>` (NeuPIMs) and `asic_overrides.<path>` (PIM-GPT): the settable keys are the
    presets' own key paths (overrides_of), each checked against the preset's schema and blamed on the config key."""
    from archsim.keypaths import config_leaves
    from archsim.systems.neupims.config import setup as neupims_setup
    from archsim.systems.pimgpt.system import setup as pimgpt_setup

    npu_keys = {k for k in config_leaves({"system": "neupims"}) if k.startswith("npu_overrides.")}
    assert {"npu_overrides.systolic.height", "npu_overrides.memory.dma", "npu_overrides.vector.lanes"} <= npu_keys
    assert neupims_setup({"system": "neupims", "npu_overrides": {"systolic": {"height": 64}}}).npu.height == 64
    with pytest.raises(ConfigError, match=r"^npu_overrides: systolic\.height: must be an integer >= 1, got 0"):
        neupims_setup({"system": "neupims", "npu_overrides": {"systolic": {"height": 0}}})
    asic_keys = {k for k in config_leaves({"system": "pimgpt"}) if k.startswith("asic_overrides.")}
    assert {"asic_overrides.lanes", "asic_overrides.algorithms.exp_taylor_degree",
            "asic_overrides.energy.at_reference_node.fp32_add_pj"} <= asic_keys
    su = pimgpt_setup({"system": "pimgpt", "asic_overrides": {"lanes": 64}, "asic_clock_hz": 5e8})
    assert (su.asic.config.lanes, su.asic.config.clock_hz) == (64, 5e8)
    with pytest.raises(ConfigError, match=r"^asic_overrides: lanez: unknown key"):
        pimgpt_setup({"system": "pimgpt", "asic_overrides": {"lanez": 64}})
