"""Duplex compiler: one serving stage (a continuous-batching iteration) of a model on a multi-device system,
as operators with their Op/B, dispatched to the xPU or the low-Op/B unit, laid out in bundle spaces, timed
and costed.

Parallelism (the paper's baseline scheme, DeepSpeed-MoE style): attention, dense FFNs and the LM head are
tensor-parallel over all `devices`; experts are expert-parallel (expert e on device e mod devices), and
tensor-parallel inside an expert when devices outnumber experts. A layer's time is the slowest device's.
Within a device, a low-unit expert is split over all stacks (gate/up by columns, down by rows) and its
partial sums are all-reduced by the xPU across stacks, once per layer after all experts [P].

Per layer: attention block  qkv (xPU) -> prefill attention (xPU) || decode attention (low) -> out_proj (xPU)
-> all-reduce; FFN block  gate (xPU) -> all-to-all -> experts on xPU || experts on low -> stack all-reduce ->
all-to-all (MoE), or dense FFN -> all-reduce. `||` runs in parallel only with co-processing (attention
co-processing / expert co-processing); otherwise one unit is active at a time.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from archsim import schema
from archsim.config import deep_merge
from archsim.dram.spec import DramSpec, load_spec
from archsim.errors import ConfigError
from archsim.paths import resolve
from archsim.pim.logic_pim import (
    SPACES,
    DuplexDevices,
    LogicPimTimer,
    Segment,
    bundle_bandwidth_bytes_per_s,
    external_bandwidth_bytes_per_s,
    pch_per_stack,
    spaces_per_pch,
)
from archsim.pim.logic_pim import (
    devices as device_preset,
)
from archsim.schema import REQUIRED, opt
from archsim.systems.duplex.config import DEVICE_KINDS
from archsim.workload.spec import ModelSpec

UNITS = ("xpu", "low")
STAGE_KINDS = ("decode", "mixed")
LAYER_KINDS = ("qkv", "attention_prefill", "attention_decode", "out_proj", "moe", "dense_ffn", "lm_head")
LOW_CAPABLE = ("attention_decode", "moe", "dense_ffn")      # memory-streaming ops the low unit can run
INTERFERENCE = ("engine", "none")                            # co-processing interference model
BYTES_PER_ROW = 8192                                         # one bundle row of one pseudo-channel


# ---- policy ----------------------------------------------------------------------------------------------
EXPERT_PLACEMENTS = ("per_device", "global_modulo")
NON_EXPERT_PARALLEL = ("all_devices", "per_node")
EXPERT_ALLREDUCE = ("all_tokens", "node_tokens")


@dataclass(frozen=True)
class LayoutPolicy:
    """Where tensors live among a pseudo-channel's bundle spaces (each space striped over every pseudo-channel)."""

    expert_spaces: tuple[int, ...] = opt(REQUIRED, "spaces the experts' weights go round-robin over")
    kv_spaces: tuple[int, ...] = opt(REQUIRED, "spaces the KV cache alternates over")
    prefill_qkv_space: int = opt(REQUIRED, "space of prefill's new Q/K/V (not a KV space); migrated into the KV "
                                 "spaces once after attention")
    expert_placement: str = opt("per_device", "how experts map onto spaces: per device, or one global modulo",
                                choices=EXPERT_PLACEMENTS)
    spaces: int = opt(SPACES, "bundle spaces per pseudo-channel the layout is written for: 4 (HBM3: 2 stack IDs "
                      "x 2 bundles) or 2 (HBM2 pseudo-channel mode)", choices=(2, 4))

    def __post_init__(self) -> None:
        n = self.spaces
        for key in ("expert_spaces", "kv_spaces"):
            v = getattr(self, key)
            if not v or any(isinstance(sp, bool) or not isinstance(sp, int) or not 0 <= sp < n for sp in v):
                raise ConfigError(key, f"must be a non-empty list of spaces 0..{n - 1}, got {list(v)!r}")
        q = self.prefill_qkv_space
        if not 0 <= q < n or q in self.kv_spaces:
            raise ConfigError("prefill_qkv_space", f"must be a space 0..{n - 1} not among kv_spaces, got {q!r}")


@dataclass(frozen=True)
class Policy:
    """A Duplex mapping policy (mappings/duplex*.yaml): which unit runs each layer kind, and the layout."""

    rule: str = opt(REQUIRED, "dispatch by the table below, or by Op/B against opb_threshold",
                    choices=("table", "opb"))
    opb_threshold: float = opt(REQUIRED, "rule opb: layers at or below this Op/B run on the low unit", above=0)
    dispatch: dict[str, dict[str, str]] = opt(REQUIRED, "rule table: the unit (xpu, low) of each layer kind, per "
                                              f"stage kind ({', '.join(STAGE_KINDS)})")
    attention_coprocessing: bool = opt(REQUIRED, "decode attention beside prefill attention (both units at once)")
    expert_coprocessing: bool = opt(REQUIRED, "split experts between the xPU and the low unit")
    expert_tensor_parallel: bool = opt(REQUIRED, "experts sliced over the devices (else whole experts per device)")
    non_expert_parallel: str = opt("all_devices", "how attention, dense FFNs, the MoE gate and the LM head lay out "
                                   "over the devices: all_devices = tensor-parallel over every device (their "
                                   "all-reduces cross InfiniBand beyond one node); per_node = tensor-parallel "
                                   "inside a node, the nodes data-parallel (each takes every n-th sequence), the "
                                   "experts still over every device and only the tokens bound for another node's "
                                   "experts crossing InfiniBand (LLMSimulator's layout as its driver runs it)",
                                   choices=NON_EXPERT_PARALLEL)
    norm_and_residual: bool = opt(False, "time each layer's two norms and two residual adds on the xPU (rooflines "
                                  "over the whole activations on every device, as LLMSimulator times them); false: "
                                  "not timed")
    time_lm_head: bool = opt(True, "time the LM head on the xPU; false: no time (LLMSimulator's LM head times "
                             "nothing)")
    expert_allreduce: str = opt("all_tokens", "expert_tensor_parallel: the tokens whose partial outputs the expert "
                                "slices all-reduce over their group: all_tokens = every token of the stage (a "
                                "node's slices hold partial outputs for tokens from every node); node_tokens = the "
                                "node's own tensor-parallel group's tokens (LLMSimulator sizes it by the MoE "
                                "layer's input). The two differ only with non_expert_parallel per_node on more "
                                "than one node", choices=EXPERT_ALLREDUCE)
    layout: LayoutPolicy = opt(LayoutPolicy, "the layout of tensors over bundle spaces")
    name: str = opt("", "the policy's name")

    def __post_init__(self) -> None:
        object.__setattr__(self, "opb_threshold", float(self.opb_threshold))
        for stage in STAGE_KINDS:
            if not isinstance(self.dispatch.get(stage), dict):
                raise ConfigError(f"dispatch.{stage}", f"missing; give a unit ({', '.join(UNITS)}) per layer kind")
        for stage, table in self.dispatch.items():
            if stage not in STAGE_KINDS:
                raise ConfigError(f"dispatch.{stage}", f"unknown stage kind; allowed: {', '.join(STAGE_KINDS)}")
            for kind, unit in table.items():
                if kind not in LAYER_KINDS:
                    raise ConfigError(f"dispatch.{stage}.{kind}", f"unknown layer kind; allowed: {', '.join(LAYER_KINDS)}")
                if unit not in UNITS:
                    raise ConfigError(f"dispatch.{stage}.{kind}", f"must be one of {', '.join(UNITS)}, got {unit!r}")
                if unit == "low" and kind not in LOW_CAPABLE:
                    raise ConfigError(f"dispatch.{stage}.{kind}", f"the low unit runs only {', '.join(LOW_CAPABLE)}")


def load_policy(name: str = "duplex", overrides: dict[str, Any] | None = None) -> Policy:
    """A Duplex mapping policy by name (mappings/) or path; `overrides` (a mapping in the file's shape, e.g.
    {"layout": {"expert_placement": "global_modulo"}}) replace its values key by key."""
    return schema.load(Policy, resolve("mappings", name), overrides, label="mapping_overrides")


# ---- devices ---------------------------------------------------------------------------------------------
@dataclass
class Device:
    """One package: xPU roofline plus (optionally) a low-Op/B unit, and the links between packages."""

    kind: str
    xpu_flops: float
    xpu_bw: float
    memory_bytes: int
    stacks: int
    low: str | None                        # logic_pim / bank_pim / bankgroup_pim / None
    low_flops: float = 0.0
    low_bw: float = 0.0
    low_pj_per_bit: float = 0.0
    xpu_pj_per_bit: float = 0.0
    act_pj: float = 0.0
    row_bytes: int = 1024
    mac_pj: float = 0.0
    timer: LogicPimTimer | None = None     # engine timing of Logic-PIM ops (None: roofline)
    links: dict[str, Any] = field(default_factory=dict)
    spec: DramSpec | None = None           # the stacks' DRAM (the devices preset's `dram`), loaded once

    @property
    def xpu_ridge(self) -> float:
        return self.xpu_flops / self.xpu_bw


def with_command_path(spec: DramSpec, command_path: str) -> DramSpec:
    """`spec` with Logic-PIM's bundle commands on `command_path` (own_path | shared_column_bus)."""
    if spec.options.get("logic_pim.command_path") == command_path:
        return spec
    if "logic_pim.command_path" not in spec.options:
        raise ConfigError("command_path", f"{spec.name} has no Logic-PIM command path to choose")
    return load_spec(deep_merge(spec.raw, {"extension_options": {"logic_pim": {"command_path": command_path}}}))


SPLIT_RULES = ("interference_aware", "lookup_table", "llmsimulator")
# coprocessing_split llmsimulator: the rule LLMSimulator (the Duplex authors' simulator) splits a device's experts
# by (getIdxHigh / getIdxHighOptimal, src/module/route.cpp:34-127 of the helios fork, called per MoE layer from
# Route::forward, route.cpp:235-244, when parallel_execution is on). Its two constants: both units' times are
# scaled by a bandwidth factor of 0.75 (route.cpp:38-39 for the xPU, 45 and 57 for Logic-PIM), and above 4
# local experts the experts move in 4 groups of consecutive local experts (route.cpp:81-103).
LLMSIM_BANDWIDTH_FACTOR = 0.75
LLMSIM_SPLIT_GROUPS = 4


def llmsimulator_xpu_set(tokens: list[int], xpu_ridge: float, low_bw_x: float, low_op_b: float) -> list[int]:
    """Local positions of the experts LLMSimulator's co-processing rule runs on the xPU, the rest going to the
    low unit. Times are in units of one expert's weight read at the xPU's bandwidth: an expert with t tokens
    takes max(1, t x 0.75 / ridge) on the xPU and max(1, t x 0.75 / low Op/B) / (low bandwidth multiple) on
    the low unit (route.cpp:38-57; zero-token experts included, as the rule counts them). Starting from all
    on the low unit, the experts (up to 4) or 4 groups of consecutive experts (more than 4) move to the xPU in
    order of most tokens first, while that lowers max(xPU sum, low sum); the first move that does not stops
    the search (a greedy walk, not a search over all splits). More than 4 experts not a multiple of 4: the
    helios fork aborts (route.cpp:85), the HBF fork moves them one by one; archsim does as the HBF fork."""
    f = LLMSIM_BANDWIDTH_FACTOR

    def on_xpu(t: int) -> float:
        return max(1.0, t * f / xpu_ridge)

    def on_low(t: int) -> float:
        return max(1.0, t * f / low_op_b) / low_bw_x

    n = len(tokens)
    if n <= LLMSIM_SPLIT_GROUPS or n % LLMSIM_SPLIT_GROUPS:
        units = [[i] for i in range(n)]
    else:
        size = n // LLMSIM_SPLIT_GROUPS
        units = [list(range(g, g + size)) for g in range(0, n, size)]
    # most tokens first; ties keep their order (the reference sorts at most 16 entries, which its library
    # sorts by insertion, keeping ties in order)
    units.sort(key=lambda u: -sum(tokens[i] for i in u))
    high, low = 0.0, sum(on_low(t) for t in tokens)
    best, chosen = max(high, low), []
    for u in units:
        high += sum(on_xpu(tokens[i]) for i in u)
        low -= sum(on_low(tokens[i]) for i in u)
        if max(high, low) >= best:
            break
        chosen += u
        best = max(high, low)
    return chosen


def make_device(kind: str, pim_timing: str = "engine", timer: LogicPimTimer | None = None,
                memory: str | None = None, stacks: int | None = None, command_path: str | None = None,
                preset: DuplexDevices | None = None) -> Device:
    """A device of `kind` (DEVICE_KINDS; 2xgpu is a GPU, the system doubles the count) from the presets.
    `memory` / `stacks`: another DRAM preset (one stack) or stack count than the devices preset's; the xPU's
    bandwidth and memory are then the stacks' (peak x the preset's bandwidth efficiency, capacity), so every
    unit of the device sees the same memory. `command_path`: Logic-PIM's command path (the memory standard's
    extension option logic_pim.command_path; None: the extension's default). `preset`: the devices preset (a
    run's `device_preset` with its `devices_overrides`; None: archsim/presets/duplex/devices.yaml)."""
    if kind not in DEVICE_KINDS:
        raise ConfigError("device", f"unknown device {kind!r}; allowed: {', '.join(DEVICE_KINDS)}")
    if pim_timing not in ("engine", "roofline"):
        raise ConfigError("pim_timing", f"must be engine or roofline, got {pim_timing!r}")
    pre = preset or device_preset()
    spec = load_spec(memory or pre.dram)
    if command_path is not None and kind == "duplex":
        spec = with_command_path(spec, command_path)
    if kind == "duplex" and "RDBD" not in spec.command_names:
        raise ConfigError("preset", f"{spec.name} has no Logic-PIM bundle commands; device duplex needs a "
                          "bank-bundle memory, e.g. HBM3_Duplex, HBM3_6400Mbps_LogicPIM, HBM2_2Gbps_LogicPIM")
    from archsim.energy import dram_action_energy_pj

    e = dram_action_energy_pj(spec)
    x = pre.xpu
    own_memory = memory is None and stacks is None
    stacks = int(stacks or pre.stacks)
    xpu_bw = float(x.hbm_bandwidth_bytes_per_s) if own_memory else stacks * spec.peak_bw_bytes_per_s
    dev = Device(kind=kind, xpu_flops=float(x.peak_flops) * float(x.compute_efficiency),
                 xpu_bw=xpu_bw * float(x.bandwidth_efficiency),
                 memory_bytes=int(x.memory_bytes) if own_memory else stacks * spec.capacity_bytes,
                 stacks=stacks, low=None,
                 xpu_pj_per_bit=e["RD"] / (spec.access_bytes * 8), act_pj=e["ACT"], row_bytes=spec.row_bytes,
                 mac_pj=float(pre.energy.mac_pj), links=dataclasses.asdict(pre.links), spec=spec)
    if kind in ("gpu", "2xgpu"):
        return dev
    low = {"duplex": "logic_pim", "bank_pim": "bank_pim", "bankgroup_pim": "bankgroup_pim"}[kind]
    p = getattr(pre.processors, low)
    dev.low = low
    if low == "logic_pim":
        cfg = pre.logic_pim
        dev.low_bw = bundle_bandwidth_bytes_per_s(spec) * stacks
        dev.low_flops = cfg.flops_per_s * stacks
        dev.low_pj_per_bit = e["RDBD"] / (8 * spec.access_bytes * 8)
        if pim_timing == "engine":
            if timer is not None and timer.spec.options != spec.options:
                raise ValueError(f"the timer passed in runs {timer.spec.options}, the device {spec.options}")
            dev.timer = timer or LogicPimTimer(spec, cfg)
    else:
        dev.low_bw = float(p.bandwidth_x) * external_bandwidth_bytes_per_s(spec) * stacks
        dev.low_flops = float(p.op_b) * dev.low_bw
        dev.low_pj_per_bit = float(p.pj_per_bit)
    return dev


# ---- operators -------------------------------------------------------------------------------------------
@dataclass
class Op:
    name: str
    kind: str                  # LAYER_KINDS or a communication kind
    flops: float
    bytes: float               # DRAM bytes read + written
    unit: str = "xpu"          # xpu / low / link
    seconds: float = 0.0
    roofline_s: float = 0.0
    energy_pj: float = 0.0
    count: int = 1             # how many layers it stands for
    tokens: int = 0

    @property
    def op_b(self) -> float:
        return self.flops / self.bytes if self.bytes else math.inf


@dataclass(frozen=True)
class Stage:
    """A serving iteration: prompt lengths of the sequences in prefill, context lengths of the decoding ones
    (KV length after this step)."""

    prefill: tuple[int, ...]
    decode: tuple[int, ...]

    @property
    def kind(self) -> str:
        return "mixed" if self.prefill else "decode"

    @property
    def tokens(self) -> int:
        return sum(self.prefill) + len(self.decode)

    @property
    def sequences(self) -> int:
        return len(self.prefill) + len(self.decode)


ROUTINGS = ("uniform", "zipf", "sampled")
MOE_DISPATCH = ("layer", "per_expert")      # one unit per MoE layer, or one per expert (LLMSimulator's choice)


def sampled_counts(n_experts: int, k: int, tokens: int, seed: int, layer: int) -> np.ndarray:
    """Tokens per expert of one MoE layer with every token routed to k distinct experts drawn uniformly at random
    (as LLMSimulator routes without a trace: Scheduler::getRandomExpert, scheduler.cpp:141-153 of the helios
    fork). The draw is seeded by (seed, layer, tokens), so a stage of the same shape draws the same routing
    (stage results stay memoisable) while the layers of one stage draw apart."""
    rng = np.random.default_rng((seed, layer, tokens))
    # the k smallest of n uniform draws per token: k distinct experts, each set equally likely (the set, not its
    # order, is what the counts need, so a partition does instead of a sort)
    picks = np.argpartition(rng.random((tokens, n_experts)), k - 1, axis=1)[:, :k]
    return np.bincount(picks.ravel(), minlength=n_experts).astype(np.int64)


def routing_counts(model: ModelSpec, tokens: int, routing: str = "uniform", zipf_s: float = 1.0,
                   layer: int = 0, seed: int = 0) -> np.ndarray:
    """Tokens per expert of one MoE layer. uniform: the expected counts of equal probabilities (largest-remainder
    rounding, summing to tokens x experts_per_token); zipf: expected counts of p_e ~ 1 / rank^s with the
    popularity order rotated by the layer index (a different hot expert per layer); sampled: one random draw
    (sampled_counts), so devices carry unequal loads as a finite batch does."""
    n = model.n_experts
    total = tokens * model.experts_per_token
    if routing == "sampled":
        return sampled_counts(n, model.experts_per_token, tokens, seed, layer)
    if routing == "uniform":
        p = np.full(n, 1.0 / n)
    elif routing == "zipf":
        if not isinstance(zipf_s, int | float) or zipf_s < 0:
            raise ConfigError("zipf_s", f"must be a number >= 0, got {zipf_s!r}")
        p = 1.0 / np.arange(1, n + 1) ** float(zipf_s)
        p = np.roll(p / p.sum(), layer % n)
    else:
        raise ConfigError("routing", f"must be one of {', '.join(ROUTINGS)}, got {routing!r}")
    raw = p * total
    out = np.floor(raw).astype(np.int64)
    left = int(total - out.sum())
    out[np.argsort(-(raw - out), kind="stable")[:left]] += 1
    # a token goes to experts_per_token distinct experts: no expert gets more than `tokens`
    return np.minimum(out, tokens)


def sample_routing(rng: np.random.Generator, logits: np.ndarray, k: int) -> np.ndarray:
    """Top-k gating of the functional model: expert ids (tokens x k) of the k largest logits per token."""
    return np.argsort(-logits, axis=1, kind="stable")[:, :k]


class Compiler:
    """Builds and times the operators of stages for one model on `n_devices` devices of one kind."""

    def __init__(self, model: ModelSpec, device: Device, n_devices: int, policy: Policy,
                 routing: str = "uniform", zipf_s: float = 1.0, interference: str = "engine",
                 split: str = "interference_aware", seed: int = 0, dispatch: str = "layer"):
        if interference not in INTERFERENCE:
            raise ConfigError("interference", f"must be one of {', '.join(INTERFERENCE)}, got {interference!r}")
        if split not in SPLIT_RULES:
            raise ConfigError("coprocessing_split", f"must be one of {', '.join(SPLIT_RULES)}, got {split!r}")
        if dispatch not in MOE_DISPATCH:
            raise ConfigError("dispatch", f"must be one of {', '.join(MOE_DISPATCH)}, got {dispatch!r}")
        self.per_expert = dispatch == "per_expert"
        # interference_aware: co-processing costed with the slow-downs it will pay (never slower than no split)
        self.aware = split == "interference_aware"
        self.split_rule = split
        # distinct (stage, layer) splits interference_aware costed, those the interference moved off the lookup
        # table's choice, attention overlaps run one after the other because overlapping would have been slower,
        # and the experts each expert split put on each unit (counted once per distinct (stage, MoE layer, device))
        self.decisions = {"expert_split_changed": 0, "expert_splits": 0, "attention_serialized": 0,
                          "split_experts_on_xpu": 0, "split_experts_on_low": 0}
        # every distinct expert split: stage kind, tokens, device, expert ids on the xPU and on the low unit
        self.split_log: list[dict] = []
        # dispatch per_expert: experts placed on each unit, counted once per distinct (stage, MoE layer, device)
        self.expert_units = {"xpu": 0, "low": 0}
        self.m, self.dev, self.D, self.pol = model, device, n_devices, policy
        # the non-expert layers' tensor-parallel degree and their data-parallel replicas (one per node, per_node)
        per_node = int(device.links["devices_per_node"])
        self.ne_tp = min(n_devices, per_node) if policy.non_expert_parallel == "per_node" else n_devices
        if n_devices % self.ne_tp:
            raise ConfigError("non_expert_parallel", f"per_node needs a device count that is a multiple of the "
                              f"{per_node} devices per node, got {n_devices}")
        self.ne_dp = n_devices // self.ne_tp
        # co-processing interference from channel-engine runs (needs the engine timer of Logic-PIM)
        self.interference = interference == "engine" and device.timer is not None
        self.pairs: list[dict] = []          # co-processed operator pairs of the last stage (see coprocess)
        self.routing, self.zipf_s, self.seed = routing, zipf_s, seed
        self.B = model.dtype_bytes
        self._table_x: dict[tuple, float] = {}
        self._table_l: dict[tuple, float] = {}
        from archsim.energy import dram_action_energy_pj

        spec = device.spec if device.spec is not None else load_spec(device_preset().dram)
        if device.low == "logic_pim" and policy.layout.spaces != spaces_per_pch(spec):
            raise ConfigError("mapping", f"the mapping policy lays out {policy.layout.spaces} bundle spaces per pseudo-"
                              f"channel, {spec.name} has {spaces_per_pch(spec)}: use a policy written for it "
                              "(mappings/duplex.yaml: HBM3, 4; mappings/duplex_hbm2.yaml: HBM2, 2)")
        self.action_pj = dram_action_energy_pj(spec)
        self.pch = pch_per_stack(spec)
        self.tck = spec.tCK_s
        self.stage_memo: dict[tuple, tuple[float, list[Op], list[dict]]] = {}

    # -- unit timing ------------------------------------------------------------------------------------
    def xpu_time(self, flops: float, nbytes: float) -> float:
        return max(flops / self.dev.xpu_flops, nbytes / self.dev.xpu_bw)

    def low_roofline(self, flops: float, nbytes: float) -> float:
        return max(flops / self.dev.low_flops, nbytes / self.dev.low_bw)

    def _rows(self, bytes_per_device: float) -> int:
        return math.ceil(bytes_per_device / self.dev.stacks / self.pch / BYTES_PER_ROW)

    def low_time(self, flops: float, nbytes: float, segments: list[Segment] | None) -> tuple[float, dict]:
        """Time of an operator on the low unit: the engine (Logic-PIM with a timer) or its roofline."""
        if self.dev.timer is not None and segments is not None:
            t = self.dev.timer.time(segments)
            return t.cycles * self.tck, t.counts
        return self.low_roofline(flops, nbytes), {}

    # -- energy -----------------------------------------------------------------------------------------
    def energy(self, op: Op, counts: dict[str, int] | None = None) -> float:
        d = self.dev
        mac = op.flops / 2 * d.mac_pj
        if op.unit == "link":
            return 0.0
        if op.unit == "low" and counts:
            per = self.action_pj
            dram = sum(per.get(k, 0.0) * v for k, v in counts.items() if k in ("RDBD", "WRBD", "ACTBD", "REFab"))
            return dram * self.dev.stacks + mac
        pj_bit = d.low_pj_per_bit if op.unit == "low" else d.xpu_pj_per_bit
        acts = op.bytes / d.row_bytes
        return op.bytes * 8 * pj_bit + acts * d.act_pj + mac

    # -- dispatch ---------------------------------------------------------------------------------------
    def unit_for(self, stage: str, kind: str, op_b: float) -> str:
        """Which unit runs a layer kind in a stage: the policy's table, or (rule opb) the Op/B threshold.
        A device without a low unit runs everything on the xPU."""
        if self.dev.low is None:
            return "xpu"
        if self.pol.rule == "opb":
            return "low" if kind in LOW_CAPABLE and op_b <= self.pol.opb_threshold else "xpu"
        return self.pol.dispatch[stage].get(kind, "xpu")

    # -- experts ----------------------------------------------------------------------------------------
    def expert_groups(self) -> tuple[int, int]:
        """(tensor-parallel degree inside an expert, expert-parallel groups). Default (DeepSpeed-MoE style):
        experts spread over devices, split only when devices outnumber experts. expert_tensor_parallel (the
        paper's ET): every expert split over the devices of a node, experts spread over nodes."""
        m, D = self.m, self.D
        if self.pol.expert_tensor_parallel:
            tp = min(D, int(self.dev.links["devices_per_node"]))
        else:
            tp = max(1, D // m.n_experts)
        return tp, max(1, D // tp)

    def expert_shape(self) -> tuple[float, int]:
        """(weight bytes of one expert slice on one device, expert tensor-parallel degree)."""
        tp, _ = self.expert_groups()
        return self.m.expert_params * self.B / tp, tp

    def expert_ops(self, t: int) -> tuple[float, float]:
        """(FLOPs, bytes) of one expert slice with t tokens on one device."""
        w, tp = self.expert_shape()
        m = self.m
        flops = 2.0 * t * m.expert_params / tp
        act = t * (m.d_model * 2 + m.d_ff * (3 if m.gated_ffn else 2) / tp) * self.B
        return flops, w + act

    def expert_devices(self) -> list[list[int]]:
        """Expert ids held by each expert-parallel group (expert e on group e mod groups); with ET one group
        holds a slice of every expert."""
        _, ep = self.expert_groups()
        groups = min(ep, self.m.n_experts)
        return [list(range(g, self.m.n_experts, groups)) for g in range(groups)]

    def expert_placement(self, e: int) -> tuple[int, ...]:
        """Bundle spaces holding expert e's slice on its device. per_device (the paper's round-robin, per
        device): the device's k-th expert goes to expert_spaces[k mod S], so every device uses all S spaces
        whatever the device count; a device with n < S experts stripes its k-th expert over spaces k, k + n,
        ... global_modulo (the layout before issue 22, kept as a sensitivity case): expert e in space
        expert_spaces[e mod S], which puts all of a device's experts in one space whenever the number of
        expert-parallel groups is a multiple of S."""
        es = self.pol.layout.expert_spaces
        if self.pol.layout.expert_placement == "global_modulo":
            return (es[e % len(es)],)
        groups = len(self.expert_devices())
        n = len(range(e % groups, self.m.n_experts, groups))      # experts on e's device
        k = e // groups                                             # e's index on its device
        return (es[k % len(es)],) if n >= len(es) else tuple(es[k::n])

    def expert_segments(self, experts: list[tuple[int, int]]) -> list[Segment]:
        """Bundle-stream segments of a set of (expert id, tokens) on the low unit: expert e's rows split evenly
        over its spaces (expert_placement); the inputs of one pass fill one input buffer (t x d_model x 2 B),
        so more tokens re-stream the weights."""
        w, _ = self.expert_shape()
        rows = self._rows(w)
        buf = (self.dev.timer.cfg.input_buffer_bytes if self.dev.timer else 1 << 20)
        segs = []
        for e, t in experts:
            passes = max(1, math.ceil(t * self.m.d_model * self.B / buf))
            spaces = self.expert_placement(e)
            for i, sp in enumerate(spaces):
                part = rows // len(spaces) + (1 if i < rows % len(spaces) else 0)
                segs.append(Segment(sp, part * passes, math.ceil(t / passes)))
        return segs

    def expert_table(self, t: int) -> tuple[float, float]:
        """The token-count lookup table: (xPU time, low-unit time) of one expert slice with t tokens (the
        low-unit time with expert 0's placement: every expert of a device has as many spaces)."""
        if t not in self._table_x:
            f, b = self.expert_ops(t)
            self._table_x[t] = self.xpu_time(f, b)
            self._table_l[t] = self.low_time(f, b, self.expert_segments([(0, t)]))[0]
        return self._table_x[t], self._table_l[t]

    def split_candidates(self, experts: list[tuple[int, int]]) -> list[tuple[list, list]]:
        """The splits expert co-processing ranges over: all experts start on the xPU; the fewest-token ones move
        to the low unit one space at a time (the paper assigns whole bundle spaces to one unit, so the xPU never
        reads a bundle Logic-PIM holds: the experts sharing a space move together). Entry k: (on the xPU, on
        the low unit) with the first k spaces' experts moved."""
        groups: dict[tuple[int, ...], list[tuple[int, int]]] = {}
        for e, t in experts:
            groups.setdefault(self.expert_placement(e), []).append((e, t))
        order = sorted(groups.values(), key=lambda g: (sum(t for _, t in g), min(e for e, _ in g)))
        return [([et for g in order[k:] for et in g], [et for g in order[:k] for et in g])
                for k in range(len(order) + 1)]

    def split_experts(self, experts: list[tuple[int, int]]) -> tuple[list, list]:
        """The paper's split: of split_candidates, the one with the smallest max(xPU sum, low sum) of
        lookup-table (interference-free) times."""
        cands = self.split_candidates(experts)
        cost = [max(sum(self.expert_table(t)[0] for _, t in on_x), sum(self.expert_table(t)[1] for _, t in on_l))
                if on_l else sum(self.expert_table(t)[0] for _, t in on_x) for on_x, on_l in cands]
        return cands[min(range(len(cands)), key=lambda k: (cost[k], k))]

    def fastest_units(self, experts: list[tuple[int, int]]) -> tuple[list, list]:
        """dispatch per_expert: (on the xPU, on the low unit), every expert on the unit the lookup table times
        faster with its own token count (a tie stays on the low unit), as LLMSimulator times an operator on
        every unit it may run on and keeps the fastest (Executor::execution, src/hardware/executor.cpp:145-151
        of the helios fork). Counts the experts placed on each unit in `expert_units`."""
        on_x, on_l = [], []
        for e, t in experts:
            x_s, low_s = self.expert_table(t)
            (on_x if x_s < low_s else on_l).append((e, t))
        self.expert_units["xpu"] += len(on_x)
        self.expert_units["low"] += len(on_l)
        return on_x, on_l

    def llmsimulator_split(self, local: list[tuple[int, int]]) -> tuple[list, list]:
        """coprocessing_split llmsimulator: (on the xPU, on the low unit) of a device's local experts (zero-token
        ones included, in local order) by LLMSimulator's rule (llmsimulator_xpu_set) with this device's xPU
        ridge, low-unit bandwidth multiple and Op/B; zero-token experts then run nowhere."""
        d = self.dev
        high = set(llmsimulator_xpu_set([t for _, t in local], d.xpu_flops / d.xpu_bw, d.low_bw / d.xpu_bw,
                                        d.low_flops / d.low_bw))
        on_x = [et for i, et in enumerate(local) if i in high and et[1] > 0]
        on_l = [et for i, et in enumerate(local) if i not in high and et[1] > 0]
        return on_x, on_l

    def _split_device(self, local: list[tuple[int, int]], T: int, stage: str = "", device: int = 0,
                      ) -> tuple[float, list[Op], list[dict]]:
        """One device's experts under co-processing (`local`: its experts in local order, zero-token ones
        included): the lookup table's split (split_experts), LLMSimulator's rule (llmsimulator_split), or with
        interference_aware the fastest of the splits the table ranges over (the first k spaces' experts on the
        low unit, k = 0 .. all, which includes no split either way) costed as they will run, interference
        included. Records the split chosen in `decisions` and `split_log`."""
        experts = [(e, t) for e, t in local if t > 0]
        if self.split_rule == "llmsimulator":
            on_x, on_l = self.llmsimulator_split(local)
            chosen = (on_x, on_l)
            best = self._device_experts(on_x, on_l, T)
        else:
            chosen = self.split_experts(experts)
            best = table = self._device_experts(*chosen, T)
            if self.aware:
                for cand in self.split_candidates(experts):
                    r = self._device_experts(*cand, T)
                    if r[0] < best[0] - 1e-15:
                        best, chosen = r, cand
                self.decisions["expert_splits"] += 1
                self.decisions["expert_split_changed"] += best is not table
        self.decisions["split_experts_on_xpu"] += len(chosen[0])
        self.decisions["split_experts_on_low"] += len(chosen[1])
        self.split_log.append({"stage": stage, "tokens": T, "device": device,
                               "xpu": [e for e, _ in chosen[0]], "low": [e for e, _ in chosen[1]]})
        return best

    def _device_experts(self, on_x: list[tuple[int, int]], on_l: list[tuple[int, int]], T: int,
                        ) -> tuple[float, list[Op], list[dict]]:
        """(seconds, operators, co-processed pair records) of one device's MoE experts with `on_x` on the xPU
        and `on_l` on the low unit (beside each other under expert co-processing, else one after the other)."""
        m, B = self.m, self.B
        # a set of experts streams in expert order whatever order a split listed them in (the stream alternates
        # the rows of its segments in list order, so listing same-space experts together would serialise their
        # bundles: a split must not change how the same experts stream)
        on_x, on_l = sorted(on_x), sorted(on_l)
        ops = []
        xt = 0.0
        for e, t in on_x:
            f, b = self.expert_ops(t)
            o = self._xop(f"expert{e}", "moe", f, b, t)
            ops.append(o)
            xt += o.seconds
        lt = 0.0
        low_op = low_segs = None
        if on_l:
            f = b = 0.0
            for _, t in on_l:
                fe, be = self.expert_ops(t)
                f, b = f + fe, b + be
            low_segs = self.expert_segments(on_l)
            low_op = self._lop("experts_low", "moe", f, b, "low", low_segs, sum(t for _, t in on_l))
            ops.append(low_op)
            lt = low_op.seconds
            # partial sums of every stack, all-reduced by the xPU (read all, write one)
            red = self._xop("stack_allreduce", "stack_allreduce", float(T * m.d_model * self.dev.stacks),
                            (self.dev.stacks + 1) * T * m.d_model * B, T)
            ops.append(red)
            lt += red.seconds
        both = self.pol.expert_coprocessing
        pairs0 = len(self.pairs)
        if both and on_x and low_op is not None:     # xPU experts beside the low unit's, then the reduction
            x_spaces = tuple(sorted({sp for e, _ in on_x for sp in self.expert_placement(e)}))
            t_dev = self.coprocess("experts", [o for o in ops if o.unit == "xpu" and o.kind == "moe"], low_op,
                                   x_spaces, low_segs) + (lt - low_op.seconds)
        else:
            t_dev = max(xt, lt) if both else xt + lt
        pairs = self.pairs[pairs0:]
        del self.pairs[pairs0:]
        return t_dev, ops, pairs

    # -- communication ----------------------------------------------------------------------------------
    def link_time(self, nbytes: float, kind: str = "allreduce", group: int | None = None) -> float:
        """Ring all-reduce (2 (D-1)/D of the bytes per device, 2 (D-1) latency hops), all-to-all ((D-1)/D,
        D-1 hops) or send (all of the bytes, one hop) among `group` devices (default all), over NVLink inside a node, InfiniBand when the group
        spans nodes."""
        D = self.D if group is None else group
        if D <= 1 or nbytes <= 0:
            return 0.0
        links = self.dev.links
        link = links["nvlink"] if D <= int(links["devices_per_node"]) else links["infiniband"]
        bw, lat = float(link["bandwidth_bytes_per_s"]), float(link["latency_s"])
        if kind == "allreduce":
            return 2 * (D - 1) / D * nbytes / bw + 2 * (D - 1) * lat
        if kind == "send":            # one device's bytes in one transfer
            return nbytes / bw + lat
        return (D - 1) / D * nbytes / bw + (D - 1) * lat

    # -- co-processing ----------------------------------------------------------------------------------
    def coprocess(self, pair: str, x_ops: list[Op], low_op: Op, x_spaces: tuple[int, ...],
                  low_segments: list[Segment]) -> float:
        """Seconds of xPU operators `x_ops` (one after another) running beside the low unit's `low_op` on the
        same stacks. Without interference: the longer of the two. With interference (the engine): each runs
        slower while both run, by the slow-downs measured on one channel with the low op's bundle stream
        beside an xPU read stream in `x_spaces` at the xPU operators' bandwidth demand
        (LogicPimTimer.interference); when the first finishes, the other continues alone. Records the pair in
        `self.pairs`."""
        xs = sum(o.seconds for o in x_ops)
        ls = low_op.seconds
        rec = {"pair": pair, "xpu_s": xs, "low_s": ls, "xpu_slowdown": 1.0, "low_slowdown": 1.0,
               "xpu_demand": 0.0, "alone_s": max(xs, ls), "count": 1}
        if self.interference and xs > 0 and ls > 0:
            demand = sum(o.bytes for o in x_ops) / xs / self.dev.xpu_bw
            r = self.dev.timer.interference(low_segments, x_spaces, demand)
            sx, sl = r["xpu_slowdown"], r["low_slowdown"]
            tx, tl = xs * sx, ls * sl
            co = tx + (ls - tx / sl) if tx <= tl else tl + (xs - tl / sx)
            rec.update(xpu_slowdown=sx, low_slowdown=sl, xpu_demand=r["demand"])
        else:
            co = max(xs, ls)
        rec["seconds"] = co
        self.pairs.append(rec)
        return co

    # -- one stage --------------------------------------------------------------------------------------
    def stage(self, st: Stage) -> tuple[float, list[Op]]:
        """(seconds, operators of one representative layer of each kind + LM head) of a stage. The layer ops
        carry `count` = how many layers they stand for."""
        key = (st.prefill, self._decode_key(st))
        if key in self.stage_memo:
            total, ops, self.pairs = self.stage_memo[key]
            return total, ops
        self.pairs = []
        m, D, B = self.m, self.ne_tp, self.B
        ops: list[Op] = []
        total = 0.0
        moe_layers = m.n_moe_layers
        dense_layers = m.n_layers - moe_layers
        # the non-expert layers run on one tensor-parallel group's sequences (all of them unless per_node: the
        # first node's share, the largest)
        node = self.node_share(st)
        # attention block -----------------------------------------------------------------------------
        n_pairs = len(self.pairs)
        att_ops, att_t = self._attention_block(node)
        for o in att_ops:
            o.count = m.n_layers
        for p in self.pairs[n_pairs:]:
            p["count"] = m.n_layers
        ops += att_ops
        total += att_t * m.n_layers
        if self.pol.norm_and_residual:
            nr = self._norm_residual(node.tokens)
            nr.count = m.n_layers
            ops.append(nr)
            total += nr.seconds * m.n_layers
        # FFN blocks -----------------------------------------------------------------------------------
        if dense_layers:
            f_ops, f_t = self._dense_block(node)
            for o in f_ops:
                o.count = dense_layers
            ops += f_ops
            total += f_t * dense_layers
        if moe_layers:
            # zipf: the hot expert rotates per layer, so one distinct layer per rotation; sampled: every layer
            # draws its own routing; uniform: one for all
            reps = {"zipf": min(moe_layers, m.n_experts), "sampled": moe_layers}.get(self.routing, 1)
            for r in range(reps):
                cnt = len(range(r, moe_layers, reps))
                n_pairs = len(self.pairs)
                f_ops, f_t = self._moe_block(st, layer=r)
                for o in f_ops:
                    o.count = cnt
                for p in self.pairs[n_pairs:]:
                    p["count"] = cnt
                ops += f_ops
                total += f_t * cnt
        # LM head for every sequence ------------------------------------------------------------------
        n = node.sequences
        f = 2.0 * n * m.d_model * m.vocab / D
        b = (m.d_model * m.vocab + n * (m.d_model + m.vocab / D)) * B / D
        head = self._xop("lm_head", "lm_head", f, b, n)
        if not self.pol.time_lm_head:
            head.seconds = head.roofline_s = head.energy_pj = 0.0
        ops.append(head)
        total += head.seconds
        self.stage_memo[key] = (total, ops, self.pairs)
        return total, ops

    def _norm_residual(self, T: int) -> Op:
        """One layer's two norms (4 FLOPs per element; read the activations and the weight vector, write the
        activations) and two residual adds (1 FLOP per element; read two, write one), over the whole T x d_model
        activations on every device (not split by tensor parallelism), as LLMSimulator times them
        (src/module/layernorm.cpp:38-44, src/module/residual.cpp:34-35, two of each per decoder layer,
        src/module/decoder.cpp:80-86 of the helios fork)."""
        d, B = self.m.d_model, self.B
        flops = 2 * 4.0 * T * d + 2 * 1.0 * T * d
        nbytes = (2 * (2.0 * T * d + d) + 2 * 3.0 * T * d) * B
        # two memory-bound ops each of norm and residual: their times add (each a roofline of its own)
        op = self._xop("norm_residual", "norm_residual", flops, nbytes, T)
        op.seconds = op.roofline_s = (2 * self.xpu_time(4.0 * T * d, (2.0 * T * d + d) * B)
                                      + 2 * self.xpu_time(1.0 * T * d, 3.0 * T * d * B))
        return op

    def node_share(self, st: Stage) -> Stage:
        """The sequences of `st` the first non-expert tensor-parallel group runs (every ne_dp-th, from the first):
        the whole stage unless non_expert_parallel is per_node on more than one node."""
        if self.ne_dp == 1:
            return st
        return Stage(st.prefill[::self.ne_dp], st.decode[::self.ne_dp])

    def _decode_key(self, st: Stage) -> tuple:
        """Decode contexts enter the timing only through their sum (KV bytes and FLOPs are linear in it) and
        count, so stages with equal sums and counts share a result."""
        return (len(st.decode), sum(st.decode))

    def _xop(self, name: str, kind: str, flops: float, nbytes: float, tokens: int = 0) -> Op:
        op = Op(name, kind, flops, nbytes, "xpu", tokens=tokens)
        op.seconds = op.roofline_s = self.xpu_time(flops, nbytes)
        op.energy_pj = self.energy(op)
        return op

    def _lop(self, name: str, kind: str, flops: float, nbytes: float, unit: str, segments, tokens: int = 0) -> Op:
        if unit == "xpu":
            return self._xop(name, kind, flops, nbytes, tokens)
        op = Op(name, kind, flops, nbytes, "low", tokens=tokens)
        op.roofline_s = self.low_roofline(flops, nbytes)
        op.seconds, counts = self.low_time(flops, nbytes, segments)
        op.energy_pj = self.energy(op, counts)
        return op

    def _link(self, name: str, nbytes: float, kind: str, group: int | None = None, pattern: str | None = None) -> Op:
        """A link operator of `kind` (allreduce / alltoall), timed by link_time's `pattern` (default: the kind)."""
        op = Op(name, kind, 0.0, nbytes, "link")
        op.seconds = op.roofline_s = self.link_time(nbytes, pattern or ("allreduce" if kind == "allreduce" else "alltoall"), group)
        return op

    def _attention_block(self, st: Stage) -> tuple[list[Op], float]:
        m, D, B = self.m, self.ne_tp, self.B
        T = st.tokens
        qkv_w = m.d_model * (m.q_dim + 2 * m.kv_dim)
        qkv = self._xop("qkv", "qkv", 2.0 * T * qkv_w / D, (qkv_w / D + T * (m.d_model + (m.q_dim + 2 * m.kv_dim) / D)) * B, T)
        ops = [qkv]
        pre = dec = None
        if st.prefill:
            f = sum(2.0 * p * p * m.q_dim for p in st.prefill) / D            # QK^T and PV, causal half
            b = sum(p * (2 * m.q_dim + 2 * m.kv_dim + 2 * m.kv_dim) for p in st.prefill) * B / D   # + KV migration
            pre = self._xop("attention_prefill", "attention_prefill", f, b, sum(st.prefill))
            ops.append(pre)
        if st.decode:
            ctx = sum(st.decode)
            f = 4.0 * ctx * m.q_dim / D
            b = 2.0 * ctx * m.kv_dim * B / D
            op_b = f / b
            unit = self.unit_for(st.kind, "attention_decode", op_b)
            g = m.n_heads // m.n_kv_heads
            rows = self._rows(b)
            ks = self.pol.layout.kv_spaces
            segs = [Segment(sp, rows // len(ks) + (1 if i < rows % len(ks) else 0), g) for i, sp in enumerate(ks)]
            dec = self._lop("attention_decode", "attention_decode", f, b, unit, segs, len(st.decode))
            dec_segs = segs
            ops.append(dec)
        out = self._xop("out_proj", "out_proj", 2.0 * T * m.q_dim * m.d_model / D,
                        (m.q_dim * m.d_model / D + T * (m.q_dim / D + m.d_model)) * B, T)
        ops.append(out)
        ar = self._link("allreduce_attention", T * m.d_model * B, "allreduce", group=D)
        ops.append(ar)
        # timing: qkv, then prefill || decode attention (co-processing) or one after the other
        xs = pre.seconds if pre else 0.0
        if dec is not None and dec.unit == "xpu":
            xs += dec.seconds
            mid = xs
        else:
            ls = dec.seconds if dec else 0.0
            if not self.pol.attention_coprocessing:
                mid = xs + ls
            elif pre is not None and dec is not None:     # prefill attention reads the new Q/K/V's space
                mid = self.coprocess("attention", [pre], dec, (self.pol.layout.prefill_qkv_space,), dec_segs)
                if self.aware and mid > xs + ls:          # overlapping would cost more than taking turns
                    mid = xs + ls
                    self.pairs[-1].update(seconds=mid, serialized=1)
                    self.decisions["attention_serialized"] += 1
            else:
                mid = max(xs, ls)
        return ops, qkv.seconds + mid + out.seconds + ar.seconds

    def _dense_block(self, st: Stage) -> tuple[list[Op], float]:
        m, D, B = self.m, self.ne_tp, self.B
        T = st.tokens
        w = m.expert_params / D
        f = 2.0 * T * w
        b = (w + T * (m.d_model * 2 + m.d_ff * (3 if m.gated_ffn else 2) / D)) * B
        unit = self.unit_for(st.kind, "dense_ffn", f / b)
        rows = self._rows(w * B)
        buf = self.dev.timer.cfg.input_buffer_bytes if self.dev.timer else 1 << 20
        passes = max(1, math.ceil(T * m.d_model * B / buf))      # inputs of one pass fill one input buffer
        # the dense FFN's weight striped over every expert space (over the first only in the old layout)
        es = self.pol.layout.expert_spaces if self.pol.layout.expert_placement == "per_device" else self.pol.layout.expert_spaces[:1]
        segs = [Segment(sp, (rows // len(es) + (1 if i < rows % len(es) else 0)) * passes, math.ceil(T / passes))
                for i, sp in enumerate(es)]
        op = self._lop("dense_ffn", "dense_ffn", f, b, unit, segs, T)
        ar = self._link("allreduce_ffn", T * m.d_model * B, "allreduce", group=D)
        return [op, ar], op.seconds + ar.seconds

    def _moe_block(self, st: Stage, layer: int) -> tuple[list[Op], float]:
        m, D, B = self.m, self.D, self.B
        T = st.tokens
        counts = routing_counts(m, T, self.routing, self.zipf_s, layer, self.seed)
        # the gate runs with the other non-expert layers: on one tensor-parallel group's tokens
        gT, g_tp = self.node_share(st).tokens, self.ne_tp
        gate = self._xop("moe_gate", "moe_gate", 2.0 * gT * m.d_model * m.n_experts / g_tp,
                         (m.d_model * m.n_experts / g_tp + gT * m.d_model) * B, gT)
        tp, ep = self.expert_groups()
        # tokens to their experts and back (all-to-all over the expert-parallel groups); with experts split
        # over a node (ET) the slices' partial outputs are all-reduced over the node instead
        comm = []
        if self.ne_dp > 1:
            # non_expert_parallel per_node: a node's tensor-parallel group holds all of its tokens, so each device
            # sends 1/ne_tp of them, and only those bound for another node's experts ((D - ne_tp) / D) cross
            # InfiniBand; a transfer sends and receives at once and takes the longer of the two (as LLMSimulator
            # times MoEScatter in decode, src/module/communication.cpp:117-189, 261 of the helios fork), so its
            # bytes are one direction's
            cross = gT * m.experts_per_token * m.d_model * B / g_tp * (D - g_tp) / D
            comm.append(self._link("moe_all_to_all", cross, "alltoall", group=D, pattern="send"))
            comm.append(comm[-1])
            if g_tp > 1:
                # the gathered outputs all-reduced over the node's tensor-parallel group (LLMSimulator's
                # moe_all_reduce_for_gather, src/module/expert.cpp:110-112, 194)
                comm.append(self._link("moe_allreduce_gather", gT * m.d_model * B, "allreduce", group=g_tp))
        elif ep > 1 or not self.pol.expert_tensor_parallel:
            comm.append(self._link("moe_all_to_all", 2 * T * m.experts_per_token * m.d_model * B / D, "alltoall"))
            comm.append(comm[-1])
        if self.pol.expert_tensor_parallel and tp > 1:
            # the slices' partial outputs: of every token the stage routes here (all_tokens), or sized by the node's
            # own tokens as LLMSimulator sizes moe_all_reduce_for_e_tp, by the MoE layer's input
            # (src/module/expert.cpp:103-105, 185; AllReduce::forward, src/module/communication.cpp:18-37)
            ar_tokens = gT if self.pol.expert_allreduce == "node_tokens" else T
            comm.append(self._link("moe_allreduce", ar_tokens * m.d_model * B, "allreduce", group=tp))
        # experts per device: expert e on expert-parallel group e mod groups
        per_dev = [[(e, int(counts[e])) for e in ids] for ids in self.expert_devices()]
        worst, worst_ops, worst_pairs = -1.0, [], []
        f_probe, b_probe = self.expert_ops(max(1, int(counts.mean())))
        unit = self.unit_for(st.kind, "moe", f_probe / b_probe)
        for device, local in enumerate(per_dev):
            experts = [(e, t) for e, t in local if t > 0]
            if self.dev.low is not None and self.pol.expert_coprocessing:
                t_dev, ops, pairs = self._split_device(local, T, st.kind, device)
            elif self.per_expert and self.dev.low is not None:
                t_dev, ops, pairs = self._device_experts(*self.fastest_units(experts), T)
            else:
                t_dev, ops, pairs = self._device_experts(experts if unit != "low" else [],
                                                         experts if unit == "low" else [], T)
            if t_dev > worst:
                worst, worst_ops, worst_pairs = t_dev, ops, pairs
        self.pairs += worst_pairs
        ops = [gate, *comm, *worst_ops]
        return ops, gate.seconds + sum(c.seconds for c in comm) + worst


def paper_devices(model: str) -> int | None:
    """Devices the paper gives a model (devices.yaml `paper_devices`), None if it does not list it."""
    return device_preset().paper_devices.get(model)


# ---- functional MoE (numbers, for checking the split against numpy) -----------------------------------
def moe_functional(x: np.ndarray, gate_w: np.ndarray, experts: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
                   k: int, on_low: set[int], stacks: int) -> np.ndarray:
    """A gated (SwiGLU) MoE layer computed as a Duplex device does: top-k gating on the xPU; experts in
    `on_low` on Logic-PIM (gate/up split by columns over `stacks`, down by rows with the partial sums reduced
    by the xPU: archsim.pim.logic_pim.gemm_functional), the others on the xPU; FP16 operands, FP32
    accumulation. experts[e] = (w_gate d x f, w_up d x f, w_down f x d)."""
    from archsim.pim.logic_pim import gemm_functional

    logits = x.astype(np.float32) @ gate_w.astype(np.float32)
    top = sample_routing(np.random.default_rng(0), logits, k)
    sel = np.take_along_axis(logits, top, axis=1)
    wts = np.exp(sel - sel.max(axis=1, keepdims=True))
    wts /= wts.sum(axis=1, keepdims=True)
    out = np.zeros((x.shape[0], experts[0][2].shape[1]), dtype=np.float32)
    for e, (wg, wu, wd) in enumerate(experts):
        rows, slot = np.nonzero(top == e)
        if not len(rows):
            continue
        xe = x[rows]
        if e in on_low:
            g = gemm_functional(xe, wg, stacks, "columns")
            u = gemm_functional(xe, wu, stacks, "columns")
            h = (g / (1 + np.exp(-g))) * u
            y = gemm_functional(h, wd, stacks, "rows")
        else:
            f16 = lambda a: a.astype(np.float16).astype(np.float32)      # noqa: E731
            g, u = f16(xe) @ f16(wg), f16(xe) @ f16(wu)
            h = (g / (1 + np.exp(-g))) * u
            y = f16(h) @ f16(wd)
        out[rows] += wts[rows, slot][:, None] * y
    return out


# ---- EDAP vs Op/B (the paper's Fig. 8 experiment) --------------------------------------------------------
def edap_by_opb(opbs: tuple[int, ...] = (1, 2, 4, 8, 16, 32), k: int = 16384, n: int = 4096,
                timer: LogicPimTimer | None = None):
    """Energy-delay-area product of an FP16 GEMM with a k x n weight on one stack of each low-Op/B design,
    with m = Op/B input rows (FLOPs per weight byte = m). Delay: the design's roofline (and for Logic-PIM also
    the channel engine, `engine_delay_s`); energy: weight bits x pJ/b + activates + MACs; area: per stack
    (archsim.pim.logic_pim.pim_area_mm2). `edap_norm`: normalised per Op/B to the worst design."""
    import pandas as pd

    from archsim.pim.logic_pim import pim_area_mm2

    timer = timer or LogicPimTimer()
    w_bytes = k * n * 2
    rows = []
    for opb in opbs:
        flops = 2.0 * opb * k * n
        for name, kind in (("Bank-PIM", "bank_pim"), ("BankGroup-PIM", "bankgroup_pim"), ("Logic-PIM", "duplex")):
            dev = make_device(kind, "roofline")
            bw, peak = dev.low_bw / dev.stacks, dev.low_flops / dev.stacks
            delay = max(flops / peak, w_bytes / bw)
            eng = float("nan")
            if kind == "duplex":      # the weight striped over two spaces of every pseudo-channel
                rows_pch = math.ceil(w_bytes / pch_per_stack(timer.spec) / BYTES_PER_ROW)
                half = rows_pch // 2
                eng = timer.time([Segment(0, half, opb), Segment(1, rows_pch - half, opb)]).cycles * timer.spec.tCK_s
            energy = w_bytes * 8 * dev.low_pj_per_bit + w_bytes / dev.row_bytes * dev.act_pj + flops / 2 * dev.mac_pj
            area = pim_area_mm2("logic_pim" if kind == "duplex" else kind)
            rows.append({"op_b": opb, "design": name, "delay_s": delay, "engine_delay_s": eng, "energy_pj": energy,
                         "area_mm2": area, "edap": energy * delay * area})
    df = pd.DataFrame(rows)
    df["edap_norm"] = df.edap / df.groupby("op_b").edap.transform("max")
    return df
