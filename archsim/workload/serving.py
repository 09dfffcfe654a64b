"""LLM serving workloads: request traces, iteration-level (continuous) batching, and NeuPIMs-style placement
of requests on memory channels with sub-batch partitioning.

Self-contained on purpose: iteration latency comes from a callback, so any system model (NPU tile model,
PIM, DRAM engine, a roofline) can be plugged in without this module importing it.

Length distributions: the named datasets (`sharegpt`, `alpaca`) sample prompt and output lengths
independently from measured histograms, workloads/datasets/<name>_lengths.csv (counts of the tokenised ShareGPT
and Alpaca requests that NeuPIMs' trace generator ships; source and build script in that folder). A sampled
output is clipped to 2048 - prompt (NeuPIMs' trace generator clips a sequence at max_seq_len = 2048).
`LengthDist` (a discretised, truncated log-normal with a given mean) remains for synthetic workloads.
"""
from __future__ import annotations

import csv
import json
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from archsim import progress
from archsim.errors import UserError
from archsim.workload.spec import ModelSpec

if TYPE_CHECKING:
    import pandas as pd

MAX_SEQ_TOKENS = 2048
TRACE_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")
_EXPECTED = ("expected columns arrival_s, prompt_tokens, output_tokens "
             "(arrival_s a number >= 0, token counts integers >= 1)")


# ---- requests and length distributions ------------------------------------------------------------------
@dataclass(frozen=True)
class Request:
    """One inference request: arrives at `arrival_s`, has a prompt, wants `output_tokens` new tokens."""

    id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int

    @property
    def total_tokens(self) -> int:
        """KV tokens the request holds when it finishes."""
        return self.prompt_tokens + self.output_tokens


def _norm_cdf(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.array([math.erf(v / math.sqrt(2.0)) for v in x]))


@lru_cache(maxsize=64)
def _lognormal_pmf(mu: float, sigma: float, max_tokens: int) -> tuple[float, ...]:
    """P(k) for k = 1..max_tokens of round(exp(N(mu, sigma^2))) with mass below 1.5 on 1, truncated at max."""
    edges = np.log(np.arange(1, max_tokens + 1) + 0.5)           # upper edges 1.5, 2.5, ...
    cdf = _norm_cdf((edges - mu) / sigma)
    pmf = np.diff(np.concatenate(([0.0], cdf)))
    return tuple((pmf / pmf.sum()).tolist())


@lru_cache(maxsize=64)
def _fit_mu(mean: float, sigma: float, max_tokens: int) -> float:
    ks = np.arange(1, max_tokens + 1)
    lo, hi = -20.0, math.log(max_tokens) + 20.0 * sigma
    for _ in range(100):                      # the mean grows monotonically with mu
        mid = 0.5 * (lo + hi)
        if float(np.dot(ks, _lognormal_pmf(mid, sigma, max_tokens))) < mean:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class LengthDist:
    """Discretised, truncated log-normal token-count distribution with a prescribed mean (module doc)."""

    mean: float
    sigma: float
    max_tokens: int

    def __post_init__(self) -> None:
        if not (self.sigma > 0 and self.max_tokens >= 2 and 1.0 < self.mean < self.max_tokens):
            raise ValueError(f"need sigma > 0, max_tokens >= 2 and 1 < mean < max_tokens; got {self}")

    @property
    def mu(self) -> float:
        """Location of the underlying normal, fitted so `mean_tokens` equals `mean`."""
        return _fit_mu(float(self.mean), float(self.sigma), int(self.max_tokens))

    def pmf(self) -> np.ndarray:
        """P(length = k) for k = 1..max_tokens."""
        return np.array(_lognormal_pmf(self.mu, float(self.sigma), int(self.max_tokens)))

    @property
    def mean_tokens(self) -> float:
        """Exact mean of the discretised distribution (equals `mean` up to the bisection tolerance)."""
        return float(np.dot(np.arange(1, self.max_tokens + 1), self.pmf()))

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.choice(np.arange(1, self.max_tokens + 1), size=size, p=self.pmf())


@dataclass(frozen=True)
class HistogramDist:
    """Lengths drawn from a measured histogram: `counts[k - 1]` requests had length k (k = 1..max_tokens)."""

    counts: tuple[int, ...]
    source: str = ""

    @property
    def max_tokens(self) -> int:
        return len(self.counts)

    def pmf(self) -> np.ndarray:
        c = np.asarray(self.counts, dtype=float)
        return c / c.sum()

    @property
    def mean_tokens(self) -> float:
        return float(np.dot(np.arange(1, self.max_tokens + 1), self.pmf()))

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.choice(np.arange(1, self.max_tokens + 1), size=size, p=self.pmf())


MAX_HISTOGRAM_TOKENS = 1 << 20    # longer than any model's context (the longest shipped: 128 K)


def load_length_histograms(path: str | Path) -> tuple[HistogramDist, HistogramDist]:
    """(prompt, output) histograms from a CSV with columns tokens, prompt_requests, output_requests."""
    import io

    import pandas as pd

    from archsim.config import read_text

    path = Path(path)
    try:
        df = pd.read_csv(io.StringIO(read_text(path, "length histogram CSV")))
    except (ValueError, pd.errors.ParserError) as exc:
        raise UserError(f"{path}: not a readable CSV ({exc})") from None
    want = ["tokens", "prompt_requests", "output_requests"]
    if list(df.columns) != want:
        raise UserError(f"{path}: expected columns {', '.join(want)}, got {', '.join(map(str, df.columns))}")
    tok = df["tokens"].to_numpy()
    # a histogram bin per token count up to the longest: bounded like a model's context
    if not np.issubdtype(tok.dtype, np.integer) or (tok < 1).any() or (tok > MAX_HISTOGRAM_TOKENS).any() \
            or len(np.unique(tok)) != len(tok):
        raise UserError(f"{path}: tokens must be distinct integers >= 1 and <= {MAX_HISTOGRAM_TOKENS:,}")
    out = []
    for col in want[1:]:
        counts = np.zeros(int(tok.max()), dtype=np.int64)
        counts[tok - 1] = df[col].to_numpy()
        last = int(np.nonzero(counts)[0].max()) + 1
        out.append(HistogramDist(tuple(int(c) for c in counts[:last]), source=str(path)))
    return out[0], out[1]


class _Datasets(dict):
    """Named datasets -> (prompt, output) length distributions, loaded from workloads/datasets on first use."""

    NAMES = ("alpaca", "sharegpt")

    def __init__(self):
        super().__init__({n: None for n in self.NAMES})

    def __getitem__(self, name: str):
        if super().__getitem__(name) is None:
            from archsim import paths

            path = paths.shipped_dir("workloads") / "datasets" / f"{name}_lengths.csv"
            super().__setitem__(name, load_length_histograms(path))
        return super().__getitem__(name)

    def items(self):
        return [(n, self[n]) for n in self]

    def values(self):
        return [self[n] for n in self]


# ShareGPT and Alpaca request lengths as NeuPIMs' trace generator tokenised them (module doc).
DATASETS: dict[str, tuple[HistogramDist, HistogramDist]] = _Datasets()


def generate_requests(n: int, dataset: str | tuple[LengthDist, LengthDist] = "sharegpt",
                      qps: float | None = None, seed: int = 0) -> list[Request]:
    """`n` requests with lengths from `dataset`; Poisson arrivals at `qps` requests/s, or all at t = 0 when
    `qps` is None (closed loop: the batcher is never starved). Same seed, same trace."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be an integer >= 0, got {n!r}")
    if isinstance(dataset, str):
        if dataset not in DATASETS:
            raise UserError(f"unknown dataset {dataset!r}; known: {', '.join(sorted(DATASETS))}")
        prompt_dist, output_dist = DATASETS[dataset]
        clip = True          # measured lengths: a sequence is clipped at MAX_SEQ_TOKENS (module doc)
    else:
        prompt_dist, output_dist = dataset
        clip = False
    if clip and prompt_dist.max_tokens >= MAX_SEQ_TOKENS:
        raise ValueError(f"prompts of up to {prompt_dist.max_tokens} tokens leave no room for an output in "
                         f"{MAX_SEQ_TOKENS} tokens")
    if not clip and prompt_dist.max_tokens + output_dist.max_tokens > MAX_SEQ_TOKENS:
        raise ValueError(f"prompt and output maxima ({prompt_dist.max_tokens} + {output_dist.max_tokens}) exceed "
                         f"the max sequence of {MAX_SEQ_TOKENS} tokens")
    rng = np.random.default_rng(seed)
    prompts = prompt_dist.sample(rng, n)
    outputs = output_dist.sample(rng, n)
    if clip:
        outputs = np.minimum(outputs, MAX_SEQ_TOKENS - prompts)
    if qps is None:
        arrivals = np.zeros(n)
    else:
        if not qps > 0:
            raise ValueError(f"qps must be > 0 (or None for all-at-once), got {qps}")
        arrivals = np.cumsum(rng.exponential(1.0 / qps, size=n))
    return [Request(i, float(arrivals[i]), int(prompts[i]), int(outputs[i])) for i in range(n)]


# ---- trace files ----------------------------------------------------------------------------------------
def write_trace(path: str | Path, requests: Sequence[Request]) -> Path:
    """Write a .csv (header arrival_s,prompt_tokens,output_tokens) or .jsonl (one object per line) trace."""
    path = Path(path)
    rows = [{"arrival_s": repr(float(r.arrival_s)), "prompt_tokens": r.prompt_tokens,
             "output_tokens": r.output_tokens} for r in requests]
    if path.suffix == ".csv":
        with path.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(TRACE_COLUMNS))
            writer.writeheader()
            writer.writerows(rows)
    elif path.suffix == ".jsonl":
        with path.open("w") as fh:
            for r in requests:
                fh.write(json.dumps({"arrival_s": float(r.arrival_s), "prompt_tokens": r.prompt_tokens,
                                     "output_tokens": r.output_tokens}) + "\n")
    else:
        raise UserError(f"{path}: trace files must end in .csv or .jsonl")
    return path


def _parse_row(path: Path, line: int, values: dict, from_json: bool) -> tuple[float, int, int]:
    def bad(problem: str) -> UserError:
        return UserError(f"{path}:{line}: {problem}; {_EXPECTED}")

    missing = [c for c in TRACE_COLUMNS if c not in values or values[c] in (None, "")]
    if missing:
        raise bad(f"missing {', '.join(missing)}")
    raw = values["arrival_s"]
    try:
        if isinstance(raw, bool):
            raise ValueError
        arrival = float(raw)
    except (TypeError, ValueError):
        raise bad(f"arrival_s {raw!r} is not a number") from None
    if not (math.isfinite(arrival) and arrival >= 0):
        raise bad(f"arrival_s {raw!r} must be finite and >= 0")
    counts = []
    for col in ("prompt_tokens", "output_tokens"):
        raw = values[col]
        if from_json:
            ok = isinstance(raw, int) and not isinstance(raw, bool)
            value = raw if ok else None
        else:
            text = str(raw).strip()
            ok = text.lstrip("+").isdigit()
            value = int(text) if ok else None
        if value is None or value < 1:
            raise bad(f"{col} {raw!r} is not an integer >= 1")
        counts.append(value)
    return arrival, counts[0], counts[1]


def read_trace(path: str | Path) -> list[Request]:
    """Read a user trace (.csv with a header, or .jsonl); requests are numbered in file order and returned
    sorted by arrival (stable). Any bad line raises UserError naming the file, the line and the columns."""
    from archsim.config import read_text

    path = Path(path)
    text = read_text(path, "trace file")
    parsed: list[tuple[float, int, int]] = []
    if path.suffix == ".csv":
        lines = text.splitlines()
        if not lines:
            raise UserError(f"{path}:1: empty file; {_EXPECTED}")
        header = [h.strip() for h in next(csv.reader([lines[0]]))]
        missing = [c for c in TRACE_COLUMNS if c not in header]
        if missing:
            raise UserError(f"{path}:1: header {','.join(header)!r} lacks {', '.join(missing)}; {_EXPECTED}")
        for lineno, fields_ in enumerate(csv.reader(lines[1:]), start=2):
            if not fields_ or all(not f.strip() for f in fields_):
                continue
            if len(fields_) != len(header):
                raise UserError(f"{path}:{lineno}: {len(fields_)} fields, header has {len(header)}; {_EXPECTED}")
            parsed.append(_parse_row(path, lineno, dict(zip(header, (f.strip() for f in fields_), strict=True)),
                                     from_json=False))
    elif path.suffix == ".jsonl":
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserError(f"{path}:{lineno}: invalid JSON ({exc.msg}); {_EXPECTED}") from None
            if not isinstance(obj, dict):
                raise UserError(f"{path}:{lineno}: expected a JSON object; {_EXPECTED}")
            parsed.append(_parse_row(path, lineno, obj, from_json=True))
    else:
        raise UserError(f"{path}: trace files must end in .csv or .jsonl")
    requests = [Request(i, a, p, o) for i, (a, p, o) in enumerate(parsed)]
    return sorted(requests, key=lambda r: (r.arrival_s, r.id))


# ---- running batches: length-biased samples and NeuPIMs' snapshots --------------------------------------
# NeuPIMs' trace generator runs its batch in chunks of 10 decode steps: finished requests leave and new ones join
# only between chunks, and its snapshots are taken there (get_distributions.py:294-320, 334 `cycle_unit = 10`)
ADMIT_EVERY_STEPS = 10


def running_context_counts(prompts: np.ndarray, outputs: np.ndarray, admit_every: int = ADMIT_EVERY_STEPS,
                           max_tokens: int = MAX_SEQ_TOKENS) -> np.ndarray:
    """counts[c - 1]: how often a steady-state continuous-batching batch holds a request with context c, for
    requests drawn uniformly from (prompts[i], outputs[i]) pairs.

    A request stays in the batch for its output's decode steps, so it fills a batch slot in proportion to its
    output length (length bias: long requests stay longer). Requests join and leave every `admit_every` steps,
    so a request is seen after 0, a, 2a, ... generated tokens (ceil(output / a) times); its context is prompt +
    generated, capped at `max_tokens` (a running request keeps generating at the cap, get_distributions.py:127-128),
    at least 1 (an empty prompt's first step attends to its one new token).
    These are the statistics of NeuPIMs' batch snapshots (workloads/datasets/neupims_traces; tests/test_serving_traces.py)."""
    prompts, outputs = np.asarray(prompts, dtype=np.int64), np.asarray(outputs, dtype=np.int64)
    counts = np.zeros(max_tokens, dtype=np.int64)
    visits = -(-outputs // admit_every)
    for lo in range(0, len(prompts), 1 << 16):          # bounded memory for large datasets
        k = visits[lo:lo + (1 << 16)]
        first = np.repeat(np.cumsum(k) - k, k)
        step = np.arange(int(k.sum())) - first
        ctx = np.clip(np.repeat(prompts[lo:lo + (1 << 16)], k) + admit_every * step, 1, max_tokens)
        counts += np.bincount(ctx - 1, minlength=max_tokens)[:max_tokens]
    return counts


def sample_running_batch(running: HistogramDist, batch: int, rng: np.random.Generator) -> list[int]:
    """Context lengths of `batch` requests of a steady-state running batch, drawn from a running-context
    histogram (`running_context_counts`; a named dataset's RUNNING entry)."""
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    return running.sample(rng, batch).tolist()


class _Running(dict):
    """Named datasets -> their running-context histograms (workloads/datasets/<name>_running.csv, built with
    `running_context_counts` from the same token counts as <name>_lengths.csv by build_lengths.py)."""

    def __missing__(self, name: str) -> HistogramDist:
        import pandas as pd

        from archsim import paths

        if name not in _Datasets.NAMES:
            raise KeyError(name)
        path = paths.shipped_dir("workloads") / "datasets" / f"{name}_running.csv"
        df = pd.read_csv(path)
        if list(df.columns) != ["tokens", "batch_slots"]:
            raise UserError(f"{path}: expected columns tokens, batch_slots")
        counts = np.zeros(int(df["tokens"].max()), dtype=np.int64)
        counts[df["tokens"].to_numpy() - 1] = df["batch_slots"].to_numpy()
        self[name] = HistogramDist(tuple(int(c) for c in counts), source=str(path))
        return self[name]


RUNNING: dict[str, HistogramDist] = _Running()


SNAPSHOT_COLUMNS = ("seq_len", "ch_idx")
# named sets of NeuPIMs' batch snapshots (workloads/datasets/neupims_traces/<folder>)
SNAPSHOT_SETS = {"neupims_clb": "clb", "neupims_rr": "rr"}


@dataclass(frozen=True)
class Snapshot:
    """One running batch as NeuPIMs' simulator reads it: each request's context length and its KV channel."""

    seq_lens: tuple[int, ...]
    channels: tuple[int, ...]
    source: str


def is_snapshot(path: str | Path) -> bool:
    """A .csv whose header is NeuPIMs' `seq_len,ch_idx` (a batch snapshot, not a request trace)."""
    from archsim.config import read_text

    path = Path(path)
    if path.suffix != ".csv":
        return False
    first = read_text(path, "trace file").split("\n", 1)[0]
    return tuple(h.strip() for h in first.split(",")) == SNAPSHOT_COLUMNS


def read_snapshot(path: str | Path) -> Snapshot:
    """A NeuPIMs batch snapshot (header seq_len,ch_idx; integers >= 1 and >= 0); a bad line raises UserError
    naming the file and the line."""
    from archsim.config import read_text

    path = Path(path)
    lines = read_text(path, "trace file").splitlines()
    header = tuple(h.strip() for h in lines[0].split(",")) if lines else ()
    if header != SNAPSHOT_COLUMNS:
        raise UserError(f"{path}:1: expected the header seq_len,ch_idx (a NeuPIMs batch snapshot)")
    lens, chans = [], []
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 2 or not all(c.isdigit() for c in cells) or int(cells[0]) < 1:
            raise UserError(f"{path}:{lineno}: expected seq_len,ch_idx as integers (seq_len >= 1, ch_idx >= 0), "
                            f"got {line.strip()!r}")
        lens.append(int(cells[0]))
        chans.append(int(cells[1]))
    if not lens:
        raise UserError(f"{path}: no requests")
    return Snapshot(tuple(lens), tuple(chans), str(path))


def snapshot_files(name: str) -> list[Path]:
    """The files of a named snapshot set, in index order (..-0.csv to ..-9.csv)."""
    from archsim import paths

    folder = paths.shipped_dir("workloads") / "datasets" / "neupims_traces" / SNAPSHOT_SETS[name]
    return sorted(folder.glob("*.csv"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))


# ---- continuous batching ------------------------------------------------------------------------------
@dataclass(frozen=True)
class BatchEntry:
    """One request's share of an iteration: its whole prompt on the first (prefill) iteration, one token
    after that. `context_tokens` is what the step attends over (KV length after the step)."""

    request_id: int
    phase: str              # "prefill" or "decode"
    new_tokens: int
    context_tokens: int


@dataclass(frozen=True)
class Batch:
    """The requests one iteration runs; what an iteration-latency callback receives."""

    entries: tuple[BatchEntry, ...]

    @property
    def size(self) -> int:
        return len(self.entries)

    @property
    def prefill_tokens(self) -> int:
        return sum(e.new_tokens for e in self.entries if e.phase == "prefill")

    @property
    def decode_tokens(self) -> int:
        return sum(e.new_tokens for e in self.entries if e.phase == "decode")

    @property
    def seq_lens(self) -> list[int]:
        return [e.context_tokens for e in self.entries]


IterationTimeFn = Callable[[Batch], float]


@dataclass(frozen=True)
class Iteration:
    """One scheduler iteration: when it ran, what it ran, the KV reserved during it, who joined and left."""

    index: int
    start_s: float
    duration_s: float
    batch: Batch
    kv_reserved_bytes: int
    kv_live_bytes: int
    admitted: tuple[int, ...]
    retired: tuple[int, ...]


@dataclass
class RequestRecord:
    """What happened to one request: when it was admitted, got its first token and finished."""

    request: Request
    admit_s: float | None = None
    first_token_s: float | None = None
    finish_s: float | None = None
    generated_tokens: int = 0


@dataclass
class ServingResult:
    """Iterations in order plus per-request timing; DataFrames for analysis."""

    iterations: list[Iteration] = field(default_factory=list)
    records: dict[int, RequestRecord] = field(default_factory=dict)
    admission_order: list[int] = field(default_factory=list)

    @property
    def makespan_s(self) -> float:
        return max((it.start_s + it.duration_s for it in self.iterations), default=0.0)

    @property
    def output_tokens_per_s(self) -> float:
        total = sum(r.generated_tokens for r in self.records.values())
        return total / self.makespan_s if self.makespan_s > 0 else 0.0

    def iterations_df(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([{
            "index": it.index, "start_s": it.start_s, "duration_s": it.duration_s, "batch_size": it.batch.size,
            "prefill_tokens": it.batch.prefill_tokens, "decode_tokens": it.batch.decode_tokens,
            "max_seq_len": max(it.batch.seq_lens), "kv_reserved_bytes": it.kv_reserved_bytes,
            "kv_live_bytes": it.kv_live_bytes, "admitted": len(it.admitted), "retired": len(it.retired),
        } for it in self.iterations])

    def requests_df(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([{
            "id": r.request.id, "arrival_s": r.request.arrival_s, "prompt_tokens": r.request.prompt_tokens,
            "output_tokens": r.request.output_tokens, "admit_s": r.admit_s, "first_token_s": r.first_token_s,
            "finish_s": r.finish_s, "latency_s": None if r.finish_s is None else r.finish_s - r.request.arrival_s,
        } for r in self.records.values()])


class ContinuousBatcher:
    """Iteration-level scheduling (Orca-style) with FIFO admission under a batch-size and KV-capacity budget.

    Each iteration: admit waiting requests in arrival order while the head has arrived, the batch has room
    and its whole KV need (prompt + output tokens x kv_bytes_per_token) fits next to what running requests
    reserved; the head blocks those behind it (strict FIFO). Reserving the final size up front means a
    running request can never run out of KV, so there is no preemption. Every running request then advances
    one token (its prefill on its first iteration also yields its first output token), the callback gives
    the iteration's duration, and requests with all their output tokens retire and free their reservation.
    """

    def __init__(self, max_batch: int, kv_capacity_bytes: int, kv_bytes_per_token: int,
                 iteration_time_s: IterationTimeFn, max_iterations: int = 10_000_000):
        for name, v in (("max_batch", max_batch), ("kv_capacity_bytes", kv_capacity_bytes),
                        ("kv_bytes_per_token", kv_bytes_per_token), ("max_iterations", max_iterations)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        self.max_batch = max_batch
        self.kv_capacity_bytes = kv_capacity_bytes
        self.kv_bytes_per_token = kv_bytes_per_token
        self.iteration_time_s = iteration_time_s
        self.max_iterations = max_iterations

    @classmethod
    def for_model(cls, model: ModelSpec, max_batch: int, kv_capacity_bytes: int,
                  iteration_time_s: IterationTimeFn) -> ContinuousBatcher:
        """KV bytes per token from the model spec (K and V, all layers)."""
        return cls(max_batch, kv_capacity_bytes, model.kv_bytes_per_token, iteration_time_s)

    def kv_need_bytes(self, request: Request) -> int:
        return request.total_tokens * self.kv_bytes_per_token

    def stage_admits(self, request: Request, n_admitted: int, admitted_prompt_tokens: int) -> bool:
        """A further admission rule of one iteration, after FIFO order, batch size and KV have let `request`
        in; `n_admitted` requests with `admitted_prompt_tokens` prompt tokens joined this iteration before it.
        None here; a subclass (e.g. a prompt-token budget per stage) overrides it."""
        return True

    def run(self, requests: Sequence[Request]) -> ServingResult:
        ids = [r.id for r in requests]
        if len(set(ids)) != len(ids):
            raise UserError("request ids must be unique")
        for r in requests:
            if self.kv_need_bytes(r) > self.kv_capacity_bytes:
                raise UserError(f"request {r.id} needs {self.kv_need_bytes(r)} B of KV cache "
                                f"({r.total_tokens} tokens x {self.kv_bytes_per_token} B) but the capacity is "
                                f"{self.kv_capacity_bytes} B; it could never be admitted")
        result = ServingResult(records={r.id: RequestRecord(r) for r in requests})
        waiting = deque(sorted(requests, key=lambda r: (r.arrival_s, r.id)))
        running: list[RequestRecord] = []
        reserved = 0
        now = 0.0
        while waiting or running:
            admitted = []
            admitted_prompt = 0
            while (waiting and waiting[0].arrival_s <= now and len(running) < self.max_batch
                   and reserved + self.kv_need_bytes(waiting[0]) <= self.kv_capacity_bytes
                   and self.stage_admits(waiting[0], len(admitted), admitted_prompt)):
                req = waiting.popleft()
                admitted_prompt += req.prompt_tokens
                rec = result.records[req.id]
                rec.admit_s = now
                reserved += self.kv_need_bytes(req)
                running.append(rec)
                admitted.append(req.id)
                result.admission_order.append(req.id)
            if not running:
                now = max(now, waiting[0].arrival_s)      # idle until the next arrival
                continue
            entries = []
            for rec in running:
                req = rec.request
                if rec.generated_tokens == 0:
                    entries.append(BatchEntry(req.id, "prefill", req.prompt_tokens, req.prompt_tokens))
                else:
                    entries.append(BatchEntry(req.id, "decode", 1, req.prompt_tokens + rec.generated_tokens))
            batch = Batch(tuple(entries))
            duration = float(self.iteration_time_s(batch))
            if not (math.isfinite(duration) and duration > 0):
                raise ValueError(f"iteration_time_s returned {duration!r}; it must be a finite time > 0 seconds")
            start = now
            now += duration
            live = sum(e.context_tokens for e in entries) * self.kv_bytes_per_token
            reserved_during = reserved
            retired = []
            still = []
            for rec in running:
                rec.generated_tokens += 1
                if rec.generated_tokens == 1:
                    rec.first_token_s = now
                if rec.generated_tokens == rec.request.output_tokens:
                    rec.finish_s = now
                    reserved -= self.kv_need_bytes(rec.request)
                    retired.append(rec.request.id)
                else:
                    still.append(rec)
            running = still
            result.iterations.append(Iteration(len(result.iterations), start, duration, batch, reserved_during,
                                               live, tuple(admitted), tuple(retired)))
            progress.report("requests", len(requests) - len(waiting) - len(running), len(requests), now,
                            f"{len(result.iterations):,} iterations")
            if len(result.iterations) >= self.max_iterations and (waiting or running):
                raise UserError(f"serving did not finish within max_iterations = {self.max_iterations}")
        return result


def analytic_iteration_time(model: ModelSpec, flops_per_s: float, bytes_per_s: float,
                            overhead_s: float = 0.0) -> IterationTimeFn:
    """A roofline iteration latency for tests and quick studies: max(FLOPs / peak, bytes / bandwidth) +
    overhead. FLOPs: 2 x block parameters per new token, plus attention 4 x layers x q_dim x new tokens x
    the mean context they see (causal prefill: (context + 1) / 2). Bytes: block weights once per iteration,
    the KV each entry reads (context - new tokens) and writes (new tokens)."""
    if not (flops_per_s > 0 and bytes_per_s > 0 and overhead_s >= 0):
        raise ValueError("flops_per_s and bytes_per_s must be > 0 and overhead_s >= 0")
    weight_bytes = model.n_layers * model.layer_params * model.dtype_bytes
    flops_per_token = 2 * model.n_layers * model.layer_params

    def iteration_time_s(batch: Batch) -> float:
        flops = 0.0
        kv_bytes = 0
        for e in batch.entries:
            seen = (e.context_tokens + 1) / 2 if e.phase == "prefill" else e.context_tokens
            flops += flops_per_token * e.new_tokens + 4 * model.n_layers * model.q_dim * e.new_tokens * seen
            kv_bytes += e.context_tokens * model.kv_bytes_per_token
        return max(flops / flops_per_s, (weight_bytes + kv_bytes) / bytes_per_s) + overhead_s

    return iteration_time_s


# ---- channel placement (NeuPIMs Alg. 1-3) ---------------------------------------------------------------
def mha_latency_cycles(seq_len: int, d_model: int, n_heads: int, d_head: int, tp: int = 1,
                       gwrite_cycles: int = 100, tile_cycles: int = 184, page_elems: int = 512,
                       banks: int = 32) -> int:
    """NeuPIMs' estimate of one request's multi-head attention on its PIM channel (Alg. 1):

    L = ceil(E'/P)*L_GW + ceil(E'/P)*ceil(seq/B)*L_tile + ceil(seq/P)*nh*L_GW + ceil(seq/P)*nh*ceil(dk/B)*L_tile

    with E' = d_model / tp, nh = n_heads / tp, P elements per DRAM row, B banks per channel. The first two
    terms are K^T q (one token per bank), the last two logits x V (P tokens of one head dim per row).
    """
    if d_model % tp or n_heads % tp:
        raise ValueError(f"tp = {tp} must divide d_model = {d_model} and n_heads = {n_heads}")
    if seq_len < 1:
        raise ValueError(f"seq_len must be >= 1, got {seq_len}")
    e_local, nh = d_model // tp, n_heads // tp
    q_chunks = math.ceil(e_local / page_elems)
    s_chunks = math.ceil(seq_len / page_elems)
    return (q_chunks * gwrite_cycles + q_chunks * math.ceil(seq_len / banks) * tile_cycles
            + s_chunks * nh * gwrite_cycles + s_chunks * nh * math.ceil(d_head / banks) * tile_cycles)


def mha_load_fn(model: ModelSpec, tp: int = 1) -> Callable[[int], int]:
    """seq_len -> estimated MHA cycles for `model` under tensor parallelism `tp` (per-channel load)."""
    return lambda seq_len: mha_latency_cycles(seq_len, model.d_model, model.n_heads, model.d_head, tp)


def _check_channels(seq_lens: Sequence[int], n_channels: int, capacity_tokens: int | None,
                    used_tokens: Sequence[int] | None) -> list[int]:
    if n_channels < 1:
        raise ValueError(f"n_channels must be >= 1, got {n_channels}")
    if any(s < 1 for s in seq_lens):
        raise ValueError("every seq_len must be >= 1")
    used = list(used_tokens) if used_tokens is not None else [0] * n_channels
    if len(used) != n_channels:
        raise ValueError(f"used_tokens has {len(used)} entries for {n_channels} channels")
    if capacity_tokens is not None and capacity_tokens < 1:
        raise ValueError(f"capacity_tokens must be >= 1 or None, got {capacity_tokens}")
    return used


def assign_channels_gmlbp(seq_lens: Sequence[int], n_channels: int, load_fn: Callable[[int], float],
                          capacity_tokens: int | None = None, used_tokens: Sequence[int] | None = None,
                          initial_loads: Sequence[float] | None = None) -> list[int]:
    """Greedy min-load bin packing (NeuPIMs Alg. 2): longest requests first, each onto the channel with the
    least estimated load that still has room for its KV tokens (ties: lowest channel index).

    Returns the channel of each request in input order; -1 where no channel had room (it keeps waiting).
    Capacity is in KV tokens per channel: a channel's KV bytes / (kv_bytes_per_token / channels a request's
    KV is spread over), e.g. NeuPIMs' 32-KB KV tiles x tiles per channel / bytes per token per channel.
    """
    used = _check_channels(seq_lens, n_channels, capacity_tokens, used_tokens)
    loads = [float(x) for x in initial_loads] if initial_loads is not None else [0.0] * n_channels
    if len(loads) != n_channels:
        raise ValueError(f"initial_loads has {len(loads)} entries for {n_channels} channels")
    out = [-1] * len(seq_lens)
    for i in sorted(range(len(seq_lens)), key=lambda j: (-seq_lens[j], j)):
        s = seq_lens[i]
        best = -1
        for ch in range(n_channels):
            if capacity_tokens is not None and used[ch] + s > capacity_tokens:
                continue
            if best < 0 or loads[ch] < loads[best]:
                best = ch
        if best >= 0:
            out[i] = best
            loads[best] += load_fn(s)
            used[best] += s
    return out


def assign_channels_round_robin(seq_lens: Sequence[int], n_channels: int, capacity_tokens: int | None = None,
                                used_tokens: Sequence[int] | None = None) -> list[int]:
    """Baseline: requests in input order go to channels in turn, skipping channels without room."""
    used = _check_channels(seq_lens, n_channels, capacity_tokens, used_tokens)
    out = [-1] * len(seq_lens)
    nxt = 0
    for i, s in enumerate(seq_lens):
        for step in range(n_channels):
            ch = (nxt + step) % n_channels
            if capacity_tokens is None or used[ch] + s <= capacity_tokens:
                out[i] = ch
                used[ch] += s
                nxt = (ch + 1) % n_channels
                break
    return out


def channel_loads(seq_lens: Sequence[int], assignment: Sequence[int], n_channels: int,
                  load_fn: Callable[[int], float]) -> list[float]:
    """Estimated load per channel (unplaced requests, channel -1, are left out)."""
    loads = [0.0] * n_channels
    for s, ch in zip(seq_lens, assignment, strict=True):
        if ch >= 0:
            loads[ch] += load_fn(s)
    return loads


def load_imbalance(loads: Sequence[float]) -> float:
    """Peak-to-mean ratio of channel loads (1.0 = perfectly balanced): the slowest channel sets the
    attention stage time, so this is the slowdown against a perfect split."""
    mean = sum(loads) / len(loads) if loads else 0.0
    return max(loads) / mean if mean > 0 else 1.0


def partition_sub_batches(assignment: Sequence[int], n_channels: int) -> tuple[list[int], list[int]]:
    """NeuPIMs Alg. 3 (simple): split each channel's requests (in input order) in half; SB1 takes the first
    half, SB2 the rest. For odd counts the extra request alternates across the odd channels: the first odd
    channel gives it to SB1, the next to SB2, and so on, so the sub-batches differ by at most one request
    overall and per channel. Returns request indices (channel -1 = unplaced, left out)."""
    per_channel: list[list[int]] = [[] for _ in range(n_channels)]
    for i, ch in enumerate(assignment):
        if ch >= n_channels:
            raise ValueError(f"request {i} is on channel {ch}, but there are {n_channels} channels")
        if ch >= 0:
            per_channel[ch].append(i)
    sb1: list[int] = []
    sb2: list[int] = []
    give_extra_to_first = True
    for reqs in per_channel:
        half = len(reqs) // 2
        if len(reqs) % 2:
            half += 1 if give_extra_to_first else 0
            give_extra_to_first = not give_extra_to_first
        sb1 += reqs[:half]
        sb2 += reqs[half:]
    return sb1, sb2
