"""make_report: tables and figures from sweep results and single runs, as Markdown and self-contained HTML.

The report is built in a temporary sibling directory and renamed into place, so an interrupted report
never leaves a half-written one behind (and a previous report stays intact until the new one is whole).

The marker file `.archsim-report` lists every file the report wrote. A directory is replaced only if it is
empty or holds nothing but the files its marker lists; otherwise make_report refuses unless force=True, and
then keeps the files it did not write (moved into the new report) and replaces its own.
"""
from __future__ import annotations

import io
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from archsim.errors import UserError
from archsim.report.document import Block, Bullets, Heading, Image, Para, Table, to_html, to_markdown
from archsim.report.figures import BUILDERS, FigureOut
from archsim.report.inputs import Source, load_inputs
from archsim.results import temp_dir
from archsim.sweep.spec import format_value

MARKER = ".archsim-report"  # marks a directory we may replace; lists the files we wrote
_MARKER_HEAD = "archsim report directory; `archsim report` may replace the files listed below"
MAX_SUMMARY_STATS = 8


@dataclass
class ReportOutcome:
    out_dir: Path
    markdown: Path
    html: Path
    figures: list[str] = field(default_factory=list)  # slugs; files figures/<slug>.png/.svg/.csv
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (figure kind, reason)


def make_report(inputs: Sequence[str | Path], out_dir: str | Path, *, title: str | None = None,
                force: bool = False) -> ReportOutcome:
    """Write report.md, report.html, figures/*.png|svg|csv and runs.csv into out_dir (replaced if it is
    a previous report). inputs are sweep results directories and/or run JSON files.

    Refuses (UserError) a directory holding files an earlier report did not write, unless force: then
    those files are kept and the report's own files replaced."""
    import matplotlib

    from archsim import __version__
    from archsim.output import target

    out = target(out_dir)       # a symlinked report folder is written through, the link stays a link
    foreign = _check_target(out, force)
    sources = load_inputs(list(inputs))
    title = title or f"archsim report: {', '.join(s.name for s in sources)}"
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = temp_dir(out)         # permissions as the umask gives (mkdtemp alone: 0700)
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
        written = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file())
        (staging / MARKER).write_text("\n".join([_MARKER_HEAD, *written]) + "\n")
        _keep(foreign, out, staging)
        _replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return ReportOutcome(out, out / "report.md", out / "report.html", [f.slug for f in figures], skipped)


def _check_target(out: Path, force: bool) -> list[str]:
    """Files in `out` that no earlier report wrote (relative paths); refuse them unless force."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a directory")
    if not out.is_dir():
        return []
    present = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} - {MARKER}
    foreign = sorted(present - _ours(out))
    if foreign and not force:
        what = "is not an archsim report" if not (out / MARKER).is_file() else "holds files archsim did not write"
        raise UserError(f"{out}: {what} ({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}); "
                        "choose another -o directory, or pass --force to write the report there anyway "
                        "(those files are kept)")
    return foreign


def _ours(out: Path) -> set[str]:
    """Files the marker says a report wrote. A marker without a file list (archsim <= 0.1.0 reports)
    vouches for the report's standard files."""
    marker = out / MARKER
    if not marker.is_file():
        return set()
    lines = [line.strip() for line in marker.read_text().splitlines()[1:] if line.strip()]
    if lines:
        return set(lines)
    return {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()
            and (p.parent == out / "figures" or p.name in ("report.md", "report.html", "runs.csv"))}


def _keep(foreign: list[str], out: Path, staging: Path) -> None:
    """Copy the files the report did not write into the new report (only with force)."""
    for rel in foreign:
        target = staging / rel
        if target.exists():       # the report writes a file of that name: the report's wins
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(out / rel, target)


def _replace(staging: Path, out: Path) -> None:
    old = None
    if out.exists():
        old = temp_dir(out, "old.")
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


# Stats the results table shows first when a run has them: throughput, energy per token, bandwidth ...
HEADLINE_STATS = ("tokens_per_s", "latency_per_token_s", "energy_per_token_j", "bandwidth_GBps",
                  "bandwidth_pct_of_peak", "energy_pj_per_bit", "row_hit_rate", "read_latency_mean_ns", "seconds")


def _summary(src: Source) -> pd.DataFrame:
    numeric = [c for c in src.stat_columns if pd.api.types.is_numeric_dtype(src.stats[c])
               and not pd.api.types.is_bool_dtype(src.stats[c])]
    headline = [c for c in HEADLINE_STATS if c in numeric]
    rest = [c for c in numeric if c not in headline]
    stats = (headline + rest)[:max(MAX_SUMMARY_STATS, len(headline))]
    cols = ["run"] + [m for m in src.metrics if m in src.stats.columns] + stats
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
