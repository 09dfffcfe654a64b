"""make_report: tables and figures from sweep results and single runs, as Markdown and self-contained HTML.

The report is built in a temporary sibling directory and renamed into place, so an interrupted report
never leaves a half-written one behind (and a previous report stays intact until the new one is whole).
"""
from __future__ import annotations

import io
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from archsim.errors import UserError
from archsim.report.document import Block, Bullets, Heading, Image, Para, Table, to_html, to_markdown
from archsim.report.figures import BUILDERS, FigureOut
from archsim.report.inputs import Source, load_inputs
from archsim.sweep.spec import format_value

MARKER = ".archsim-report"  # marks a directory we may replace
MAX_SUMMARY_STATS = 8


@dataclass
class ReportOutcome:
    out_dir: Path
    markdown: Path
    html: Path
    figures: list[str] = field(default_factory=list)  # slugs; files figures/<slug>.png/.svg/.csv
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (figure kind, reason)


def make_report(inputs: Sequence[str | Path], out_dir: str | Path, *, title: str | None = None) -> ReportOutcome:
    """Write report.md, report.html, figures/*.png|svg|csv and runs.csv into out_dir (replaced if it is
    a previous report). inputs are sweep results directories and/or run JSON files."""
    import matplotlib

    from archsim import __version__

    out = Path(out_dir)
    _check_target(out)
    sources = load_inputs(list(inputs))
    title = title or f"archsim report: {', '.join(s.name for s in sources)}"
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        figdir = staging / "figures"
        figdir.mkdir()
        figures: list[FigureOut] = []
        skipped: list[tuple[str, str]] = []
        sections: list[tuple[str, list[FigureOut]]] = []
        with matplotlib.rc_context({"svg.hashsalt": "archsim", "svg.fonttype": "none"}):
            for kind, builder in BUILDERS:
                made, reasons = builder(sources)
                if made:
                    sections.append((kind, made))
                    figures += made
                else:
                    skipped.append((kind, "; ".join(reasons) or "no data"))
            images = [_save(f, figdir) for f in figures]
        runs = _runs_table(sources)
        runs.to_csv(staging / "runs.csv", index=False)
        blocks = _document(title, __version__, sources, runs, sections, images, skipped)
        (staging / "report.md").write_text(to_markdown(blocks))
        (staging / "report.html").write_text(to_html(blocks, title))
        (staging / MARKER).write_text("archsim report directory; `archsim report` may replace it\n")
        _replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return ReportOutcome(out, out / "report.md", out / "report.html", [f.slug for f in figures], skipped)


def _check_target(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise UserError(f"{out}: exists, is not empty and is not an archsim report; choose another -o directory")


def _replace(staging: Path, out: Path) -> None:
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old.", suffix=".tmp"))
        os.rmdir(old)
        os.replace(out, old)
    os.replace(staging, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _save(f: FigureOut, figdir: Path) -> Image:
    f.figure.savefig(figdir / f"{f.slug}.png", format="png", dpi=120)
    buf = io.BytesIO()
    f.figure.savefig(buf, format="svg", metadata={"Date": None})  # no date: same data, same file
    svg = buf.getvalue()
    (figdir / f"{f.slug}.svg").write_bytes(svg)
    f.data.to_csv(figdir / f"{f.slug}.csv", index=False)
    return Image(f.title, f.caption, f"figures/{f.slug}.png", f"figures/{f.slug}.svg", f"figures/{f.slug}.csv", svg)


def _runs_table(sources: list[Source]) -> pd.DataFrame:
    frames = [s.stats for s in sources if len(s.stats)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run", "source"])


def _summary(src: Source) -> pd.DataFrame:
    numeric = [c for c in src.stat_columns if pd.api.types.is_numeric_dtype(src.stats[c])
               and not pd.api.types.is_bool_dtype(src.stats[c])]
    cols = ["run"] + [m for m in src.metrics if m in src.stats.columns] + numeric[:MAX_SUMMARY_STATS]
    return src.stats[cols]


def _document(title: str, version: str, sources: list[Source], runs: pd.DataFrame,
              sections: list[tuple[str, list[FigureOut]]], images: list[Image],
              skipped: list[tuple[str, str]]) -> list[Block]:
    blocks: list[Block] = [Heading(1, title)]
    versions = sorted({s.version for s in sources})
    blocks.append(Para(f"Generated by archsim {version}. Results produced by archsim {', '.join(versions)}."))

    blocks.append(Heading(2, "Inputs"))
    items = []
    for s in sources:
        if s.kind == "sweep":
            items.append(f"sweep `{s.name}` ({s.path}): {s.n_points} points, {len(s.stats)} finished, "
                         f"{len(s.failures)} failed, axes: {', '.join(s.axis_keys) or '(none)'}")
        else:
            items.append(f"run `{s.name}` ({s.path})")
    blocks.append(Bullets(items))

    blocks.append(Heading(2, "Results"))
    for s in sources:
        if len(sources) > 1:
            blocks.append(Heading(3, s.name))
        if s.stats.empty:
            blocks.append(Para("No finished runs."))
            continue
        if s.metrics:
            blocks.append(Bullets([f"`{n}` = `{m['expr']}`" + (", baseline " + ", ".join(
                f"{k}={format_value(v)}" for k, v in m["baseline"].items()) if m.get("baseline") else "")
                for n, m in s.metrics.items()]))
        blocks.append(Table(_summary(s), csv="runs.csv"))

    blocks.append(Heading(2, "Figures"))
    by_slug = {img.png: img for img in images}
    for kind, made in sections:
        blocks.append(Heading(3, kind))
        for f in made:
            blocks.append(by_slug[f"figures/{f.slug}.png"])
    if skipped:
        blocks.append(Heading(3, "Skipped figures"))
        blocks.append(Bullets([f"{kind}: {reason}" for kind, reason in skipped]))

    failures = [(s.name, f) for s in sources for f in s.failures]
    if failures:
        blocks.append(Heading(2, "Failed points"))
        blocks.append(Table(pd.DataFrame([{
            "source": name, "point_hash": f.get("point_hash"), "point": f.get("label"),
            "error": f"{f.get('error_type', 'Error')}: {str(f.get('error', '')).splitlines()[0] if f.get('error') else ''}",
        } for name, f in failures])))

    blocks.append(Heading(2, "Config hashes"))
    cols = [c for c in ("run", "source", "config_hash", "point_hash", "seed") if c in runs.columns]
    blocks.append(Table(runs[cols], csv="runs.csv"))
    return blocks
