"""``dsh-workflow run`` and ``dsh-workflow check``: the command line of SPEC §7.

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
import math
import os
import shlex
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import anyio
import anyio.abc
from pydantic import ValidationError

from dsh_workflow import (
    AgentRegistry,
    EchoProvider,
    EngineConfig,
    QuickJSEngine,
    SubagentProvider,
    SubprocessEngine,
    WorkflowEngine,
    WorkflowError,
    WorkflowResult,
    WorkflowRun,
    WorkflowStartRequest,
)
from dsh_workflow._meta import parse_meta
from dsh_workflow._script import check_body

from .lint import lint
from .metafile import MetaFileError, split_meta
from .progress import EventLog, Progress, make_progress
from .ui import add_ui_parser, announce_viewer

__all__ = ["EXIT_CANCELLED", "EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_CANCELLED = 130

NO_META = ("no meta: add `export const meta = {name, description}` at the top of the file or "
           "pass --meta")
INTERRUPT_REASON = "interrupted (Ctrl-C)"
_EXIT_FOR = {"completed": EXIT_OK, "error": EXIT_ERROR, "cancelled": EXIT_CANCELLED}


class CliError(Exception):
    """A usage or start error: printed as ``Error: <message>``, exit code 2."""


# -- arguments ---------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"Error: {message}\n")


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    value = _seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return value


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
    run.add_argument("--provider", choices=("echo", "openai", "command"), default="echo",
                     help="who answers agent() calls (default: echo, offline)")
    run.add_argument("--model", help="model name (openai)")
    run.add_argument("--base-url", metavar="URL", help="OpenAI-compatible base URL (openai)")
    run.add_argument("--command", dest="command_line", metavar="ARGV",
                     help='command run per agent, prompt on stdin (command), e.g. "my-agent --json"')
    run.add_argument("--engine", choices=("quickjs", "subprocess"), default="quickjs",
                     help="quickjs: in-process (default); subprocess: the script runs in a "
                     "locked-down child process, for scripts treated as hostile")
    run.add_argument("--max-concurrency", type=_count, metavar="N", help="agents running at once")
    run.add_argument("--max-agents", type=_count, metavar="N", help="agents a run may start")
    run.add_argument("--budget", type=_count, metavar="TOKENS",
                     help="tokens (input + output) the run may spend; past it agent() throws "
                          "BUDGET_EXCEEDED")
    run.add_argument("--timeout", type=_positive_seconds, metavar="SECONDS",
                     help="wall-clock limit of the run")
    run.add_argument("--agent-timeout", type=_positive_seconds, metavar="SECONDS",
                     help="wall-clock limit of one agent (it then returns null)")
    run.add_argument("--echo-latency", type=_seconds, metavar="SECONDS",
                     help="simulated latency of each echo agent (echo)")
    _agent_options(run)
    run.add_argument("--model-alias", action="append", default=[], metavar="NAME=MODEL",
                     type=_alias, help="use MODEL wherever a call or an agent definition names "
                     "NAME (repeatable), e.g. --model-alias sonnet=gpt-4.1")
    run.add_argument("--json", action="store_true", help="print the whole result object")
    run.add_argument("--events", metavar="FILE.jsonl", help="append every event as a JSON line")
    run.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    check = commands.add_parser("check", help="validate meta and script without running it")
    check.add_argument("script", metavar="SCRIPT.js")
    check.add_argument("--meta", metavar="JSON|@FILE", help="meta object; replaces the file's")
    _agent_options(check)
    add_ui_parser(commands, fail=CliError)
    return parser


def _agent_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--agents", action="append", default=[], metavar="DIR",
                        help="a folder of agent definitions (*.md) searched before "
                        ".claude/agents and ~/.claude/agents (repeatable)")


def _alias(text: str) -> tuple[str, str]:
    name, sep, model = text.partition("=")
    if not sep or not name.strip() or not model.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=MODEL, got {text!r}")
    return name.strip(), model.strip()


def load_agents(folders: Sequence[str]) -> AgentRegistry:
    """The registry for a run or a check: ``folders`` first, then the default search path.
    Unusable definition files are skipped with a warning line on stderr each."""
    for folder in folders:
        if not os.path.isdir(folder):
            raise CliError(f"--agents {folder!r} is not a folder")
    registry = AgentRegistry.default(folders)
    for problem in registry.problems:
        sys.stderr.write(f"Warning: skipped agent definition {problem}\n")
    sys.stderr.flush()
    return registry


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

    def make_engine(self, provider: SubagentProvider) -> WorkflowEngine:
        if self.engine == "subprocess":
            return SubprocessEngine(self.config, provider=provider, pool_size=0,
                                    agents=self.agents)
        return QuickJSEngine(self.config, provider=provider, agents=self.agents)


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


def _config(ns: argparse.Namespace) -> EngineConfig:
    chosen = {"max_concurrent_agents": ns.max_concurrency, "max_total_agents": ns.max_agents,
              "run_timeout_s": ns.timeout, "agent_timeout_s": ns.agent_timeout,
              "budget_tokens": ns.budget,
              "model_aliases": dict(ns.model_alias) or None}
    try:
        return EngineConfig(**{key: value for key, value in chosen.items() if value is not None})
    except ValidationError as exc:
        raise CliError("invalid limits: " + "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())) from None


def _provider_factory(ns: argparse.Namespace, config: EngineConfig) -> Callable[[], SubagentProvider]:
    """Check the provider options now; the factory builds the provider inside the run."""
    only = {"--model": ("openai", ns.model), "--base-url": ("openai", ns.base_url),
            "--command": ("command", ns.command_line), "--echo-latency": ("echo", ns.echo_latency)}
    for option, (provider, value) in only.items():
        if value is not None and ns.provider != provider:
            raise CliError(f"{option} applies only to --provider {provider}")
    if ns.provider == "command":
        return _command_factory(ns.command_line)
    if ns.provider == "openai":
        from dsh_workflow import OpenAIProvider

        options = {"model": ns.model, "base_url": ns.base_url,
                   "max_connections": config.max_concurrent_agents}
        try:
            OpenAIProvider(**options)  # type: ignore[arg-type]  # fail on bad settings now
        except ValueError as exc:
            raise CliError(str(exc)) from None
        return lambda: OpenAIProvider(**options)  # type: ignore[arg-type]
    latency = ns.echo_latency or 0.0
    return lambda: EchoProvider(latency_s=latency)


def _command_factory(command_line: str | None) -> Callable[[], SubagentProvider]:
    from dsh_workflow import CommandProvider

    if not command_line:
        raise CliError('--provider command needs --command "program and arguments"')
    try:
        argv = shlex.split(command_line)
        CommandProvider(argv)
    except ValueError as exc:
        raise CliError(f"--command {command_line!r}: {exc}") from None
    return lambda: CommandProvider(argv)


def plan_run(ns: argparse.Namespace) -> Plan:
    """Read and check everything ``run`` needs; raises :class:`CliError`."""
    meta, body = _script_parts(ns.script, ns.meta)
    args = _args_option(ns.args) if ns.args is not None else None
    config = _config(ns)
    return Plan(meta=meta, body=body, args=args, config=config,
                provider=_provider_factory(ns, config), engine=ns.engine,
                agents=load_agents(ns.agents))


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
        # `viewer: URL` when `dsh-workflow ui` serves the store this run is recorded in.
        announce_viewer(getattr(plan, "store_path", None), run.id, progress.note)
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
        if ns.subcommand == "ui":
            return ns.handler(ns)  # type: ignore[no-any-return]
        command = command_check if ns.subcommand == "check" else command_run
        return command(ns)
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
