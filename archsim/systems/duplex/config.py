"""The config of system `duplex` (one schema: DEFAULTS, resolve, the CLI flags and help derive from it); light to
import (the simulation is archsim.systems.duplex.system)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from archsim import schema
from archsim.dram.extensions import extension_options
from archsim.errors import ConfigError
from archsim.limits import MAX_BATCH
from archsim.schema import opt

DEVICE_KINDS = ("gpu", "2xgpu", "duplex", "bank_pim", "bankgroup_pim")
# model features simulated (archsim.summary.FEATURES): MoE experts, GQA decode attention (Op/B = query group
# size), gated FFNs (three matrices); the compiler sizes every operator from them
MODEL_FEATURES = frozenset({"moe", "gqa", "gated_ffn"})

SPLITS = ("interference_aware", "lookup_table", "llmsimulator")   # coprocessing_split: the default first
# the command-path choice lives with Logic-PIM's commands (the standard extension); the config key exposes it
_COMMAND_PATH = extension_options("logic_pim")["command_path"]


@dataclass
class DuplexConfig:
    """Config of system `duplex` (one source of truth: DEFAULTS, resolve, the CLI flags and help derive from it)."""

    model: str = opt("mixtral-8x7b", "model name (workloads/models) or a model file")
    device: str = opt("duplex", "device kind: Duplex (xPU + Logic-PIM) or a baseline", choices=DEVICE_KINDS)
    devices: int | None = opt(None, "devices (2xgpu: twice as many GPUs); null: the paper's count for the model, "
                              "else the fewest (a power of two) whose memory the weights fill at most half",
                              minimum=1)
    mapping: str = opt("duplex", "mapping policy file: mappings/*.yaml or a path")
    mapping_overrides: dict[str, Any] = opt({}, "overrides of the mapping policy's keys, e.g. "
                                            "{dispatch: {decode: {qkv: xpu}}}",
                                            overrides_of=("mapping", "archsim.systems.duplex.compiler:load_policy"))
    # the mapping policy's switches as first-class keys (absent unless given: the mapping file decides)
    expert_coprocessing: bool = opt(False, "expert co-processing (Duplex+PE): split each device's experts between "
                                    "the xPU and Logic-PIM by a token-count lookup table; default: the mapping's",
                                    optional=True)
    expert_tensor_parallel: bool = opt(False, "expert tensor parallelism (Duplex+PE+ET): every expert split over "
                                       "a node's devices; default: the mapping's", optional=True)
    attention_coprocessing: bool = opt(True, "prefill attention on the xPU beside decode attention on Logic-PIM; "
                                       "default: the mapping's", optional=True)
    dispatch_rule: str = opt("table", "dispatch: the mapping's per (stage, layer) table, or opb (Op/B at most "
                             "opb_threshold to the low unit); default: the mapping's", choices=("table", "opb"),
                             optional=True)
    opb_threshold: float = opt(16.0, "Op/B threshold of dispatch_rule opb; default: the mapping's", above=0,
                               optional=True)
    pim_timing: str = opt("engine", "Logic-PIM timing: bundle command streams on the channel engine, or its "
                          "roofline", choices=("engine", "roofline"))
    command_path: str = opt(_COMMAND_PATH["default"], "Logic-PIM (extension option logic_pim.command_path of the "
                            "memory's standard): " + _COMMAND_PATH["help"] + "; default: the extension's",
                            choices=tuple(_COMMAND_PATH["values"]), optional=True)
    coprocessing_split: str = opt("interference_aware", "how co-processing picks its split: interference_aware "
                                  "= expert splits and attention overlap costed with the slow-downs they will pay "
                                  "(never slower than no split); lookup_table = the paper's tables of "
                                  "interference-free times; llmsimulator = the rule of the authors' simulator "
                                  "(route.cpp:34-127 of its helios fork: experts or 4 groups of them move to the "
                                  "xPU, most tokens first, while that lowers the max of two unit sums)",
                                  choices=SPLITS,
                                  optional=True)
    interference: str = opt("engine", "co-processing interference (xPU beside Logic-PIM on one stack): slow-downs "
                            "measured on the channel engine per operator pair (needs pim_timing engine), or none",
                            choices=("engine", "none"), optional=True)
    requests: int = opt(64, "requests served", minimum=1, maximum=MAX_BATCH)
    input_len: int = opt(1024, "mean input (prompt) length in tokens", minimum=1)
    output_len: int = opt(1024, "mean output length in tokens", minimum=1)
    length_std: float = opt(0.0, "standard deviation of the lengths, as a fraction of the mean", minimum=0, below=1)
    qps: float | None = opt(None, "Poisson arrival rate in requests/s; null: closed loop (all arrive at 0)", above=0)
    max_batch: int = opt(64, "most requests in flight", minimum=1, maximum=MAX_BATCH)
    max_prefill_tokens: int | None = opt(8192, "most prompt tokens prefilled per iteration; null: no limit",
                                         minimum=1)
    routing: str = opt("uniform", "MoE expert routing of the tokens: uniform (expected counts, equal "
                       "probabilities), zipf (expected counts, skewed popularity) or sampled (every layer's routing "
                       "drawn at random, k distinct experts per token, as LLMSimulator routes; seeded by the run's "
                       "seed)", choices=("uniform", "zipf", "sampled"))
    zipf_s: float = opt(1.0, "Zipf exponent of the expert popularity (routing: zipf)", minimum=0)
    memory_cap: str = opt("enforce", "enforce: the batcher admits a request only while the devices' memory "
                          "beside the weights holds every admitted request's final KV cache; unlimited: no memory check "
                          "(LLMSimulator as reports/duplex/run_llmsim.py runs it: mem_cap_limit false)",
                          choices=("enforce", "unlimited"), optional=True)
    dispatch: str = opt("layer", "which unit runs a MoE layer's experts: layer (one unit for the whole layer, the "
                        "mapping policy's unit for the stage's MoE layers; with dispatch_rule opb, by the Op/B at "
                        "the mean tokens per expert) or per_expert (every expert on the "
                        "unit that runs it faster with its own token count, xPU or low unit by the lookup table's "
                        "times, as LLMSimulator picks the fastest unit per expert). Under expert_coprocessing the "
                        "split already places every expert on a unit: per_expert changes nothing there",
                        choices=("layer", "per_expert"), optional=True)
    data_parallel: int = opt(1, "replicas of the whole `devices` group, each serving every k-th request",
                             minimum=1)
    # the memory of a device (optional: absent from the resolved config unless given, so configs without it
    # keep their hash); given, the xPU's bandwidth and capacity are those of the stacks
    device_preset: str = opt("devices", "Duplex devices preset (archsim/presets/duplex/NAME.yaml or a path): the "
                             "xPU, links, low-Op/B processors and Logic-PIM (`archsim presets show duplex/NAME`)",
                             optional=True)
    devices_overrides: dict[str, Any] = opt({}, "overrides of the devices preset's values by key path, e.g. "
                                            "{xpu: {peak_flops: 2.0e15}} or {logic_pim: {gemm_modules: 8}}",
                                            optional=True,
                                            overrides_of=("device_preset", "archsim.pim.logic_pim:load_devices"))
    preset: str = opt("HBM3_Duplex", "DRAM preset of one stack (archsim presets list); default: the devices "
                      "preset's (archsim/presets/duplex/devices.yaml)", optional=True)
    stacks: int = opt(5, "HBM stacks per device; default: the devices preset's", minimum=1, optional=True)


DEFAULTS: dict[str, Any] = {"system": "duplex", **schema.defaults(DuplexConfig)}


def resolve(config: dict[str, Any]) -> dict[str, Any]:
    schema.check(DuplexConfig, config, "duplex")   # unknown keys, types, allowed values, ranges
    out = {**DEFAULTS, **config}
    if "device_preset" in out or out.get("devices_overrides"):
        devices_preset(out)       # a bad value is rejected with the config, not when the run starts
    return out


def devices_preset(cfg: dict[str, Any]) -> Any:
    """The devices preset the config names, with its overrides (a bad value reported at the key it was set)."""
    from archsim.config import flatten
    from archsim.pim.logic_pim import load_devices

    given = flatten(dict(cfg.get("devices_overrides") or {}))
    try:
        return load_devices(cfg.get("device_preset", "devices"), given or None)
    except ConfigError as exc:
        if exc.key_path not in given:
            raise
        raise ConfigError(f"devices_overrides.{exc.key_path}", exc.problem) from None


# first-class config key -> mapping policy key
POLICY_KEYS = {"expert_coprocessing": "expert_coprocessing", "expert_tensor_parallel": "expert_tensor_parallel",
               "attention_coprocessing": "attention_coprocessing", "dispatch_rule": "rule",
               "opb_threshold": "opb_threshold"}


def policy_overrides(cfg: dict[str, Any]) -> dict[str, Any]:
    """mapping_overrides plus the first-class policy keys given in `cfg`; a key given both ways with different
    values is an error naming both paths."""
    over = dict(cfg.get("mapping_overrides") or {})
    for key, pkey in POLICY_KEYS.items():
        if key not in cfg:
            continue
        if pkey in over and over[pkey] != cfg[key]:
            raise ConfigError(key, f"{cfg[key]!r} contradicts mapping_overrides.{pkey} = {over[pkey]!r}; give one")
        over[pkey] = cfg[key]
    return over


EXAMPLES = """\
  archsim run --system duplex --set requests=16 --set output_len=64
  archsim run --system duplex --set device=gpu --set requests=16 --set output_len=64   # a baseline device"""
