"""Energy = action counts x per-action energy, applied after timing (never inside the timing loop).

Two sources for the per-action table of a DRAM preset (`energy.model`):
- `idd`: JEDEC IDD currents (mA), VDD (V) and devices per rank, with the usual data-sheet formulas; all
  durations are cycles x tCK of *this* device (DRAMsim3 issue #18 used 1 ns instead; a test guards this);
- `table`: pJ per bit of row activated / accessed, pJ per refresh, background mW per data bus.
"""
from __future__ import annotations

from typing import Any

from archsim import expr
from archsim.dram.spec import DramSpec

COMPONENTS = ("act_pre", "read", "write", "refresh", "background")
PIM_COMPONENT = "pim"       # actions a preset prices under `energy.actions` (PIM commands)


def dram_action_energy_pj(spec: DramSpec) -> dict[str, float]:
    """Energy per action (pJ) and background power per rank or bus (mW) for a preset."""
    e = spec.energy
    t = spec.timing
    tck_ns = spec.tCK_ps / 1000.0
    if not e:
        return {"ACT": 0.0, "RD": 0.0, "WR": 0.0, "REFab": 0.0, "REFpb": 0.0, "RFMab": 0.0, "background_mw": 0.0}
    if e["model"] == "idd":
        vdd = float(e["VDD"])
        dev = int(e.get("devices_per_rank", 1))
        # mA x ns x V = pJ
        act = (e["IDD0"] * t["nRC"] - (e["IDD3N"] * t["nRAS"] + e["IDD2N"] * t["nRP"])) * tck_ns * vdd * dev
        rd = (e["IDD4R"] - e["IDD3N"]) * t["nBL"] * tck_ns * vdd * dev
        wr = (e["IDD4W"] - e["IDD3N"]) * t["nBL"] * tck_ns * vdd * dev
        ref = (e["IDD5B"] - e["IDD3N"]) * t["nRFC"] * tck_ns * vdd * dev
        out = {"ACT": act, "RD": rd, "WR": wr, "REFab": ref, "REFpb": ref / spec.banks_per_rank,
               "background_mw": e["IDD3N"] * vdd * dev, "background_per": "rank"}
        if "nRFM" in t:     # an RFM: a refresh of the rank nRFM long (IDD5B, as REFab over nRFC)
            out["RFMab"] = ref * t["nRFM"] / t["nRFC"]
    else:
        bits_row = spec.row_bytes * 8
        bits_access = spec.access_bytes * 8
        out = {"ACT": e["act_pre_pj_per_row_bit"] * bits_row, "RD": e["rd_pj_per_bit"] * bits_access,
               "WR": e["wr_pj_per_bit"] * bits_access, "REFab": float(e["refab_pj"]),
               "REFpb": float(e["refpb_pj"]), "background_mw": float(e["background_mw"]), "background_per": "bus"}
        if "nRFM" in t:
            out["RFMab"] = out["REFab"] * t["nRFM"] / t["nRFC"]
    # further actions (PIM commands) priced in units of the base ones, e.g. `COMP: 4 * RD`
    base = {k: v for k, v in out.items() if k in ACTION_COMPONENT}
    for action, text in (e.get("actions") or {}).items():
        out[action] = float(expr.evaluate(text, base))
    return out


def action_counts(spec: DramSpec, command_counts: dict[str, int]) -> dict[str, int]:
    """{command name: count} -> {energy action: count}, through each command's `action` in the standard
    (RDA counts as RD, PREA as PRE, ...): energy never looks at command names."""
    out: dict[str, int] = {}
    for c in spec.commands:
        n = int(command_counts.get(c.name, 0))
        if n:
            out[c.action] = out.get(c.action, 0) + n
    return out


# which energy component each DRAM action feeds (PRE is costed inside ACT: one activate-precharge pair)
ACTION_COMPONENT = {"ACT": "act_pre", "RD": "read", "WR": "write", "REFab": "refresh", "REFpb": "refresh",
                    "RFMab": "refresh"}


def precharged_cycles(pre_cycles: Any, pre_since: Any, cycles: int) -> Any:
    """Per refresh node, the cycles up to `cycles` in which every bank of the node was closed and none refreshing
    (the channel kernel's pre_cycles, plus the open interval since pre_since; -1: a row was open at the end)."""
    import numpy as np

    pre = np.asarray(pre_cycles, dtype=np.int64) + np.where(np.asarray(pre_since) >= 0,
                                                            np.maximum(cycles - np.asarray(pre_since), 0), 0)
    return np.minimum(pre, cycles)


def dram_energy_pj(spec: DramSpec, counts: dict[str, int], cycles: int, channels: int = 1,
                   table: DramSpec | None = None, precharged: tuple[int, int] | None = None) -> dict[str, float]:
    """Energy by component for `counts` (command name -> count) over `cycles` on `channels` channels: the
    post-pass over the run's action counts. `table`: cost with another preset's energy table (same actions).
    precharged: (precharged node-cycles, refresh nodes they are summed over) of the run: an IDD table's
    background is then per state, IDD2N while every bank of a rank is closed and none refreshing and IDD3N
    otherwise (DRAMPower's split; `energy.background: active` keeps IDD3N throughout); without it, IDD3N."""
    costed = table if table is not None else spec
    per = dram_action_energy_pj(costed)
    actions = action_counts(spec, counts)
    out = dict.fromkeys(COMPONENTS, 0.0)
    for action, n in actions.items():
        comp = ACTION_COMPONENT.get(action)
        if comp is not None:
            out[comp] += per[action] * n
        elif action in per:
            out[PIM_COMPONENT] = out.get(PIM_COMPONENT, 0.0) + per[action] * n
    seconds = cycles * spec.tCK_s
    if per.get("background_per") == "rank":
        units = channels * spec.counts[1] * spec.counts[2]
    else:
        units = channels * spec.counts[1]
    out["background"] = per["background_mw"] * 1e-3 * seconds * 1e12 * units
    e = costed.energy or {}
    if precharged is not None and e.get("model") == "idd" and e.get("background", "per_state") == "per_state":
        pre, nodes = precharged
        if nodes and cycles:
            # the precharged share of the background units' time at IDD2N instead of IDD3N
            share = pre / (nodes * cycles)
            out["background"] *= 1 - share * (1 - float(e["IDD2N"]) / float(e["IDD3N"]))
    return out


def recost(result: Any, preset: str | DramSpec) -> dict[str, float]:
    """Energy by component (pJ) of a finished dram-trace run under another preset's energy table, without
    simulating again (timing is the run's: its command counts and cycles)."""
    from archsim.dram.spec import load_spec

    stats = result.stats
    spec = result.extra.get("spec") if hasattr(result, "extra") else None
    if spec is None:
        spec = load_spec(stats["preset"], overrides={"org.channels": stats["channels"]})
    table = preset if isinstance(preset, DramSpec) else load_spec(preset)
    missing = sorted(set(ACTION_COMPONENT) & {c.action for c in spec.commands} - {c.action for c in table.commands})
    if missing:
        from archsim.errors import UserError

        raise UserError(f"recost: preset {table.name} has no energy for action(s) {', '.join(missing)} "
                        f"of {spec.name}")
    pre = (stats["precharged_cycles"], stats["refresh_nodes"]) if "precharged_cycles" in stats else None
    return dram_energy_pj(spec, stats["commands"], stats["cycles"], stats["channels"], table=table, precharged=pre)


def total(energy: dict[str, Any]) -> float:
    return float(sum(v for v in energy.values()))
