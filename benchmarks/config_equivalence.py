"""Results and file loads of a fixed set of runs of every system, to show that a refactoring moved neither
(issue 25 item 3: configs resolved once). Not a timed benchmark.

`run DIR [CASE ...]` runs every case (or the named ones) through archsim.api.run, writes each result as JSON
(stats, table, timeline, manifest; wall and kernel seconds dropped) to DIR/<case>.json, the files of one
compiled decode step (`archsim compile`'s code path) to DIR/emit.json, and prints how often each loader ran
per case (DIR/load_counts.json). `diff DIR_A DIR_B` compares the JSON files byte for byte (exit 1 if any differ).

Before/after a change: run it at the old commit (e.g. `git archive OLD | tar -x -C /tmp/old`, then
PYTHONPATH=/tmp/old .venv/bin/python benchmarks/config_equivalence.py run /tmp/before) and at the new one
(`.venv/bin/python benchmarks/config_equivalence.py run /tmp/after`), then `... diff /tmp/before /tmp/after`.
"""
from __future__ import annotations

import importlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

# the simulator's own timings (seconds it spent and rates over them), anywhere in a result: differ run to run.
# A copy of archsim.results.without_timings on purpose: this script runs against older checkouts too.
DROPPED = ("sim_wall_s", "sim_kernel_s", "wall_s", "sim_compile_s", "kernel_wall_s", "cycles_per_s")


def without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items()
                if not (k in DROPPED or k.endswith(("_wall_s", "_compile_s")))}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value

CASES: dict[str, dict[str, Any]] = {
    "pimgpt_64": {"system": "pimgpt", "model": "gpt2-small", "tokens": 64},
    "pimgpt_timeline": {"system": "pimgpt", "model": "gpt2-small", "tokens": 16, "timeline": True},
    "pimgpt_knobs": {"system": "pimgpt", "model": "gpt2-small", "tokens": 12, "baselines": ["t4"], "channels": 8,
                     "asic_clock_hz": 5e8, "mapping_overrides": {"weights": {"layout": "row_aligned"}},
                     "dram": {"timing": {"nRCDRD": 20}}, "refresh": True},
    "pimgpt_nobase_nomemo": {"system": "pimgpt", "model": "gpt2-small", "tokens": 8, "baselines": False,
                             "memo": False},
    "pimgpt_overlap": {"system": "pimgpt", "model": "gpt2-small", "tokens": 8, "schedule": "overlap",
                       "timeline": True},
    "pimgpt_omit": {"system": "pimgpt", "model": "gpt2-small", "tokens": 8, "omit_ops": ["kv_append"],
                    "baselines": []},
    "trace_synth_map": {"system": "dram-trace", "trace": {"kind": "random", "requests": 5000},
                        "mapping": "RoBaRaCoCh", "channels": 2, "controller": {"row_policy": "closed"},
                        "dram": {"timing": {"nRCD": 20}}},
    "trace_file_map": {"system": "dram-trace", "trace": "@FILE", "preset": "GDDR6_14Gbps", "mapping": "RoBaRaCoCh"},
    "trace_shorthand": {"system": "dram-trace", "trace": "synthetic:stream:3000",
                        "controller": {"mapping": "RoCoBaRaCh"}},
    # every other system (issue 36: presets as schemas must move no result), small runs
    "gemm_dram": {"system": "gemm", "m": 8, "k": 16, "n": 8, "memory": "dram"},
    "gemm_npu_knobs": {"system": "gemm", "m": 64, "k": 256, "n": 128, "npu": {"preset": "neupims_code",
                                                                              "height": 64}},
    "duplex_small": {"system": "duplex", "device": "duplex", "requests": 2, "input_len": 64, "output_len": 2,
                     "max_batch": 2},
    "duplex_moe": {"system": "duplex", "model": "mixtral-8x7b", "device": "duplex", "requests": 4, "input_len": 64,
                   "output_len": 2, "max_batch": 4},
    "t3_small": {"system": "t3", "model": "mega-gpt2", "sublayer": "op_fwd", "tp": 16, "tokens": 256},
    "t3_decode_small": {"system": "t3_decode", "model": "mega-gpt2", "tp": 16, "batch": 2, "context": 64},
    "neupims_small": {"system": "neupims", "model": "gpt3-small", "layers": 1, "batch": 2, "samples": 1},
    "npu_pim_small": {"system": "npu_pim", "model": "gpt3-small", "layers": 1, "batch": 2, "samples": 1},
    "npu_only_small": {"system": "npu_only", "model": "gpt3-small", "layers": 1, "batch": 2, "samples": 1},
    "gpu_only_small": {"system": "gpu_only", "model": "gpt3-small", "layers": 1, "batch": 2, "samples": 1},
    "gpu_roofline_small": {"system": "gpu_roofline", "model": "gpt3-small", "layers": 1, "batch": 2,
                           "samples": 1},
}

# (module, function) loaders counted wherever a module bound them by name; then class-method loaders
LOADERS = (("archsim.config", "load_yaml"), ("archsim.workload.spec", "load_model"), ("archsim.dram.spec", "load_spec"),
           ("archsim.systems.pimgpt.compiler", "load_policy"), ("archsim.schema", "load"))
CLASS_LOADERS = (("archsim.host.baselines", "Baseline"), ("archsim.host.asic", "AsicConfig"))


def trace_file() -> str:
    """A 3000-request Ramulator-format trace (fixed seed), at a fixed path: the manifest records the path."""
    path = Path(tempfile.gettempdir()) / "archsim_config_equivalence.trace"
    rng = np.random.default_rng(1)
    addr = rng.integers(0, 1 << 30, 3000) & ~63
    read = rng.random(3000) < 0.7
    path.write_text("".join(f"{'LD' if r else 'ST'} {hex(a)}\n" for a, r in zip(addr, read, strict=True)))
    return str(path)


def count_loads(counts: dict[str, int]) -> None:
    """Wrap every loader so that each call adds one to counts[its name]."""
    for mod_name, name in LOADERS:
        orig = getattr(importlib.import_module(mod_name), name)

        def counted(*args: Any, _orig: Any = orig, _name: str = name, **kwargs: Any) -> Any:
            counts[_name] = counts.get(_name, 0) + 1
            return _orig(*args, **kwargs)
        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith("archsim") and getattr(module, name, None) is orig:
                setattr(module, name, counted)
    for mod_name, cls_name in CLASS_LOADERS:
        cls = getattr(importlib.import_module(mod_name), cls_name)
        orig_fn = cls.load.__func__

        def load(klass: type, *args: Any, _orig: Any = orig_fn, _name: str = f"{cls_name}.load", **kwargs: Any) -> Any:
            counts[_name] = counts.get(_name, 0) + 1
            return _orig(klass, *args, **kwargs)
        cls.load = classmethod(load)


def run(out: Path, names: list[str]) -> None:
    import archsim.api
    import archsim.systems.pimgpt.emit as emit
    from archsim import registry

    out.mkdir(parents=True, exist_ok=True)
    registry.names()                      # every system imported, so every binding of a loader is wrapped
    counts: dict[str, int] = {}
    count_loads(counts)
    per_case = {}
    for name in names:
        cfg = json.loads(json.dumps(CASES[name]).replace('"@FILE"', json.dumps(trace_file())))
        counts.clear()
        data = archsim.api.run(cfg).to_json_dict()
        per_case[name] = dict(sorted(counts.items()))
        data = without_timings(data)
        (out / f"{name}.json").write_text(json.dumps(data, indent=1, sort_keys=True, default=str))
        print(name, per_case[name], flush=True)
    counts.clear()
    files = emit.compile_decode_step("gpt2-small", out / "emit", context=5, layers=2,
                                     config={"system": "pimgpt", "model": "gpt2-small", "channels": 8})
    per_case["emit"] = dict(sorted(counts.items()))
    print("emit", per_case["emit"])
    (out / "emit.json").write_text(json.dumps({p.name: p.read_text() for p in files}, indent=1))
    (out / "load_counts.json").write_text(json.dumps(per_case, indent=1) + "\n")


def diff(a: Path, b: Path) -> int:
    differ = 0
    for f in sorted(a.glob("*.json")):
        if f.name == "load_counts.json":
            continue
        other = b / f.name
        # files written before timings were dropped everywhere compare without them
        same = other.is_file() and (f.read_text() == other.read_text() or (
            f.name != "emit.json" and without_timings(json.loads(f.read_text()))
            == without_timings(json.loads(other.read_text()))))
        print(f"{f.stem:24s} {'identical' if same else 'DIFFERENT'}")
        differ += not same
    return 1 if differ else 0


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "diff":
        return diff(Path(argv[1]), Path(argv[2]))
    if len(argv) >= 2 and argv[0] == "run":
        unknown = [n for n in argv[2:] if n not in CASES]
        if unknown:
            print(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}", file=sys.stderr)
            return 2
        run(Path(argv[1]), argv[2:] or list(CASES))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
