"""Command effects are declared once (archsim/dram/effects.py) and every reader handles every effect (issue 25,
item 4): the spec loader, the lowering, the channel kernel, the reference scheduler, the command-log checker
and the Verilog generator. Adding an effect to the declaration that one of them does not handle fails
`test_every_reader_handles_every_effect`, naming the reader."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

from archsim.dram import effects
from archsim.dram import verilog as V
from archsim.dram.effects import CODE, EFFECTS, RULES, Effect
from archsim.dram.spec import load_spec, preset_names

REPO = Path(__file__).resolve().parent.parent
# The modules that interpret effects by code or by name
KERNEL = REPO / "archsim/engine/channel.py"
READERS_BY_NAME = {"reference scheduler": REPO / "archsim/engine/reference.py",
                   "checker": REPO / "archsim/dram/checker.py"}
# Effects a reader may leave alone, with the reason (a new effect gets no entry by default, so it fails)
NOTHING_TO_DO = {Effect.TRANSFER: "touches no bank row: only its timing rows apply, which every reader reads"}


def _names(path: Path) -> set[str]:
    """Every name and attribute (`Effect.OPEN` -> `Effect.OPEN`) the module's code mentions."""
    out = set()
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            out.add(f"{n.value.id}.{n.attr}")
    return out


def unhandled(declared: list[Effect | str]) -> dict[str, list[str]]:
    """Per reader, the declared effects it does not handle (empty lists: all handled)."""
    names = [str(e) for e in declared]
    out: dict[str, list[str]] = {}
    # the kernel branches on the integer codes: it must use E_<NAME> of each effect it acts on
    used = _names(KERNEL)
    out["channel kernel (archsim/engine/channel.py)"] = [
        e for e in names if f"E_{e.upper()}" not in used and e not in NOTHING_TO_DO]
    # the reference scheduler and the checker: by the member (Effect.X) or through a declared category
    categories = {"NEEDS_OPEN": effects.NEEDS_OPEN, "CLOSES": effects.CLOSES, "OPENS": effects.OPENS}
    for reader, path in READERS_BY_NAME.items():
        used = _names(path)
        covered = {e for cat, members in categories.items() if cat in used for e in members}
        out[f"{reader} ({path.relative_to(REPO)})"] = [
            e for e in names if f"Effect.{e.upper()}" not in used and e not in covered and e not in NOTHING_TO_DO]
    # the declaration's own tables, the spec loader, the lowering and the Verilog generator key by effect
    out["RULES (archsim/dram/effects.py)"] = [e for e in names if e not in {str(k) for k in RULES}]
    out["integer codes (archsim/dram/effects.py)"] = [e for e in names if not hasattr(effects, f"E_{e.upper()}")]
    out["spec loader (archsim/dram/spec.py EFFECTS)"] = [e for e in names if e not in EFFECTS]
    out["Verilog generator (archsim/dram/verilog.py ARBITER_EFFECTS)"] = [
        e for e in names if e not in {str(k) for k in V.ARBITER_EFFECTS}]
    return {k: v for k, v in out.items() if v}


def test_every_reader_handles_every_effect() -> None:
    missing = unhandled(list(Effect))
    assert not missing, f"effects declared in archsim/dram/effects.py that a reader does not handle: {missing}"


def test_a_new_effect_that_no_reader_handles_is_caught() -> None:
    """The check above can fail: an effect added to the declaration alone is missing in every reader."""
    missing = unhandled([*Effect, "swap"])
    assert len(missing) == 7 and all(v == ["swap"] for v in missing.values()), missing


def test_codes_are_the_declaration_order_and_the_kernel_constants() -> None:
    assert [CODE[e] for e in Effect] == list(range(len(Effect)))
    for e in Effect:
        assert getattr(effects, f"E_{e.name}") == CODE[e], e
    assert EFFECTS == tuple(e.value for e in Effect)
    from archsim.dram import spec as spec_module
    from archsim.engine import channel, tables

    assert spec_module.EFFECTS is EFFECTS and tables.EFFECT_CODES is CODE
    assert channel.E_UPDATE_CLOSE == effects.E_UPDATE_CLOSE and channel.E_OPEN == effects.E_OPEN


def test_no_reader_keeps_its_own_list_of_effect_names() -> None:
    """No comparison of an effect with a name written as a string (`c.effect == "update"`, `eff in ("close",
    ...)`) outside the declaration: readers use Effect members or its categories, so no second list creeps in."""
    names = set(EFFECTS)
    found = []
    for path in sorted((REPO / "archsim").rglob("*.py")):
        if path.name == "effects.py":
            continue
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(n, ast.Compare):
                continue
            operands = [n.left, *n.comparators]
            if not any("eff" in ast.unparse(o) for o in operands if not isinstance(o, ast.Constant | ast.Tuple)):
                continue
            for o in operands:
                for c in (o.elts if isinstance(o, ast.Tuple | ast.List | ast.Set) else [o]):
                    if isinstance(c, ast.Constant) and c.value in names:
                        found.append(f"{path.relative_to(REPO)}:{c.lineno} {c.value!r}")
    assert not found, f"effect names written outside archsim/dram/effects.py: {found}"


def test_docs_list_every_effect() -> None:
    text = (REPO / "docs/channel-engine.md").read_text(encoding="utf-8")
    table = "\n".join(line for line in text.splitlines() if line.startswith("  | `"))
    listed = set(re.findall(r"`([a-z_]+)`", table))
    assert listed >= set(EFFECTS), f"docs/channel-engine.md section 1 lacks {sorted(set(EFFECTS) - listed)}"


@pytest.mark.parametrize("preset", preset_names())
def test_lowered_codes_follow_the_declaration(preset) -> None:
    from archsim.engine.tables import lower

    spec = load_spec(preset)
    got = lower(spec).tables.cmd_effect
    assert np.array_equal(got, [CODE[Effect(c.effect)] for c in spec.commands]), (preset, got)


def test_arbiter_tables_encode_the_nmc_update_commands() -> None:
    """HBM2_2Gbps_NMC has NMC_ADD (update) and NMC_ADDA (update_close): the arbiter's header encodes them
    with the declared codes; the RTL block cannot model them and says so in one line, naming the effect."""
    spec = load_spec("HBM2_2Gbps_NMC")
    t = V.arbiter_tables(spec)
    add, adda = spec.cmd("NMC_ADD"), spec.cmd("NMC_ADDA")
    assert t["effect"][add] == effects.E_UPDATE and t["effect"][adda] == effects.E_UPDATE_CLOSE, t["effect"]
    header = V.arbiter_header(spec)
    assert f"`define ARB_EFFECT_UPDATE {V.EFFECT_BITS}'d{effects.E_UPDATE}" in header
    assert "ARB_CMD_NMC_ADD " in header and "update, buffer mem" in header
    why = V.arbiter_refusal(spec, add)
    assert why is not None and "NMC_ADD" in why and "`update`" in why and "\n" not in why, why
    assert V.arbiter_refusal(spec, spec.cmd("ACT")) is None


def test_the_rtl_arbiter_reads_the_effect_codes_from_the_header() -> None:
    """rtl/dual_rowbuf_arbiter.v takes its effect codes from the generated header, never as literals."""
    rtl = (REPO / "rtl/dual_rowbuf_arbiter.v").read_text(encoding="utf-8")
    decl = re.search(r"localparam \[EB-1:0\] E_OPEN.*?;", rtl, re.S)
    assert decl, "no effect-code localparams in rtl/dual_rowbuf_arbiter.v"
    assert "'d" not in decl.group(0), decl.group(0)
    for name in re.findall(r"E_([A-Z_]+) = ", decl.group(0)):
        assert f"`ARB_EFFECT_{name}" in decl.group(0), name
