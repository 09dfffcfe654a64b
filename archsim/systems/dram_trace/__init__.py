"""System `dram-trace`: trace-driven DRAM runs (system.py), also exposed as archsim.run_trace()."""
from archsim.systems.dram_trace import system  # noqa: F401  (registers the system)
