"""Memory-controller policy (what to issue), separate from the device spec (what is legal, and when)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from archsim import schema
from archsim.dram.mapping import parse_mapping
from archsim.errors import ConfigError, nearest
from archsim.schema import opt

SCHEDULERS = ["frfcfs"]
ROW_POLICIES = ["open", "closed"]
REFRESH_MODES = ["allbank", "perbank", "none"]


@dataclass
class ControllerConfig:
    """Per-channel controller. Queues are per channel; watermarks are fractions of the write queue."""

    scheduler: str = opt("frfcfs", "FR-FCFS: ready row hits first, then oldest", choices=SCHEDULERS)
    row_policy: str = opt("open", "open: leave rows open; closed: auto-precharge the last hit", choices=ROW_POLICIES)
    refresh: str = opt("allbank", "allbank: REFab every nREFI; perbank: REFpb every nREFIpb; none",
                       choices=REFRESH_MODES)
    read_queue: int = opt(32, "read queue entries per channel", minimum=1)
    write_queue: int = opt(32, "write queue entries per channel", minimum=1)
    write_high_watermark: float = opt(0.8, "start draining writes at this fill of the write queue", minimum=0,
                                      maximum=1)
    write_low_watermark: float = opt(0.2, "stop draining (if reads wait) at this fill", minimum=0, maximum=1)
    mapping: str | None = opt(None, "address mapping, MSB..LSB, e.g. RoBaRaCoCh or rorabgbachco; null: the "
                              "preset's default (its `mapping:`, else RoBaRaCoCh)")
    frontend_width: int = opt(1, "requests the frontend may offer per cycle (trace convention: 1)", minimum=1)
    active_buffer: bool = opt(False, "Ramulator 2.1: a request whose ACT issued is served before its row closes")

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
        try:
            if self.mapping is not None:
                parse_mapping(self.mapping)
        except Exception as exc:
            raise ConfigError("controller.mapping", str(exc), source=source) from None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
