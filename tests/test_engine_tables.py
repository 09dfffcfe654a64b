"""The forward form of the constraint table is exact: for every pair of (command, target), the latency the
lowered ready cells impose equals the definition's (docs/channel-engine.md section 4), on every preset,
including sibling rows (DDR4 two ranks, HBM3 stack IDs), all-bank commands and two row buffers."""
from __future__ import annotations

import pytest

from archsim.dram.spec import load_spec, preset_names
from archsim.engine.tables import check_cover, lower

CASES = [(p, {"org.channels": 1}) for p in preset_names()] + [("DDR4_3200AA_x8_8Gb", {"org.ranks": 2})]


@pytest.mark.parametrize("preset,over", CASES, ids=[f"{p}-{'-'.join(map(str, o.values()))}" for p, o in CASES])
def test_lowered_cells_equal_the_definition(preset, over):
    spec = load_spec(preset, overrides=over)
    check_cover(lower(spec))


def test_check_cover_catches_a_dropped_cell():
    """The exactness check is not blind: drop one raised cell and it reports the pair that lost its bound."""
    spec = load_spec("DDR4_3200AA_x8_8Gb", overrides={"org.ranks": 2})
    low = lower(spec)
    t = low.tables
    k = spec.cmd("RD") * t.banks                       # RD at bank 0
    a, b = t.upd_off[k], t.upd_off[k + 1]
    assert b > a
    t.upd_lat[a] -= 1
    with pytest.raises(AssertionError, match="RD at bank 0"):
        check_cover(low)


def test_sibling_rows_bind_only_other_ranks():
    spec = load_spec("DDR4_3200AA_x8_8Gb", overrides={"org.ranks": 2})
    sib = [r for r in spec.constraints if r["sibling"]]
    assert sib and all(r["level_name"] == "rank" for r in sib)
    hbm3 = load_spec("HBM3_6400Mbps")
    assert "sid" in hbm3.levels and any(r["sibling"] and r["level_name"] == "sid" for r in hbm3.constraints)


def test_a_close_form_looser_than_its_plain_command_is_refused():
    """The kernel's wake-up for a new row hit assumes RDA is never ready before RD (WRA before WR); a
    standard that constrains RD by a row RDA lacks is refused at lowering, naming the row."""
    import dataclasses

    from archsim.dram.spec import load_spec
    from archsim.engine.tables import lower
    from archsim.errors import ConfigError

    spec = load_spec("DDR4_3200AA_x8_8Gb")
    rda = spec.cmd("RDA")
    loose = [r for r in spec.constraints if not (r["next"] == rda and r["prev_name"] == "ACT")]
    with pytest.raises(ConfigError, match=r"ACT -> RD >= \d+ has no row binding RDA"):
        lower(dataclasses.replace(spec, constraints=loose))
