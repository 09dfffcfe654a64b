"""A module whose named-tuple field reads are lowered member by member (archsim.engine.field_access), for
tests/test_field_access.py. The same source is compiled in that test's own module, where numba lowers it as ever."""
import numba

from archsim.engine import field_access

field_access.register(__name__)

SOURCE = '''
def walk(S, n):
    """Reads fields of S in several blocks (a loop, both arms of a branch) and writes through one."""
    total = 0
    for i in range(n):
        if S.a[i] > S.b[i % S.b.shape[0]]:
            total += S.a[i] * S.c[0]
        else:
            S.b[i % S.b.shape[0]] += 1
            total -= S.b[0]
    return total + S.k
'''
exec(SOURCE)     # defines walk() here, so numba names it after this module


def compiled(nrt: bool):
    """A new dispatcher of walk: as the kernel compiles (nrt False) or with reference counting."""
    return numba.njit(walk) if nrt else numba.njit(_nrt=False)(walk)     # noqa: F821 (walk: from exec above)
