"""NeuPIMs and its baselines: decode iterations of a GPT-3 model on NPU + HBM-PIM devices, every layer simulated.

One TP shard of the model runs on one device: an NPU (systolic arrays + vector units, archsim.npu) and 32
HBM2 channels with PIM banks (preset NeuPIMs_HBM2_Dual / _Single). Per layer and sub-batch:

  QKV      LayerNorm (vector) -> GEMM b x E x 3E/tp (NPU arrays; DMA through the channel engine)
  MHA      per request and head q.K^T (PIM GEMV) -> softmax (NPU vector units) -> s.V (PIM GEMV), on the channel
           that holds the request's KV cache (archsim.systems.neupims.compiler streams), or on the NPU (npu_only)
  Proj+FFN GEMM b x E/tp x E -> all-reduce -> residual add -> LayerNorm -> GEMM b x E x 4E/tp -> GELU ->
           GEMM b x 4E/tp x E -> all-reduce -> residual add

Stages follow mappings/neupims.yaml: with sub-batch interleaving, two sub-batches through stages A..F (NPU runs
QKV / Proj+FFN of one while PIM runs the other's MHA; every stage ends at a barrier); without it, QKV, MHA and
Proj+FFN of the whole batch one after the other. Everything that touches DRAM in a stage runs in ONE channel
engine at the same time: the NPU's DMA requests (an rw source, FR-FCFS) and the PIM command streams (a stream
source). The four systems differ only in data:

  neupims   dual row buffers (PIM and memory rows open at once); PIM commands first (`priority`)
  npu_pim   one row buffer; `blocked`: while a PIM GEMV runs, the channel serves only PIM (Newton-style); by
            default the paper's naive baseline (mappings/npu_pim.yaml: no sub-batch interleaving, round-robin)
  npu_only  plain HBM (the single-buffer device, no PIM command issued); attention on the NPU
  gpu_only  the paper's GPU-only baseline: PyTorch eager on an A100 40GB, per kernel (host launch cost overlapped
            with the device's per-kernel roofline, the KV cache re-copied by torch.cat every step), no cycle simulation
  gpu_roofline  an upper bound on any A100: its roofline per operator, no host or framework cost

Modes: `iteration` (NeuPIMs' own method, without its one-layer extrapolation: `samples` batches of `batch`
requests with sampled lengths, one decode iteration each over all layers) and `serving` (continuous batching of
`requests` requests; prefill on standalone NPUs, every decode iteration simulated; TTFT / TBT percentiles).

Assumptions (stated in reports/neupims/README.md): TP devices are symmetric, so one device is simulated and
the all-reduce is a ring over `link_bytes_per_s` / `link_latency_s` (default: an ideal interconnect, as in
NeuPIMs' simulator, which models no inter-device traffic); GEMM weights are
stored per array (the N dimension split over `arrays` arrays, each streaming its own block); vector ops read
their operands from the NPU SRAM (no DRAM traffic); softmax jobs queue on the vector pipelines in the order the
logits GEMVs finish.
"""
from __future__ import annotations

import dataclasses
import functools
import heapq
import math
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from archsim import paths, progress, schema
from archsim.config import load_yaml
from archsim.dram import mapping as mapping_mod
from archsim.dram.spec import DramSpec, load_spec
from archsim.engine.channel import EngineError, MemorySystem
from archsim.engine.loop import EventLoop, MemoryUnit
from archsim.errors import ConfigError, UserError
from archsim.interconnect.ring import RingConfig, collective_s
from archsim.npu.config import NpuConfig, load_npu_config
from archsim.npu.dram_gemm import GemmAgent
from archsim.npu.systolic import ArrayPipeline, _tile_instrs, schedule_gemm
from archsim.npu.vector import vector_op_cycles, vector_row_cycles
from archsim.registry import register
from archsim.results import Result, make_manifest
from archsim.schema import opt
from archsim.stats_names import from_code
from archsim.systems.neupims.compiler import AttentionCompiler, Stream
from archsim.workload import serving
from archsim.workload.spec import ModelSpec, load_model

SYSTEMS = ("neupims", "npu_pim", "npu_only", "gpu_only", "gpu_roofline")
GPU_SYSTEMS = ("gpu_only", "gpu_roofline")
# the mapping policy each system uses when none is given: npu_pim is the paper's naive NPU+PIM
MAPPING_DEFAULT = {"npu_pim": "npu_pim"}
NPU_ATTENTION = ("pipelined", "per_gemm")
DEVICE_PRESET = {"neupims": "NeuPIMs_HBM2_Dual", "npu_pim": "NeuPIMs_HBM2_Single", "npu_only": "NeuPIMs_HBM2_Single"}
# Devices per model as NeuPIMs configures them (TP x PP: 7B 4x1, 13B 4x1, 30B 4x2, 175B 8x4). archsim has no
# pipeline parallelism, so a model's PP stages become more TP: the same devices, the same weight bytes per device.
TP_DEFAULT = {"gpt3-7b": 4, "gpt3-13b": 4, "gpt3-30b": 8, "gpt3-175b": 32}
MODES = ("iteration", "serving")
POLICY_KEYS = {"attention": ("pim", "npu"), "sub_batch": (True, False),
               "channel_assignment": ("gmlbp", "round_robin")}
MODEL_FEATURES: frozenset[str] = frozenset()  # model features simulated (archsim.summary.FEATURES): GPT-3-style MHA + 2-matrix FFN


@dataclass
class NeuPimsConfig:
    """Config of systems neupims, npu_pim, npu_only and gpu_only (one source of truth: DEFAULTS, resolve, the
    CLI flags and help derive from it)."""

    model: str = opt("gpt3-7b", "model name (workloads/models) or a model file")
    tp: int | None = opt(None, "tensor-parallel devices (must divide the model's heads); null: NeuPIMs' count "
                         "for the model (gpt3-7b 4, gpt3-13b 4, gpt3-30b 8, gpt3-175b 32), else 1", minimum=1)
    batch: int = opt(256, "requests per batch (iteration mode) / most requests in flight (serving mode)", minimum=1)
    dataset: str = opt("sharegpt", "request lengths: a dataset (alpaca, sharegpt) or a trace file (.csv / .jsonl)")
    mode: str = opt("iteration", "iteration: `samples` decode iterations of `batch` requests; serving: continuous "
                    "batching of `requests` requests (TTFT / TBT)", choices=MODES)
    samples: int = opt(1, "iteration mode: batches sampled (one decode iteration each)", minimum=1)
    requests: int = opt(512, "serving mode: requests served", minimum=1)
    max_iterations: int = opt(100_000, "serving mode: stop after this many iterations", minimum=1)
    mapping: str | None = opt(None, "mapping policy file: mappings/*.yaml or a path; null: npu_pim for system "
                              "npu_pim (the paper's naive baseline), else neupims")
    sub_batch: bool | None = opt(None, "interleave two sub-batches (NPU and PIM overlap); null: the mapping "
                                 "policy's", choices=POLICY_KEYS["sub_batch"])
    channel_assignment: str | None = opt(None, "which channel holds a request's KV cache; null: the mapping "
                                         "policy's", choices=POLICY_KEYS["channel_assignment"])
    preset: str | None = opt(None, "DRAM preset; null: NeuPIMs_HBM2_Dual (neupims), NeuPIMs_HBM2_Single "
                             "(npu_pim, npu_only)")
    npu: str = opt("neupims_npu", "NPU preset (archsim/presets/npu)")
    npu_attention: str = opt("pipelined", "npu_only attention on the arrays: pipelined (every head's and "
                             "request's q.K^T and s.V through one instruction pipeline per array, softmax on "
                             "the vector unit alongside) or per_gemm (each a separate GEMM from an empty "
                             "pipeline, softmax serial)", choices=NPU_ATTENTION)
    layers: int | None = opt(None, "layers simulated; null: all of the model's", minimum=1)
    refresh: bool = opt(True, "simulate DRAM refresh")
    # the TP all-reduce link; None = an ideal interconnect (NeuPIMs' simulator models no inter-device traffic)
    link_bytes_per_s: float | None = opt(None, "TP all-reduce link bandwidth in bytes/s, e.g. 64e9 (PCIe 5.0 "
                                         "x16-class); null: an ideal interconnect", above=0)
    link_latency_s: float = opt(0.0, "TP all-reduce link latency per hop in s, e.g. 1e-6", minimum=0)
    gpu: str = opt("a100-40gb", "GPU baseline preset of gpu_only (archsim/presets/baselines)")
    # optional: absent from the resolved config unless given, so configs that do not use it keep their hash
    dram: dict[str, Any] = opt(None, "overrides of the DRAM preset, e.g. {timing: {nRCD: 20}}", optional=True)


DEFAULTS: dict[str, Any] = schema.defaults(NeuPimsConfig)


# ---- configuration -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Policy:
    """A mapping policy (mappings/*.yaml), read once per run."""

    attention: str            # pim | npu
    sub_batch: bool
    channel_assignment: str   # gmlbp | round_robin
    kv_base_row: int          # first row of every bank that holds KV caches (weights below it)


def _policy(name: str) -> Policy:
    path = paths.resolve("mappings", name)
    doc = load_yaml(path)
    out = {}
    for key, allowed in POLICY_KEYS.items():
        if key not in doc.data:
            raise doc.error(key, f"missing; allowed: {', '.join(map(str, allowed))}")
        if doc.data[key] not in allowed:
            raise doc.error(key, f"must be one of {', '.join(map(str, allowed))}, got {doc.data[key]!r}")
        out[key] = doc.data[key]
    row = doc.data.get("kv_base_row", 16384)
    if isinstance(row, bool) or not isinstance(row, int) or row < 0:
        raise doc.error("kv_base_row", f"must be an integer >= 0, got {row!r}")
    return Policy(kv_base_row=row, **out)


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
    dram: tuple[tuple[str, Any], ...]      # flattened overrides of the DRAM preset
    resolved: dict[str, Any] = field(compare=False, repr=False)

    @property
    def gpu_system(self) -> bool:
        return self.system in GPU_SYSTEMS


def _resolve(config: dict[str, Any]) -> tuple[dict[str, Any], ModelSpec, Policy]:
    """The resolved config, with the model and policy it loaded on the way (so `setup` loads neither again)."""
    name = config.get("system", "neupims")
    schema.check(NeuPimsConfig, config, name)   # unknown keys, types, allowed values, ranges
    out = {**DEFAULTS, **config, "system": name}
    if out["mapping"] is None:
        out["mapping"] = MAPPING_DEFAULT.get(name, "neupims")
    model = load_model(out["model"])
    if out["tp"] is None:
        out["tp"] = TP_DEFAULT.get(model.name, 1)
    if model.n_heads % out["tp"]:
        raise ConfigError("tp", f"{model.name} has {model.n_heads} heads; tp must divide it, got {out['tp']}")
    policy = _policy(out["mapping"])
    for key in ("sub_batch", "channel_assignment"):
        if out[key] is None:
            out[key] = getattr(policy, key)
    if name in ("npu_only", *GPU_SYSTEMS):
        out["sub_batch"] = False          # nothing runs beside the NPU's attention to interleave with
    if out["preset"] is None and name not in GPU_SYSTEMS:
        out["preset"] = DEVICE_PRESET[name]
    if not _is_trace(out["dataset"]) and out["dataset"] not in serving.DATASETS:
        raise ConfigError("dataset", f"unknown dataset {out['dataset']!r}; known: {', '.join(sorted(serving.DATASETS))}"
                          " or a trace file (.csv / .jsonl)")
    return out, model, policy


def resolve(config: dict[str, Any]) -> dict[str, Any]:
    return _resolve(config)[0]


def setup(config: dict[str, Any]) -> Setup:
    """`config` resolved and typed: what `run` passes down."""
    cfg, model, policy = _resolve(config)
    mode_cls = MODE_CONFIGS[cfg["mode"]]
    mode = mode_cls(**{f.name: cfg[f.name] for f in dataclasses.fields(mode_cls)})
    link = cfg["link_bytes_per_s"]
    return Setup(system=cfg["system"], model=model, tp=cfg["tp"], batch=cfg["batch"], dataset=cfg["dataset"],
                 mode=mode, policy=policy, sub_batch=cfg["sub_batch"], channel_assignment=cfg["channel_assignment"],
                 preset=cfg["preset"], npu=load_npu_config(cfg["npu"]), npu_attention=cfg["npu_attention"],
                 layers=cfg["layers"] or model.n_layers, refresh=cfg["refresh"],
                 link_bytes_per_s=None if link is None else float(link), link_latency_s=float(cfg["link_latency_s"]),
                 gpu=cfg["gpu"], dram=tuple(_dram_overrides(cfg).items()), resolved=cfg)


def _is_trace(dataset: str) -> bool:
    return str(dataset).endswith((".csv", ".jsonl"))


# ---- hardware ------------------------------------------------------------------------------------------------
@dataclass
class Device:
    """One TP shard's hardware: DRAM spec, NPU, and the model slice it holds."""

    system: str
    model: ModelSpec
    tp: int
    layers: int
    spec: DramSpec | None
    npu: NpuConfig
    policy: Policy
    link_bytes_per_s: float | None       # None: ideal interconnect
    link_latency_s: float
    npu_attention: str = "pipelined"
    cache: dict = field(default_factory=dict)     # GEMM schedules and the attention compiler, kept across iterations

    @property
    def heads(self) -> int:
        return self.model.n_heads // self.tp

    @property
    def dram_hz(self) -> float:
        return 1e12 / self.spec.tCK_ps

    def npu_to_dram(self, npu_cycles: float) -> int:
        return math.ceil(npu_cycles * self.dram_hz / self.npu.clock_hz - 1e-9)

    @property
    def kv_capacity_bytes(self) -> int:
        """KV cache room of the TP group: memory of tp devices minus the weights."""
        return self.tp * self.spec.capacity_bytes - self.model.weight_bytes

    @property
    def capacity_tokens_per_channel(self) -> int:
        """A request's KV cache (this device's heads, all layers) lives in one channel (NeuPIMs' PIM tiles)."""
        per_token = self.model.kv_bytes_per_token // self.tp
        free = self.spec.capacity_bytes - self.model.weight_bytes // self.tp
        return max(free // self.spec.channels // per_token, 0)


def build_device(su: Setup) -> Device:
    spec = None
    if not su.gpu_system:
        spec = load_spec(su.preset, dict(su.dram))
        if su.system != "npu_only" and "COMP" not in spec.command_names:
            raise ConfigError("preset", f"{spec.name} has no PIM commands; system {su.system} needs a NeuPIMs device")
        per_device = su.model.weight_bytes / su.tp
        if per_device >= spec.capacity_bytes:
            raise UserError(f"{su.model.name}: its weights take {per_device / 1e9:.1f} GB per device at tp {su.tp}, "
                            f"more than the {spec.capacity_bytes / 1e9:.1f} GB of {spec.name}; raise tp (NeuPIMs "
                            "also splits GPT3-175B over 4 pipeline stages, which archsim does not model)")
    return Device(su.system, su.model, su.tp, su.layers, spec, su.npu, su.policy, su.link_bytes_per_s,
                  su.link_latency_s, su.npu_attention)


def allreduce_s(tp: int, link_bytes_per_s: float | None, link_latency_s: float, nbytes: int) -> float:
    """A ring all-reduce of `nbytes` per device over the TP group (archsim.interconnect.ring's closed form);
    0 on one device or an ideal link (None)."""
    if tp == 1 or link_bytes_per_s is None:
        return 0.0
    return collective_s(RingConfig(tp, link_bytes_per_s, link_latency_s), "all_reduce", nbytes)


def _dram_overrides(cfg: dict[str, Any]) -> dict[str, Any]:
    from archsim.config import flatten

    return flatten(cfg.get("dram") or {})


# ---- the DRAM co-simulation of one stage ---------------------------------------------------------------------
@dataclass
class StageStats:
    name: str
    layer: int
    start: int = 0            # DRAM cycles
    end: int = 0
    npu_busy: int = 0         # NPU array cycles doing GEMM work (summed over arrays), in DRAM cycles
    npu_end: int = 0
    pim_end: int = 0
    vector_busy: int = 0
    link_busy: int = 0
    commands: dict[str, int] = field(default_factory=dict)


def _schedule(dev: Device, m: int, k: int, n: int):
    """(schedule, busy array cycles) of an m x k x n GEMM on one array, cached per device."""
    key = ("gemm", m, k, n)
    if key not in dev.cache:
        sched = schedule_gemm(dev.npu, m, k, n)
        dev.cache[key] = (sched, sched.array_cycles())
    return dev.cache[key]


@lru_cache(maxsize=65536)
def _attention_streams(compiler: AttentionCompiler, context: int, head: int = 0) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...], int, int]:
    """One head's logits and attend streams with rows relative to the request's first KV row, and the rows
    its K and V tiles take (one layer). `head` only matters modulo the heads one GWRITE of q serves (the
    first of them carries the GWRITE)."""
    head = head % (compiler.row_elems // compiler.dk)
    lg, at = Stream(), Stream()
    keys_per_row = compiler.row_elems // compiler.dk
    k_rows = math.ceil(math.ceil(context / compiler.banks) / keys_per_row)
    v_rows = math.ceil(compiler.dk / compiler.banks) * math.ceil(context / compiler.row_elems)
    # the query / score staging rows live just past the KV rows of the head (GWRITE source rows)
    compiler.logits(lg, context, 0, q_row=k_rows + v_rows, head=head)
    compiler.attend(at, context, k_rows, s_row=k_rows + v_rows + 1)
    return lg.arrays(), at.arrays(), k_rows + v_rows + 2, k_rows


@dataclass(frozen=True)
class _Part:
    """The logits (or attend) streams of every head of one channel, concatenated (DecodeSimulator._part)."""

    cmd: np.ndarray
    bank: np.ndarray          # the engine's representative bank of each command's target (global id)
    valid: np.ndarray         # the command names a row
    pos: np.ndarray           # its row past the first KV row, before the layer's offset
    flags: np.ndarray
    est: np.ndarray
    start: np.ndarray         # head j's commands: [start[j], start[j + 1])


@dataclass(frozen=True)
class _ChannelPlan:
    logits: _Part
    attend: _Part
    softmax: list[int]        # each head's softmax, DRAM cycles


class DecodeSimulator:
    """Simulates decode iterations of one device, stage by stage, on one long-lived channel engine."""

    def __init__(self, dev: Device, refresh: bool = True, log: bool = False):
        self.dev = dev
        self.log = log
        self.stream_flags: dict[int, list[tuple[int, int]]] = {}
        spec = dev.spec
        self.attention_on_pim = dev.system in ("neupims", "npu_pim") and dev.policy.attention == "pim"
        if self.attention_on_pim:
            sources = [{"name": "pim", "kind": "stream"}, {"name": "npu", "kind": "rw"}]
            arbitration = "priority" if dev.system == "neupims" else "blocked"
        else:
            sources = [{"name": "npu", "kind": "rw"}]
            arbitration = "frfcfs"
        ctrl = {"refresh": "allbank" if refresh else "none"}
        # a PIM GEMV that would cross a refresh waits for it (NeuPIMs' PIM_HEADER admission)
        self.ms = MemorySystem(spec, ctrl, sources=sources, arbitration=arbitration, log=log,
                               stream_refresh="wait" if self.attention_on_pim else "split", requests=1 << 16,
                               stream_capacity=1 << 14, reuse_slots=True)
        # one exact event loop over the device's memory, in DRAM cycles: every agent (an array's GEMM DMA, a
        # channel's PIM attention, npu_only's KV loads) waits on completion groups of `self.memory`
        self.loop = EventLoop(name=f"{dev.system} stage")
        self.memory = self.loop.add(MemoryUnit("DRAM", self.ms, ticks="cycles"))
        # one load and one store DMA engine per array, each offering up to one request per channel per cycle
        width = spec.channels
        self.ports = [(self.ms.add_port("npu", width), self.ms.add_port("npu", width)) for _ in range(dev.npu.arrays)]
        self.decode = mapping_mod.Decoder(spec, spec.default_mapping)     # tables built once, not per DMA tile
        if self.attention_on_pim and "compiler" not in dev.cache:
            dev.cache["compiler"] = AttentionCompiler(spec, dev.model.d_head)
        self.compiler = dev.cache.get("compiler")
        self._stream_slot = {"pim": int(self.ms.S.src_idx[0, self.ms.source_index("pim")])} if self.attention_on_pim else {}
        self._plans: dict[tuple[int, tuple[int, ...]], _ChannelPlan] = {}    # this iteration's (channel, contexts)
        self._softmax_memo: dict[int, int] = {}
        self.stages: list[StageStats] = []
        self.eb = dev.npu.dtype_bytes
        # address space: weights of every layer from 0, activations after them; KV rows from kv_base_row
        E, tp = dev.model.d_model, dev.tp
        self.gemm_shapes = {"qkv": (E, 3 * E // tp), "proj": (E // tp, E), "ffn1": (E, dev.model.d_ff // tp),
                            "ffn2": (dev.model.d_ff // tp, E)}
        align = spec.row_bytes * spec.total_banks
        self.weight_base: dict[tuple[int, str], int] = {}
        # Each array streams its own block of a GEMM's weights (k x n/arrays, contiguous). Blocks are staggered
        # by channels/arrays channels and banks/arrays banks: arrays streaming side by side then work on
        # different channels and banks. (Aligned blocks all start at channel 0, bank 0: the arrays move through
        # the channels as a convoy, head-of-line blocked at the same channel queue, and fight over one bank.)
        ra = spec.row_bytes
        stagger = ra * max(spec.channels // dev.npu.arrays, 1) + ra * spec.channels * max(
            spec.banks_per_channel // dev.npu.arrays, 1)
        self.block_stride = {}
        at = 0
        for name, (k, n) in self.gemm_shapes.items():
            self.block_stride[name] = math.ceil(k * math.ceil(n / dev.npu.arrays) * self.eb / align) * align + stagger
        for layer in range(dev.layers):
            for name in self.gemm_shapes:
                self.weight_base[(layer, name)] = at
                at += self.block_stride[name] * dev.npu.arrays
        self.act_base = at
        rows_needed = at // (spec.row_bytes * spec.total_banks) + 64
        self.kv_row0 = max(dev.policy.kv_base_row, rows_needed)
        if self.kv_row0 >= spec.rows:
            raise UserError(f"{dev.model.name} / tp {tp}: the weights need {rows_needed} rows of every bank, more "
                            f"than {spec.name}'s {spec.rows}")
        self.vector_free = [0] * dev.npu.vector.pipelines

    # -- NPU ops ---------------------------------------------------------------------------------------------
    def _gemm(self, layer: int, name: str, m: int, start: int, on_array_done, stats: StageStats) -> None:
        """Start GEMM `name` of `layer` at DRAM cycle `start` split over the arrays; `on_array_done(end)` is
        called with each array's end (DRAM cycles)."""
        dev = self.dev
        k, n = self.gemm_shapes[name]
        arrays = dev.npu.arrays
        n_per = math.ceil(n / arrays)
        start_npu = math.ceil(start * dev.npu.clock_hz / self.dev.dram_hz - 1e-9)
        base = self.weight_base[(layer, name)]
        for a in range(arrays):
            na = min(n_per, n - a * n_per)
            if na <= 0:
                continue
            sched, busy = _schedule(dev, m, k, na)
            stats.npu_busy += dev.npu_to_dram(busy)
            bases = {"A": self.act_base, "B": base + a * self.block_stride[name],
                     "C": self.act_base + (1 + a) * (1 << 24)}
            # operands in the tile-blocked layout (weights arranged offline, activations written that way), so
            # a tile is one contiguous range spread over every channel (row-major A with 8 KB rows would put
            # a tile's 1 KB row pieces on a quarter of the channels)
            agent = GemmAgent(self.memory, sched, bases, start_npu, *self.ports[a], self.decode, dev.npu.clock_hz,
                              on_finish=lambda ag: on_array_done(self.dev.npu_to_dram(ag.end_npu)), layout="blocked")
            agent.start()

    def _arrays_used(self, name: str) -> int:
        n = self.gemm_shapes[name][1]
        return math.ceil(n / math.ceil(n / self.dev.npu.arrays))

    def _vector(self, kind: str, n: int, rows: int) -> int:
        return self.dev.npu_to_dram(vector_op_cycles(self.dev.npu, kind, n, rows))

    def _allreduce(self, nbytes: int) -> int:
        """Ring all-reduce across the tp devices (reduce-scatter + all-gather), in DRAM cycles."""
        return math.ceil(allreduce_s(self.dev.tp, self.dev.link_bytes_per_s, self.dev.link_latency_s, nbytes)
                         * self.dev.dram_hz)

    def _npu_program(self, ops: list[tuple], start: int, stats: StageStats) -> None:
        """Run ops in order from `start` (GEMMs through the memory, the rest as fixed latencies); sets
        stats.npu_end when the last op finishes. Ops: ("gemm", layer, name, m), ("vector", kind, n, rows),
        ("allreduce", bytes), ("npu_attention", contexts)."""
        def run(i: int, t: int) -> None:
            while i < len(ops):
                op = ops[i]
                if op[0] == "gemm":
                    ends: list[int] = []
                    expected = self._arrays_used(op[2])

                    def finished(end: int, i=i, ends=ends, expected=expected) -> None:
                        ends.append(end)
                        if len(ends) == expected:
                            run(i + 1, max(ends))
                    self._gemm(op[1], op[2], op[3], t, finished, stats)
                    return
                if op[0] == "vector":
                    d = self._vector(*op[1:])
                    stats.vector_busy += d
                    t += d
                elif op[0] == "allreduce":
                    d = self._allreduce(op[1])
                    stats.link_busy += d
                    t += d
                elif op[0] == "npu_attention":
                    self._npu_attention(op[1], op[2], t, stats, lambda end, i=i: run(i + 1, end))
                    return
                i += 1
            stats.npu_end = max(stats.npu_end, t)
        run(0, start)

    # -- attention on the NPU (npu_only) -----------------------------------------------------------------------
    def _npu_attention(self, layer: int, contexts: list[int], start: int, stats: StageStats, then) -> None:
        """Each request's K and V (its heads on this device) stream over the external bus into the NPU; the
        arrays take requests in turn, loading the next request while computing one (double buffering)."""
        dev = self.dev
        arrays = dev.npu.arrays
        dk, heads = dev.model.d_head, self.heads
        kv_tok = 2 * heads * dk * self.eb
        state = {"left": arrays}
        ends = [start] * arrays
        base = self.act_base + (64 << 24) + layer * (1 << 30) % (self.dev.spec.capacity_bytes // 2)
        offsets = np.cumsum([0] + [c * kv_tok for c in contexts])
        per_array = [list(range(a, len(contexts), arrays)) for a in range(arrays)]

        def compute_cycles(L: int) -> int:
            array = (_schedule(dev, 1, dk, L)[1] + _schedule(dev, 1, L, dk)[1]) * heads
            soft = vector_row_cycles(dev.npu, "softmax", L) * math.ceil(heads / dev.npu.vector.pipelines)
            return dev.npu_to_dram(array + soft)

        # pipelined: each array issues every head's q.K^T and s.V into one instruction pipeline that stays
        # full across heads and requests (a weight block preloads while the previous one streams), and its
        # SIMD vector unit runs a head's softmax while the array goes on with the next heads' q.K^T
        pipes = [ArrayPipeline(dev.npu) for _ in range(arrays)]
        vec_free = [0] * arrays
        qk_instrs = lambda L: _tile_instrs(dev.npu, 1, dk, L)      # noqa: E731
        sv_instrs = lambda L: _tile_instrs(dev.npu, 1, L, dk)      # noqa: E731
        to_npu = dev.npu.clock_hz / dev.dram_hz

        def pipelined_end(a: int, L: int, ready_dram: int) -> tuple[int, int]:
            """(compute start, end) in DRAM cycles of one request's attention on array a's pipeline."""
            pipe = pipes[a]
            ready = math.ceil(ready_dram * to_npu - 1e-9)
            begin = max(ready, pipe.busy_until_cycles)
            soft = vector_row_cycles(dev.npu, "softmax", L)
            soft_end = []
            for _h in range(heads):
                for ins in qk_instrs(L):
                    _s, fin = pipe.issue(ins, ready)
                vec_free[a] = max(vec_free[a], fin) + soft
                soft_end.append(vec_free[a])
            for h in range(heads):
                for ins in sv_instrs(L):
                    pipe.issue(ins, soft_end[h])
            return dev.npu_to_dram(begin), dev.npu_to_dram(pipe.busy_until_cycles)

        def array_run(a: int) -> None:
            reqs = per_array[a]
            loaded: dict[int, int] = {}
            comp_end = [start]

            def issue(j: int, at: int) -> None:
                r = reqs[j]
                lo = int(base + offsets[r])
                addr = np.arange(lo // 64 * 64, lo + contexts[r] * kv_tok, self.dev.spec.access_bytes, dtype=np.uint64)
                addr %= np.uint64(self.dev.spec.capacity_bytes)
                dec = self.decode(addr)
                tag = self.memory.group(len(addr), lambda done, j=j: loaded_cb(j, done))
                self.ms.enqueue_requests(self.ports[a][0], dec["channel"], dec["bank"], dec["row"], dec["column"], 0,
                                         at, tag)

            def loaded_cb(j: int, done: int) -> None:
                loaded[j] = done
                if dev.npu_attention == "pipelined":
                    c0, end = pipelined_end(a, contexts[reqs[j]], done)
                    stats.npu_busy += end - c0
                    comp_end[0] = end
                else:
                    c0 = max(done, comp_end[0])
                    c = compute_cycles(contexts[reqs[j]])
                    stats.npu_busy += c
                    comp_end[0] = c0 + c
                if j + 1 < len(reqs):
                    issue(j + 1, max(done, c0))       # the other buffer half is free once j starts computing
                else:
                    ends[a] = comp_end[0]
                    state["left"] -= 1
                    if state["left"] == 0:
                        then(max(ends))

            if reqs:
                issue(0, start)
            else:
                state["left"] -= 1
                if state["left"] == 0:
                    then(max(ends))

        for a in range(arrays):
            array_run(a)

    @property
    def heads(self) -> int:
        return self.dev.heads

    # -- attention on PIM ----------------------------------------------------------------------------------------
    def _channel_plan(self, ch: int, contexts: tuple[int, ...]) -> _ChannelPlan:
        """The layer-independent part of one channel's attention streams (every layer of an iteration runs the
        same requests: only the rows' layer offset differs), built once per iteration and channel."""
        key = (ch, contexts)
        plan = self._plans.get(key)
        if plan is None:
            comp = self.compiler
            heads_per_gwrite = comp.row_elems // comp.dk
            lg, at, base = [], [], []
            row = self.kv_row0
            for L in contexts:
                for h in range(self.heads):
                    (lg_h, at_h, rows_per_head, _k) = _attention_streams(comp, L, h % heads_per_gwrite)
                    lg.append(lg_h)
                    at.append(at_h)
                    base.append(row)
                    row += rows_per_head
            softmax = [self._softmax_cycles(L) for L in contexts for _h in range(self.heads)]
            plan = self._plans[key] = _ChannelPlan(self._part(ch, lg, base), self._part(ch, at, base), softmax)
        return plan

    def _part(self, ch: int, streams: list[tuple[np.ndarray, ...]], base: list[int]) -> _Part:
        """Streams (one per head) concatenated, banks as the engine keeps them (its representative bank of the
        command's target), rows as positions past the first KV row before the layer's offset."""
        B = self.dev.spec.banks_per_channel
        n = np.array([len(p[0]) for p in streams], dtype=np.int64)
        cmd, local, rel, flags, est = (np.concatenate([p[i] for p in streams]) for i in range(5))
        if local.min() < 0 or local.max() >= B:
            raise EngineError(f"attention stream bank out of range for {self.dev.spec.name}")
        pos = rel + np.repeat(np.asarray(base, dtype=np.int64), n)
        return _Part(cmd, ch * B + self.ms.tables.rep[cmd, local], rel >= 0, pos, flags, est,
                     np.concatenate([[0], np.cumsum(n)]))

    def _layer_rows(self, part: _Part, layer: int) -> np.ndarray:
        """A part's rows in `layer` (each layer's KV caches sit 97 rows further, wrapping in the KV region)."""
        span = self.dev.spec.rows - self.kv_row0
        return np.where(part.valid, (part.pos + layer * 97) % span + self.kv_row0, -1)

    def _softmax_cycles(self, L: int) -> int:
        d = self._softmax_memo.get(L)
        if d is None:
            d = self._softmax_memo[L] = self.dev.npu_to_dram(vector_row_cycles(self.dev.npu, "softmax", L))
        return d

    def _pim_attention(self, layer: int, requests: list[tuple[int, int]], start: int, stats: StageStats) -> None:
        """requests: (context, channel). Per channel, the logits GEMVs of every request and head go first (one
        stream); each head's softmax runs on a vector pipeline when its logits are done, and its attend GEMV
        is appended to the channel's stream at the softmax's end."""
        by_ch: dict[int, list[int]] = {}
        for L, ch in requests:
            by_ch.setdefault(ch, []).append(L)
        stats.pim_end = max(stats.pim_end, start)
        done = functools.partial(self._pim_done, stats)
        for ch, contexts in by_ch.items():
            plan = self._channel_plan(ch, tuple(contexts))
            lg, at = plan.logits, plan.attend
            at_rows = self._layer_rows(at, layer)
            # tags: one completion group per head's logits GEMV, whose end starts the head's softmax
            group = self.memory.group
            tags = np.repeat(np.array([
                group(int(lg.start[j + 1] - lg.start[j]),
                      functools.partial(self._softmax_then_attend, ch, at, at_rows, j, plan.softmax[j], stats, done))
                for j in range(len(plan.softmax))], dtype=np.int64), np.diff(lg.start))
            self._append("pim", ch, lg.cmd, lg.bank, self._layer_rows(lg, layer), lg.flags, lg.est, tags, start)

    def _softmax_then_attend(self, ch: int, at: _Part, rows: np.ndarray, j: int, d: int, stats: StageStats, done,
                             logits_done: int) -> None:
        free = heapq.heappop(self.vector_free)
        begin = max(free, logits_done)
        heapq.heappush(self.vector_free, begin + d)
        stats.vector_busy += d
        a, b = int(at.start[j]), int(at.start[j + 1])
        tag = self.memory.group(b - a, done)
        self._append("pim", ch, at.cmd[a:b], at.bank[a:b], rows[a:b], at.flags[a:b], at.est[a:b], tag, begin + d)

    def _append(self, source: str, ch: int, cmd, bank, row, flags, est, tag, at: int) -> None:
        """`MemorySystem.enqueue_stream` of commands checked once when their plan was built (bank: the engine's
        representative bank; archsim.engine.reuse drives the engine the same way)."""
        ms = self.ms
        ms._append_stream(ch * ms.n_st + self._stream_slot[source], cmd, bank, row, -1, flags, est, tag,
                          max(int(ms.S.clock[0]), int(at)))
        if self.log:     # per channel, (command, segment flags) of the stream in enqueue order (tests read them)
            self.stream_flags.setdefault(ch, []).extend(zip(cmd.tolist(), flags.tolist(), strict=True))

    @staticmethod
    def _pim_done(stats: StageStats, done: int) -> None:
        stats.pim_end = max(stats.pim_end, done)

    # -- one stage -----------------------------------------------------------------------------------------------
    def run_stage(self, name: str, layer: int, npu_ops: list[tuple], pim: tuple[int, list[tuple[int, int]]] | None,
                  start: int) -> StageStats:
        st = StageStats(name, layer, start=start, npu_end=start, pim_end=start)
        before = self.ms.S.cmd_count.sum(axis=0).copy()
        self.vector_free = [start] * self.dev.npu.vector.pipelines
        if pim is not None and pim[1]:
            self._pim_attention(pim[0], pim[1], start, st)
        if npu_ops:
            self._npu_program(npu_ops, start, st)
        self.loop.run()
        st.end = max(st.npu_end, st.pim_end, start)
        counts = self.ms.S.cmd_count.sum(axis=0) - before
        st.commands = {n: int(c) for n, c in zip(self.dev.spec.command_names, counts, strict=True) if c}
        self.ms.recycle_requests()
        self.stages.append(st)
        return st

    # -- one decode iteration -------------------------------------------------------------------------------------
    def layer_ops(self, layer: int, b: int) -> tuple[list[tuple], list[tuple]]:
        """(QKV ops, Proj+FFN ops) of one layer for a sub-batch of b requests."""
        m = self.dev.model
        E = m.d_model
        act = b * E * self.eb
        qkv = [("vector", "layernorm", E, b), ("gemm", layer, "qkv", b)]
        post = [("gemm", layer, "proj", b), ("allreduce", act), ("vector", "add", E, b),
                ("vector", "layernorm", E, b), ("gemm", layer, "ffn1", b),
                ("vector", "gelu", m.d_ff // self.dev.tp, b), ("gemm", layer, "ffn2", b), ("allreduce", act),
                ("vector", "add", E, b)]
        return qkv, post

    def iteration(self, contexts: list[int], channels: list[int], sub_batch: bool, start: int = 0,
                  on_layer=None) -> int:
        """One decode step of every request (context lengths after the step) through all layers; returns the
        end cycle. channels: the channel holding each request's KV cache (-1 never happens here). on_layer(k,
        cycle): called as the k-th layer's last stage ends (progress of a long iteration)."""
        on_layer = on_layer or (lambda k, cycle: None)
        self._plans = {}
        n = len(contexts)
        L = self.dev.layers
        reqs = list(zip(contexts, channels, strict=True))
        t = start
        if not sub_batch:
            for layer in range(L):
                qkv, post = self.layer_ops(layer, n)
                t = self.run_stage("A", layer, qkv, None, t).end
                if self.attention_on_pim:
                    t = self.run_stage("B", layer, [], (layer, reqs), t).end
                else:
                    t = self.run_stage("B", layer, [("npu_attention", layer, contexts)], None, t).end
                t = self.run_stage("E", layer, post, None, t).end
                on_layer(layer + 1, t)
            return t
        sb1, sb2 = serving.partition_sub_batches(channels, self.dev.spec.channels)
        subs = [[reqs[i] for i in sb1], [reqs[i] for i in sb2]]
        sizes = [len(s) for s in subs]
        ops = [[self.layer_ops(layer, max(sizes[s], 1)) for s in (0, 1)] for layer in range(L)]
        # A: QKV(SB1) | B: QKV(SB2) + MHA(SB1) | C: post(SB1)+QKV'(SB1) + MHA(SB2) | D: post(SB2)+QKV'(SB2) +
        # MHA'(SB1) ... | E: post(SB1) + MHA(SB2) | F: post(SB2)   (primes: the next layer)
        t = self.run_stage("A", 0, ops[0][0][0], None, t).end
        t = self.run_stage("B", 0, ops[0][1][0], (0, subs[0]), t).end
        for layer in range(L - 1):
            t = self.run_stage("C", layer, ops[layer][0][1] + ops[layer + 1][0][0], (layer, subs[1]), t).end
            t = self.run_stage("D", layer, ops[layer][1][1] + ops[layer + 1][1][0], (layer + 1, subs[0]), t).end
            on_layer(layer + 1, t)
        t = self.run_stage("E", L - 1, ops[L - 1][0][1], (L - 1, subs[1]), t).end
        t = self.run_stage("F", L - 1, ops[L - 1][1][1], None, t).end
        on_layer(L, t)
        return t


# ---- channel assignment and batches ---------------------------------------------------------------------------
def assign(dev: Device, contexts: list[int], policy: str) -> list[int]:
    nch = dev.spec.channels
    cap = dev.capacity_tokens_per_channel
    if policy == "gmlbp":
        out = serving.assign_channels_gmlbp(contexts, nch, serving.mha_load_fn(dev.model, dev.tp), capacity_tokens=cap)
    else:
        out = serving.assign_channels_round_robin(contexts, nch, capacity_tokens=cap)
    if -1 in out:
        need = sum(contexts) * dev.model.kv_bytes_per_token
        raise UserError(f"the batch's KV cache does not fit: {len(contexts)} requests with {sum(contexts)} tokens "
                        f"need {need / 2**30:.1f} GiB of KV cache, the {dev.tp} device(s) hold "
                        f"{dev.kv_capacity_bytes / 2**30:.1f} GiB next to the weights")
    return out


def sample_batch(dataset: str, batch: int, rng: np.random.Generator) -> list[int]:
    """Context lengths of a running batch: requests sampled from the dataset, each at a uniformly random
    point of its generation (NeuPIMs warms a batch with sampled lengths)."""
    if _is_trace(dataset):
        reqs = serving.read_trace(dataset)
        pick = rng.integers(0, len(reqs), batch)
        prompt = np.array([reqs[i].prompt_tokens for i in pick])
        out = np.array([reqs[i].output_tokens for i in pick])
    else:
        reqs = serving.generate_requests(batch, dataset, seed=int(rng.integers(1 << 31)))
        prompt = np.array([r.prompt_tokens for r in reqs])
        out = np.array([r.output_tokens for r in reqs])
    done = rng.integers(0, np.maximum(out, 1))
    return (prompt + done + 1).tolist()


# ---- GPU-only ---------------------------------------------------------------------------------------------------
def gpu_iteration_s(su: Setup, contexts: list[int]) -> tuple[float, dict]:
    """One decode iteration (su.layers layers) of one TP shard on the GPU (preset su.gpu); the all-reduces over the same link
    as the NPU systems.

    gpu_roofline: max(FLOPs / peak, bytes / bandwidth) per operator (efficiencies from the preset), nothing
    else: an upper bound on any A100 software.
    gpu_only (the paper's baseline, PyTorch on an A100): every kernel HF-style eager PyTorch launches for a
    layer (the preset's `framework.kernels_per_op`) costs its host dispatch (`host_overhead_per_kernel_s`)
    and its own device roofline; the host runs ahead of the device (asynchronous launches), so a layer takes
    max(host, device). Attention reads each request's own K and V (no padding to the batch's longest context:
    our assumption, the favourable one for the GPU); the KV append is torch.cat (HF eager), which rewrites
    the whole cache every step (preset `kv_append_copies_cache`)."""
    from archsim.host.baselines import Baseline

    gpu = Baseline.load(su.gpu)
    model, tp, layers = su.model, su.tp, su.layers
    flops_s = gpu.peak_matmul_flops_per_s * gpu.compute_efficiency
    bw = gpu.peak_bandwidth_bytes_per_s * gpu.bandwidth_efficiency
    b = len(contexts)
    E, F, eb = model.d_model, model.d_ff, 2
    heads = model.n_heads // tp
    ar = 2 * allreduce_s(tp, su.link_bytes_per_s, su.link_latency_s, b * E * eb)
    gemms = [max(2 * b * k * n / flops_s, (k * n + b * (k + n)) * eb / bw)
             for k, n in ((E, 3 * E // tp), (E // tp, E), (E, F // tp), (F // tp, E))]
    if su.system == "gpu_roofline":
        kv_bytes = sum(contexts) * 2 * E // tp * eb
        attn = max(4 * sum(contexts) * E // tp / flops_s, kv_bytes / bw)
        per_layer = sum(gemms) + attn + ar
        return per_layer * layers, {"gemm_s": sum(gemms) * layers, "attention_s": attn * layers,
                                    "allreduce_s": ar * layers}
    kpo = gpu.kernels_per_op
    act = b * E * eb                               # one activation vector per request
    padded = sum(contexts)                         # KV tokens attention reads (ragged, no padding)
    kv_half = padded * E // tp * eb                # K (or V) bytes of this shard
    scores = padded * heads * eb
    # (kernels, device seconds) per operator of one layer; elementwise kernels read and write their tensor
    ops = {
        "layernorm": (2 * kpo["layernorm"], 2 * 2 * act / bw),
        "gemm": (4 * (kpo["gemm"] + gpu.bias_extra_kernels), sum(gemms) + 4 * 2 * act / bw),
        "kv_append": (kpo["kv_append"], (4 if gpu.kv_append_copies_cache else 2) * kv_half / bw),
        "attn_score": (kpo["attn_score"], max(2 * padded * E // tp / flops_s, kv_half / bw)
                       + (kpo["attn_score"] - 1) * 2 * scores / bw),
        "softmax": (kpo["softmax"], (kpo["softmax"] - 1) * 2 * scores / bw + 2 * scores / bw),
        "attn_context": (kpo["attn_context"], max(2 * padded * E // tp / flops_s, kv_half / bw) + 2 * act / tp / bw),
        "residual_add": (2 * kpo["residual_add"], 2 * 3 * act / bw),
        "gelu": (kpo["gelu"], kpo["gelu"] * 2 * b * F // tp * eb / bw),
    }
    kernels = sum(k for k, _ in ops.values())
    host = kernels * gpu.host_overhead_per_kernel_s
    device = sum(d for _, d in ops.values())
    body = max(host, device) if gpu.overlap_host_and_device else host + device
    per_layer = body + ar
    return per_layer * layers, {"host_s": host * layers, "device_s": device * layers, "allreduce_s": ar * layers,
                                "kernels_per_layer": kernels,
                                "attention_s": (ops["attn_score"][1] + ops["attn_context"][1] + ops["softmax"][1]
                                                + ops["kv_append"][1]) * layers}


# ---- runs ------------------------------------------------------------------------------------------------------
def _stage_frame(stages: list[StageStats], dev: Device) -> pd.DataFrame:
    ns = dev.spec.tCK_ps / 1000
    rows = []
    for s in stages:
        dur = max(s.end - s.start, 1)
        bursts = sum(s.commands.get(c, 0) for c in ("RD", "RDA", "WR", "WRA"))
        comps = s.commands.get("COMP", 0)
        rows.append({
            "stage": s.name, "layer": s.layer, "start_cycle": s.start, "cycles": s.end - s.start,
            "seconds": (s.end - s.start) * ns * 1e-9,
            "npu_util": s.npu_busy / (dur * dev.npu.arrays),
            "pim_util": comps * dev.spec.timing["nCOMP"] / (dur * dev.spec.channels),
            "mem_bw_util": bursts * dev.spec.timing["nBL"] / (dur * dev.spec.channels),
            "npu_end_cycle": s.npu_end, "pim_end_cycle": s.pim_end, "vector_cycles": s.vector_busy,
            "link_cycles": s.link_busy, **{f"n_{k}": v for k, v in s.commands.items()},
        })
    return pd.DataFrame(rows).fillna(0)


def _energy_j(dev: Device, stage_df: pd.DataFrame, cycles: int) -> dict[str, float]:
    """DRAM energy of one device by component (J): the post-pass over the command counts (NeuPIMs compares
    memory energy, its Table 5)."""
    from archsim import energy as energy_mod

    counts = {c[2:]: int(stage_df[c].sum()) for c in stage_df.columns if c.startswith("n_")}
    pj = energy_mod.dram_energy_pj(dev.spec, counts, cycles, dev.spec.channels)
    return {k: v * 1e-12 for k, v in pj.items()}


def run_iteration_mode(su: Setup, seed: int) -> Result:
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    samples = su.mode.samples
    rows, stage_frames = [], []
    if su.gpu_system:
        for s in range(samples):
            ctx = sample_batch(su.dataset, su.batch, rng)
            sec, parts = gpu_iteration_s(su, ctx)
            rows.append({"sample": s, "batch": len(ctx), "mean_context": float(np.mean(ctx)), "seconds": sec,
                         "tokens_per_s": len(ctx) / sec, **parts})
        df = pd.DataFrame(rows)
        stats = {"tokens_per_s": float(df["tokens_per_s"].mean()), "iteration_s": float(df["seconds"].mean()),
                 "wall_s": time.perf_counter() - t0}
        return Result(stats=stats, df=df, manifest=make_manifest(su.system, su.resolved, seed=seed))
    dev = build_device(su)
    sim_cycles = 0
    for s in range(samples):
        ctx = sample_batch(su.dataset, su.batch, rng)
        chans = assign(dev, ctx, su.channel_assignment)
        sim = DecodeSimulator(dev, refresh=su.refresh)

        def on_layer(k, cycle, s=s):
            progress.report("layers", s * dev.layers + k, samples * dev.layers,
                            cycle * dev.spec.tCK_ps * 1e-12, f"sample {s + 1} of {samples}")

        end = sim.iteration(ctx, chans, su.sub_batch, on_layer=on_layer)
        sec = end * dev.spec.tCK_ps * 1e-12
        sf = _stage_frame(sim.stages, dev)
        sf.insert(0, "sample", s)
        stage_frames.append(sf)
        e = _energy_j(dev, sf, end)
        rows.append({"sample": s, "batch": len(ctx), "mean_context": float(np.mean(ctx)), "cycles": end,
                     "seconds": sec, "tokens_per_s": len(ctx) / sec,
                     "npu_util": float((sf["npu_util"] * sf["cycles"]).sum() / end),
                     "pim_util": float((sf["pim_util"] * sf["cycles"]).sum() / end),
                     "mem_bw_util": float((sf["mem_bw_util"] * sf["cycles"]).sum() / end),
                     "energy_j": sum(e.values()) * dev.tp, "kernel_wall_s": sim.ms.wall_s})
        sim_cycles += end
    df = pd.DataFrame(rows)
    stages = pd.concat(stage_frames, ignore_index=True)
    wall = time.perf_counter() - t0
    tok = float(df["batch"].sum())
    stats = {"tokens_per_s": float(df["tokens_per_s"].mean()), "iteration_s": float(df["seconds"].mean()),
             "npu_util": float(df["npu_util"].mean()), "pim_util": float(df["pim_util"].mean()),
             "mem_bw_util": float(df["mem_bw_util"].mean()), "energy_per_token_j": float(df["energy_j"].sum() / tok),
             "simulated_cycles": int(sim_cycles), "wall_s": wall, "cycles_per_s": sim_cycles / wall}
    res = Result(stats=stats, df=df, manifest=make_manifest(su.system, su.resolved, seed=seed))
    res.tables["stages"] = stages
    res.tables["timeline"] = _timeline(stages[stages["sample"] == 0], dev)
    return res


def _timeline(stages: pd.DataFrame, dev: Device) -> pd.DataFrame:
    """Per stage, when the NPU and the PIM side were busy (start of the stage to each side's last event),
    in the columns `archsim report` draws as a unit-busy timeline."""
    s = dev.spec.tCK_ps * 1e-12
    rows = []
    for _, r in stages.iterrows():
        op = f"{r['stage']}{int(r['layer'])}"
        for unit, end in (("NPU", r["npu_end_cycle"]), ("PIM", r["pim_end_cycle"])):
            if end > r["start_cycle"]:
                rows.append({"unit": unit, "op": op, "start_s": r["start_cycle"] * s, "end_s": end * s})
    return pd.DataFrame(rows, columns=["unit", "op", "start_s", "end_s"])


def run_serving_mode(su: Setup, seed: int) -> Result:
    t0 = time.perf_counter()
    model, layers, mode = su.model, su.layers, su.mode
    if _is_trace(su.dataset):
        requests = serving.read_trace(su.dataset)[:mode.requests]
    else:
        requests = serving.generate_requests(mode.requests, su.dataset, seed=seed)
    dev = None if su.gpu_system else build_device(su)
    channel_of: dict[int, int] = {}
    sim_cycles = [0]
    state: dict[str, Any] = {}

    npu = su.npu
    prefill_cache: dict[int, float] = {}

    def prefill_s(prompt: int) -> float:
        """The prompt on standalone NPUs (one per TP shard, the same NPU model): every GEMM of a layer with the
        tile model on its arrays (N split over the arrays; prompt GEMMs are compute-bound, so DMA is not
        simulated), q.K^T and s.V per head, x layers."""
        if prompt not in prefill_cache:
            E, F, tp, dk = model.d_model, model.d_ff, su.tp, model.d_head
            cycles = 0
            for k, n in ((E, 3 * E // tp), (E // tp, E), (E, F // tp), (F // tp, E)):
                cycles += schedule_gemm(npu, prompt, k, math.ceil(n / npu.arrays)).compute_only_cycles()
            heads = model.n_heads // tp
            per_head = (schedule_gemm(npu, prompt, dk, prompt).compute_only_cycles()
                        + schedule_gemm(npu, prompt, prompt, dk).compute_only_cycles())
            cycles += math.ceil(heads / npu.arrays) * per_head
            prefill_cache[prompt] = layers * cycles / npu.clock_hz
        return prefill_cache[prompt]

    def iteration_s(batch: serving.Batch) -> float:
        decode = [e for e in batch.entries if e.phase == "decode"]
        pre = max((prefill_s(e.new_tokens) for e in batch.entries if e.phase == "prefill"), default=0.0)
        if not decode:
            return pre
        ctx = [e.context_tokens for e in decode]
        if dev is None:
            return max(pre, gpu_iteration_s(su, ctx)[0])
        # a request keeps the channel its KV cache was placed on at admission (greedy on current loads)
        new = [i for i, e in enumerate(decode) if e.request_id not in channel_of]
        if new:
            loads = [0.0] * dev.spec.channels
            load_fn = serving.mha_load_fn(model, dev.tp)
            for e in decode:
                if e.request_id in channel_of:
                    loads[channel_of[e.request_id]] += load_fn(e.context_tokens)
            sub = [ctx[i] for i in new]
            if su.channel_assignment == "gmlbp":
                chans = serving.assign_channels_gmlbp(sub, dev.spec.channels, load_fn, initial_loads=loads)
            else:
                chans = [(len(channel_of) + j) % dev.spec.channels for j in range(len(sub))]
            for i, ch in zip(new, chans, strict=True):
                channel_of[decode[i].request_id] = ch
        chans = [channel_of[e.request_id] for e in decode]
        # one device for the whole run: its DRAM state (open rows, refresh phase) carries over between iterations
        if "sim" not in state:
            state["sim"] = DecodeSimulator(dev, refresh=su.refresh)
        sim = state["sim"]
        start = state.get("clock", 0)
        end = sim.iteration(ctx, chans, su.sub_batch, start=start)
        state["clock"] = end
        sim_cycles[0] += end - start
        return max(pre, (end - start) * dev.spec.tCK_ps * 1e-12)

    cap = (dev.kv_capacity_bytes if dev is not None else su.tp * 40 * 2**30 - model.weight_bytes)
    batcher = serving.ContinuousBatcher(su.batch, int(cap), model.kv_bytes_per_token, iteration_s,
                                        max_iterations=mode.max_iterations)
    out = batcher.run(requests)
    it = out.iterations_df()
    rq = out.requests_df()
    tbt = np.repeat(it["duration_s"].to_numpy(), it["decode_tokens"].to_numpy())
    ttft = (rq["first_token_s"] - rq["arrival_s"]).to_numpy()
    wall = time.perf_counter() - t0
    stats = {"tokens_per_s": out.output_tokens_per_s, "makespan_s": out.makespan_s, "iterations": len(it),
             "wall_s": wall, "simulated_cycles": sim_cycles[0]}
    for p in (50, 90, 99):
        stats[f"tbt_p{p}_s"] = float(np.percentile(tbt, p)) if len(tbt) else 0.0
        stats[f"ttft_p{p}_s"] = float(np.percentile(ttft, p))
    res = Result(stats=stats, df=it, manifest=make_manifest(su.system, su.resolved, seed=seed))
    res.tables["requests"] = rq
    return res


def run(config: dict[str, Any], seed: int = 0) -> Result:
    su = setup(config)
    if isinstance(su.mode, ServingMode):
        return run_serving_mode(su, seed)
    return run_iteration_mode(su, seed)


for _name in SYSTEMS:
    register(_name, resolve=resolve, schema=NeuPimsConfig, stats=from_code((run_iteration_mode, "stats"), (run_serving_mode, "stats")))(run)
