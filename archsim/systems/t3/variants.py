"""The configurations system `t3` simulates (`configs`), each a class with its own knobs and what it does: whether
the GEMM's stores are fused with the reduce-scatter, how the memory controller arbitrates between the GEMM's
and the collective's requests, and MCA's occupancy threshold (archsim.systems.t3.sim asks the class)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from archsim.systems.t3.params import T3Params


@dataclass(frozen=True)
class Sequential:
    """configs entry `sequential`: the GEMM, then an NCCL-like ring reduce-scatter; no knobs of its own."""

    name: ClassVar[str] = "sequential"
    # the GEMM stores its outputs and the ring reduce-scatter reads them after it; no tracker
    fused: ClassVar[bool] = False

    @staticmethod
    def arbitration(params: T3Params) -> tuple[str, int]:
        """(the channel engine's arbitration between the compute and comm sources, its starvation cap)."""
        return "frfcfs", 0

    @staticmethod
    def threshold(params: T3Params, first_accesses: int, first_cycles: int) -> int | None:
        """The comm source's occupancy threshold (None: no threshold; only MCA has one)."""
        return None

    @staticmethod
    def retunes(params: T3Params) -> bool:
        """Whether the threshold is re-estimated per K step from the observed intensity."""
        return False


@dataclass(frozen=True)
class Fused(Sequential):
    """configs entry `t3`: the GEMM's stores fused with the reduce-scatter by the tracker (key path
    `tracker_entries`)."""

    name: ClassVar[str] = "t3"
    fused: ClassVar[bool] = True      # stores update the neighbour's buffer; the tracker fires the collective
    tracker_entries: int


@dataclass(frozen=True)
class FusedMca(Fused):
    """configs entry `t3-mca`: T3 with the memory controller's arbitration (key paths `tracker_entries`,
    `mca_threshold`, `starvation_cap_cycles`, `mca_gate`): the comm source is held back while the compute
    source's queue occupancy is above the threshold, at most `starvation_cap_cycles`."""

    name: ClassVar[str] = "t3-mca"
    tracker_entries: int
    mca_threshold: int | str
    starvation_cap_cycles: int
    mca_gate: str

    @staticmethod
    def arbitration(params: T3Params) -> tuple[str, int]:
        from archsim.systems.t3.params import MCA_GATES

        return MCA_GATES[params.mca_gate], params.starvation_cap_cycles

    @staticmethod
    def threshold(params: T3Params, first_accesses: int, first_cycles: int) -> int | None:
        """The paper's first-stage estimate (mca_threshold below), or the fixed value."""
        return mca_threshold(params, first_accesses, first_cycles)

    @staticmethod
    def retunes(params: T3Params) -> bool:
        return params.mca_threshold == "dynamic"


def mca_threshold(params: T3Params, accesses: int, cycles: int) -> int:
    """T3-MCA's occupancy threshold from a memory intensity (the paper: estimated from the kernel's memory
    intensity, first at its first stage): the compute source's Little's-law queue entries per channel,
    accesses / channels / cycles x the closed-row read latency (the constraint rows: ACT -> RD plus RD's
    completion), rounded up, at least 1 and at most the compute queues' capacity. Above it the compute source
    is queued beyond what its own rate needs, and communication waits. An integer `mca.threshold` fixes it."""
    if params.mca_threshold not in ("auto", "dynamic"):
        return int(params.mca_threshold)
    from archsim.dram.controller import ControllerConfig
    from archsim.dram.latency import closed_row_read

    ctrl = ControllerConfig.from_dict(params.controller)
    per_ch_rate = accesses / params.spec.channels / max(cycles, 1)
    entries = math.ceil(per_ch_rate * closed_row_read(params.spec) - 1e-9)
    return int(min(ctrl.read_queue + ctrl.write_queue, max(1, entries)))


# each configuration's sub-config, built from the top-level keys of the same names (key paths unchanged); its
# fields are T3Params fields, set on the preset for that configuration's run only
VARIANT_CONFIGS: dict[str, type[Sequential]] = {"sequential": Sequential, "t3": Fused, "t3-mca": FusedMca}
Variant = Sequential | Fused | FusedMca
