"""archsim.engine.field_access: a named-tuple field read lowered member by member gives what numba's own lowering
gives, and engages only where registered and without reference counting."""
from typing import NamedTuple

import numba
import numpy as np

from archsim.engine import field_access


class Probe(NamedTuple):
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    k: int


def _state(seed: int) -> Probe:
    rng = np.random.default_rng(seed)
    return Probe(rng.integers(0, 50, 64), rng.integers(0, 50, 7), rng.integers(1, 5, 3), int(rng.integers(0, 9)))


def test_channel_module_is_registered():
    import archsim.engine.channel  # noqa: F401

    assert field_access.active("archsim.engine.channel")


def test_member_reads_equal_numba_lowering_on_random_states():
    import field_access_probe as probe  # (tests/ is on sys.path, as for engine_cases)

    scope: dict = {"__name__": __name__}
    exec(probe.SOURCE, scope)
    walk_here = numba.njit(_nrt=False)(scope["walk"])      # this module: not registered, numba's own lowering
    walk_nrt = probe.compiled(nrt=True)                      # registered, but reference counted: numba's lowering
    for fn in (walk_here, walk_nrt):
        before = field_access.lowered
        fn(_state(0), 3)
        assert field_access.lowered == before, f"{fn}: lowered member by member where it must not be"
    walk_kernel = probe.compiled(nrt=False)
    before = field_access.lowered
    walk_kernel(_state(0), 3)
    assert field_access.lowered > before, "the registered module's _nrt=False function took numba's own lowering"
    for seed in range(20):
        s1, s2, s3 = _state(seed), _state(seed), _state(seed)
        n = 1 + seed * 3
        want = walk_here(s1, n)
        assert walk_kernel(s2, n) == want, seed
        assert walk_nrt(s3, n) == want, seed
        assert np.array_equal(s1.b, s2.b) and np.array_equal(s1.b, s3.b), seed     # the writes land alike
