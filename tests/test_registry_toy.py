"""Adding a system is one registration (issue 36 item 2): a toy system declares its config schema, examples and
model features where it registers, and `archsim run` shows and uses them without touching registry.py or
archsim/commands/."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from archsim import registry, schema
from archsim.cli import main
from archsim.results import Result, make_manifest
from archsim.schema import opt


@dataclass
class ToyConfig:
    size: int = opt(4, "how many things the toy counts", minimum=1)


@pytest.fixture
def toy():
    def run(config, seed=0):
        cfg = {"system": "toy-counter", **schema.defaults(ToyConfig), **config}
        return Result(stats={"count": cfg["size"] * 2}, df=[{"thing": i} for i in range(cfg["size"])],
                      manifest=make_manifest("toy-counter", cfg, seed=seed))

    registry.register("toy-counter", resolve=lambda c: {**schema.defaults(ToyConfig), **c}, schema=ToyConfig,
                      stats=("count",), examples="  archsim run --system toy-counter --set size=8",
                      features=("gqa",))(run)
    yield "toy-counter"
    for table in (registry._REGISTRY, registry._RESOLVERS, registry._SCHEMAS, registry._STATS, registry._EXAMPLES,
                  registry._FEATURES):
        table.pop("toy-counter", None)


def test_a_registered_toy_system_runs_and_shows_its_examples_and_features(toy, capsys):
    assert main(["run", "--system", toy, "--help"]) == 0
    out = capsys.readouterr().out
    assert "archsim run --system toy-counter --set size=8" in out and "--size" in out
    assert registry.model_features(toy) == frozenset({"gqa"})
    assert main(["run", "--system", toy, "--set", "size=5", "--json", "-", "--quiet"]) == 0
    assert '"count": 10' in capsys.readouterr().out
    assert main(["run", "--system", toy, "--set", "size=0"]) == 2
    assert "size: must be an integer >= 1, got 0" in capsys.readouterr().err
