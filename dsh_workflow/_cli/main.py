"""``dsh-workflow``: the command line of docs/cli.md — its parser, the table of its
commands and the process's exit codes.

Contract:

- Every command is registered the one way :mod:`.commands` states: its module's ``register``
  is listed in :data:`COMMANDS`, in the order ``--help`` shows them — ``run`` and ``check``
  (:mod:`.run`), the durable-run commands ``runs``, ``show``, ``logs`` and ``resume`` of
  docs/durable-runs.md (:mod:`.runs`), ``answer`` of its "Runs that wait" (:mod:`.answer`),
  ``cancel`` and ``replay-check`` of its "Runs under
  control" (:mod:`.control`), ``list`` and ``save`` of saved workflows (:mod:`.library`),
  ``worker`` of docs/temporal.md (:mod:`.worker`), ``mcp`` of docs/mcp.md (:mod:`.mcp`) and
  ``ui`` of docs/viewer.md (:mod:`.ui`). Every
  command that uses a run store finds it with :func:`.stores.store_path`.
- Exit codes: ``0`` completed, ``1`` the run ended with an error, ``2`` usage or start error
  (one ``Error: <message>`` line on stderr, never a traceback), ``75`` the run parked (it waits
  for answers or a provider's limit), ``130`` cancelled by Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from dsh_workflow import __version__

from . import answer, control, library, mcp, run, runs, ui, worker
from .commands import Handler, Register
from .errors import EXIT_CANCELLED, EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError
from .output import error_line, terminal_streams

__all__ = ["COMMANDS", "EXIT_CANCELLED", "EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "CliError",
           "build_parser", "main"]

COMMANDS: tuple[Register, ...] = (run.register, runs.register, answer.register,
                                  control.register, library.register, worker.register,
                                  mcp.register, ui.register)
"""Every command module's ``register``, in the order ``--help`` lists the commands."""

# -- arguments ---------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"Error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``dsh-workflow`` argument parser: every command of :data:`COMMANDS`."""
    parser = _Parser(prog="dsh-workflow",
                     description="Run JavaScript workflow scripts in a sandboxed QuickJS engine.",
                     epilog="Exit codes: 0 completed, 1 run error, 2 usage or start error, "
                            "75 parked (waiting for answers or a limit), 130 cancelled "
                            "(Ctrl-C).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}",
                        help="print the version and exit")
    commands = parser.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    for register in COMMANDS:
        register(commands)
    return parser


# -- running -------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dsh-workflow`` and ``python -m dsh_workflow``; returns the exit code.
    Everything it writes to the terminal is escaped (``output.terminal_streams``)."""
    with terminal_streams():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    try:
        ns = build_parser().parse_args(argv)
        handler: Handler = ns.handler
        return handler(ns)
    except CliError as exc:
        error_line(str(exc))
        return EXIT_USAGE
    except (KeyboardInterrupt, BrokenPipeError) as exc:
        return _interrupted(exc)
    except BaseExceptionGroup as group:  # the same, raised inside the run's task group
        rest = group.split((KeyboardInterrupt, BrokenPipeError))[1]
        if rest is not None:
            raise
        return _interrupted(group.exceptions[0])


def _interrupted(exc: BaseException) -> int:
    """Exit code for a Ctrl-C outside the run's own handling, or a stdout reader gone away."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    if isinstance(exc, KeyboardInterrupt):
        error_line("interrupted")
        return EXIT_CANCELLED
    # stdout's reader went away (`| head`): say nothing more, and keep Python from complaining
    # about the flush at exit.
    with contextlib.suppress(OSError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_ERROR
