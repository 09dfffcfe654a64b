"""What `archsim run` prints after a PIM-GPT run: latency, energy and speed-ups per token, and the ops."""
from __future__ import annotations

from typing import Any

from archsim.summary import print_table


def print_pimgpt(result: Any) -> None:
    from archsim.units import fmt_energy, fmt_time

    s = result.stats
    e = s["energy_per_token_by_component_j"]
    rows = [
        ("model / channels", f"{s['model']}  {s['channels']} ch x {s['banks_per_channel']} banks  ({s['preset']}, ASIC {s['asic_clock_hz'] / 1e6:g} MHz)"),
        ("tokens", f"{s['tokens']}"),
        ("latency / token", f"{fmt_time(s['latency_per_token_s'])}  (first {fmt_time(s['latency_first_token_s'])}, last {fmt_time(s['latency_last_token_s'])})"),
        ("tokens / s", f"{s['tokens_per_s']:.1f}"),
        ("energy / token", f"{fmt_energy(s['energy_per_token_j'])}  (" + ", ".join(f"{k} {fmt_energy(v)}" for k, v in e.items()) + ")"),
        ("row-hit rate", f"{100 * s['row_hit_rate']:.2f} %"),
        ("ASIC share of latency", f"{100 * s['asic_share']:.2f} %"),
    ]
    # every baseline the run compared with, as its stats name them (speedup_vs_<tag>), in the order it ran them
    tags = [k.removeprefix("speedup_vs_") for k in s if k.startswith("speedup_vs_")]
    c0 = int((getattr(result, "manifest", None) or {}).get("config", {}).get("context_start", 0) or 0)
    contexts = f"contexts {c0 + 1}-{c0 + s['tokens']}" if s["tokens"] > 1 else f"context {c0 + 1}"
    for tag in tags:
        rows.append((f"vs {tag}", f"speedup {s[f'speedup_vs_{tag}']:.1f}x, energy efficiency "
                     f"{s.get(f'energy_efficiency_vs_{tag}', float('nan')):.1f}x  ({contexts})"))
    rows.append(("simulator", f"{s['sim_wall_s']:.2f} s wall, {s['sim_commands_simulated']:,} commands simulated, "
                 f"memo {s['sim_memo_hits']} hits / {s['sim_memo_misses']} misses"))
    print_table(rows)
    if tags:
        print(f"  note: speed-ups are of this run's {s['tokens']} decode steps ({contexts}) of {s['model']}; they "
              "change with the model and the context length (reports/pimgpt: the paper's models and lengths)")
    df = result.df.sort_values("seconds", ascending=False)
    print("  per op (all layers, all tokens):")
    print(f"    {'op':<14}{'kind':<14}{'time/token':>11}{'share':>8}{'PIM %':>7}{'row hits':>10}")
    for _, r in df.iterrows():
        pim = 100 * r["pim_cycles"] / r["cycles"] if r["cycles"] else 0.0
        hits = f"{100 * r['row_hit_rate']:.1f} %" if r["row_hit_rate"] == r["row_hit_rate"] else "-"
        print(f"    {r['op']:<14}{r['kind']:<14}{fmt_time(r['seconds_per_token']):>11}{100 * r['share']:>7.1f}%"
              f"{pim:>7.0f}{hits:>10}")
