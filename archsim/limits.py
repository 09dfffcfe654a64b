"""What a user's input may ask archsim to hold (issue 35): one place for every bound on a count or a value, each
with the reason it is where it is. A value beyond one is refused before anything runs, in one line that names
the limit (archsim.schema `maximum=`, archsim.config.require_int, the sweep's point count).

The bounds are far above anything physical or shipped, and below what would exhaust this machine's memory,
overflow the channel engine's integers or run for days.
"""
from __future__ import annotations

# A DRAM timing parameter, in cycles. The longest shipped one is 12,480 (DDR4's nREFI); the channel engine
# takes 2^24 cycles in which nothing issues while work is left for a deadlock (archsim.engine.channel.
# STALL_CYCLES), which a few waits of the longest timing in a row must not reach.
MAX_TIMING_CYCLES = 1 << 20
TIMING_WHY = "2^20 cycles; the channel engine takes 2^24 idle cycles for a deadlock"

# A DRAM clock period in picoseconds: 1 THz to 1 MHz, any DRAM clock with room on both sides.
TCK_PS_RANGE = (1.0, 1e6)

# Channels of one device, and banks in all: the engine keeps state per channel and per bank (65,536 DDR4
# channels took 0.45 GB and 3.7 s before the first request; 2^20 ran until killed). The largest shipped
# device has 64 channels (HBM3, 32 pseudo-channels x 2).
MAX_CHANNELS = 4096
MAX_BANKS = 1 << 18
# Byte addresses are 64-bit integers in the engine; a device's capacity stays well inside them.
MAX_CAPACITY_BYTES = 1 << 60

# Read and write queue entries per channel. Controllers hold tens; the engine's FR-FCFS scan keys hold a
# request's list position in 16 bits (archsim.engine.channel.KEY_SHIFT).
MAX_QUEUE = 4096

# Requests of one trace run (a trace file or a synthetic trace): ~45 bytes each in the engine, so 2^26 take
# ~3 GB and minutes; a trace file is bounded by its size (archsim.dram.trace.MAX_TRACE_BYTES) the same way.
MAX_TRACE_REQUESTS = 1 << 26

# Requests a serving run serves, a batch's requests, a GEMM's tokens: 2^16, far above the papers' (NeuPIMs
# and Duplex serve hundreds to a few thousand requests, batches of up to 512).
MAX_BATCH = 1 << 16

# Points of one sweep run without --max-points: every point is expanded and checked before the first runs
# (~10-50 ms each), and each runs a simulation.
MAX_SWEEP_POINTS = 1000
