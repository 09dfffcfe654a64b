#!/usr/bin/env python3
"""Run one case of a built NeuPIMs simulator and turn its per-stage summary into CSV rows.

The simulator writes a tab-separated per-stage summary file into the log directory it is
given.  This driver launches the binary for one case (model config + request trace +
sub-batch interleaving on/off), waits for it, then reads that summary and emits rows

    case, stage, code_cycles, pim_cycles, mem_bw_util_pct,
    sa_span_cycles, pim_span_cycles, sa_ops, pim_ops, wall_s

one per stage, plus a "block" row per case holding the totals (cycles summed, PIM cycles
summed, bandwidth utilisation weighted by stage cycles).  code_cycles, pim_cycles and
mem_bw_util_pct are the summary's three columns.  The span columns come from the per-engine
operation files of the same log directory: cycles from the stage's start until the last
operation of the SA (NPU) or PIM program ended (0 if that engine had nothing to do); the
*_ops columns list each operation's own duration as name=cycles.

The `npu-only` branch of the simulator writes no summary; for it (or any log directory without one) the rows
come from its per-operation log `tmp_log_file.tsv`: phase A* from the block's start to the start of the
attention operation (`--split-op`, default FusedMHA), B* that operation, E* the rest.

Only the Python standard library is used. Building the simulator is not this script's job: see README.md.

Examples
--------
  # run a case (simulator checkout with build/bin/Simulator inside SIMDIR):
  run_neupims.py --sim-dir /work/ext/neupims/src --case gpt3-7B_bs512_sbi-on \\
      --model-config SIMDIR/configs/model_configs/gpt3-7B.json \\
      --trace SIMDIR/request-traces/clb/share-gpt2-bs512-ms7B-tp4-clb-0.csv \\
      --sbi on --log-dir runs/gpt3-7B_bs512_sbi-on --out results.csv

  # only parse a log directory that already holds a summary:
  run_neupims.py --parse-only runs/gpt3-7B_bs512_sbi-on --case gpt3-7B_bs512_sbi-on

Exit status: 0 on success; 2 for a usage problem (e.g. the binary is missing);
1 if the simulator ran but left no usable summary.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import time

SUMMARY_NAME = "_summary.tsv"
OPLOG_NAME = "tmp_log_file.tsv"        # the npu-only branch's per-operation log
BINARY_REL = os.path.join("build", "bin", "Simulator")
FIELDS = ["case", "stage", "code_cycles", "pim_cycles", "mem_bw_util_pct",
          "sa_span_cycles", "pim_span_cycles", "sa_ops", "pim_ops", "wall_s"]


def die(msg, code=2):
    print(f"run_neupims.py: error: {msg}", file=sys.stderr)
    sys.exit(code)


def parse_summary(path):
    """Read the per-stage summary (header line, then one line per finished stage).

    Columns as written by the simulator: stage name, cycles spent in the stage,
    mean PIM-busy cycles per channel during the stage, memory bandwidth utilisation (%).
    Lines end with a trailing tab, so empty trailing cells are dropped."""
    rows = []
    with open(path, newline="") as fh:
        lines = [ln.rstrip("\r\n") for ln in fh if ln.strip()]
    if not lines:
        return rows
    header = [c for c in lines[0].split("\t") if c != ""]
    for ln in lines[1:]:
        cells = [c for c in ln.split("\t") if c != ""]
        rec = dict(zip(header, cells, strict=False))     # a row may end early (empty cells dropped)
        rows.append({
            "stage": rec.get(header[0], cells[0] if cells else ""),
            "code_cycles": int(rec.get("total_cycles", "0")),
            "pim_cycles": int(rec.get("pim_cycles", "0")),
            "mem_bw_util_pct": float(rec.get("mem_bw_util", "0")),
        })
    return rows


def parse_op_file(path):
    """Per-operation file of one engine and stage: returns [(op, start, end)] (absolute core cycles)."""
    ops = []
    if not os.path.isfile(path):
        return ops
    with open(path, newline="") as fh:
        lines = [ln.rstrip("\r\n") for ln in fh if ln.strip()]
    if not lines:
        return ops
    header = [c for c in lines[0].split("\t") if c != ""]
    for ln in lines[1:]:
        rec = dict(zip(header, [c for c in ln.split("\t") if c != ""], strict=False))
        try:
            ops.append((rec["OpName"], int(rec["StartCycle"]), int(rec["EndCycle"])))
        except (KeyError, ValueError):
            continue
    return sorted(ops, key=lambda t: t[1])


def parse_oplog_phases(path, split_op):
    """Phases A* / B* / E* of a run without a summary, from its per-operation log (OpName, StartCycle,
    EndCycle, ...): A* = start of the block to the start of `split_op`, B* = that operation, E* = the rest."""
    ops = parse_op_file(path)
    attn = [o for o in ops if o[0].split(".")[-1] == split_op]
    if len(attn) != 1:
        die(f"{path}: expected one {split_op} operation, found {len(attn)}", code=1)
    _, a0, a1 = attn[0]
    start = min(b for _, b, _ in ops)
    end = max(e for _, _, e in ops)
    rows = []
    for stage, lo, hi in (("A*", start, a0), ("B*", a0, a1), ("E*", a1, end)):
        inside = [(n, b, e) for n, b, e in ops if b >= lo and e <= hi]
        rows.append({"stage": stage, "code_cycles": hi - lo, "pim_cycles": 0, "mem_bw_util_pct": "",
                     "sa_span_cycles": hi - lo, "pim_span_cycles": 0,
                     "sa_ops": ";".join(f"{n.split('.')[-1]}={e - b}" for n, b, e in inside), "pim_ops": ""})
    return rows


def add_engine_columns(rows, log_dir):
    """Add, per stage, how long each engine's program was busy and its operations' durations."""
    start = 0
    for r in rows:
        for eng, prefix in (("sa", "SA"), ("pim", "PIM")):
            ops = parse_op_file(os.path.join(log_dir, f"{prefix}_stage_{r['stage']}.tsv"))
            if ops:
                r[f"{eng}_span_cycles"] = max(e for _, _, e in ops) - start
                r[f"{eng}_ops"] = ";".join(f"{n.split('.')[-1]}={e - b}" for n, b, e in ops)
            else:
                r[f"{eng}_span_cycles"] = 0
                r[f"{eng}_ops"] = ""
        start += r["code_cycles"]
    return rows


def with_block_total(rows):
    total = sum(r["code_cycles"] for r in rows)
    pim = sum(r["pim_cycles"] for r in rows)
    known = [r for r in rows if r["mem_bw_util_pct"] != ""]
    bw = (sum(r["mem_bw_util_pct"] * r["code_cycles"] for r in known) / total) if total and known else ""
    return rows + [{"stage": "block", "code_cycles": total, "pim_cycles": pim,
                    "mem_bw_util_pct": round(bw, 6) if bw != "" else "", "sa_span_cycles": "", "pim_span_cycles": "",
                    "sa_ops": "", "pim_ops": ""}]


def newton_config_with(sim_dir, mem_cfg, settings, log_dir):
    """A copy of memory config `mem_cfg` whose NewtonSim device config (its `pim_config_path`) has each `KEY = VALUE`
    line of `settings` (["KEY=VALUE", ...]) replaced, both written into `log_dir` (the checkout is not touched);
    returns the copied memory config's path. A key the device config does not set is a usage error.
    E.g. `tREFI=100000000` puts the first refresh past the end of a run (no refresh)."""
    with open(mem_cfg) as fh:
        mem = json.load(fh)
    if "pim_config_path" not in mem:
        die(f"{mem_cfg}: no pim_config_path; --newton-set needs a NewtonSim memory config")
    # the simulator resolves a relative pim_config_path from its src/ folder (src/Simulator.cc:23-26)
    ini_path = os.path.normpath(os.path.join(sim_dir, "src", mem["pim_config_path"]))
    with open(ini_path) as fh:
        lines = fh.read().split("\n")
    for setting in settings:
        key, sep, value = setting.partition("=")
        key, value = key.strip(), value.strip()
        hits = [i for i, ln in enumerate(lines) if ln.split("=")[0].strip() == key and "=" in ln]
        if not sep or len(hits) != 1:
            die(f"--newton-set {setting}: {ini_path} must set {key!r} on exactly one line (KEY=VALUE)")
        lines[hits[0]] = f"{key} = {value}"
    new_ini = os.path.join(log_dir, "newton_config.ini")
    with open(new_ini, "w") as fh:
        fh.write("\n".join(lines))
    mem["pim_config_path"] = new_ini
    new_mem = os.path.join(log_dir, "mem_config.json")
    with open(new_mem, "w") as fh:
        json.dump(mem, fh, indent=4)
    return new_mem


def run_case(a):
    sim_dir = os.path.abspath(a.sim_dir)
    binary = os.path.join(sim_dir, BINARY_REL)
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        die(f"simulator binary not found or not executable: {binary}")
    for label, p in (("model config", a.model_config), ("trace", a.trace)):
        if not os.path.isfile(p):
            die(f"{label} not found: {p}")
    core_cfg = a.core_config or os.path.join(sim_dir, "configs", "systolic_ws_128x128_dev.json")
    mem_cfg = a.mem_config or os.path.join(sim_dir, "configs", "memory_configs", "neupims.json")
    for label, p in (("core config", core_cfg), ("memory config", mem_cfg)):
        if not os.path.isfile(p):
            die(f"{label} not found: {p}")
    log_dir = os.path.abspath(a.log_dir)
    os.makedirs(log_dir, exist_ok=True)
    if a.newton_set:
        mem_cfg = newton_config_with(sim_dir, mem_cfg, a.newton_set, log_dir)
    if a.sys_config:
        sys_cfg = a.sys_config
        if not os.path.isfile(sys_cfg):
            die(f"system config not found: {sys_cfg}")
    else:
        # the checkout's own system config for the requested sub-batch mode
        sys_cfg = os.path.join(sim_dir, "configs", "system_configs", f"sub-batch-{a.sbi}.json")
        if not os.path.isfile(sys_cfg):
            die(f"no system config for --sbi {a.sbi} in the checkout ({sys_cfg}); pass --sys-config")
    cmd = [binary,
           "--config", os.path.abspath(core_cfg),
           "--mem_config", os.path.abspath(mem_cfg),
           "--model_config", os.path.abspath(a.model_config),
           "--sys_config", os.path.abspath(sys_cfg),
           "--cli_config", os.path.abspath(a.trace),
           "--log_dir", log_dir]
    if a.nice:
        cmd = ["nice", "-n", str(a.nice)] + cmd
    with open(os.path.join(log_dir, "command.txt"), "w") as fh:
        fh.write(" ".join(cmd) + "\n")
    out_path = os.path.join(log_dir, "simulator_stdout.log")
    t0 = time.time()
    with open(out_path, "wb") as out:
        proc = subprocess.run(cmd, cwd=sim_dir, stdout=out, stderr=subprocess.STDOUT)
    wall = time.time() - t0
    with open(os.path.join(log_dir, "run_info.json"), "w") as fh:
        json.dump({"returncode": proc.returncode, "wall_s": round(wall, 1), "cmd": cmd}, fh, indent=2)
    if not a.keep_stdout:
        # the simulator's stdout is very verbose; keep only its tail
        keep = 200_000
        size = os.path.getsize(out_path)
        if size > keep:
            with open(out_path, "rb") as fh:
                fh.seek(size - keep)
                tail = fh.read()
            with open(out_path, "wb") as fh:
                fh.write(b"[... truncated by run_neupims.py; kept last %d bytes of %d ...]\n" % (keep, size))
                fh.write(tail)
    return log_dir, wall, proc.returncode


def emit(rows, case, wall, out_csv):
    recs = [dict(case=case, wall_s=("" if wall is None else round(wall, 1)), **r) for r in rows]
    w = csv.DictWriter(sys.stdout, fieldnames=FIELDS)
    w.writeheader()
    w.writerows(recs)
    if out_csv:
        new = not os.path.exists(out_csv) or os.path.getsize(out_csv) == 0
        with open(out_csv, "a", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=FIELDS)
            if new:
                w.writeheader()
            w.writerows(recs)


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sim-dir", help="simulator checkout holding build/bin/Simulator and configs/")
    p.add_argument("--case", required=True, help="case name written into every output row")
    p.add_argument("--model-config", help="model config JSON (e.g. configs/model_configs/gpt3-7B.json)")
    p.add_argument("--trace", help="request trace CSV (columns seq_len,ch_idx)")
    p.add_argument("--sbi", choices=["on", "off"], default="on",
                   help="sub-batch interleaving: picks SIM_DIR/configs/system_configs/sub-batch-{on,off}.json; ignored when --sys-config is given (default: on)")
    p.add_argument("--sys-config", help="system config JSON to use instead of SIM_DIR/configs/system_configs/sub-batch-{on,off}.json")
    p.add_argument("--mem-config", help="memory config JSON (default: configs/memory_configs/neupims.json)")
    p.add_argument("--newton-set", action="append", metavar="KEY=VALUE",
                   help="replace one line of the memory config's NewtonSim device config, in a copy written to the log "
                        "directory (repeatable; e.g. tREFI=100000000: no refresh)")
    p.add_argument("--core-config", help="core config JSON (default: configs/systolic_ws_128x128_dev.json)")
    p.add_argument("--log-dir", help="directory the simulator writes its logs into (created)")
    p.add_argument("--out", help="append the rows to this CSV file as well as printing them")
    p.add_argument("--nice", type=int, default=5, help="run the binary under nice -n N (0 = no nice; default 5)")
    p.add_argument("--keep-stdout", action="store_true", help="keep the full simulator stdout (can be large)")
    p.add_argument("--parse-only", metavar="LOG_DIR", help="do not run; parse LOG_DIR/" + SUMMARY_NAME)
    p.add_argument("--split-op", default="FusedMHA",
                   help="without a summary: the attention operation that splits the op log into A*/B*/E* (default FusedMHA)")
    a = p.parse_args(argv)

    wall = None
    if a.parse_only:
        log_dir = a.parse_only
        info = os.path.join(log_dir, "run_info.json")
        if os.path.isfile(info):
            with open(info) as fh:
                wall = json.load(fh).get("wall_s")
    else:
        missing = [n for n in ("sim_dir", "model_config", "trace", "log_dir") if getattr(a, n) is None]
        if missing:
            die("missing required option(s) for a run: " + ", ".join("--" + m.replace("_", "-") for m in missing))
        log_dir, wall, rc = run_case(a)
        if rc != 0:
            print(f"run_neupims.py: note: simulator exited with status {rc}", file=sys.stderr)
    summ = os.path.join(log_dir, SUMMARY_NAME)
    oplog = os.path.join(log_dir, OPLOG_NAME)
    if os.path.isfile(summ):
        rows = parse_summary(summ)
        if not rows:
            die(f"summary file {summ} has no stage rows", code=1)
        rows = add_engine_columns(rows, log_dir)
    elif os.path.isfile(oplog):
        rows = parse_oplog_phases(oplog, a.split_op)
    else:
        die(f"no summary file at {summ} and no operation log {oplog}", code=1)
    emit(with_block_total(rows), a.case, wall, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
