"""Shared pytest fixtures. Add fixtures here; keep them small and documented."""
from __future__ import annotations

import pytest

# ------------------------------------------------------------------------------------------------
# DRAM: command-log checking and hand-made traces (used by tests/test_dram_*.py)


@pytest.fixture
def assert_log_clean():
    """assert_log_clean(result_or_spec, log_df=None): run the independent checker on a run_trace result's
    command log (run with log=True) and fail listing the first violations."""
    from archsim.dram.checker import check_log

    def check(result, log_df=None):
        if log_df is None:
            spec, log_df = result.extra["spec"], result.extra["command_log"].df
        else:
            spec = result
        violations = check_log(spec, log_df)
        assert not violations, f"{len(violations)} violation(s) in {len(log_df)} commands:\n" + "\n".join(
            str(v) for v in violations[:10])
        return len(log_df)

    return check


@pytest.fixture
def make_trace():
    """make_trace(spec, requests, mapping=...): an archsim.dram.trace.Trace from a list of dicts with keys
    channel, pseudochannel, rank, bankgroup, bank, row, column (default 0), write (default False) and
    arrive (default -1 = as soon as possible)."""
    import numpy as np

    from archsim.dram.mapping import encode
    from archsim.dram.trace import Trace

    def make(spec, requests, mapping=None):
        mapping = mapping or spec.default_mapping     # the mapping a run without one decodes with
        keys = ("channel", "pseudochannel", "rank", "bankgroup", "bank", "row", "column")
        addr = [encode(spec, *(int(r.get(k, 0)) for k in keys), mapping=mapping) for r in requests]
        return Trace(addr=np.array(addr, dtype=np.uint64),
                     is_write=np.array([bool(r.get("write", False)) for r in requests]),
                     arrive=np.array([int(r.get("arrive", -1)) for r in requests], dtype=np.int64),
                     source="test", fmt="synthetic")

    return make


# ------------------------------------------------------------------------------------------------
# Order: the RTL co-simulations last (issue 27 item 7, "the first 13 minutes of `make test` show 2 % of the
# dots"). tests/rtl sorts before tests/test_*.py, and each of its tests builds a Verilog simulation with
# iverilog/cocotb (seconds to tens of seconds each), so `make test` opened with minutes of 51 slow tests
# before the thousands of quick ones. Everything else keeps pytest's file order.


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=lambda item: item.path.parent.name == "rtl")     # a stable sort: rtl last, order kept
