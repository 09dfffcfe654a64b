"""A tiny document model rendered to Markdown and to one self-contained HTML page (images as data URIs)."""
from __future__ import annotations

import base64
import html
import math
from dataclasses import dataclass

import pandas as pd

MAX_TABLE_ROWS = 100


@dataclass
class Heading:
    level: int
    text: str


@dataclass
class Para:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Table:
    """A table; each number is shown in the unit its column's name declares, as the console shows it
    (archsim.summary: latency_per_token_s 0.0001411 -> 141.1 µs, row_hit_rate 0.98 -> 98.0 %), under its name
    in words with that unit; the CSV keeps the raw SI values."""

    df: pd.DataFrame
    csv: str | None = None  # relative path of the full table as CSV


@dataclass
class Image:
    title: str
    caption: str
    png: str  # relative paths
    svg: str
    csv: str
    svg_bytes: bytes  # embedded in the HTML page


Block = Heading | Para | Bullets | Table | Image


def _cell(column: str, value: object) -> str:
    from archsim.summary import format_value

    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return format_value(column, value.item() if hasattr(value, "item") else value)
    return str(value)


def _header(column: str) -> str:
    """A column's name as the console's summary labels it (its cells carry the unit)."""
    from archsim.summary import label

    return label(column)


def _table_rows(t: Table) -> tuple[list[str], list[list[str]], str]:
    df = t.df
    cols = [_header(str(c)) for c in df.columns]
    names = [str(c) for c in df.columns]
    rows = [[_cell(c, v) for c, v in zip(names, row, strict=True)]
            for row in df.head(MAX_TABLE_ROWS).itertuples(index=False)]
    note = ""
    if len(df) > MAX_TABLE_ROWS:
        note = f"First {MAX_TABLE_ROWS} of {len(df)} rows" + (f"; all rows in {t.csv}." if t.csv else ".")
    elif t.csv:
        note = f"Table as CSV: {t.csv}"
    return cols, rows, note


def to_markdown(blocks: list[Block]) -> str:
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"{'#' * b.level} {b.text}\n")
        elif isinstance(b, Para):
            out.append(b.text + "\n")
        elif isinstance(b, Bullets):
            out.append("\n".join(f"- {item}" for item in b.items) + "\n")
        elif isinstance(b, Table):
            cols, rows, note = _table_rows(b)

            def esc(s: str) -> str:
                return s.replace("|", "\\|").replace("\n", " ")

            lines = ["| " + " | ".join(esc(c) for c in cols) + " |", "|" + "---|" * len(cols)]
            lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
            out.append("\n".join(lines) + "\n")
            if note:
                out.append(f"_{note}_\n")
        elif isinstance(b, Image):
            out.append(f"![{b.title}]({b.png})\n\n{b.caption} ([SVG]({b.svg}), [data CSV]({b.csv}))\n")
    return "\n".join(out)


_CSS = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; }
th { background: #f3f3f3; }
figure { margin: 1em 0 2em; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #444; }
.note { font-size: 0.85em; color: #666; font-style: italic; }
code { background: #f5f5f5; padding: 0 0.2em; }
"""


def _inline(text: str) -> str:
    """Escape text and render `code` spans, the only inline markup the report uses."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def to_html(blocks: list[Block], title: str) -> str:
    body: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            body.append(f"<h{b.level}>{_inline(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            body.append(f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Bullets):
            body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Table):
            cols, rows, note = _table_rows(b)
            head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
            trs = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{trs}</tbody></table>")
            if note:
                body.append(f'<p class="note">{html.escape(note)}</p>')
        elif isinstance(b, Image):
            data = base64.b64encode(b.svg_bytes).decode("ascii")
            body.append(
                f'<figure><img alt="{html.escape(b.title)}" src="data:image/svg+xml;base64,{data}">'
                f"<figcaption>{_inline(b.caption)} (files: {html.escape(b.png)}, {html.escape(b.svg)}, "
                f"{html.escape(b.csv)})</figcaption></figure>"
            )
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )
