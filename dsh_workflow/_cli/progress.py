"""Progress of one run on stderr, and the ``--events`` log, fed only by the public events.

Every reporter here is an event listener (``engine.events.subscribe(reporter)``) and never
touches the run itself:

- :class:`RichProgress` — a live panel when stderr is a terminal: workflow name, current phase,
  agents running / completed / failed / started (and replayed, for a resumed run), elapsed
  time, the labels of running agents and the last few log lines, redrawn at most
  :data:`REFRESH_S` apart by :meth:`tick`; it stops with its final frame kept and one summary
  line;
- :class:`PlainProgress` — one line per event (``[phase] Scan``, ``[agent 3 started] label``,
  ``[agent 3 completed] label``, ``[agent 3 failed] label — invalid: /number: ...``,
  ``[agent 3 replayed] label``, ``[log] ...``, ``[done] completed in 1.2s, 4 agents, 1
  failed``), for logs and pipes;
- :class:`QuietProgress` — nothing but the ``warning:`` line below.

When children failed, every reporter ends with one ``warning:`` line grouping the failures by
kind and reason, most frequent first (docs/scripts.md, "Truthful outcomes"); the live panel shows the
latest reason while the run goes on.
- :class:`EventLog` — appends every event as one JSON line (``{"event": <class name>, ...}``).

Listeners run on the event-loop thread, so each does a small bounded amount of work per event.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from dsh_workflow import (
    AgentEnded,
    AgentReplayed,
    AgentRetried,
    AgentStarted,
    LogEmitted,
    PhaseStarted,
    WorkflowEnded,
    WorkflowEvent,
    WorkflowStarted,
)
from dsh_workflow._failure import failure_reason, group_failures
from dsh_workflow._prices import cost_text, format_usd
from dsh_workflow._tally import RunTally
from dsh_workflow._text import escape_controls, valid_text

from .output import for_terminal, unescaped

if TYPE_CHECKING:  # rich loads only for the live panel (start-up time of plain runs)
    from rich.console import Console, RenderableType
    from rich.live import Live
    from rich.text import Text

__all__ = ["EventLog", "PlainProgress", "Progress", "QuietProgress", "RichProgress", "make_progress"]

#: Shortest time between two redraws of the live panel.
REFRESH_S = 0.1
#: Log lines kept on the live panel.
LOG_LINES = 5
#: Running agents named on the live panel.
RUNNING_NAMES = 4
#: Failure groups named on the ``warning:`` line (the rest are counted).
WARNING_GROUPS = 5
#: Longest reason on a progress line.
REASON_CHARS = 300
_ALL_KINDS = ("provider", "invalid", "missing", "timeout", "cancelled")


def format_elapsed(seconds: float) -> str:
    """``4.2s`` under a minute, ``3m05s`` above."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest:02d}s"


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def summary_text(reason: str, elapsed: float, agents: int, replayed: int, tokens: str,
                 failed: int = 0, cancelled: int = 0) -> str:
    """The ``[done]`` summary: ``completed in 1.2s, 4 agents, 2 failed, 1 cancelled, 2
    replayed, 1,234 tokens`` (the failed, cancelled and replayed counts only when there are
    some)."""
    lost = (f", {failed} failed" if failed else "") \
        + (f", {cancelled} cancelled" if cancelled else "")
    again = f", {replayed} replayed" if replayed else ""
    return (f"{reason} in {format_elapsed(elapsed)}, {plural(agents, 'agent')}{lost}{again}, "
            f"{tokens}")


def kind_reason(kind: object, reason: str) -> str:
    """``kind: reason``, or the reason alone when it already starts with the kind (a cancelled
    child's ``cancelled from the viewer``), or the kind alone when there is no reason."""
    if not reason:
        return str(kind)
    return reason if reason.startswith(str(kind)) else f"{kind}: {reason}"


def final_mark(ended: WorkflowEnded | None) -> tuple[str, str]:
    """The style and mark of the live panel's final line: a green check only for a run that
    completed with every child completed; a yellow warning mark for one that completed with
    children failed or cancelled (the line gives their counts); a yellow square for a
    cancelled run; a red cross otherwise."""
    reason = ended.stop_reason if ended is not None else ""
    if reason == "completed":
        assert ended is not None
        if ended.agents_failed or ended.agents_cancelled:
            return "yellow", "⚠"
        return "green", "✔"
    if reason == "cancelled":
        return "yellow", "■"
    return "red", "✖"


def ended_reason(event: AgentEnded) -> str | None:
    """``kind: reason`` of a child that did not complete (its first validator message or
    message line, bounded), or None for a completed child or one without a reason."""
    if event.outcome == "completed" or event.error is None:
        return None
    reason = failure_reason(event.error.model_dump(mode="json"), keep_value=True,
                            limit=REASON_CHARS)
    return kind_reason(event.error.kind, reason)


def retried_line(seq: object, delay_s: object, cause: object) -> str:
    """``[agent 4 retrying in 12s] rate limited``: a child whose provider call is retried
    (``AgentRetried``, live or stored)."""
    delay = float(delay_s) if isinstance(delay_s, int | float) else 0.0
    shown = f"{delay:.0f}" if delay >= 10 else f"{delay:.1f}".rstrip("0").rstrip(".")
    return f"[agent {seq} retrying in {shown}s] {str(cause).replace('_', ' ')}"


def ended_line(seq: object, outcome: object, label: object, reason: str | None) -> str:
    """``[agent 3 failed] label — kind: reason`` (no reason: the line without its tail)."""
    line = f"[agent {seq} {outcome}] {label}"
    return line if reason is None else f"{line} — {reason}"


def warning_text(failures: list[dict[str, Any]], started: int) -> str | None:
    """``warning: 3 of 12 agents failed — 2 invalid: /number: does not match ...; 1 timeout:
    ...`` grouped by kind and reason, most frequent first (cancelled children counted apart:
    ``2 of 12 agents failed, 1 cancelled — ...``); None when none failed or was cancelled."""
    if not failures:
        return None
    groups = group_failures(failures, kinds=_ALL_KINDS)
    parts = [f"{count} {kind_reason(kind, reason)}"
             for count, kind, reason in groups[:WARNING_GROUPS]]
    if len(groups) > WARNING_GROUPS:
        rest = sum(count for count, _, _ in groups[WARNING_GROUPS:])
        parts.append(f"{rest} more with other reasons")
    total = max(started, len(failures))
    cancelled = sum(1 for failure in failures if failure.get("kind") == "cancelled")
    failed = len(failures) - cancelled
    if not failed:
        counts = f"{cancelled} of {plural(total, 'agent')} cancelled"
    else:
        counts = f"{failed} of {plural(total, 'agent')} failed" + (
            f", {cancelled} cancelled" if cancelled else "")
    return f"warning: {counts} — " + "; ".join(parts)


class Failures:
    """The failed children a reporter has seen: their reasons (for the ``warning:`` line)
    and the latest one (for the live panel)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.latest: str | None = None

    def record(self, event: WorkflowEvent) -> None:
        if isinstance(event, AgentEnded) and event.outcome != "completed":
            error = event.error
            self.seen.append({"kind": event.outcome if error is None else error.kind,
                              "message": "" if error is None else error.message,
                              "details": [] if error is None else list(error.details)})
            self.latest = ended_line(event.seq, event.outcome, _one_line(event.label),
                                     ended_reason(event))

    def warning(self, ended: WorkflowEnded | None) -> str | None:
        """The ``warning:`` line for the run's end, when its children failed (by its count)."""
        if ended is None or not (ended.agents_failed or ended.agents_cancelled):
            return None
        return warning_text(self.seen, ended.agents_started)


@dataclass(eq=False)
class BudgetedTally(RunTally):
    """The run's counts (:class:`RunTally`), keeping the last log lines, and the token budget
    the panel shows the tokens against."""

    log_lines: int = LOG_LINES
    budget: int | None = None
    budget_usd: float | None = None

    def token_text(self) -> str:
        """``1,234 tokens``, or ``1,234 of 5,000 tokens`` under a budget; followed by the cost
        (``, $0.0123``; ``$0.0123+`` when some children's cost is unknown; ``of $1.00`` under a
        dollar budget) once a child's cost is known or a dollar budget is set; spend of unknown
        cost reads ``unpriced`` (``unpriced of $1.00``), never ``$0.0000``."""
        tokens = (f"{self.tokens:,} tokens" if self.budget is None
                  else f"{self.tokens:,} of {self.budget:,} tokens")
        cost = None if self.cost_usd is None and self.budget_usd is None \
            else cost_text(self.cost_usd, self.unpriced)
        if self.budget_usd is not None:
            cost = f"{cost or format_usd(0.0)} of {format_usd(self.budget_usd)}"
        return tokens if cost is None else f"{tokens}, {cost}"

    def summary(self) -> str:
        """``completed in 1.2s, 4 agents, 1,234 tokens`` (the stop reason, elapsed time, agents
        started, tokens spent), with ``, 3 replayed`` after the agents when calls were replayed."""
        reason = self.ended.stop_reason if self.ended else "ended"
        agents = self.ended.agents_started if self.ended else self.started
        failed = self.ended.agents_failed if self.ended else 0
        cancelled = self.ended.agents_cancelled if self.ended else 0
        return summary_text(reason, self.elapsed(), agents, self.replayed, self.token_text(),
                            failed, cancelled)


class Progress:
    """The reporter interface: a listener plus the hooks the command calls around a run."""

    #: Whether :meth:`tick` must be called regularly (a live display with a clock).
    needs_ticks = False
    #: Whether the display itself shows the run id on stderr (the ``[start]`` line).
    shows_run_id = False

    def __call__(self, event: WorkflowEvent) -> None:
        """Take one event (an ``engine.events`` listener)."""

    def tick(self) -> None:
        """Redraw, if the display has a clock."""

    def note(self, text: str) -> None:
        """Show an out-of-band message (such as "cancelling...")."""

    def info(self, text: str) -> None:
        """Show a line of information that must reach the stream in every mode, quiet too
        (such as the run id)."""

    def finish(self) -> None:
        """Stop the display after the run ended; idempotent."""

    def abort(self) -> None:
        """Stop the display at once, without a summary (the process is about to exit)."""

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Hold the display still while a question is asked on the terminal
        (``_cli/asking.py``): nothing is drawn over the prompt until the block ends."""
        yield


class QuietProgress(Progress):
    """Shows nothing (``--quiet``); notes and information lines still go to the stream."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.failures = Failures()

    def __call__(self, event: WorkflowEvent) -> None:
        self.failures.record(event)
        if isinstance(event, WorkflowEnded):
            warning = self.failures.warning(event)
            if warning is not None:
                _write_line(self.stream, warning)

    def note(self, text: str) -> None:
        _write_line(self.stream, text)

    def info(self, text: str) -> None:
        _write_line(self.stream, text)


class PlainProgress(Progress):
    """One line per event on a stream that is not a terminal."""

    shows_run_id = True

    def __init__(self, stream: IO[str], *, budget: int | None = None) -> None:
        self.stream = stream
        self.tally = BudgetedTally(budget=budget)
        self.failures = Failures()

    def __call__(self, event: WorkflowEvent) -> None:
        self.tally.record(event)
        self.failures.record(event)
        line = self.line(event)
        if line is not None:
            _write_line(self.stream, line)
        if isinstance(event, WorkflowEnded):
            warning = self.failures.warning(event)
            if warning is not None:
                _write_line(self.stream, warning)

    def line(self, event: WorkflowEvent) -> str | None:
        if isinstance(event, WorkflowStarted):
            return f"[start] {event.run.meta.name} (run {event.run.id})"
        if isinstance(event, PhaseStarted):
            return f"[phase] {event.title}"
        if isinstance(event, LogEmitted):
            return "[log] " + event.message.replace("\n", "\n      ")
        if isinstance(event, AgentStarted):
            return f"[agent {event.seq} started] {event.label}"
        if isinstance(event, AgentEnded):
            return ended_line(event.seq, event.outcome, event.label, ended_reason(event))
        if isinstance(event, AgentReplayed):
            return f"[agent {event.seq} replayed] {event.label}"
        if isinstance(event, AgentRetried):
            return retried_line(event.seq, event.delay_s, event.cause)
        if isinstance(event, WorkflowEnded):
            return f"[done] {self.tally.summary()}"
        return None

    def note(self, text: str) -> None:
        _write_line(self.stream, text)

    def info(self, text: str) -> None:
        _write_line(self.stream, text)


class RichProgress(Progress):
    """A live panel on a terminal; see the module docstring."""

    needs_ticks = True

    def __init__(self, console: Console, *, budget: int | None = None) -> None:
        from rich.spinner import Spinner

        self.console = console
        self.tally = BudgetedTally(budget=budget)
        self.failures = Failures()
        self.spinner = Spinner("dots", style="cyan")
        self.last_draw = 0.0
        self.live: Live | None = None  # shown from WorkflowStarted to finish()
        self.retrying: str | None = None  # the latest retry line
        self.stopped = False
        self.held = False  # paused while a question is on the terminal

    def __call__(self, event: WorkflowEvent) -> None:
        event = for_terminal(event)  # the panel draws on the real stream: escape what it shows
        self.tally.record(event)
        self.failures.record(event)
        if isinstance(event, AgentRetried):
            self.retrying = retried_line(event.seq, event.delay_s, event.cause)
        if isinstance(event, WorkflowStarted) and self.live is None and not self.stopped:
            from rich.live import Live

            self.live = Live(self, console=self.console, auto_refresh=False, transient=False,
                             redirect_stdout=False, redirect_stderr=True)
            self.live.start()
        if isinstance(event, WorkflowEnded):
            self.finish()
        elif time.monotonic() - self.last_draw >= REFRESH_S:
            self.tick()

    def tick(self) -> None:
        if self.live is not None and not self.stopped and not self.held:
            self.last_draw = time.monotonic()
            self.live.refresh()

    def note(self, text: str) -> None:
        from rich.text import Text

        # Never broken by rich: a note may be an address to copy (``viewer: URL``).
        self.console.print(Text(escape_controls(text), style="yellow"), soft_wrap=True)
        self.tick()

    def info(self, text: str) -> None:
        from rich.text import Text

        self.console.print(Text(escape_controls(text), style="dim"))
        self.tick()

    def finish(self) -> None:
        from rich.text import Text

        if self.stopped:
            return
        self.stopped = True
        if self.live is None:
            return
        self.live.refresh()
        self.live.stop()
        ended = self.tally.ended
        style, mark = final_mark(ended)
        self.console.print(Text(f"{mark} {self.tally.name} {self.tally.summary()}", style=f"bold {style}"))
        warning = self.failures.warning(self.tally.ended)
        if warning is not None:
            self.console.print(Text(warning, style="yellow"))

    def abort(self) -> None:
        if not self.stopped:
            self.stopped = True
            if self.live is not None:
                self.live.stop()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        # The panel is stopped (left drawn as it was) and started again below the answer.
        live = self.live if not self.stopped and not self.held else None
        self.held = True
        if live is not None:
            live.stop()
        try:
            yield
        finally:
            self.held = False
            if live is not None and not self.stopped:
                live.start()
                self.tick()

    def __rich__(self) -> RenderableType:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        tally = self.tally
        # Lines stop short of the right edge, so the terminal's own "^C" echo cannot wrap one
        # and shift the live region.
        grid = Table.grid(padding=(0, 1))
        grid.width = max(20, self.console.width - 3)
        grid.add_column(style="dim", no_wrap=True, width=7)
        grid.add_column(overflow="ellipsis", no_wrap=True, ratio=1)
        head = Text.assemble((tally.name or "workflow", "bold"), "  ·  phase: ",
                             (tally.phase or "—", "cyan"), "  ·  ",
                             format_elapsed(tally.elapsed()))
        grid.add_row(self.spinner if tally.ended is None else Text("•"), head)
        grid.add_row("agents", self.counts())
        if tally.running:
            names = list(tally.running.values())
            shown = ", ".join(_one_line(n) for n in names[:RUNNING_NAMES])
            extra = f", +{len(names) - RUNNING_NAMES} more" if len(names) > RUNNING_NAMES else ""
            grid.add_row("running", Text(shown + extra))
        if self.failures.latest is not None:
            grid.add_row("failed", Text(self.failures.latest, style="red"))
        if self.retrying is not None:
            grid.add_row("retry", Text(self.retrying, style="yellow"))
        for message in tally.logs:
            grid.add_row("log", Text(_one_line(message)))
        return Group(grid)

    def counts(self) -> Text:
        from rich.text import Text

        tally = self.tally
        text = Text.assemble((f"{len(tally.running)} running", "cyan"), "  ",
                             (f"{tally.outcomes['completed']} completed", "green"), "  ",
                             (f"{tally.outcomes['failed']} failed",
                              "red" if tally.outcomes["failed"] else ""))
        for outcome in ("timeout", "cancelled"):
            if tally.outcomes[outcome]:
                text.append(f"  {tally.outcomes[outcome]} {outcome}", style="yellow")
        text.append(f"  {tally.started} started")
        if tally.replayed:
            text.append(f"  {tally.replayed} replayed", style="blue")
        text.append(f"  ·  {tally.token_text()}", style="magenta")
        return text


class EventLog:
    """Appends every event to a file as one JSON line:
    ``{"event": "AgentStarted", "ts": "2026-12-06T02:30:00.123Z", "run": {"id": ...}, ...}``.

    ``ts`` is when the event was written (ISO 8601, UTC, milliseconds). The run's meta is
    written once, on its ``WorkflowStarted`` line; every other line names the run by id only
    (:func:`dsh_workflow.testing.events_from_records` restores the meta when reading).
    Opened in append mode (UTF-8) at construction, so an unwritable path fails before the run
    starts; each line is flushed as it is written. :meth:`close` is idempotent.
    """

    def __init__(self, path: str) -> None:
        self.file: IO[str] | None = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()

    def __call__(self, event: WorkflowEvent) -> None:
        if self.file is None:
            return
        record: dict[str, Any] = {"event": type(event).__name__, "ts": _utc_now(),
                                  **event.model_dump(mode="json")}
        if not isinstance(event, WorkflowStarted):
            record["run"] = {"id": event.run.id}  # the meta is on the run's first line
        self.file.write(valid_text(json.dumps(record, ensure_ascii=False)) + "\n")
        self.file.flush()

    def close(self) -> None:
        file, self.file = self.file, None
        if file is not None:
            file.close()


def _utc_now() -> str:
    """Now as ISO 8601 in UTC, to the millisecond: ``2026-12-06T02:30:00.123Z``."""
    stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
    return stamp.removesuffix("+00:00") + "Z"


def make_progress(stream: IO[str], *, quiet: bool, budget: int | None = None,
                  budget_usd: float | None = None) -> Progress:
    """The reporter for ``stream``: quiet, a live panel on a terminal, else plain lines.
    ``budget`` (tokens) is shown beside the tokens spent, ``budget_usd`` beside the cost."""
    if quiet:
        return QuietProgress(stream)
    progress: PlainProgress | RichProgress
    if not _may_be_terminal(stream):
        progress = PlainProgress(stream, budget=budget)
    else:
        from rich.console import Console

        console = Console(file=unescaped(stream), stderr=True)
        if console.is_terminal and not console.is_dumb_terminal:
            progress = RichProgress(console, budget=budget)
        else:
            progress = PlainProgress(stream, budget=budget)
    progress.tally.budget_usd = budget_usd
    return progress


def _may_be_terminal(stream: IO[str]) -> bool:
    """Whether rich could treat ``stream`` as a terminal (a tty, or forced by the environment
    variables rich reads); when not, plain lines are chosen without loading rich at all."""
    if os.environ.get("FORCE_COLOR") or os.environ.get("TTY_COMPATIBLE"):
        return True
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):
        return False


def _one_line(text: str) -> str:
    first, _, rest = text.partition("\n")
    return first + (" …" if rest else "")


def _write_line(stream: IO[str], line: str) -> None:
    stream.write(line + "\n")
    stream.flush()
