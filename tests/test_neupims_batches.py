"""The batches NeuPIMs' systems decode (issue 33 item 4): length-biased running batches by default, NeuPIMs' own
batch snapshots as named datasets (sample s takes file s mod 10, with its channels) or as one file, and the
errors a snapshot that does not fit the run gives. The snapshots' statistics against the sampler are in
tests/test_serving_traces.py; here the systems' side: which batch a run decodes."""
from __future__ import annotations

import numpy as np
import pytest

from archsim import api
from archsim.errors import ConfigError, UserError
from archsim.systems.neupims.config import setup
from archsim.systems.neupims.device import build_device
from archsim.systems.neupims.modes import batch_of, sample_batch
from archsim.workload import serving
from archsim.workload.serving import read_snapshot, running_context_counts, snapshot_files


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.mark.parametrize("name", sorted(serving.SNAPSHOT_SETS))
def test_a_named_snapshot_set_decodes_file_s_mod_10_with_its_own_channels(name):
    su = setup({"system": "neupims", "model": "gpt3-7b", "batch": 512, "dataset": name})
    dev = build_device(su)
    files = snapshot_files(name)
    for sample, index in ((0, 0), (3, 3), (13, 3)):
        ctx, chans = batch_of(su, dev, _rng(sample), sample)
        snap = read_snapshot(files[index])
        assert ctx == list(snap.seq_lens) and chans == list(snap.channels)
    # the snapshot is the batch: the rng and the run's channel assignment play no part
    assert batch_of(su, dev, _rng(1), 0) == batch_of(su, dev, _rng(2), 0)


def test_the_two_sets_hold_the_same_kind_of_batch_placed_differently():
    """clb (greedy load balance) spreads a snapshot's tokens more evenly over the channels than rr (first fit):
    the largest channel's tokens over the mean, averaged over the ten files of each set, is lower for clb."""
    def worst_load(path):
        snap = read_snapshot(path)
        load = np.bincount(snap.channels, weights=snap.seq_lens)
        return load.max() / load.mean()

    clb = [worst_load(f) for f in snapshot_files("neupims_clb")]
    rr = [worst_load(f) for f in snapshot_files("neupims_rr")]
    assert np.mean(clb) < np.mean(rr)
    assert all(len(read_snapshot(f).seq_lens) == 512 for f in snapshot_files("neupims_rr"))


def test_a_snapshot_file_as_the_dataset_end_to_end():
    """The GPU roofline decodes the same batch with no device: its per-sample mean context is the files'."""
    res = api.run({"system": "gpu_roofline", "model": "gpt3-7b", "batch": 512, "dataset": "neupims_clb",
                   "samples": 2}, seed=0)
    files = snapshot_files("neupims_clb")
    want = [float(np.mean(read_snapshot(f).seq_lens)) for f in files[:2]]
    assert res.df["mean_context"].tolist() == pytest.approx(want, rel=1e-12)
    one = api.run({"system": "gpu_roofline", "model": "gpt3-7b", "batch": 512, "dataset": str(files[1])}, seed=5)
    assert one.df["mean_context"].tolist() == pytest.approx(want[1:], rel=1e-12)


def test_a_snapshot_whose_size_is_not_the_batch_names_the_batch_to_set():
    su = setup({"system": "neupims", "model": "gpt3-7b", "batch": 256, "dataset": "neupims_clb"})
    with pytest.raises(ConfigError, match="holds 512 requests; set batch to 512, got 256"):
        batch_of(su, None, _rng(), 0)


def test_a_channel_beyond_the_devices_pim_units_is_a_user_error(tmp_path):
    path = tmp_path / "snap.csv"
    path.write_text("seq_len,ch_idx\n" + "".join(f"{100 + i},{i}\n" for i in range(3)) + "40,999\n")
    su = setup({"system": "neupims", "model": "gpt3-7b", "batch": 4, "dataset": str(path)})
    dev = build_device(su)
    with pytest.raises(UserError, match=r"snap.csv: ch_idx 999 is beyond the \d+ PIM units"):
        batch_of(su, dev, _rng(), 0)
    path.write_text("seq_len,ch_idx\n100,0\n101,1\n102,2\n40,3\n")
    assert batch_of(su, dev, _rng(), 0) == ([100, 101, 102, 40], [0, 1, 2, 3])


def test_a_snapshot_is_for_iteration_mode_only():
    with pytest.raises(ConfigError, match="iteration mode only"):
        setup({"system": "neupims", "model": "gpt3-7b", "mode": "serving", "dataset": "neupims_clb"})


def test_a_request_trace_is_sampled_as_its_running_batches(tmp_path):
    """One request (prompt 5, output 25) is in a running batch after 0, 10 and 20 generated tokens, equally
    often: every sampled context is 5, 15 or 25, each about a third of the time."""
    path = tmp_path / "one.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0,5,25\n")
    ctx = np.asarray(sample_batch(str(path), 3000, _rng()))
    values, counts = np.unique(ctx, return_counts=True)
    assert values.tolist() == [5, 15, 25]
    assert counts / counts.sum() == pytest.approx([1 / 3] * 3, abs=0.03)


def test_the_default_batches_are_length_biased():
    """sharegpt (the default) samples the running-context histogram: its mean is the snapshots', not the
    requests' (prompt plus a uniform point of the output) and not the histogram of request lengths."""
    ours = np.asarray(sample_batch("sharegpt", 50_000, _rng()))
    snaps = np.concatenate([read_snapshot(f).seq_lens for f in snapshot_files("neupims_clb")])
    assert ours.mean() == pytest.approx(snaps.mean(), rel=0.05)
    prompt, output = serving.DATASETS["sharegpt"]
    assert ours.mean() > 1.2 * (prompt.mean_tokens + output.mean_tokens / 2)
    assert sample_batch("sharegpt", 64, _rng(4)) == sample_batch("sharegpt", 64, _rng(4))
    assert 1 <= ours.min() and ours.max() <= serving.MAX_SEQ_TOKENS


def test_running_context_counts_are_the_same_across_its_memory_chunks():
    """The counts are made 65,536 requests at a time; a set that spans chunks gives the sum over its requests."""
    rng = _rng(9)
    n = (1 << 16) + 1000
    prompts, outputs = rng.integers(0, 300, n), rng.integers(1, 80, n)
    want = np.zeros(serving.MAX_SEQ_TOKENS, dtype=np.int64)
    for p, o in zip(prompts[:2000], outputs[:2000], strict=True):
        np.add.at(want, np.clip(p + 10 * np.arange(-(-o // 10)), 1, serving.MAX_SEQ_TOKENS) - 1, 1)
    head = running_context_counts(prompts[:2000], outputs[:2000])
    assert (head == want).all()
    whole = running_context_counts(prompts, outputs)
    # split where the chunks are not: each part is counted in one piece
    parts = running_context_counts(prompts[:30_000], outputs[:30_000]) \
        + running_context_counts(prompts[30_000:], outputs[30_000:])
    assert (whole == parts).all() and whole.sum() == (-(-outputs // 10)).sum()


def test_sample_running_batch_refuses_an_empty_batch():
    with pytest.raises(ValueError, match="batch must be >= 1"):
        serving.sample_running_batch(serving.RUNNING["sharegpt"], 0, _rng())
    with pytest.raises(KeyError):
        serving.RUNNING["sharegtp"]
