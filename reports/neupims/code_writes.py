"""Where the softmax results' writes land in NeuPIMs' npu+pim run, channel by channel, from its per-channel traffic
logs: writes code_writes.csv.

Run:  .venv/bin/python reports/neupims/code_writes.py LOG_DIR [-o DIR]

LOG_DIR is the log folder of the npu+pim branch's run of the case npupim-baseline_gpt3-7B_tp4_bs512_clb0 (as for
code_channels.py). The logits operation writes each request's softmax results out (a MOVOUT per head after its
GEMVs, [npu+pim] src/operations/NeuPIMSLogitSoftmax.cc:270-290), the attend its outputs; the core puts a MOVOUT's
writes into the same per-channel request queue as the PIM instructions (src/NeuPIMSystolicWS.cc:221-254,
src/Core.cc:230-246), and the Newton controller takes no read or write while its PIM queue holds a command
(extern/NewtonSim/src/newton_command_queue.cc:153-165). A write served inside a channel's own PIM work would stall
that work; these rows show how much of each channel's write traffic fell there.

Columns, for each operation (logits, attend): {op}_pim_first / {op}_pim_last (start of the first and last log
interval, from the operation's start, in which the channel returned READRES data), {op}_write_bytes (bytes written
to the channel during the operation), {op}_write_bytes_in_pim (of them, in the intervals from its first to its last
READRES interval), {op}_write_intervals_in_pim (those intervals with writes), {op}_first_write_in_pim (the first of
them, from the operation's start; -1: none), {op}_pim_intervals (intervals in that span); interval (cycles per log
interval).
"""
from __future__ import annotations

from pathlib import Path

import code_channels
import pandas as pd

CHANNELS = code_channels.CHANNELS


def build(log_dir: Path) -> pd.DataFrame:
    rows = []
    for ch, interval, parts in code_channels.channel_logs(log_dir):
        row = {"channel": ch, "interval": interval}
        for op, (start, during) in parts.items():
            busy = during[during["PIMReads"] > 0]
            first, last = int(busy["StartCycle"].min()), int(busy["StartCycle"].max())
            inside = during[(during["StartCycle"] >= first) & (during["StartCycle"] <= last)]
            row[f"{op}_pim_first"] = first - start
            row[f"{op}_pim_last"] = last - start
            row[f"{op}_pim_intervals"] = len(inside)
            row[f"{op}_write_bytes"] = int(during["MemoryWrites"].sum())
            row[f"{op}_write_bytes_in_pim"] = int(inside["MemoryWrites"].sum())
            row[f"{op}_write_intervals_in_pim"] = int((inside["MemoryWrites"] > 0).sum())
            writes = inside[inside["MemoryWrites"] > 0]
            row[f"{op}_first_write_in_pim"] = int(writes["StartCycle"].min()) - start if len(writes) else -1
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    return code_channels.log_main(__doc__, build, "code_writes.csv", "output file name", argv)


if __name__ == "__main__":
    raise SystemExit(main())
