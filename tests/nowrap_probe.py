"""A module compiled without negative-index wrap-around (archsim.engine.nowrap), for tests/test_engine_indices.py."""
import numba

from archsim.engine import nowrap

nowrap.register(__name__)


@numba.njit(boundscheck=True)
def get(a, i):
    return a[i]
