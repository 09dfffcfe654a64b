"""An attend tile on channel 0, archsim beside NeuPIMs' code: writes reports/neupims/attend_tile.csv.

archsim runs the uni512 case (vs_code.py's CASES: one 512-token request per channel, the attend GEMVs of 32 COMPs)
without refresh, with a row set's last GEMV split (mapping neupims_code) and fused (`pim_gemv: fused` on the DRAM
standard neupims_code_fused, gemv_toggle.py), and reads channel 0's command log: per attend tile (a row set of one
GEMV of 32 COMPs) the cycles from the GEMV's first command (its first COMP when split, its COMPS_READRES when fused)
to its row set's first PIM precharge, and from one tile's GEMV to the next's. The code's figures are code_trace.csv's
(its uni512 run's channel-0 log, attend_gemv_to_pim_precharge and attend_gemv_period).

Run:  .venv/bin/python reports/neupims/attend_tile.py [-o DIR]

Columns: arm (split, fused, code), tiles, gemv_to_pim_precharge, tile_period (medians over the attend's tiles).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gemv_toggle  # noqa: E402
import vs_code  # noqa: E402

from archsim.systems.neupims.config import setup  # noqa: E402
from archsim.systems.neupims.decode import DecodeSimulator  # noqa: E402
from archsim.systems.neupims.device import build_device  # noqa: E402
from archsim.systems.neupims.modes import batch_of  # noqa: E402

HERE = Path(__file__).resolve().parent
CASE = "uni512-off"
COMPS = 32          # an attend GEMV of a full 512-score chunk


def channel0_log(cfg: dict) -> pd.DataFrame:
    """Channel 0's PIM commands of `cfg`'s first decode iteration, without refresh."""
    su = setup(cfg)
    dev = build_device(su)
    ctx, chans = batch_of(su, dev, np.random.default_rng(0), 0)
    sim = DecodeSimulator(dev, refresh=False, log=True)
    sim.iteration(ctx, chans, su.sub_batch)
    log = sim.ms.command_log()
    return log[(log["channel"] == 0) & (log["source"] != "npu")].reset_index(drop=True)


def attend_tiles(log: pd.DataFrame) -> dict[str, int]:
    """Medians over the attend tiles (a row set of one GEMV: COMPS COMPs and a READRES split, one COMPS_READRES
    fused) of the GEMV's first command -> its row set's first PIM precharge, and of the tile period."""
    t, cmd = log["cycle"].to_numpy(), log["command"].to_numpy()
    pre = t[cmd == "PIM_PREb"]
    gact = np.flatnonzero(cmd == "G_ACT")
    starts = []
    for a, b in zip(gact[::8], [*gact[8::8], len(cmd)], strict=True):
        seg = cmd[a:b]
        comps, fused = np.flatnonzero(seg == "COMP"), np.flatnonzero(seg == "COMPS_READRES")
        if len(fused) == 1 and len(comps) == 0:
            starts.append(t[a + fused[0]])
        elif len(comps) == COMPS and (seg == "READRES").sum() == 1:
            starts.append(t[a + comps[0]])
    starts = np.array(starts)
    to_pre = [pre[pre > x].min() - x for x in starts]
    return {"tiles": len(starts), "gemv_to_pim_precharge": int(np.median(to_pre)),
            "tile_period": int(np.median(np.diff(starts)))}


def build(out: Path) -> pd.DataFrame:
    _, runs = vs_code.toggle_inputs(out)
    rows = []
    for arm in ("split", "fused"):
        cfg = vs_code.config(CASE)
        if arm == "fused":
            cfg["mapping"] = gemv_toggle.fused_mapping(runs)
            cfg["dram"] = dict(gemv_toggle.FUSED_DRAM)
        rows.append({"arm": arm, **attend_tiles(channel0_log(cfg))})
    tr = pd.read_csv(HERE / "code_trace.csv")
    tr = dict(zip(tr.loc[tr["case"] == CASE, "metric"], tr.loc[tr["case"] == CASE, "value"], strict=True))
    rows.append({"arm": "code", "tiles": int(tr["attend_gemvs"]),
                 "gemv_to_pim_precharge": int(tr["attend_gemv_to_pim_precharge"]),
                 "tile_period": int(tr["attend_gemv_period"])})
    df = pd.DataFrame(rows)
    df.to_csv(out / "attend_tile.csv", index=False)
    return df


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, default=HERE, help="output folder (default: the report's own)")
    args = ap.parse_args(argv)
    os.chdir(ROOT)
    print(build(args.out.resolve()).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
