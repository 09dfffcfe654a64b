"""Verilog header with a DRAM standard's timing-constraint table, for rtl/pim_cmd_sequencer.v.

The header is a pure function of the loaded spec (no dates, no absolute paths): regenerating it gives the
same bytes, and tests/rtl compares the committed rtl/include/<standard>_timing.vh with a fresh render, so
the RTL can never drift from the constraint rows the channel engine uses (archsim.engine.channel lowers
the same `spec.constraints`).

Layout (every table is a packed vector, entry i at bits [i*W +: W] for its field width W):

* commands: index, scope level (CMD_SCOPE);
* the address tree of one channel: for every (level, bank) the mask of banks that share the bank's node of
  that level (SCOPE_MASK: the banks a command of that scope acts on), and for every (level, node) the mask
  of banks under the node (NODE_BANKS);
* constraint rows (ROW_PREV, ROW_NEXT, ROW_LEVEL, ROW_WIN, ROW_LAT): one per (preceding, following)
  command pair of `spec.constraints`;
* history counters: a row waits for the `window`-th most recent of its preceding commands at a node, so
  the RTL keeps, per (preceding-command list, level) pair that some row uses ("slot"), per node of the level, the
  elapsed cycles since the last `depth` issues (depth = the largest window of the slot's rows). Counter
  (slot s, node n, k-th most recent) has index SLOT_BASE[s] + n * SLOT_DEPTH[s] + k; per counter the
  header lists its command mask, level, node and k (CTR_*), per row the counter of node 0 at k = window - 1
  (ROW_CTR) and the node stride (ROW_STRIDE).

Regenerate with `python -m archsim.dram.verilog` (writes rtl/include/gddr6_aim_timing.vh, and the headers of
rtl/dual_rowbuf_arbiter.v: rtl/include/dual_rowbuf_arbiter_timing.vh for NeuPIMs_HBM2_Dual and
rtl/include/neupims_single/dual_rowbuf_arbiter_timing.vh for NeuPIMs_HBM2_Single, macro prefix ARB_).
"""

from __future__ import annotations

import re
from pathlib import Path

from archsim.dram.effects import CODE, EFFECTS, Effect
from archsim.dram.roles import (
    R_ACT,
    R_PRE,
    R_RD,
    R_REFAB,
    R_WR,
    close_commands,
    controller_roles,
    refresh_nodes,
)
from archsim.errors import ConfigError
from archsim.results import atomic_write_text

#: The device the shipped header (and rtl/pim_cmd_sequencer.v) is generated for: PIM-GPT's GDDR6-AiM.
TIMING_PRESET = "GDDR6_AiM_16Gbps"


def _bits(n: int) -> int:
    """Bits to hold the values 0..n (at least 1)."""
    return max(1, int(n).bit_length())


def _ident(spec) -> str:
    """The standard's name as a Verilog identifier part (gddr6-aim -> gddr6_aim)."""
    return re.sub(r"[^0-9a-zA-Z]+", "_", spec.standard).strip("_").lower()


def header_filename(spec) -> str:
    return f"{_ident(spec)}_timing.vh"


def timing_tables(spec, latency_override: dict[str, int] | None = None, arbiter: bool = False) -> dict:
    """The tables of the header as Python values (also used by tests to build mutated latency vectors).

    latency_override maps a row's latency expression (e.g. "nRCDRD") to the value to use instead: a
    test-only hook for mutation tests; the shipped header never uses it. arbiter: the tables of
    rtl/dual_rowbuf_arbiter.v, which has a row and a column command bus and reads sibling rows (window 1)
    from the counters of the other nodes of the level."""
    if spec.command_bus != "single" and not arbiter:
        raise ConfigError("(verilog)", f"{spec.name} has a {spec.command_bus} command bus; the RTL timing engine "
                                       "issues one command per cycle (single bus) only", source=spec.name)
    rows = _rows(spec, latency_override, arbiter)
    nb = int(spec.banks_per_channel)
    levels = list(spec.levels)
    local = _local_nodes(spec, len(levels), nb)
    n_nodes = [max(col) + 1 for col in local]
    scope_mask = [[sum(1 << x for x in range(nb) if local[li][x] == local[li][b]) for b in range(nb)]
                  for li in range(len(levels))]
    max_nodes = max(n_nodes)
    node_banks = [[sum(1 << x for x in range(nb) if local[li][x] == n) for n in range(max_nodes)]
                  for li in range(len(levels))]
    ctrs = _history_counters(spec, rows, n_nodes)
    max_lat = max([r["lat"] for r in rows] + [1])
    return {
        "commands": [(c.name, int(c.scope)) for c in spec.commands],
        "levels": levels, "n_nodes": n_nodes, "max_nodes": max_nodes, "banks": nb,
        "scope_mask": scope_mask, "node_banks": node_banks, "rows": rows, "ctrs": ctrs,
        "lat_bits": _bits(max_lat), "max_lat": max_lat, "command_bus": spec.command_bus,
    }


def _rows(spec, latency_override: dict[str, int] | None, arbiter: bool) -> list[dict]:
    """The constraint rows as the header writes them; sibling rows only for the arbiter, with window 1."""
    rows = []
    for r in spec.constraints:
        if r.get("sibling") and arbiter and int(r["window"]) != 1:
            raise ConfigError("(verilog)", f"sibling rows with a window > 1 are not supported by the RTL "
                                           f"(issue #10): {r['level_name']} {r['prev_name']} -> {r['next_name']}",
                              source=spec.name)
        if r.get("sibling") and not arbiter:
            raise ConfigError("(verilog)", f"sibling constraint rows are not supported by the RTL timing "
                                           f"engine: {r['level_name']} {r['prev_name']} -> {r['next_name']}",
                              source=spec.name)
        lat = int(r["latency"])
        if latency_override and r["expr"] in latency_override:
            lat = int(latency_override[r["expr"]])
        rows.append({"prev": int(r["prev"]), "next": int(r["next"]), "level": int(r["level"]),
                     "win": int(r["window"]), "lat": lat, "expr": r["expr"], "prev_name": r["prev_name"],
                     "next_name": r["next_name"], "level_name": r["level_name"],
                     "sib": bool(r.get("sibling"))})
    return rows


def _history_counters(spec, rows: list[dict], n_nodes: list[int]) -> list[dict]:
    """History slots, and each row's counter and stride in them (set on the rows). A row's window counts issues
    of *any* command of its preceding list (the engine's semantics: [level, [ACT, ACTAB], [...], lat, 2] waits
    for the 2nd most recent ACT or ACTAB), so a slot is (the preceding list of the row as written in the
    standard, level); depth = its largest window."""
    prevs: dict[int, set[int]] = {}
    for r in spec.constraints:
        prevs.setdefault(int(r["group"]), set()).add(int(r["prev"]))
    for r, src in zip(rows, spec.constraints, strict=True):
        r["prevs"] = tuple(sorted(prevs[int(src["group"])]))
    slots: dict[tuple[tuple[int, ...], int], int] = {}
    for r in rows:
        key = (r["prevs"], r["level"])
        slots[key] = max(slots.get(key, 0), r["win"])
    base = {}
    ctrs = []
    for key in sorted(slots, key=lambda k: (k[1], k[0])):
        cmds, lvl = key
        base[key] = len(ctrs)
        for n in range(n_nodes[lvl]):
            for k in range(slots[key]):
                ctrs.append({"cmds": sum(1 << c for c in cmds), "level": lvl, "node": n, "k": k})
    for r in rows:
        key = (r["prevs"], r["level"])
        r["stride"] = slots[key]
        r["ctr"] = base[key] + r["win"] - 1
    return ctrs


def _vec(values: list[int], width: int) -> str:
    """A packed vector literal, entry 0 in the least significant bits."""
    total = width * len(values)
    acc = 0
    for i, v in enumerate(values):
        if not 0 <= v < (1 << width):
            raise ConfigError("(verilog)", f"value {v} does not fit in {width} bits")
        acc |= v << (i * width)
    return f"{total}'h{acc:0{(total + 3) // 4}x}"


def lat_vector(tables: dict) -> str:
    """The ROW_LAT vector literal of `tables` (what a test passes to override the parameter)."""
    return _vec([r["lat"] for r in tables["rows"]], tables["lat_bits"])


def _address_tree(p: str, t: dict, extra: list[str] = ()) -> list[str]:
    """The header section both blocks share: one channel's address tree (levels, nodes, bank masks).
    `extra` lines follow the bank defines."""
    nb, nl = t["banks"], len(t["levels"])
    lb, nodeb, cntb = _bits(nl - 1), _bits(t["max_nodes"] - 1), _bits(t["max_nodes"])
    out = ["// Address tree of one channel: levels outermost first",
           f"`define {p}_NUM_BANKS {nb}", f"`define {p}_BANK_BITS {_bits(nb - 1)}", *extra,
           f"`define {p}_NUM_LEVELS {nl}", f"`define {p}_LEVEL_BITS {lb}"]
    out += [f"`define {p}_LEVEL_{name.upper()} {li}  // {t['n_nodes'][li]} node(s)" for li, name in enumerate(t["levels"])]
    out += [f"`define {p}_MAX_NODES {t['max_nodes']}", f"`define {p}_NODE_BITS {nodeb}",
            f"`define {p}_NODE_CNT_BITS {cntb}",
            "// LEVEL_NODES[level]: nodes of the level in one channel",
            f"`define {p}_LEVEL_NODES {_vec(t['n_nodes'], cntb)}",
            f"// SCOPE_MASK[level * NUM_BANKS + bank]: banks sharing the bank's node of the level ({nb} bits each)",
            f"`define {p}_SCOPE_MASK {_vec([m for lv in t['scope_mask'] for m in lv], nb)}",
            f"// NODE_BANKS[level * MAX_NODES + node]: banks under the node ({nb} bits each)",
            f"`define {p}_NODE_BANKS {_vec([m for lv in t['node_banks'] for m in lv], nb)}"]
    return out


def timing_header(spec) -> str:
    """Render rtl/include/<standard>_timing.vh for one channel of `spec`."""
    t = timing_tables(spec)
    p = _ident(spec).upper()
    nl = len(t["levels"])
    ncmd = len(t["commands"])
    rows, ctrs = t["rows"], t["ctrs"]
    cb, lb = _bits(ncmd - 1), _bits(nl - 1)
    nodeb = _bits(t["max_nodes"] - 1)
    winb = _bits(max(r["win"] for r in rows))
    ctrb = _bits(len(ctrs) - 1)
    guard = f"{p}_TIMING_VH"
    out: list[str] = []
    w = out.append
    w(f"// {header_filename(spec)}: generated by archsim from the {spec.name} preset (standard {spec.standard},")
    w("// one channel) - do not edit. Regenerate with: python -m archsim.dram.verilog")
    w("// Every table is a packed vector: entry i at [i*W +: W] for the field width W below.")
    w(f"`ifndef {guard}")
    w(f"`define {guard}")
    w("")
    w(f"// Command bus: {t['command_bus']} (one command per cycle)" if t["command_bus"] == "single"
      else f"// Command bus: {t['command_bus']}")
    w(f"`define {p}_SINGLE_BUS {1 if t['command_bus'] == 'single' else 0}")
    w("")
    w("// Commands: index and scope level")
    w(f"`define {p}_NUM_CMDS {ncmd}")
    w(f"`define {p}_CMD_BITS {cb}")
    for i, (name, scope) in enumerate(t["commands"]):
        w(f"`define {p}_CMD_{name.upper()} {cb}'d{i}  // scope {t['levels'][scope]}")
    w(f"`define {p}_CMD_SCOPE {_vec([s for _, s in t['commands']], lb)}")
    w("")
    out += _address_tree(p, t)
    w("")
    w("// Constraint rows: a following command NEXT waits LAT cycles after the WIN-th most recent PREV")
    w("// issued to a target sharing a node of LEVEL with its own target (docs/channel-engine.md, 1 and 4).")
    w(f"`define {p}_NUM_ROWS {len(rows)}")
    w(f"`define {p}_LAT_BITS {t['lat_bits']}  // max latency {t['max_lat']}")
    w(f"`define {p}_WIN_BITS {winb}")
    w(f"`define {p}_CTR_BITS {ctrb}")
    for i, r in enumerate(rows):
        w(f"//   row {i:3d}: {r['level_name']:<9} {r['prev_name']:>5} -> {r['next_name']:<5} {r['expr']} = "
          f"{r['lat']}" + (f", window {r['win']}" if r["win"] > 1 else ""))
    w(f"`define {p}_ROW_PREV {_vec([r['prev'] for r in rows], cb)}")
    w(f"`define {p}_ROW_NEXT {_vec([r['next'] for r in rows], cb)}")
    w(f"`define {p}_ROW_LEVEL {_vec([r['level'] for r in rows], lb)}")
    w(f"`define {p}_ROW_WIN {_vec([r['win'] for r in rows], winb)}")
    w(f"`define {p}_ROW_LAT {lat_vector(t)}")
    w(f"`define {p}_ROW_CTR {_vec([r['ctr'] for r in rows], ctrb)}")
    w(f"`define {p}_ROW_STRIDE {_vec([r['stride'] for r in rows], winb)}")
    w("")
    w("// History counters (elapsed cycles since the k-th most recent issue of CMD at NODE of LEVEL)")
    w(f"`define {p}_NUM_CTRS {len(ctrs)}")
    w(f"// CTR_CMDS[i]: mask of the commands ({ncmd} bits) whose issue the counter records")
    w(f"`define {p}_CTR_CMDS {_vec([c['cmds'] for c in ctrs], ncmd)}")
    w(f"`define {p}_CTR_LEVEL {_vec([c['level'] for c in ctrs], lb)}")
    w(f"`define {p}_CTR_NODE {_vec([c['node'] for c in ctrs], nodeb)}")
    w(f"`define {p}_CTR_K {_vec([c['k'] for c in ctrs], winb)}")
    w("")
    w(f"`endif  // {guard}")
    return "\n".join(out) + "\n"


# ---- rtl/dual_rowbuf_arbiter.v -------------------------------------------------------------------------
#: The devices of the arbiter's headers: NeuPIMs with dual row buffers (the default include) and the
#: single-buffer baseline (its header in a subdirectory, put first on the include path for blocked mode).
ARBITER_PRESETS = {"NeuPIMs_HBM2_Dual": "", "NeuPIMs_HBM2_Single": "neupims_single"}
ARBITER_HEADER = "dual_rowbuf_arbiter_timing.vh"
#: Bits of an effect code in the header's CMD_EFFECT table (the codes are archsim.dram.effects.CODE).
EFFECT_BITS = 4
_CLOSING_COLUMN = ("a column command that closes its buffer, in the PIM stream (the block assumes column "
                   "commands leave bank state unchanged within a cycle)")
_NO_NMC = "a near-memory update (the block has no read-add-write path and takes no rmw requests)"
#: What rtl/dual_rowbuf_arbiter.v does with a command of each effect of archsim.dram.effects (every effect has
#: an entry; tests/test_effects.py fails for one without): None where the block models it, else what it cannot
#: model. The header still encodes every command (its code is in CMD_EFFECT); `arbiter_refusal` turns an
#: entry into the one-line error with which the bench refuses such a command in the PIM stream.
ARBITER_EFFECTS: dict[Effect, str | None] = {
    Effect.OPEN: None, Effect.CLOSE: None, Effect.READ: None, Effect.WRITE: None, Effect.COMPUTE: None,
    Effect.REFRESH: None, Effect.TRANSFER: None,
    Effect.READ_CLOSE: _CLOSING_COLUMN, Effect.WRITE_CLOSE: _CLOSING_COLUMN,
    Effect.UPDATE: _NO_NMC, Effect.UPDATE_CLOSE: _NO_NMC,
}


def arbiter_refusal(spec, cmd: int) -> str | None:
    """None if rtl/dual_rowbuf_arbiter.v models command `cmd` of `spec` in its PIM stream, else a one-line
    reason naming the command and its effect."""
    c = spec.commands[cmd]
    why = ARBITER_EFFECTS.get(Effect(c.effect), f"the effect is not in ARBITER_EFFECTS of {__name__}")
    return None if why is None else f"{c.name} (effect `{c.effect}`: {why})"


def _check_arbiter_device(spec) -> None:
    if spec.command_bus != "dual":
        raise ConfigError("(verilog)", f"{spec.name} has a {spec.command_bus} command bus; dual_rowbuf_arbiter "
                                       "implements the dual (row + column) command bus only (issue #10)",
                          source=spec.name)
    nbuf = len(spec.row_buffers)
    if nbuf > 2:
        raise ConfigError("(verilog)", f"{spec.name}: {nbuf} row buffers; the arbiter has at most 2 (issue #10)",
                          source=spec.name)


def _effect_codes(spec) -> list[int]:
    """CMD_EFFECT: the effect code of every command (archsim.dram.effects), which must fit EFFECT_BITS."""
    codes = []
    for c in spec.commands:
        code = CODE[Effect(c.effect)]
        if code >= 1 << EFFECT_BITS:
            raise ConfigError("(verilog)", f"{c.name}: effect `{c.effect}` has code {code}, wider than the "
                                           f"header's {EFFECT_BITS}-bit CMD_EFFECT", source=spec.name)
        codes.append(code)
    return codes


def _local_nodes(spec, nl: int, nb: int) -> list[list[int]]:
    """local[level][bank]: the bank's node of the level, numbered 0.. in order of first bank."""
    node_of = spec.node_of[:nb]
    local = []
    for li in range(nl):
        ids: dict[int, int] = {}
        for b in range(nb):
            ids.setdefault(int(node_of[b, li]), len(ids))
        local.append([ids[int(node_of[b, li])] for b in range(nb)])
    return local


def _sibling_nodes(local: list[list[int]], nl: int, nb: int, max_nodes: int) -> list[int]:
    """SIB_NODES[level * max_nodes + node]: mask of the other nodes of the level under the same parent."""
    sib = []
    for li in range(nl):
        parent = {}
        for b in range(nb):
            parent[local[li][b]] = local[li - 1][b] if li > 0 else 0
        for n in range(max_nodes):
            sib.append(sum(1 << m for m in parent if n in parent and m != n and parent[m] == parent[n]))
    return sib


def _counter_saturation(t: dict) -> list[int]:
    """Saturation value per counter: the largest latency any row compares it with, over the counter and the
    younger ones of its node that shift into it (k' <= k): an idle counter then stops at that value instead
    of the all-ones value (a simulator only wakes the rows of counters that still tick)."""
    sat = [0] * len(t["ctrs"])
    for r in t["rows"]:
        base = r["ctr"] - (r["win"] - 1)
        for n in range(t["n_nodes"][r["level"]]):
            for k in range(r["win"]):
                i = base + n * r["stride"] + k
                sat[i] = max(sat[i], r["lat"])
    return sat


def _cover_tables(t: dict, local: list[list[int]]) -> tuple[list[int], list[int]]:
    """Nodes a target covers, per (scope level, bank): COV_TAB (nodes of every level sharing a bank with the
    target) and SIB_TAB (nodes with a covered sibling: another node of the level under the same parent)."""
    nl, nb, maxn = len(t["levels"]), t["banks"], t["max_nodes"]
    cov_tab, sib_tab = [], []
    for sl in range(nl):
        for b in range(nb):
            banks = [x for x in range(nb) if t["scope_mask"][sl][b] >> x & 1]
            cov = sib_v = 0
            for li in range(nl):
                hit = {local[li][x] for x in banks}
                for n in hit:
                    cov |= 1 << (li * maxn + n)
                for n in range(t["n_nodes"][li]):
                    if any(t["sib_nodes"][li * maxn + n] >> m & 1 for m in hit):
                        sib_v |= 1 << (li * maxn + n)
            cov_tab.append(cov)
            sib_tab.append(sib_v)
    return cov_tab, sib_tab


def _arbiter_refresh(spec, role, close_wide, nl: int, nbuf: int) -> dict | None:
    """All-bank refresh (docs/channel-engine.md 3.1): nodes of REFab's scope, their banks, and per buffer the
    close the refresh uses (the widest close of the buffer covering the node, lowest command index)."""
    ref = int(role[R_REFAB])
    if ref < 0:
        return None
    nodes_ = refresh_nodes(spec, role)
    lv = int(nodes_.level)
    nodes = [sum(1 << int(b) for b in nodes_.banks[nodes_.off[n]:nodes_.off[n + 1]]) for n in range(nodes_.count)]
    closes = []
    for k in range(nbuf):
        wide = [int(close_wide[k, x]) for x in range(nl) if x <= lv and int(close_wide[k, x]) >= 0]
        closes.append(wide[0] if wide else -1)
    return {"cmd": ref, "level": lv, "nodes": nodes, "close": closes, "nREFI": int(spec.timing["nREFI"])}


def arbiter_tables(spec, latency_override: dict[str, int] | None = None) -> dict:
    """timing_tables plus what the arbiter needs beyond timing: buses, effects and buffers of the commands,
    the controller's roles (ACT/PRE/RD/WR of the memory buffer), the close command of each buffer per scope
    (archsim.dram.roles, which the engine's lowering reads too: one source of truth), sibling nodes, and the
    row address width."""
    _check_arbiter_device(spec)
    nbuf = len(spec.row_buffers)
    t = timing_tables(spec, latency_override, arbiter=True)
    role = controller_roles(spec)
    close_bank, close_wide = close_commands(spec)
    nl, nb = len(t["levels"]), t["banks"]
    local = _local_nodes(spec, nl, nb)
    t.update({
        "bus": [1 if c.bus == "column" else 0 for c in spec.commands],
        "effect": _effect_codes(spec),
        "buffer": [int(c.buffer) for c in spec.commands],
        "nbuf": nbuf, "sib_nodes": _sibling_nodes(local, nl, nb, t["max_nodes"]),
        "row_bits": _bits(int(spec.rows) - 1),
        "roles": {"ACT": int(role[R_ACT]), "PRE": int(role[R_PRE]), "RD": int(role[R_RD]),
                  "WR": int(role[R_WR])},
        "close_bank": [int(close_bank[k]) for k in range(nbuf)],
        "close_wide": [[int(close_wide[k, lv]) for lv in range(nl)] for k in range(nbuf)],
    })
    t["ctr_sat"] = _counter_saturation(t)
    t["cov_tab"], t["sib_tab"] = _cover_tables(t, local)
    # Rows grouped by (following command, level, sibling): a command's check at a node is the AND of its
    # group's comparisons there
    groups: dict[tuple[int, int, int], list[int]] = {}
    for i, r in enumerate(t["rows"]):
        groups.setdefault((r["next"], r["level"], int(r["sib"])), []).append(i)
    t["groups"] = groups
    t["group_max"] = max(len(v) for v in groups.values())
    t["refresh"] = _arbiter_refresh(spec, role, close_wide, nl, nbuf)
    return t


def ctr_sat_vector(tables: dict) -> str:
    """The CTR_SAT vector literal of arbiter tables (a test overriding ROW_LAT passes this one too)."""
    return _vec(tables["ctr_sat"], tables["lat_bits"])


def arbiter_header(spec) -> str:
    """Render the arbiter's header (macro prefix ARB_, so that one RTL source takes either device)."""
    t = arbiter_tables(spec)
    p = "ARB"
    nb, nl = t["banks"], len(t["levels"])
    ncmd = len(t["commands"])
    rows, ctrs = t["rows"], t["ctrs"]
    cb, lb = _bits(ncmd - 1), _bits(nl - 1)
    nodeb = _bits(t["max_nodes"] - 1)
    winb = _bits(max(r["win"] for r in rows))
    ctrb = _bits(len(ctrs) - 1)
    none = (1 << cb) - 1
    if ncmd > none:
        raise ConfigError("(verilog)", f"{ncmd} commands leave no spare command index for 'none'")
    guard = f"{p}_TIMING_VH"
    out: list[str] = []
    w = out.append
    w(f"// {ARBITER_HEADER}: generated by archsim from the {spec.name} preset (standard {spec.standard}, one")
    w("// channel) for rtl/dual_rowbuf_arbiter.v - do not edit. Regenerate with: python -m archsim.dram.verilog")
    w("// Every table is a packed vector: entry i at [i*W +: W] for the field width W below.")
    w(f"`ifndef {guard}")
    w(f"`define {guard}")
    w("")
    _write_arbiter_commands(w, p, t, spec, cb, lb, none, nl)
    out += _address_tree(p, t, extra=[f"`define {p}_ROW_BITS {t['row_bits']}"])
    w("// SIB_NODES[level * MAX_NODES + node]: the other nodes of the level under the same parent")
    w(f"`define {p}_SIB_NODES {_vec(t['sib_nodes'], t['max_nodes'])}")
    w("")
    _write_arbiter_rows(w, p, t, cb, lb, nodeb, winb, ctrb, ncmd, nl)
    _write_arbiter_refresh(w, p, t, spec, cb, none, nb)
    w(f"`endif  // {guard}")
    return "\n".join(out) + "\n"


def _write_arbiter_commands(w, p: str, t: dict, spec, cb: int, lb: int, none: int, nl: int) -> None:
    """The arbiter header's commands: index, scope, bus, effect, buffer, roles, closes."""
    ncmd = len(t["commands"])
    w(f"`define {p}_DEVICE \"{spec.name}\"")
    w("// Commands: index, scope level, bus (1 column, 0 row), effect, row buffer")
    w(f"`define {p}_NUM_CMDS {ncmd}")
    w(f"`define {p}_CMD_BITS {cb}")
    w(f"`define {p}_CMD_NONE {cb}'d{none}")
    for i, (name, scope) in enumerate(t["commands"]):
        w(f"`define {p}_CMD_{name.upper()} {cb}'d{i}  // scope {t['levels'][scope]}, "
          f"{'column' if t['bus'][i] else 'row'} bus, {EFFECTS[t['effect'][i]]}, buffer "
          f"{spec.row_buffers[t['buffer'][i]]}")
    w(f"`define {p}_CMD_SCOPE {_vec([s for _, s in t['commands']], lb)}")
    w(f"`define {p}_CMD_COLBUS {_vec(t['bus'], 1)}")
    w("// effect codes (archsim/dram/effects.py)")
    w(f"`define {p}_EFFECT_BITS {EFFECT_BITS}")
    for e in Effect:
        w(f"`define {p}_EFFECT_{e.name} {EFFECT_BITS}'d{CODE[e]}")
    w(f"`define {p}_CMD_EFFECT {_vec(t['effect'], EFFECT_BITS)}")
    w(f"`define {p}_CMD_BUFFER {_vec(t['buffer'], 1)}")
    w(f"`define {p}_NUM_BUFS {t['nbuf']}  // row buffers: {', '.join(spec.row_buffers)}")
    w("// the memory controller's commands (bank scope, buffer 0)")
    for role, c in t["roles"].items():
        w(f"`define {p}_ROLE_{role} {cb}'d{c}")
    w("// close commands per buffer: bank scope, and per scope level (CMD_NONE: none)")
    w(f"`define {p}_CLOSE_BANK {_vec([none if c < 0 else c for c in t['close_bank']] + [none] * (2 - t['nbuf']), cb)}")
    wide = [none if c < 0 else c for k in range(2) for c in (t["close_wide"][k] if k < t["nbuf"] else [-1] * nl)]
    w(f"`define {p}_CLOSE_WIDE {_vec(wide, cb)}")
    w("")


def _write_arbiter_rows(w, p: str, t: dict, cb: int, lb: int, nodeb: int, winb: int, ctrb: int, ncmd: int, nl: int) -> None:
    """The arbiter header's constraint rows, history counters and row groups."""
    rows, ctrs = t["rows"], t["ctrs"]
    w("// Constraint rows (docs/channel-engine.md, 1 and 4); SIB: the preceding command went to a sibling node")
    w(f"`define {p}_NUM_ROWS {len(rows)}")
    w(f"`define {p}_LAT_BITS {t['lat_bits']}  // max latency {t['max_lat']}")
    w(f"`define {p}_WIN_BITS {winb}")
    w(f"`define {p}_CTR_BITS {ctrb}")
    for i, r in enumerate(rows):
        w(f"//   row {i:3d}: {r['level_name']:<9} {r['prev_name']:>7} -> {r['next_name']:<7} {r['expr']} = "
          f"{r['lat']}" + (f", window {r['win']}" if r["win"] > 1 else "") + (", sibling" if r["sib"] else ""))
    w(f"`define {p}_ROW_NEXT {_vec([r['next'] for r in rows], cb)}")
    w(f"`define {p}_ROW_LEVEL {_vec([r['level'] for r in rows], lb)}")
    w(f"`define {p}_ROW_SIB {_vec([int(r['sib']) for r in rows], 1)}")
    w(f"`define {p}_ROW_LAT {lat_vector(t)}")
    w(f"`define {p}_ROW_CTR {_vec([r['ctr'] for r in rows], ctrb)}")
    w(f"`define {p}_ROW_STRIDE {_vec([r['stride'] for r in rows], winb)}")
    w("")
    w("// History counters (elapsed cycles since the k-th most recent issue of CMD at NODE of LEVEL)")
    w(f"`define {p}_NUM_CTRS {len(ctrs)}")
    w(f"`define {p}_CTR_CMDS {_vec([c['cmds'] for c in ctrs], ncmd)}")
    w(f"`define {p}_CTR_LEVEL {_vec([c['level'] for c in ctrs], lb)}")
    w(f"`define {p}_CTR_NODE {_vec([c['node'] for c in ctrs], nodeb)}")
    w(f"`define {p}_CTR_K {_vec([c['k'] for c in ctrs], winb)}")
    w("// COV_TAB / SIB_TAB[level * NUM_BANKS + bank]: the nodes (bit level * MAX_NODES + node) a command of")
    w("// that scope level holding the bank covers / has a covered sibling of")
    w(f"`define {p}_COV_TAB {_vec(t['cov_tab'], nl * t['max_nodes'])}")
    w(f"`define {p}_SIB_TAB {_vec(t['sib_tab'], nl * t['max_nodes'])}")
    rowb = _bits(len(rows) - 1)
    gmax = t["group_max"]
    w("// Row groups per (command, level, sibling), entry (cmd * NUM_LEVELS + level) * 2 + sibling: the number")
    w(f"// of rows (GRP_CNT) and their indices (GRP_ROWS, {gmax} entries of ROW_IDX_BITS each)")
    w(f"`define {p}_GRP_MAX {gmax}")
    w(f"`define {p}_ROW_IDX_BITS {rowb}")
    keys = [(c, lv, sb) for c in range(ncmd) for lv in range(nl) for sb in range(2)]
    w(f"`define {p}_GRP_CNT {_vec([len(t['groups'].get(k, [])) for k in keys], _bits(gmax))}")
    w(f"`define {p}_GRP_ROWS {_vec([x for k in keys for x in (t['groups'].get(k, []) + [0] * gmax)[:gmax]], rowb)}")


def _write_arbiter_refresh(w, p: str, t: dict, spec, cb: int, none: int, nb: int) -> None:
    """The arbiter header's all-bank refresh and counter saturation values."""
    rf = t["refresh"]
    if rf is None or not 1 <= len(rf["nodes"]) <= 2:
        raise ConfigError("(verilog)", f"{spec.name}: the arbiter's refresh step handles an all-bank refresh "
                                       "command over 1 or 2 nodes (issue #10)", source=spec.name)
    w("// All-bank refresh: command, nodes (REFab's scope) and their banks, the close per buffer (NONE: the")
    w("// bank-scope close of the lowest open bank), the refresh interval")
    w(f"`define {p}_REF_CMD {cb}'d{rf['cmd']}")
    w(f"`define {p}_REF_NODES {len(rf['nodes'])}")
    w(f"`define {p}_REF_NODE_BANKS {_vec(rf['nodes'], nb)}")
    w(f"`define {p}_REF_CLOSE {_vec([none if c < 0 else c for c in rf['close']] + [none] * (2 - t['nbuf']), cb)}")
    w(f"`define {p}_NREFI {rf['nREFI']}")
    w("// CTR_SAT[i]: the counter's saturation value (the largest latency compared with it or an older one)")
    w(f"`define {p}_CTR_SAT {ctr_sat_vector(t)}")
    w("")

def arbiter_spec(preset: str):
    from archsim.dram.spec import load_spec

    return load_spec(preset, overrides={"org.channels": 1})


def arbiter_header_path(preset: str, include_dir: str | Path) -> Path:
    return Path(include_dir) / ARBITER_PRESETS[preset] / ARBITER_HEADER


def default_spec():
    from archsim.dram.spec import load_spec

    return load_spec(TIMING_PRESET, overrides={"org.channels": 1})


def write_header(spec, out_dir: str | Path) -> Path:
    """Write the header into `out_dir` (created if needed), atomically; returns its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / header_filename(spec)
    atomic_write_text(path, timing_header(spec))
    return path


def main(argv: list[str] | None = None) -> int:
    """`python -m archsim.dram.verilog [--check] [-o DIR]`: write (or check) the shipped timing headers (the
    sequencer's, and the arbiter's for both NeuPIMs devices)."""
    import argparse
    import sys

    from archsim import paths

    ap = argparse.ArgumentParser(prog="python -m archsim.dram.verilog", description=main.__doc__)
    ap.add_argument("-o", "--out-dir", default=str(paths.REPO_ROOT / "rtl" / "include"))
    ap.add_argument("--check", action="store_true", help="exit 1 if the header is missing or stale")
    args = ap.parse_args(argv)
    outs = [(Path(args.out_dir) / header_filename(default_spec()), timing_header(default_spec()))]
    for preset in ARBITER_PRESETS:
        outs.append((arbiter_header_path(preset, args.out_dir), arbiter_header(arbiter_spec(preset))))
    if args.check:
        bad = 0
        for path, text in outs:
            if not path.is_file() or path.read_text(encoding="ascii") != text:
                print(f"{path}: {'stale' if path.is_file() else 'missing'}", file=sys.stderr)
                bad += 1
            else:
                print(f"{path}: current")
        return 1 if bad else 0
    for path, text in outs:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
        print(path)
    return 0


if __name__ == "__main__":  # pragma: no cover - command-line entry point
    raise SystemExit(main())
