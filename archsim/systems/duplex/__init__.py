"""System `duplex`: xPU + Logic-PIM serving and its baselines (system.py: config and run; compiler.py: devices,
mapping policy and operator costs; serving.py: Duplex's continuous batcher and request traces)."""
from archsim.systems.duplex import system  # noqa: F401  (registers the system)
