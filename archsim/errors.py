"""User-facing errors. The CLI turns these into a one-line message and exit code 2 (no traceback)."""
from __future__ import annotations

import difflib
from collections.abc import Iterable


class UserError(Exception):
    """Bad input from the user (config, trace, CLI arguments). Message must say where and what is allowed."""


class ConfigError(UserError):
    """A config value is invalid. Formats as `file: key.path: problem`."""

    def __init__(self, key_path: str, problem: str, source: str | None = None, line: int | None = None):
        self.key_path = key_path
        self.problem = problem
        self.source = source
        self.line = line
        where = source or "<config>"
        if line is not None:
            where += f":{line}"
        super().__init__(f"{where}: {key_path}: {problem}")


class RowError(UserError):
    """A bad row of a tabular input (e.g. a command log). `row` is the 0-based data row; a caller that knows
    the file re-raises it as `file:line: detail` (archsim check-log does)."""

    def __init__(self, row: int, detail: str, what: str = "command log"):
        self.row, self.detail = row, detail
        super().__init__(f"{what} row {row}: {detail}")


def nearest(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """The closest valid names to a misspelt one (for 'did you mean' hints)."""
    return difflib.get_close_matches(word, list(choices), n=n, cutoff=0.5)


def unknown_name(kind: str, got: str, known: Iterable[str]) -> UserError:
    known = sorted(known)
    hint = nearest(got, known)
    msg = f"unknown {kind} {got!r}; known: {', '.join(known)}"
    if hint:
        msg += f" (did you mean {', '.join(hint)}?)"
    return UserError(msg)


class NotModelled(UserError):
    """The input is valid but describes something archsim does not model yet.

    The message is one line: what is missing and which system does support it."""


class NotBuilt(NotModelled, NotImplementedError):
    """A feature an open issue plans but archsim has not built yet (the message names the issue): a
    NotImplementedError to a caller of the API, one line and exit 2 on the command line."""
