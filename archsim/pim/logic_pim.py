"""Duplex's Logic-PIM (MICRO'24): GEMM modules on each HBM3 stack's logic die, fed by bank bundles.

Timing of one Logic-PIM operator (a weight or KV stream multiplied by `m` input rows) has two estimators:

* ``engine``: the operator's bundle command stream (ACTBD, 32 x RDBD, PREBD per bundle row) for the two
  pseudo-channels of one channel, run by the channel engine on the HBM3-Duplex standard (refresh on). The
  layout stripes every tensor evenly over all pseudo-channels, so every channel of every stack runs the same
  stream and one channel's time is the operator's time. The GEMM modules pace the stream: a pseudo-channel's
  share of the MACs (512 per PIM cycle) takes m x 128 MACs per RDBD (256 B = 128 FP16 weights), and the
  module buffer (8 KB = 32 RDBDs per pseudo-channel) lets the reads run that far ahead of the compute; a read
  enters the stream no earlier than the compute of the read 32 before it has finished. The operator ends when
  the compute of the last chunk ends (finish_j = max(data_j, finish_{j-1}) + compute per RDBD).
* ``roofline``: max(FLOPs / peak FLOP/s, bytes / peak bundle bandwidth), per stack.

Long streams: streams of more than `max_sim_rows` bundle rows per pseudo-channel are timed at two sizes
(max_sim_rows / 2 and max_sim_rows) and extended linearly (the stream is periodic per bundle row apart from
refresh; tests/test_duplex_hw.py checks the error against a full simulation).

Layout: 4 bundle-indexed spaces per pseudo-channel, space s = bundle (SID s // 2, half s % 2). A bundle row
of space s is row r of the 8 banks of that bundle (8 KB per pseudo-channel).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np

from archsim import schema
from archsim.dram import latency
from archsim.dram.spec import DramSpec, load_spec
from archsim.errors import ConfigError
from archsim.schema import REQUIRED, opt

PRESET = Path(__file__).resolve().parent.parent / "presets" / "duplex" / "devices.yaml"
SPACES = 4
RDBD_PER_ROW = 32            # 1 KB row per bank / 32 B column
WEIGHTS_PER_RDBD = 128       # 8 banks x 32 B = 256 B of FP16 per pseudo-channel per RDBD


@dataclass(frozen=True)
class LogicPimConfig:
    """The Logic-PIM unit of one stack."""

    gemm_modules: int = opt(32, "GEMM modules on the logic die", minimum=1)
    macs_per_module: int = opt(512, "FP16 MACs per module per PIM cycle", minimum=1)
    clock_hz: float = opt(650e6, "PIM clock, Hz", above=0)
    module_buffer_bytes: int = opt(8192, "buffer of one module (its weights read ahead), bytes", minimum=1)
    input_buffer_bytes: int = opt(1 << 20, "input buffer, bytes", minimum=1)
    buffers: int = opt(2, "input buffers (double buffering: 2)", minimum=1)

    def __post_init__(self) -> None:
        schema.validate(self)

    @classmethod
    def load(cls) -> LogicPimConfig:
        """The Logic-PIM unit of the Duplex devices preset."""
        return devices().logic_pim

    @property
    def macs_per_cycle(self) -> int:
        return self.gemm_modules * self.macs_per_module

    @property
    def flops_per_s(self) -> float:
        """Peak FP16 FLOP/s of one stack (2 FLOPs per MAC)."""
        return 2.0 * self.macs_per_cycle * self.clock_hz


@dataclass(frozen=True)
class XpuPreset:
    """The xPU of a Duplex device as a roofline."""

    peak_flops: float = opt(REQUIRED, "FP16 dense FLOP/s", above=0)
    hbm_bandwidth_bytes_per_s: float = opt(REQUIRED, "bandwidth of the device's own stacks, bytes/s", above=0)
    memory_bytes: int = opt(REQUIRED, "capacity of the device's own stacks, bytes", minimum=1)
    compute_efficiency: float = opt(1.0, "fraction of peak FLOP/s reached", above=0, maximum=1)
    bandwidth_efficiency: float = opt(1.0, "fraction of peak bandwidth reached", above=0, maximum=1)


@dataclass(frozen=True)
class LinkPreset:
    bandwidth_bytes_per_s: float = opt(REQUIRED, "bandwidth, bytes/s", above=0)
    latency_s: float = opt(REQUIRED, "latency, s", minimum=0)


@dataclass(frozen=True)
class LinksPreset:
    """Links between devices: NVLink inside a node, InfiniBand between nodes."""

    nvlink: LinkPreset = opt(LinkPreset, "link inside a node")
    infiniband: LinkPreset = opt(LinkPreset, "link between nodes")
    devices_per_node: int = opt(REQUIRED, "devices on one node's NVLink", minimum=1)


@dataclass(frozen=True)
class ProcessorPreset:
    """A low-Op/B processor per stack: peak FLOP/s = op_b x bandwidth_x x the external HBM bandwidth."""

    bandwidth_x: float = opt(REQUIRED, "internal bandwidth over the external HBM bandwidth", above=0)
    op_b: float = opt(REQUIRED, "peak FLOPs per byte", above=0)
    pj_per_bit: float | Literal["dram"] = opt(REQUIRED, "DRAM energy per bit on its path (dram: the DRAM "
                                              "preset's bundle read)", minimum=0)


@dataclass(frozen=True)
class ProcessorsPreset:
    logic_pim: ProcessorPreset = opt(ProcessorPreset, "Logic-PIM on the logic die")
    bankgroup_pim: ProcessorPreset = opt(ProcessorPreset, "a PIM unit per bank group")
    bank_pim: ProcessorPreset = opt(ProcessorPreset, "a PIM unit per bank")


@dataclass(frozen=True)
class AreaPreset:
    """Area per stack, mm^2 (Logic-PIM as the paper sums it; the others derived, pim_area_mm2)."""

    tsv: float = opt(REQUIRED, "TSVs feeding the logic die", minimum=0)
    gemm_modules: float = opt(REQUIRED, "Logic-PIM's GEMM modules", minimum=0)
    buffers: float = opt(REQUIRED, "buffers", minimum=0)
    softmax: float = opt(REQUIRED, "softmax unit", minimum=0)
    dram_process_factor: float = opt(REQUIRED, "area of logic in a DRAM process over a logic process", above=0)


@dataclass(frozen=True)
class EnergyPreset:
    mac_pj: float = opt(REQUIRED, "energy of one FP16 MAC on every processor, pJ", minimum=0)


@dataclass(frozen=True)
class DuplexDevices:
    """The Duplex devices preset (archsim/presets/duplex/devices.yaml): one package is an xPU beside `stacks`
    HBM stacks of DRAM preset `dram`, optionally a low-Op/B processor beside it."""

    dram: str = opt(REQUIRED, "DRAM preset of the stacks")
    stacks: int = opt(REQUIRED, "HBM stacks per device", minimum=1)
    xpu: XpuPreset = opt(XpuPreset, "the xPU")
    links: LinksPreset = opt(LinksPreset, "links between devices")
    processors: ProcessorsPreset = opt(ProcessorsPreset, "low-Op/B processors")
    logic_pim: LogicPimConfig = opt(LogicPimConfig, "the Logic-PIM unit of one stack")
    area_mm2: AreaPreset = opt(AreaPreset, "area per stack")
    energy: EnergyPreset = opt(EnergyPreset, "compute energy")
    paper_devices: dict[str, int] = opt({}, "devices the paper gives each model")


@lru_cache(maxsize=4)
def devices(path: str | None = None) -> DuplexDevices:
    """The Duplex devices preset (archsim/presets/duplex/devices.yaml)."""
    return schema.load(DuplexDevices, Path(path) if path else PRESET)


def load_devices(name_or_path: str | Path = PRESET.stem, overrides: dict[str, Any] | None = None) -> DuplexDevices:
    """A Duplex devices preset by name (archsim/presets/duplex/) or path, with `overrides` by key path (a run's
    `devices_overrides`: {"xpu": {"peak_flops": 2e15}} or {"xpu.peak_flops": 2e15}; an error names that key)."""
    if not overrides and name_or_path == PRESET.stem:
        return devices()
    return schema.load_preset(DuplexDevices, "Duplex devices", PRESET.parent, name_or_path, overrides,
                              blame="devices_overrides")[0]


def pim_area_mm2(processor: str, spec: DramSpec | None = None) -> float:
    """Area per stack of a low-Op/B processor (devices.yaml `area_mm2`): Logic-PIM as the paper sums it;
    Bank-PIM / BankGroup-PIM derived (GEMM area x peak ratio x DRAM-process factor + buffers + softmax)."""
    d = devices()
    a = d.area_mm2
    common = float(a.buffers) + float(a.softmax)
    if processor == "logic_pim":
        return float(a.tsv) + float(a.gemm_modules) + common
    names = [f.name for f in dataclasses.fields(d.processors)]
    if processor not in names:
        raise ConfigError("processor", f"unknown {processor!r}; allowed: {', '.join(names)}")
    p, lp = getattr(d.processors, processor), d.processors.logic_pim
    ratio = float(p.op_b) * float(p.bandwidth_x) / (float(lp.op_b) * float(lp.bandwidth_x))
    return float(a.gemm_modules) * ratio * float(a.dram_process_factor) + common


def pch_per_stack(spec: DramSpec) -> int:
    return spec.channels * spec.counts[1]


def bundle_bandwidth_bytes_per_s(spec: DramSpec) -> float:
    """Peak Logic-PIM bandwidth of one stack: 256 B per pseudo-channel per nCCDL."""
    return pch_per_stack(spec) * WEIGHTS_PER_RDBD * 2 / (spec.timing["nCCDL"] * spec.tCK_s)


def external_bandwidth_bytes_per_s(spec: DramSpec) -> float:
    """Peak xPU-path bandwidth of one stack: 32 B per pseudo-channel per nBL."""
    return pch_per_stack(spec) * spec.access_bytes / (spec.timing["nBL"] * spec.tCK_s)


def spaces_per_pch(spec: DramSpec) -> int:
    """Bundle spaces of one pseudo-channel: two bundles (the lower and upper banks of each bank group) per stack
    ID: 4 on HBM3 (2 SIDs), 2 on HBM2 pseudo-channel mode (no SID)."""
    return 2 * spec.counts[2]


def bundle_bank(spec: DramSpec, channel: int, pch: int, space: int, bankgroup: int = 0) -> int:
    """Global id of the first bank of bank group `bankgroup` in bundle `space` of (channel, pch)."""
    if not 0 <= space < spaces_per_pch(spec):
        raise ConfigError("space", f"must be 0..{spaces_per_pch(spec) - 1} on {spec.name}, got {space}")
    _, npc, nsid, nbg, nb = spec.counts
    sid, half = divmod(space, 2)
    return (((channel * npc + pch) * nsid + sid) * nbg + bankgroup) * nb + 2 * half


def bundle_of_bank(spec: DramSpec) -> np.ndarray:
    """Space index (0..3) of every bank of the device."""
    _, _, nsid, nbg, nb = spec.counts
    b = np.arange(spec.total_banks)
    sid = b // (nbg * nb) % nsid
    return sid * 2 + (b % nb) // 2


@dataclass(frozen=True)
class Segment:
    """`rows` bundle rows per pseudo-channel in `space`, multiplied by `m` input rows (m = 0: a plain
    read, e.g. a KV migration; no compute pacing)."""

    space: int
    rows: int
    m: int


def compute_cycles_per_rdbd(spec: DramSpec, cfg: LogicPimConfig, m: int) -> float:
    """DRAM cycles the GEMM modules spend on one RDBD of one pseudo-channel with `m` input rows."""
    macs_per_pch = cfg.macs_per_cycle / pch_per_stack(spec)
    pim_cycles = m * WEIGHTS_PER_RDBD / macs_per_pch
    return pim_cycles / cfg.clock_hz / spec.tCK_s


def bundle_stream(spec: DramSpec, cfg: LogicPimConfig, segments: list[Segment], channel: int = 0, pch: int = 0,
                  row0: int = 0, stack: DramSpec | None = None):
    """Commands (cmd, bank, row, col, at, compute-per-RDBD) of the stream of one pseudo-channel. Rows of
    segments in different spaces alternate, and the next row's ACTBD is placed right after the current
    row's ACTBD when it is in another bundle (its activate overlaps the current row's reads). `stack`: the
    whole stack's spec when `spec` holds fewer channels (the MACs are shared by all its pseudo-channels)."""
    C = spec.cmd
    order: list[tuple[int, int, float]] = []      # (space, row, compute cycles per RDBD)
    left = [s.rows for s in segments]
    nxt = [row0] * len(segments)
    while any(left):
        for i, s in enumerate(segments):
            if left[i]:
                order.append((s.space, nxt[i], compute_cycles_per_rdbd(stack or spec, cfg, s.m)))
                nxt[i] += 1
                left[i] -= 1
    # the next bundle's ACTBD goes after this many reads of the current row: by then the precharge of that
    # bundle (issued just before the current row's reads) has recovered, so the in-order stream never waits
    lookahead = min(RDBD_PER_ROW, math.ceil(latency.gap(spec, "PREBD", "ACTBD") / latency.gap(spec, "RDBD", "RDBD")) + 1)
    cmd, bank, row, col, comp = [], [], [], [], []
    opened = set()
    for k, (sp, r, c) in enumerate(order):
        b = bundle_bank(spec, channel, pch, sp)
        if k not in opened:
            cmd.append(C("ACTBD")), bank.append(b), row.append(r), col.append(-1), comp.append(0.0)
            opened.add(k)
        for j in range(RDBD_PER_ROW):
            if j == lookahead and k + 1 < len(order) and order[k + 1][0] != sp:
                nb = bundle_bank(spec, channel, pch, order[k + 1][0])
                cmd.append(C("ACTBD")), bank.append(nb), row.append(order[k + 1][1]), col.append(-1)
                comp.append(0.0)
                opened.add(k + 1)
            cmd.append(C("RDBD")), bank.append(b), row.append(r), col.append(j), comp.append(c)
        cmd.append(C("PREBD")), bank.append(b), row.append(-1), col.append(-1), comp.append(0.0)
    return (np.array(cmd, dtype=np.int64), np.array(bank, dtype=np.int64), np.array(row, dtype=np.int64),
            np.array(col, dtype=np.int64), np.array(comp))


def _paced_at(cmd: np.ndarray, comp: np.ndarray, rd: int, depth: int) -> np.ndarray:
    """Enqueue cycle of every command: a RDBD no earlier than the compute of the RDBD `depth` before it has
    finished when compute runs back to back (the module buffer holds `depth` RDBDs)."""
    is_rd = cmd == rd
    done = np.cumsum(np.where(is_rd, comp, 0.0))          # compute finished after each RDBD, back to back
    rd_idx = np.cumsum(is_rd) - 1
    at = np.zeros(len(cmd), dtype=np.int64)
    rd_done = done[is_rd]
    for i in np.nonzero(is_rd)[0]:
        j = rd_idx[i] - depth
        if j >= 0:
            at[i] = int(math.floor(rd_done[j]))
    return np.maximum.accumulate(at)


@dataclass
class PimOpTime:
    cycles: int                     # DRAM cycles of one channel (= the operator on every stack)
    counts: dict[str, int]          # commands of the whole stack
    estimator: str


class LogicPimTimer:
    """Times Logic-PIM operators on the channel engine (memoised by the exact stream shape)."""

    def __init__(self, spec: DramSpec | None = None, cfg: LogicPimConfig | None = None, max_sim_rows: int = 256,
                 refresh: str = "allbank"):
        self.spec = spec or load_spec(devices().dram)
        self.one = load_spec(self.spec.raw, overrides={"org.channels": 1})
        self.cfg = cfg or LogicPimConfig.load()
        self.max_sim_rows = max_sim_rows
        self.refresh = refresh
        self.memo: dict[tuple, tuple[int, dict[str, int]]] = {}
        self.simulated = 0
        self.engine_wall_s = 0.0

    def simulate(self, segments: list[Segment], log: bool = False, xpu=None):
        """Run the stream of both pseudo-channels of one channel; returns (cycles, command counts of the
        channel, the MemorySystem when `log` or `xpu` else None). `xpu`: (bank, row, column, arrival) arrays of
        xPU read requests entering through an FR-FCFS source `xpu` beside the streams (co-processing); the
        returned cycles are then still the Logic-PIM operator's, and the MemorySystem holds the requests'
        completion cycles (`request_done`)."""
        from archsim.engine.memory import MemorySystem

        spec = self.one
        npc = spec.counts[1]
        sources = [{"name": f"pim{p}", "kind": "stream"} for p in range(npc) if segments]
        if xpu is not None:
            sources.append({"name": "xpu", "kind": "rw"})
        ms = MemorySystem(spec, {"refresh": self.refresh}, sources=sources, log=True)
        depth = self.cfg.module_buffer_bytes // (WEIGHTS_PER_RDBD * 2)
        rd = spec.cmd("RDBD")
        lat = spec.commands[rd].latency
        rd_cmds = {}
        for p in range(npc if segments else 0):
            cmd, bank, row, col, comp = bundle_stream(spec, self.cfg, segments, 0, p, stack=self.spec)
            at = _paced_at(cmd, comp, rd, depth)
            ms.enqueue_stream(f"pim{p}", 0, cmd, bank, row=row, column=col, at=at)
            rd_cmds[p] = comp[cmd == rd]
        if xpu is not None:
            port = ms.add_port("xpu", width=npc)
            bank, row, col, arrive = xpu
            ms.enqueue_requests(port, 0, bank, row, col, 0, arrive, -1)
        ms.run()
        self.engine_wall_s += ms.wall_s
        self.simulated += 1
        lg = ms.command_log()
        end = 0
        for p in range(npc if segments else 0):
            issue = lg[(lg.command == "RDBD") & (lg.pseudochannel == p)].cycle.to_numpy()
            finish = 0.0
            for t, c in zip(issue + lat, rd_cmds[p], strict=True):
                finish = max(float(t), finish) + c
            end = max(end, math.ceil(finish), int(lg[(lg.pseudochannel == p) & lg.source.str.startswith("pim")]
                                                   .cycle.max()) + 1)
        cmd_counts = {k: int(v) for k, v in lg.command.value_counts().to_dict().items()}
        return end, cmd_counts, (ms if log or xpu is not None else None)

    def xpu_requests(self, spaces: tuple[int, ...], n: int, demand: float, row0: int = 4096):
        """`n` xPU read requests streaming a tensor that lies in bundle `spaces` of one channel, arriving at
        `demand` x the channel's peak xPU-path rate (one 32 B burst per nBL per pseudo-channel): consecutive
        bursts go round-robin over the pseudo-channels, bank groups and spaces, then over the columns of the
        open rows, then to the next bank of each bundle and the next row (an address map that keeps every bank
        group busy). Returns (bank, row, column, arrival cycle) for `simulate(xpu=...)`."""
        spec = self.one
        npc, nbg = spec.counts[1], spec.counts[3]
        i = np.arange(n)
        per_row = npc * nbg * len(spaces)
        pch = i % npc
        bg = i // npc % nbg
        sp = np.asarray(spaces)[i // (npc * nbg) % len(spaces)]
        col = i // per_row % RDBD_PER_ROW
        k = i // (per_row * RDBD_PER_ROW)
        bank = np.array([bundle_bank(spec, 0, int(p), int(s), int(b)) for p, s, b in zip(pch, sp, bg, strict=True)])
        bank = bank + k % 2                                  # the two banks of a bundle in a bank group
        row = row0 + k // 2
        rate = demand * npc / spec.timing["nBL"]             # requests per cycle
        arrive = np.floor(i / rate).astype(np.int64)
        return bank, row, col, arrive

    def interference(self, segments: list[Segment], xpu_spaces: tuple[int, ...], demand: float,
                     rows: int = 32) -> dict[str, float]:
        """Co-processing on one channel, measured: the Logic-PIM operator's stream (`segments`, scaled to `rows`
        bundle rows per pseudo-channel with the same mixture) runs beside an xPU read stream in `xpu_spaces`
        shaped to `demand` (0..1] of the xPU path's peak, and each alone. Returns
        xpu_slowdown = xPU bursts served alone / beside Logic-PIM over the window in which the Logic-PIM
        operator runs beside it (>= 1: the xPU operator progresses that much slower while they overlap),
        low_slowdown = Logic-PIM operator cycles beside the xPU / alone, and the bandwidths (fractions of the
        xPU path's peak). Memoised on (stream shape, spaces, demand)."""
        segs = tuple(s for s in segments if s.rows > 0)
        total = sum(s.rows for s in segs)
        shape = tuple(Segment(s.space, max(1, round(s.rows * rows / total)), s.m) for s in segs)
        demand = min(1.0, max(0.05, math.ceil(demand * 20) / 20))          # 5 % steps: a small table
        key = ("interference", shape, tuple(sorted(set(xpu_spaces))), demand)
        if key in self.memo:
            return self.memo[key]
        alone_pim, _, _ = self.simulate(list(shape))
        spec = self.one
        peak = spec.counts[1] / spec.timing["nBL"]
        n = int(math.ceil(demand * peak * alone_pim * 3)) + 64          # outlasts the slowed Logic-PIM stream
        req = self.xpu_requests(tuple(sorted(set(xpu_spaces))), n, demand)
        beside_pim, _, ms = self.simulate(list(shape), xpu=req)
        done_beside = ms.request_done
        _, _, ms_alone = self.simulate([], xpu=req)
        done_alone = ms_alone.request_done
        window = beside_pim
        served_beside = int((done_beside <= window).sum())
        served_alone = int((done_alone <= window).sum())
        out = {"xpu_slowdown": served_alone / max(1, served_beside), "low_slowdown": beside_pim / alone_pim,
               "xpu_bw_alone": served_alone / window / peak, "xpu_bw_beside": served_beside / window / peak,
               "demand": demand, "low_alone_cycles": alone_pim, "low_beside_cycles": beside_pim}
        self.memo[key] = out
        return out

    def _exact(self, segs: tuple[Segment, ...]) -> tuple[int, dict[str, int]]:
        if segs not in self.memo:
            cycles, counts, _ = self.simulate(list(segs))
            self.memo[segs] = (cycles, counts)
        return self.memo[segs]

    def time(self, segments: list[Segment]) -> PimOpTime:
        """Engine time of the operator whose per-pseudo-channel stream is `segments`."""
        segs = tuple(s for s in segments if s.rows > 0)
        if not segs:
            return PimOpTime(0, {}, "engine")
        total = sum(s.rows for s in segs)
        chans = self.spec.channels
        if total <= self.max_sim_rows:
            cycles, counts = self._exact(segs)
        else:   # linear extension from two simulated sizes with the same mixture
            def scaled(target: int) -> tuple[Segment, ...]:
                return tuple(Segment(s.space, max(1, round(s.rows * target / total)), s.m) for s in segs)
            a, b = scaled(self.max_sim_rows // 2), scaled(self.max_sim_rows)
            ra, rb = sum(s.rows for s in a), sum(s.rows for s in b)
            (ca, na), (cb, nb) = self._exact(a), self._exact(b)
            slope = (cb - ca) / (rb - ra)
            cycles = round(cb + slope * (total - rb))
            counts = {k: round(nb.get(k, 0) + (nb.get(k, 0) - na.get(k, 0)) / (rb - ra) * (total - rb))
                      for k in set(na) | set(nb)}
        return PimOpTime(int(cycles), {k: v * chans for k, v in counts.items()}, "engine")

    def seconds(self, segments: list[Segment]) -> float:
        return self.time(segments).cycles * self.spec.tCK_s


def roofline_seconds(spec: DramSpec, cfg: LogicPimConfig, flops: float, nbytes: float) -> float:
    """Logic-PIM roofline of one stack: max(FLOPs / peak, bytes / bundle bandwidth)."""
    return max(flops / cfg.flops_per_s, nbytes / bundle_bandwidth_bytes_per_s(spec))


def bundle_conflicts(spec: DramSpec, log, pim_sources: tuple[str, ...], xpu_sources: tuple[str, ...]) -> list[str]:
    """Bundle conflicts in a command log: an xPU-source command to a bank of a bundle while a Logic-PIM
    source holds that bundle open (from its ACTBD to its PREBD). Returns one message per conflict."""
    if len(log) == 0:
        return []
    bank_ids = _bank_ids(spec, log)
    bundle = spec.node_of[bank_ids, spec.levels.index("bundle")]
    cyc = log.cycle.to_numpy()
    cmd = log.command.to_numpy()
    src = log.source.to_numpy()
    held: dict[int, int] = {}               # bundle node -> cycle opened by PIM
    out = []
    for i in range(len(log)):
        if src[i] in pim_sources:
            if cmd[i] == "ACTBD":
                held[int(bundle[i])] = int(cyc[i])
            elif cmd[i] == "PREBD":
                held.pop(int(bundle[i]), None)
        elif src[i] in xpu_sources and int(bundle[i]) in held:
            out.append(f"cycle {cyc[i]}: {src[i]} {cmd[i]} to bank {bank_ids[i]} of bundle {bundle[i]}, "
                       f"held by Logic-PIM since cycle {held[int(bundle[i])]}")
    return out


def _bank_ids(spec: DramSpec, log) -> np.ndarray:
    c = spec.counts
    a = [log[k].to_numpy().astype(np.int64) for k in ("channel", "pseudochannel", "rank", "bankgroup", "bank")]
    return (((a[0] * c[1] + a[1]) * c[2] + a[2]) * c[3] + a[3]) * c[4] + a[4]


# ---- functional model -----------------------------------------------------------------------------------
def gemm_functional(x: np.ndarray, w: np.ndarray, stacks: int, split: str = "columns") -> np.ndarray:
    """x @ w computed as Logic-PIM does: FP16 operands, FP32 accumulation, the weight split over `stacks`
    (columns: each stack owns a column slice and writes its outputs; rows: each stack owns a slice of the
    reduction dimension and leaves a partial sum, which the xPU all-reduces)."""
    x16, w16 = x.astype(np.float16), w.astype(np.float16)
    if split == "columns":
        parts = np.array_split(np.arange(w.shape[1]), stacks)
        return np.concatenate([x16.astype(np.float32) @ w16[:, p].astype(np.float32) for p in parts], axis=1)
    if split == "rows":
        parts = np.array_split(np.arange(w.shape[0]), stacks)
        partial = [x16[:, p].astype(np.float32) @ w16[p, :].astype(np.float32) for p in parts]
        return np.sum(partial, axis=0)       # the xPU's all-reduce over stacks
    raise ConfigError("split", f"must be columns or rows, got {split!r}")
