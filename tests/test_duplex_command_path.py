"""Issue 34, Duplex: Logic-PIM's command path as a named choice of the Logic-PIM standard extension (every
standard that includes it takes it), selectable per run, and the interference-aware co-processing split."""
from __future__ import annotations

import pytest

from archsim.config import deep_merge
from archsim.dram.spec import extension_options, load_spec
from archsim.errors import ConfigError
from archsim.systems.duplex.compiler import make_device
from archsim.systems.duplex.system import DuplexConfig, DuplexRun, setup

LOGIC_PIM_PRESETS = ["HBM3_Duplex", "HBM3_6400Mbps_LogicPIM", "HBM2_2Gbps_LogicPIM"]


def _with(preset: str, path: str):
    return load_spec(deep_merge(load_spec(preset).raw, {"extension_options": {"logic_pim": {"command_path": path}}}))


@pytest.mark.parametrize("preset", LOGIC_PIM_PRESETS)
def test_every_logic_pim_memory_takes_the_command_path(preset):
    spec = load_spec(preset)
    default = extension_options("logic_pim")["command_path"]["default"]
    assert spec.options == {"logic_pim.command_path": default} == {"logic_pim.command_path": "own_path"}
    bus = {p: {c.name: c.bus for c in _with(preset, p).commands if c.name in ("RDBD", "WRBD", "ACTBD")}
           for p in ("own_path", "shared_column_bus")}
    assert bus["shared_column_bus"] == {"RDBD": "column", "WRBD": "column", "ACTBD": "row"}
    assert bus["own_path"] == {"RDBD": "row", "WRBD": "row", "ACTBD": "row"}


def test_a_bad_command_path_names_the_allowed_values():
    with pytest.raises(ConfigError, match="own_path, shared_column_bus"):
        _with("HBM3_Duplex", "tsv")
    with pytest.raises(ConfigError, match="no such option"):
        load_spec(deep_merge(load_spec("HBM3_Duplex").raw, {"extension_options": {"logic_pim": {"bus": "x"}}}))
    with pytest.raises(ConfigError, match="includes no extension"):
        load_spec(deep_merge(load_spec("HBM3_6400Mbps").raw,
                             {"extension_options": {"logic_pim": {"command_path": "own_path"}}}))
    with pytest.raises(ConfigError, match="command_path"):
        setup({"command_path": "tsv"})


def test_the_config_key_is_documented_and_reaches_the_device():
    field = DuplexConfig.__dataclass_fields__["command_path"]
    assert field.metadata["choices"] == ("own_path", "shared_column_bus") and "command" in field.metadata["help"]
    assert setup({}).command_path == "own_path"
    assert setup({"command_path": "shared_column_bus"}).command_path == "shared_column_bus"
    dev = make_device("duplex", command_path="shared_column_bus")
    assert dev.spec.options["logic_pim.command_path"] == dev.timer.spec.options["logic_pim.command_path"]
    with pytest.raises(ValueError, match="timer"):      # a timer of the other path is refused, not mixed in
        make_device("duplex", timer=dev.timer)


# GLaM on a small case (8 devices, 8 experts each over 4 bundle spaces): the paper's lookup-table split loses
# to plain Duplex once the interference of the shared column bus is paid
SMALL = {"model": "glam", "requests": 32, "input_len": 256, "output_len": 64, "max_batch": 32}
PE = {"expert_coprocessing": True}


@pytest.fixture(scope="module")
def glam_shared():
    timer = make_device("duplex", command_path="shared_column_bus").timer

    def go(**cfg):
        return DuplexRun({**SMALL, "command_path": "shared_column_bus", **cfg}, timer=timer).run().stats
    return {"plain": go(), "table": go(coprocessing_split="lookup_table", **PE), "aware": go(**PE)}


def test_the_interference_aware_split_never_loses_where_the_table_split_did(glam_shared):
    tok = {k: v["throughput_tokens_per_s"] for k, v in glam_shared.items()}
    assert tok["table"] < tok["plain"], tok                    # the old policy lost here
    assert tok["aware"] >= tok["plain"] * (1 - 1e-9), tok      # the new one never does
    aware = glam_shared["aware"]
    assert aware["coprocessing_split"] == "interference_aware" and aware["command_path"] == "shared_column_bus"
    assert aware["coprocessing_expert_splits"] > 0 and aware["coprocessing_expert_split_changed"] > 0
    assert glam_shared["table"]["coprocessing_expert_splits"] == 0     # the table rule does not cost candidates
