"""Energy = action counts x per-action energy, applied after timing (never inside the timing loop).

Two sources for the per-action table of a DRAM preset (`energy.model`):
- `idd`: JEDEC IDD currents (mA), VDD (V) and devices per rank, with the usual data-sheet formulas; all
  durations are cycles x tCK of *this* device (DRAMsim3 issue #18 used 1 ns instead; a test guards this);
- `table`: pJ per bit of row activated / accessed, pJ per refresh, background mW per data bus.
"""
from __future__ import annotations

from typing import Any

from archsim.dram.spec import DramSpec

COMPONENTS = ("act_pre", "read", "write", "refresh", "background")


def dram_action_energy_pj(spec: DramSpec) -> dict[str, float]:
    """Energy per action (pJ) and background power per rank or bus (mW) for a preset."""
    e = spec.energy
    t = spec.timing
    tck_ns = spec.tCK_ps / 1000.0
    if not e:
        return {"ACT": 0.0, "RD": 0.0, "WR": 0.0, "REFab": 0.0, "REFpb": 0.0, "background_mw": 0.0}
    if e["model"] == "idd":
        vdd = float(e["VDD"])
        dev = int(e.get("devices_per_rank", 1))
        # mA x ns x V = pJ
        act = (e["IDD0"] * t["nRC"] - (e["IDD3N"] * t["nRAS"] + e["IDD2N"] * t["nRP"])) * tck_ns * vdd * dev
        rd = (e["IDD4R"] - e["IDD3N"]) * t["nBL"] * tck_ns * vdd * dev
        wr = (e["IDD4W"] - e["IDD3N"]) * t["nBL"] * tck_ns * vdd * dev
        ref = (e["IDD5B"] - e["IDD3N"]) * t["nRFC"] * tck_ns * vdd * dev
        return {"ACT": act, "RD": rd, "WR": wr, "REFab": ref, "REFpb": ref / spec.banks_per_rank,
                "background_mw": e["IDD3N"] * vdd * dev, "background_per": "rank"}
    bits_row = spec.row_bytes * 8
    bits_access = spec.access_bytes * 8
    return {"ACT": e["act_pre_pj_per_row_bit"] * bits_row, "RD": e["rd_pj_per_bit"] * bits_access,
            "WR": e["wr_pj_per_bit"] * bits_access, "REFab": float(e["refab_pj"]), "REFpb": float(e["refpb_pj"]),
            "background_mw": float(e["background_mw"]), "background_per": "bus"}


def dram_energy_pj(spec: DramSpec, counts: dict[str, int], cycles: int, channels: int = 1) -> dict[str, float]:
    """Energy by component for `counts` (command name -> count) over `cycles` on `channels` channels."""
    per = dram_action_energy_pj(spec)
    seconds = cycles * spec.tCK_s
    if per.get("background_per") == "rank":
        units = channels * spec.counts[1] * spec.counts[2]
    else:
        units = channels * spec.counts[1]
    out = {
        "act_pre": per["ACT"] * counts.get("ACT", 0),
        "read": per["RD"] * (counts.get("RD", 0) + counts.get("RDA", 0)),
        "write": per["WR"] * (counts.get("WR", 0) + counts.get("WRA", 0)),
        "refresh": per["REFab"] * counts.get("REFab", 0) + per["REFpb"] * counts.get("REFpb", 0),
        "background": per["background_mw"] * 1e-3 * seconds * 1e12 * units,
    }
    return out


def total(energy: dict[str, Any]) -> float:
    return float(sum(v for v in energy.values()))
