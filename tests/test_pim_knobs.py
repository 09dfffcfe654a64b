"""Every PIM hardware parameter of a preset changes what it should through the model, or is rejected as
unsupported with a one-line error (issue #8, "PIM knobs")."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from archsim import paths
from archsim.errors import ConfigError, NotModelled
from archsim.systems.pimgpt.system import run_pimgpt

BASE = "GDDR6_AiM_16Gbps"


def _preset(tmp_path: Path, **pim) -> str:
    """The AiM preset with some `pim:` values replaced, as a preset file (a preset path is a valid --preset)."""
    src = paths.PACKAGE_DIR / "presets" / "dram" / f"{BASE}.yaml"
    data = yaml.safe_load(src.read_text())
    data["pim"].update(pim)
    data["name"] = f"{BASE}_" + "_".join(f"{k}{v}" for k, v in pim.items())
    out = tmp_path / f"{data['name']}.yaml"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(out)


def _run(preset: str, **kw):
    return run_pimgpt("gpt2-small", tokens=2, preset=preset, baselines=False, **kw)


def test_accumulator_bytes_sets_the_readout_bursts(tmp_path):
    """fp32 accumulators: one RDMAC burst of 32 B returns 8 banks' results; fp64 needs twice the bursts."""
    base = _run(BASE)
    wide = _run(_preset(tmp_path, accumulator_bytes=8))
    rdmac = lambda r: r.stats["commands"]["RDMAC"]       # noqa: E731
    assert rdmac(wide) == 2 * rdmac(base)
    assert wide.stats["latency_per_token_s"] > base.stats["latency_per_token_s"]
    assert wide.stats["energy_per_token_j"] > base.stats["energy_per_token_j"]


def test_global_buffer_bytes_sets_the_input_chunking(tmp_path):
    """A smaller global buffer holds fewer input columns: more chunks, more WRGB refills and readouts."""
    base = _run(BASE)
    small = _run(_preset(tmp_path, global_buffer_bytes=512))
    assert small.stats["commands"]["RDMAC"] > base.stats["commands"]["RDMAC"]
    assert small.stats["latency_per_token_s"] > base.stats["latency_per_token_s"]


def test_macs_per_bank_other_than_the_column_width_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match=r"pim\.macs_per_bank.*must be 16.*org\.access_bytes = 64"):
        _run(_preset(tmp_path, macs_per_bank=32))
    # the roofline peak is the column width's MACs, the same number that sets the timing
    r = _run(BASE)
    assert r.stats["peak_flops_per_s"] > 0


def test_unknown_pim_key_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match=r"pim\.adders_per_bank.*not modelled.*allowed: macs_per_bank"):
        _run(_preset(tmp_path, adders_per_bank=4))


def test_functional_model_keeps_fp32_accumulators(tmp_path):
    from archsim.dram.spec import load_spec
    from archsim.pim.functional import FunctionalChannel

    with pytest.raises(NotModelled, match="accumulator_bytes"):
        FunctionalChannel(load_spec(_preset(tmp_path, accumulator_bytes=2)))
