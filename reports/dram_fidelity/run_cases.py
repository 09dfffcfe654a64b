"""Run the DRAM fidelity cases: the same trace files through Ramulator 2.1, DRAMsim3 and archsim.

The reference simulators are built outside this repository (reports/dram_fidelity/README.md says how and at which
commits); this script only runs them, from the paths given as arguments, and records what they print.

    .venv/bin/python reports/dram_fidelity/run_cases.py --requests 20000 -o results/dram_fidelity \
        --ramulator2 /work/refsims/ramulator2 --ramulator2-python /work/refsims/venv/bin/python \
        --dramsim3 /work/refsims/DRAMsim3            # either reference may be left out

Writes OUT/cases.json: one record per (simulator, device, trace) with cycles, row-hit rate, mean read latency
(cycles), the wall time of the simulation, and the exact configuration used.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from archsim.dram.trace import synthetic_trace, write_trace  # noqa: E402

KINDS = ("stream", "random", "mixed", "conflict")
SPAN = 4 << 30          # the 4 GiB window
LINE = 64               # bytes per trace request (a cache line)

# Devices: archsim preset and overrides beside the reference's own names for the same device. `ram` is the
# Ramulator 2.1 configuration (python/ramulator/dram/*.py presets), `d3` DRAMsim3's config file.
DEVICES = {
    "DDR4-3200 1R": {
        "preset": "DDR4_3200AA_x8_8Gb", "preset_ramulator2": "DDR4_3200AA_x8_8Gb_Ramulator2",
        "overrides": {"org.ranks": 1}, "channels": 1,
        "ram": {"standard": "DDR4", "org_preset": "DDR4_8Gb_x8", "timing_preset": "DDR4_3200AA", "rank": 1,
                "controller": "GenericDDR", "channels": 1},
        # DRAMsim3 sizes ranks from channel_size: 8192 MB of 8 Gb x8 devices on 64 bits is one rank
        "d3": "DDR4_8Gb_x8_3200.ini", "d3_set": {"channel_size": 8192},
    },
    "DDR4-3200 2R": {
        "preset": "DDR4_3200AA_x8_8Gb", "preset_ramulator2": "DDR4_3200AA_x8_8Gb_Ramulator2",
        "overrides": {"org.ranks": 2}, "channels": 1,
        "ram": {"standard": "DDR4", "org_preset": "DDR4_8Gb_x8", "timing_preset": "DDR4_3200AA", "rank": 2,
                "controller": "GenericDDR", "channels": 1},
        "d3": "DDR4_8Gb_x8_3200.ini", "d3_set": {},     # its channel_size 16384 MB: two ranks
    },
    "HBM2 8ch": {
        "preset": "HBM2_2Gbps_PC", "preset_ramulator2": "HBM2_2Gbps_PC_Ramulator2", "overrides": {}, "channels": 8,
        "ram": {"standard": "HBM2", "org_preset": "HBM2_8Gb", "timing_preset": "HBM2_2000Mbps",
                "controller": "HBM12", "channels": 8},
        # DRAMsim3's HBM2: 8 channels of 128 bits (BL4, 64 B), 2 KB rows (it doubles the file's 64 columns for
        # HBM, src/configuration.cc:149), one rank (channel_size 1024 MB), row and column command in one cycle
        # (hbm_dual_cmd)
        "d3": "HBM2_8Gb_x128.ini", "d3_set": {},
    },
    # The same HBM2 with Ramulator's channel bits one column bit higher (CacheLineInterleave(interleave_bits=1)):
    # archsim's mapping splits the column around the channel (RoBaPcCoChCo1), access size unchanged (issue 39)
    "HBM2 8ch il1": {
        "preset": "HBM2_2Gbps_PC", "preset_ramulator2": "HBM2_2Gbps_PC_Ramulator2", "overrides": {}, "channels": 8,
        "mapping": "RoBaPcCoChCo1",
        "ram": {"standard": "HBM2", "org_preset": "HBM2_8Gb", "timing_preset": "HBM2_2000Mbps",
                "controller": "HBM12", "channels": 8, "interleave_bits": 1},
    },
    # GDDR6 14 Gb/s, 8 Gb x16 devices: 8 16-bit channels (four devices) so that the 4 GiB window fits
    "GDDR6 8ch": {
        "preset": "GDDR6_14Gbps", "overrides": {}, "channels": 8,
        "ram": {"standard": "GDDR6", "org_preset": "GDDR6_8Gb_x16", "timing_preset": "GDDR6_14000_1350mV_double",
                "controller": "GenericDDR", "channels": 8},
    },
    # HBM3 6.4 Gb/s, 16 channels of 2 pseudo-channels, 2 stack IDs (8-high 16 Gb dies: 8 GiB per stack).
    # Ramulator 2.1 ticks HBM3 at half the CK period (dram/hbm3.py tick_multiplier = 2): its `cycles` are
    # half-CK ticks and its LoadStoreTrace(clock_ratio=1) offers one request per tick, i.e. two per CK.
    "HBM3 16ch": {
        "preset": "HBM3_6400Mbps", "preset_ramulator2": "HBM3_6400Mbps_16Gb_8Hi_Ramulator2", "overrides": {}, "channels": 16,
        "ticks_per_cycle": 2,
        # Ramulator's front end offers two requests per CK here: the ramulator2 convention sets that itself
        # (controller_conventions.yaml frontend_width_per_standard); the steps, which name no convention, get it
        "steps_controller": {"frontend_width": 2},
        "ram": {"standard": "HBM3", "org_preset": "HBM3_16Gb_8hi", "timing_preset": "HBM3_6400Mbps",
                "controller": "HBM34", "channels": 16},
    },
    # Issue 39: DDR5-4800 (one 32-bit channel of 16 Gb x8 devices, 8 GiB), GDDR7 28 Gb/s (8 channels of 8 bits: two
    # 16 Gb x8 devices, 4 GiB) and HBM4 8 Gb/s (32 channels of 2 pseudo-channels and 2 stack IDs: 32 GiB); each
    # archsim preset holds the timings of the Ramulator device files named beside it (docs/presets.md).
    "DDR5-4800 1R": {
        "preset": "DDR5_4800AN_x8_16Gb", "overrides": {}, "channels": 1,
        "ram": {"standard": "DDR5", "org_preset": "DDR5_16Gb_x8", "timing_preset": "DDR5_4800AN",
                "controller": "GenericDDR", "channels": 1},
    },
    # DDR5 with refresh management: Ramulator 2.1's DDR5_RFM device (DDR5 plus RFMab, nRFM) and its RFMManager
    # controller plugin (an RFMab once a bank has seen rfm_thresh activates, 80 its default); archsim's
    # controller.rfm_threshold on the preset DDR5_4800AN_x8_16Gb_RFM. Periodic refresh off in both: Ramulator
    # 2.1's AllBank refresh manager knows no refresh scope for DDR5_RFM and stops with an error
    # (src/ramulator/controller/refresh/impl/all_bank.cpp:18-51); record DDR5-4800 1R+norefresh is the baseline
    "DDR5-4800 1R RFM": {
        "preset": "DDR5_4800AN_x8_16Gb_RFM", "overrides": {}, "channels": 1,
        "controller": {"rfm_threshold": 80, "refresh": "none"},
        "ram": {"standard": "DDR5_RFM", "org_preset": "DDR5_16Gb_x8", "timing_preset": "DDR5_4800AN",
                "controller": "GenericDDR", "channels": 1, "rfm_thresh": 80, "refresh": "NoRefresh"},
    },
    "GDDR7 8ch": {
        "preset": "GDDR7_28Gbps_16Gb", "overrides": {}, "channels": 8,
        "ram": {"standard": "GDDR7", "org_preset": "GDDR7_16Gb_x8", "timing_preset": "GDDR7_28000_PAM3",
                "controller": "GDDR7", "channels": 8},
    },
    # LPDDR5-6400 (BG mode, CK 800 MHz, 4:1 WCK), two 16-bit channels of one 16 Gb x16 die each (4 GiB). Ramulator
    # 2.1's LPDDR5 controller under its WCK mode `always_on` (no CAS-sync command before an access; archsim does
    # not model the CAS-sync of `need_sync`, Ramulator's default: record ramulator2-need_sync shows its worth)
    "LPDDR5-6400 2ch": {
        # (the channel bit one above the 32-B access, so that the traces' 64-B lines alternate channels)
        "preset": "LPDDR5_6400_x16_16Gb", "overrides": {}, "channels": 2, "mapping": "RoBaRaCoChCo1",
        "ram": {"standard": "LPDDR5", "org_preset": "LPDDR5_16Gb_x16", "timing_preset": "LPDDR5_6400",
                "controller": "LPDDR5", "channels": 2, "interleave_bits": 1,
                "controller_kw": {"wck_sync_mode": "always_on"}},
        # Ramulator under its default WCK mode as well (record ramulator2-need_sync)
        "ram_variants": {"need_sync": {"controller_kw": {"wck_sync_mode": "need_sync"}}},
    },
    # Ramulator 2.1 ticks HBM4 at half the CK period, as HBM3
    "HBM4 32ch": {
        "preset": "HBM4_8000Mbps_32Gb_8Hi", "overrides": {}, "channels": 32, "ticks_per_cycle": 2,
        "steps_controller": {"frontend_width": 2},
        "ram": {"standard": "HBM4", "org_preset": "HBM4_32Gb_8Hi", "timing_preset": "HBM4_8000Mbps",
                "controller": "HBM34", "channels": 32},
    },
}

# The archsim device closest to each DRAMsim3 config file (its org and the timings where they differ from the
# JEDEC presets; configs/*.ini and src/ @2981759, docs/presets.md). DDR4: its tRTRS = 1 and no rank-switch
# bubble between writes to different ranks. HBM2: its HBM2_8Gb_x128.ini as DRAMsim3 resolves it (one rank of
# 2 KB rows per 128-bit channel, tRTP 5).
D3_DEVICE = {
    "DDR4-3200 1R": ("DDR4_3200AA_x8_8Gb_DRAMsim3", {"org.ranks": 1}),
    "DDR4-3200 2R": ("DDR4_3200AA_x8_8Gb_DRAMsim3", {"org.ranks": 2}),
    "HBM2 8ch": ("HBM2_2Gbps_DRAMsim3", {}),
}
# DRAMsim3's address_mapping strings (its config files), in archsim's spelling (docs/traces.md)
D3_MAPPING = {"DDR4-3200 1R": "rochrababgco", "DDR4-3200 2R": "rochrababgco", "HBM2 8ch": "rorabgbachco"}
# archsim's controller setting closest to DRAMsim3's (controller.cc, command_queue.cc @2981759): DRAMsim3 holds up
# to 32 transactions per channel in its read queue (and 32 in its write buffer) plus 8 commands in each bank's
# command queue (PER_BANK, cmd_queue_size 8), so a channel keeps up to 32 + 8 x banks requests in flight; archsim
# gets queues that deep (its one queue per direction in place of that two-level structure, the rest archsim's
# default controller). The value per device: D3_BANKS_PER_CHANNEL below.
D3_BANKS_PER_CHANNEL = {"DDR4-3200 1R": 16, "DDR4-3200 2R": 32, "HBM2 8ch": 16}


def d3_closest(name: str) -> dict:
    depth = 32 + 8 * D3_BANKS_PER_CHANNEL[name]
    return {"read_queue": depth, "write_queue": depth}


def d3_keys() -> dict[str, dict]:
    """archsim's default controller with the DRAMsim3 keys built so far (controller_conventions.yaml, dramsim3
    `controller:`), each alone and together: records d3/KEY and d3/keys."""
    from archsim.dram.controller import conventions

    built = conventions()["dramsim3"]["controller"]
    new = {k: v for k, v in built.items() if k in ("row_hit_cap", "refresh_stagger")}
    # (the keys of the session that built these two, with the refresh and row policy they name)
    keys = {k: built[k] for k in ("row_hit_cap", "refresh_stagger", "refresh", "row_policy")}
    return {**{f"d3/{k}": {k: v} for k, v in new.items()}, "d3/keys": keys}


# The dramsim3 convention (controller_conventions.yaml), and the convention with one of its rules taken out
# (what each is worth): records d3/dramsim3 and d3/dramsim3-NAME
def d3_convention() -> dict[str, dict]:
    from archsim.dram.controller import conventions

    built = conventions()["dramsim3"]["controller"]

    def without(*keys: str) -> dict:
        # (the convention's keys but these: a convention would give a key left at its default its own value)
        return {k: v for k, v in built.items() if k not in keys}

    return {
        "d3/dramsim3": {"convention": "dramsim3"},
        # its other keys over archsim's FR-FCFS read and write queues (32 each): no command queues, no posting
        "d3/dramsim3-no_bank_queues": without("bank_command_queue", "posted_writes", "write_drain_idle",
                                              "merge_reads"),
        "d3/dramsim3-no_merge_reads": without("merge_reads"),
        "d3/dramsim3-no_refresh_stagger": without("refresh_stagger"),
    }

# archsim's spelling of each reference's address layout (docs/traces.md): Ramulator 2.1's RoBaRaCoCh address
# mapper inside each controller, with its CacheLineInterleave channel mapper putting the channel bits right
# above the transaction offset; on HBM the pseudo-channel sits between the bank group and the column.
RAM_MAPPING = {"DDR4": "RoBaRaCoCh", "HBM2": "RoBaPcCoCh", "GDDR6": "RoBaCoCh", "HBM3": "RoBaRaPcCoCh",
               "DDR5": "RoBaRaCoCh", "GDDR7": "RoBaCoCh", "HBM4": "RoBaRaPcCoCh",
               "LPDDR5": "RoBaRaCoCh", "DDR5_RFM": "RoBaRaCoCh"}

def ram_mapping(dev: dict) -> str:
    """archsim's spelling of the device's Ramulator layout: the device's own `mapping` (a channel mapper with
    interleave bits), else its standard's (RAM_MAPPING)."""
    return dev.get("mapping", RAM_MAPPING[dev["ram"]["standard"]])


RAM_DRIVER = r"""
import json, sys, time
import ramulator as r
c = json.loads(sys.argv[1])
kw = {k: c[k] for k in ("rank",) if k in c}
dram = getattr(r.dram, c["standard"])(org_preset=c["org_preset"], timing_preset=c["timing_preset"], **kw)
ctrls = [getattr(r.controller, c["controller"])(
    dram=dram, scheduler=getattr(r.scheduler, c.get("scheduler", "FRFCFS"))(), refresh_manager=getattr(r.refresh_manager, c.get("refresh", "AllBank"))(),
    row_policy=r.row_policy.Open(), addr_mapper=r.addr_mapper.RoBaRaCoCh(), **c.get("controller_kw", {}),
    **({"controller_plugins": [r.controller_plugin.RFMManager(rfm_thresh=c["rfm_thresh"])]} if "rfm_thresh" in c
       else {}))
    for _ in range(c["channels"])]
mem = r.memory_system.GenericDRAM(clock_ratio=1, controllers=ctrls,
                                   channel_mapper=r.channel_mapper.CacheLineInterleave(
                                       interleave_bits=c.get("interleave_bits", 0)))
fe = r.frontend.LoadStoreTrace(clock_ratio=1, path=c["trace"])
sim = r.Simulation(fe, mem)
t0 = time.perf_counter()
sim.run()
wall = time.perf_counter() - t0
print(json.dumps({"wall_s": wall, "stats": sim.stats}))
"""


# Cumulative steps from archsim's default controller to the `ramulator2` convention (what each one is worth):
# active buffer; + pinned requests leave their queue; + the Ramulator device preset; the full convention adds
# Ramulator's run end (the last request handed over).
STEPS = {
    "step1-active_buffer": ({"active_buffer": True}, False),
    "step2-pinned_leave_queue": ({"active_buffer": True, "pinned_leave_queue": True}, False),
    "step3-preset": ({"active_buffer": True, "pinned_leave_queue": True}, True),
}


def write_traces(out: Path, requests: int, seed: int) -> dict[str, dict[str, Path]]:
    """The four traces, as Ramulator load/store and DRAMsim3 files (same requests, same order)."""
    paths: dict[str, dict[str, Path]] = {}
    for kind in KINDS:
        # the traces: 80 % reads, except "mixed": uniform random, half reads and half writes
        gen, reads = ("random", 0.5) if kind == "mixed" else (kind, 0.8)
        tr = synthetic_trace(gen, requests, read_fraction=reads, span_bytes=SPAN, access_bytes=LINE, seed=seed)
        p = {"ramulator": out / f"{kind}_{requests}.trace", "dramsim3": out / f"{kind}_{requests}.d3trace"}
        for fmt, path in p.items():
            if not path.exists():
                write_trace(tr, path, fmt)
        paths[kind] = p
    return paths


def ramulator_controller_stats(stats: dict) -> list[dict]:
    ctrl = stats["memory_system"]["controller"] if "controller" in stats["memory_system"] else None
    if isinstance(ctrl, list):
        return ctrl
    if isinstance(ctrl, dict) and "cycles" in ctrl:
        return [ctrl]
    # several controllers: keyed by their id
    return [v for k, v in stats["memory_system"].items() if isinstance(v, dict) and "cycles" in v]


def run_ramulator(dev: dict, trace: Path, root: Path, python: str) -> dict:
    cfg = {**dev["ram"], "trace": str(trace)}
    env = {**os.environ, "PYTHONPATH": str(root / "python")}
    t0 = time.perf_counter()
    out = subprocess.run([python, "-c", RAM_DRIVER, json.dumps(cfg)], env=env, capture_output=True, text=True,
                         check=True)
    proc_wall = time.perf_counter() - t0
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    cs = ramulator_controller_stats(rec["stats"])
    hits = sum(c["row_hits"] for c in cs)
    classified = sum(c["row_hits"] + c["row_misses"] + c["row_conflicts"] for c in cs)
    served = sum(c["num_read_reqs_served"] for c in cs)
    lat = sum(c["avg_read_latency"] * c["num_read_reqs_served"] for c in cs) / served if served else 0.0
    # Ramulator counts ticks; on HBM3 a tick is half a CK (DEVICES "ticks_per_cycle"): its figures in CK
    ticks = dev.get("ticks_per_cycle", 1)
    cycles = max(c["cycles"] for c in cs)
    return {"cycles": cycles // ticks if cycles % ticks == 0 else cycles / ticks,
            "ticks": cycles, "row_hit_rate": hits / classified if classified else 0.0,
            "read_latency_mean_cycles": lat / ticks, "wall_s": rec["wall_s"], "process_wall_s": proc_wall,
            "reads_served": served, "config": cfg}


def build_dramsim3_driver(root: Path, out: Path) -> Path:
    """Compile dramsim3_driver.cc (this directory) against the DRAMsim3 library built in `root`."""
    exe = out / "dramsim3_driver"
    src = Path(__file__).with_name("dramsim3_driver.cc")
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        subprocess.run(["g++", "-O2", "-std=c++11", str(src), "-I", str(root / "src"), "-L", str(root),
                        "-ldramsim3", f"-Wl,-rpath,{root}", "-o", str(exe)], check=True)
    return exe


def dramsim3_config(dev: dict, root: Path, out: Path) -> Path:
    """DRAMsim3's config file for the device, with the `d3_set` keys replaced (written under `out`)."""
    src = root / "configs" / dev["d3"]
    if not dev["d3_set"]:
        return src
    lines = []
    for line in src.read_text().splitlines():
        key = line.split("=")[0].strip()
        lines.append(f"{key} = {dev['d3_set'][key]}" if key in dev["d3_set"] else line)
    path = out / (src.stem + "".join(f"_{k}{v}" for k, v in dev["d3_set"].items()) + ".ini")
    path.write_text("\n".join(lines) + "\n")
    return path


def run_dramsim3(dev: dict, trace: Path, root: Path, out: Path) -> dict:
    """DRAMsim3 until every read has returned and every write is acknowledged (dramsim3_driver.cc); its
    statistics from its own dramsim3.json: row hits = row-hit column commands / column commands, mean read
    latency weighted by each channel's reads."""
    exe = build_dramsim3_driver(root, out)
    cfg = dramsim3_config(dev, root, out)
    stats_dir = out / "dramsim3_stats"
    stats_dir.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    res = subprocess.run([str(exe), str(cfg), str(trace), str(stats_dir)], capture_output=True, text=True,
                         check=True)
    proc_wall = time.perf_counter() - t0
    rec = json.loads(res.stdout.strip().splitlines()[-1])
    chans = list(json.loads((stats_dir / "dramsim3.json").read_text()).values())
    cmds = sum(c["num_read_cmds"] + c["num_write_cmds"] for c in chans)
    hits = sum(c["num_read_row_hits"] + c["num_write_row_hits"] for c in chans)
    reads = sum(c["num_reads_done"] for c in chans)
    lat = sum(c["average_read_latency"] * c["num_reads_done"] for c in chans) / reads if reads else 0.0
    return {"cycles": rec["end_cycle"], "row_hit_rate": hits / cmds if cmds else 0.0,
            "read_latency_mean_cycles": lat, "wall_s": rec["wall_s"], "process_wall_s": proc_wall,
            "reads_served": reads, "last_accept_cycle": rec["last_accept_cycle"],
            "write_cmds": sum(c["num_write_cmds"] for c in chans),
            "writes_done": sum(c["num_writes_done"] for c in chans),
            "config": {"file": str(cfg.relative_to(out) if cfg.is_relative_to(out) else cfg.relative_to(root)),
                       "set": dev["d3_set"]}}


def run_archsim(dev: dict, trace: Path, controller: dict, mapping: str) -> dict:
    """archsim on the trace; under a reference's convention with the preset of that reference's device files
    (docs/presets.md) where it has one."""
    from archsim.systems.dram_trace.system import run_trace

    controller = {**dev.get("controller", {}), **controller}
    ram_preset = controller.pop("_ramulator2_preset", False)
    jedec_preset = controller.pop("_jedec_preset", False)
    d3_device = controller.pop("_dramsim3_device", None)
    conv = "ramulator2" if ram_preset else controller.get("convention")
    preset = dev["preset"] if jedec_preset else dev.get(f"preset_{conv}", dev["preset"])
    overrides = dev["overrides"]
    if d3_device is not None:
        preset, overrides = d3_device
    t0 = time.perf_counter()
    r = run_trace(str(trace), preset=preset, channels=dev["channels"], mapping=mapping,
                  controller=controller, overrides=overrides)
    wall = time.perf_counter() - t0
    s = r.stats
    return {"cycles": int(s["cycles"]), "row_hit_rate": s["row_hit_rate"],
            "read_latency_mean_cycles": s["read_latency_mean_cycles"], "wall_s": s["wall_s"],
            "process_wall_s": wall, "last_accept_cycle": int(s["last_accept_cycle"]),
            "config": {"preset": preset, "overrides": overrides,
                                               "channels": dev["channels"], "mapping": mapping,
                                               "controller": controller}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--out", type=Path, required=True, help="results directory")
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--devices", nargs="*", default=list(DEVICES))
    ap.add_argument("--kinds", nargs="*", default=list(KINDS))
    ap.add_argument("--ramulator2", type=Path, help="Ramulator 2.1 source tree with its built Python module")
    ap.add_argument("--ramulator2-python", default=sys.executable, help="Python that imports Ramulator 2.1")
    ap.add_argument("--dramsim3", type=Path, help="DRAMsim3 source tree with its built libdramsim3.so: runs "
                    "DRAMsim3 on its own config files and archsim on the same DRAMsim3 trace files (records "
                    "dramsim3, d3/archsim: the default controller with DRAMsim3's layout and archsim's JEDEC "
                    "preset, d3/closest: DRAMsim3's device timings and queue depth, D3_DEVICE, d3_closest)")
    ap.add_argument("--conventions", nargs="*", default=["archsim", "ramulator2"],
                    help="archsim, ramulator2, or ramulator2-jedec (the convention on archsim's own preset)")
    ap.add_argument("--no-refresh", action="store_true", help="refresh off in both simulators (an experiment: "
                    "records named SIM+norefresh)")
    ap.add_argument("--steps", action="store_true", help="also the cumulative steps from archsim's default to the "
                    "ramulator2 convention (STEPS)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    traces = write_traces(args.out, args.requests, args.seed)
    path = args.out / "cases.json"
    records = json.loads(path.read_text()) if path.exists() else []
    done = {(r["sim"], r["device"], r["kind"], r["requests"]) for r in records}
    for name in args.devices:
        dev = DEVICES[name]
        mapping = ram_mapping(dev)
        if args.no_refresh:
            dev = {**dev, "ram": {**dev["ram"], "refresh": "NoRefresh"}}
        for kind in args.kinds:
            trace = traces[kind]["ramulator"]
            todo = []
            if args.ramulator2:
                todo.append(("ramulator2", run_ramulator, (dev, trace, args.ramulator2, args.ramulator2_python)))
                for variant, ram in dev.get("ram_variants", {}).items():
                    todo.append((f"ramulator2-{variant}", run_ramulator,
                                 ({**dev, "ram": {**dev["ram"], **ram}}, trace, args.ramulator2,
                                  args.ramulator2_python)))
            for conv in args.conventions + (list(STEPS) if args.steps else []):
                if conv in STEPS:
                    ctrl = {**STEPS[conv][0], **dev.get("steps_controller", {}),
                            "_ramulator2_preset": STEPS[conv][1]}
                else:
                    # "ramulator2-jedec": the convention on archsim's own preset, not Ramulator's device files
                    jedec = conv == "ramulator2-jedec"
                    ctrl = {"convention": "ramulator2", "_jedec_preset": True} if jedec else (
                        {"convention": conv} if conv != "archsim" else {})
                if args.no_refresh:
                    ctrl["refresh"] = "none"
                todo.append((f"archsim/{conv}", run_archsim, (dev, trace, ctrl, mapping)))
            if args.dramsim3 and not args.no_refresh:
                d3trace = traces[kind]["dramsim3"]
                d3map = D3_MAPPING[name]
                todo.append(("dramsim3", run_dramsim3, (dev, d3trace, args.dramsim3, args.out)))
                todo.append(("d3/archsim", run_archsim, (dev, d3trace, {"_dramsim3_device": D3_DEVICE[name]}, d3map)))
                todo.append(("d3/closest", run_archsim,
                             (dev, d3trace, {**d3_closest(name), "_dramsim3_device": D3_DEVICE[name]}, d3map)))
                for sim, keys in d3_convention().items():
                    todo.append((sim, run_archsim, (dev, d3trace, {**keys, "_dramsim3_device": D3_DEVICE[name]},
                                                    d3map)))
                for sim, keys in d3_keys().items():
                    todo.append((sim, run_archsim, (dev, d3trace, {**keys, "_dramsim3_device": D3_DEVICE[name]},
                                                    d3map)))
            if args.no_refresh:
                todo = [(f"{sim}+norefresh", fn, fn_args) for sim, fn, fn_args in todo]
            for sim, fn, fn_args in todo:
                if (sim, name, kind, args.requests) in done:
                    continue
                rec = {"sim": sim, "device": name, "kind": kind, "requests": args.requests, **fn(*fn_args)}
                print(f"{sim:22s} {name:14s} {kind:8s} cycles {rec['cycles']:>10.0f} hit "
                      f"{100 * rec['row_hit_rate']:5.1f} % lat {rec['read_latency_mean_cycles']:7.1f} "
                      f"wall {rec['wall_s']:.2f} s", flush=True)
                records.append(rec)
                path.write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
