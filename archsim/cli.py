"""The `archsim` command. Each subcommand lives in its own module under archsim/commands/ and exposes
`register(subparsers)`, which adds a parser whose `func(args) -> int` runs it.

User errors (archsim.errors.UserError) print one line to stderr and exit with code 2, never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import sys

# Order = order in `archsim --help`. Add a module here to add a subcommand.
COMMAND_MODULES = [
    "archsim.commands.run",
    "archsim.commands.compile",
    "archsim.commands.trace",
    "archsim.commands.check_log",
    "archsim.commands.presets",
    "archsim.commands.isa",
    "archsim.commands.rtl",
    "archsim.commands.sweep",
    "archsim.commands.study",
    "archsim.commands.report",
    "archsim.commands.config",
]


def build_parser() -> argparse.ArgumentParser:
    from archsim import __version__

    parser = argparse.ArgumentParser(
        prog="archsim",
        description="Cycle-accurate, event-driven simulator for PIM/NPU accelerators for transformer inference.",
    )
    parser.add_argument("--version", action="version", version=f"archsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    _show_defaults(parser)
    _activate(parser)
    return parser


def subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """(command path, parser) of every subcommand, nested ones included (e.g. "isa asm")."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                out.append((name, child))
                out.extend((f"{name} {sub}", p) for sub, p in subparsers(child))
    return out


def _show_defaults(parser: argparse.ArgumentParser) -> None:
    """Every subcommand's --help shows its options' defaults (archsim.commands.common.HelpFormatter)."""
    from archsim.commands.common import HelpFormatter

    for _, child in subparsers(parser):
        child.formatter_class = HelpFormatter


def _activate(parser: argparse.ArgumentParser) -> None:
    """Parsers of system configs generate their config-key flags when first used (archsim.commands.common.
    SystemConfigParser): only `run` / `config show` pay for importing every system."""
    from archsim.commands.common import SystemConfigParser

    for _, child in subparsers(parser):
        if isinstance(child, SystemConfigParser):
            child.activate()


def main(argv: list[str] | None = None) -> int:
    from archsim.errors import UserError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()     # a full device or closed pipe on standard output is reported here, not at exit
        if argv is None and getattr(args, "exit_when_done", False):
            _exit_now(code)
        return code
    except UserError as exc:
        _error(str(exc))
        return 2
    except KeyboardInterrupt:
        print("archsim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `archsim isa show | head`
        _silence_stdout()
        return 0
    except OSError as exc:   # a file or device the user named could not be read or written
        if exc.filename is None:   # standard output itself (a full device): do not fail again at exit
            _silence_stdout()
        _error(_os_error(exc))
        return 2
    except UnicodeDecodeError as exc:
        _error(f"an input file is not UTF-8 text ({exc.reason} at byte {exc.start})")
        return 2


def _exit_now(code: int) -> None:
    """End the process here, skipping the interpreter's teardown: a command that sets `exit_when_done`
    (`archsim trace`) has written and flushed everything, and tearing down numba's and LLVM's modules costs
    ~0.04 s of CPU, a twentieth of a short trace run. Only the `archsim` process itself (main() without
    argv) ends so; a caller of main(argv) gets the code back."""
    import os

    sys.stderr.flush()
    os._exit(code)


def _error(message: str) -> None:
    try:
        print(f"archsim: error: {message}", file=sys.stderr)
    except OSError:
        pass


def _os_error(exc: OSError) -> str:
    from archsim.output import describe

    where = exc.filename if exc.filename is not None else "standard output" if exc.errno in (28, 32) else None
    return f"{where}: {describe(exc)}" if where is not None else describe(exc)


def _silence_stdout() -> None:
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
