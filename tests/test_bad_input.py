"""The bad-input harness (issue 27): many kinds of bad input over every subcommand, each must end in one
error line on stderr and exit code 2, with no traceback and before any simulation. A new kind of bad input
is one more row here, so the count of handled kinds cannot fall silently."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from archsim.cli import main

SWEEP_OK = """\
name: t
base: {system: dram-trace, preset: DDR4_3200AA_x8_8Gb, trace: {kind: random, requests: 100}}
axes:
  - grid: {controller.row_policy: [open, closed]}
"""


def _files(tmp: Path) -> None:
    """Inputs the cases refer to, in the test's working directory."""
    (tmp / "afile").write_text("a file, not a folder\n")
    (tmp / "adir").mkdir()
    (tmp / "latin1.yaml").write_bytes(b"dram:\n  timing: {nRCD: 20}  # \xe9t\xe9\n")
    (tmp / "latin1.json").write_bytes(b'{"manifest": "\xe9"}')
    (tmp / "broken.json").write_text("{not json")
    (tmp / "nomanifest.json").write_text(json.dumps({"stats": {}}))
    (tmp / "bad.trace").write_text("LD 0x100\nLD 0xZZ\n")
    (tmp / "empty.trace").write_text("")
    (tmp / "bad.yaml").write_text("dram: [unclosed\n")
    (tmp / "list.yaml").write_text("- 1\n- 2\n")
    (tmp / "heads.yaml").write_text("name: odd\nd_model: 768\nn_layers: 2\nn_heads: 7\nvocab: 1000\n"
                                    "max_context: 128\n")
    (tmp / "kv.yaml").write_text("name: kv\nd_model: 768\nn_layers: 2\nn_heads: 12\nn_kv_heads: 5\n"
                                 "vocab: 1000\nmax_context: 128\n")
    header = "cycle,command,channel,pseudochannel,rank,bankgroup,bank,row,column\n"
    (tmp / "badcmd.csv").write_text(header + "10,ACT,0,0,0,0,0,5,-1\n20,XYZ,0,0,0,0,0,5,-1\n")
    (tmp / "negcycle.csv").write_text(header + "-5,ACT,0,0,0,0,0,5,-1\n")
    (tmp / "badbank.csv").write_text(header + "10,ACT,0,0,0,0,99,5,-1\n")
    (tmp / "nocols.csv").write_text("a,b\n1,2\n")
    (tmp / "prog.s").write_text("FROB 1 2\n")
    (tmp / "good.s").write_text("NOP\n")
    (tmp / "bad.hex").write_text("zzzz\n")
    (tmp / "ok-sweep.yaml").write_text(SWEEP_OK)
    (tmp / "badkey-sweep.yaml").write_text(SWEEP_OK.replace("controller.row_policy", "controller.row_polcy"))
    (tmp / "badval-sweep.yaml").write_text(SWEEP_OK.replace("[open, closed]", "[open, sideways]"))
    (tmp / "badmetric-sweep.yaml").write_text(SWEEP_OK + "metrics: {m: '__import__(1)'}\n")
    (tmp / "notsweep.yaml").write_text("just: a mapping\n")
    (tmp / "unknowncol-sweep.yaml").write_text(SWEEP_OK + "metrics: {m: bandwidth_GBs / 2}\n")
    (tmp / "badbase-sweep.yaml").write_text(SWEEP_OK.replace("DDR4_3200AA_x8_8Gb", "DDR9"))
    (tmp / "nosystem-sweep.yaml").write_text(SWEEP_OK.replace("system: dram-trace, ", ""))
    (tmp / "badmapping-sweep.yaml").write_text(SWEEP_OK.replace("controller.row_policy: [open, closed]",
                                                                 "mapping: [RoBaRaCoCh, XYZ]"))
    (tmp / "dt-mapping.yaml").write_text("system: dram-trace\nmapping: XYZ\ntrace: {kind: random, requests: 10}\n")
    (tmp / "t3-mapping.yaml").write_text("memory_mapping: RoRaBgBaChCo,Ch9^Ad16\n")
    (tmp / "pimgpt-layout.yaml").write_text("mapping_overrides: {weights: {layout: bogus}}\n")
    (tmp / "othersystem.yaml").write_text("system: t3\n")
    study = ("name: s\nsystems: [pimgpt]\nmodels: [gpt3-7b]\nmemory: [hbm2 x 4]\nbatch: [1]\ninput_len: 16\n"
             "output_len: 4\ntp: [1]\n")
    (tmp / "ok-study.yaml").write_text(study)
    (tmp / "key-study.yaml").write_text(study + "designs: [bogus]\n")
    (tmp / "system-study.yaml").write_text(study.replace("[pimgpt]", "[bogus]"))
    (tmp / "memory-study.yaml").write_text(study.replace("hbm2 x 4", "hbm9 x 4"))
    (tmp / "batch-study.yaml").write_text(study.replace("batch: [1]", "batch: [-3]"))
    (tmp / "emptyaxis-sweep.yaml").write_text(SWEEP_OK.replace("[open, closed]", "[]"))
    (tmp / "baseline-notaxis-sweep.yaml").write_text(
        SWEEP_OK + "metrics: {m: {expr: cycles / baseline.cycles, baseline: {channels: 2}}}\n")
    (tmp / "baseline-value-sweep.yaml").write_text(
        SWEEP_OK + "metrics: {m: {expr: cycles / baseline.cycles, baseline: {controller.row_policy: shut}}}\n")
    (tmp / "topkey-sweep.yaml").write_text(SWEEP_OK + "extra: 1\n")
    (tmp / "seed-sweep.yaml").write_text(SWEEP_OK + "seed: many\n")
    (tmp / "imports-sweep.yaml").write_text(SWEEP_OK + "imports: [no_such_module_xyz]\n")
    (tmp / "dupkey-sweep.yaml").write_text(SWEEP_OK + "name: again\n")
    # issue 35: hostile files (small versions here; the full-size ones run in a subprocess, HOSTILE below)
    (tmp / "laughs.yaml").write_text(LAUGHS)
    (tmp / "selfref.yaml").write_text("a: &x\n  b: *x\n")
    (tmp / "deep.yaml").write_text("".join(" " * i + f"k{i}:\n" for i in range(70)) + " " * 70 + "v\n")
    (tmp / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp / "nul.yaml").write_bytes(b"tokens: 1\n\0\n")
    (tmp / "nul.trace").write_bytes(b"LD 0x100\n\0\0\n")
    (tmp / "ok.trace").write_text("LD 0x100\nST 0x200\n")
    (tmp / "longaddr.trace").write_text("LD " + "1" * 10_000 + "\n")
    (tmp / "longstamp.trace").write_text("0x100 READ " + "7" * 10_000 + "\n")
    (tmp / "tokens.yaml").write_text("tokens: 1\n")
    (tmp / "nan-sweep.yaml").write_text(SWEEP_OK.replace("controller.row_policy: [open, closed]",
                                                         "dram.timing.nRCD: [20, .nan]"))
    (tmp / "inf-sweep.yaml").write_text(SWEEP_OK.replace("controller.row_policy: [open, closed]",
                                                         "controller.write_high_watermark: [0.5, .inf]"))
    (tmp / "grid-sweep.yaml").write_text(SWEEP_OK.replace("controller.row_policy: [open, closed]",
                                                          f"trace.requests: {list(range(100, 140))}, "
                                                          f"controller.read_queue: {list(range(1, 41))}"))
    (tmp / "huge-prompt.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,1000000000000,1\n")
    for name, to in (("loop1", "loop2"), ("loop2", "loop1"), ("self", "self")):
        (tmp / name).symlink_to(to)


# 342 bytes of nested aliases that expand to 9^9 values ("billion laughs")
LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{c}: &{c} [{','.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))


T = ["trace", "synthetic:random:100"]
R = ["run", "--system", "pimgpt", "--model", "gpt2-small", "--tokens", "1", "--no-baselines"]

CASES: dict[str, list[str]] = {
    # trace
    "trace missing file": ["trace", "nope.trace"],
    "trace malformed line": ["trace", "bad.trace"],
    "trace empty file": ["trace", "empty.trace"],
    "trace synthetic kind": ["trace", "synthetic:bogus:10"],
    "trace synthetic count": ["trace", "synthetic:random:zero"],
    "trace queue 0": [*T, "--queue", "0"],
    "trace posted writes without command queues": [*T, "--set", "controller.posted_writes=true"],
    "trace queue negative": [*T, "--queue", "-4"],
    "trace channels 0": [*T, "--channels", "0"],
    "trace unknown preset": [*T, "--preset", "DDR9"],
    "trace drampower log of HBM2": [*T, "--preset", "HBM2_2Gbps_PC", "--log", "x.csv", "--log-format", "drampower"],
    "trace drampower log without --log": [*T, "--log-format", "drampower"],
    "trace drampower log of 2 channels": [*T, "--channels", "2", "--log", "x.csv", "--log-format", "drampower"],
    "trace bad mapping": [*T, "--address-mapping", "XYZ"],
    "trace negative timing": [*T, "--set", "dram.timing.nRCD=-3"],
    "trace unknown key": [*T, "--set", "dram.timing.nRCDX=3"],
    "trace key outside dram": [*T, "--set", "tokens=3"],
    "trace set without =": [*T, "--set", "dram.timing.nRCD"],
    "trace config missing": [*T, "--config", "nope.yaml"],
    "trace config not utf-8": [*T, "--config", "latin1.yaml"],
    "trace config bad yaml": [*T, "--config", "bad.yaml"],
    "trace config a list": [*T, "--config", "list.yaml"],
    "trace json under a file": [*T, "--json", "afile/out.json"],
    "trace json is a folder": [*T, "--json", "adir"],
    "trace csv under a file": [*T, "--csv", "afile/out.csv"],
    "trace log under a file": [*T, "--log", "afile/log.csv"],
    # run / config show
    "run unknown system": ["run", "--system", "nosuch"],
    "run unknown model": ["run", "--system", "pimgpt", "--model", "gpt9"],
    "run tokens 0": [*R[:-3], "--tokens", "0"],
    "run tokens text": [*R[:-3], "--tokens", "many"],
    "run channels not power of 2": [*R, "--channels", "3"],
    "run unknown key": [*R, "--set", "dram.timing.nRCDRDX=3"],
    "run flag of another system": ["run", "--system", "dram-trace", "--layout", "packed"],
    "run from-json missing": ["run", "--from-json", "nope.json"],
    "run from-json not utf-8": ["run", "--from-json", "latin1.json"],
    "run from-json broken": ["run", "--from-json", "broken.json"],
    "run from-json no manifest": ["run", "--from-json", "nomanifest.json"],
    "run n_heads not dividing d_model": [*R[:4], "--model", "heads.yaml", "--tokens", "1"],
    "run n_kv_heads not dividing n_heads": [*R[:4], "--model", "kv.yaml", "--tokens", "1"],
    "run json under a file": [*R, "--json", "afile/run.json"],
    "run csv is a folder": [*R, "--csv", "adir"],
    "config show bad key": ["config", "show", "--system", "pimgpt", "--set", "nope=1"],
    "config show bad system": ["config", "show", "--system", "pimgtp"],
    # check-log
    "check-log missing": ["check-log", "nope.csv", "--preset", "DDR4_3200AA_x8_8Gb"],
    "check-log channels 0": ["check-log", "badcmd.csv", "--preset", "DDR4_3200AA_x8_8Gb", "--channels", "0"],
    "check-log unknown command": ["check-log", "badcmd.csv", "--preset", "DDR4_3200AA_x8_8Gb"],
    "check-log negative cycle": ["check-log", "negcycle.csv", "--preset", "DDR4_3200AA_x8_8Gb"],
    "check-log bank out of range": ["check-log", "badbank.csv", "--preset", "DDR4_3200AA_x8_8Gb"],
    "check-log missing columns": ["check-log", "nocols.csv", "--preset", "DDR4_3200AA_x8_8Gb"],
    "check-log unknown preset": ["check-log", "badcmd.csv", "--preset", "DDR9"],
    "check-log key outside dram": ["check-log", "badcmd.csv", "--preset", "DDR4_3200AA_x8_8Gb", "--set", "x=1"],
    # sweep / report
    "sweep missing file": ["sweep", "nope.yaml"],
    "sweep not a sweep": ["sweep", "notsweep.yaml", "-o", "res"],
    "sweep bad yaml": ["sweep", "bad.yaml", "-o", "res"],
    "sweep unknown axis key": ["sweep", "badkey-sweep.yaml", "-o", "res"],
    "sweep bad axis value": ["sweep", "badval-sweep.yaml", "-o", "res"],
    "sweep bad metric": ["sweep", "badmetric-sweep.yaml", "-o", "res"],
    "sweep out under a file": ["sweep", "ok-sweep.yaml", "-o", "afile/res"],
    "sweep out is a file": ["sweep", "ok-sweep.yaml", "-o", "afile"],
    "sweep jobs 0": ["sweep", "ok-sweep.yaml", "-o", "res", "-j", "0"],
    "report missing input": ["report", "nope-results", "-o", "rep"],
    "report not a result": ["report", "broken.json", "-o", "rep"],
    "report out under a file": ["report", "nomanifest.json", "-o", "afile/rep"],
    # compile / isa / presets
    "compile without -o": ["compile", "--model", "gpt2-small"],
    "compile out under a file": ["compile", "--model", "gpt2-small", "-o", "afile/out"],
    "isa asm missing input": ["isa", "asm", "nope.s", "-o", "out.hex"],
    "isa asm unknown instruction": ["isa", "asm", "prog.s", "-o", "out.hex"],
    "isa asm out under a file": ["isa", "asm", "good.s", "-o", "afile/out.hex"],
    "isa asm unknown isa": ["isa", "asm", "good.s", "-o", "out.hex", "--isa", "nosuch"],
    "isa disasm bad hex": ["isa", "disasm", "bad.hex"],
    "isa show unknown": ["isa", "show", "nosuch"],
    "presets show unknown": ["presets", "show", "DDR9"],
    # more of trace
    "trace channels not power of 2": [*T, "--channels", "3"],
    "trace unknown engine": [*T, "--engine", "warp"],
    "trace unknown row policy": [*T, "--row-policy", "sideways"],
    "trace controller key unknown": [*T, "--set", "controller.row_polcy=open"],
    "trace controller value bad": [*T, "--set", "controller.row_policy=sideways"],
    "trace controller mapping bad": [*T, "--set", "controller.mapping=XYZ"],
    "trace timing not a number": [*T, "--set", "dram.timing.nRCD=fast"],
    "trace config of another system": [*T, "--config", "othersystem.yaml"],
    "trace mapping hash bit out of range": [*T, "--address-mapping", "RoBaRaCoCh,Ch0^Ad99"],
    "trace synthetic negative count": ["trace", "synthetic:random:-5"],
    # run: every system
    "run dram-trace mapping in config file": ["run", "--config", "dt-mapping.yaml"],
    "run dram-trace without a trace": ["run", "--system", "dram-trace"],
    "run dram-trace controller value": ["run", "--system", "dram-trace", "--set", "controller.refresh=sometimes"],
    "run pimgpt unknown preset": [*R, "--set", "preset=DDR9"],
    "run pimgpt non-PIM preset": [*R, "--set", "preset=DDR4_3200AA_x8_8Gb"],
    "run pimgpt unknown mapping policy": [*R, "--set", "mapping=nosuch"],
    "run pimgpt bad layout override": [*R, "--set", "mapping_overrides.weights.layout=bogus"],
    "run pimgpt bad layout in config": [*R, "--config", "pimgpt-layout.yaml"],
    "run pimgpt unmodelled layout override": [*R, "--set", "mapping_overrides.attention.k_layout=bogus"],
    "run pimgpt bad schedule": [*R, "--set", "schedule=sometimes"],
    "run pimgpt tokens beyond context": [*R[:-3], "--tokens", "100000"],
    "run t3 bad memory_mapping": ["run", "--system", "t3", "--set", "memory_mapping=XYZ"],
    "run t3 hash bit out of range in config": ["run", "--system", "t3", "--config", "t3-mapping.yaml"],
    "run t3 unknown config": ["run", "--system", "t3", "--set", "configs=[t4]"],
    "run t3 empty configs": ["run", "--system", "t3", "--set", "configs=[]"],
    "run t3 tracker 0": ["run", "--system", "t3", "--set", "tracker_entries=0"],
    "run t3 unknown preset": ["run", "--system", "t3", "--set", "preset=nosuch"],
    "run t3 unknown model": ["run", "--system", "t3", "--set", "model=gpt9"],
    "run t3 bad gate": ["run", "--system", "t3", "--set", "mca_gate=sometimes"],
    "run t3 ring directions 3": ["run", "--system", "t3", "--set", "ring_directions=3"],
    "run t3 window -1": ["run", "--system", "t3", "--set", "window_cycles=-1"],
    "run neupims unknown key": ["run", "--system", "neupims", "--set", "dram_preset=x"],
    "run neupims batch 0": ["run", "--system", "neupims", "--set", "batch=0"],
    "run neupims bad mode": ["run", "--system", "neupims", "--set", "mode=offline"],
    "run neupims unknown mapping policy": ["run", "--system", "neupims", "--set", "mapping=nosuch"],
    "run neupims bad channel assignment": ["run", "--system", "neupims", "--set", "channel_assignment=random"],
    "run npu_only layers 0": ["run", "--system", "npu_only", "--set", "layers=0"],
    "run gpu_only unknown model": ["run", "--system", "gpu_only", "--set", "model=gpt9"],
    "run duplex unknown device": ["run", "--system", "duplex", "--set", "device=tpu"],
    "run duplex requests 0": ["run", "--system", "duplex", "--set", "requests=0"],
    "run duplex negative qps": ["run", "--system", "duplex", "--set", "qps=-1"],
    "run duplex bad dispatch rule": ["run", "--system", "duplex", "--set", "dispatch_rule=bogus"],
    "run duplex bad moe dispatch": ["run", "--system", "duplex", "--set", "dispatch=per_token"],
    "run duplex unknown mapping policy": ["run", "--system", "duplex", "--set", "mapping=nosuch"],
    "run gemm m 0": ["run", "--system", "gemm", "--set", "m=0"],
    "run gemm bad dataflow": ["run", "--system", "gemm", "--set", "npu.dataflow=diagonal"],
    "run gemm bad memory": ["run", "--system", "gemm", "--set", "memory=flash"],
    "run seed text": [*R, "--seed", "x"],
    "run config of another system": [*R, "--config", "othersystem.yaml"],
    "config show flag of another system": ["config", "show", "--system", "t3", "--layout", "packed"],
    # sweep
    "sweep unknown metric column": ["sweep", "unknowncol-sweep.yaml", "-o", "res"],
    "sweep unknown preset in base": ["sweep", "badbase-sweep.yaml", "-o", "res"],
    "sweep base without system": ["sweep", "nosystem-sweep.yaml", "-o", "res"],
    "sweep bad mapping on an axis": ["sweep", "badmapping-sweep.yaml", "-o", "res"],
    "sweep unknown executor": ["sweep", "ok-sweep.yaml", "-o", "res", "--executor", "slurm"],
    # check-log / isa / presets / compile
    "check-log not utf-8": ["check-log", "latin1.yaml", "--preset", "DDR4_3200AA_x8_8Gb"],
    "check-log empty file": ["check-log", "empty.trace", "--preset", "DDR4_3200AA_x8_8Gb"],
    "isa disasm missing input": ["isa", "disasm", "nope.hex"],
    "isa gen-verilog out under a file": ["isa", "gen-verilog", "-o", "afile/rtl", "--isa", "nosuch"],
    "compile unknown model": ["compile", "--model", "gpt9", "-o", "out"],
    "compile tokens 0": ["compile", "--model", "gpt2-small", "--tokens", "0", "-o", "out"],
    "compile system without streams": ["compile", "--system", "t3", "-o", "out"],
    "compile out is a file": ["compile", "--model", "gpt2-small", "-o", "afile"],
    "compile channels not power of 2": ["compile", "--model", "gpt2-small", "--channels", "3", "-o", "out"],
    "compile unknown key": ["compile", "--model", "gpt2-small", "--set", "nope=1", "-o", "out"],
    # more of run
    "run json is a folder": [*R, "--json", "adir"],
    "run csv under a file": [*R, "--csv", "afile/x.csv"],
    "run tokens negative": [*R[:-3], "--tokens", "-2"],
    "run pimgpt channels 0": [*R, "--channels", "0"],
    "run pimgpt asic clock 0": [*R, "--set", "asic_clock_hz=0"],
    "run pimgpt unknown baseline": [*R[:-1], "--set", "baselines=[tpu9]"],
    "run pimgpt timing negative": [*R, "--set", "dram.timing.nRCD=-3"],
    "run dram-trace requests 0": ["run", "--system", "dram-trace", "--set", "trace.kind=random",
                                  "--set", "trace.requests=0"],
    "run dram-trace unknown trace kind": ["run", "--system", "dram-trace", "--set", "trace.kind=zigzag",
                                          "--set", "trace.requests=10"],
    "run dram-trace trace file missing": ["run", "--system", "dram-trace", "--set", "trace=nope.trace"],
    "run dram-trace channels not power of 2": ["run", "--system", "dram-trace", "--set", "trace.kind=random",
                                               "--set", "trace.requests=10", "--set", "channels=3"],
    "run t3 tp 0": ["run", "--system", "t3", "--set", "tp=0"],
    "run t3 tokens 0": ["run", "--system", "t3", "--set", "tokens=0"],
    "run t3 unknown sublayer": ["run", "--system", "t3", "--set", "sublayer=fc9_fwd"],
    "run neupims unknown dataset": ["run", "--system", "neupims", "--set", "dataset=nope.csv"],
    "run neupims tp 0": ["run", "--system", "neupims", "--set", "tp=0"],
    "run duplex max_batch 0": ["run", "--system", "duplex", "--set", "max_batch=0"],
    "run duplex beyond the context": ["run", "--system", "duplex", "--set", "input_len=100000"],
    "run duplex devices 0": ["run", "--system", "duplex", "--set", "devices=0"],
    "run gemm array height 0": ["run", "--system", "gemm", "--set", "npu.height=0"],
    "config show bad value": ["config", "show", "--system", "pimgpt", "--set", "tokens=0"],
    # more of sweep
    "sweep not utf-8": ["sweep", "latin1.yaml", "-o", "res"],
    "sweep jobs negative": ["sweep", "ok-sweep.yaml", "-o", "res", "-j", "-1"],
    "sweep empty axis": ["sweep", "emptyaxis-sweep.yaml", "-o", "res"],
    "sweep baseline not an axis": ["sweep", "baseline-notaxis-sweep.yaml", "-o", "res"],
    "sweep baseline value not swept": ["sweep", "baseline-value-sweep.yaml", "-o", "res"],
    "sweep unknown top-level key": ["sweep", "topkey-sweep.yaml", "-o", "res"],
    "sweep seed text": ["sweep", "seed-sweep.yaml", "-o", "res"],
    "sweep import missing": ["sweep", "imports-sweep.yaml", "-o", "res"],
    "sweep duplicate key": ["sweep", "dupkey-sweep.yaml", "-o", "res"],
    # more of check-log / isa / report
    "check-log channels negative": ["check-log", "badcmd.csv", "--preset", "DDR4_3200AA_x8_8Gb", "--channels", "-1"],
    "check-log timing negative": ["check-log", "badcmd.csv", "--preset", "DDR4_3200AA_x8_8Gb",
                                  "--set", "dram.timing.nRCD=-1"],
    "isa asm not utf-8": ["isa", "asm", "latin1.yaml", "-o", "out.hex"],
    "isa disasm not utf-8": ["isa", "disasm", "latin1.json"],
    "isa show a broken spec": ["isa", "show", "bad.yaml"],
    "report out is a file": ["report", "nomanifest.json", "-o", "afile"],
    "report not utf-8": ["report", "latin1.json", "-o", "rep"],
    # issue 35: hostile files bounded, numbers in range before the kernel, no silent conflicts
    "run config billion laughs": [*R, "--config", "laughs.yaml"],
    "run config alias refers to itself": [*R, "--config", "selfref.yaml"],
    "run config nested 70 deep": [*R, "--config", "deep.yaml"],
    "run config /dev/zero": [*R, "--config", "/dev/zero"],
    "run config with NUL bytes": [*R, "--config", "nul.yaml"],
    "run from-json /dev/zero": ["run", "--from-json", "/dev/zero"],
    "run from-json nested 100,000 deep": ["run", "--from-json", "deep.json"],
    "run asic clock nan": [*R, "--set", "asic_clock_hz=nan"],
    "run asic clock inf": [*R, "--set", "asic_clock_hz=inf"],
    "run asic clock beyond the range": [*R, "--set", "asic_clock_hz=1e16"],
    "run timing beyond the kernel's range": [*R, "--set", "dram.timing.nRCDRD=4294967296"],
    "run timing nan": [*R, "--set", "dram.timing.nRCDRD=nan"],
    "run tCK infinite": [*R, "--set", "dram.timing.tCK_ps=.inf"],
    "run channels beyond the limit": [*R, "--channels", "8192"],
    "run flag and --set disagree": [*R[:5], "--tokens", "2", "--set", "tokens=3"],
    "run --set twice, two values": [*R[:5], "--no-baselines", "--set", "tokens=2", "--set", "tokens=3"],
    "run --no-baselines and --set baselines": [*R, "--set", "baselines=[t4]"],
    "run json and csv one file": [*R, "--json", "x.json", "--csv", "x.json"],
    "run json and csv one file by two names": [*R, "--json", "x.json", "--csv", "./x.json"],
    "run json is the --config input": [*R, "--config", "tokens.yaml", "--json", "tokens.yaml"],
    "run json is a looping symlink": [*R, "--json", "loop1"],
    "run json is a symlink to itself": [*R, "--csv", "self"],
    "run neupims batch beyond the limit": ["run", "--system", "neupims", "--set", "batch=1000000"],
    "run neupims a request of 10^12 tokens": ["run", "--system", "neupims", "--mode", "serving", "--set", "layers=1",
                                              "--set", "dataset=huge-prompt.csv", "--set", "requests=1"],
    "run duplex requests beyond the limit": ["run", "--system", "duplex", "--set", "requests=1000000"],
    "run t3 tokens beyond the limit": ["run", "--system", "t3", "--set", "tokens=1000000000"],
    "run dram-trace requests beyond the limit": ["run", "--system", "dram-trace", "--set", "trace.kind=random",
                                                 "--set", "trace.requests=100000000000"],
    "run dram-trace queue beyond the limit": ["run", "--system", "dram-trace", "--set", "trace.kind=random",
                                              "--set", "trace.requests=10", "--set", "controller.read_queue=100000"],
    "trace channels beyond the limit": [*T, "--channels", "1048576"],
    "trace queue beyond the limit": [*T, "--queue", "100000"],
    "trace synthetic count beyond the limit": ["trace", "synthetic:random:100000000000"],
    "trace synthetic count of 5,000 digits": ["trace", "synthetic:random:" + "9" * 5000],
    "trace address of 10,000 digits": ["trace", "longaddr.trace"],
    "trace time stamp of 10,000 digits": ["trace", "longstamp.trace"],
    "trace /dev/zero": ["trace", "/dev/zero"],
    "trace with NUL bytes": ["trace", "nul.trace"],
    "trace config billion laughs": [*T, "--config", "laughs.yaml"],
    "trace row policy flag and --set disagree": [*T, "--row-policy", "open", "--set", "controller.row_policy=closed"],
    "trace queue flag and --set disagree": [*T, "--queue", "8", "--set", "controller.read_queue=16"],
    "trace channels flag and --set disagree": [*T, "--channels", "2", "--set", "dram.org.channels=4"],
    "trace json and log one file": [*T, "--json", "out.json", "--log", "out.json"],
    "trace json is the trace": ["trace", "ok.trace", "--json", "ok.trace"],
    "trace tCK beyond the range": [*T, "--set", "dram.timing.tCK_ps=10000000"],
    "trace timing in ns infinite": [*T, "--set", "dram.timing.tRFC_ns=.inf"],
    "trace timing beyond the kernel's range": [*T, "--set", "dram.timing.nRCD=2000000"],
    "trace frontend width beyond the limit": [*T, "--set", "controller.frontend_width=100000"],
    "sweep nan on an axis": ["sweep", "nan-sweep.yaml", "-o", "res"],
    "sweep inf on an axis": ["sweep", "inf-sweep.yaml", "-o", "res"],
    "sweep grid above the point limit": ["sweep", "grid-sweep.yaml", "-o", "res"],
    "sweep max-points 0": ["sweep", "ok-sweep.yaml", "-o", "res", "--max-points", "0"],
    "sweep file billion laughs": ["sweep", "laughs.yaml", "-o", "res"],
    "sweep file /dev/zero": ["sweep", "/dev/zero", "-o", "res"],
    "check-log channels beyond the limit": ["check-log", "badcmd.csv", "--preset", "DDR4_3200AA_x8_8Gb",
                                            "--channels", "8192"],
    "check-log channels flag and --set disagree": ["check-log", "badcmd.csv", "--preset", "DDR4_3200AA_x8_8Gb",
                                                   "--channels", "2", "--set", "dram.org.channels=4"],
    "check-log /dev/zero": ["check-log", "/dev/zero", "--preset", "DDR4_3200AA_x8_8Gb"],
    "isa asm output is the input": ["isa", "asm", "good.s", "-o", "good.s"],
    "isa asm /dev/zero": ["isa", "asm", "/dev/zero", "-o", "out.hex"],
    "isa show billion laughs": ["isa", "show", "laughs.yaml"],
    "report out is the input": ["report", "nomanifest.json", "-o", "nomanifest.json"],
    "report input nested 100,000 deep": ["report", "deep.json", "-o", "rep"],
    "compile json is the output folder": ["compile", "--model", "gpt2-small", "-o", "out", "--json", "out"],
    "compile channels beyond the limit": ["compile", "--model", "gpt2-small", "--channels", "8192", "-o", "out"],
    "config show flag and --set disagree": ["config", "show", "--system", "pimgpt", "--tokens", "2",
                                            "--set", "tokens=3"],
    "config show asic clock nan": ["config", "show", "--system", "pimgpt", "--set", "asic_clock_hz=nan"],
    "study file billion laughs": ["study", "laughs.yaml", "-o", "out"],
    "study file /dev/zero": ["study", "/dev/zero", "-o", "out"],
    # study (issue 37)
    "study missing file": ["study", "nope.yaml", "-o", "res"],
    "study bad yaml": ["study", "bad.yaml", "-o", "res"],
    "study unknown key": ["study", "key-study.yaml", "-o", "res"],
    "study unknown design": ["study", "system-study.yaml", "-o", "res"],
    "study unknown memory": ["study", "memory-study.yaml", "-o", "res"],
    "study batch negative": ["study", "batch-study.yaml", "-o", "res"],
    "study out is a file": ["study", "ok-study.yaml", "-o", "afile"],
}
ISSUE35_CASES = 66       # the issue-35 block above: the harness grew by these


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_and_exit_2(name, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CI", "true")
    _files(tmp_path)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    try:
        code = main(CASES[name])
    except SystemExit as exc:     # argparse's own errors (usage + one error line)
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, f"{name}: exit {code}, stderr:\n{err}"
    assert "Traceback" not in err, f"{name}: traceback:\n{err}"
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("archsim: warning")]
    errors = [line for line in lines if line.startswith("archsim") and "error:" in line]
    assert len(errors) == 1, f"{name}: expected one error line, got:\n{err}"
    usage = [line for line in lines if line not in errors]
    assert all(line.startswith(("usage:", " ")) for line in usage), f"{name}: more than one line:\n{err}"
    assert "compiling the channel kernel" not in err, f"{name}: rejected only after a compile"
    # nothing half-written: no output or temp file appeared (sweep/report folders stay absent or empty)
    after = sorted(str(p) for p in tmp_path.rglob("*") if not (p.is_dir() and not any(p.iterdir())))
    assert after == before or not set(after) - set(before) - {str(tmp_path / "res" / ".lock")}, \
        f"{name}: left {sorted(set(after) - set(before))}"


def test_the_harness_covers_every_subcommand():
    from archsim.cli import COMMAND_MODULES

    covered = {argv[0] for argv in CASES.values()}
    commands = {m.rsplit(".", 1)[1].replace("_", "-") for m in COMMAND_MODULES} - {"rtl"}   # rtl: tools
    assert commands <= covered, f"subcommands without a bad-input case: {sorted(commands - covered)}"
    assert len(CASES) >= 167 + ISSUE35_CASES, f"{len(CASES)} bad-input kinds; the harness must not shrink"


def test_output_failure_is_one_line_after_a_run(tmp_path, capsys, monkeypatch):
    """A device that is full is only found when written: one line, exit 2, and the device stays a device."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.s").write_text("NOP\n")
    code = main(["isa", "asm", "good.s", "-o", "/dev/full"])
    err = capsys.readouterr().err
    assert code == 2 and "No space left on device" in err and len(err.strip().splitlines()) == 1, err
    assert Path("/dev/full").is_char_device()


@pytest.mark.parametrize("argv, where", [
    (["run", "--system", "t3", "--set", "memory_mapping=XYZ"], "--set memory_mapping=XYZ: memory_mapping: "),
    (["run", "--system", "t3", "--config", "t3-mapping.yaml"], "t3-mapping.yaml:1: memory_mapping: "),
    (["run", "--config", "dt-mapping.yaml"], "dt-mapping.yaml:2: mapping: "),
    ([*T, "--address-mapping", "XYZ"], "--address-mapping XYZ: mapping: "),
    ([*T, "--set", "controller.mapping=XYZ"], "--set controller.mapping=XYZ: controller.mapping: "),
    ([*R, "--set", "mapping_overrides.weights.layout=bogus"],
     "--set mapping_overrides.weights.layout=bogus: mapping_overrides.weights.layout: "),
    ([*R, "--config", "pimgpt-layout.yaml"], "pimgpt-layout.yaml:1: mapping_overrides.weights.layout: "),
    (["sweep", "badmapping-sweep.yaml", "-o", "res"], "axes: point 1 (mapping=XYZ): mapping: mapping 'XYZ'"),
    ([*R, "--set", "mapping_overrides.attention.k_layout=bogus"],
     "error: mapping_overrides.attention.k_layout: 'bogus' is not modelled yet"),
])
def test_a_bad_mapping_is_reported_where_the_user_set_it(argv, where, tmp_path, capsys, monkeypatch):
    """Issue 27: a bad address mapping or policy override names the key and the place the user set it, not
    the preset or policy file line the value replaced (t3_paper.yaml:35 memory.mapping, controller.mapping)."""
    monkeypatch.chdir(tmp_path)
    _files(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert where in err and "presets/" not in err and "mappings/" not in err, err


# ---- issue 35: hostile inputs at full size, each in its own process: it must end within seconds, in one line
# and exit 2, in bounded memory (a hang or a read of everything would show here, not hang the suite).
def _hostile_files(tmp: Path) -> None:
    import gzip

    (tmp / "laughs.yaml").write_text(LAUGHS)
    (tmp / "ten-mb-line.trace").write_text("LD " + "1" * 10_000_000 + "\n")
    # a gzip bomb: 1.1 GiB of trace text in ~1 MB, as 17 copies of one 64 MiB member (gzip reads them as one)
    member = gzip.compress(b"LD 0x10\n" * (8 << 20), compresslevel=9)
    (tmp / "bomb.trace.gz").write_bytes(member * 17)
    (tmp / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    grid = {"trace.requests": list(range(100, 200)), "controller.read_queue": list(range(1, 101))}
    (tmp / "huge-sweep.yaml").write_text(SWEEP_OK.replace("controller.row_policy: [open, closed]",
                                                          ", ".join(f"{k}: {v}" for k, v in grid.items())))


HOSTILE: dict[str, tuple[list[str], int]] = {   # name: (argv, peak memory allowed in MB)
    "a 342-byte billion laughs as --config": ([*T, "--config", "laughs.yaml"], 600),
    "--config /dev/zero": ([*T, "--config", "/dev/zero"], 600),
    "a trace of /dev/zero": (["trace", "/dev/zero"], 600),
    "a trace line of 10 MB": (["trace", "ten-mb-line.trace"], 600),
    "a gzip bomb of 1.1 GiB": (["trace", "bomb.trace.gz"], 1600),
    "--channels 1048576": ([*T, "--channels", "1048576"], 600),
    "synthetic:random:10^11": (["trace", "synthetic:random:100000000000"], 600),
    "a 10,000-point sweep": (["sweep", "huge-sweep.yaml", "-o", "res"], 600),
    "--from-json nested 100,000 deep": (["run", "--from-json", "deep.json"], 600),
}
HOSTILE_TIMEOUT_S = 90      # "within seconds": ~5 s idle; this bounds a loaded machine, and catches a hang

# peak memory from /proc/self/status VmHWM, the high-water mark of this process's own address space: getrusage's
# ru_maxrss survives exec on Linux, so it reported the forking pytest worker's size (679 MB in a full run)
_RUN_ONE = """
import json, sys
from archsim.cli import main
try:
    code = main(sys.argv[2:])
except SystemExit as exc:
    code = exc.code
hwm_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
json.dump({"code": code, "maxrss_mb": hwm_kb / 1024}, open(sys.argv[1], "w"))
"""


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    _hostile_files(d)
    return d


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_input_ends_in_one_line_within_seconds_in_bounded_memory(name, hostile_dir, tmp_path):
    import subprocess
    import sys
    import time

    argv, max_mb = HOSTILE[name]
    for f in hostile_dir.iterdir():
        (tmp_path / f.name).symlink_to(f)
    out = tmp_path / "outcome.json"
    env = {**os.environ, "CI": "true"}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", _RUN_ONE, str(out), *argv], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=HOSTILE_TIMEOUT_S)
    took = time.monotonic() - t0
    outcome = json.loads(out.read_text())
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert outcome["code"] == 2 and len(errors) == 1 and "Traceback" not in proc.stderr, (name, proc.stderr)
    assert outcome["maxrss_mb"] < max_mb, f"{name}: peak memory {outcome['maxrss_mb']:.0f} MB"
    assert not (tmp_path / "res").exists() or not any((tmp_path / "res").iterdir()), f"{name}: left results"
    print(f"{name}: exit 2 in {took:.1f} s, peak {outcome['maxrss_mb']:.0f} MB: {errors[0][:100]}")


def test_an_empty_config_runs_the_defaults_with_a_note(tmp_path, capsys, monkeypatch):
    """An empty or comment-only --config changes nothing: the run goes on, and says so (issue 35)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CI", "true")
    for text in ("", "# only a comment\n", "{}\n"):
        (tmp_path / "c.yaml").write_text(text)
        assert main(["config", "show", "--system", "pimgpt", "--config", "c.yaml"]) == 0
        err = capsys.readouterr().err
        assert "note: --config c.yaml holds no keys" in err and "error" not in err, err


def test_same_value_from_a_flag_and_a_set_is_no_conflict(capsys):
    """Only different values conflict: `--tokens 2 --set tokens=2` (and 1e9 written two ways) is one value."""
    assert main(["config", "show", "--system", "pimgpt", "--tokens", "2", "--set", "tokens=2",
                 "--asic-clock-hz", "1e9", "--set", "asic_clock_hz=1.0e+9"]) == 0
    out = capsys.readouterr().out
    assert "tokens: 2" in out and "asic_clock_hz: 1000000000.0" in out
