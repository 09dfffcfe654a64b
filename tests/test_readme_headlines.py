"""The README is a page a newcomer reads in five minutes (issue 36): at most 250 lines, every document it links
exists, and every headline figure it quotes from a reproduction report is in that report (the reports generate
their figures from their runs; the README only points at them)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_readme_fits_a_page():
    assert len(README.splitlines()) <= 250


def test_every_linked_document_exists():
    links = [x for x in re.findall(r"\]\(([^)#]+)\)", README) if not x.startswith("http")]
    assert links
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, missing


def _rows() -> list[list[str]]:
    m = re.search(r"## The four reproductions\n(.*?)\n## ", README, re.S)
    assert m
    return [[c.strip() for c in line.strip("|").split("|")] for line in m.group(1).splitlines()
            if line.startswith("| ") and not line.startswith("| system")]


@pytest.mark.parametrize("row", _rows(), ids=lambda r: r[0].split(" ")[0])
def test_headline_figures_are_the_reports(row):
    """'paper vs archsim': both figures appear in the linked report's README (the paper's as the report quotes it,
    ours as the report measured it)."""
    headline, link = row[2], row[3]
    report = ROOT / re.search(r"\]\(([^)]+)\)", link).group(1)
    m = re.search(r":\s*(\S+)\s+vs\s+(\S+)", headline)
    assert m, headline
    text = report.read_text().replace(" ", "")
    for figure in m.groups():
        assert figure.replace(" ", "") in text, (figure, report)
