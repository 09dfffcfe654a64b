"""`archsim presets list|show NAME`."""
from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("presets", help="list or show shipped hardware presets")
    s = p.add_subparsers(dest="presets_cmd", metavar="list|show")
    s.add_parser("list", help="list presets").set_defaults(func=run_list)
    show = s.add_parser("show", help="show one preset, resolved (DRAM: derived timings included); KIND/NAME for "
                        "another kind than DRAM (npu/neupims_npu, asic/pimgpt_asic, baseline/t4, t3/t3_paper, ...)")
    show.add_argument("name")
    show.set_defaults(func=run_show)
    p.set_defaults(func=run_list)


def run_list(args: argparse.Namespace) -> int:
    from archsim.dram.spec import load_spec, preset_names

    print("DRAM presets:")
    specs = [load_spec(name) for name in preset_names()]
    wn = max((len(s.name) for s in specs), default=0)
    ws = max((len(s.standard) for s in specs), default=0)
    for s in specs:
        print(f"  {s.name:<{wn}}  {s.standard:<{ws}}  {s.channels:>2} ch  {s.capacity_bytes / 2**30:>5g} GiB  "
              f"{s.peak_bw_bytes_per_s / 1e9:7.1f} GB/s peak  tCK {s.tCK_ps:g} ps")
    from archsim.preset_kinds import KINDS

    for k in KINDS:
        print(f"\n{k.label} presets ({k.what}; `archsim presets show {k.name}/NAME`):")
        for name in k.names():
            print(f"  {name}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    import yaml

    from archsim.dram.spec import load_spec

    if "/" in args.name and not args.name.endswith((".yaml", ".yml")):
        from archsim import preset_kinds

        kind_name, _, name = args.name.partition("/")
        if kind_name != "dram":
            print(yaml.safe_dump(preset_kinds.as_dict(preset_kinds.kind(kind_name).load(name)), sort_keys=False,
                                 width=120), end="")
            return 0
        args.name = name
    s = load_spec(args.name)
    out = {
        "name": s.name, "standard": s.standard, "source": s.source,
        "org": dict(zip(["channels", "pseudochannels", "ranks", "bankgroups", "banks_per_group"], s.counts, strict=True))
        | {"rows": s.rows, "row_bytes": s.row_bytes, "access_bytes": s.access_bytes},
        "capacity_GiB": s.capacity_bytes / 2**30, "peak_bandwidth_GBps": s.peak_bw_bytes_per_s / 1e9,
        "command_bus": s.command_bus, "tCK_ps": s.tCK_ps, "timing_cycles": s.timing, "energy": s.energy,
        "constraints": [f"{c['level_name']}: {c['prev_name']} -> {c['next_name']} >= {c['expr']} = {c['latency']}"
                        + (f" (window {c['window']})" if c["window"] > 1 else "") for c in s.constraints],
    }
    print(yaml.safe_dump(out, sort_keys=False, width=120), end="")
    return 0
