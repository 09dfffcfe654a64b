"""Adding a system is one registered class (issue 36 item 2): a toy system declares its config schema, examples,
model features, stats, summary and a variant on its class, and `archsim run` shows and uses them without touching
registry.py or archsim/commands/."""
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
    class ToyCounter(registry.System):
        """Counts things (a toy: issue 36's test of adding a system)."""

        name = "toy-counter"
        config = ToyConfig
        stats = ("count",)
        examples = "  archsim run --system toy-counter --set size=8"
        features = frozenset({"gqa"})
        factor = 2          # what the variant below changes: behaviour carried by the class

        @classmethod
        def resolve(cls, config):
            return {**schema.defaults(ToyConfig), **config}

        @classmethod
        def run(cls, config, seed=0):
            cfg = {**cls.resolve(config), "system": cls.name}
            return Result(stats={"count": cfg["size"] * cls.factor}, df=[{"thing": i} for i in range(cfg["size"])],
                          manifest=make_manifest(cls.name, cfg, seed=seed))

    class ToyTripler(ToyCounter):
        """Counts things three times over (a variant of the toy)."""

        name = "toy-tripler"
        factor = 3
        examples = None

        @staticmethod
        def summary(result, config):
            print(f"tripled: {result.stats['count']}")

    registry.register(ToyCounter)
    registry.register(ToyTripler)
    yield "toy-counter"
    registry.unregister("toy-counter")
    registry.unregister("toy-tripler")


def test_a_registered_toy_system_runs_and_shows_its_examples_and_features(toy, capsys):
    assert main(["run", "--system", toy, "--help"]) == 0
    out = capsys.readouterr().out
    assert "archsim run --system toy-counter --set size=8" in out and "--size" in out
    assert registry.model_features(toy) == frozenset({"gqa"})
    assert main(["run", "--system", toy, "--set", "size=5", "--json", "-", "--quiet"]) == 0
    assert '"count": 10' in capsys.readouterr().out
    assert main(["run", "--system", toy, "--set", "size=0"]) == 2
    assert "size: must be an integer >= 1, got 0" in capsys.readouterr().err


def test_a_variant_class_carries_its_behaviour_summary_and_generic_examples(toy, capsys):
    assert main(["run", "--system", "toy-tripler", "--set", "size=5"]) == 0
    assert "tripled: 15" in capsys.readouterr().out
    assert main(["run", "--system", "toy-tripler", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Counts things three times over" in out and "archsim run --system toy-tripler --json run.json" in out
    assert registry.stats_names("toy-tripler") == ("count",)


def test_a_system_must_name_itself_and_run():
    class Nameless(registry.System):
        @classmethod
        def run(cls, config, seed=0):
            return None

    with pytest.raises(TypeError, match="names itself"):
        registry.register(Nameless)

    class Idle(registry.System):
        name = "idle"

    with pytest.raises(TypeError, match="no run"):
        registry.register(Idle)
    assert "idle" not in registry.names()
