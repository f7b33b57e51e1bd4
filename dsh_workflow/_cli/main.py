"""``dsh-workflow``: the command line of README, "Command line" — its parser, the ``run`` and ``check``
commands and the process's exit codes (the durable-run commands ``runs``, ``show``, ``logs``
and ``resume`` of README, "Durable runs" live in :mod:`.runs`, ``mcp`` in :mod:`.mcp`, ``ui`` in :mod:`.ui`).

Contract:

- ``run SCRIPT.js`` starts one workflow under trio on a :class:`~dsh_workflow.QuickJSEngine`,
  or with ``--engine subprocess`` on a :class:`~dsh_workflow.SubprocessEngine` (the script
  runs in a locked-down child process). What it reads is checked first (:mod:`.plan`), then it
  runs (:mod:`.execute`): progress on stderr only; stdout receives exactly one JSON document
  (indent 2, non-ASCII kept): the value when the run completed, else — and always with
  ``--json`` — the result object ``{value, stop_reason, error, error_code, agents_started,
  run_id}`` (:mod:`.output`).
- ``check SCRIPT.js`` validates the meta and proves the body parses, running nothing; it also
  prints warnings (``SCRIPT.js:LINE:COL: warning: ...`` on stderr, see :mod:`.lint`) that do
  not change its exit code.
- Agent definitions: ``run`` and ``check`` load ``--agents DIR`` folders (in the order given),
  then ``.claude/agents`` under the current directory, then ``~/.claude/agents``; a definition
  file that cannot be used is skipped with a warning on stderr; a ``--agents`` folder that does
  not exist is a usage error. ``--model-alias NAME=MODEL`` (repeatable) maps model names.
- Durable runs: ``run`` records the run in a run store (see :mod:`.stores` for the file;
  ``--no-store`` turns it off).
- Exit codes: ``0`` completed, ``1`` the run ended with an error, ``2`` usage or start error
  (one ``Error: <message>`` line on stderr, never a traceback), ``130`` cancelled by Ctrl-C.

Only the public API is used, plus ``check_body`` and ``parse_meta`` (the engine's own checks, so
``check`` reports exactly what ``start()`` would) and the provider classes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from dsh_workflow import __version__

from . import control, library, runs
from .errors import EXIT_CANCELLED, EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError
from .estimate import add_estimate_options
from .options import add_agent_options as _agent_options
from .options import count as _count
from .options import positive_seconds as _positive_seconds
from .options import seconds as _seconds
from .output import error_line, write_stdout
from .plan import add_run_options
from .stores import add_store_option
from .ui import add_ui_parser
from .worker import add_worker_parser, command_worker

__all__ = ["EXIT_CANCELLED", "EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "CliError", "build_parser",
           "main"]

# -- arguments ---------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"Error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``dsh-workflow`` argument parser (``run``, ``check``, ``runs``, ``show``, ``logs``,
    ``resume``)."""
    parser = _Parser(prog="dsh-workflow",
                     description="Run JavaScript workflow scripts in a sandboxed QuickJS engine.",
                     epilog="Exit codes: 0 completed, 1 run error, 2 usage or start error, "
                            "130 cancelled (Ctrl-C).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}",
                        help="print the version and exit")
    commands = parser.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    run = commands.add_parser("run", help="run a workflow, progress on stderr, result on stdout",
                              description="Run a workflow. stdout gets the value as JSON (the "
                              "whole result object with --json or when the run did not complete).")
    run.add_argument("script", metavar="SCRIPT.js")
    run.add_argument("--args", metavar="JSON|@FILE", help="the script's `args` (JSON text, "
                     "@file.json, or @- for stdin)")
    run.add_argument("--meta", metavar="JSON|@FILE", help="meta object; replaces the file's "
                     "`export const meta`")
    add_run_options(run)
    add_estimate_options(run)
    add_store_option(run, can_disable=True)
    run.set_defaults(handler=command_run)
    check = commands.add_parser("check", help="validate meta and script without running it")
    check.set_defaults(handler=command_check)
    check.add_argument("script", metavar="SCRIPT.js")
    check.add_argument("--meta", metavar="JSON|@FILE", help="meta object; replaces the file's")
    _agent_options(check)
    runs.add_parsers(commands)
    control.add_parsers(commands)  # cancel, replay-check (README, "Runs under control")
    library.add_parsers(commands)
    # README, "Distributed dispatch on Temporal": the Temporal worker
    add_worker_parser(commands, count=_count, seconds=_seconds, positive_seconds=_positive_seconds)
    commands.choices["worker"].set_defaults(handler=command_worker)
    from .mcp import add_mcp_command  # README, "MCP server": the MCP server, in its own module

    add_mcp_command(commands)
    add_ui_parser(commands, fail=CliError)
    return parser


# -- commands ------------------------------------------------------------------------------------


def command_run(ns: argparse.Namespace) -> int:
    from .execute import run_plan
    from .plan import plan_run

    if ns.estimate:  # README, "Cost in money": offline, so nothing is recorded
        from .estimate import estimate, print_estimate

        ns.no_store = True
        print_estimate(estimate(plan_run(ns), ns.model), as_json=ns.json)
        return EXIT_OK
    plan = plan_run(ns)
    if ns.confirm_above is not None:
        from .estimate import confirm, estimate

        confirm(estimate(plan, ns.model), ns.confirm_above, yes=ns.yes)
    return run_plan(plan, ns)


def command_check(ns: argparse.Namespace) -> int:
    from dsh_workflow import WorkflowError
    from dsh_workflow._meta import parse_meta
    from dsh_workflow._script import check_body

    from .lint import lint
    from .options import load_agents
    from .plan import NO_META, script_source

    meta, body = script_source(ns.script, ns.meta)
    if meta is None:  # the body is still checked: its syntax error is worth more than "no meta"
        try:
            check_body(body)
        except WorkflowError as exc:
            raise CliError(f"{ns.script}: {exc}; and {NO_META}") from None
        raise CliError(NO_META)
    if not isinstance(meta, dict):
        raise CliError("--meta must be a JSON object like {\"name\": ..., \"description\": ...}")
    try:
        checked = parse_meta(meta)
        check_body(body)
    except WorkflowError as exc:
        raise CliError(f"{ns.script}: {exc}") from None
    warnings = lint(body, agents=load_agents(ns.agents))
    for warning in warnings:
        sys.stderr.write(f"{ns.script}:{warning}\n")
    sys.stderr.flush()
    noted = f" ({len(warnings)} warning{'s' if len(warnings) != 1 else ''})" if warnings else ""
    write_stdout(f"ok: {checked.name}: meta is valid and the script parses{noted}\n")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dsh-workflow`` and ``python -m dsh_workflow``; returns the exit code."""
    try:
        ns = build_parser().parse_args(argv)
        handler: Callable[[argparse.Namespace], int] = ns.handler
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
