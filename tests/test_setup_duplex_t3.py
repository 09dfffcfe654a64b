"""Duplex and T3 configs are resolved once into frozen typed objects (issue 25 item 3): the `Setup` of a run
and its variant sub-configs are frozen, files are loaded once per run, and each variant's sub-config carries
only the knobs that variant reads, under their unchanged flat key paths."""
from __future__ import annotations

import dataclasses

import pytest

from archsim import schema
from archsim.errors import ConfigError
from archsim.systems.duplex import compiler as dx_compiler
from archsim.systems.duplex import system as dx
from archsim.systems.t3 import system as t3s
from archsim.systems.t3.params import T3Params, load_params
from archsim.systems.t3.shapes import sublayer_shape
from archsim.systems.t3.sim import CONFIGS, simulate_sublayer

DUPLEX_SMALL = {"model": "mixtral-8x7b", "requests": 2, "input_len": 32, "output_len": 2, "max_batch": 2}


def _fields(obj_or_cls) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(obj_or_cls))


def _counting(monkeypatch, module, name: str) -> list:
    """Replace module.name by a wrapper that records its calls; the list of calls' first arguments."""
    calls: list = []
    real = getattr(module, name)

    def wrapper(*args, **kwargs):
        calls.append(args[0] if args else None)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


# ---- Duplex -----------------------------------------------------------------------------------------------
def test_duplex_setup_is_frozen_and_typed():
    su = dx.setup({**DUPLEX_SMALL, "routing": "zipf", "zipf_s": 1.5, "qps": 4.0})
    for obj, name in ((su, "device"), (su.serving, "requests"), (su.routing, "zipf_s"), (su.hardware, "pim_timing")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, name, None)
    assert su.model.name == "mixtral-8x7b" and su.policy == dx_compiler.load_policy("duplex")
    assert su.serving == dx.Serving(requests=2, input_len=32, output_len=2, length_std=0.0, qps=4.0, max_batch=2,
                                    max_prefill_tokens=8192, data_parallel=1), su.serving
    assert su.routing == dx.ZipfRouting(zipf_s=1.5) and su.zipf_s == 1.5
    assert su.resolved == dx.resolve({**DUPLEX_SMALL, "routing": "zipf", "zipf_s": 1.5, "qps": 4.0})


def test_duplex_variant_subconfigs_carry_only_their_knobs():
    by_device = {kind: dx.setup({**DUPLEX_SMALL, "device": kind, "pim_timing": "roofline"}).hardware
                 for kind in dx_compiler.DEVICE_KINDS}
    assert {k: _fields(v) for k, v in by_device.items()} == {
        "gpu": (), "2xgpu": (), "duplex": ("pim_timing", "command_path"), "bank_pim": (), "bankgroup_pim": ()}, by_device
    assert by_device["duplex"] == dx.LogicPimDevice(pim_timing="roofline", command_path="own_path")
    # Logic-PIM's timing reaches only the device that has it; the others' low unit is a roofline
    assert dx.setup({**DUPLEX_SMALL, "device": "bank_pim"}).pim_timing == "roofline"
    assert dx.setup(DUPLEX_SMALL).pim_timing == "engine"
    uniform = dx.setup({**DUPLEX_SMALL, "zipf_s": 2.0}).routing
    assert uniform == dx.UniformRouting() and _fields(uniform) == (), uniform
    # every choice of the selecting key has its sub-config, and every knob of one is a key of the schema
    keys = {k.path: k for k in schema.keys(dx.DuplexConfig)}
    assert set(dx.DEVICE_CONFIGS) == set(keys["device"].choices)
    assert set(dx.ROUTING_CONFIGS) == set(keys["routing"].choices)
    for cls in (*dx.DEVICE_CONFIGS.values(), *dx.ROUTING_CONFIGS.values(), dx.Serving):
        assert set(_fields(cls)) <= set(keys), (cls.__name__, _fields(cls))


def test_duplex_run_builds_its_setup_once_and_loads_each_file_once(monkeypatch):
    setups = _counting(monkeypatch, dx, "setup")
    policies = _counting(monkeypatch, dx, "load_policy")
    specs = _counting(monkeypatch, dx_compiler, "load_spec")
    import archsim.workload as workload

    loads = _counting(monkeypatch, workload, "load_model")
    run = dx.DuplexRun({**DUPLEX_SMALL, "pim_timing": "roofline"})
    assert (len(setups), len(loads), len(policies), len(specs)) == (1, 1, 1, 1), (setups, loads, policies, specs)
    assert run.su.device == "duplex" and run.D == 4 and run.devices_source == "paper"
    # a Setup given is used as it is: nothing is resolved or loaded again
    dx.DuplexRun(run.su)
    assert (len(setups), len(loads), len(policies)) == (1, 1, 1), (setups, loads, policies)


def test_duplex_bad_values_name_their_key():
    with pytest.raises(ConfigError, match="zipf_s"):
        dx.setup({**DUPLEX_SMALL, "routing": "zipf", "zipf_s": -1})
    with pytest.raises(ConfigError, match="device: .*gpu, 2xgpu, duplex"):
        schema.variant(dx.DEVICE_CONFIGS, "tpu", {}, "device")


# ---- T3 ---------------------------------------------------------------------------------------------------
T3_SMALL = {"model": "mega-gpt2", "sublayer": "fc2_fwd", "tp": 4, "tokens": 128}


def test_t3_setup_is_frozen_and_typed():
    su = t3s.setup({**T3_SMALL, "configs": ["t3-mca", "sequential", "t3-mca"]})
    for obj, name in ((su, "tp"), (su.variants[0], "mca_threshold")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, name, None)
    assert [v.name for v in su.variants] == ["t3-mca", "sequential"], su.variants   # in order, once each
    assert su.shape == sublayer_shape(su.model, "fc2_fwd", 4, 128)
    assert su.ring.devices == 4 and su.ring.name == su.params.ring_name
    assert su.resolved["configs"] == ["t3-mca", "sequential", "t3-mca"]      # the manifest's config as given


def _without_spec(params: T3Params) -> dict:
    """The fields of T3 parameters but the DRAM spec (whose numpy tables do not compare with ==)."""
    return {f: getattr(params, f) for f in _fields(params) if f != "spec"}


def test_t3_variant_subconfigs_carry_only_their_knobs():
    knobs = {"tracker_entries": 64, "mca_threshold": 24, "starvation_cap_cycles": 500, "mca_gate": "row"}
    su = t3s.setup({**T3_SMALL, **knobs})
    assert {v.name: _fields(v) for v in su.variants} == {
        "sequential": (), "t3": ("tracker_entries",),
        "t3-mca": ("tracker_entries", "mca_threshold", "starvation_cap_cycles", "mca_gate")}, su.variants
    preset = load_params("t3_paper")
    seq, fused, mca = (_without_spec(t3s.variant_params(su.params, v)) for v in su.variants)
    assert seq == _without_spec(preset), "sequential runs with the preset's tracker and MCA values (reads none)"
    assert fused == _without_spec(dataclasses.replace(preset, tracker_entries=64)), fused
    assert mca == _without_spec(dataclasses.replace(preset, **knobs)), mca
    # the configuration names are the schema's choices, and every knob a key of the schema and of T3Params
    keys = {k.path for k in schema.keys(t3s.T3Config)}
    assert set(t3s.VARIANT_CONFIGS) == set(CONFIGS)
    for cls in t3s.VARIANT_CONFIGS.values():
        assert set(_fields(cls)) <= keys & set(_fields(T3Params)), (cls.__name__, _fields(cls))


def test_t3_setup_loads_preset_model_and_ring_once(monkeypatch):
    from archsim.systems.t3 import params as t3params

    presets = _counting(monkeypatch, t3params, "load_params")
    import archsim.interconnect.ring as ring
    import archsim.workload.spec as wspec

    rings = _counting(monkeypatch, ring, "load_ring")
    models = _counting(monkeypatch, wspec, "load_model")
    # a memory mapping is checked while resolving: the preset that check loaded is the run's
    su = t3s.setup({**T3_SMALL, "memory_mapping": "RoRaBgBaChCo"})
    assert (len(presets), len(rings), len(models)) == (1, 1, 1), (presets, rings, models)
    assert su.params.mapping == "RoRaBgBaChCo"
    # the ring a caller loaded is the one simulated; one for another device count is refused
    with pytest.raises(ConfigError, match="tp: the ring given has 4 devices"):
        simulate_sublayer(su.params, su.shape, 8, "sequential", devices="one", ring=su.ring)


def test_t3_preset_overrides_reach_any_preset_value_and_are_blamed_where_set():
    """`preset_overrides.<key path>` sets any value of the T3 preset (the keys `archsim presets show t3/NAME`
    lists), checked with the config; a shared key (window_cycles, ...) still wins over the preset."""
    from archsim import keypaths

    default = load_params("t3_paper").gpu.l2_bytes
    su = t3s.setup({"system": "t3", "preset_overrides": {"gpu": {"l2_bytes": default // 2}}, "window_cycles": 16})
    assert su.params.gpu.l2_bytes == default // 2 and su.params.window_cycles == 16
    leaves = keypaths.config_leaves({"system": "t3"})
    assert leaves["preset_overrides.gpu.l2_bytes"] == default
    with pytest.raises(ConfigError) as err:
        keypaths.apply_overrides({"system": "t3"}, [("preset_overrides.gpu.l2_bytes", -5, "--set x", None)])
    assert err.value.key_path == "preset_overrides.gpu.l2_bytes" and ">= 1" in str(err.value)


def test_duplex_devices_overrides_reach_the_device_and_are_blamed_where_set():
    """`devices_overrides.<key path>` sets any value of the Duplex devices preset (`archsim presets show
    duplex/devices`); the run's device is built from it; a bad value names the key it was set at."""
    from archsim import keypaths

    base = {"system": "duplex", "device": "gpu"}
    su = dx.setup({**base, "devices_overrides": {"xpu": {"hbm_bandwidth_bytes_per_s": 6.704e12}}})
    default = dx.setup(base)
    assert su.devices_preset.xpu.hbm_bandwidth_bytes_per_s == 2 * default.devices_preset.xpu.hbm_bandwidth_bytes_per_s
    fast, slow = (dx_compiler.make_device("gpu", "roofline", preset=s.devices_preset) for s in (su, default))
    assert fast.xpu_bw == pytest.approx(2 * slow.xpu_bw)
    assert keypaths.config_leaves(base)["devices_overrides.logic_pim.gemm_modules"] == \
        default.devices_preset.logic_pim.gemm_modules
    with pytest.raises(ConfigError) as err:
        keypaths.apply_overrides(base, [("devices_overrides.xpu.peak_flops", -1.0, "--set x", None)])
    assert err.value.key_path == "devices_overrides.xpu.peak_flops" and "> 0" in str(err.value)
