"""`threshold_yield` arbitration (docs/channel-engine.md 3.4, clarification 16): while the threshold gate holds
a source back, the first source may precharge the rows that source opened. The fast engine against the
reference scheduler, on a directed case at the gate's edge and on the random cases that draw `threshold`."""
from __future__ import annotations

import numpy as np
import pytest
from engine_cases import describe, random_case, run_case
from test_engine_vs_reference import assert_clean, assert_same

from archsim.engine.memory import MemorySystem
from archsim.engine.reference import ReferenceController


def _req(port: int, row: int, arrive: int) -> dict:
    n = 4
    return {"port": port, "channel": np.zeros(n, np.int64), "bank": np.zeros(n, np.int64),
            "row": np.full(n, row, np.int64), "column": np.arange(n, dtype=np.int64),
            "kind": np.zeros(n, np.int64), "arrive": np.full(n, arrive, np.int64), "tag": np.full(n, -1, np.int64)}


def _shared_bank_case(arbitration: str, threshold: int) -> dict:
    """`comm` opens row 5 of bank 0 for 4 reads; at cycle 5, before its first read can issue, `compute` (the
    first source) queues 4 reads of row 7 of the same bank: 4 queued entries, the gate's edge at threshold 4."""
    return {"seed": -1, "preset": "HBM2_2Gbps_PC", "overrides": {"org.channels": 1},
            "controller": {"read_queue": 8, "write_queue": 8, "row_policy": "closed"},
            "sources": [{"name": "compute", "kind": "rw"}, {"name": "comm", "kind": "rw"}],
            "arbitration": arbitration, "starvation_cap": 200, "threshold": threshold, "stream_refresh": "split",
            "alu_latency": 4, "ports": [{"source": "compute", "width": 4}, {"source": "comm", "width": 4}],
            "requests": [_req(1, 5, 0), _req(0, 7, 5)], "streams": []}


def _run(arbitration: str, threshold: int) -> dict:
    case = _shared_bank_case(arbitration, threshold)
    fast, ref = run_case(MemorySystem, case), run_case(ReferenceController, case)
    assert_same(case, fast, ref)
    assert_clean(case, fast, "fast engine")
    return fast


def test_held_back_source_yields_its_row_only_while_the_gate_holds_it():
    """Gate closed (4 queued >= threshold 4): under `threshold` compute may not precharge comm's row and comm
    is held back, so both wait for the starvation cap, one comm read per promotion; under `threshold_yield`
    compute precharges comm's row as soon as tRAS allows, reads, and comm reopens its row after. Gate open
    (threshold 5): comm is not held back, its row stays its own, and the two arbitrations are equal."""
    keep, yld = _run("threshold", 4), _run("threshold_yield", 4)
    compute, comm = slice(4, 8), slice(0, 4)
    assert keep["done"][compute].min() > 800 and np.diff(keep["done"][comm]).min() >= 200
    assert yld["done"][compute].max() < 100 < yld["done"][comm].min() < 150
    log = yld["log"]
    pre = log[(log["command"] == "PRE") & (log["source"] == "compute")]
    assert len(pre) == 1 and int(pre["row"].iloc[0]) == 5
    assert int(pre["cycle"].iloc[0]) < int(log[log["source"] == "comm"]["cycle"].iloc[1])  # before comm's first read
    open_keep, open_yld = _run("threshold", 5), _run("threshold_yield", 5)
    assert open_keep["log"].equals(open_yld["log"])
    assert open_yld["done"][comm].max() < open_yld["done"][compute].min()
    assert not (open_yld["log"]["command"] == "PRE").any()


def test_threshold_yield_matches_the_reference_on_random_cases():
    """The random cases that draw `threshold` (each rw source on banks of its own there), run as
    `threshold_yield`: the rule adds nothing where no bank is shared, and the engines still agree."""
    ran = 0
    for seed in range(20):
        case = random_case(seed)
        if case["arbitration"] != "threshold":
            continue
        case["arbitration"] = "threshold_yield"
        fast, ref = run_case(MemorySystem, case), run_case(ReferenceController, case)
        assert_same(case, fast, ref)
        assert_clean(case, fast, "fast engine")
        ran += 1
    assert ran >= 3, f"only {ran} threshold cases among 20 seeds ({describe(case)})"


@pytest.mark.parametrize("engine", [MemorySystem, ReferenceController])
def test_threshold_yield_is_a_known_arbitration(engine):
    from archsim.dram.spec import load_spec

    spec = load_spec("HBM2_2Gbps_PC", overrides={"org.channels": 1})
    engine(spec, sources=[{"name": "a", "kind": "rw"}, {"name": "b", "kind": "rw"}], arbitration="threshold_yield",
           threshold=2)
