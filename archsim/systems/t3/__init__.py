"""Systems `t3` (one tensor-parallel sublayer, GEMM overlapped with its collectives: system.py, config and run;
sim.py the model and its assumptions, params.py the preset, shapes.py the sublayer, tracker.py the tracker) and
`t3_decode` (a whole decode step on T3 devices: decode.py)."""
from __future__ import annotations

from typing import Any

from archsim import metrics
from archsim.registry import System, register
from archsim.results import Result
from archsim.stats_names import from_code
from archsim.systems.t3 import decode, system


@register
class T3(System):
    """One tensor-parallel sublayer (GEMM, reduce-scatter, all-gather) in the configurations Sequential, T3 (the
    GEMM's stores fused with the reduce-scatter by a tracker) and T3-MCA (with memory-controller arbitration);
    Ideal overlap is derived from the Sequential run."""

    name = "t3"
    config = system.T3Config
    examples = system.EXAMPLES
    features = system.MODEL_FEATURES
    stats = from_code((system.run_sublayer, "stats"), (system._against_sequential, "stats"),
                      (system._per_config, "stats"))
    resolve = staticmethod(system.resolve)

    @classmethod
    def run(cls, config: dict[str, Any], seed: int = 0) -> Result:
        return system.run_config(config, seed)


@register
class T3Decode(System):
    """A whole decode step of a model on T3 devices: per layer, the attention out-projection and FC-2 fused with
    their reduce-scatter and the column-parallel GEMMs simulated on the channel engine as system t3 does, the
    attention by the GPU's roofline; mixture-of-experts layers with tensor-parallel experts."""

    name = "t3_decode"
    config = decode.T3DecodeConfig
    features = decode.MODEL_FEATURES
    examples = "  archsim run --system t3_decode --set model=gpt3-7b --set tp=4 --set batch=64 --set context=1024"
    stats = from_code((decode.decode_step, "stats"), metrics.NAMES)
    resolve = staticmethod(decode.resolve)

    @classmethod
    def run(cls, config: dict[str, Any], seed: int = 0) -> Result:
        return decode.run_config(config, seed)
