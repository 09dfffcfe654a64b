"""DRAMPower's inputs from an archsim run: its command trace (CSV), a memspec (JSON) and a CLI config.

DRAMPower (tukl-msd/DRAMPower, the DRAM community's energy tool; its command-line tool `drampower_cli -c CONFIG
-t TRACE -m MEMSPEC [-j OUT]`) reads a memspec holding the device's IDD/VDD currents and timings, and a trace of
`cycle,COMMAND,rank,bankgroup,bank,row,column[,data]` lines, one per command, in clock cycles, the bank numbered
within its rank, and an `END` line closing the window. All three are written from the run's command log and
its preset (the one source of truth for currents and timings), so both energy models see the same commands and
the same currents; reports/dram_fidelity/run_drampower.py compares them per component.

What the memspec holds that archsim's preset has no value for (DRAMPower needs the key) is zero, and unused by
the comparison: the VPP domain's currents (archsim prices VDD only), power-down and self-refresh currents (a
command log has no power-down commands), and the interface's capacitances (archsim has no I/O energy model).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from archsim.dram.spec import DramSpec, standard_command_cycles, standard_lineage, standard_timings_from
from archsim.errors import UserError

# archsim standard (or the standard it extends) -> DRAMPower memoryType
STANDARDS = {"ddr4": "DDR4", "ddr5": "DDR5", "lpddr5": "LPDDR5"}

# archsim command -> DRAMPower command (its CmdType names); anything else in a log has no DRAMPower counterpart
COMMANDS = {"ACT": "ACT", "PRE": "PRE", "PREA": "PREA", "RD": "RD", "WR": "WR", "RDA": "RDA", "WRA": "WRA",
            "REFab": "REFA"}

# DRAMPower's bank-wise power factor rho: 1 is its classic model (a rank costs IDD3N while any bank is open),
# the one archsim's IDD formulas follow; below 1 it splits the active background per open bank.
FACT_RHO = 1.0
# Termination resistance (ohm) in the memspec: no termination current, as archsim has no I/O energy model.
NO_TERMINATION_OHM = 1e12


def memory_type(spec: DramSpec) -> str:
    """DRAMPower's name for the preset's standard; a UserError naming the ones it takes otherwise."""
    std = str(spec.raw.get("standard", spec.standard))
    for stem in reversed(standard_lineage(std)):
        if stem in STANDARDS:
            if (spec.energy or {}).get("model") != "idd":
                raise UserError(f"--log-format drampower: preset {spec.name} has no IDD energy table "
                                "(energy.model: idd), which DRAMPower's memspec needs")
            return STANDARDS[stem]
    raise UserError(f"--log-format drampower: preset {spec.name} is standard {spec.standard}; DRAMPower takes "
                    f"{', '.join(sorted(STANDARDS.values()))} (standards {', '.join(sorted(STANDARDS))} and "
                    "those extending them)")


def check(spec: DramSpec, channels: int) -> str:
    """memory_type, and one channel: DRAMPower simulates the ranks of one channel."""
    kind = memory_type(spec)
    if channels != 1:
        raise UserError(f"--log-format drampower: DRAMPower simulates one channel; this run has {channels} "
                        "(give --channels 1)")
    return kind


def _geometry(spec: DramSpec) -> dict[str, int]:
    t = spec.timing
    devices = int(spec.energy.get("devices_per_rank", 1))
    burst = 2 * int(t["nBL"])                       # a DDR data bus: two beats per clock
    bus_bits = spec.access_bytes * 8 // burst
    width = bus_bits // devices
    if width * devices * burst != spec.access_bytes * 8:
        raise UserError(f"--log-format drampower: preset {spec.name}: {spec.access_bytes} B per access is not "
                        f"{devices} devices x BL{burst}")
    return {"devices": devices, "burst": burst, "width": width,
            "columns": spec.row_bytes // devices * 8 // width}


def memspec(spec: DramSpec) -> dict[str, Any]:
    """DRAMPower's memspec (DRAMUtils' JSON format) for the preset: currents in A, tCK in s, timings in cycles."""
    kind = memory_type(spec)
    if kind == "LPDDR5":
        return {"memspec": _lpddr5(spec)}
    g = _geometry(spec)
    t = spec.timing
    e = spec.energy
    amp = {k: float(e[k]) * 1e-3 for k in ("IDD0", "IDD2N", "IDD3N", "IDD4R", "IDD4W", "IDD5B")}
    arch = {"nbrOfChannels": 1, "nbrOfColumns": g["columns"], "nbrOfRows": spec.rows, "width": g["width"],
            "burstLength": g["burst"], "maxBurstLength": g["burst"], "dataRate": 2,
            "nbrOfBankGroups": spec.counts[3], "nbrOfBanks": spec.banks_per_rank, "nbrOfRanks": spec.counts[2],
            "nbrOfDevices": g["devices"], "RefMode": 1}
    power = {"vdd": float(e["VDD"]), "idd0": amp["IDD0"], "idd2n": amp["IDD2N"], "idd3n": amp["IDD3N"],
             "idd4r": amp["IDD4R"], "idd4w": amp["IDD4W"], "idd6n": 0.0, "idd2p": 0.0, "idd3p": 0.0,
             "vpp": 0.0, "ipp0": 0.0, "ipp2n": 0.0, "ipp3n": 0.0, "ipp4r": 0.0, "ipp4w": 0.0, "ipp6n": 0.0,
             "ipp2p": 0.0, "ipp3p": 0.0, "vddq": float(e["VDD"]), "iBeta_vdd": amp["IDD0"], "iBeta_vpp": 0.0}
    timing = {"tCK": spec.tCK_s, "RAS": t["nRAS"], "RC": t["nRC"], "RCD": t.get("nRCD", t.get("nRCDRD", 0)),
              "RL": t["nCL"], "WL": t["nCWL"], "RTP": t["nRTP"], "WR": t["nWR"], "RP": t["nRP"],
              "REFI": t.get("nREFI", 0), "FAW": t.get("nFAW", 0), "RTRS": t.get("nRTRS", 0)}
    impedance = {f"C_total_{x}": 0.0 for x in ("ck", "cb", "rb", "wb", "dqs")}
    impedance |= {f"R_eq_{x}": NO_TERMINATION_OHM for x in ("ck", "cb", "rb", "wb", "dqs")}
    spec_json: dict[str, Any] = {"memoryId": spec.name, "memoryType": kind, "memarchitecturespec": arch,
                                 "mempowerspec": power, "memtimingspec": timing,
                                 "bankwisespec": {"factRho": FACT_RHO}, "memimpedancespec": impedance}
    if kind == "DDR4":
        _ddr4(spec_json, amp, t)
    else:
        _ddr5(spec_json, amp, t)
    return {"memspec": spec_json}


def _ddr4(m: dict[str, Any], amp: dict[str, float], t: dict[str, int]) -> None:
    m["mempowerspec"] |= {"idd5B": amp["IDD5B"], "idd5F2": 0.0, "idd5F4": 0.0, "ipp5B": 0.0, "ipp5F2": 0.0,
                          "ipp5F4": 0.0}
    m["memtimingspec"] |= {"RFC1": t["nRFC"], "RFC2": 0, "RFC4": 0, "CCD_S": t["nCCDS"], "CCD_L": t["nCCDL"],
                           "RRD_S": t["nRRDS"], "RRD_L": t["nRRDL"], "WTR_S": t["nWTRS"], "WTR_L": t["nWTRL"],
                           "AL": 0, "CKE": 0, "CKESR": 0, "RPRE": 0, "WPRE": 0, "XP": 0, "XS": 0, "REFM": 0,
                           "DQSCK": 0, "XPDLL": 0, "XSDLL": 0, "ACTPDEN": 0, "PRPDEN": 0,
                           "REFPDEN": 0}
    m["prepostamble"] = {k: 0 for k in ("read_zeroes", "write_zeroes", "read_ones", "write_ones",
                                        "read_zeroes_to_ones", "write_zeroes_to_ones", "read_ones_to_zeroes",
                                        "write_ones_to_zeroes", "readMinTccd", "writeMinTccd")}


def _ddr5(m: dict[str, Any], amp: dict[str, float], t: dict[str, int]) -> None:
    m["memarchitecturespec"] |= {"nbrOfDIMMRanks": 0, "nbrOfPhysicalRanks": 0, "nbrOfLogicalRanks": 0,
                                 "cmdMode": 0, "RAAIMT": 0, "RAAMMT": 0, "RAADEC": 0}
    m["mempowerspec"] |= {"idd5b": amp["IDD5B"], "idd5c": 0.0, "idd5f": 0.0, "ipp5b": 0.0, "ipp5c": 0.0,
                          "ipp5f": 0.0}
    rfc, rfcsb = t["nRFC"], t.get("nRFCpb", t["nRFC"])
    m["memtimingspec"] |= {"RFC1": rfc, "RFC1_slr": rfc, "RFC2": 0, "RFC2_slr": 0, "RFCsb": rfcsb,
                           "RFCsb_slr": rfcsb, "PPD": t.get("nPPD", 0), "CCD_S_slr": t["nCCDS"],
                           "CCD_L_slr": t["nCCDL"], "CCD_S_WR_slr": t.get("nCCDS_WR", 0),
                           "CCD_L_WR_slr": t.get("nCCDL_WR", 0), "RRD_S_slr": t["nRRDS"], "RRD_L_slr": t["nRRDL"],
                           "FAW_slr": t.get("nFAW", 0), "WTR_S": t["nWTRS"], "WTR_L": t["nWTRL"],
                           "REFI1": t.get("nREFI", 0)}
    for key in ("RPRE", "RPST", "RDDQS", "WPRE", "WPST", "CCD_L_WR2_slr", "CCD_M_slr", "CCD_M_WR_slr", "CCD_dlr",
                "CCD_WR_dlr", "CCD_WR_dpr", "RRD_dlr", "FAW_dlr", "WTR_M", "RFC1_dlr", "RFC2_dlr", "RFC1_dpr",
                "RFC2_dpr", "RFCsb_dlr", "REFI2", "REFISB", "REFSBRD_slr", "REFSBRD_dlr", "CPDED", "PD", "XP",
                "ACTPDEN", "PRPDEN", "REFPDEN"):
        m["memtimingspec"].setdefault(key, 0)
    m["dataratespec"] = {"ca_bus_rate": 2, "dq_bus_rate": 2, "dqs_bus_rate": 2}


# LPDDR5: BL16 on a WCK at four times the CK (JESD209-5B Table 330, BG mode above 1600 MHz): a burst of 16 beats,
# two per WCK cycle, lasts 16 / (2 x 4) = 2 CK, archsim's nBL
LPDDR5_BURST, LPDDR5_WCK_PER_CK = 16, 4


def _lpddr5(spec: DramSpec) -> dict[str, Any]:
    """LPDDR5's memspec: its currents per supply rail, archsim's one supply as VDD1 (VDD2H, VDD2L carry none), WCK
    always on (no CAS-sync command, as archsim's lpddr5 standard)."""
    t, e = spec.timing, spec.energy
    devices = int(e.get("devices_per_rank", 1))
    width = spec.access_bytes * 8 // (LPDDR5_BURST * devices)
    if width * devices * LPDDR5_BURST != spec.access_bytes * 8 or t["nBL"] * 2 * LPDDR5_WCK_PER_CK != LPDDR5_BURST:
        raise UserError(f"--log-format drampower: preset {spec.name}: {spec.access_bytes} B per access over "
                        f"{t['nBL']} CK is not {devices} device(s) x BL{LPDDR5_BURST} at WCK:CK {LPDDR5_WCK_PER_CK}:1")
    amp = {k: float(e[k]) * 1e-3 for k in ("IDD0", "IDD2N", "IDD3N", "IDD4R", "IDD4W", "IDD5B")}
    arch = {"nbrOfChannels": 1, "nbrOfColumns": spec.row_bytes * 8 // (width * devices), "nbrOfRows": spec.rows,
            "width": width, "burstLength": LPDDR5_BURST, "maxBurstLength": LPDDR5_BURST, "dataRate": 2,
            "nbrOfBankGroups": spec.counts[3], "nbrOfBanks": spec.banks_per_rank, "nbrOfRanks": spec.counts[2],
            "nbrOfDevices": devices, "per2BankOffset": spec.banks_per_rank // 2, "WCKalwaysOn": True}
    rail1 = {"idd01": amp["IDD0"], "idd2n1": amp["IDD2N"], "idd3n1": amp["IDD3N"], "idd4r1": amp["IDD4R"],
             "idd4w1": amp["IDD4W"], "idd51": amp["IDD5B"]}
    power: dict[str, float] = {"vdd1": float(e["VDD"]), **rail1, "vdd2h": float(e["VDD"]), "vdd2l": float(e["VDD"]),
                               "vddq": float(e["VDD"]), "iBeta_vdd1": amp["IDD0"], "iBeta_vdd2h": 0.0,
                               "iBeta_vdd2l": 0.0}
    for rail in ("1", "2h", "2l"):
        for idd in ("idd0", "idd2n", "idd3n", "idd4r", "idd4w", "idd5", "idd5pb", "idd6", "idd6ds", "idd2p", "idd3p"):
            power.setdefault(idd + rail, 0.0)
    timing = {"tCK": spec.tCK_s, "REFI": t.get("nREFI", 0), "REFIpb": t.get("nREFIpb", 0), "RFCab": t["nRFC"],
              "RFCpb": t.get("nRFCpb", t["nRFC"]), "RAS": t["nRAS"], "RPab": t.get("nRPab", t["nRP"]),
              "RPpb": t["nRP"], "RCpb": t["nRC"], "RCab": t["nRAS"] + t.get("nRPab", t["nRP"]),
              "PPD": t.get("nPPD", 0), "RCD_L": t["nRCDRD"], "RCD_S": t["nRCDRD"], "FAW": t.get("nFAW", 0),
              "RRD": t["nRRDS"], "RL": t["nCL"], "RBTP": max(0, t["nRTP"] - t["nBL"]), "WL": t["nCWL"],
              "WR": t["nWR"], "RTRS": t.get("nRTRS", 0), "WTR_L": t["nWTRL"], "WTR_S": t["nWTRS"],
              "WCK2DQO": 0, "WCK2CK": LPDDR5_WCK_PER_CK, "pbR2act": t.get("nPBR2ACT", 0),
              "pbR2pbR": t.get("nPBR2PBR", 0)}
    for key in ("BL_n_min_16", "BL_n_max_16", "BL_n_L_16", "BL_n_S_16", "BL_n_min_32", "BL_n_max_32", "BL_n_L_32",
                "BL_n_S_32"):
        timing[key] = 0
    impedance = {f"C_total_{x}": 0.0 for x in ("cb", "ck", "wck", "dqs", "rb", "wb")}
    impedance |= {f"R_eq_{x}": NO_TERMINATION_OHM for x in ("cb", "ck", "wck", "dqs", "rb", "wb")}
    return {"memoryId": spec.name, "memoryType": "LPDDR5", "memarchitecturespec": arch, "mempowerspec": power,
            "memtimingspec": timing, "bankwisespec": {"factRho": FACT_RHO}, "memimpedancespec": impedance}


def trace_lines(spec: DramSpec, log_df: Any, end_cycle: int, close_banks: bool = False) -> list[str]:
    """The command log as DRAMPower trace lines (one channel), in cycle order, closed by `END` at end_cycle (the
    run's last cycle: background energy covers the same window as archsim's). Reads and writes carry a burst of
    zero bytes (DRAMPower needs data on them; it only feeds the interface energy, which is not compared).
    close_banks: a PREA to every rank at end_cycle, so DRAMPower also prices the precharge of rows left open
    (archsim prices an activate with its precharge, DRAMPower each when issued).

    A multi-cycle command (DDR5's ACT, RD, WR: `command_cycles`) is logged at its first cycle but takes effect
    at its last, from which the standard's timings run (archsim/dram/spec.py): DRAMPower gets that last cycle,
    so that, e.g., an ACT issued right at the end of a refresh is not seen inside it. LPDDR5's two-cycle ACT
    (ACT-1, ACT-2) is timed from its first cycle (`timings_from: first`): DRAMPower gets the logged cycle."""
    unknown = sorted(set(log_df["command"]) - set(COMMANDS))
    if unknown:
        raise UserError(f"--log-format drampower: command(s) {', '.join(unknown)} of preset {spec.name} have no "
                        f"DRAMPower counterpart (it takes {', '.join(COMMANDS)})")
    data = "00" * spec.access_bytes
    per_group = spec.counts[4]
    std = str(spec.raw.get("standard", ""))
    # (a standard timed from a command's first cycle, LPDDR5's split activate: the logged cycle)
    extra = {name: n - 1 for name, n in standard_command_cycles(std).items()} \
        if standard_timings_from(std) == "last" else {}
    df = log_df.assign(cycle=log_df["cycle"] + log_df["command"].map(extra).fillna(0).astype("int64"))
    df = df.sort_values("cycle", kind="stable")
    lines = []
    for cyc, cmd, rank, bg, bank, row, col in zip(df["cycle"], df["command"], df["rank"], df["bankgroup"],
                                                   df["bank"], df["row"], df["column"], strict=True):
        name = COMMANDS[cmd]
        fields = [str(int(cyc)), name, str(int(rank)), str(int(bg)), str(int(bg) * per_group + int(bank)),
                  str(max(int(row), 0)), str(max(int(col), 0))]
        if name in ("RD", "RDA", "WR", "WRA"):
            fields.append(data)
        lines.append(",".join(fields))
    end = max([int(end_cycle)] + [int(c) for c in df["cycle"][-1:]])
    if close_banks:
        lines += [f"{end},PREA,{rank},0,0,0,0" for rank in range(spec.counts[2])]
    lines.append(f"{end},END,0,0,0,0,0")
    return lines


def companion_paths(path: str | Path) -> tuple[Path, Path]:
    """Where the memspec and the CLI config go beside trace file `path` (x.csv -> x.memspec.json, x.config.json)."""
    p = Path(path)
    stem = p.with_suffix("") if p.suffix else p
    return stem.with_name(stem.name + ".memspec.json"), stem.with_name(stem.name + ".config.json")


def write(spec: DramSpec, log_df: Any, end_cycle: int, path: str | Path, close_banks: bool = False) -> list[Path]:
    """The trace at `path`, the memspec and the CLI config beside it; returns the three paths."""
    from archsim.results import atomic_write_text

    lines = trace_lines(spec, log_df, end_cycle, close_banks)
    mem_path, cfg_path = companion_paths(path)
    atomic_write_text(path, "\n".join(lines) + "\n")
    atomic_write_text(mem_path, json.dumps(memspec(spec), indent=2) + "\n")
    atomic_write_text(cfg_path, json.dumps({"useToggleRate": False}) + "\n")
    return [Path(path), mem_path, cfg_path]
