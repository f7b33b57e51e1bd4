"""``dsh-workflow run`` and ``dsh-workflow check``: the command line of SPEC §7.

(``dsh-workflow mcp`` lives in :mod:`.mcp`; the options ``run`` shares with it in
:mod:`.options`.)

Contract:

- ``run SCRIPT.js`` starts one workflow under trio on a :class:`~dsh_workflow.QuickJSEngine`, or
  with ``--engine subprocess`` on a :class:`~dsh_workflow.SubprocessEngine` (the script runs in
  a locked-down child process).
  The file's leading ``export const meta = {...};`` literal (read as data by
  :mod:`.metafile`) is the meta unless ``--meta`` replaces it. Progress goes to stderr only;
  stdout receives exactly one JSON document (indent 2, non-ASCII kept): the value when the run
  completed, else — and always with ``--json`` — the result object ``{value, stop_reason,
  error, agents_started, run_id}``.
- ``check SCRIPT.js`` validates the meta and proves the body parses, running nothing; it also
  prints warnings (``SCRIPT.js:LINE:COL: warning: ...`` on stderr, see :mod:`.lint`) that do
  not change its exit code.
- Agent definitions: ``run`` and ``check`` load ``--agents DIR`` folders (in the order given),
  then ``.claude/agents`` under the current directory, then ``~/.claude/agents``; a definition
  file that cannot be used is skipped with a warning on stderr; a ``--agents`` folder that does
  not exist is a usage error. ``--model-alias NAME=MODEL`` (repeatable) maps model names.
- ``--args`` text that is not JSON is passed as a string (Claude Code passes a workflow's
  arguments as text); text starting with ``{``, ``[`` or ``"`` must be valid JSON.
- Exit codes: ``0`` completed, ``1`` the run ended with an error, ``2`` usage or start error
  (one ``Error: <message>`` line on stderr, never a traceback), ``130`` cancelled by Ctrl-C.
- Ctrl-C (SIGINT) cancels the run: its children are cancelled, every event stays paired, the
  cancelled result is printed and the exit code is 130. A second Ctrl-C while the run winds
  down exits 130 at once. Default SIGINT handling is restored once the run is over.

Only the public API is used, plus ``check_body`` and ``parse_meta`` (the engine's own checks, so
``check`` reports exactly what ``start()`` would) and the provider classes.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import anyio
import anyio.abc

from dsh_workflow import (
    WorkflowError,
    WorkflowResult,
    WorkflowRun,
    WorkflowStartRequest,
)
from dsh_workflow._meta import parse_meta
from dsh_workflow._script import check_body

from .errors import EXIT_CANCELLED, EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError
from .lint import lint
from .metafile import MetaFileError, split_meta
from .options import (
    EngineSetup,
    add_agent_options,
    add_engine_options,
    engine_setup,
    load_agents,
)
from .progress import EventLog, Progress, make_progress

__all__ = ["EXIT_CANCELLED", "EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "CliError", "build_parser",
           "main"]

NO_META = ("no meta: add `export const meta = {name, description}` at the top of the file or "
           "pass --meta")
INTERRUPT_REASON = "interrupted (Ctrl-C)"
_EXIT_FOR = {"completed": EXIT_OK, "error": EXIT_ERROR, "cancelled": EXIT_CANCELLED}


# -- arguments ---------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"Error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``dsh-workflow`` argument parser (``run`` and ``check`` subcommands)."""
    parser = _Parser(prog="dsh-workflow",
                     description="Run JavaScript workflow scripts in a sandboxed QuickJS engine.",
                     epilog="Exit codes: 0 completed, 1 run error, 2 usage or start error, "
                            "130 cancelled (Ctrl-C).")
    commands = parser.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    run = commands.add_parser("run", help="run a workflow, progress on stderr, result on stdout",
                              description="Run a workflow. stdout gets the value as JSON (the "
                              "whole result object with --json or when the run did not complete).")
    run.add_argument("script", metavar="SCRIPT.js")
    run.add_argument("--args", metavar="JSON|@FILE", help="the script's `args` (JSON text, "
                     "@file.json, or @- for stdin)")
    run.add_argument("--meta", metavar="JSON|@FILE", help="meta object; replaces the file's "
                     "`export const meta`")
    add_engine_options(run)
    run.add_argument("--json", action="store_true", help="print the whole result object")
    run.add_argument("--events", metavar="FILE.jsonl", help="append every event as a JSON line")
    run.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    run.set_defaults(handler=command_run)
    check = commands.add_parser("check", help="validate meta and script without running it")
    check.add_argument("script", metavar="SCRIPT.js")
    check.add_argument("--meta", metavar="JSON|@FILE", help="meta object; replaces the file's")
    add_agent_options(check)
    check.set_defaults(handler=command_check)
    from .mcp import add_mcp_command

    add_mcp_command(commands)
    return parser


# -- preparing a run -----------------------------------------------------------------------------


@dataclass
class Plan(EngineSetup):
    """Everything a run needs, checked before any event loop starts."""

    meta: dict[str, Any] = field(default_factory=dict)
    body: str = ""
    args: Any = None


def _read_text(path: str, what: str) -> str:
    try:
        if path == "-":
            return sys.stdin.read()
        with open(path, encoding="utf-8-sig") as file:
            return file.read()
    except OSError as exc:
        raise CliError(f"cannot read {what} {path!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise CliError(f"{what} {path!r} is not UTF-8 text: {exc.reason} at byte {exc.start}") from None


def _json_option(option: str, text: str) -> Any:
    source = _read_text(text[1:], f"{option} file") if text.startswith("@") else text
    try:
        return json.loads(source)
    except json.JSONDecodeError as exc:
        raise CliError(f"{option} is not valid JSON: {exc.msg} (line {exc.lineno}, column "
                       f"{exc.colno})") from None


def _args_option(text: str) -> Any:
    """``--args``: JSON text, ``@file`` or ``@-``; other text that is not JSON is a string."""
    if text.startswith("@") or text.lstrip()[:1] in ("{", "[", '"'):
        return _json_option("--args", text)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _script_parts(path: str, meta_option: str | None) -> tuple[dict[str, Any], str]:
    """The meta (``--meta`` winning over the file's literal) and the body of the script file."""
    source = _read_text(path, "script")
    try:
        file_meta, body = split_meta(source)
    except MetaFileError as exc:
        raise CliError(f"{path}: {exc}") from None
    meta = _json_option("--meta", meta_option) if meta_option is not None else file_meta
    if meta is None:
        raise CliError(NO_META)
    if not isinstance(meta, dict):
        raise CliError("--meta must be a JSON object like {\"name\": ..., \"description\": ...}")
    return meta, body


def plan_run(ns: argparse.Namespace) -> Plan:
    """Read and check everything ``run`` needs; raises :class:`CliError`."""
    meta, body = _script_parts(ns.script, ns.meta)
    args = _args_option(ns.args) if ns.args is not None else None
    setup = engine_setup(ns)
    return Plan(meta=meta, body=body, args=args, config=setup.config, provider=setup.provider,
                engine=setup.engine, agents=setup.agents)


# -- running -------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """How ``run`` ended: a start error or a result."""

    result: WorkflowResult | None = None
    start_error: str | None = None


class Interrupts:
    """Turns SIGINT into ``run.cancel()``; a second SIGINT exits the process at once.

    A Ctrl-C that arrives before the run exists (while the provider and engine open, which
    never wait on anything slow) cancels the run as soon as :meth:`adopt` hands it over.
    """

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.count = 0
        self.run: WorkflowRun | None = None
        self.settled = False  # the run's result is in; only cleanup remains

    async def watch(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            task_status.started()
            async for _ in signals:
                self.count += 1
                if self.count > 1:
                    self.force_exit()
                doing = "Finishing" if self.settled else "Cancelling the run"
                self.progress.note(f"{doing}… press Ctrl-C again to quit at once.")
                if self.run is not None:
                    self.run.cancel(INTERRUPT_REASON)

    def adopt(self, run: WorkflowRun) -> None:
        self.run = run
        if self.count:
            run.cancel(INTERRUPT_REASON)

    def force_exit(self) -> NoReturn:
        self.progress.abort()
        with contextlib.suppress(Exception):
            sys.stderr.write("Error: interrupted twice; quitting without waiting for the run\n")
            sys.stderr.flush()
            sys.stdout.flush()
        os._exit(EXIT_CANCELLED)


async def _ticker(progress: Progress) -> None:
    while True:
        await anyio.sleep(0.1)
        progress.tick()


async def execute(plan: Plan, progress: Progress, event_log: EventLog | None, *,
                  as_json: bool) -> int:
    """Run ``plan`` under SIGINT handling; print the result; return the exit code."""
    interrupts = Interrupts(progress)
    async with anyio.create_task_group() as tg:
        await tg.start(interrupts.watch)
        if progress.needs_ticks:
            tg.start_soon(_ticker, progress)
        outcome = await _drive(plan, progress, event_log, interrupts, as_json=as_json)
        tg.cancel_scope.cancel()
    progress.finish()
    if outcome.start_error is not None or outcome.result is None:
        raise CliError(outcome.start_error or "the run did not start")
    return _EXIT_FOR[outcome.result.stop_reason]


async def _drive(plan: Plan, progress: Progress, event_log: EventLog | None,
                 interrupts: Interrupts, *, as_json: bool) -> Outcome:
    async with contextlib.AsyncExitStack() as stack:
        provider = plan.provider()
        if hasattr(provider, "__aenter__"):
            provider = await stack.enter_async_context(provider)  # type: ignore[arg-type]
        engine = await stack.enter_async_context(plan.make_engine(provider))
        # Listeners stay subscribed until the engine is gone, so that even a run disposed by
        # the engine's exit reports its WorkflowEnded.
        engine.events.subscribe(progress)
        if event_log is not None:
            engine.events.subscribe(event_log)
        try:
            run = engine.start(WorkflowStartRequest(meta=plan.meta, script=plan.body, args=plan.args))
        except WorkflowError as exc:
            return Outcome(start_error=str(exc))
        interrupts.adopt(run)  # from here on, Ctrl-C cancels the run itself
        result = await run.result()
        interrupts.settled = True
        progress.finish()
        print_result(result, run.id, as_json=as_json)
        await run.dispose()
        return Outcome(result=result)
    raise AssertionError("unreachable")  # pragma: no cover


def print_result(result: WorkflowResult, run_id: str, *, as_json: bool) -> None:
    """Write the run's JSON document to stdout and, when it did not complete, an error line."""
    document: Any = result.value
    if as_json or result.stop_reason != "completed":
        document = {"value": result.value, "stop_reason": result.stop_reason,
                    "error": result.error, "agents_started": result.agents_started,
                    "run_id": run_id}
    _write_stdout(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    if result.stop_reason == "cancelled":
        error = result.error or ""
        _error_line(error if "cancel" in error.lower() else f"workflow run was cancelled: {error}")
    elif result.stop_reason == "error":
        _error_line(f"workflow run failed: {result.error}")


def _write_stdout(text: str) -> None:
    buffer = getattr(sys.stdout, "buffer", None)
    sys.stdout.flush()
    if buffer is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    buffer.write(text.encode("utf-8"))  # JSON is UTF-8, whatever the locale
    buffer.flush()


def _error_line(message: str) -> None:
    sys.stderr.write(f"Error: {message}\n")
    sys.stderr.flush()


# -- commands ------------------------------------------------------------------------------------


def command_run(ns: argparse.Namespace) -> int:
    plan = plan_run(ns)
    try:
        event_log = EventLog(ns.events) if ns.events else None
    except OSError as exc:
        raise CliError(f"cannot open --events file {ns.events!r}: {exc.strerror or exc}") from None
    progress = make_progress(sys.stderr, quiet=ns.quiet, budget=plan.config.budget_tokens)
    previous = signal.getsignal(signal.SIGINT)
    try:
        return anyio.run(functools.partial(execute, plan, progress, event_log, as_json=ns.json),
                         backend="trio")
    finally:
        progress.abort()
        if event_log is not None:
            event_log.close()
        signal.signal(signal.SIGINT, previous)  # the handling the process had before the run


def command_check(ns: argparse.Namespace) -> int:
    meta, body = _script_parts(ns.script, ns.meta)
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
    _write_stdout(f"ok: {checked.name}: meta is valid and the script parses{noted}\n")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dsh-workflow`` and ``python -m dsh_workflow``; returns the exit code."""
    try:
        ns = build_parser().parse_args(argv)
        return ns.handler(ns)  # type: ignore[no-any-return]
    except CliError as exc:
        _error_line(str(exc))
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
        _error_line("interrupted")
        return EXIT_CANCELLED
    # stdout's reader went away (`| head`): say nothing more, and keep Python from complaining
    # about the flush at exit.
    with contextlib.suppress(OSError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_ERROR
