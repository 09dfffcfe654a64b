"""Where shipped data lives: a *name* resolves to a file shipped with archsim, a *path* to the user's file.

Shipped folders (isa/, mappings/, workloads/) sit at the repository root in a checkout and are copied to
archsim/_shipped/ when the package is built (see setup.py), so both layouts are searched.
"""
from __future__ import annotations

from pathlib import Path

from archsim.errors import UserError

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent


def shipped_dir(kind: str) -> Path:
    """Directory holding shipped files of `kind` ("isa", "mappings", "workloads")."""
    for candidate in (PACKAGE_DIR / "_shipped" / kind, REPO_ROOT / kind):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"shipped data folder {kind!r} not found (looked in archsim/_shipped and the checkout)")


def shipped_names(kind: str, suffixes: tuple[str, ...] = (".yaml", ".yml", ".json")) -> list[str]:
    """Names (file stems) of shipped files of `kind`, searched recursively."""
    base = shipped_dir(kind)
    return sorted({p.stem for p in base.rglob("*") if p.suffix in suffixes})


def resolve(kind: str, name_or_path: str | Path, suffixes: tuple[str, ...] = (".yaml", ".yml", ".json")) -> Path:
    """Resolve a shipped name (e.g. "gpt2-xl") or a user path to an existing file.

    A string containing a path separator or ending in a known suffix is treated as a path first.
    """
    text = str(name_or_path)
    as_path = Path(text).expanduser()
    if as_path.is_file():
        return as_path
    base = shipped_dir(kind)
    for suffix in ("",) + suffixes:
        for hit in sorted(base.rglob(text + suffix)):
            if hit.is_file():
                return hit
    known = ", ".join(shipped_names(kind, suffixes)) or "(none)"
    raise UserError(f"{kind}: no file or shipped name {text!r}; shipped names: {known}")


def preset_file(label: str, preset_dir: Path, name_or_path: str | Path) -> Path:
    """A packaged preset (`preset_dir/<name>.yaml`, e.g. the NPU or ASIC presets) by name, or a user's file.
    `label` names the kind in errors ("NPU", "ASIC")."""
    from archsim.errors import unknown_name

    text = str(name_or_path)
    path = Path(text).expanduser()
    if path.is_file():
        return path
    known = sorted(p.stem for p in preset_dir.glob("*.yaml"))
    if "/" in text or text.endswith((".yaml", ".yml")):
        raise UserError(f"{text}: {label} config file not found (shipped: {', '.join(known)})")
    if text not in known:
        raise unknown_name(f"{label} preset", text, known)
    return preset_dir / f"{text}.yaml"
