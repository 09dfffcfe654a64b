"""Rebuild {sharegpt,alpaca}_lengths.csv from the per-request token counts NeuPIMs' trace generator ships.

Source: casys-kaist/NeuPIMs (commit f299af3fc8f20077e816f2e48313294cddb4bd7c),
trace-generator/share-gpt2/stats.tsv (391,726 requests) and trace-generator/alpaca/stats.tsv (52,002
requests), columns input_toks, output_toks (tokenised ShareGPT / Alpaca conversations).

Run:  python workloads/datasets/build_lengths.py SHAREGPT_STATS.tsv ALPACA_STATS.tsv

It also writes {sharegpt,alpaca}_running.csv: the context lengths of steady-state running batches (length-biased,
as continuous batching holds them), archsim's default batches for the NeuPIMs systems.

What is kept (the same filter as NeuPIMs' get_distributions.py: requests with 0 output tokens are dropped):
a histogram of prompt lengths over 1..2047 tokens and one of output lengths over 1..2048, a longer length
counted in the last bin (NeuPIMs' trace generator clips a request's sequence at max_seq_len = 2048; archsim
samples prompt and output independently and clips the output to 2048 - prompt, archsim.workload.serving).
Only counts are written, no text of the datasets.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

MAX_SEQ = 2048


def build(stats_tsv: str, out_csv: Path) -> None:
    a = np.loadtxt(stats_tsv, skiprows=1, dtype=np.int64, ndmin=2)
    a = a[a[:, 1] > 0]
    bins = np.arange(1, MAX_SEQ + 1)
    prompt = np.bincount(np.minimum(a[:, 0], MAX_SEQ - 1), minlength=MAX_SEQ + 1)[1:]
    output = np.bincount(np.minimum(a[:, 1], MAX_SEQ), minlength=MAX_SEQ + 1)[1:]
    keep = (prompt > 0) | (output > 0)
    lines = ["tokens,prompt_requests,output_requests"]
    lines += [f"{t},{p},{o}" for t, p, o in zip(bins[keep], prompt[keep], output[keep], strict=True)]
    out_csv.write_text("\n".join(lines) + "\n")
    print(f"{out_csv.name}: {len(a)} requests with output > 0; all: mean prompt {a[:, 0].mean():.2f}, "
          f"output {a[:, 1].mean():.2f}; histograms (clipped): prompt {np.dot(bins, prompt) / prompt.sum():.2f}, "
          f"output {np.dot(bins, output) / output.sum():.2f}")


def build_running(stats_tsv: str, out_csv: Path) -> None:
    """How many slots of steady-state running batches hold a request with each context length: every request
    (output > 0) counted at each step it would be seen in a continuous batch (archsim.workload.serving.
    running_context_counts, prompt and output kept together). Only counts are written."""
    from archsim.workload.serving import running_context_counts

    a = np.loadtxt(stats_tsv, skiprows=1, dtype=np.int64, ndmin=2)
    a = a[a[:, 1] > 0]
    counts = running_context_counts(a[:, 0], a[:, 1])
    tok = np.nonzero(counts)[0] + 1
    out_csv.write_text("tokens,batch_slots\n" + "".join(f"{t},{counts[t - 1]}\n" for t in tok))
    print(f"{out_csv.name}: mean running context {np.dot(np.arange(1, len(counts) + 1), counts) / counts.sum():.2f}")


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here.parents[1]))
    build(sys.argv[1], here / "sharegpt_lengths.csv")
    build(sys.argv[2], here / "alpaca_lengths.csv")
    build_running(sys.argv[1], here / "sharegpt_running.csv")
    build_running(sys.argv[2], here / "alpaca_running.csv")
