"""Configs resolved once into typed, frozen objects (issue 25 item 3) for pimgpt and dram-trace: the `Setup`
is frozen, built once per run (each preset / model / policy file loaded once), and a variant's sub-config
carries only that variant's knobs."""
from __future__ import annotations

import dataclasses

import pytest

from archsim import schema
from archsim.errors import ConfigError
from archsim.systems.dram_trace import system as trace_sys
from archsim.systems.pimgpt import config as pimgpt_config
from archsim.systems.pimgpt import system as pimgpt

SMALL = {"system": "pimgpt", "model": "gpt2-small", "tokens": 2}


def _field_names(obj: object) -> set[str]:
    return {f.name for f in dataclasses.fields(obj)}


def test_pimgpt_setup_is_frozen_and_typed():
    su = pimgpt.setup({**SMALL, "baselines": ["t4"], "channels": 8, "asic_clock_hz": 5e8})
    with pytest.raises(dataclasses.FrozenInstanceError):
        su.tokens = 3   # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        su.schedule.memo = False   # type: ignore[misc]
    assert su.spec.channels == 8, f"channels {su.spec.channels}"
    assert su.asic.config.clock_hz == 5e8, su.asic.config.clock_hz
    assert [b.name for b in su.baselines] == ["t4"], su.baselines
    assert su.resolved == pimgpt_config.resolve({**SMALL, "baselines": ["t4"], "channels": 8, "asic_clock_hz": 5e8})


def test_pimgpt_schedule_sub_config_carries_only_its_knobs():
    serial = pimgpt.setup({**SMALL, "omit_ops": ["kv_append"], "memo": False}).schedule
    assert isinstance(serial, pimgpt.SerialSchedule)
    assert _field_names(serial) == {"memo", "omit_ops"}, _field_names(serial)
    assert serial == pimgpt.SerialSchedule(memo=False, omit_ops=("kv_append",)), serial
    # omit_ops is optional (absent from the resolved config): the schema's documented default, as a tuple
    assert pimgpt.setup(SMALL).schedule == pimgpt.SerialSchedule(memo=True, omit_ops=())
    overlap = pimgpt.setup({**SMALL, "schedule": "overlap"}).schedule
    assert isinstance(overlap, pimgpt.OverlapSchedule) and _field_names(overlap) == set(), overlap
    assert set(pimgpt.SCHEDULES) == set(schema.lookup(pimgpt.PimGptConfig, "schedule").allowed()), pimgpt.SCHEDULES


def _count(monkeypatch, module, name, counts):
    orig = getattr(module, name)

    def counted(*args, **kwargs):
        counts[name] = counts.get(name, 0) + 1
        return orig(*args, **kwargs)
    monkeypatch.setattr(module, name, counted)


def test_pimgpt_run_resolves_once_and_loads_each_file_once(monkeypatch):
    """A run with a timeline (a second simulator) and a baseline: one Setup, each file loaded once."""
    import archsim.host.asic as asic
    import archsim.host.baselines as baselines
    import archsim.systems.pimgpt.compiler as compiler
    import archsim.workload as workload

    counts: dict[str, int] = {}
    # the config module imports the policy loader when it resolves (it stays light for --help and errors)
    for module, name in ((pimgpt, "setup"), (pimgpt, "load_spec"), (compiler, "load_policy"),
                         (workload, "load_model")):
        _count(monkeypatch, module, name, counts)
    # the ASIC preset holds its energy table too: one file, read once (EnergyTable.of derives from it)
    for cls, key in ((baselines.Baseline, "Baseline.load"), (asic.AsicConfig, "AsicConfig.load")):
        orig = cls.load.__func__

        def load(klass, *args, _orig=orig, _key=key, **kwargs):
            counts[_key] = counts.get(_key, 0) + 1
            return _orig(klass, *args, **kwargs)
        monkeypatch.setattr(cls, "load", classmethod(load))
    res = pimgpt.run_config({**SMALL, "baselines": ["t4"], "timeline": True, "channels": 8})
    assert "timeline" in res.tables
    assert counts == {"setup": 1, "load_spec": 1, "load_policy": 1, "load_model": 1, "Baseline.load": 1,
                      "AsicConfig.load": 1}, counts


def test_trace_setup_is_frozen_and_the_source_is_its_variant(tmp_path):
    su = trace_sys.setup({"system": "dram-trace", "trace": {"kind": "random", "requests": 10}, "channels": 2,
                          "mapping": "RoBaRaCoCh"}, seed=7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        su.engine = "x"   # type: ignore[misc]
    assert su.spec.channels == 2 and su.controller.mapping == "RoBaRaCoCh", (su.spec.channels, su.controller)
    src = su.source
    assert isinstance(src, trace_sys.SyntheticSource), src
    span = min(2 << 30, su.spec.capacity_bytes)
    assert (src.kind, src.requests, src.read_fraction, src.span_bytes, src.seed, src.start) == \
        ("random", 10, 0.8, span, 7, 0), src
    # what the manifest records: the mapping as run (the run's seed and the span filled in)
    assert src.desc == {"span_bytes": span, "seed": 7, "kind": "random", "requests": 10}, src.desc
    short = trace_sys.setup({"system": "dram-trace", "trace": "synthetic:stream:5"}, seed=3).source
    assert (short.kind, short.requests, short.seed, short.desc) == ("stream", 5, 3, "synthetic:stream:5"), short
    path = tmp_path / "t.trace"
    f = trace_sys.setup({"system": "dram-trace", "trace": str(path)}).source
    assert f == trace_sys.TraceFile(path=str(path)) and _field_names(f) == {"path"}, f
    assert set(trace_sys.TRACE_SOURCES) == {"file", "synthetic", "loaded"}


def test_trace_run_loads_the_preset_once_with_channels_and_overrides(monkeypatch):
    counts: dict[str, int] = {}
    _count(monkeypatch, trace_sys, "load_spec", counts)
    _count(monkeypatch, trace_sys, "setup", counts)
    res = trace_sys.run_config({"system": "dram-trace", "trace": {"kind": "stream", "requests": 200}, "channels": 2,
                                "dram": {"timing": {"nRCD": 20}}})
    assert counts == {"setup": 1, "load_spec": 1}, counts
    assert res.stats["channels"] == 2 and res.manifest["config"]["dram"]["timing"]["nRCD"] == 20, res.stats


def test_trace_synthetic_keys_are_checked_for_api_callers_too():
    with pytest.raises(ConfigError, match=r"trace\.kinds: unknown key"):
        trace_sys.run_trace({"kinds": "random", "requests": 10})
    with pytest.raises(ConfigError, match=r"trace\.requests: missing"):
        trace_sys.run_trace({"kind": "random"})


def test_variant_helper():
    with pytest.raises(ConfigError, match=r"schedule: must be one of serial, overlap, got 'both'"):
        schema.variant(pimgpt.SCHEDULES, "both", {}, "schedule", pimgpt.PimGptConfig)
    got = schema.variant(pimgpt.SCHEDULES, "serial", {"memo": True, "omit_ops": ["softmax"]}, "schedule",
                         pimgpt.PimGptConfig)
    assert got == pimgpt.SerialSchedule(memo=True, omit_ops=("softmax",)), got
