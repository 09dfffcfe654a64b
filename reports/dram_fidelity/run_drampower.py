"""Energy against DRAMPower: the same command logs priced by archsim's energy model and by DRAMPower.

DRAMPower is built outside this repository (README.md, "Energy against DRAMPower", says which version); this
script only runs its command-line tool, from the path given:

    .venv/bin/python reports/dram_fidelity/run_drampower.py --drampower /path/to/drampower_cli \
        [-o results/dram_fidelity/drampower] [--requests 20000]

For each device and traffic kind (the traces of run_cases.py), archsim simulates the trace with its default
controller and keeps the command log; the log goes to DRAMPower in its own trace format with a memspec generated
from the same preset (archsim.dram.drampower, what `archsim trace --log-format drampower` writes), and each
energy component is put beside archsim's. Variants, each a toggle of one known difference between the models:

- `as-is`: the preset's currents;
- `flat-background`: archsim's background at active standby (IDD3N) for the whole run (`energy.background:
  active`, archsim's model before the per-state split), where both models now price a rank at IDD2N while every
  bank of it is closed and none refreshing: what the split is worth;
- `prea-at-end`: the DRAMPower trace closes every rank's open rows at the end of the window (a PREA): archsim
  prices an activate together with its precharge, DRAMPower each when issued, so rows still open at the end have
  their precharge in archsim's act_pre only; this variant takes that one difference away.

Writes reports/dram_fidelity/drampower.csv: one row per (device, trace, variant, component), energies in pJ.
"""
from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from run_cases import DEVICES, KINDS, LINE, SPAN  # noqa: E402

from archsim.dram import drampower  # noqa: E402
from archsim.dram.trace import synthetic_trace  # noqa: E402
from archsim.energy import COMPONENTS  # noqa: E402

CSV_PATH = HERE / "drampower.csv"
# the devices both tools model (DRAMPower takes DDR4, DDR5 and LPDDR5 of archsim's standards), as in run_cases.py;
# DRAMPower simulates one channel, so LPDDR5 is one 16-bit channel here, its traces over that channel's 2 GiB
ENERGY_ONLY = {"LPDDR5-6400 1ch": {"preset": "LPDDR5_6400_x16_16Gb", "overrides": {}, "channels": 1,
                                   "span": 2 << 30}}
ENERGY_DEVICES = ("DDR4-3200 1R", "DDR4-3200 2R", "DDR5-4800 1R", "LPDDR5-6400 1ch")


def device_of(name: str) -> dict:
    return ENERGY_ONLY.get(name) or DEVICES[name]
VARIANTS = ("as-is", "flat-background", "prea-at-end")
# DRAMPower's JSON output: which of its energies make up each of archsim's components (per bank, and the
# rank-level ones)
BANK_KEYS = {"act_pre": ("ACT", "PRE", "PRE_RDA", "PRE_WRA"), "read": ("RD", "RDA"), "write": ("WR", "WRA"),
             "refresh": ("REF_AB", "REF_PB", "REF_SB", "REF_2B"), "background": ("BG_ACT", "BG_PRE")}
RANK_KEYS = {"refresh": ("E_refab",), "background": ("E_bg_act_shared",),
             "power_down": ("E_PDNA", "E_PDNP", "E_sref", "E_dsm")}
FIELDS = ["device", "preset", "kind", "requests", "variant", "component", "archsim_pj", "drampower_pj",
          "diff_pct", "cycles", "drampower_version"]


def case_trace(kind: str, requests: int, seed: int = 0, span: int = SPAN):
    """The trace of run_cases.py's `kind` (same generator and seed; its window unless the device is smaller)."""
    gen, reads = ("random", 0.5) if kind == "mixed" else (kind, 0.8)
    return synthetic_trace(gen, requests, read_fraction=reads, span_bytes=span, access_bytes=LINE, seed=seed)


def variant_overrides(device: str, variant: str) -> dict:
    dev = device_of(device)
    over = dict(dev["overrides"])
    if variant == "flat-background":
        over["energy.background"] = "active"
    return over


def run_archsim(device: str, kind: str, requests: int, variant: str, log: bool = True):
    """archsim's run of one case (default controller, the preset's default mapping): the Result."""
    from archsim.systems.dram_trace.system import run_trace

    dev = device_of(device)
    return run_trace(case_trace(kind, requests, span=dev.get("span", SPAN)), preset=dev["preset"],
                     channels=dev["channels"],
                     overrides=variant_overrides(device, variant), log=log)


def drampower_components(out: dict) -> dict[str, float]:
    """DRAMPower's JSON result -> energy (pJ) per archsim component (and its power-down energies)."""
    core = out["CoreEnergy"]
    comp = dict.fromkeys((*COMPONENTS, "power_down"), 0.0)
    for bank in core["BankEnergy"]:
        for name, keys in BANK_KEYS.items():
            comp[name] += sum(float(bank[k]) for k in keys)
    for name, keys in RANK_KEYS.items():
        comp[name] += sum(float(core.get(k, 0.0)) for k in keys)
    return {k: v * 1e12 for k, v in comp.items()}


def run_drampower(exe: Path, trace: Path) -> dict:
    memspec, config = drampower.companion_paths(trace)
    out = trace.with_suffix(".result.json")
    out.write_text("")              # its -j option wants an existing file
    subprocess.run([str(exe), "-c", str(config), "-t", str(trace), "-m", str(memspec), "-j", str(out)],
                   check=True, capture_output=True, text=True)
    return json.loads(out.read_text())


def drampower_version(exe: Path) -> str:
    """The version line its --help prints ("DRAMPower v5.1")."""
    res = subprocess.run([str(exe), "--help"], capture_output=True, text=True)
    first = (res.stdout or res.stderr).strip().splitlines()
    return first[0].strip() if first else "unknown"


def case_rows(exe: Path, work: Path, device: str, kind: str, requests: int, variant: str, version: str) -> list[dict]:
    r = run_archsim(device, kind, requests, variant)
    spec = r.extra["spec"]
    trace = work / f"{device.replace(' ', '_')}_{kind}_{requests}_{variant}.csv"
    drampower.write(spec, r.extra["command_log"].df, r.stats["cycles"], trace, close_banks=variant == "prea-at-end")
    theirs = drampower_components(run_drampower(exe, trace))
    ours = {**r.stats["energy_pj"], "power_down": 0.0}
    rows = []
    for comp in (*COMPONENTS, "power_down", "total"):
        a = sum(ours[c] for c in COMPONENTS) if comp == "total" else ours[comp]
        d = sum(theirs[c] for c in (*COMPONENTS, "power_down")) if comp == "total" else theirs[comp]
        rows.append({"device": device, "preset": spec.name, "kind": kind, "requests": requests, "variant": variant,
                     "component": comp, "archsim_pj": f"{a:.6g}", "drampower_pj": f"{d:.6g}",
                     "diff_pct": f"{100 * (a / d - 1):.3f}" if d else ("0.000" if a == 0 else "inf"),
                     "cycles": r.stats["cycles"], "drampower_version": version})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--drampower", type=Path, required=True, help="DRAMPower's built drampower_cli")
    ap.add_argument("-o", "--out", type=Path, default=ROOT / "results" / "dram_fidelity" / "drampower",
                    help="directory for the traces, memspecs and DRAMPower's results")
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--csv", type=Path, default=CSV_PATH)
    args = ap.parse_args()
    exe = args.drampower
    if exe.is_dir():
        exe = exe / "drampower_cli"
    if not exe.is_file():
        print(f"run_drampower.py: --drampower {args.drampower}: no DRAMPower command-line tool there (build "
              "DRAMPower with -DDRAMPOWER_BUILD_CLI=ON; README.md, 'Energy against DRAMPower')", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    version = drampower_version(exe)
    rows = []
    for device in ENERGY_DEVICES:
        for kind in KINDS:
            for variant in VARIANTS:
                case = case_rows(exe, args.out, device, kind, args.requests, variant, version)
                rows += case
                worst = max(abs(float(c["diff_pct"])) for c in case if c["component"] in COMPONENTS)
                print(f"{device:14s} {kind:8s} {variant:12s} worst component {worst:6.2f} %", flush=True)
    with args.csv.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {args.csv} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
