"""Energy is a post-pass over {action: count} (the standard's `action` of each command) with one table per
preset; re-costing a finished run with another table needs no new simulation."""
from __future__ import annotations

import yaml

from archsim import energy, paths
from archsim.dram.spec import load_spec
from archsim.systems.dram_trace.system import run_trace


def test_closing_forms_of_a_command_cost_as_their_action():
    spec = load_spec("DDR4_3200AA_x8_8Gb")
    counts = {"RD": 3, "RDA": 2, "WR": 1, "WRA": 4, "ACT": 5, "PRE": 1, "PREA": 1, "REFab": 2}
    act = energy.action_counts(spec, counts)
    assert act == {"RD": 5, "WR": 5, "ACT": 5, "PRE": 2, "REFab": 2}
    per = energy.dram_action_energy_pj(spec)
    e = energy.dram_energy_pj(spec, counts, cycles=0)
    assert e["read"] == per["RD"] * 5 and e["write"] == per["WR"] * 5 and e["act_pre"] == per["ACT"] * 5
    assert e["background"] == 0.0


def test_recost_equals_a_run_on_the_other_table(tmp_path):
    trace = {"kind": "random", "requests": 3000, "seed": 4}
    base = run_trace(trace, preset="HBM2_2Gbps_PC", controller={"row_policy": "closed"})
    import archsim

    assert archsim.recost(base, "HBM2_2Gbps_PC") == base.stats["energy_pj"]
    # the same device with a costlier read path: same timing, so a run on it equals the re-costed run
    data = yaml.safe_load((paths.PACKAGE_DIR / "presets" / "dram" / "HBM2_2Gbps_PC.yaml").read_text())
    data["name"] = "HBM2_2Gbps_PC_hot_reads"
    data["energy"]["rd_pj_per_bit"] *= 2
    hot = tmp_path / "hot.yaml"
    hot.write_text(yaml.safe_dump(data, sort_keys=False))
    rerun = run_trace(trace, preset=str(hot), controller={"row_policy": "closed"})
    assert rerun.stats["cycles"] == base.stats["cycles"]
    recosted = energy.recost(base, str(hot))
    assert recosted == rerun.stats["energy_pj"]
    assert recosted["read"] == 2 * base.stats["energy_pj"]["read"] and recosted["write"] == base.stats["energy_pj"]["write"]
