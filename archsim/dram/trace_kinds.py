"""The kinds of synthetic traces (archsim.dram.trace generates them). Light to import: config schemas list them
in their help and checks, which must not load the trace module's numpy."""
SYNTHETIC_KINDS = ("random", "stream", "mixed", "conflict")
