"""Read one field of a state tuple without loading the whole tuple, in the modules that ask for it (cold start).

The channel kernel reads its state through `S.<field>`, where `S` is a named tuple of ~115 arrays (~1,000
machine words). numba keeps a variable that lives across blocks in a stack slot and lowers `S.x` as a load of
the whole tuple followed by an `extractvalue` of one member; LLVM's SROA pass then splits every such load into
one load per word, ~1,000 per access, and deletes all but one. With ~450 such reads in the kernel that is most of
the first-time compile's function-level optimisation: SROA alone took 10.6 s of a 15.5 s pass over the stream
kernel (`NUMBA_LLVM_PASS_TIMINGS=1`; docs/performance.md, "Cold start").

This module narrows numba's lowering of that one case: in functions compiled from a registered module, reading
an attribute of a named-tuple variable held in a stack slot loads that member through a pointer into the slot
(`getelementptr` + `load`), which is what SROA turns the whole-tuple load into anyway; the optimised machine code
is the same, it is reached with less work. Everything else, and every other module, is lowered by numba as
before. Only for functions compiled without reference counting (the kernel's `_nrt=False`): a member read then
needs no incref, as in numba's own lowering of it.

If numba's `Lower` changes shape (a numba release without the attributes used here), `register` leaves numba
alone and the kernel compiles as it did before, only slower.
"""
from __future__ import annotations

from numba.core import cgutils, lowering, types

from archsim.engine.nowrap import mangled_prefix

_TAGS: set[str] = set()          # mangled module prefixes, e.g. "7archsim6engine7channel"
lowered = 0                      # member reads lowered this way in this process (tests/test_field_access.py)
_numba_lower_expr = lowering.Lower.lower_expr
_USABLE = all(hasattr(lowering.Lower, a) for a in ("lower_expr", "typeof")) and hasattr(cgutils, "gep_inbounds")


def _slot_member(lower, resty, expr):
    """The member `expr.attr` of a named-tuple variable kept in a stack slot, loaded through a pointer into the
    slot; None where numba's own lowering applies."""
    name = expr.value.name
    ty = lower.typeof(name)
    if (not isinstance(ty, types.BaseNamedTuple) or expr.attr not in ty.fields
            or isinstance(resty, types.BoundFunction) or lower.context.enable_nrt):
        return None
    slot = lower.varmap.get(name)
    if slot is None or name in getattr(lower, "_blk_local_varmap", {}):
        return None                              # an SSA value, not a stack slot: nothing to save
    global lowered
    lowered += 1
    index = ty.fields.index(expr.attr)
    member = lower.builder.load(cgutils.gep_inbounds(lower.builder, slot, 0, index))
    return lower.context.cast(lower.builder, member, ty[index], resty)


def _lower_expr(self, resty, expr):
    if expr.op == "getattr" and _TAGS and any(tag in self.fndesc.mangled_name for tag in _TAGS):
        member = _slot_member(self, resty, expr)
        if member is not None:
            return member
    return _numba_lower_expr(self, resty, expr)


def register(module: str) -> None:
    """Lower attribute reads of named-tuple variables in `module`'s functions member by member."""
    if not _USABLE:
        return
    _TAGS.add(mangled_prefix(module))
    lowering.Lower.lower_expr = _lower_expr


def active(module: str) -> bool:
    """Whether `module`'s functions are lowered so."""
    return mangled_prefix(module) in _TAGS and lowering.Lower.lower_expr is _lower_expr
