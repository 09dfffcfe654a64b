"""Systems `t3` (one tensor-parallel sublayer, GEMM overlapped with its collectives: system.py, config and run;
sim.py the model and its assumptions, params.py the preset, shapes.py the sublayer, tracker.py the tracker) and
`t3_decode` (a whole decode step on T3 devices: decode.py)."""
from archsim.systems.t3 import decode, system  # noqa: F401  (register the systems)
