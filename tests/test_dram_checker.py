"""The independent command-log checker (archsim.dram.checker).

* Tight gates: for every constraint row of every preset's standard, a minimal legal log issues the preceding
  command(s) and then the following command at exactly the bound t (accepted) and at t-1 (rejected, naming
  the row). Setup commands (the ACT a RD needs, ...) are placed far enough back (GAP cycles, more than any
  latency) that they cannot bind; commands the following one needs in between (e.g. the PRE between two
  ACTs of one bank) are placed at their earliest legal cycle.
* Bank-state, command-bus and order rules, and malformed-log errors.
* A cross-check of the vectorised look-back against a naive one on random logs (hypothesis).

The naive look-back below (`_earliest`) is a second, deliberately simple reading of the constraint-row
definition; it places intermediate commands and finds which row binds. The tight-gate tests do not trust it
for the bound itself: they assert the bound equals (preceding command's cycle + the row's latency), or, for
the few rows another row dominates, the hand-derived bound of the dominating row.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsim.dram.checker import LOG_COLUMNS, Violation, check_log, rules
from archsim.dram.spec import LEVEL_INDEX, LEVELS, load_spec, preset_names
from archsim.errors import UserError

PRESETS = preset_names()
SPECS = {p: load_spec(p) for p in PRESETS}
GAP = 2000  # > every latency of every preset (the largest is nRFC = 560)
COLUMN_CMDS = ("RD", "WR", "RDA", "WRA")
ROW = 7  # the row every scenario opens

Addr = tuple[int, int, int, int, int]  # channel, pseudochannel, rank, bankgroup, bank


@dataclass
class Cmd:
    cycle: int
    name: str
    addr: Addr
    row: int = -1


def frame(cmds: list[Cmd]) -> pd.DataFrame:
    return pd.DataFrame([{"cycle": c.cycle, "command": c.name, "channel": c.addr[0], "pseudochannel": c.addr[1],
                          "rank": c.addr[2], "bankgroup": c.addr[3], "bank": c.addr[4], "row": c.row,
                          "column": 0 if c.name in COLUMN_CMDS else -1} for c in cmds], columns=LOG_COLUMNS)


def scope(spec, name: str) -> int:
    return spec.commands[spec.cmd(name)].scope


def at_scope(spec, name: str, addr: Addr) -> Addr:
    """Rank-wide commands are logged with bank group = bank = 0."""
    s = scope(spec, name)
    return tuple(v if k <= s else 0 for k, v in enumerate(addr))  # type: ignore[return-value]


def _earliest(spec, log: list[Cmd], name: str, addr: Addr) -> tuple[int, list[dict]]:
    """Naive look-back: max over rows (L, prev, name) of the window-th most recent prev at the same level-L
    node + latency. Returns (bound, the rows attaining it)."""
    best, binding = 0, []
    for row in spec.constraints:
        if row["next_name"] != name:
            continue
        lv = row["level"]
        hits = [c for c in log if c.name == row["prev_name"] and c.addr[: lv + 1] == addr[: lv + 1]]
        if len(hits) < row["window"]:
            continue
        t = hits[-row["window"]].cycle + row["latency"]
        if t > best:
            best, binding = t, [row]
        elif t == best and t > 0:
            binding.append(row)
    return best, binding


def effect(spec, name: str) -> str:
    return spec.commands[spec.cmd(name)].effect


def has_row(spec, name: str) -> bool:
    return effect(spec, name) in ("open", "open_all", "read", "write", "read_close", "write_close")


def banks_below(spec, addr: Addr, level: int) -> list[Addr]:
    """Every bank below the level-`level` node of `addr`."""
    out = [tuple(addr[: level + 1])]
    for k in range(level + 1, len(LEVELS)):
        out = [a + (i,) for a in out for i in range(spec.counts[k])]
    return out  # type: ignore[return-value]


def open_banks(spec, log: list[Cmd]) -> dict[Addr, int]:
    """Replay the bank state of a log: open bank -> open row."""
    state: dict[Addr, int] = {}
    for c in log:
        e, sc = effect(spec, c.name), scope(spec, c.name)
        if e in ("open", "open_all"):
            state.update({b: c.row for b in banks_below(spec, c.addr, sc)})
        elif e in ("close", "close_all", "read_close", "write_close"):
            for b in banks_below(spec, c.addr, sc):
                state.pop(b, None)
    return state


def _place(spec, log: list[Cmd], name: str, addr: Addr, row: int = ROW) -> Cmd:
    """Append `name` at its earliest legal cycle after the last command."""
    addr = at_scope(spec, name, addr)
    t = max(_earliest(spec, log, name, addr)[0], log[-1].cycle + 1 if log else 0)
    cmd = Cmd(t, name, addr, row if has_row(spec, name) else -1)
    log.append(cmd)
    return cmd


def _by_effect(spec, eff: str) -> list[str]:
    return [c.name for c in sorted(spec.commands, key=lambda c: -c.scope) if c.effect == eff]


def _sub_node(spec, level: int, base: Addr) -> Addr:
    """An address in the same level-`level` node as `base` but in a different child node where the
    organisation allows (so rows of deeper levels do not apply): another bank of the bank group, another
    bank group of the rank, another rank (else bank group) of the pseudo-channel, ..."""
    a = list(base)
    for k in range(level + 1, len(LEVELS)):
        if spec.counts[k] > 1:
            a[k] = (a[k] + 1) % spec.counts[k]
            return tuple(a)  # type: ignore[return-value]
    return base


def _window_addrs(spec, level: int, count: int) -> list[Addr]:
    """`count` distinct banks below one level-`level` node, varying the shallowest child level first
    (different bank groups before different banks) so consecutive ones interfere least."""
    out: list[Addr] = []
    sizes = [spec.counts[k] for k in range(level + 1, len(LEVELS))]
    total = int(np.prod(sizes)) if sizes else 1
    for i in range(total):
        a = [0] * len(LEVELS)
        rem = i
        for k in range(level + 1, len(LEVELS)):
            a[k] = rem % spec.counts[k]
            rem //= spec.counts[k]
        out.append(tuple(a))  # type: ignore[arg-type]
        if len(out) == count:
            break
    return out


def _gate_rows(spec) -> list[dict]:
    """Constraint rows deduplicated per (level, prev, next, window), keeping the largest latency."""
    best: dict[tuple, dict] = {}
    for r in spec.constraints:
        key = (r["level"], r["prev_name"], r["next_name"], r["window"])
        if key not in best or r["latency"] > best[key]["latency"]:
            best[key] = r
    return list(best.values())


def _dominated(spec, r: dict) -> tuple[int, str, tuple[str, str, str]] | None:
    """Rows whose bound another row unavoidably exceeds in a minimal log. Returns (bound measured from the
    window-th most recent preceding command, why, the dominating row as (level, prev, next))."""
    t = spec.timing
    if r["level_name"] == "rank" and r["window"] == 4 and r["prev_name"] == r["next_name"] == "ACT":
        # Four ACTs to distinct bank groups can come no closer than nRRDS apart, so the fifth is at least
        # 4 * nRRDS after the first: nFAW never binds when nFAW < 4 * nRRDS (GDDR6 and HBM2 presets).
        if 4 * t["nRRDS"] > t["nFAW"]:
            return 4 * t["nRRDS"], "4 x nRRDS > nFAW", ("rank", "ACT", "ACT")
    if (r["level_name"] == "pseudochannel" and r["prev_name"] in ("WR", "WRA") and r["next_name"] in ("RD", "RDA")
            and spec.counts[LEVEL_INDEX["rank"]] == 1):
        # nWRRD_bus is the data-bus turnaround between ranks; with one rank per pseudo-channel the two
        # commands share a rank and the rank-level write-to-read row (nCWL + nBL + nWTRS) is larger.
        lat = t["nCWL"] + t["nBL"] + t["nWTRS"]
        if lat > r["latency"]:
            return lat, "single rank: rank-level nCWL + nBL + nWTRS binds", ("rank", r["prev_name"], r["next_name"])
    return None


def build_gate(spec, r: dict) -> tuple[list[Cmd], str, Addr, int]:
    """A legal log ending just before the following command of row `r`. Returns (log, following command,
    its address, the cycle of the window-th most recent preceding command)."""
    lv, p, f, w = r["level"], r["prev_name"], r["next_name"], r["window"]
    base: Addr = (0, 0, 0, 0, 0)
    if w == 1:
        prev_addrs = [at_scope(spec, p, base)]
        f_addr = at_scope(spec, f, base if lv == LEVEL_INDEX["bank"] else _sub_node(spec, lv, base))
    else:
        addrs = _window_addrs(spec, lv, w + 1)
        prev_addrs, f_addr = addrs[:w], at_scope(spec, f, addrs[w])
    ep, ef = effect(spec, p), effect(spec, f)
    open_all = _by_effect(spec, "open_all")
    log: list[Cmd] = []

    def setup(cycle: int, name: str, addr: Addr) -> None:
        log.append(Cmd(cycle + len(log), name, at_scope(spec, name, addr), ROW if has_row(spec, name) else -1))

    # setup, far back (from cycle 0): the open rows the preceding commands need ...
    if ep in ("read", "write", "read_close", "write_close", "close", "close_all"):
        for a in prev_addrs:
            setup(0, "ACT", a)
    elif ep == "pim" and open_all:          # all-bank PIM commands work on an all-bank-activated row
        setup(0, open_all[0], base)
    # ... and the ones the following command needs (from cycle GAP), unless the preceding ones leave them
    after = open_banks(spec, log + [Cmd(2 * GAP, p, a, ROW) for a in prev_addrs])
    if ef in ("read", "write", "read_close", "write_close"):
        if f_addr not in after:
            setup(GAP, "ACT", f_addr)
    elif ef == "pim" and open_all and not after and not open_banks(spec, log):
        setup(GAP, open_all[0], base)
    # the preceding command(s): the first at 2 * GAP, further ones (window rows) at their earliest
    t0 = 2 * GAP
    log.append(Cmd(t0, p, prev_addrs[0], ROW if has_row(spec, p) else -1))
    for a in prev_addrs[1:]:
        _place(spec, log, p, a)
    # in between, at their earliest: close the banks an ACT / REFpb / REFab / all-bank ACT needs closed
    if ef in ("open", "refresh_bank", "open_all", "refresh_all"):
        need = banks_below(spec, f_addr, scope(spec, f))
        still = [b for b in open_banks(spec, log) if b in need]
        if len(still) == 1:
            _place(spec, log, "PRE", still[0])
        elif still:
            closer = next(c for c in _by_effect(spec, "close_all")[::-1]
                          if set(still) <= set(banks_below(spec, still[0], scope(spec, c))))
            _place(spec, log, closer, still[0])
    if ef in ("read", "write", "read_close", "write_close"):
        assert f_addr in open_banks(spec, log), "scenario cannot open the following command's bank"
    return log, f, f_addr, t0


def _gate_cases():
    cases = []
    for p in PRESETS:
        for r in _gate_rows(SPECS[p]):
            rid = f"{p}:{r['level_name']}:{r['prev_name']}->{r['next_name']}" + (f":w{r['window']}" if r["window"] > 1 else "")
            cases.append(pytest.param(p, r, id=rid))
    return cases


def _names_row(violations: list[Violation], level: str, prev: str, nxt: str) -> bool:
    return any(v.kind == "timing" and v.rule.startswith(f"{level}: {prev} -> {nxt}") for v in violations)


@pytest.mark.parametrize("preset,row", _gate_cases())
def test_tight_gate(preset, row):
    spec = SPECS[preset]
    log, f, f_addr, t_ref = build_gate(spec, row)
    assert check_log(spec, frame(log)) == [], "the setup itself must be legal"
    bound, binding = _earliest(spec, log, f, f_addr)
    dom = _dominated(spec, row)
    f_row = ROW if has_row(spec, f) else -1
    if dom is None:
        assert bound == t_ref + row["latency"], (
            f"another row binds: {[(b['level_name'], b['prev_name'], b['next_name'], b['latency']) for b in binding]}")
        named = (row["level_name"], row["prev_name"], f)
    else:
        offset, _why, named = dom
        assert bound == t_ref + offset > t_ref + row["latency"]
    ok = check_log(spec, frame(log + [Cmd(bound, f, f_addr, f_row)]))
    assert ok == [], f"legal at the bound t={bound}, got: {[str(v) for v in ok]}"
    bad = check_log(spec, frame(log + [Cmd(bound - 1, f, f_addr, f_row)]))
    assert bad and all(v.index == len(log) for v in bad), [str(v) for v in bad]
    assert _names_row(bad, *named), f"t-1 must name {named}: {[str(v) for v in bad]}"
    if dom is None:
        lat = row["latency"]
        assert any(f">= {row['expr']}" in v.rule and (f"= {lat}," in v.rule or f">= {lat}," in v.rule)
                   and f"got {lat - 1}" in v.rule for v in bad), [str(v) for v in bad]


def test_every_row_is_gated():
    """Every expanded constraint row of every preset appears in the tight-gate parameter list."""
    ids = {(p, r["level_name"], r["prev_name"], r["next_name"], r["window"]) for p in PRESETS
           for r in _gate_rows(SPECS[p])}
    for p in PRESETS:
        for r in SPECS[p].constraints:
            assert (p, r["level_name"], r["prev_name"], r["next_name"], r["window"]) in ids


@pytest.mark.parametrize("preset", PRESETS)
def test_faw_window_is_checked_even_where_dominated(preset):
    """Where nFAW < 4 nRRDS (GDDR6, HBM2) the window row cannot bind in a legal log; raise nFAW so it binds
    and check the window counts the 4th most recent ACT."""
    spec = load_spec(preset, overrides={"timing.nFAW": 4 * SPECS[preset].timing["nRRDS"] + 10})
    row = next(r for r in spec.constraints if r["window"] == 4)
    log, f, f_addr, t_ref = build_gate(spec, row)
    t = t_ref + spec.timing["nFAW"]
    assert check_log(spec, frame(log + [Cmd(t, f, f_addr, ROW)])) == []  # the fifth ACT, at the bound
    bad = check_log(spec, frame(log + [Cmd(t - 1, f, f_addr, ROW)]))
    assert [v.rule for v in bad] == [f"rank: ACT -> ACT (window 4: 4th most recent) >= nFAW = {t - t_ref}, "
                                     f"got {t - 1 - t_ref}"]


# ------------------------------------------------------------------------------------------------
# bank state, bus, order


DDR4 = SPECS["DDR4_3200AA_x8_8Gb"]
HBM3 = SPECS["HBM3_6400Mbps"]
B0: Addr = (0, 0, 0, 0, 0)
B1: Addr = (0, 0, 0, 1, 0)
RANK0: Addr = (0, 0, 0, 0, 0)


def _kinds(spec, cmds):
    return [(v.index, v.kind) for v in check_log(spec, frame(cmds))]


def test_act_to_open_bank_is_rejected():
    cmds = [Cmd(0, "ACT", B0, 1), Cmd(GAP, "ACT", B0, 2)]
    v = check_log(DDR4, frame(cmds))
    assert [(x.index, x.kind) for x in v] == [(1, "state")]
    assert "open bank" in v[0].rule and "row 1" in v[0].rule


def test_column_command_needs_open_bank_at_logged_row():
    assert _kinds(DDR4, [Cmd(0, "RD", B0, 1)]) == [(0, "state")]
    assert _kinds(DDR4, [Cmd(0, "WRA", B0, 1)]) == [(0, "state")]
    v = check_log(DDR4, frame([Cmd(0, "ACT", B0, 1), Cmd(GAP, "RD", B0, 2)]))
    assert len(v) == 1 and "row 2 but row 1 is open" in v[0].rule
    # row -1 in the log means "not recorded": only openness is checked
    assert _kinds(DDR4, [Cmd(0, "ACT", B0, 1), Cmd(GAP, "WR", B0, -1)]) == []
    # a row opened in another bank does not count
    assert _kinds(DDR4, [Cmd(0, "ACT", B1, 1), Cmd(GAP, "RD", B0, 1)]) == [(1, "state")]


@pytest.mark.parametrize("closer", ["PRE", "RDA", "WRA", "PREA"])
def test_closing_commands_close_the_bank(closer):
    cmds = [Cmd(0, "ACT", B0, 1)]
    if closer in ("RDA", "WRA"):
        cmds.append(Cmd(GAP, closer, B0, 1))
    else:
        cmds.append(Cmd(GAP, closer, B0 if closer == "PRE" else RANK0))
    assert _kinds(DDR4, cmds) == []
    assert _kinds(DDR4, cmds + [Cmd(2 * GAP, "RD", B0, 1)]) == [(2, "state")]      # closed now
    assert _kinds(DDR4, cmds + [Cmd(2 * GAP, "ACT", B0, 3)]) == []                 # may be activated again


def test_prea_closes_only_its_rank():
    b_r1: Addr = (0, 0, 1, 0, 0)
    cmds = [Cmd(0, "ACT", B0, 1), Cmd(1, "ACT", b_r1, 1), Cmd(GAP, "PREA", RANK0)]
    assert _kinds(HBM3, cmds + [Cmd(2 * GAP, "RD", b_r1, 1)]) == []
    assert _kinds(HBM3, cmds + [Cmd(2 * GAP, "RD", B0, 1)]) == [(3, "state")]


def test_refab_needs_every_bank_of_the_rank_closed():
    cmds = [Cmd(0, "ACT", (0, 0, 0, 2, 3), 5), Cmd(GAP, "REFab", RANK0)]
    v = check_log(DDR4, frame(cmds))
    assert [(x.index, x.kind) for x in v] == [(1, "state")]
    assert "bg2 ba3 row 5" in v[0].rule and "banks of its rank are open" in v[0].rule
    ok = [Cmd(0, "ACT", (0, 0, 0, 2, 3), 5), Cmd(GAP, "PRE", (0, 0, 0, 2, 3)), Cmd(2 * GAP, "REFab", RANK0)]
    assert _kinds(DDR4, ok) == []
    # HBM3: a bank open in the other rank (stack ID) does not block this rank's REFab
    other = [Cmd(0, "ACT", (0, 0, 1, 0, 0), 5), Cmd(GAP, "REFab", RANK0)]
    assert _kinds(HBM3, other) == []


def test_refpb_needs_closed_bank():
    assert _kinds(DDR4, [Cmd(0, "ACT", B0, 5), Cmd(GAP, "REFpb", B0)]) == [(1, "state")]
    assert _kinds(DDR4, [Cmd(0, "ACT", B1, 5), Cmd(GAP, "REFpb", B0)]) == []


def test_pre_to_closed_bank_is_a_noop():
    assert _kinds(DDR4, [Cmd(0, "PRE", B0), Cmd(GAP, "ACT", B0, 1)]) == []


def test_single_command_bus_one_command_per_cycle_per_channel():
    gddr6 = SPECS["GDDR6_14Gbps"]
    ch1: Addr = (1, 0, 0, 0, 0)
    two = [Cmd(0, "ACT", B0, 1), Cmd(GAP, "RD", B0, 1), Cmd(GAP, "ACT", B1, 1)]
    v = check_log(gddr6, frame(two))
    assert [(x.index, x.kind) for x in v] == [(2, "bus")] and "single" in v[0].rule
    # the other channel has its own command bus
    assert _kinds(gddr6, [Cmd(0, "ACT", B0, 1), Cmd(0, "ACT", ch1, 1)]) == []


def test_dual_command_bus_one_row_and_one_column_command_per_cycle():
    base = [Cmd(0, "ACT", B0, 1)]
    # one row (ACT) + one column (RD) command in one cycle: fine
    assert _kinds(HBM3, base + [Cmd(GAP, "RD", B0, 1), Cmd(GAP, "ACT", B1, 1)]) == []
    # two row commands: not
    v = check_log(HBM3, frame(base + [Cmd(GAP, "PRE", B0), Cmd(GAP, "ACT", B1, 1)]))
    assert [(x.index, x.kind) for x in v] == [(2, "bus")] and "row command bus" in v[0].rule
    # two column commands to different pseudo-channels of one channel: the column bus is per channel
    pc1: Addr = (0, 1, 0, 0, 0)
    cmds = [Cmd(0, "ACT", B0, 1), Cmd(1, "ACT", pc1, 1), Cmd(GAP, "RD", B0, 1), Cmd(GAP, "RD", pc1, 1)]
    v = check_log(HBM3, frame(cmds))
    assert [(x.index, x.kind) for x in v] == [(3, "bus")] and "column command bus" in v[0].rule


def test_cycles_must_not_decrease():
    v = check_log(DDR4, frame([Cmd(GAP, "ACT", B0, 1), Cmd(5, "ACT", B1, 1)]))
    assert ("order" in [x.kind for x in v]) and any("earlier than" in x.rule for x in v)


def test_violation_str_names_everything():
    v = check_log(DDR4, frame([Cmd(0, "ACT", B0, 1), Cmd(3, "RD", B0, 1)]))
    assert len(v) == 1
    s = str(v[0])
    assert "cycle 3" in s and "RD" in s and "bg0 ba0" in s and "log row 1" in s
    assert v[0].rule == f"bank: ACT -> RD >= nRCDRD = {DDR4.timing['nRCDRD']}, got 3"
    assert v[0].address == (0, 0, 0, 0, 0) and v[0].cycle == 3 and v[0].command == "RD"


ALL_BANK = [p for p in PRESETS if any(c.effect == "open_all" for c in SPECS[p].commands)]


@pytest.mark.parametrize("preset", ALL_BANK)
def test_all_bank_activate_opens_and_needs_every_bank_of_its_node(preset):
    """Standards with an all-bank ACT (effect open_all, e.g. GDDR6-AiM ACTAB): it opens the same row in
    every bank below its node, and needs them all closed."""
    spec = SPECS[preset]
    act_all = next(c for c in spec.commands if c.effect == "open_all")
    close_all = next(c for c in spec.commands if c.effect == "close_all" and c.scope <= act_all.scope)
    node = at_scope(spec, act_all.name, B0)
    last = (0, 0, 0, spec.counts[3] - 1, spec.counts[4] - 1)
    assert _kinds(spec, [Cmd(0, act_all.name, node, 3), Cmd(GAP, "RD", last, 3)]) == []
    v = check_log(spec, frame([Cmd(0, act_all.name, node, 3), Cmd(GAP, "RD", last, 4)]))
    assert len(v) == 1 and "row 4 but row 3 is open" in v[0].rule
    assert _kinds(spec, [Cmd(0, act_all.name, node, 3), Cmd(GAP, "ACT", last, 3)]) == [(1, "state")]
    v = check_log(spec, frame([Cmd(0, "ACT", last, 3), Cmd(GAP, act_all.name, node, 3)]))
    assert [(x.index, x.kind) for x in v] == [(1, "state")] and "row 3" in v[0].rule
    closed = [Cmd(0, act_all.name, node, 3), Cmd(GAP, close_all.name, at_scope(spec, close_all.name, B0))]
    assert _kinds(spec, closed + [Cmd(2 * GAP, "RD", last, 3)]) == [(2, "state")]
    assert _kinds(spec, closed + [Cmd(2 * GAP, act_all.name, node, 5)]) == []


def test_empty_log_is_clean():
    assert check_log(DDR4, frame([])) == []


# ------------------------------------------------------------------------------------------------
# malformed logs


def test_unknown_command_names_the_row():
    cmds = [Cmd(0, "ACT", B0, 1), Cmd(10, "NOP", B0)]
    with pytest.raises(UserError, match=r"row 1: unknown command 'NOP'.*known: ACT"):
        check_log(DDR4, frame(cmds))


def test_channel_out_of_range_names_the_row():
    cmds = [Cmd(0, "ACT", B0, 1), Cmd(10, "ACT", (3, 0, 0, 0, 0), 1)]
    with pytest.raises(UserError, match=r"row 1: channel 3 out of range 0\.\.0"):
        check_log(DDR4, frame(cmds))


@pytest.mark.parametrize("col,value", [("bankgroup", 4), ("bank", -1), ("rank", 1), ("row", 1 << 20)])
def test_address_out_of_range(col, value):
    df = frame([Cmd(0, "ACT", B0, 1)])
    df.loc[0, col] = value
    with pytest.raises(UserError, match=rf"row 0: {col} {value} out of range"):
        check_log(DDR4, df)


def test_missing_column_and_non_integer():
    df = frame([Cmd(0, "ACT", B0, 1)])
    with pytest.raises(UserError, match="lacks columns bank"):
        check_log(DDR4, df.drop(columns=["bank"]))
    df["cycle"] = df["cycle"].astype(object)
    df.loc[0, "cycle"] = "soon"
    with pytest.raises(UserError, match="row 0: cycle = 'soon' is not an integer"):
        check_log(DDR4, df)


# ------------------------------------------------------------------------------------------------
# vectorised look-back == naive look-back on random logs


@st.composite
def random_logs(draw):
    preset = draw(st.sampled_from(PRESETS))
    spec = SPECS[preset]
    n = draw(st.integers(1, 60))
    cmds, t = [], 0
    for _ in range(n):
        t += draw(st.integers(0, 40))
        name = draw(st.sampled_from(spec.command_names))
        addr = tuple(draw(st.integers(0, min(c, 2) - 1)) for c in spec.counts)
        cmds.append(Cmd(t, name, at_scope(spec, name, addr), draw(st.integers(0, 1))))
    return preset, cmds


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_logs())
def test_timing_violations_match_naive_look_back(case):
    preset, cmds = case
    spec = SPECS[preset]
    expect = set()
    for i, c in enumerate(cmds):
        for row in spec.constraints:
            if row["next_name"] != c.name:
                continue
            lv = row["level"]
            hits = [d for d in cmds[:i] if d.name == row["prev_name"] and d.addr[: lv + 1] == c.addr[: lv + 1]]
            if len(hits) >= row["window"] and c.cycle - hits[-row["window"]].cycle < row["latency"]:
                expect.add((i, row["level_name"], row["prev_name"], row["next_name"]))
    got = set()
    for v in check_log(spec, frame(cmds)):
        if v.kind == "timing":
            level, rest = v.rule.split(": ", 1)
            prev, rest = rest.split(" -> ", 1)
            got.add((v.index, level, prev, rest.split(" ", 1)[0]))
    assert got == expect


def _with_window_over_a_set(spec):
    """spec plus one row [rank, [RD, WR], [ACT], 200, window 2]: an ACT waits 200 cycles after the
    2nd most recent column command of either kind (the shape of LPDDR4's 'REFpb counts in tFAW' rule)."""
    extra = [{"group": 10_000, "level": LEVEL_INDEX["rank"], "prev": spec.cmd(p), "next": spec.cmd("ACT"), "latency": 200,
              "window": 2, "expr": "200", "prev_name": p, "next_name": "ACT", "level_name": "rank"}
             for p in ("RD", "WR")]
    return dataclasses.replace(spec, constraints=spec.constraints + extra)


def test_window_counts_over_the_set_of_preceding_commands():
    """jedec.yaml: 'the window-th most recent preceding command' -- with several preceding commands in one
    row the window runs over all of them (RD then WR: the RD is the 2nd most recent)."""
    spec = _with_window_over_a_set(DDR4)
    base = [Cmd(0, "ACT", B0, 1), Cmd(100, "ACT", (0, 0, 0, 0, 1), 1), Cmd(GAP, "RD", B0, 1),
            Cmd(GAP + 50, "WR", (0, 0, 0, 0, 1), 1)]
    bad = check_log(spec, frame(base + [Cmd(GAP + 150, "ACT", (0, 0, 0, 0, 2), 1)]))
    assert [v.rule for v in bad] == ["rank: RD -> ACT (window 2: 2nd most recent) >= 200, got 150"]
    assert check_log(spec, frame(base + [Cmd(GAP + 200, "ACT", (0, 0, 0, 0, 2), 1)])) == []


def test_simulator_counts_window_over_the_set_of_preceding_commands(make_trace):
    from archsim.dram.system import run_trace
    from archsim.dram.trace import Trace

    spec = _with_window_over_a_set(DDR4)
    trace = make_trace(spec, [{"bank": 0}, {"bank": 1, "write": True, "arrive": 1}, {"bank": 2, "arrive": 100}])
    assert isinstance(trace, Trace)
    r = run_trace(trace, preset=spec, controller={"refresh": "none"}, log=True)
    assert check_log(spec, r.extra["command_log"].df) == []


def test_rules_cover_the_spec():
    for p in PRESETS:
        spec = SPECS[p]
        pairs = {(r.level, spec.commands[q].name, spec.commands[r.nxt].name) for r in rules(spec) for q in r.prev}
        assert pairs == {(c["level"], c["prev_name"], c["next_name"]) for c in spec.constraints}
