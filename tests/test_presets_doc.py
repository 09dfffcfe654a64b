"""Issue #8.10: docs/presets.md lists every shipped preset's numbers with a source, and the YAML comments cite
it instead of notes that are not in the repository."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
PRESETS = ROOT / "archsim" / "presets"
DOC = ROOT / "docs" / "presets.md"
SKIP = {"name", "standard", "source", "energy.source", "pim.energy.source", "aliases", "device", "energy.model"}
FILES = sorted([*PRESETS.glob("dram/*.yaml"), *PRESETS.glob("asic/*.yaml"), *PRESETS.glob("baselines/*.yaml")])


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _sections() -> dict[str, dict[str, tuple[str, str]]]:
    """### <name> -> {key: (value, source)} from the doc's tables."""
    out: dict[str, dict[str, tuple[str, str]]] = {}
    current = None
    for line in DOC.read_text().splitlines():
        if line.startswith("### "):
            current = out.setdefault(line[4:].strip(), {})
        m = re.match(r"^\| `([^`]+)` \| (.*?) \| (.*) \|$", line)
        if m and current is not None:
            current[m.group(1)] = (m.group(2), m.group(3))
    return out


def _same(doc_value: str, value) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        text = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        return doc_value == text
    return float(doc_value) == pytest.approx(float(value), rel=1e-9)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_preset_value_is_documented_with_a_source(path):
    data = yaml.safe_load(path.read_text())
    rows = _sections().get(data["name"])
    assert rows is not None, f"docs/presets.md has no section '### {data['name']}'"
    for key, value in _flat(data).items():
        if key in SKIP:
            continue
        assert key in rows, f"docs/presets.md, {data['name']}: no row for `{key}`"
        doc_value, source = rows[key]
        assert _same(doc_value, value), f"docs/presets.md, {data['name']}: `{key}` is {doc_value}, the YAML has {value}"
        assert source.strip(), f"docs/presets.md, {data['name']}: `{key}` has no source"


def test_source_tags_are_defined():
    text = DOC.read_text()
    defined = set(re.findall(r"^\| (\[[A-Za-z0-9-]+\]) \|", text, flags=re.M))
    used = set(re.findall(r"\[[A-Z][A-Za-z0-9-]+\]", text))
    assert used <= defined, f"undefined source tags: {sorted(used - defined)}"


def test_preset_comments_cite_docs_not_missing_notes():
    for path in PRESETS.rglob("*.yaml"):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            comment = line.split("#", 1)[1] if "#" in line else ""
            assert not re.search(r"reference/|DESIGN\.md", comment), f"{path}:{n}: {line.strip()}"
