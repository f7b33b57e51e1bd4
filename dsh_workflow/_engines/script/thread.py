"""The in-process script runtime (:class:`ThreadRuntime`): one QuickJS context, owned by one
thread for its whole life.

The thread creates the context, loads the prelude (:mod:`.prelude`), runs the body, drains
promise jobs, ships the outbox to the host and applies the host's settlements, until the script
returns, throws, stalls, exceeds a limit or is told to stop. It never calls into Python from
JavaScript (a time limit forbids it): everything crosses as JSON text through the outbox and the
settle batches, and only ids and JSON cross the boundary.

Limits, enforced here for every stretch of script code wherever it occurs:

* ``memory_limit_bytes`` and ``stack_limit_bytes`` on the context;
* ``slice_cpu_limit_s`` twice: as QuickJS's own per-call interrupt (a synchronous loop), and as a
  budget of thread CPU time over a whole drain of promise jobs (``while (true) await null``
  creates a fresh job each turn, each under the per-call limit).

Verdicts come from what this thread and the runtime measured, never from the text of what the
script threw (a script can construct an ``InternalError('interrupted')`` or throw ``null``):

* a CPU-slice overrun needs the process CPU time of the stretch to have reached
  ``slice_cpu_limit_s`` (QuickJS's interrupt measures the same clock from a later start), or
  the drain's thread-CPU budget to have run out;
* out of memory and stack overflow are reported by the runtime only for errors the engine made
  itself (``limitKind`` in ``runtime_js/boundary.js``);
* a bare ``null`` (QuickJS's out-of-memory that could not even allocate its error) counts as
  out of memory only with evidence: the runtime's heap probe failed when the body threw it
  (``heapProbe`` in hooks.js, run while the body's variables still hold their memory), or the
  heap is within :func:`.prelude.heap_evidence_bytes` of ``memory_limit_bytes`` when this
  thread reads the end record. Memory that the failing code's own frames held is released
  before either looks, so such an out-of-memory reads as the script's own ``throw null`` (the
  error text says both are possible).
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, cast

import quickjs

from ..._script import RUN_FOOTER, run_header
from . import prelude
from .limits import (
    LimitExceeded,
    RuntimeLimits,
    engine_failure,
    js_limit,
    limit_error,
    not_started,
    stalled,
    translate_end,
)
from .wire import SPENT_TAG, LimitKind, ReportKind, ScriptOutcome, SettleEntry

__all__ = ["STOP", "ThreadRuntime"]

#: Put on a runtime's inbox to make its thread stop at the next opportunity.
STOP = object()
_BEGIN = object()


class _Context:
    """A prepared QuickJS context: the prelude loaded and its host API taken; the body comes
    later."""

    def __init__(self, limits: RuntimeLimits) -> None:
        self.limits = limits
        ctx = quickjs.Context()
        ctx.set_memory_limit(limits.memory_limit_bytes)
        ctx.set_max_stack_size(limits.stack_limit_bytes)
        ctx.eval("globalThis.__dsh_rt = " + prelude.source() + "(" + prelude.js_config(limits)
                 + ");")
        self._args = ctx.eval("__dsh_rt.args")
        self._budget = ctx.eval("__dsh_rt.budget")
        self._numbers = ctx.eval("__dsh_rt.numbers")
        self._start = ctx.eval("__dsh_rt.start")
        self._take = ctx.eval("__dsh_rt.take")
        self._settle = ctx.eval("__dsh_rt.settle")
        self._result = ctx.eval("__dsh_rt.result")
        self._pending = ctx.eval("__dsh_rt.pending")
        self._probe = ctx.eval("__dsh_rt.probe")
        ctx.eval("delete globalThis.__dsh_rt")
        self._body: Any = None
        self.ctx = ctx

    def load(self, body: str, args_text: str | None, budget_tokens: int | None = None,
             numbers_text: str | None = None, budget_usd: float | None = None) -> None:
        """Install ``args``, ``budget`` and (for a run with a store) the replayable clock and
        randomness, and compile the body (checked beforehand: nothing of it runs)."""
        if args_text is not None:
            self._args(args_text)
        if budget_tokens is not None or budget_usd is not None:
            self._budget(budget_tokens, budget_usd)
        if numbers_text is not None:
            self._numbers(numbers_text)
        self.ctx.set_time_limit(self.limits.slice_cpu_limit_s)
        factory = self.ctx.eval("\n" * prelude.body_line_offset() + run_header(body) + body
                                + RUN_FOOTER)
        self._body = factory(self._probe)

    def start(self) -> None:
        self._start(self._body)

    def take(self) -> str | None:
        """The outbox batch, or None when there is none."""
        return self._text(self._take())

    def _text(self, text: object) -> str | None:
        # The runtime answers '' for "nothing"; None means the binding could not allocate the
        # string's copy inside the full heap (the text is lost): that is the memory limit.
        if text is None:
            raise limit_error(LimitKind.MEMORY, self.limits)
        return cast("str", text) or None

    def settle(self, batch_text: str) -> None:
        self._settle(batch_text)

    def result(self) -> str | None:
        """The end record, or None while the body has not settled."""
        return self._text(self._result())

    def pending(self) -> int:
        return int(self._pending())

    def drain(self, cpu_deadline: float) -> None:
        """Run queued promise jobs until none is left or the stretch's CPU budget is spent."""
        execute = self.ctx.execute_pending_job
        clock = time.thread_time
        while execute():
            # After every job: one job can itself run a whole slice (a job's interrupt can
            # surface as a rejection the script catches), so the budget is checked each time.
            if clock() > cpu_deadline:
                raise limit_error(LimitKind.SLICE, self.limits)

    def near_memory_limit(self) -> bool:
        """True when the heap is nearly full: a CPU overrun then comes from the garbage collector
        thrashing at the memory limit, and the memory limit is the one to report; a bare
        ``null`` seen now is the engine's out-of-memory, not the script's own throw."""
        try:
            allocated = int(self.ctx.memory()["malloc_size"])
        except Exception:  # noqa: BLE001 - no evidence
            return False
        limit = self.limits.memory_limit_bytes
        return allocated >= limit - prelude.heap_evidence_bytes(limit)

    def close(self) -> None:
        # Handles keep the context alive; drop them all here, on the owning thread.
        self._args = self._budget = self._numbers = None
        self._start = self._take = self._settle = None
        self._result = self._pending = self._body = self._probe = None
        self.ctx = None


class _Assignment:
    """What a run hands its runtime thread: the body, args and where to report."""

    def __init__(self, body: str, args_text: str | None, report: Callable[[str, Any], None],
                 exited: Callable[[], None] | None, budget_tokens: int | None = None,
                 numbers: Callable[[], str] | None = None,
                 budget_usd: float | None = None) -> None:
        self.body = body
        self.args_text = args_text
        self.budget_tokens = budget_tokens
        self.budget_usd = budget_usd
        self.numbers = numbers
        self.report = report
        self.exited = exited


class ThreadRuntime:
    """One script runtime on a dedicated thread, serving exactly one run.

    The thread starts at once and prepares its context (prelude loaded) while it waits to be
    assigned a run, so a pool of these makes starting a run cheap. :meth:`assign` gives it the
    body, args and the ``report`` callback; :meth:`start` runs the body.

    ``report(kind, payload)`` is called on the runtime thread with ``("outbox", json_text)`` for
    each batch of hook calls, in order, and exactly once with ``("end", outcome)`` as the last
    report; the thread then frees the context and exits (:meth:`is_alive` turns false).
    ``outcome`` is ``None`` when the thread was stopped, else a :data:`~.wire.ScriptOutcome` (its
    failures made by :mod:`.limits`). A thread stopped before it was assigned reports nothing.

    ``exited()``, when given to :meth:`assign`, is called on the runtime thread as its last
    act, once the context is freed; the thread then only returns.

    ``on_wait()``, when given, is called on the runtime thread each time the script has finished
    a stretch and the thread is about to wait for settlements (the sandbox child uses it to tell
    its parent that the script is idle).

    Settlements are :data:`~.wire.SettleEntry` lists put with :meth:`settle`; :meth:`stop`
    ends the thread at the next point where it waits or finishes a stretch (a stretch is
    never interrupted from outside; it ends within ``slice_cpu_limit_s``).
    """

    def __init__(self, limits: RuntimeLimits, *, name: str,
                 on_wait: Callable[[], None] | None = None, prepare_ahead: bool = False) -> None:
        self._limits = limits
        self._prepare_ahead = prepare_ahead
        self._on_wait = on_wait
        self._assignment: _Assignment | None = None
        self._inbox: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._lock = threading.Lock()  # guards _assignment against a failing launch
        self._starting = False
        self._failed: BaseException | None = None
        self._stretch_cpu = 0.0  # process CPU time when the current stretch began

    def launch(self, via: Callable[[Callable[[], None]], None] | None = None) -> None:
        """Start the thread; it prepares its context and waits for :meth:`start`.

        ``threading.Thread.start()`` blocks until the new thread has bootstrapped; ``via``
        (for example :meth:`ThreadLauncher.submit`) runs it elsewhere so the caller does not
        wait, and the thread counts as alive from now on. If the thread cannot be started,
        its run (once assigned) gets an end report saying so, then its ``exited()`` signal.
        """
        self._starting = True
        if via is None:
            self._begin()
        else:
            via(self._begin)

    def _begin(self) -> None:
        try:
            self._thread.start()
        except Exception as exc:  # noqa: BLE001 - e.g. "can't start new thread"
            with self._lock:
                self._failed = exc
                assignment = self._assignment
            if assignment is not None:
                self._report_not_started(assignment, exc)
        finally:
            self._starting = False

    @property
    def failed(self) -> bool:
        """True when the thread could not be started."""
        return self._failed is not None

    def assign(self, body: str, args_text: str | None, report: Callable[[str, Any], None],
               *, name: str, exited: Callable[[], None] | None = None,
               budget_tokens: int | None = None,
               numbers: Callable[[], str] | None = None,
               budget_usd: float | None = None) -> None:
        """Give the thread its run. ``numbers``, called on the runtime thread when the run
        starts, gives JSON ``{"clock": [...], "random": [...]}`` that makes ``Date`` and
        ``Math.random`` replayable and journaled (runs with a store)."""
        assignment = _Assignment(body, args_text, report, exited, budget_tokens, numbers,
                                 budget_usd)
        with self._lock:
            self._assignment = assignment
            failed = self._failed
        self._thread.name = name
        if failed is not None:
            self._report_not_started(assignment, failed)

    @staticmethod
    def _report_not_started(assignment: _Assignment, exc: BaseException) -> None:
        assignment.report(ReportKind.END, not_started(exc))
        if assignment.exited is not None:
            assignment.exited()

    def start(self) -> None:
        self._inbox.put(_BEGIN)

    def settle(self, entry: SettleEntry) -> None:
        self._inbox.put(entry)

    def stop(self) -> None:
        self._stopped.set()
        self._inbox.put(STOP)

    def is_alive(self) -> bool:
        return self._starting or self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _main(self) -> None:
        outcome: ScriptOutcome | None = None
        runtime: _Context | None = None
        if self._prepare_ahead:
            # Preparing a context holds the GIL for most of a millisecond, and the thread that
            # launched this one (the event loop) is waiting to take the GIL back: a thread
            # prepared ahead of need steps aside briefly so the loop goes on at once.
            time.sleep(0.001)
        try:
            try:
                runtime = _Context(self._limits)
            except Exception as exc:  # noqa: BLE001 - reported once the run begins
                failure: BaseException | None = exc
            else:
                failure = None
            if self._inbox.get() is not _BEGIN or self._stopped.is_set():
                return
            try:
                if failure is not None:
                    raise failure
                assert runtime is not None and self._assignment is not None
                self._stretch_cpu = time.process_time()
                numbers = self._assignment.numbers
                runtime.load(self._assignment.body, self._assignment.args_text,
                             self._assignment.budget_tokens,
                             numbers() if numbers is not None else None,
                             self._assignment.budget_usd)
                self._assignment.body = ""
                outcome = self._drive(runtime)
            except (LimitExceeded, quickjs.JSException) as exc:
                limit = exc if isinstance(exc, LimitExceeded) else js_limit(
                    exc, self._limits, sliced=self._slice_spent())
                if limit is None:
                    outcome = engine_failure(str(exc).split("\n", 1)[0].strip())
                else:
                    if limit.kind is LimitKind.SLICE and runtime is not None \
                            and runtime.near_memory_limit():
                        limit = limit_error(LimitKind.MEMORY, self._limits)
                    outcome = limit.as_outcome()
            except Exception as exc:  # noqa: BLE001 - the thread must always report an end
                outcome = engine_failure(f"{type(exc).__name__}: {exc}")
        finally:
            # The result goes out first (freeing a context takes a while); the thread stays
            # alive until the context is freed, which is what dispose() waits for.
            try:
                if self._assignment is not None:
                    self._assignment.report(ReportKind.END, None if self._stopped.is_set() else outcome)
                    time.sleep(0.0005)  # let the loop take the GIL for the result
                if runtime is not None:
                    runtime.close()
                del runtime
            finally:
                if self._assignment is not None and self._assignment.exited is not None:
                    self._assignment.exited()

    def _drive(self, runtime: _Context) -> ScriptOutcome | None:
        budget = self._limits.slice_cpu_limit_s
        assignment = self._assignment
        assert assignment is not None
        if self._stopped.is_set():
            return None
        deadline = time.thread_time() + budget
        self._stretch_cpu = time.process_time()
        runtime.start()
        while True:
            runtime.drain(deadline)
            out = runtime.take()
            if out is not None:
                assignment.report(ReportKind.OUTBOX, out)
            final = runtime.result()
            if final is not None:
                return self._decode_final(final, runtime)
            if runtime.pending() == 0:
                return stalled()
            if self._stopped.is_set():
                return None
            if self._on_wait is not None:
                self._on_wait()
            item = self._inbox.get()
            batch: list[SettleEntry] = []
            spent_at = -1  # where the batch's ["spent", tokens] entry is, if it has one
            while True:
                if item is STOP:
                    return None
                entry = cast("SettleEntry", item)
                if entry[0] == SPENT_TAG:
                    # A running total, and no script code runs while a batch is settled: only
                    # the batch's last total can ever be seen, so it replaces the earlier one.
                    if spent_at >= 0:
                        batch[spent_at] = entry
                    else:
                        spent_at = len(batch)
                        batch.append(entry)
                else:
                    batch.append(entry)
                try:
                    item = self._inbox.get_nowait()
                except queue.Empty:
                    break
            deadline = time.thread_time() + budget
            self._stretch_cpu = time.process_time()
            runtime.settle(json.dumps(batch, ensure_ascii=True, allow_nan=False))

    def _slice_spent(self) -> bool:
        """True when the current stretch has used its whole CPU slice (process CPU time, the
        clock QuickJS's interrupt measures, from a start no later than any call's)."""
        limit = self._limits.slice_cpu_limit_s
        return time.process_time() - self._stretch_cpu >= 0.999 * limit

    def _decode_final(self, text: str, runtime: _Context) -> ScriptOutcome:
        """The run's outcome from the runtime's end record, with limit verdicts confirmed by
        what this thread measured (the translation itself: ``limits.translate_end``)."""
        return translate_end(text, self._limits, sliced=self._slice_spent,
                             near_memory=runtime.near_memory_limit)
