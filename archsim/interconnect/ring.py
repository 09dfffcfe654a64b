"""A ring of tensor-parallel devices: link model, ring collectives (closed forms and an event-driven run on
the event loop's `Link` units), and the chunk schedule the fused T3 schedule reuses.

Ring direction: device d sends to d + 1 (mod N). A buffer of `total_bytes` per device is cut into N chunks;
chunk j ends on device j after a reduce-scatter (RS). RS step k (k = 0 .. N-2): device d sends chunk
(d - 1 - k) mod N, which it received at step k - 1 plus its own part. All-gather (AG) step k: device d sends
chunk (d - k) mod N. All-reduce (AR) = RS then AG.

Closed forms (links in parallel, a step waits for its chunk; `directions` = 2: the buffer is cut in two
halves, one reduced by a ring in each direction of the bidirectional links, in parallel):
    t_RS = t_AG = (N - 1) * (hop_latency + total_bytes / N / directions / link_bandwidth),   t_AR = 2 t_RS.
`link_bytes_per_s` is one direction's bandwidth.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from archsim import schema
from archsim.errors import ConfigError
from archsim.schema import REQUIRED, opt

if TYPE_CHECKING:
    import numpy as np

PRESET_DIR = Path(__file__).resolve().parent.parent / "presets" / "interconnect"
COLLECTIVES = ["reduce_scatter", "all_gather", "all_reduce"]


@dataclass(frozen=True)
class RingPreset:
    """A ring preset file (archsim/presets/interconnect/<name>.yaml): the links of a ring of devices."""

    link_bytes_per_s: float = opt(REQUIRED, "bandwidth of one link in one direction, bytes/s", minimum=1.0)
    hop_latency_s: float = opt(REQUIRED, "latency of one hop, s", minimum=0.0)
    topology: Literal["ring"] = opt("ring", "how the devices are linked (a ring)")
    name: str = opt("", "the preset's name (default: its file's)")
    source: str = opt("", "where its numbers come from")


@dataclass(frozen=True)
class RingConfig(RingPreset):
    """N devices on a ring; each link moves `link_bytes_per_s` one way after `hop_latency_s`. A collective uses
    one direction of every link (`directions` 1, NCCL's ring) or both (2: half the buffer each way)."""

    name: str = opt("ring", "the ring's name (its preset's)")
    devices: int = opt(2, "devices on the ring", minimum=2)
    directions: int = opt(1, "ring directions a collective uses", choices=(1, 2))

    def __post_init__(self) -> None:
        schema.validate(self)

    def transfer_s(self, nbytes: int) -> float:
        """One hop: latency plus serialisation."""
        return self.hop_latency_s + nbytes / self.link_bytes_per_s


def load_ring(name_or_path: str | Path, devices: int) -> RingConfig:
    """A ring preset (archsim/presets/interconnect/<name>.yaml) or a user's file, for `devices` devices."""
    preset, path = schema.load_preset(RingPreset, "interconnect", PRESET_DIR, name_or_path)
    return RingConfig(**{**dataclasses.asdict(preset), "name": preset.name or path.stem}, devices=devices)


# ---- schedule ------------------------------------------------------------------------------------------
def rs_send_chunk(n: int, device: int, step: int) -> int:
    """The chunk device `device` sends at reduce-scatter step `step` (0 .. n-2)."""
    return (device - 1 - step) % n


def ag_send_chunk(n: int, device: int, step: int) -> int:
    """The chunk device `device` sends at all-gather step `step` (0 .. n-2)."""
    return (device - step) % n


def chunk_bounds(length: int, n: int, unit: int = 1) -> list[tuple[int, int]]:
    """Cut `length` into n contiguous chunks on multiples of `unit` (the last unit may be partial); sizes
    differ by at most one unit."""
    units = math.ceil(length / unit)
    if units < n:
        raise ConfigError("tp", f"{length} columns in units of {unit} cannot be cut into {n} chunks")
    edges = [min(length, (units * i // n) * unit) for i in range(n + 1)]
    return [(edges[i], edges[i + 1]) for i in range(n)]


# ---- closed forms ----------------------------------------------------------------------------------------
def collective_s(cfg: RingConfig, kind: str, total_bytes: int) -> float:
    """Closed-form time of a ring collective on a buffer of `total_bytes` per device (module doc)."""
    from archsim.errors import unknown_name

    if kind not in COLLECTIVES:
        raise unknown_name("collective", kind, COLLECTIVES)
    if total_bytes < 0:
        raise ConfigError("total_bytes", f"must be >= 0, got {total_bytes}")
    chunk = total_bytes / cfg.devices / cfg.directions
    one = (cfg.devices - 1) * cfg.transfer_s(chunk)
    return 2 * one if kind == "all_reduce" else one


def link_bytes(cfg: RingConfig, kind: str, total_bytes: int) -> int:
    """Bytes each device sends on its links (both directions together) during the collective."""
    steps = (cfg.devices - 1) * (2 if kind == "all_reduce" else 1)
    return steps * math.ceil(total_bytes / cfg.devices)


# ---- event-driven run (functional + timing) ----------------------------------------------------------------
@dataclass
class CollectiveRun:
    seconds: float
    outputs: list[np.ndarray]         # per device: RS -> its reduced chunk; AG / AR -> the full buffer
    sends: int                        # link transfers made


def simulate_collective(cfg: RingConfig, kind: str, inputs: list[np.ndarray]) -> CollectiveRun:
    """Run a ring collective on the event loop: one `Link` unit per device (d -> d+1), each step a transfer
    task that waits for the chunk it forwards. `inputs[d]` is device d's buffer (1-D; RS/AR: the partial
    sums, AG: only chunk d is used). Values are combined in numpy as they arrive, so the result is the
    collective's, in the ring's order of additions."""
    import numpy as np

    from archsim.engine.loop import EventLoop, Link, Task
    from archsim.errors import unknown_name

    if kind not in COLLECTIVES:
        raise unknown_name("collective", kind, COLLECTIVES)
    if cfg.directions != 1:
        raise NotImplementedError("simulate_collective runs one direction of the ring (issue 34 added the "
                                  "bidirectional closed forms and T3's bidirectional schedule, not this run)")
    n = cfg.devices
    if len(inputs) != n:
        raise ConfigError("inputs", f"one buffer per device: {n} expected, got {len(inputs)}")
    length = inputs[0].shape[0]
    if any(x.shape != (length,) for x in inputs):
        raise ConfigError("inputs", "every device's buffer must be 1-D and of the same length")
    bounds = chunk_bounds(length, n)
    item = inputs[0].dtype.itemsize
    lat_ps = int(round(cfg.hop_latency_s * 1e12))
    loop = EventLoop()
    links = [loop.add(Link(f"link{d}", lat_ps, cfg.link_bytes_per_s)) for d in range(n)]
    buf = [x.astype(np.float64 if x.dtype.kind == "f" else x.dtype).copy() for x in inputs]
    rs = kind in ("reduce_scatter", "all_reduce")
    ag = kind in ("all_gather", "all_reduce")
    tasks: list[Task] = []
    prev: dict[int, Task] = {}       # device -> its transfer of the previous step (what it forwards next)

    def arrive(src: int, dst: int, lo: int, hi: int, add: bool):
        # the chunk leaves the sender whole; nothing changes it at the sender between the arrival it waited
        # for and this transfer's end, so reading it at the end is reading what was sent
        def cb(_task: Task, _t: int) -> None:
            if add:
                buf[dst][lo:hi] += buf[src][lo:hi]
            else:
                buf[dst][lo:hi] = buf[src][lo:hi]
        return cb

    phases = (["rs"] * (n - 1) if rs else []) + (["ag"] * (n - 1) if ag else [])
    for i, phase in enumerate(phases):
        step = i if phase == "rs" else i - (n - 1 if rs else 0)
        cur: dict[int, Task] = {}
        for d in range(n):
            c = rs_send_chunk(n, d, step) if phase == "rs" else ag_send_chunk(n, d, step)
            lo, hi = bounds[c]
            dst = (d + 1) % n
            task = Task(f"{phase}{step}:{d}->{dst}", links[d], cycles=links[d].transfer_cycles((hi - lo) * item),
                        on_done=[arrive(d, dst, lo, hi, phase == "rs")])
            sender = prev.get((d - 1) % n)     # what device d forwards arrived with its left neighbour's send
            if sender is not None:
                task.deps.append(sender)
            cur[d] = task
            tasks.append(task)
        prev = cur
    loop.submit(tasks)
    end_ps = loop.run()
    if rs and not ag:
        outs = [buf[d][bounds[d][0]:bounds[d][1]].astype(inputs[d].dtype) for d in range(n)]
    else:
        outs = [b.astype(inputs[0].dtype) for b in buf]
    return CollectiveRun(seconds=end_ps * 1e-12, outputs=outs, sends=len(tasks))
