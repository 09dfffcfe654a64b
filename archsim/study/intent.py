"""What a study's design adapter receives and may raise (archsim/systems/<name>/study.py): one point of the
study in the study's own terms (Intent, Memory) and the refusal of a point the design cannot model.

Kept apart from the study's front (spec, plan, report) so that the system packages, which sit below the
front in the import layers (docs/extending.md), depend only on this small interface.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class Refusal(Exception):
    """A point a design cannot model; the message is the one-line reason the results record."""


@dataclass(frozen=True)
class Memory:
    """`generation x stacks` (per device), or the paper's own memory of each design (`paper`)."""

    generation: str            # hbm2 | hbm3 | paper
    stacks: int = 0

    @property
    def label(self) -> str:
        return "paper" if self.generation == "paper" else f"{self.generation} x {self.stacks}"


@dataclass(frozen=True)
class Intent:
    """One point of a study, in the study's terms."""

    system: str
    model: str
    memory: Memory
    batch: int
    input_len: int
    output_len: int
    tp: int
    options: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def mean_context(self) -> int:
        """The mean KV context of a request's decode steps (contexts input_len + 1 .. input_len + output_len)."""
        return self.input_len + (self.output_len + 1) // 2
