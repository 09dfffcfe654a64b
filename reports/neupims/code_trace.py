"""What NeuPIMs' simulator did on channel 0 of the uni32 case, from its channel-0 log: writes code_trace.csv.

Run:  .venv/bin/python reports/neupims/code_trace.py LOG ATTEND_LOG [-o DIR]

LOG is channel 0's transaction and command log of a run of the uni32 case (vs_code.py's CASES) by a copy of the
code's build whose NeuPIMSController writes one line per transaction it accepts (`CLK T ADDR READ|WRITE`) and per
command it issues (`CLK C TYPE RANK BANKGROUP BANK ROW COLUMN`, TYPE the number of NewtonSim's CommandType:
0 READ, 5 PRECHARGE, 7 REFRESH, 10 GWRITE, 11 G_ACT, 14 PIM_PRECHARGE, 16 P_HEADER, 17 COMPS_READRES;
common.h:50-74). The logging
changes no timing: that run's stages (its _summary.tsv beside LOG) take the cycles code_results.csv holds for uni32
(checked here). The stage boundaries are code_results.csv's.

Rows (metric, value):
  a_cycles, a_last_read_cycle        stage A's length, and the cycle of its last READ on channel 0
  a_last_traffic_interval_end        the end of the last 1000-cycle interval in which any of the 32 channels read
                                     or wrote in stage A (the run's own mem_io_A_ch_*.tsv beside LOG)
  a_reads                            READs on channel 0 in stage A
  a_first_requests                   how many requests the next row follows (1,000)
  a_first1000_served_cycle           the cycle by which the first 1,000 read requests, in the order channel 0
                                     accepted them, have all been served (a read merged with a queued read of its
                                     address, or answered from the write buffer, counts as served then)
  a_served_by_then                   READs channel 0 had issued by that cycle
  b_cycles, b_refreshes              stage B's length and the rank refreshes channel 0 issued in it
  b_gact_during_refresh              G_ACTs issued in stage B while the other rank was within tRFC of its REFRESH
  b_gact                             all G_ACTs of stage B
  refresh_median_gap                 median cycles from one REFRESH of channel 0 to the next, over the whole run
                                     (0 with fewer than two)
  refresh_rank_alternates            1 if every REFRESH is of another rank than the one before it, else 0
ATTEND_LOG, the same log of the uni512 case (its attend GEMVs have 32 COMPs each), gives (case uni512-off):
  attend_gemvs                       the COMPS_READRES of its NeuPIMSAttend (the last part of stage B)
  attend_gemv_to_pim_precharge       median cycles from a tile's COMPS_READRES to its first PIM_PRECHARGE
  attend_gemv_period                 median cycles from one tile's COMPS_READRES to the next
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
CASE = "uni32-off"
READ, REFRESH, G_ACT, PIM_PRECHARGE, COMPS_READRES = 0, 7, 11, 14, 17
TRFC = 260                      # HBM2_8Gb_x128_dualpim.ini:21
FIRST = 1000
# NewtonSim's address mapping rorabgbachco (HBM2_8Gb_x128_dualpim.ini:57) above the 64-B burst: column 4 bits,
# channel 5, bank 2, bank group 2, rank 1, then the row
SHIFT = {"bank": 15, "bankgroup": 17, "rank": 19, "row": 20}


def _address(rank: int, bg: int, bank: int, row: int, col: int) -> int:
    return (row << SHIFT["row"]) | (rank << SHIFT["rank"]) | (bg << SHIFT["bankgroup"]) | (bank << SHIFT["bank"]) | (col << 6)


def parse(log: Path) -> tuple[list[tuple[int, int]], list[tuple[int, int, list[int]]]]:
    trans, cmds = [], []
    for line in log.read_text().splitlines():
        p = line.split()
        if len(p) >= 4 and p[1] == "T" and p[3] == "READ":
            trans.append((int(p[0]), int(p[2])))
        elif len(p) == 8 and p[1] == "C":
            cmds.append((int(p[0]), int(p[2]), [int(x, 0) for x in p[3:]]))
    return trans, cmds


def _last_traffic(run_dir: Path) -> int:
    """The end of the last interval in which any channel moved data in stage A, from the code's own per-channel
    statistics (mem_io_A_ch_*.tsv: bytes read and written per 1000-cycle interval, src/Dram.cc:128-141, 183-188)."""
    last = 0
    for path in sorted(run_dir.glob("mem_io_A_ch_*.tsv")):
        io = pd.read_csv(path, sep="\t")
        busy = io[(io["MemoryReads"] > 0) | (io["MemoryWrites"] > 0)]
        if len(busy):
            last = max(last, int(busy["StartCycle"].max()) + int(io["StartCycle"].diff().dropna().iloc[0]))
    return last


def _same_run(log: Path, stages: pd.Series) -> None:
    """The logging copy ran the very stages code_results.csv holds (its _summary.tsv beside the log)."""
    summary = pd.read_csv(log.parent / "_summary.tsv", sep="\t", index_col=0)["total_cycles"]
    for stage in ("A", "B", "E"):
        if int(summary[stage]) != int(stages[stage]):
            raise SystemExit(f"{log.parent}/_summary.tsv: stage {stage} {summary[stage]} cycles, code_results.csv "
                             f"{stages[stage]}: not the same run")


def measure(log: Path, code: pd.DataFrame) -> pd.DataFrame:
    stages = code[code["case"] == CASE].set_index("stage")["code_cycles"]
    _same_run(log, stages)
    a_end, b_end = int(stages["A"]), int(stages["A"] + stages["B"])
    trans, cmds = parse(log)
    reads = [(t, _address(*f[:3], f[3], f[4])) for t, kind, f in cmds if kind == READ and t < a_end]
    served: dict[int, int] = {}
    for t, addr in reads:
        served.setdefault(addr, t)
    order = list(dict.fromkeys(addr for t, addr in trans if t < a_end))     # first arrival of each address
    first = order[:FIRST]
    done = max(served.get(a, 0) for a in first)
    refreshes = [(t, f[0]) for t, kind, f in cmds if kind == REFRESH and a_end <= t < b_end]
    gacts = [(t, f[0]) for t, kind, f in cmds if kind == G_ACT and a_end <= t < b_end]
    during = sum(1 for t, rank in gacts if any(r != rank and 0 <= t - tr < TRFC for tr, r in refreshes))
    every_refresh = [(t, f[0]) for t, kind, f in cmds if kind == REFRESH]
    pairs = list(zip(every_refresh, every_refresh[1:], strict=False))
    rows = {"a_first_requests": FIRST, "a_cycles": a_end, "a_last_read_cycle": reads[-1][0],
            "a_last_traffic_interval_end": _last_traffic(log.parent), "a_reads": len(reads),
            "a_first1000_served_cycle": done, "a_served_by_then": sum(1 for t, _ in reads if t <= done),
            "b_cycles": b_end - a_end, "b_refreshes": len(refreshes), "b_gact_during_refresh": during,
            "b_gact": len(gacts),
            "refresh_median_gap": int(pd.Series([b[0] - a[0] for a, b in pairs], dtype=float).median()) if pairs else 0,
            "refresh_rank_alternates": int(all(a[1] != b[1] for a, b in pairs))}
    return pd.DataFrame({"case": CASE, "metric": list(rows), "value": list(rows.values())})


def measure_attend(log: Path, code: pd.DataFrame, case: str = "uni512-off") -> pd.DataFrame:
    """The attend (s.V) tiles of a PIM stage B: per tile one COMPS_READRES (the fused GEMV); the gap from it to the
    tile's first PIM_PRECHARGE and from one tile's GEMV to the next, medians over the attend's tiles (the last
    NeuPIMSAttend part of stage B: after the last GWRITE of the logits, its tiles are the GEMVs with a GWRITE every
    four)."""
    stages = code[code["case"] == case].set_index("stage")
    _same_run(log, stages["code_cycles"])
    a_end = int(stages.loc["A", "code_cycles"])
    b_end = a_end + int(stages.loc["B", "code_cycles"])
    attend_from = b_end - int(str(stages.loc["B", "pim_ops"]).split("NeuPIMSAttend=")[1].split(";")[0])
    _, cmds = parse(log)
    gemv = [t for t, kind, _ in cmds if kind == COMPS_READRES and attend_from <= t < b_end]
    pre = [t for t, kind, _ in cmds if kind == PIM_PRECHARGE and attend_from <= t < b_end]
    to_pre = [min((p for p in pre if p > g), default=g) - g for g in gemv]
    period = [b - a for a, b in zip(gemv, gemv[1:], strict=False)]
    rows = {"attend_gemvs": len(gemv), "attend_gemv_to_pim_precharge": int(pd.Series(to_pre).median()),
            "attend_gemv_period": int(pd.Series(period).median())}
    return pd.DataFrame({"case": case, "metric": list(rows), "value": list(rows.values())})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", type=Path, help="channel-0 log of the uni32 case")
    ap.add_argument("attend_log", type=Path, help="channel-0 log of the uni512 case")
    ap.add_argument("-o", "--out", type=Path, default=HERE, help="output folder (default: the report's own)")
    args = ap.parse_args(argv)
    code = pd.read_csv(HERE / "code_results.csv")
    df = pd.concat([measure(args.log, code), measure_attend(args.attend_log, code)], ignore_index=True)
    df.to_csv(args.out / "code_trace.csv", index=False)
    print(df.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
