"""The durable-run commands of docs/durable-runs.md: ``runs``, ``show``, ``logs`` and ``resume``.

Contract:

- every command takes ``--store PATH`` (default: see :mod:`.stores`); the reading commands
  never create a store file;
- ``runs [--status S] [--limit N] [--json]`` lists runs newest first: id, name, status, agents,
  replayed, failed, cancelled, tokens, started, duration (``--json``: one JSON array); a run that is
  running or interrupted has no recorded totals yet, so its counts come from its stored
  events, as the viewer counts them;
- ``show RUN_ID --result [--pointer P]`` prints the run's whole return value (or its part at
  the JSON pointer ``P``) as JSON indented by 2, as the tool's text renders it.
- ``show RUN_ID [--json]`` prints meta, status, times, the result (value or error) and a
  per-agent table (seq, label, phase, outcome, tokens, replayed, reason) built from the stored
  events (the reason of each child that did not complete);
  ``--json`` prints the whole record and that table as one JSON document;
- ``logs RUN_ID [--follow]`` prints the stored events, one line each, like the live plain
  progress; ``--follow`` polls for new events every :data:`POLL_S` seconds until the run is no
  longer ``running`` (completed, error, cancelled, or interrupted: its process died), then
  exits 0; an interrupted run's events end with :data:`INTERRUPTED_LINE`;
- ``resume RUN_ID [--script FILE] [--args JSON|@FILE] [--meta JSON|@FILE] [run options]``
  starts a new run that resumes RUN_ID: the stored script, meta and args unless given (a
  ``--script`` file's own ``export const meta`` wins over the stored meta, ``--meta`` over
  both). Progress, output and exit codes are those of ``run``. Without provider options the
  recorded ones apply, and ``--rerun SEQ[,SEQ...]`` runs chosen calls live again (see
  :mod:`.resume`); ``show RUN_ID --agent SEQ`` prints one call (:mod:`.calls`).
- A RUN_ID may be given by any prefix of at least :data:`MIN_PREFIX` characters that only one
  run's id starts with (:func:`find_run`); an ambiguous prefix is exit code 2 with the
  matching runs listed.
- An unknown run id (or a store file that does not exist) is exit code 2 with one
  ``Error: ...`` line; so is a store that cannot be read, a run whose stored row, events or
  journal cannot be read (the line names the run and what is wrong; ``runs`` lists such a
  run as ``broken`` with the reason after the table, and lists the others), and ``resume`` of
  a run that is still running (its process is alive: its calls would run twice).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .commands import Subcommands
from .errors import EXIT_OK, EXIT_WAITING, CliError
from .options import count
from .output import write_stdout
from .plan import add_run_options, args_value, meta_option_value, plan_options, script_parts
from .resume import resume_provider, seq_list
from .stores import add_store_option, store_path

if TYPE_CHECKING:  # loaded where used: declaring the commands must stay cheap (start-up time)
    from dsh_workflow import RunRecord, RunStore, SQLiteRunStore

__all__ = ["MIN_PREFIX", "POLL_S", "find_run", "register"]

#: How often ``logs --follow`` looks for new events.
POLL_S = 0.2
_STATUSES = ("running", "completed", "error", "cancelled", "interrupted", "waiting", "broken")
#: The fewest characters of a run id that name a run (when no other id starts with them).
MIN_PREFIX = 4
#: The last line of ``logs`` for a run whose process died before it ended.
INTERRUPTED_LINE = "[interrupted] the process running it died before the run ended"

T = TypeVar("T")


def register(commands: Subcommands) -> None:
    """Add ``runs``, ``show``, ``logs`` and ``resume`` to the ``dsh-workflow`` subparsers."""
    runs = commands.add_parser("runs", help="list recorded runs, newest first",
                               description="List the runs recorded in the run store.")
    runs.add_argument("--status", choices=_STATUSES, help="only runs with this status")
    runs.add_argument("--limit", type=count, metavar="N", help="at most N runs")
    runs.add_argument("--json", action="store_true", help="print a JSON array")
    add_store_option(runs)
    runs.set_defaults(handler=command_runs)

    show = commands.add_parser("show", help="one run: meta, status, result, agents",
                               description="Show a recorded run and its agent() calls.")
    show.add_argument("run_id", metavar="RUN_ID")
    show.add_argument("--json", action="store_true", help="print one JSON document")
    show.add_argument("--agent", type=count, metavar="SEQ",
                      help="one agent() call: what it was asked and what it answered")
    show.add_argument("--full", action="store_true",
                      help="with --agent: print long texts whole instead of folded")
    show.add_argument("--result", action="store_true",
                      help="print the run's whole return value as JSON (indented by 2)")
    show.add_argument("--pointer", metavar="POINTER",
                      help="with --result: only the part at this JSON pointer, e.g. /findings/3")
    add_store_option(show)
    show.set_defaults(handler=command_show)

    logs = commands.add_parser("logs", help="a run's events, one line each",
                               description="Print the events recorded for a run.")
    logs.add_argument("run_id", metavar="RUN_ID")
    logs.add_argument("--follow", "-f", action="store_true",
                      help="keep printing new events until the run ends")
    add_store_option(logs)
    logs.set_defaults(handler=command_logs)

    resume = commands.add_parser(
        "resume", help="run a recorded run again, replaying its completed agents",
        description="Resume a recorded run: a new run of the stored script (or --script) in "
                    "which every agent() call that completed before with the same prompt and "
                    "options is answered from the journal instead of running again. Without "
                    "provider options it runs on the provider the run was recorded with; a "
                    "warning says when the provider differs (its calls then run live).")
    resume.add_argument("run_id", metavar="RUN_ID")
    resume.add_argument("--script", metavar="SCRIPT.js",
                        help="the fixed script (default: the stored one); its `export const "
                             "meta` wins over the stored meta")
    resume.add_argument("--args", metavar="JSON|@FILE",
                        help="the script's `args` (default: the stored args)")
    resume.add_argument("--meta", metavar="JSON|@FILE", help="meta object (default: the "
                        "script file's, else the stored meta)")
    resume.add_argument("--rerun", type=seq_list, metavar="SEQ[,SEQ...]", default=frozenset(),
                        help="run these agent() calls (by seq, see `show`) live again instead "
                             "of replaying them; calls that depend on their answers follow")
    add_run_options(resume)
    add_store_option(resume)
    # No provider option given: the run's recorded provider options apply (see resume_provider).
    resume.set_defaults(handler=command_resume, provider=None)


# -- store access ----------------------------------------------------------------------------------


def _read(ns: argparse.Namespace, reader: Callable[[SQLiteRunStore], Awaitable[T]],
          missing: T) -> T:
    """Run ``reader`` on the command's store, or return ``missing`` when the file does not
    exist (it is never created here). Store failures are usage errors."""
    import anyio

    from dsh_workflow import RunStoreError, SQLiteRunStore

    path = store_path(ns)
    assert path is not None  # reading commands have no --no-store
    if not os.path.exists(path):
        return missing

    async def read() -> T:
        async with SQLiteRunStore(path) as store:
            return await reader(store)

    try:
        return anyio.run(read, backend="trio")
    except RunStoreError as exc:
        raise CliError(str(exc)) from None


def _unknown(ns: argparse.Namespace, run_id: str) -> CliError:
    return CliError(f"no run {run_id!r} in the run store {store_path(ns)}")


async def find_run(store: RunStore, run_id: str, *, where: str) -> RunRecord:
    """The run ``run_id`` names: its whole id, else the one run whose id starts with it (at
    least :data:`MIN_PREFIX` characters, any case). Raises :class:`CliError` (exit 2) for no
    such run and for an ambiguous prefix, listing the runs it matches; ``where`` names the
    store in the message."""
    record = await store.get_run(run_id)
    if record is not None:
        return record
    prefix = run_id.strip().lower()
    if len(prefix) < MIN_PREFIX:
        short = f" (a run id prefix needs at least {MIN_PREFIX} characters)" if prefix else ""
        raise CliError(f"no run {run_id!r} in the run store {where}{short}")
    matches = [r for r in await store.list_runs() if r.id.lower().startswith(prefix)]
    if not matches:
        raise CliError(f"no run {run_id!r} in the run store {where}")
    if len(matches) > 1:
        listed = "\n".join(f"  {r.id}  {r.meta.get('name', '')}  {r.status}" for r in matches)
        raise CliError(f"the run id prefix {run_id!r} is ambiguous: it matches "
                       f"{len(matches)} runs in {where}; give more characters:\n{listed}")
    return matches[0]


async def _record(store: SQLiteRunStore, ns: argparse.Namespace, run_id: str) -> RunRecord:
    return await find_run(store, run_id, where=str(store_path(ns)))


# -- commands ------------------------------------------------------------------------------------


def command_runs(ns: argparse.Namespace) -> int:
    from dsh_workflow import RunStoreError

    from .history import UNSETTLED, event_counts, run_summary, runs_table, with_counts

    async def reader(store: SQLiteRunStore) -> list[RunRecord]:
        records = []
        for record in await store.list_runs(limit=ns.limit, status=ns.status):
            # Only a run without recorded totals (running, interrupted) is counted from its
            # events; a broken row is listed as it is.
            if record.problem is None and record.status in UNSETTLED:
                try:
                    record = with_counts(record, event_counts(await store.events(record.id)))
                except RunStoreError:  # its events cannot be read: show says why
                    pass
            records.append(record)
        return records

    records: list[RunRecord] = _read(ns, reader, [])
    if ns.json:
        write_stdout(json.dumps([run_summary(r) for r in records], indent=2,
                                ensure_ascii=False) + "\n")
    elif records:
        # A row that cannot be read is listed as broken, and what is wrong follows the table.
        notes = "".join(f"run {r.id} is broken: {r.problem}\n" for r in records if r.problem)
        write_stdout(runs_table(records) + "\n" + ("\n" + notes if notes else ""))
    else:
        write_stdout(f"no runs in {store_path(ns)}\n")
    return EXIT_OK


def command_show(ns: argparse.Namespace) -> int:
    if ns.pointer is not None and not ns.result:
        raise CliError("--pointer needs --result")
    if ns.result:
        return _show_result(ns)
    if ns.agent is not None:
        from .calls import show_call

        return show_call(ns, _read, _record)

    from .history import agent_rows, event_counts, run_document, show_text, with_counts

    async def reader(store: SQLiteRunStore) -> tuple[RunRecord, list[Any], list[Any]]:
        record = await _record(store, ns, ns.run_id)
        events = await store.events(record.id)
        pending = await store.questions(record.id) if record.status in ("waiting", "running") \
            else []
        return (with_counts(record, event_counts(events)),
                agent_rows(events, running=record.status == "running"), pending)

    found = _read(ns, reader, None)
    if found is None:
        raise _unknown(ns, ns.run_id)
    record, rows, pending = found
    if ns.json:
        from .._questions import question_data

        document = run_document(record, rows, [question_data(q) for q in pending])
        write_stdout(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    else:
        write_stdout(show_text(record, rows) + "\n")
    return EXIT_OK


def _show_result(ns: argparse.Namespace) -> int:
    """``show RUN_ID --result [--pointer P]``: the return value (or its part at ``P``) as the
    tool's text renders it, whole; a run without one, or a pointer naming nothing, is a usage
    error saying why."""
    from dsh_workflow._tool.results import PartError, rendered, resolve_pointer

    async def reader(store: SQLiteRunStore) -> RunRecord:
        return await _record(store, ns, ns.run_id)

    record = _read(ns, reader, None)
    if record is None:
        raise _unknown(ns, ns.run_id)
    result = record.result
    if result is None or result.get("stop_reason") != "completed":
        why = record.status if result is None else result.get("stop_reason")
        raise CliError(f"run {record.id} has no return value: it did not complete ({why})")
    try:
        part = resolve_pointer(result.get("value"), ns.pointer or "")
    except PartError as exc:
        raise CliError(f"run {record.id}: {exc}") from None
    write_stdout(rendered(part) + "\n")
    return EXIT_OK


def command_logs(ns: argparse.Namespace) -> int:
    import anyio

    from .history import EventLines

    async def reader(store: SQLiteRunStore) -> bool:
        record = await _record(store, ns, ns.run_id)
        lines = EventLines(record)
        after = 0
        while True:
            # The status is read before the events: once it is no longer running, every event
            # the run posted was committed before it (the store applies writes in order).
            status = (await _record(store, ns, record.id)).status if ns.follow else None
            events = await store.events(record.id, after=after)
            if events:
                write_stdout("".join(lines.line(event) + "\n" for event in events))
                after = events[-1].seq
            if status != "running":
                if (status or record.status) == "interrupted":  # as the viewer says it
                    write_stdout(INTERRUPTED_LINE + "\n")
                return True
            await anyio.sleep(POLL_S)

    if not _read(ns, reader, False):
        raise _unknown(ns, ns.run_id)
    return EXIT_OK


def _stored_meta(record: RunRecord) -> dict[str, Any]:
    return {key: value for key, value in record.meta.items() if value is not None}


def command_resume(ns: argparse.Namespace) -> int:
    from .execute import run_plan

    async def reader(store: SQLiteRunStore) -> tuple[RunRecord, dict[str, Any] | None, set[int]]:
        record = await _record(store, ns, ns.run_id)
        # the journal is read here, so one that cannot be read is named before a start
        completed = {entry.seq for entry in await store.journal(record.id)
                     if entry.kind == "agent"}
        return record, await store.provider(record.id), completed

    found = _read(ns, reader, None)
    if found is None:
        raise _unknown(ns, ns.run_id)
    record, recorded_provider, completed = found
    if record.status == "running":
        from .._engines.host.journal import still_running

        raise CliError(still_running(record))
    if record.status == "waiting":
        from .waiting import limit_due

        due = limit_due(record, store_path(ns))
        if due is not None:  # its provider's limit has not reset: nothing is called
            for line in due:
                sys.stderr.write(line + "\n")
            return EXIT_WAITING
    from .._store.signing import verified

    signed_by_user = False
    if recorded_provider is not None:
        recorded_provider, signed_by_user = verified(record.id, recorded_provider)
    resume_provider(ns, recorded_provider, completed, verified=signed_by_user)
    if ns.script is not None:
        meta, body = script_parts(ns.script, ns.meta, fallback_meta=_stored_meta(record))
    else:
        meta = meta_option_value(ns.meta) if ns.meta is not None else _stored_meta(record)
        if not isinstance(meta, dict):
            raise CliError("--meta must be a JSON object like "
                           "{\"name\": ..., \"description\": ...}")
        body = record.script
    args = args_value(ns.args) if ns.args is not None else record.args
    plan = plan_options(ns, meta=meta, body=body, args=args, store=store_path(ns),
                        resume_from=record.id)
    plan.rerun = ns.rerun
    return run_plan(plan, ns)

