"""System `pimgpt`: PIM-GPT decode on GDDR6-AiM channels + the non-linear ASIC (system.py: config and run;
compiler.py: weight layout and PIM command streams; emit.py: `archsim compile`; overlap.py: the overlapped
schedule on the event loop)."""
from archsim.systems.pimgpt import system  # noqa: F401  (registers the system)
