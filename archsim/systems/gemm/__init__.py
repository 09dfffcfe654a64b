"""System `gemm`: one GEMM on one systolic array (system.py)."""
from archsim.systems.gemm import system  # noqa: F401  (registers the system)
