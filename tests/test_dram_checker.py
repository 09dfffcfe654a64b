"""The independent command-log checker (archsim.dram.checker).

* Tight gates: for every constraint row of every shipped preset (and DDR4 with two ranks, so its rank
  sibling rows have a sibling), a hand-built log issues the row's preceding command(s) and then its following
  command at exactly the bound t = (window-th most recent preceding command) + latency and at t-1. Setup
  commands (the ACT a RD needs, the PACTs a COMP needs, ...) sit far back; commands needed in between (the
  PRE between two ACTs of one bank) right after the preceding command. Against a spec holding only the
  row's group the log is legal at t and has exactly the row's violation at t-1; against the full spec the
  row is named at t-1 and not at t (other rows may bind there too, they are not the row under test).
* Bank-state rules with several row buffers and wide targets, command-bus and order rules, malformed logs.
* A cross-check of the vectorised look-back against a naive one on random logs (hypothesis).
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
from archsim.dram.spec import load_spec, preset_names
from archsim.errors import UserError

PRESETS = preset_names()
SPECS = {p: load_spec(p) for p in PRESETS}
SPECS["DDR4_3200AA_x8_8Gb@2ranks"] = load_spec("DDR4_3200AA_x8_8Gb", overrides={"org.ranks": 2})
SPECS["DDR4_3200AA_x8_8Gb_Ramulator2@2ranks"] = load_spec("DDR4_3200AA_x8_8Gb_Ramulator2", overrides={"org.ranks": 2})
SPECS["DDR4_3200AA_x8_8Gb_DRAMsim3@2ranks"] = load_spec("DDR4_3200AA_x8_8Gb_DRAMsim3", overrides={"org.ranks": 2})
# DRAMsim3's HBM2 file resolves to one rank; its standard keeps the rank level (and rows) for larger channels
SPECS["HBM2_2Gbps_DRAMsim3@2ranks"] = load_spec("HBM2_2Gbps_DRAMsim3", overrides={"org.ranks": 2})
SPECS["DDR5_4800AN_x8_16Gb@2ranks"] = load_spec("DDR5_4800AN_x8_16Gb", overrides={"org.ranks": 2})
SPECS["LPDDR5_6400_x16_16Gb@2ranks"] = load_spec("LPDDR5_6400_x16_16Gb", overrides={"org.ranks": 2})
SPECS["DDR5_4800AN_x8_16Gb_RFM@2ranks"] = load_spec("DDR5_4800AN_x8_16Gb_RFM", overrides={"org.ranks": 2})
GAP = 2000  # > every latency of every preset (the largest is HBM4's nRFC = 900)
ROW = 7     # rows opened in buffer k are ROW + k, so no row is ever open in two buffers


@dataclass
class Cmd:
    cycle: int
    name: str
    bank: int          # global bank id (nested over channel, pseudochannel, rank, bankgroup, bank)
    row: int = -1


def address(spec, bank: int) -> list[int]:
    out = []
    for n in spec.counts[::-1]:
        out.append(bank % n)
        bank //= n
    return out[::-1]


def frame(spec, cmds: list[Cmd]) -> pd.DataFrame:
    rows = []
    for c in cmds:
        col = 0 if spec.commands[spec.cmd(c.name)].bus == "column" else -1
        rows.append([c.cycle, c.name, *address(spec, c.bank), c.row, col])
    return pd.DataFrame(rows, columns=LOG_COLUMNS)


def target_banks(spec, name: str, bank: int) -> list[int]:
    scope = spec.commands[spec.cmd(name)].scope
    return [int(b) for b in np.nonzero(spec.node_of[:, scope] == spec.node_of[bank, scope])[0]]


class Device:
    """Bank state of a hand-built log (per bank and buffer: open row or -1), and the commands that make a
    command legal: opens for what it needs open, closes for what it needs closed."""

    def __init__(self, spec):
        self.spec = spec
        self.open: dict[tuple[int, int], int] = {}

    def apply(self, c: Cmd) -> None:
        cmd = self.spec.commands[self.spec.cmd(c.name)]
        for b in target_banks(self.spec, c.name, c.bank):
            if cmd.effect == "open":
                self.open[(b, cmd.buffer)] = c.row
            elif cmd.effect in ("close", "read_close", "write_close", "update_close"):
                self.open.pop((b, cmd.buffer), None)

    def _cover(self, effect: str, buffer: int, scope: int, banks: list[int], row: int = -1) -> list[Cmd]:
        """Commands of `effect` on `buffer` that together reach every bank of `banks`: one at `scope` if the
        standard has it, else bank-scope ones, else the narrowest it has (e.g. NeuPIMs' bank-group G_ACT)."""
        spec = self.spec
        cands = [c for c in spec.commands if c.effect == effect and c.buffer == buffer]
        if not banks or not cands:
            return []
        bank_scope = spec.commands[spec.cmd("ACT")].scope
        same = [c for c in cands if c.scope == scope]
        # the wide command only if every bank of its target needs it (a bank opened alone must not be
        # opened again: HBM3-Duplex's bundle read after a single-bank ACT in the bundle)
        if same and scope != bank_scope and set(target_banks(spec, same[0].name, banks[0])) <= set(banks):
            return [Cmd(-1, same[0].name, banks[0], row)]
        pick = next((c for c in cands if c.scope == bank_scope), None) or min(
            cands, key=lambda c: len(target_banks(spec, c.name, banks[0])))
        out, covered = [], set()
        for b in banks:
            if b not in covered:
                out.append(Cmd(-1, pick.name, b, row))
                covered |= set(target_banks(spec, pick.name, b))
        return out

    def needs(self, name: str, bank: int) -> list[Cmd]:
        """Commands (cycles to be filled in) that make `name` at `bank` legal in the current state."""
        spec = self.spec
        cmd = spec.commands[spec.cmd(name)]
        banks = target_banks(spec, name, bank)
        out: list[Cmd] = []
        if cmd.effect in ("read", "write", "read_close", "write_close", "compute", "update", "update_close"):
            closed = [b for b in banks if (b, cmd.buffer) not in self.open]
            out += self._cover("open", cmd.buffer, cmd.scope, closed, ROW + cmd.buffer)
        elif cmd.effect in ("open", "refresh"):
            buffers = [cmd.buffer] if cmd.effect == "open" else range(len(spec.row_buffers))
            for buf in buffers:
                opened = [b for b in banks if (b, buf) in self.open]
                out += self._cover("close", buf, cmd.scope, opened)
        return out

    def row_for(self, name: str, bank: int) -> int:
        cmd = self.spec.commands[self.spec.cmd(name)]
        if cmd.effect == "open":
            return ROW + cmd.buffer
        if cmd.effect in ("read", "write", "read_close", "write_close", "compute", "update", "update_close"):
            return self.open.get((bank, cmd.buffer), -1)
        return -1


def _gate_banks(spec, r: dict) -> tuple[list[int], int] | None:
    """(banks of the preceding commands, bank of the following command) for row r, or None if the
    organisation has no such placement (a sibling row without a sibling node)."""
    lv, w = r["level"], r["window"]
    node = spec.node_of
    p0 = target_banks(spec, r["prev_name"], 0)
    if r["sibling"]:
        par = spec.level_parent[lv]
        sib = [b for b in range(spec.total_banks)
               if node[b, par] == node[p0[0], par] and node[b, lv] not in set(node[p0, lv].tolist())]
        return ([0], sib[0]) if sib else None
    same = [b for b in range(spec.total_banks) if node[b, lv] == node[0, lv]]
    # distinct banks of the node for the window's preceding commands; the following command on another one
    # (when the level is wider than a bank) so it does not stand on a preceding command's bank
    prev = [0]
    for b in same:
        if len(prev) == w:
            break
        if all(b not in target_banks(spec, r["prev_name"], q) for q in prev):
            prev.append(b)
    if len(prev) < w:
        return None
    taken = {b for q in prev for b in target_banks(spec, r["prev_name"], q)}
    free = [b for b in same if b not in taken]
    return prev, (free[0] if free else same[0])


def build_gate(spec, r: dict) -> tuple[list[Cmd], Cmd]:
    """A legal log ending just before the following command of row r, and that command at the bound."""
    p_name, f_name = r["prev_name"], r["next_name"]
    prev_banks, f_bank = _gate_banks(spec, r)
    dev = Device(spec)
    log: list[Cmd] = []

    def put(cycle: int, c: Cmd) -> None:
        c.cycle = cycle
        log.append(c)
        dev.apply(c)

    # far back: what the following command needs, then what each preceding command needs (two cycles apart: a
    # two-cycle command holds the command bus for both, issue 39)
    for c in dev.needs(f_name, f_bank):
        put(2 * len(log), c)
    t0 = GAP
    for i, b in enumerate(prev_banks):
        for c in dev.needs(p_name, b):
            put(2 * len(log), c)
        # opens the following command needs elsewhere that these prerequisites undid (a channel-wide close
        # before a bank-group open): far back too, not between the preceding command and the bound
        mine = set(target_banks(spec, p_name, b))
        for c in dev.needs(f_name, f_bank):
            if spec.commands[spec.cmd(c.name)].effect == "open" and not mine & set(target_banks(spec, c.name, c.bank)):
                put(2 * len(log), c)
        assert len(log) < GAP // 2
        log.append(Cmd(t0 + i, p_name, b, dev.row_for(p_name, b)))
        dev.apply(log[-1])
    log.sort(key=lambda c: c.cycle)      # the preceding commands after all setup
    # right after: what the preceding commands undid (a PRE between two ACTs of one bank)
    t = t0 + r["latency"]
    between = dev.needs(f_name, f_bank)
    for c in between:
        put(log[-1].cycle + 1, c)
    assert not between or log[-1].cycle < t - 1, "the commands in between do not fit before the bound"
    return log, Cmd(t, f_name, f_bank, dev.row_for(f_name, f_bank))


def _dominated(spec, r: dict) -> bool:
    """Row r can never bind: another row of the same commands, at least as long, holds wherever r does (every
    two banks sharing r's node share the other row's node). Issue 39's bus-occupancy rows of multi-cycle commands
    include such pairs (DDR5 with one rank: a two-cycle ACT holds the bus before a REFab, which waits nRC anyway)."""
    if r["sibling"] or r["window"] > 1:
        return False
    node = spec.node_of
    for r2 in spec.constraints:
        if (r2 is r or r2["sibling"] or r2["window"] > 1 or (r2["prev"], r2["next"]) != (r["prev"], r["next"])
                or r2["latency"] < r["latency"]):
            continue
        same_r = node[:, r["level"]][:, None] == node[:, r["level"]][None, :]
        same_r2 = node[:, r2["level"]][:, None] == node[:, r2["level"]][None, :]
        if not (same_r & ~same_r2).any():
            return True
    return False


def _vacuous(spec, r: dict) -> bool:
    """Row r can never bind and has no tight gate: the commands its following command needs first (a precharge
    before a refresh) do not fit under it, and it is that short (they space the two further apart) or dominated."""
    if _gate_banks(spec, r) is None:
        return False
    try:
        build_gate(spec, r)
    except AssertionError:
        return r["latency"] <= 2 or _dominated(spec, r)
    return False


def _gate_cases():
    cases = []
    for p, spec in SPECS.items():
        seen = set()
        for r in spec.constraints:
            key = (r["group"], r["prev_name"], r["next_name"])
            if key in seen or _gate_banks(spec, r) is None or _vacuous(spec, r):
                continue
            seen.add(key)
            rid = (f"{p}:{r['level_name']}{':sib' if r['sibling'] else ''}:{r['prev_name']}->{r['next_name']}"
                   + (f":w{r['window']}" if r["window"] > 1 else "") + f":g{r['group']}")
            cases.append(pytest.param(p, r, id=rid))
    return cases


def rule_text(r: dict) -> str:
    lat = r["expr"] if r["expr"] == str(r["latency"]) else f"{r['expr']} = {r['latency']}"
    win = "" if r["window"] == 1 else f" (window {r['window']}: {r['window']}th most recent)".replace(
        "1th", "1st").replace("2th", "2nd").replace("3th", "3rd")
    return (f"{r['level_name']}{' sibling' if r['sibling'] else ''}: {r['prev_name']} -> {r['next_name']}{win} "
            f">= {lat}, got {r['latency'] - 1}")


@pytest.mark.parametrize("preset,row", _gate_cases())
def test_tight_gate(preset, row):
    spec = SPECS[preset]
    log, f = build_gate(spec, row)
    early = dataclasses.replace(f, cycle=f.cycle - 1)
    alone = dataclasses.replace(spec, constraints=[c for c in spec.constraints if c["group"] == row["group"]])
    assert check_log(alone, frame(spec, log + [f])) == [], "legal at the bound (the row's group alone)"
    bad = check_log(alone, frame(spec, log + [early]))
    if row["latency"] == 1:     # t-1 is the preceding command's cycle: it may share the command bus too
        bad = [v for v in bad if v.kind != "bus"]
    assert [(v.index, v.kind, v.rule) for v in bad] == [(len(log), "timing", rule_text(row))]
    # the full standard: the row binds exactly there
    assert rule_text(row) in [v.rule for v in check_log(spec, frame(spec, log + [early]))]
    at_t = check_log(spec, frame(spec, log + [f]))
    prefix = rule_text(row).rsplit(", got", 1)[0]
    assert not [v for v in at_t if v.index == len(log) and v.rule.startswith(prefix + ",")]
    assert not [v for v in at_t if v.kind == "state"]


def test_every_row_is_gated():
    """Every expanded constraint row of every shipped preset is a tight-gate case (the sibling rows of DDR4
    through its two-rank variant; a single-rank device has no sibling to violate them with)."""
    gated = {(p.split("@")[0], c.values[1]["group"], c.values[1]["prev_name"], c.values[1]["next_name"])
             for c in _gate_cases() for p in [c.values[0]]}
    for p in PRESETS:
        for r in SPECS[p].constraints:
            if _vacuous(SPECS[p], r):
                assert r["expr"].isdigit(), ("only bus-occupancy rows never bind", p, r)
                continue
            assert (p, r["group"], r["prev_name"], r["next_name"]) in gated, (p, r)


def test_window_counts_the_window_th_most_recent():
    """rank ACT -> ACT nFAW window 4 on DDR4 (nFAW 34 > 4 x nRRDS 16 there): the 5th ACT counts from the
    1st of the last four, not from the most recent."""
    spec = SPECS["DDR4_3200AA_x8_8Gb"]
    acts = [Cmd(100 + 8 * i, "ACT", 4 * i + 1, ROW) for i in range(4)]   # 4 bank groups, nRRDL/nRRDS kept
    nfaw = spec.timing["nFAW"]
    assert check_log(spec, frame(spec, acts + [Cmd(100 + nfaw, "ACT", 2, ROW)])) == []
    bad = check_log(spec, frame(spec, acts + [Cmd(100 + nfaw - 1, "ACT", 2, ROW)]))
    assert [v.rule for v in bad] == [f"rank: ACT -> ACT (window 4: 4th most recent) >= nFAW = {nfaw}, got {nfaw - 1}"]


def test_window_counts_over_the_set_of_preceding_commands():
    """A row with several preceding commands counts its window over all of them (RD then WR: the RD is the
    2nd most recent)."""
    spec = SPECS["DDR4_3200AA_x8_8Gb"]
    rank = spec.levels.index("rank")
    extra = [{"group": 10_000, "level": rank, "prev": spec.cmd(p), "next": spec.cmd("ACT"), "latency": 200,
              "window": 2, "sibling": False, "expr": "200", "prev_name": p, "next_name": "ACT", "level_name": "rank"}
             for p in ("RD", "WR")]
    spec = dataclasses.replace(spec, constraints=spec.constraints + extra)
    base = [Cmd(0, "ACT", 0, 1), Cmd(100, "ACT", 1, 1), Cmd(GAP, "RD", 0, 1), Cmd(GAP + 50, "WR", 1, 1)]
    bad = check_log(spec, frame(spec, base + [Cmd(GAP + 150, "ACT", 2, 1)]))
    assert [v.rule for v in bad] == ["rank: RD -> ACT (window 2: 2nd most recent) >= 200, got 150"]
    assert check_log(spec, frame(spec, base + [Cmd(GAP + 200, "ACT", 2, 1)])) == []


# ------------------------------------------------------------------------------------------------
# wide targets, siblings, several buffers


AIM = load_spec("GDDR6_AiM_16Gbps", overrides={"org.channels": 2})
DRB = load_spec("HBM2_2Gbps_DualRB", overrides={"org.channels": 1})
HBM3 = load_spec("HBM3_6400Mbps", overrides={"org.channels": 1})
DDR4 = SPECS["DDR4_3200AA_x8_8Gb"]


def test_all_bank_command_waits_for_every_bank_of_its_target():
    """A bank-scope row binds a channel-scope command through any of its banks, and only in its channel."""
    t = AIM.timing
    last = 15                                  # the channel's last bank
    log = [Cmd(0, "ACT", last, ROW), Cmd(GAP, "PRE", last)]
    bad = check_log(AIM, frame(AIM, log + [Cmd(GAP + t["nRP"] - 1, "ACTAB", 0, ROW)]))
    assert [v.rule for v in bad] == [f"channel: PRE -> ACTAB >= nRP = {t['nRP']}, got {t['nRP'] - 1}"]
    assert check_log(AIM, frame(AIM, log + [Cmd(GAP + t["nRP"], "ACTAB", 0, ROW)])) == []
    # the other channel is another node: no constraint
    assert check_log(AIM, frame(AIM, log + [Cmd(GAP + 1, "ACTAB", 16, ROW)])) == []


def test_bank_rows_bind_a_wide_preceding_command_at_every_bank():
    """DualRB: [bank, PPRE/PPREA, PACT, nRP] -- a channel-wide PPREA counts at every bank of the channel."""
    t = DRB.timing
    log = [Cmd(0, "PACT", 21, ROW + 1), Cmd(GAP, "PPREA", 0)]
    bad = check_log(DRB, frame(DRB, log + [Cmd(GAP + t["nRP"] - 1, "PACT", 21, ROW + 1)]))
    assert f"bank: PPREA -> PACT >= nRP = {t['nRP']}, got {t['nRP'] - 1}" in [v.rule for v in bad]
    assert check_log(DRB, frame(DRB, log + [Cmd(GAP + t["nRP"], "PACT", 21, ROW + 1)])) == []


def test_sibling_row_needs_a_different_node_under_the_same_parent():
    n = HBM3.timing["nCCDR"]
    sid1 = 16                                                       # pc0, sid 1, bg0 ba0
    base = [Cmd(0, "ACT", 0, ROW), Cmd(10, "ACT", sid1, ROW), Cmd(11, "ACT", 32, ROW)]   # 32: pc1 sid0
    bad = check_log(HBM3, frame(HBM3, base + [Cmd(GAP, "RD", 0, ROW), Cmd(GAP + n - 1, "RD", sid1, ROW)]))
    assert [v.rule for v in bad] == [f"sid sibling: RD -> RD >= nCCDR = {n}, got {n - 1}"]
    # the same sid is not a sibling, and a sid of the other pseudo-channel has another parent
    same_sid = check_log(HBM3, frame(HBM3, base + [Cmd(GAP, "RD", 0, ROW), Cmd(GAP + n - 1, "RD", 0, ROW)]))
    assert same_sid and not [v for v in same_sid if "sibling" in v.rule]
    rd_pc1 = check_log(HBM3, frame(HBM3, base + [Cmd(GAP, "RD", 0, ROW), Cmd(GAP + n - 1, "RD", 32, ROW)]))
    assert not [v for v in rd_pc1 if "sibling" in v.rule]


def test_state_open_needs_its_buffer_closed_and_the_row_not_in_another_buffer():
    v = check_log(DDR4, frame(DDR4, [Cmd(0, "ACT", 0, 1), Cmd(GAP, "ACT", 0, 2)]))
    assert [(x.index, x.kind, x.rule) for x in v] == [
        (1, "state", "ACT opens row 2 but buffer mem of ch0 bg0 ba0 has row 1 open (close it first)")]
    # DualRB: a row may not be open in both buffers of a bank; other rows, or other banks, are fine
    v = check_log(DRB, frame(DRB, [Cmd(0, "ACT", 6, 5), Cmd(GAP, "PACT", 6, 5)]))
    assert [x.rule for x in v] == ["PACT opens row 5 but row 5 is open in buffer mem of ch0 pc0 bg1 ba2"]
    assert check_log(DRB, frame(DRB, [Cmd(0, "ACT", 6, 5), Cmd(GAP, "PACT", 6, 9)])) == []
    assert check_log(DRB, frame(DRB, [Cmd(0, "ACT", 6, 5), Cmd(GAP, "PACT", 7, 5)])) == []
    v = check_log(DRB, frame(DRB, [Cmd(0, "PACT", 6, 5), Cmd(GAP, "ACT", 6, 5)]))
    assert [x.rule for x in v] == ["ACT opens row 5 but row 5 is open in buffer pim of ch0 pc0 bg1 ba2"]


def test_state_column_and_compute_need_their_own_buffer_open_at_the_row():
    assert [x.kind for x in check_log(DDR4, frame(DDR4, [Cmd(0, "RD", 0, 1)]))] == ["state"]
    v = check_log(DDR4, frame(DDR4, [Cmd(0, "ACT", 0, 1), Cmd(GAP, "RD", 0, 2)]))
    assert [x.rule for x in v] == ["RD to row 2 but row 1 is open in buffer mem of ch0 bg0 ba0"]
    assert check_log(DDR4, frame(DDR4, [Cmd(0, "ACT", 0, 1), Cmd(GAP, "WR", 0, -1)])) == []  # row not logged
    # DualRB: RD needs the mem buffer, not the pim one; COMP needs the pim buffer of every bank of the channel
    v = check_log(DRB, frame(DRB, [Cmd(0, "PACT", 0, 5), Cmd(GAP, "RD", 0, 5)]))
    assert [x.rule for x in v] == ["RD needs buffer mem open but it is closed in ch0 pc0 bg0 ba0 (open a row first)"]
    pacts = [Cmd(i * 100, "PACT", b, 5) for i, b in enumerate(range(32))]
    assert check_log(DRB, frame(DRB, pacts + [Cmd(GAP * 3, "COMP", 0, 5)])) == []
    v = check_log(DRB, frame(DRB, pacts[:-1] + [Cmd(GAP * 3, "COMP", 0, 5)]))
    assert [x.rule for x in v] == ["COMP needs buffer pim open but it is closed in ch0 pc1 bg3 ba3 (open a row first)"]
    # AiM: a single-bank RD on an all-bank-activated row
    v = check_log(AIM, frame(AIM, [Cmd(0, "ACTAB", 0, 3), Cmd(GAP, "RD", 15, 3), Cmd(GAP + 10, "RD", 15, 4)]))
    assert [x.rule for x in v] == ["RD to row 4 but row 3 is open in buffer mem of ch0 bg3 ba3"]


@pytest.mark.parametrize("closer", ["PRE", "RDA", "WRA", "PREA"])
def test_closing_commands_close_their_buffer(closer):
    cmds = [Cmd(0, "ACT", 0, 1), Cmd(GAP, closer, 0, 1 if closer in ("RDA", "WRA") else -1)]
    assert check_log(DDR4, frame(DDR4, cmds)) == []
    assert [x.kind for x in check_log(DDR4, frame(DDR4, cmds + [Cmd(2 * GAP, "RD", 0, 1)]))] == ["state"]
    assert check_log(DDR4, frame(DDR4, cmds + [Cmd(2 * GAP, "ACT", 0, 3)])) == []


def test_close_is_buffer_specific_and_always_legal():
    # PPRE closes only the pim buffer; PRE of a closed bank is a no-op
    log = [Cmd(0, "ACT", 0, 1), Cmd(10, "PACT", 0, 2), Cmd(GAP, "PPRE", 0), Cmd(2 * GAP, "RD", 0, 1),
           Cmd(2 * GAP + 100, "PRE", 5)]
    assert check_log(DRB, frame(DRB, log)) == []
    assert [x.kind for x in check_log(DRB, frame(DRB, log + [Cmd(3 * GAP, "COMP", 0, 2)]))] == ["state"]


def test_prea_closes_only_its_rank():
    b_r1 = 16
    cmds = [Cmd(0, "ACT", 0, 1), Cmd(1, "ACT", b_r1, 1), Cmd(GAP, "PREA", 0)]
    assert check_log(HBM3, frame(HBM3, cmds + [Cmd(2 * GAP, "RD", b_r1, 1)])) == []
    assert [x.index for x in check_log(HBM3, frame(HBM3, cmds + [Cmd(2 * GAP, "RD", 0, 1)]))] == [3]


def test_refresh_needs_every_buffer_of_every_bank_closed():
    v = check_log(DDR4, frame(DDR4, [Cmd(0, "ACT", 11, 5), Cmd(GAP, "REFab", 0)]))
    assert [x.rule for x in v] == ["REFab needs every buffer closed but buffer mem of ch0 bg2 ba3 has row 5 open "
                                   "(close it first)"]
    assert check_log(DDR4, frame(DDR4, [Cmd(0, "ACT", 11, 5), Cmd(GAP, "PRE", 11), Cmd(2 * GAP, "REFab", 0)])) == []
    # DualRB: the pim buffer counts too; REFpb only looks at its bank
    v = check_log(DRB, frame(DRB, [Cmd(0, "PACT", 3, 5), Cmd(GAP, "REFab", 0)]))
    assert [x.rule for x in v] == ["REFab needs every buffer closed but buffer pim of ch0 pc0 bg0 ba3 has row 5 "
                                   "open (close it first)"]
    assert check_log(DRB, frame(DRB, [Cmd(0, "PACT", 3, 5), Cmd(GAP, "REFpb", 2)])) == []
    assert [x.kind for x in check_log(DRB, frame(DRB, [Cmd(0, "PACT", 3, 5), Cmd(GAP, "REFpb", 3)]))] == ["state"]
    # HBM3: a bank open in the other stack ID does not block this one's REFab
    assert check_log(HBM3, frame(HBM3, [Cmd(0, "ACT", 16, 5), Cmd(GAP, "REFab", 0)])) == []


def test_transfer_has_no_bank_state():
    assert check_log(AIM, frame(AIM, [Cmd(0, "WRGB", 0), Cmd(GAP, "RDMAC", 0), Cmd(2 * GAP, "AF", 0)])) == []


def test_wide_command_logged_with_any_bank_of_its_target():
    """The target is the scope node containing the logged bank, whichever bank of it was logged."""
    assert check_log(AIM, frame(AIM, [Cmd(0, "ACTAB", 5, 3), Cmd(GAP, "RD", 15, 3)])) == []


def test_single_command_bus_one_command_per_cycle_per_channel():
    gddr6 = SPECS["GDDR6_14Gbps"]
    v = check_log(gddr6, frame(gddr6, [Cmd(0, "ACT", 0, 1), Cmd(GAP, "RD", 0, 1), Cmd(GAP, "ACT", 4, 1)]))
    assert [(x.index, x.kind) for x in v] == [(2, "bus")] and "single" in v[0].rule
    assert check_log(gddr6, frame(gddr6, [Cmd(0, "ACT", 0, 1), Cmd(0, "ACT", 16, 1)])) == []   # other channel


def test_dual_command_bus_one_row_and_one_column_command_per_cycle():
    base = [Cmd(0, "ACT", 0, 1)]
    assert check_log(HBM3, frame(HBM3, base + [Cmd(GAP, "RD", 0, 1), Cmd(GAP, "ACT", 4, 1)])) == []
    v = check_log(HBM3, frame(HBM3, base + [Cmd(GAP, "PRE", 0), Cmd(GAP, "ACT", 4, 1)]))
    assert [(x.index, x.kind) for x in v] == [(2, "bus")] and "row command bus" in v[0].rule
    cmds = [Cmd(0, "ACT", 0, 1), Cmd(1, "ACT", 32, 1), Cmd(GAP, "RD", 0, 1), Cmd(GAP, "RD", 32, 1)]
    v = check_log(HBM3, frame(HBM3, cmds))
    assert [(x.index, x.kind) for x in v] == [(3, "bus")] and "column command bus" in v[0].rule


def test_cycles_must_not_decrease():
    v = check_log(DDR4, frame(DDR4, [Cmd(GAP, "ACT", 0, 1), Cmd(5, "ACT", 4, 1)]))
    assert any(x.kind == "order" and "earlier than" in x.rule for x in v)


def test_violation_str_names_everything():
    v = check_log(DDR4, frame(DDR4, [Cmd(0, "ACT", 0, 1), Cmd(3, "RD", 0, 1)]))
    assert len(v) == 1
    s = str(v[0])
    assert "cycle 3" in s and "RD" in s and "bg0 ba0" in s and "log row 1" in s
    assert v[0].rule == f"bank: ACT -> RD >= nRCDRD = {DDR4.timing['nRCDRD']}, got 3"
    assert v[0].address == (0, 0, 0, 0, 0) and v[0].cycle == 3 and v[0].command == "RD"


def test_empty_log_is_clean_and_source_column_is_ignored():
    assert check_log(DDR4, frame(DDR4, [])) == []
    df = frame(DDR4, [Cmd(0, "ACT", 0, 1)])
    df["source"] = "mem"
    assert check_log(DDR4, df) == []


# ------------------------------------------------------------------------------------------------
# malformed logs


def test_unknown_command_names_the_row():
    df = frame(DDR4, [Cmd(0, "ACT", 0, 1), Cmd(10, "ACT", 0)])
    df.loc[1, "command"] = "NOP"
    with pytest.raises(UserError, match=r"row 1: unknown command 'NOP'.*known: ACT"):
        check_log(DDR4, df)


def test_channel_out_of_range_names_the_row():
    df = frame(DDR4, [Cmd(0, "ACT", 0, 1), Cmd(10, "ACT", 0, 1)])
    df.loc[1, "channel"] = 3
    with pytest.raises(UserError, match=r"row 1: channel 3 out of range 0\.\.0"):
        check_log(DDR4, df)


@pytest.mark.parametrize("col,value", [("bankgroup", 4), ("bank", -1), ("rank", 1), ("row", 1 << 20),
                                       ("column", 10**6)])
def test_address_out_of_range(col, value):
    df = frame(DDR4, [Cmd(0, "ACT", 0, 1)])
    df.loc[0, col] = value
    with pytest.raises(UserError, match=rf"row 0: {col} {value} out of range"):
        check_log(DDR4, df)


def test_missing_column_and_non_integer():
    df = frame(DDR4, [Cmd(0, "ACT", 0, 1)])
    with pytest.raises(UserError, match="lacks columns bank"):
        check_log(DDR4, df.drop(columns=["bank"]))
    df["cycle"] = df["cycle"].astype(object)
    df.loc[0, "cycle"] = "soon"
    with pytest.raises(UserError, match="row 0: cycle = 'soon' is not an integer"):
        check_log(DDR4, df)
    with pytest.raises(UserError, match="expected a pandas DataFrame"):
        check_log(DDR4, [1, 2])


# ------------------------------------------------------------------------------------------------
# vectorised look-back == naive look-back on random logs


RANDOM_SPECS = {"DDR4x2": load_spec("DDR4_3200AA_x8_8Gb", overrides={"org.ranks": 2}),
                "HBM3": HBM3, "AiM": load_spec("GDDR6_AiM_16Gbps", overrides={"org.channels": 1}), "DualRB": DRB}


def naive_timing(spec, cmds: list[Cmd]) -> set[tuple[int, str]]:
    """Section 4 read literally: for each command and row, the window-th most recent preceding command whose
    target shares a level node with it (sibling: a different node under the same parent)."""
    lv_sets = {}

    def nodes(c: Cmd, lv: int) -> set[int]:
        key = (c.name, c.bank, lv)
        if key not in lv_sets:
            lv_sets[key] = {int(spec.node_of[b, lv]) for b in target_banks(spec, c.name, c.bank)}
        return lv_sets[key]

    def pairs(c: Cmd, lv: int) -> set[tuple[int, int]]:
        par = spec.level_parent[lv]
        return {(int(spec.node_of[b, par]), int(spec.node_of[b, lv])) for b in target_banks(spec, c.name, c.bank)}

    out = set()
    for i, f in enumerate(cmds):
        for r in rules(spec):
            if spec.cmd(f.name) != r.nxt:
                continue
            prev = [p for p in cmds[:i] if spec.cmd(p.name) in r.prev]
            hit = None
            if r.sibling:
                fp = pairs(f, r.level)
                sib = [p for p in prev if any(a == c and b != d for a, b in pairs(p, r.level) for c, d in fp)]
                hit = sib[-1] if sib else None
            else:
                best = None
                for x in nodes(f, r.level):
                    at = [p for p in prev if x in nodes(p, r.level)]
                    if len(at) >= r.window and (best is None or at[-r.window].cycle > best.cycle):
                        best = at[-r.window]
                hit = best
            if hit is not None and f.cycle - hit.cycle < r.latency:
                out.add((i, r.text(spec, spec.cmd(hit.name), f.cycle - hit.cycle).rsplit(", got", 1)[0]))
    return out


@st.composite
def random_logs(draw):
    name = draw(st.sampled_from(sorted(RANDOM_SPECS)))
    spec = RANDOM_SPECS[name]
    n = draw(st.integers(1, 40))
    cmds, t = [], 0
    for _ in range(n):
        t += draw(st.integers(0, 30))
        cmds.append(Cmd(t, draw(st.sampled_from(spec.command_names)), draw(st.integers(0, min(spec.total_banks, 40) - 1)),
                        draw(st.integers(-1, 1))))
    return name, cmds


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_logs())
def test_timing_violations_match_naive_look_back(case):
    name, cmds = case
    spec = RANDOM_SPECS[name]
    got = {(v.index, v.rule.rsplit(", got", 1)[0]) for v in check_log(spec, frame(spec, cmds)) if v.kind == "timing"}
    assert got == naive_timing(spec, cmds)


def test_rules_cover_the_spec():
    for spec in SPECS.values():
        pairs = {(r.level, r.group, spec.commands[q].name, spec.commands[r.nxt].name) for r in rules(spec) for q in r.prev}
        assert pairs == {(c["level"], c["group"], c["prev_name"], c["next_name"]) for c in spec.constraints}


def test_violation_is_frozen():
    v = Violation(0, 0, "ACT", (0, 0, 0, 0, 0), -1, "x", "state")
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.row = 3  # type: ignore[misc]
