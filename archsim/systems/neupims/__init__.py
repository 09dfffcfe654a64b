"""Systems `neupims` and its baselines `npu_pim`, `npu_only`, `gpu_only`, `gpu_roofline` (system.py: config,
model and run; compiler.py: the attention PIM command streams)."""
from archsim.systems.neupims import system  # noqa: F401  (registers the systems)
