"""Runs under control from the command line (docs/durable-runs.md, "Runs under control"): ``cancel`` and
``replay-check``.

Contract:

- ``cancel RUN_ID [--timeout SECONDS]`` cancels a run that another process on this machine
  runs in the same store: it marks the run's cancel request in the store, which the owning
  process polls for (it notices within 0.5 s and cancels the run with the reason
  ``cancelled from the command line``), then waits until the run has ended. Exit 0 once it
  ended ``cancelled`` (``cancelled run <id>`` on stdout); 1 when the run was not running (it
  had ended, or its process died: ``interrupted``), when it ended otherwise before the cancel
  reached it, or when it did not end within ``--timeout`` (default 30 s; the request stays);
  2 for an unknown run id or an unreadable store.
- ``replay-check RUN_ID [--script FILE] [--args JSON|@FILE] [--meta ...]`` runs the stored (or
  given) script against the run's journal with no provider at all: every ``agent()`` call must
  be answered from the journal. Exit 0 and ``replays fully (N calls)`` when it is; otherwise
  exit 1 and the first divergence: the call's seq and label, why it has no journal entry (its
  key — prompt, options, provider — differs from every recorded call's; the recorded call with
  that seq and the new one compared: the prompts' first difference, or the options that
  differ, or that the recorded call did not complete), or the script's error. Nothing is
  recorded (the store is only read) and nothing is spent. The provider identity used for the
  keys is the one the run recorded (echo when none is recorded), and so are its model aliases
  unless ``--model-alias`` is given; ``--agents`` and ``--workflows`` find agent definitions
  and saved workflows as ``run`` does.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from .commands import Subcommands
from .errors import EXIT_ERROR, EXIT_OK, CliError
from .options import add_agent_options, load_agents, positive_seconds
from .output import write_stdout
from .plan import args_value, meta_option_value, script_parts
from .records import read_store, run_record, stored_meta
from .resume import recorded_aliases
from .saved import add_library_option, load_library
from .stores import add_store_option

if TYPE_CHECKING:  # loaded where used: declaring the commands must stay cheap (start-up time)
    from dsh_workflow import (
        CallRecord,
        RunRecord,
        SQLiteRunStore,
        SubagentRequest,
        SubagentResult,
    )

__all__ = ["CANCEL_TIMEOUT_S", "command_cancel", "command_replay_check", "first_difference",
           "register"]

#: How long ``cancel`` waits for the run to end by default.
CANCEL_TIMEOUT_S = 30.0
_POLL_S = 0.05


def register(commands: Subcommands) -> None:
    """Add ``cancel`` and ``replay-check`` to the ``dsh-workflow`` subparsers."""
    cancel = commands.add_parser(
        "cancel", help="cancel a run that another process is running",
        description="Cancel a running run recorded in the store (another process runs it): "
                    "its process cancels it within half a second. Exit 0 once it ended "
                    "cancelled, 1 when it was not running.")
    cancel.add_argument("run_id", metavar="RUN_ID")
    cancel.add_argument("--timeout", type=positive_seconds, default=CANCEL_TIMEOUT_S,
                        metavar="SECONDS",
                        help=f"how long to wait for the run to end (default {CANCEL_TIMEOUT_S:g})")
    add_store_option(cancel)
    cancel.set_defaults(handler=command_cancel)

    check = commands.add_parser(
        "replay-check", help="check that a run's script replays fully from its journal",
        description="Run the stored (or given) script against the run's journal with no "
                    "provider: exit 0 when every agent() call is answered from the journal, "
                    "else 1 with the first call that is not and why. Records nothing.")
    check.add_argument("run_id", metavar="RUN_ID")
    check.add_argument("--script", metavar="SCRIPT.js", help="the script to check (default: "
                       "the stored one)")
    check.add_argument("--args", metavar="JSON|@FILE",
                       help="the script's `args` (default: the stored args)")
    check.add_argument("--meta", metavar="JSON|@FILE", help="meta object (default: the script "
                       "file's, else the stored meta)")
    add_agent_options(check)
    add_library_option(check)
    check.add_argument("--model-alias", action="append", default=[], metavar="NAME=MODEL",
                       type=_alias, help="model aliases (repeatable; default: those the run "
                       "was recorded with)")
    add_store_option(check)
    check.set_defaults(handler=command_replay_check)


def _alias(text: str) -> tuple[str, str]:
    name, sep, model = text.partition("=")
    if not sep or not name.strip() or not model.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=MODEL, got {text!r}")
    return name.strip(), model.strip()


# -- cancel ------------------------------------------------------------------------------------


def command_cancel(ns: argparse.Namespace) -> int:
    import anyio

    async def reader(store: SQLiteRunStore) -> tuple[str, str]:
        record = await run_record(store, ns, ns.run_id)
        if record.status != "running":
            return record.id, f"not running: {record.status}"
        if not await store.request_cancel(record.id, origin="command line"):
            again = await store.get_run(record.id)
            return record.id, f"not running: {again.status if again else record.status}"
        with anyio.move_on_after(ns.timeout):
            while True:
                now = await store.get_run(record.id)
                if now is None or now.status != "running":
                    return record.id, now.status if now is not None else "gone"
                await anyio.sleep(_POLL_S)
        return record.id, "timeout"

    found = read_store(ns, reader, None)
    if found is None:
        raise CliError(f"no run {ns.run_id!r} in the run store")
    run_id, how = found
    if how == "cancelled":
        write_stdout(f"cancelled run {run_id}\n")
        return EXIT_OK
    if how.startswith("not running: "):
        status = how.removeprefix("not running: ")
        _say(f"run {run_id} is not running (it is {status}); nothing to cancel")
    elif how == "timeout":
        _say(f"run {run_id} did not end within {ns.timeout:g} s of the cancel request (the "
             "request stays: its process cancels it when it next looks)")
    else:
        _say(f"run {run_id} ended {how} before the cancel reached it")
    return EXIT_ERROR


def _say(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


# -- replay-check ------------------------------------------------------------------------------


class _Divergence(Exception):
    pass


def _not_a_divergence(record: logging.LogRecord) -> bool:
    """A log filter: the engine's warning about the provider raising a divergence is expected
    here (it is how the check stops the run), not news."""
    return not (record.exc_info and isinstance(record.exc_info[1], _Divergence))


class JournalOnlyProvider:
    """A provider that answers nothing: every call that reaches it is a divergence (noted,
    then raised, which ends the run). ``identity`` is the recorded provider's, so the calls'
    keys are those the run journaled."""

    def __init__(self, identity: str) -> None:
        self.identity = identity
        self.live: list[SubagentRequest] = []

    async def run(self, request: SubagentRequest) -> SubagentResult:
        self.live.append(request)
        raise _Divergence(f"agent() call {request.seq} has no journal entry")


class ReadOnlyStore:
    """A run store that reads another and writes nothing: an engine over it replays from the
    other store's journals and records nothing."""

    def __init__(self, store: SQLiteRunStore) -> None:
        self._store = store

    @property
    def path(self) -> str:
        return self._store.path

    is_open = True

    async def open(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    async def create_run(self, run_id: str, *, meta: Any, script: str, args: Any = None,
                         resumed_from: str | None = None,
                         created_at: float | None = None) -> RunRecord:
        from dsh_workflow import RunRecord

        return RunRecord(id=run_id, meta=dict(meta), script=script, args=args,
                         created_at=created_at or 0.0, resumed_from=resumed_from)

    def post_events(self, run_id: str, events: Any) -> None:
        return None

    async def append_events(self, run_id: str, events: Any) -> None:
        return None

    def post_journal(self, entries: Any) -> None:
        return None

    async def commit_journal(self, entries: Any) -> None:
        return None

    async def flush(self) -> None:
        return None

    async def finish_run(self, run_id: str, **kwargs: Any) -> RunRecord:
        from dsh_workflow import RunRecord

        return RunRecord(id=run_id, meta={}, script="", created_at=0.0)

    async def get_run(self, run_id: str) -> RunRecord | None:
        return await self._store.get_run(run_id)

    def get_run_sync(self, run_id: str) -> RunRecord | None:
        return self._store.get_run_sync(run_id)

    async def list_runs(self, **kwargs: Any) -> list[RunRecord]:
        return await self._store.list_runs(**kwargs)

    async def events(self, run_id: str, **kwargs: Any) -> Any:
        return await self._store.events(run_id, **kwargs)

    async def journal(self, run_id: str, **kwargs: Any) -> Any:
        return await self._store.journal(run_id, **kwargs)


def first_difference(old: str, new: str, context: int = 30) -> str:
    """Where two texts first differ, as two indented lines of context around it."""
    at = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b),
              min(len(old), len(new)))
    start = max(0, at - context)

    def excerpt(text: str) -> str:
        piece = text[start:at + context]
        shown = ("…" if start else "") + piece + ("…" if at + context < len(text) else "")
        return repr(shown) if at < len(text) else repr(shown) + " (ends here)"

    return (f"the prompts first differ at character {at + 1}:\n"
            f"  recorded: {excerpt(old)}\n"
            f"  new:      {excerpt(new)}")


_OPTION_NAMES = ("schema", "model", "route", "effort", "agent_type", "agent", "isolation")


def _why(recorded: CallRecord | None, new: SubagentRequest) -> str:
    if recorded is None:
        return "the recorded run made no such call (the new script makes more calls)"
    if recorded.prompt != new.prompt:
        return first_difference(recorded.prompt, new.prompt)
    fresh = {"schema": new.schema, "model": new.model, "route": new.provider,
             "effort": new.effort, "agent_type": new.agent_type,
             "agent": None if new.agent is None else new.agent.model_dump(mode="json"),
             "isolation": new.isolation}
    differ = [name for name in _OPTION_NAMES if recorded.options.get(name) != fresh[name]]
    if differ:
        return "the prompt is the same but these options differ: " + ", ".join(
            f"{name} (recorded {recorded.options.get(name)!r}, new {fresh[name]!r})"
            for name in differ)
    if recorded.outcome != "completed" and not recorded.replayed:
        return (f"the recorded call did not complete (it ended {recorded.outcome or 'unfinished'}"
                "), so the journal holds no answer for it")
    return ("the prompt and options are the same as recorded: the journal's entry for this "
            "key was already taken by an earlier call with the same key")


def command_replay_check(ns: argparse.Namespace) -> int:
    from dsh_workflow import EngineConfig, QuickJSEngine, WorkflowError, WorkflowStartRequest

    agents = load_agents(ns.agents)
    library = load_library(ns.workflows, base_dir=None if ns.script is None
                           else os.path.dirname(os.path.abspath(ns.script)))

    async def reader(store: SQLiteRunStore) -> tuple[Any, JournalOnlyProvider,
                                                     CallRecord | None]:
        record = await run_record(store, ns, ns.run_id)
        meta, body, args = _script_of(ns, record, stored_meta(record))
        recorded = await store.provider(record.id) or {}
        aliases = dict(ns.model_alias or recorded_aliases(recorded))
        identity = recorded.get("identity")
        if not isinstance(identity, str):
            identity = "echo"
        provider = JournalOnlyProvider(identity)
        config = EngineConfig(max_total_agents=100_000, max_concurrent_agents=1,
                              model_aliases=aliases)
        async with QuickJSEngine(config, provider=provider, agents=agents, library=library,
                                 store=ReadOnlyStore(store)) as engine:
            try:
                run = engine.start(WorkflowStartRequest(meta=meta, script=body, args=args,
                                                        resume_from=record.id))
            except WorkflowError as exc:
                raise CliError(str(exc)) from None
            result = await run.result()
            await run.dispose()
        first = min(provider.live, key=lambda r: r.seq) if provider.live else None
        call = None if first is None else await store.call(record.id, first.seq)
        return result, provider, call

    engine_log = logging.getLogger("dsh_workflow.engine")
    engine_log.addFilter(_not_a_divergence)
    try:
        got = read_store(ns, reader, None)
    finally:
        engine_log.removeFilter(_not_a_divergence)
    if got is None:
        raise CliError(f"no run {ns.run_id!r} in the run store")
    result, provider, recorded_call = got
    if provider.live:
        first = min(provider.live, key=lambda r: r.seq)
        write_stdout(f"diverges at agent() call {first.seq} ({first.label}): no journal entry "
                     "for its key\n" + _why(recorded_call, first) + "\n")
        return EXIT_ERROR
    if result.stop_reason != "completed":
        write_stdout(f"does not replay: the script ended {result.stop_reason} after "
                     f"{result.agents_replayed} replayed calls: {result.error}\n")
        return EXIT_ERROR
    calls = result.agents_replayed
    write_stdout(f"replays fully ({calls} call{'s' if calls != 1 else ''})\n")
    return EXIT_OK


def _script_of(ns: argparse.Namespace, record: RunRecord,
               stored_meta: dict[str, Any]) -> tuple[dict[str, Any], str, Any]:
    if ns.script is not None:
        meta, body = script_parts(ns.script, ns.meta, fallback_meta=stored_meta)
    else:
        meta = meta_option_value(ns.meta) if ns.meta is not None else stored_meta
        if not isinstance(meta, dict):
            raise CliError("--meta must be a JSON object like "
                           "{\"name\": ..., \"description\": ...}")
        body = record.script
    args = args_value(ns.args) if ns.args is not None else record.args
    return meta, body, args
