"""The config of systems neupims, npu_pim, npu_only, gpu_only and gpu_roofline (one schema), the mapping
policy, and a run's config resolved once into a typed, frozen `Setup`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from archsim import paths, registry, schema
from archsim.errors import ConfigError
from archsim.limits import MAX_BATCH, MAX_QUEUE
from archsim.schema import REQUIRED, opt

if TYPE_CHECKING:     # the model, NPU and workload modules are imported when a config is resolved, not declared
    from archsim.npu.config import NpuConfig
    from archsim.workload.spec import ModelSpec

NPU_ATTENTION = ("pipelined", "per_gemm", "fused_mha")
# how a PIM GEMV's rows are closed (archsim.systems.neupims.compiler): one precharge for the unit, or bank by bank
PIM_PRECHARGE = ("unit", "per_bank")
# Devices per model as NeuPIMs configures them (TP x PP: 7B 4x1, 13B 4x1, 30B 4x2, 175B 8x4). archsim has no
# pipeline parallelism, so a model's PP stages become more TP: the same devices, the same weight bytes per device.
TP_DEFAULT = {"gpt3-7b": 4, "gpt3-13b": 4, "gpt3-30b": 8, "gpt3-175b": 32}
MODES = ("iteration", "serving")
KV_LAYOUTS = ("head_rows", "token_rows")
REQUEST_QUEUE_DEFAULT = 32      # archsim.dram.controller's read_queue / write_queue default
# when a PIM channel starts a head's attend (s.V) GEMVs: `head`, once that head's logits and softmax are done on
# its channel (each channel runs on by itself); `all_logits`, once every channel of the stage has finished every
# logits GEMV and softmax (NeuPIMs' code: NeuPIMSAttend is the PIM program's next operation, which starts only when
# NeuPIMSLogitSoftmax's tiles are done on all channels, docs/presets.md "Mapping neupims_code")
ATTEND_STARTS = ("head", "all_logits")
# how the controller schedules the NPU's reads and writes: `frfcfs`, archsim's controller (FR-FCFS over the read and
# write queues of `request_queue` entries); `bank_queues`, NewtonSim's as NeuPIMs' code runs it, DRAMsim3's two
# levels (a 32-entry transaction queue and write buffer in front of a 128-entry command queue per bank, banks served
# round robin, a queue's first ready command, a precharge only for its first entry; HBM2_8Gb_x128_dualpim.ini:58-61,
# NS/neupims_controller.cc:300-405, NS/neupims_command_queue.cc:75-90, 119-150, 336-360): the engine's controller
# convention `dramsim3` with 128-entry bank queues. The engine's bank queues take no PIM stream, so only with
# `attention: npu` (issue 33). The convention also staggers the ranks' refreshes (as refresh_stagger: true)
NPU_CONTROLLERS = ("frfcfs", "bank_queues")
# how the attention's PIM commands reach the memory controller: `bus`, as fast as the channel's command bus takes
# them (each channel's stream from the stage's start); `per_cycle`, as the npu+pim branch's core hands them over: one
# PIM instruction (GWRITE, PIM_HEADER, COMP, READRES) per NPU cycle for the whole device ([npu+pim]
# src/NeuPIMSystolicWS.cc:150-178, one `if` where the NeuPIMs tree has `while`), request after request, the batch
# consolidated channel after channel ([npu+pim] src/scheduler/Scheduler.cc:252-264), so a channel's instructions come
# in one run while the others wait their turn; the logits of the whole batch are one PIM tile
# (NeuPIMSLogitSoftmax.cc:64-74), then the attend's (NeuPIMSAttend.cc:54-64). A row set's G_ACTs enter with its
# PIM_HEADER, a GWRITE's ACT and PRE with the GWRITE, the PIM precharges with the READRES (the controller makes them).
# Needs `attend_start: all_logits` (the attend tile is issued after the logits tile)
PIM_ISSUES = ("bus", "per_cycle")
# how a row set's last GEMV is issued (archsim.systems.neupims.compiler): `split`, its COMPs and READRES one by one,
# the PIM precharges after its last COMP (a COMP reads the open row: the hardware); `fused`, as one COMPS_READRES
# as NeuPIMs' own operations issue it and NewtonSim times it: the precharges nRTP after it, only the next GEMV
# waiting for its COMPs (the DRAM standard neupims_code_fused's COMPS_READRES rows, docs/presets.md)
PIM_GEMVS = ("split", "fused")
BANK_QUEUE_ENTRIES = 128          # NewtonSim's cmd_queue_size (HBM2_8Gb_x128_dualpim.ini:60)
TRANSACTION_QUEUE_ENTRIES = 32    # its trans_queue_size (HBM2_8Gb_x128_dualpim.ini:61)
POLICY_KEYS = {"attention": ("pim", "npu"), "sub_batch": (True, False),
               "channel_assignment": ("gmlbp", "round_robin")}
# model features simulated (archsim.summary.FEATURES): GQA (K/V per KV head), the gated FFN with RMSNorm, and a
# mixture-of-experts FFN (the router and the experts' GEMMs on the NPU by their routed token counts) (issue 37);
# the GPU baselines (gpu_only, gpu_roofline) refuse MoE models (_resolve)
MODEL_FEATURES: frozenset[str] = frozenset({"gqa", "gated_ffn", "moe"})


@dataclass
class NeuPimsConfig:
    """Config of systems neupims, npu_pim, npu_only and gpu_only (one source of truth: DEFAULTS, resolve, the
    CLI flags and help derive from it)."""

    model: str = opt("gpt3-7b", "model name (workloads/models) or a model file")
    tp: int | None = opt(None, "tensor-parallel devices (must divide the model's heads); null: NeuPIMs' count "
                         "for the model (gpt3-7b 4, gpt3-13b 4, gpt3-30b 8, gpt3-175b 32), else 1", minimum=1)
    batch: int = opt(256, "requests per batch (iteration mode) / most requests in flight (serving mode)", minimum=1,
                     maximum=MAX_BATCH)
    dataset: str = opt("sharegpt", "request lengths: a dataset (alpaca, sharegpt: running batches sampled with "
                       "continuous batching's length bias), NeuPIMs' batch snapshots (neupims_clb, neupims_rr), a "
                       "request trace (.csv / .jsonl) or one snapshot file (.csv with seq_len,ch_idx)")
    mode: str = opt("iteration", "iteration: `samples` decode iterations of `batch` requests; serving: continuous "
                    "batching of `requests` requests (TTFT / TBT)", choices=MODES)
    samples: int = opt(1, "iteration mode: batches sampled (one decode iteration each)", minimum=1)
    requests: int = opt(512, "serving mode: requests served", minimum=1, maximum=MAX_BATCH)
    max_iterations: int = opt(100_000, "serving mode: stop after this many iterations", minimum=1)
    mapping: str | None = opt(None, "mapping policy file: mappings/*.yaml or a path; null: npu_pim for system "
                              "npu_pim (the paper's naive baseline), npu_only for npu_only, else neupims")
    sub_batch: bool | None = opt(None, "interleave two sub-batches (NPU and PIM overlap); null: the mapping "
                                 "policy's", choices=POLICY_KEYS["sub_batch"])
    channel_assignment: str | None = opt(None, "which channel holds a request's KV cache; null: the mapping "
                                         "policy's (a batch snapshot dataset brings its own channels)",
                                         choices=POLICY_KEYS["channel_assignment"])
    kv_layout: str | None = opt(None, "PIM KV-cache layout: head_rows (a bank row holds keys of one head) or "
                                "token_rows (a bank row holds one key across heads, NeuPIMs' code); null: the "
                                "mapping policy's", choices=KV_LAYOUTS)
    preset: str | None = opt(None, "DRAM preset; null: NeuPIMs_HBM2_Dual (neupims), NeuPIMs_HBM2_Single "
                             "(npu_pim, npu_only)")
    npu: str = opt("neupims_npu", "NPU preset (archsim/presets/npu)")
    npu_overrides: dict[str, Any] = opt({}, "overrides of the NPU preset's values by their key paths, e.g. "
                                        "{systolic: {height: 256}} (keys npu_overrides.<section>.<key>; "
                                        "`archsim presets show npu/NAME` lists them)", optional=True,
                                        overrides_of=("npu", "archsim.npu.config:load_npu_config"))
    npu_attention: str = opt("pipelined", "npu_only attention on the arrays: pipelined (every head's and "
                             "request's q.K^T and s.V through one instruction pipeline per array, softmax on "
                             "the vector unit alongside), per_gemm (each a separate GEMM from an empty "
                             "pipeline, softmax serial) or fused_mha (NeuPIMs' npu-only branch: per head one "
                             "q.K^T preload, the softmax, then an s.V preload per 128 keys, in order)",
                             choices=NPU_ATTENTION)
    layers: int | None = opt(None, "layers simulated (of every iteration in serving mode), the whole model's time "
                             "taken from them by NeuPIMs' stage formula; null: all of the model's", minimum=1)
    refresh: bool = opt(True, "simulate DRAM refresh")
    # the TP all-reduce link; None = an ideal interconnect (NeuPIMs' simulator models no inter-device traffic)
    link_bytes_per_s: float | None = opt(None, "TP all-reduce link bandwidth in bytes/s, e.g. 64e9 (PCIe 5.0 "
                                         "x16-class); null: an ideal interconnect", above=0)
    link_latency_s: float = opt(0.0, "TP all-reduce link latency per hop in s, e.g. 1e-6", minimum=0)
    gpu: str = opt("a100-40gb", "GPU baseline preset of gpu_only (archsim/presets/baselines)")
    # optional: the GPU-only band's ends (reports/neupims); absent unless given
    gpu_host_overhead_s: float = opt(None, "gpu_only: host cost per launched kernel in s (default: the GPU preset's "
                                     "framework.host_overhead_per_kernel_s)", above=0, optional=True)
    # optional: absent from the resolved config unless given, so configs that do not use it keep their hash
    dram: dict[str, Any] = opt(None, "overrides of the DRAM preset, e.g. {timing: {nRCD: 20}}", optional=True)


DEFAULTS: dict[str, Any] = schema.defaults(NeuPimsConfig)


# ---- configuration -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Policy:
    """A NeuPIMs mapping policy (mappings/*.yaml), read once per run by `schema.load` (errors name the file, the
    key path and its line)."""

    attention: str = opt(REQUIRED, "where decode attention runs", choices=POLICY_KEYS["attention"])
    sub_batch: bool = opt(REQUIRED, "sub-batch interleaving (two sub-batches through stages A..F)")
    channel_assignment: str = opt(REQUIRED, "which channel holds each request's KV cache",
                                  choices=POLICY_KEYS["channel_assignment"])
    kv_base_row: int | str = opt("half", "first row of every bank that holds KV caches (weights below it); half: "
                                 "the middle row (NeuPIMs' split of its 32768-row banks at 16384, on any device)",
                                 choices=("half",), minimum=0)
    kv_layout: str = opt("head_rows", "K/V rows: per head, or a key's dims across heads (compiler)",
                         choices=KV_LAYOUTS)
    pim_precharge: str = opt("unit", "how a PIM GEMV's rows close: one precharge for the unit, or bank by bank",
                             choices=PIM_PRECHARGE)
    # 32: the engine controller's default (DRAMsim3's and NewtonSim's 32-entry transaction queue); NeuPIMs'
    # simulator schedules from 128-entry command queues per bank (mapping neupims_code)
    request_queue: int = opt(REQUEST_QUEUE_DEFAULT, "entries of the NPU's read and of its write queue per channel: "
                             "the window the controller schedules from (FR-FCFS over the queue)", minimum=1,
                             maximum=MAX_QUEUE)
    attend_start: str = opt("head", "when a channel starts a head's attend GEMVs (ATTEND_STARTS)",
                            choices=ATTEND_STARTS)
    # false as NewtonSim's NeuPIMs controller, which reserves no bank for PIM and skips only the PIM row
    pim_reserves_banks: bool = opt(True, "a PIM open waiting to issue (tFAW, tRP, a refresh its GEMV waits for) "
                                   "keeps the NPU from opening the banks it targets (controller.stream_reserve)")
    # NewtonSim's RANK_LEVEL_STAGGERED default, refresh.cc:13-28 (mapping neupims_code: true)
    refresh_stagger: bool = opt(False, "the ranks of a channel refresh in turn, one every nREFI / ranks "
                                "(controller.refresh_stagger); false: every rank's all-bank refresh at the same nREFI")
    npu_controller: str = opt("frfcfs", "the NPU's memory controller: FR-FCFS queues, or NewtonSim's command queue "
                              "per bank (bank_queues)", choices=NPU_CONTROLLERS)
    pim_issue: str = opt("bus", "how the attention's PIM commands enter the controller: at the command bus's own "
                         "rate, or one PIM instruction per NPU cycle for the whole device, request after request, "
                         "channel after channel (per_cycle: the npu+pim branch's core, PIM_ISSUES)", choices=PIM_ISSUES)
    pim_gemv: str = opt("split", "a row set's last GEMV: its COMPs and READRES one by one, the rows closed after the "
                        "last COMP (split), or one fused COMPS_READRES the rows close nRTP after, as NeuPIMs' code "
                        "times it (fused: needs the DRAM standard neupims_code_fused; PIM_GEMVS)", choices=PIM_GEMVS)
    name: str = opt("", "the policy's name (default: its file's)")


def _policy(name: str) -> Policy:
    return schema.load(Policy, paths.resolve("mappings", name))


@dataclass(frozen=True)
class IterationMode:
    """mode: iteration (key path `samples`)."""

    samples: int


@dataclass(frozen=True)
class ServingMode:
    """mode: serving (key paths `requests`, `max_iterations`)."""

    requests: int
    max_iterations: int


# each mode's own knobs: its sub-config, built from the top-level keys of the same names (key paths unchanged)
MODE_CONFIGS: dict[str, type] = {"iteration": IterationMode, "serving": ServingMode}


@dataclass(frozen=True)
class Setup:
    """A run's config resolved once into typed values (model, NPU and policy loaded once), passed down to
    everything below `run`; `resolved` is the same config as the dict the manifest records."""

    system: str
    variant: Any                           # the system's class (archsim.systems.neupims: NeuPims or a baseline): what it does
    model: ModelSpec
    tp: int
    batch: int
    dataset: str
    mode: IterationMode | ServingMode
    policy: Policy
    sub_batch: bool
    channel_assignment: str
    preset: str | None
    npu: NpuConfig
    npu_attention: str
    layers: int                            # layers simulated
    refresh: bool
    link_bytes_per_s: float | None         # None: an ideal interconnect
    link_latency_s: float
    gpu: str
    gpu_host_overhead_s: float | None      # None: the GPU preset's
    dram: tuple[tuple[str, Any], ...]      # flattened overrides of the DRAM preset
    resolved: dict[str, Any] = field(compare=False, repr=False)

    @property
    def gpu_system(self) -> bool:
        return self.variant.gpu_model is not None


def variant_of(name: str) -> Any:
    """The registered class of NeuPIMs system `name` (one of NeuPims's variants)."""
    variant = registry.get(name)
    if not hasattr(variant, "pim_arbitration"):
        raise ConfigError("system", f"{name} is not NeuPIMs or one of its baselines")
    return variant


def _resolve(config: dict[str, Any]) -> tuple[dict[str, Any], ModelSpec, Policy]:
    """The resolved config, with the model and policy it loaded on the way (so `setup` loads neither again)."""
    from archsim.workload import serving
    from archsim.workload.spec import load_model

    name = config.get("system", "neupims")
    variant = variant_of(name)
    schema.check(NeuPimsConfig, config, name)   # unknown keys, types, allowed values, ranges
    out = {**DEFAULTS, **config, "system": name}
    if out["mapping"] is None:
        out["mapping"] = variant.mapping_default
    model = load_model(out["model"])
    if out["tp"] is None:
        out["tp"] = TP_DEFAULT.get(model.name, 1)
    if model.n_heads % out["tp"]:
        raise ConfigError("tp", f"{model.name} has {model.n_heads} heads; tp must divide it, got {out['tp']}")
    if model.n_kv_heads % out["tp"]:       # a device holds whole KV heads (no KV head replicated across devices)
        raise ConfigError("tp", f"{model.name} has {model.n_kv_heads} KV heads; tp must divide them, got {out['tp']}")
    if out["layers"] is not None and out["layers"] > model.n_layers:
        raise ConfigError("layers", f"at most the model's layers ({model.name} has {model.n_layers}), "
                          f"got {out['layers']}")
    policy = _policy(out["mapping"])
    for key in ("sub_batch", "channel_assignment", "kv_layout"):
        if out[key] is None:
            out[key] = getattr(policy, key)
    if policy.pim_issue == "per_cycle" and policy.attend_start != "all_logits":
        raise ConfigError("pim_issue", "per_cycle hands the attend's PIM instructions over after the logits tile, so "
                          f"it needs attend_start: all_logits, got {policy.attend_start}",
                          source=str(paths.resolve("mappings", out["mapping"])))
    if variant.gpu_model is not None and model.n_experts > 1:
        raise ConfigError("model", f"{model.name} is a mixture-of-experts model: not modelled by the GPU baseline "
                          f"{name} (issue 37); systems that model it: neupims, npu_pim, npu_only")
    if out["kv_layout"] == "token_rows" and model.n_kv_heads < model.n_heads:
        raise ConfigError("kv_layout", f"token_rows with grouped-query attention ({model.name}: {model.n_kv_heads} "
                          "KV heads) is not modelled (issue 37); allowed for GQA models: head_rows")
    if not variant.interleaves:
        out["sub_batch"] = False          # nothing runs beside the NPU's attention to interleave with
    if out["preset"] is None:
        out["preset"] = variant.device_preset
    known = [*serving.DATASETS, *serving.SNAPSHOT_SETS]
    if not _is_trace(out["dataset"]) and out["dataset"] not in known:
        raise ConfigError("dataset", f"unknown dataset {out['dataset']!r}; known: {', '.join(sorted(known))} or a "
                          "trace file (.csv / .jsonl)")
    if out["mode"] == "serving" and (out["dataset"] in serving.SNAPSHOT_SETS
                                     or _is_trace(out["dataset"]) and serving.is_snapshot(out["dataset"])):
        raise ConfigError("dataset", f"{out['dataset']} is a batch snapshot (seq_len,ch_idx): iteration mode only; "
                          "serving needs requests (a dataset or a trace of arrival_s,prompt_tokens,output_tokens)")
    return out, model, policy


def resolve(config: dict[str, Any]) -> dict[str, Any]:
    return _resolve(config)[0]


def setup(config: dict[str, Any]) -> Setup:
    """`config` resolved and typed: what `run` passes down."""
    from archsim.npu.config import load_npu_config

    cfg, model, policy = _resolve(config)
    mode_cls = MODE_CONFIGS[cfg["mode"]]
    mode = mode_cls(**{f.name: cfg[f.name] for f in dataclasses.fields(mode_cls)})
    link = cfg["link_bytes_per_s"]
    return Setup(system=cfg["system"], variant=variant_of(cfg["system"]), model=model, tp=cfg["tp"], batch=cfg["batch"], dataset=cfg["dataset"],
                 mode=mode, policy=dataclasses.replace(policy, kv_layout=cfg["kv_layout"]), sub_batch=cfg["sub_batch"], channel_assignment=cfg["channel_assignment"],
                 preset=cfg["preset"], npu=load_npu_config(cfg["npu"], cfg.get("npu_overrides"), label="npu_overrides"), npu_attention=cfg["npu_attention"],
                 layers=cfg["layers"] or model.n_layers, refresh=cfg["refresh"],
                 link_bytes_per_s=None if link is None else float(link), link_latency_s=float(cfg["link_latency_s"]),
                 gpu=cfg["gpu"], gpu_host_overhead_s=cfg.get("gpu_host_overhead_s"),
                 dram=tuple(_dram_overrides(cfg).items()), resolved=cfg)


def _is_trace(dataset: str) -> bool:
    return str(dataset).endswith((".csv", ".jsonl"))


def _dram_overrides(cfg: dict[str, Any]) -> dict[str, Any]:
    from archsim.config import flatten

    return flatten(cfg.get("dram") or {})
