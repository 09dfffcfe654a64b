"""Every kind of hardware preset archsim ships, in one table: where its files live and the schema that reads
them (`archsim presets list/show`). DRAM presets have their own loader (archsim.dram.spec: standards,
derived timings); every other kind is a frozen schema dataclass read by archsim.schema.load_preset."""
from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archsim import paths


@dataclass(frozen=True)
class PresetKind:
    name: str            # as `archsim presets show KIND/NAME` takes it
    label: str           # in errors: "NPU"
    folder: str          # under archsim/presets/
    schema: str          # "module:Class"
    what: str

    @property
    def directory(self) -> Path:
        return paths.PACKAGE_DIR / "presets" / self.folder

    def names(self) -> list[str]:
        return sorted(p.stem for p in self.directory.glob("*.yaml"))

    def schema_class(self) -> type:
        module, _, cls = self.schema.partition(":")
        return getattr(importlib.import_module(module), cls)

    def load(self, name_or_path: str | Path) -> Any:
        from archsim import schema

        preset, _ = schema.load_preset(self.schema_class(), self.label, self.directory, name_or_path)
        return preset


KINDS = (
    PresetKind("npu", "NPU", "npu", "archsim.npu.config:NpuConfig", "systolic array, buffers, vector units"),
    PresetKind("asic", "ASIC", "asic", "archsim.host.asic:AsicConfig", "PIM-GPT's ASIC: timing, algorithms, energies"),
    PresetKind("baseline", "baseline", "baselines", "archsim.host.baselines:BaselinePreset",
               "a GPU or CPU with its framework (roofline + host overhead)"),
    PresetKind("interconnect", "interconnect", "interconnect", "archsim.interconnect.ring:RingPreset",
               "links of a ring of devices"),
    PresetKind("t3", "T3", "t3", "archsim.systems.t3.params:T3Preset", "T3's GPU, memory and T3 hardware"),
    PresetKind("duplex", "Duplex devices", "duplex", "archsim.pim.logic_pim:DuplexDevices",
               "Duplex's xPU, links, low-Op/B processors and Logic-PIM"),
)


def kind(name: str) -> PresetKind:
    from archsim.errors import unknown_name

    for k in KINDS:
        if k.name == name:
            return k
    raise unknown_name("preset kind", name, ["dram", *(k.name for k in KINDS)])


def as_dict(preset: Any) -> dict[str, Any]:
    """A loaded preset as plain data (tuples as lists), for `presets show`."""
    def plain(value: Any) -> Any:
        if isinstance(value, tuple | list):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    return plain(dataclasses.asdict(preset))
