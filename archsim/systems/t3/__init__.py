"""System `t3`: one tensor-parallel sublayer, GEMM overlapped with its collectives (system.py: config and run;
model.py: the model, its tracker and its assumptions)."""
from archsim.systems.t3 import system  # noqa: F401  (registers the system)
