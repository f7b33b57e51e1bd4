"""Running a :class:`~.plan.Plan` under trio: the engine, its store and provider opened and
closed around one run, SIGINT turned into a cancel, the result printed and the exit code
returned.

- Progress goes to stderr only; stdout receives exactly one JSON document (see
  :func:`.output.print_result`).
- Durable runs: a run recorded in a store puts its run id on stderr at start in every progress
  mode (the plain ``[start] name (run <id>)`` line, else a ``run id: <id>`` line, ``--quiet``
  too); a run stopped by Ctrl-C ends with ``Resume it with: dsh-workflow resume <id>``, one
  stopped by ``BUDGET_EXCEEDED`` with ``Raise the budget and resume with: dsh-workflow resume
  <id> --budget N`` (``--budget-usd`` when the dollar ceiling stopped it).
- A parked run (``stop_reason == "waiting"``: open questions nobody was there to answer, or
  a provider's usage limit) lists each question with the command that answers it, or says
  when the limit resets, and exits 75 (:data:`~.errors.EXIT_WAITING`).
- The process exits within a second of printing the result, also when the script's thread
  still spins after a timeout or a cancel (:func:`_disposed_promptly`): the run's end is
  recorded first, then the process ends without waiting for that thread.
- Ctrl-C (SIGINT) cancels the run: its children are cancelled (command children killed,
  worktrees removed), every event stays paired, the cancelled result is printed, a recorded
  run says how to resume it, and the exit code is 130. SIGTERM and SIGHUP are handled the
  same way (a service manager stopping the process, a closed terminal). A second signal while
  the run winds down exits 130 at once, once every command child still running is SIGKILLed
  and its worktree removed (``_providers/reaper.py``, ``worktree.remove_all_now``; a runner
  killed outright has its children killed by the same watcher). The process's earlier
  handling of these signals is restored once the run is over.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import shlex
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

import anyio
import anyio.abc

from dsh_workflow import (
    RunStore,
    RunStoreError,
    SQLiteRunStore,
    WorkflowError,
    WorkflowErrorCode,
    WorkflowEvent,
    WorkflowResult,
    WorkflowRun,
    WorkflowStarted,
    WorkflowStartRequest,
)

from .._providers import reaper, worktree
from .errors import EXIT_CANCELLED, EXIT_ERROR, EXIT_OK, EXIT_WAITING, CliError
from .output import ChildFailures, print_result
from .plan import Plan
from .progress import EventLog, Progress, make_progress
from .stores import resume_command
from .ui import announce_viewer

__all__ = ["INTERRUPT_REASON", "budget_hint", "execute", "run_plan"]

INTERRUPT_REASON = "interrupted (Ctrl-C)"
#: How long the run may take to dispose of itself once its result is printed before the
#: process exits without waiting for its script's thread (SPEC §18: exit within 1 s).
EXIT_GRACE_S = 0.5
#: How long, then, the run's end may take to reach the store.
RECORD_GRACE_S = 0.3
#: The signals that cancel the run, each with the reason the run is cancelled with.
_STOP_SIGNALS: dict[signal.Signals, str] = {signal.SIGINT: INTERRUPT_REASON,
                                            signal.SIGTERM: "terminated (SIGTERM)"}
if hasattr(signal, "SIGHUP"):  # not on Windows
    _STOP_SIGNALS[signal.SIGHUP] = "hung up (SIGHUP)"
_EXIT_FOR = {"completed": EXIT_OK, "error": EXIT_ERROR, "cancelled": EXIT_CANCELLED,
             "waiting": EXIT_WAITING}


@dataclass
class Outcome:
    """How ``run`` ended: a start error or a result."""

    result: WorkflowResult | None = None
    start_error: str | None = None


class Interrupts:
    """Turns SIGINT, SIGTERM and SIGHUP into ``run.cancel()``; a second one exits the process
    at once.

    A signal that arrives before the run exists (while the provider and engine open, which
    never wait on anything slow) cancels the run as soon as :meth:`adopt` hands it over.
    """

    def __init__(self, progress: Progress, resume_hint: Callable[[str], str] | None = None) -> None:
        self.progress = progress
        self.resume_hint = resume_hint  # run id -> the command that resumes it (runs recorded)
        self.count = 0
        self.reason = INTERRUPT_REASON  # the first signal's
        self.run: WorkflowRun | None = None
        self.settled = False  # the run's result is in; only cleanup remains

    async def watch(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.open_signal_receiver(*_STOP_SIGNALS) as signals:
            task_status.started()
            async for signum in signals:
                self.count += 1
                if self.count > 1:
                    self.force_exit()
                self.reason = _STOP_SIGNALS.get(signal.Signals(signum), INTERRUPT_REASON)
                doing = "Finishing" if self.settled else "Cancelling the run"
                again = ("press Ctrl-C again" if signum == signal.SIGINT
                         else f"send {signal.Signals(signum).name} again")
                self.progress.note(f"{doing}… {again} to quit at once.")
                if self.run is not None:
                    self.run.cancel(self.reason)

    def adopt(self, run: WorkflowRun) -> None:
        self.run = run
        if self.count:
            run.cancel(self.reason)

    def force_exit(self) -> NoReturn:
        """Exit at once, but only after every command child still running is killed and its
        worktree removed."""
        reaper.kill_all()
        worktree.remove_all_now()
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
    """Run ``plan`` under SIGINT/SIGTERM/SIGHUP handling; print the result; return the exit
    code."""
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


def budget_hint(run_id: str, plan: Plan, error: str) -> str:
    """``Raise the budget and resume with: dsh-workflow resume <id> --budget N`` (with
    ``--budget-usd`` when the dollar ceiling stopped the run), suggesting twice the budget; the
    resume replays every call the run paid for."""
    config, extra = plan.config, []
    dollars = "budget_usd=" in error and config.budget_usd is not None
    if config.budget_tokens is not None or not dollars:
        tokens = config.budget_tokens
        extra += ["--budget", str(tokens * 2 if tokens is not None else 1_000_000)]
    if dollars and config.budget_usd is not None:
        extra += ["--budget-usd", f"{config.budget_usd * 2:g}"]
    assert plan.store_path is not None
    command = resume_command(run_id, plan.store_path, plan.provider_argv)
    head = shlex.join(["dsh-workflow", "resume", run_id])  # the budget options right after it
    return f"Raise the budget and resume with: {head} {shlex.join(extra)}{command[len(head):]}"


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
        if plan.confirmed_agents is not None:
            from .estimate import ConfirmationGate

            def stop(reason: str) -> None:
                if interrupts.run is not None:
                    interrupts.run.cancel(reason)

            provider = ConfirmationGate(provider, plan.confirmed_agents, stop)
        engine = await stack.enter_async_context(plan.make_engine(provider, store))
        # Listeners stay subscribed until the engine is gone, so that even a run disposed by
        # the engine's exit reports its WorkflowEnded.
        engine.events.subscribe(progress)
        failures = ChildFailures()
        engine.events.subscribe(failures)
        if store is not None:
            engine.events.subscribe(_announce(progress, plan))
        if event_log is not None:
            engine.events.subscribe(event_log)
        try:
            run = engine.start(WorkflowStartRequest(meta=plan.meta, script=plan.body,
                                                    args=plan.args, resume_from=plan.resume_from,
                                                    rerun=plan.rerun))
        except WorkflowError as exc:
            return Outcome(start_error=str(exc))
        interrupts.adopt(run)  # from here on, Ctrl-C cancels the run itself
        # `viewer: URL` when `dsh-workflow ui` serves the store this run is recorded in.
        announce_viewer(getattr(plan, "store_path", None), run.id, progress.note)
        result = await run.result()
        interrupts.settled = True
        progress.finish()
        print_result(result, run.id, as_json=as_json, limit_flags=plan.limit_flags,
                     failures=failures.failures)
        if interrupts.count and result.stop_reason == "cancelled" \
                and interrupts.resume_hint is not None:
            progress.info(interrupts.resume_hint(run.id))
        if result.error_code == WorkflowErrorCode.BUDGET_EXCEEDED and plan.store_path is not None:
            progress.info(budget_hint(run.id, plan, result.error or ""))
        if result.stop_reason == "waiting":
            for line in parked_lines(result, run.id, plan):
                progress.info(line)
        if not await _disposed_promptly(run, plan, store):
            _exit_now(_EXIT_FOR[result.stop_reason], progress, event_log)
        return Outcome(result=result)
    raise AssertionError("unreachable")  # pragma: no cover


def parked_lines(result: WorkflowResult, run_id: str, plan: Plan) -> list[str]:
    """What a parked run prints on stderr: each open question and the command that answers
    it, or when the provider's limit resets and the command that continues the run."""
    from .waiting import limit_lines, question_lines

    if plan.store_path is None:
        return [f"run {run_id} parked ({result.waiting_reason}), but nothing was recorded "
                "(--no-store): run it again with a store to continue it later"]
    if result.waiting_reason == "limit":
        return limit_lines(run_id, result.resume_after,
                           resume_command(run_id, plan.store_path, plan.provider_argv))
    return question_lines(run_id, result.pending, plan.store_path)


async def _disposed_promptly(run: WorkflowRun, plan: Plan, store: RunStore | None) -> bool:
    """Dispose of ``run`` once its result is printed, within :data:`EXIT_GRACE_S`; False when
    its script's thread is still busy then (a QuickJS stretch that spins on after a timeout
    or a cancel ends only at its CPU limit, seconds later). The run's end is in the store by
    the time this returns False (waited for within :data:`RECORD_GRACE_S`)."""
    with anyio.move_on_after(EXIT_GRACE_S) as waited:
        await run.dispose()
    if not waited.cancelled_caught or plan.engine != "quickjs":
        if waited.cancelled_caught:  # a sandbox child is killed by the engine: let it
            await run.dispose()
        return True
    if store is not None:
        with anyio.move_on_after(RECORD_GRACE_S):
            while True:
                record = await store.get_run(run.id)
                if record is None or record.status != "running":
                    break
                await anyio.sleep(0.01)
    return False


def _exit_now(code: int, progress: Progress, event_log: EventLog | None) -> NoReturn:
    """End the process with ``code`` at once, leaving a script thread that still spins behind
    (the operating system ends it with the process): the result is printed and recorded, and
    Python's own exit would wait for that thread."""
    reaper.kill_all()
    progress.abort()
    with contextlib.suppress(Exception):
        if event_log is not None:
            event_log.close()
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def run_plan(plan: Plan, ns: argparse.Namespace) -> int:
    """Run ``plan`` with the output options of ``ns`` (``--events``, ``--quiet``, ``--json``);
    returns the exit code."""
    try:
        event_log = EventLog(ns.events) if ns.events else None
    except OSError as exc:
        raise CliError(f"cannot open --events file {ns.events!r}: {exc.strerror or exc}") from None
    progress = make_progress(sys.stderr, quiet=ns.quiet, budget=plan.config.budget_tokens,
                             budget_usd=plan.config.budget_usd)
    previous = {signum: signal.getsignal(signum) for signum in _STOP_SIGNALS}
    try:
        return anyio.run(functools.partial(execute, plan, progress, event_log, as_json=ns.json),
                         backend="trio")
    finally:
        progress.abort()
        if event_log is not None:
            event_log.close()
        for signum, handler in previous.items():  # the handling the process had before the run
            if handler is not None:
                signal.signal(signum, handler)
