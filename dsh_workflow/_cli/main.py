"""``dsh-workflow run`` and ``dsh-workflow check``: the command line of SPEC §7 (the durable-run
commands ``runs``, ``show``, ``logs`` and ``resume`` of SPEC §9 live in :mod:`.runs`).

(``dsh-workflow mcp`` lives in :mod:`.mcp`; the options ``run`` shares with it in
:mod:`.options`.)

Contract:

- ``run SCRIPT.js`` starts one workflow under trio on a :class:`~dsh_workflow.QuickJSEngine`, or
  with ``--engine subprocess`` on a :class:`~dsh_workflow.SubprocessEngine` (the script runs in
  a locked-down child process).
  The file's leading ``export const meta = {...};`` literal (read as data by
  :mod:`dsh_workflow._metafile`) is the meta unless ``--meta`` replaces it. Progress goes to stderr only;
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
- Durable runs: ``run`` records the run in a run store (see :mod:`.stores` for the file;
  ``--no-store`` turns it off) and then puts the run id on stderr at start in every progress
  mode: the plain ``[start] name (run <id>)`` line, else a ``run id: <id>`` line (``--quiet``
  too). A run stopped by Ctrl-C ends with ``Resume it with: dsh-workflow resume <id>``
  on stderr (with ``--store`` when not the default, and the provider options given).
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import anyio
import anyio.abc

from dsh_workflow import (
    AgentRegistry,
    EchoProvider,
    EngineConfig,
    QuickJSEngine,
    RunStore,
    RunStoreError,
    SQLiteRunStore,
    SubagentProvider,
    SubprocessEngine,
    WorkflowEngine,
    WorkflowError,
    WorkflowEvent,
    WorkflowLibrary,
    WorkflowResult,
    WorkflowRun,
    WorkflowStarted,
    WorkflowStartRequest,
)
from dsh_workflow._meta import parse_meta
from dsh_workflow._script import check_body

from .._metafile import MetaFileError, split_meta
from . import library
from .errors import EXIT_CANCELLED, EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError
from .library import add_library_option, load_library, saved_script
from .lint import lint
from .options import add_agent_options as _agent_options
from .options import add_engine_options, engine_config, load_agents, provider_factory
from .options import count as _count
from .options import positive_seconds as _positive_seconds
from .options import seconds as _seconds
from .progress import EventLog, Progress, make_progress
from .stores import add_store_option, ensure_folder, resume_command, store_path
from .ui import add_ui_parser, announce_viewer

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
    """The ``dsh-workflow`` argument parser (``run``, ``check``, ``runs``, ``show``, ``logs``,
    ``resume``)."""
    from . import runs  # imports this module: loaded on use
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
    add_run_options(run)
    add_store_option(run, can_disable=True)
    run.set_defaults(handler=command_run)
    check = commands.add_parser("check", help="validate meta and script without running it")
    check.set_defaults(handler=command_check)
    check.add_argument("script", metavar="SCRIPT.js")
    check.add_argument("--meta", metavar="JSON|@FILE", help="meta object; replaces the file's")
    _agent_options(check)
    runs.add_parsers(commands)
    library.add_parsers(commands)
    from .worker import (  # SPEC §13: the Temporal worker
        add_worker_parser,
        command_worker,
    )

    add_worker_parser(commands, count=_count, seconds=_seconds, positive_seconds=_positive_seconds)
    commands.choices["worker"].set_defaults(handler=command_worker)
    from .mcp import add_mcp_command  # SPEC §12: the MCP server, in its own module

    add_mcp_command(commands)
    add_ui_parser(commands, fail=CliError)
    return parser


def add_run_options(run: argparse.ArgumentParser) -> None:
    """The options ``run`` and ``resume`` share: provider, engine, limits, output."""
    add_engine_options(run)
    add_library_option(run)
    run.add_argument("--json", action="store_true", help="print the whole result object")
    run.add_argument("--events", metavar="FILE.jsonl", help="append every event as a JSON line")
    run.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


# -- preparing a run -----------------------------------------------------------------------------


@dataclass
class Plan:
    """Everything a run needs, checked before any event loop starts."""

    meta: dict[str, Any]
    body: str
    args: Any = None
    config: EngineConfig = field(default_factory=EngineConfig)
    provider: Callable[[], SubagentProvider] = EchoProvider
    engine: str = "quickjs"
    agents: AgentRegistry | None = None
    library: WorkflowLibrary | None = None  # saved workflows for workflow(name)
    store_path: str | None = None  # the run store file; None records nothing
    resume_from: str | None = None
    provider_argv: list[str] = field(default_factory=list)  # for the resume hint

    def make_engine(self, provider: SubagentProvider, store: RunStore | None) -> WorkflowEngine:
        if self.engine == "subprocess":
            return SubprocessEngine(self.config, provider=provider, pool_size=0,
                                    agents=self.agents, store=store, library=self.library)
        return QuickJSEngine(self.config, provider=provider, agents=self.agents, store=store,
                             library=self.library)


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


def script_parts(path: str, meta_option: str | None,
                 fallback_meta: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    """The meta (``--meta`` winning over the file's literal, then ``fallback_meta``) and the
    body of the script file."""
    source = _read_text(path, "script")
    try:
        file_meta, body = split_meta(source)
    except MetaFileError as exc:
        raise CliError(f"{path}: {exc}") from None
    meta = meta_option_value(meta_option) if meta_option is not None else file_meta
    if meta is None:
        meta = fallback_meta
    if meta is None:
        raise CliError(NO_META)
    if not isinstance(meta, dict):
        raise CliError("--meta must be a JSON object like {\"name\": ..., \"description\": ...}")
    return meta, body


def meta_option_value(text: str) -> Any:
    """The ``--meta`` option's JSON value."""
    return _json_option("--meta", text)


def args_value(text: str) -> Any:
    """The ``--args`` option's value (see :func:`_args_option`)."""
    return _args_option(text)


def _provider_argv(ns: argparse.Namespace) -> list[str]:
    """The provider options given, as a resume command must repeat them: they decide the
    provider's identity, which is part of every journal key."""
    argv: list[str] = []
    if ns.provider != "echo":
        argv += ["--provider", ns.provider]
    for option, value in (("--model", ns.model), ("--base-url", ns.base_url),
                          ("--command", ns.command_line)):
        if value is not None:
            argv += [option, value]
    for name, model in ns.model_alias:
        argv += ["--model-alias", f"{name}={model}"]
    return argv


def plan_options(ns: argparse.Namespace, *, meta: dict[str, Any], body: str, args: Any,
                 store: str | None, resume_from: str | None = None,
                 script_dir: str | os.PathLike[str] | None = None) -> Plan:
    """A :class:`Plan` from the run options of ``ns`` (shared by ``run`` and ``resume``);
    ``script_dir`` is where ``workflow({scriptPath})`` resolves relative paths."""
    config = engine_config(ns)
    factory = provider_factory(ns, config)
    assert factory is not None  # run offers only the base providers
    return Plan(meta=meta, body=body, args=args, config=config,
                provider=factory, engine=ns.engine,
                agents=load_agents(ns.agents), store_path=store, resume_from=resume_from,
                provider_argv=_provider_argv(ns),
                library=load_library(ns.workflows, base_dir=script_dir))


def plan_run(ns: argparse.Namespace) -> Plan:
    """Read and check everything ``run`` needs; raises :class:`CliError`. ``SCRIPT`` that is
    not a file but names a saved workflow runs that workflow."""
    if ns.script != "-" and not os.path.exists(ns.script):
        found = saved_script(ns.script, load_library(ns.workflows))
        if found is not None:
            saved_meta, saved_body, saved_path = found
            meta = _json_option("--meta", ns.meta) if ns.meta is not None else saved_meta
            args = _args_option(ns.args) if ns.args is not None else None
            store = store_path(ns)
            plan = plan_options(ns, meta=meta, body=saved_body, args=args, store=store,
                                script_dir=saved_path.parent)
            if store is not None:
                ensure_folder(store)
            return plan
    meta, body = script_parts(ns.script, ns.meta)
    args = _args_option(ns.args) if ns.args is not None else None
    store = store_path(ns)
    plan = plan_options(ns, meta=meta, body=body, args=args, store=store,
                        script_dir=os.path.dirname(os.path.abspath(ns.script))
                        if ns.script != "-" else None)
    if store is not None:
        ensure_folder(store)
    return plan


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

    def __init__(self, progress: Progress, resume_hint: Callable[[str], str] | None = None) -> None:
        self.progress = progress
        self.resume_hint = resume_hint  # run id -> the command that resumes it (runs recorded)
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
            if self.run is not None and self.resume_hint is not None:
                sys.stderr.write(self.resume_hint(self.run.id) + "\n")
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
    hint = None
    if plan.store_path is not None:
        store = plan.store_path
        hint = lambda run_id: "Resume it with: " + resume_command(run_id, store,  # noqa: E731 - a named one-liner
                                                                  plan.provider_argv)
    interrupts = Interrupts(progress, hint)
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


def _announce(progress: Progress, plan: Plan) -> Callable[[WorkflowEvent], None]:
    """A listener that puts the run id on stderr when the run starts (runs recorded only):
    ``run id: <id>`` (plus `` (resuming run <id>)``), or only the resumed run's id where the
    progress shows the run id itself."""
    def announce(event: WorkflowEvent) -> None:
        if not isinstance(event, WorkflowStarted):
            return
        resuming = f"resuming run {plan.resume_from}" if plan.resume_from else ""
        if not progress.shows_run_id:
            progress.info(f"run id: {event.run.id}" + (f" ({resuming})" if resuming else ""))
        elif resuming:
            progress.info(resuming)
    return announce


async def _drive(plan: Plan, progress: Progress, event_log: EventLog | None,
                 interrupts: Interrupts, *, as_json: bool) -> Outcome:
    async with contextlib.AsyncExitStack() as stack:
        store: RunStore | None = None
        if plan.store_path is not None:
            try:  # opened before the engine, so it is closed after it
                store = await stack.enter_async_context(SQLiteRunStore(plan.store_path))
            except RunStoreError as exc:
                return Outcome(start_error=str(exc))
        provider = plan.provider()
        if hasattr(provider, "__aenter__"):
            provider = await stack.enter_async_context(provider)  # type: ignore[arg-type]  # it has __aenter__
        engine = await stack.enter_async_context(plan.make_engine(provider, store))
        # Listeners stay subscribed until the engine is gone, so that even a run disposed by
        # the engine's exit reports its WorkflowEnded.
        engine.events.subscribe(progress)
        if store is not None:
            engine.events.subscribe(_announce(progress, plan))
        if event_log is not None:
            engine.events.subscribe(event_log)
        try:
            run = engine.start(WorkflowStartRequest(meta=plan.meta, script=plan.body,
                                                    args=plan.args, resume_from=plan.resume_from))
        except WorkflowError as exc:
            return Outcome(start_error=str(exc))
        interrupts.adopt(run)  # from here on, Ctrl-C cancels the run itself
        # `viewer: URL` when `dsh-workflow ui` serves the store this run is recorded in.
        announce_viewer(getattr(plan, "store_path", None), run.id, progress.note)
        result = await run.result()
        interrupts.settled = True
        progress.finish()
        print_result(result, run.id, as_json=as_json)
        if interrupts.count and result.stop_reason == "cancelled" \
                and interrupts.resume_hint is not None:
            progress.info(interrupts.resume_hint(run.id))
        await run.dispose()
        return Outcome(result=result)
    raise AssertionError("unreachable")  # pragma: no cover


def print_result(result: WorkflowResult, run_id: str, *, as_json: bool) -> None:
    """Write the run's JSON document to stdout and, when it did not complete, an error line.
    The document of a failed run, or any with ``--json``, is the result without its usage:
    ``value``, ``stop_reason``, ``error``, ``error_code``, ``agents_started``, ``run_id``."""
    document: Any = result.value
    if as_json or result.stop_reason != "completed":
        document = {"value": result.value, "stop_reason": result.stop_reason,
                    "error": result.error, "error_code": result.error_code,
                    "agents_started": result.agents_started, "run_id": run_id}
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
    return run_plan(plan_run(ns), ns)


def run_plan(plan: Plan, ns: argparse.Namespace) -> int:
    """Run ``plan`` with the output options of ``ns`` (``--events``, ``--quiet``, ``--json``);
    returns the exit code."""
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
    meta, body = script_parts(ns.script, ns.meta)
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
        handler: Callable[[argparse.Namespace], int] = ns.handler
        return handler(ns)
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
