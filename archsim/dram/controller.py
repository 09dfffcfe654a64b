"""Memory-controller policy (what to issue), separate from the device spec (what is legal, and when)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from archsim import schema
from archsim.dram.mapping import parse_mapping
from archsim.errors import ConfigError, NotBuilt, nearest
from archsim.limits import MAX_QUEUE
from archsim.schema import opt

SCHEDULERS = ["frfcfs"]
ROW_POLICIES = ["open", "closed"]
REFRESH_MODES = ["allbank", "perbank", "none"]
CONVENTIONS_FILE = Path(__file__).resolve().parent.parent / "presets" / "controller_conventions.yaml"
DEFAULT_CONVENTION = "archsim"


@cache
def conventions() -> dict[str, dict[str, Any]]:
    """The reference simulators' controller conventions (archsim/presets/controller_conventions.yaml)."""
    return yaml.safe_load(CONVENTIONS_FILE.read_text())


def convention_names() -> list[str]:
    return list(conventions())


def convention_note(preset: str, convention: str) -> str | None:
    """A one-line note when a run uses archsim's own controller on a preset made for a reference's convention
    (its `presets:`): its figures are then archsim's controller's, not the reference's (issue 39)."""
    if convention != DEFAULT_CONVENTION:
        return None
    for name, conv in conventions().items():
        if preset in conv.get("presets", ()):
            return (f"{preset} is a device of the `{name}` convention; this run uses archsim's own controller "
                    f"(add --set controller.convention={name} to reproduce {name}, reports/dram_fidelity/)")
    return None


@dataclass
class ControllerConfig:
    """Per-channel controller. Queues are per channel; watermarks are fractions of the write queue."""

    scheduler: str = opt("frfcfs", "FR-FCFS: ready row hits first, then oldest", choices=SCHEDULERS)
    row_policy: str = opt("open", "open: leave rows open; closed: auto-precharge the last hit", choices=ROW_POLICIES)
    refresh: str = opt("allbank", "allbank: REFab every nREFI; perbank: REFpb every nREFIpb; none",
                       choices=REFRESH_MODES)
    read_queue: int = opt(32, "read queue entries per channel", minimum=1, maximum=MAX_QUEUE)
    write_queue: int = opt(32, "write queue entries per channel", minimum=1, maximum=MAX_QUEUE)
    write_high_watermark: float = opt(0.8, "start draining writes at this fill of the write queue", minimum=0,
                                      maximum=1)
    write_low_watermark: float = opt(0.2, "stop draining (if reads wait) at this fill", minimum=0, maximum=1)
    mapping: str | None = opt(None, "address mapping, MSB..LSB, e.g. RoBaRaCoCh or rorabgbachco; null: the "
                              "preset's default (its `mapping:`, else RoBaRaCoCh)")
    frontend_width: int = opt(1, "requests the frontend may offer per cycle (trace convention: 1)", minimum=1,
                              maximum=MAX_QUEUE)
    active_buffer: bool = opt(False, "Ramulator 2.1: a request whose ACT issued is served before its row closes")
    pinned_leave_queue: bool = opt(False, "Ramulator 2.1: a pinned request (active buffer) leaves its read or write "
                                   "queue, freeing the entry and no longer counting for the write watermarks")
    row_hit_cap: int = opt(0, "DRAMsim3: once the open row of a bank has served this many column commands, the "
                           "bank's oldest request goes first even if it needs a precharge (0: hits always first)",
                           minimum=0)
    rfm_threshold: int = opt(0, "refresh management (DDR5 RFM): once a bank has opened this many rows, its rank "
                             "gets an RFM command (issued like an all-bank refresh, nRFM long) and the rank's "
                             "activate counts start again; Ramulator 2.1's RFMManager uses 80 (0: off). Needs a "
                             "standard with an RFM command (preset DDR5_4800AN_x8_16Gb_RFM)", minimum=0)
    refresh_stagger: bool = opt(False, "DRAMsim3: all-bank refreshes of the ranks of a channel spread over nREFI "
                                "(rank r first due at (r + 1) * (nREFI // ranks), each every ranks * (nREFI // "
                                "ranks)) instead of all due together")
    bank_command_queue: int = opt(0, "DRAMsim3: entries of a command queue per bank; > 0 puts the read and write "
                                  "queues (its transaction queue and write buffer) in front of them: one transaction "
                                  "moves down per cycle, bank queues served round robin, the first ready command of "
                                  "a queue in queue order (0: archsim's FR-FCFS over the queues)", minimum=0,
                                  maximum=MAX_QUEUE)
    write_drain_idle: int = opt(8, "DRAMsim3 (with bank_command_queue): drain the write queue when it is full, or "
                                "holds more than this many writes while every command queue is empty", minimum=0)
    posted_writes: bool = opt(False, "DRAMsim3 (with bank_command_queue): a write is acknowledged (done) the cycle "
                              "after it is accepted, its command issues later; a read of a waiting write's "
                              "address is answered from it, a write to one merged with it")
    merge_reads: bool = opt(False, "DRAMsim3 (with bank_command_queue): a read of the address of a read still "
                            "queued is merged with it and done when that read's command completes")
    stream_reserve: bool = opt(True, "while a stream's next command is an open it cannot issue yet (timing, a "
                               "refresh it waits for), no rw source may open a bank of its target (archsim's "
                               "default); false: rw sources open any bank timing allows (NewtonSim's NeuPIMs "
                               "controller reserves no bank for PIM, only skips the PIM row)")
    convention: str = opt(DEFAULT_CONVENTION, "a reference simulator's controller and front-end conventions "
                          "(archsim/presets/controller_conventions.yaml): archsim, ramulator2; keys left at "
                          "archsim's defaults take the convention's values", choices=convention_names)

    def __post_init__(self) -> None:
        conv = conventions().get(self.convention)
        if conv is None:
            return          # validate() names the allowed values
        if "not_built" in conv:
            raise NotBuilt(f"controller.convention={self.convention}: {conv['not_built']}")
        defaults = {f.name: f.default for f in fields(self)}
        for key, value in (conv.get("controller") or {}).items():
            if getattr(self, key) == defaults[key]:
                setattr(self, key, value)

    @property
    def run_end(self) -> str:
        """When a trace run ends for `cycles`: last_done (archsim) or last_accept (Ramulator 2.1's loop)."""
        return conventions()[self.convention]["run_end"]

    def for_standard(self, standard: str) -> ControllerConfig:
        """The convention's front end on a device of this standard (a preset's `standard:`): a reference that
        ticks the device faster than its CK offers more requests per CK (the convention's
        `frontend_width_per_standard`, e.g. Ramulator 2.1 on HBM3). A frontend_width set to another value than
        the convention's wins."""
        conv = conventions()[self.convention]
        width = (conv.get("frontend_width_per_standard") or {}).get(standard)
        if width is None or self.frontend_width != (conv.get("controller") or {}).get("frontend_width", 1):
            return self
        return replace(self, frontend_width=int(width))

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, source: str = "controller") -> ControllerConfig:
        data = dict(data or {})
        names = [f.name for f in fields(cls)]
        for key in data:
            if key not in names:
                hint = nearest(key, names)
                raise ConfigError(f"controller.{key}", "unknown key" + (f"; did you mean {', '.join(hint)}?" if hint
                                  else f"; allowed: {', '.join(names)}"), source=source)
        cfg = cls(**data)
        cfg.validate(source)
        return cfg

    def validate(self, source: str = "controller") -> None:
        # each field: type, allowed values and range from its declaration above (archsim.schema); then the
        # rules between fields
        schema.check_values(ControllerConfig, asdict(self), "controller.", source)
        hi, lo = float(self.write_high_watermark), float(self.write_low_watermark)
        if not (0 <= lo < hi <= 1):
            raise ConfigError("controller.write_low_watermark",
                              f"need 0 <= low < high <= 1, got low={lo}, high={hi}", source=source)
        # The kernel works with whole entries: the rounded watermarks must still differ.
        if round(hi * self.write_queue) <= round(lo * self.write_queue) or round(hi * self.write_queue) < 1:
            raise ConfigError("controller.write_high_watermark",
                              f"with write_queue={self.write_queue}, high={hi} and low={lo} round to "
                              f"{round(hi * self.write_queue)} and {round(lo * self.write_queue)} entries; "
                              "they must differ (use a larger queue or further-apart watermarks)", source=source)
        if self.refresh_stagger and self.refresh == "perbank":
            raise ConfigError("controller.refresh_stagger", "staggers all-bank refreshes only; with refresh: "
                              "perbank set it false (allowed with refresh: allbank or none)", source=source)
        if self.rfm_threshold > 0 and (self.refresh == "perbank" or self.bank_command_queue > 0):
            raise ConfigError("controller.rfm_threshold", "RFM is modelled with refresh: allbank or none and "
                              "bank_command_queue: 0 (set those, or rfm_threshold: 0)", source=source)
        if self.bank_command_queue > 0 and (self.row_policy != "open" or self.active_buffer
                                            or self.pinned_leave_queue):
            raise ConfigError("controller.bank_command_queue", "DRAMsim3's queues are modelled with row_policy: "
                              "open and without active_buffer / pinned_leave_queue (set those, or "
                              "bank_command_queue: 0)", source=source)
        if self.posted_writes and self.bank_command_queue == 0:
            raise ConfigError("controller.posted_writes", "needs bank_command_queue > 0 (DRAMsim3's write buffer); "
                              "allowed: false, or set bank_command_queue", source=source)
        if self.merge_reads and self.bank_command_queue == 0:
            raise ConfigError("controller.merge_reads", "needs bank_command_queue > 0 (DRAMsim3's queues); allowed: "
                              "false, or set bank_command_queue", source=source)
        try:
            if self.mapping is not None:
                parse_mapping(self.mapping)
        except Exception as exc:
            raise ConfigError("controller.mapping", str(exc), source=source) from None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        # keys added by issue 24 stay out of configs that leave them at their defaults (so their hashes stay)
        if out["convention"] == DEFAULT_CONVENTION:
            del out["convention"]
        for key in ("pinned_leave_queue", "row_hit_cap", "refresh_stagger", "bank_command_queue", "posted_writes",
                    "merge_reads", "rfm_threshold"):
            if not out[key]:
                del out[key]
        if out["stream_reserve"]:       # (issue 33) left out at its default, so existing configs' hashes stay
            del out["stream_reserve"]
        if not self.bank_command_queue:
            del out["write_drain_idle"]
        return out
