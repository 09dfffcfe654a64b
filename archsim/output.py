"""The one output writer of the CLI: every file archsim writes for the user goes through `write_bytes`.

What a path names decides how it is written:
  - "-": standard output;
  - a symlink: the file it points to (the link stays a link);
  - a character device, FIFO or socket (/dev/null, /dev/full, a named pipe, /dev/stdout): written in place,
    never replaced by a regular file; ENOSPC / EPIPE become one-line errors;
  - a regular file or nothing yet: a temp file in the same folder, renamed over the target once complete,
    so a failed run never leaves a half-written file (the file gets the permissions the umask gives, or the
    existing file's mode when it replaces one).

`check_writable(path)` is what a command calls *before* it simulates: it fails at once, in one line, when
the output could not be written (read-only folder, a parent that is a file, a directory at the path).
Every failure is an archsim.errors.UserError naming the path (the CLI prints it and exits 2).
"""
from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from pathlib import Path

from archsim.errors import UserError

STDOUT = "-"


class OutputError(UserError):
    """An output could not be written (the message names the path and the reason)."""


def describe(exc: BaseException) -> str:
    """The reason of an OSError in words ("No space left on device"), else the exception's text."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _stream_kind(path: Path) -> bool:
    """True if `path` (after symlinks) is a character device, FIFO or socket: written in place."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def target(path: str | Path) -> Path:
    """The path a write really lands on: symlinks followed (a dangling link: the file it would create). A link
    that leads back to itself is an OutputError: writing there would replace the link by a file."""
    p = Path(path).expanduser()
    if not p.is_symlink():
        return p
    try:
        os.stat(p)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutputError(f"{path}: cannot write: a symbolic link that leads back to itself (a loop); "
                              "remove it or name another file") from None
    return Path(os.path.realpath(p))


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two output paths name the same file (after symlinks; "-" is standard output)."""
    if STDOUT in (str(a), str(b)):
        return str(a) == str(b)
    return os.path.realpath(os.path.abspath(Path(a).expanduser())) == \
        os.path.realpath(os.path.abspath(Path(b).expanduser()))


def check_distinct(paths: dict[str, str | Path | None], inputs: dict[str, str | Path | None] | None = None) -> None:
    """Refuse two outputs that name one file, or an output that names an input (`paths`, `inputs`: option ->
    path, None when not given): the second write would silently replace the first, or the input."""
    given = [(opt, p) for opt, p in paths.items() if p is not None]
    for i, (opt_a, a) in enumerate(given):
        for opt_b, b in given[i + 1:]:
            if same_file(a, b):
                raise OutputError(f"{opt_a} {a} and {opt_b} {b} name the same file; give each output its own")
        for opt_b, b in (inputs or {}).items():
            if b is not None and str(b) != STDOUT and same_file(a, b):
                raise OutputError(f"{opt_a} {a} names {opt_b} {b} too: writing it would replace that input")


def _first_existing(p: Path) -> Path:
    """`p` or its nearest existing ancestor (the folder a missing parent chain would be created in)."""
    p = Path(os.path.abspath(p))
    while not os.path.lexists(p) and p.parent != p:
        p = p.parent
    return p


def check_writable(path: str | Path | None, *, folder: bool = False) -> None:
    """Fail now (OutputError) if `path` could not be written later. `folder=True`: `path` is an output
    directory (it may exist; files are created inside). Creates nothing: it checks that the path is not a
    directory (or, for a folder, not a file) and that the nearest existing folder lets us create entries."""
    if path is None or str(path) == STDOUT:
        return
    p = target(path)
    if folder:
        if p.exists() and not p.is_dir():
            raise OutputError(f"{path}: cannot write: exists and is not a directory")
        _check_dir(path, p if p.is_dir() else _first_existing(p))
        return
    if p.is_dir():
        raise OutputError(f"{path}: cannot write: is a directory")
    if _stream_kind(p):
        if not os.access(p, os.W_OK):
            raise OutputError(f"{path}: cannot write: Permission denied")
        return
    _check_dir(path, _first_existing(p.parent))


def _check_dir(path: str | Path, d: Path) -> None:
    if not d.is_dir():
        raise OutputError(f"{path}: cannot write: {d} is not a directory")
    # Creating a probe file is the only test that also holds for root and read-only file systems.
    try:
        fd, probe = tempfile.mkstemp(dir=d, prefix=".archsim-probe.", suffix=".tmp")
    except OSError as exc:
        raise OutputError(f"{path}: cannot write in {d}: {describe(exc)}") from None
    os.close(fd)
    os.unlink(probe)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_bytes(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` as the module docstring says (OutputError on any failure)."""
    if str(path) == STDOUT:
        _write_stdout(data)
        return
    p = target(path)
    if _stream_kind(p):
        _write_stream(path, p, data)
        return
    if p.is_dir():
        raise OutputError(f"{path}: cannot write: is a directory")
    folder = _first_existing(p.parent)
    if not folder.is_dir():
        raise OutputError(f"{path}: cannot write: {folder} is not a directory")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    except OSError as exc:
        raise OutputError(f"{path}: cannot write: {describe(exc)}") from None
    try:
        try:   # a replaced file keeps its mode; a new one gets what the umask gives (mkstemp alone: 0600)
            mode = stat.S_IMODE(os.stat(p).st_mode)
        except OSError:
            mode = 0o666 & ~_umask()
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, p)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise OutputError(f"{path}: cannot write: {describe(exc)}") from None
        raise


def write_text(path: str | Path, text: str) -> None:
    """write_bytes of UTF-8 text."""
    write_bytes(path, text.encode("utf-8"))


def _write_stream(path: str | Path, p: Path, data: bytes) -> None:
    try:
        fd = os.open(p, os.O_WRONLY)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write: {describe(exc)}") from None
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    except OSError as exc:
        raise OutputError(f"{path}: cannot write: {_why(exc)}") from None
    finally:
        os.close(fd)


def _why(exc: OSError) -> str:
    if exc.errno == errno.EPIPE:
        return "the reading end of the pipe was closed (EPIPE)"
    if exc.errno == errno.ENOSPC:
        return "No space left on device (ENOSPC)"
    return describe(exc)


def _write_stdout(data: bytes) -> None:
    try:
        sys.stdout.flush()
        out = getattr(sys.stdout, "buffer", None)
        if out is None:
            sys.stdout.write(data.decode("utf-8"))
        else:
            out.write(data)
        sys.stdout.flush()
    except BrokenPipeError:
        raise          # the CLI ends quietly when the reader went away (`archsim ... --json - | head`)
    except OSError as exc:
        raise OutputError(f"standard output: cannot write: {_why(exc)}") from None
