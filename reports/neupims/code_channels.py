"""When each channel finished its PIM work in NeuPIMs' npu+pim run, from its per-channel traffic logs: writes
code_channels.csv.

Run:  .venv/bin/python reports/neupims/code_channels.py LOG_DIR [-o DIR]

LOG_DIR is the log folder of the npu+pim branch's run of the case npupim-baseline_gpt3-7B_tp4_bs512_clb0
(vs_code.py's CASES; e.g. /work/ext/neupims/runs/npupim-baseline_gpt3-7B_tp4_bs512_clb0). Its PIM_stage_B.tsv gives
the two PIM operations' start and end (NeuPIMSLogitSoftmax, then NeuPIMSAttend); its mem_io_B_ch_<c>.tsv the READRES
traffic of channel c per interval of the log (PIMReads, Interconnect.cc:26-41). The branch hands memory one PIM
instruction a cycle for the whole device, the batch consolidated channel after channel ([npu+pim]
src/NeuPIMSystolicWS.cc:150-178, src/scheduler/Scheduler.cc:252-264); these rows show when each channel's GEMVs
were done.

Columns: channel, logits_end and attend_end (cycles from the operation's start to the end of the last interval in
which the channel returned READRES data during it), logits_busy_intervals and attend_busy_intervals (intervals with
READRES data), interval (cycles per log interval).

The same rows of the case's run without refresh (LOG_DIR ..._norefresh, the driver's `--newton-set tREFI=100000000`)
are code_channels_norefresh.csv (`--table code_channels_norefresh.csv`).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
CHANNELS = 32


def op_rows(io: pd.DataFrame, interval: int, span: dict[str, tuple[int, int]], name: str) -> pd.DataFrame:
    """The rows of a channel's traffic log `io` (one per `interval` cycles) inside operation `name` of `span`
    ({operation: (start, end)}): the intervals overlapping it, except one whose middle lies in another operation.
    The logits end where the attend starts, so the interval holding that cycle is given to the operation holding
    most of it, not to both (a channel's last logits READRES counted as the attend's first, or the attend's first
    as the logits' last)."""
    start, end = span[name]
    begin = io["StartCycle"]
    middle = begin + interval / 2
    inside = (begin + interval > start) & (begin < end)
    for other, (o_start, o_end) in span.items():
        if other != name:
            inside &= ~((middle >= o_start) & (middle < o_end))
    return io[inside]


OPERATIONS = (("logits", "NeuPIMSLogitSoftmax"), ("attend", "NeuPIMSAttend"))


def channel_logs(log_dir: Path):
    """Each channel's stage-B traffic log of the run in `log_dir`: (channel, cycles per log interval, and
    {op: (its start cycle, the log's rows inside it)} for the two PIM operations, OPERATIONS)."""
    ops = pd.read_csv(log_dir / "PIM_stage_B.tsv", sep="\t", index_col=False)
    ops["name"] = ops["OpName"].str.rsplit(".", n=1).str[-1]
    span = {r["name"]: (int(r["StartCycle"]), int(r["EndCycle"])) for _, r in ops.iterrows()}
    for ch in range(CHANNELS):
        io = pd.read_csv(log_dir / f"mem_io_B_ch_{ch}.tsv", sep="\t", index_col=False)
        interval = int(io["StartCycle"].diff().dropna().mode().iloc[0])
        yield ch, interval, {op: (span[name][0], op_rows(io, interval, span, name)) for op, name in OPERATIONS}


def build(log_dir: Path) -> pd.DataFrame:
    rows = []
    for ch, interval, parts in channel_logs(log_dir):
        row = {"channel": ch, "interval": interval}
        for op, (start, during) in parts.items():
            busy = during[during["PIMReads"] > 0]
            row[f"{op}_end"] = int(busy["StartCycle"].max()) + interval - start
            row[f"{op}_busy_intervals"] = len(busy)
        rows.append(row)
    return pd.DataFrame(rows)


def log_main(doc: str, build_table, table: str, table_help: str, argv: list[str] | None) -> int:
    """The command line of a table built from the npu+pim run's logs: LOG_DIR [-o DIR] [--table NAME]."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("log_dir", type=Path, help="the npu+pim run's log folder")
    ap.add_argument("-o", "--out", type=Path, default=HERE, help="output folder (default: the report's own)")
    ap.add_argument("--table", default=table, help=table_help)
    args = ap.parse_args(argv)
    df = build_table(args.log_dir)
    df.to_csv(args.out / args.table, index=False)
    print(df.to_string(index=False))
    return 0


def main(argv: list[str] | None = None) -> int:
    return log_main(__doc__, build, "code_channels.csv", "output file name (code_channels_norefresh.csv: the case's "
                    "run without refresh, npupim_refresh_toggle.py reads it)", argv)


if __name__ == "__main__":
    raise SystemExit(main())
