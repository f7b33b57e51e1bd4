"""``resume`` on the recorded provider, and ``--rerun`` (docs/durable-runs.md, "Runs under control").

Contract:

- ``resume`` without ``--provider`` rebuilds the provider the run was recorded with from its
  record (``ProviderInfo.record``) through the command line's one provider table
  (:data:`~dsh_workflow._cli.options.PROVIDER_KINDS`): its kind, and the model and base URL,
  the command, the preset's executable and extra arguments, or the echo latency it had; an
  option given on the command line wins over the recorded one. Without ``--model-alias`` the
  run's recorded model aliases apply. A recorded value whose secrets were taken out is not
  reused: the resume stops (exit 2) naming the option to give again.
- The record is used only when its signature verifies (:mod:`dsh_workflow._store.signing`:
  this user's key, this run, this exact record). An unverified record (an edited row, a store
  from elsewhere, no signature) is shown in a ``warning:`` line and never used: without
  ``--provider`` the resume stops (exit 2) showing the record and naming the options to give;
  with it, the resume runs on the options given alone (no recorded URL, command or alias).
- A routing provider is rebuilt route by route through the same table; a run recorded with a
  provider the command line cannot rebuild (a custom provider, a routing provider with such a
  route) resumes on echo unless ``--provider`` is given, and a ``warning:`` says so.
- When the resume's provider identity differs from the recorded one, a ``warning:`` line on
  stderr names both and says how many completed calls will therefore run live instead of
  replaying (every journal key contains the identity).
- ``--rerun SEQ[,SEQ...]`` names calls (by seq) that run live again; a seq that is not a
  completed call of the run gets a ``warning:`` (it would run live anyway).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh_workflow import RunRecord, SQLiteRunStore

from .errors import EXIT_WAITING, CliError
from .options import BASE_PROVIDERS, PROVIDER_KINDS, engine_config, provider_factory
from .plan import RunOptions, args_value, meta_option_value, plan_resume, script_parts
from .records import read_store, run_record, stored_meta, unknown_run
from .stores import store_path

__all__ = ["command_resume", "recorded_aliases", "resume_provider", "seq_list"]


def seq_list(text: str) -> frozenset[int]:
    """argparse type: ``SEQ[,SEQ...]``, each a whole number >= 1."""
    seqs: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        try:
            seq = int(part)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected seqs of agent() calls like 3 or 2,5 (got {text!r})") from None
        if seq < 1:
            raise argparse.ArgumentTypeError(f"a seq is at least 1 (got {seq})")
        seqs.add(seq)
    return frozenset(seqs)


def _warn(message: str, secrets: Iterable[str] = ()) -> None:
    """A ``warning:`` line with ``secrets`` and the API keys of the environment taken out
    (docs/SECURITY.md: secrets are in no shown text)."""
    from .._failure import redact
    from .._secrets import environment_secrets

    message = redact(message, (*secrets, *environment_secrets()))
    sys.stderr.write(f"warning: {message}\n")
    sys.stderr.flush()


def recorded_aliases(recorded: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The model aliases a run was recorded with, as ``--model-alias`` pairs."""
    aliases = None if recorded is None else recorded.get("model_aliases")
    if not isinstance(aliases, Mapping):
        return []
    return [(name, model) for name, model in aliases.items()
            if isinstance(name, str) and isinstance(model, str)]


def _shown(record: Mapping[str, Any]) -> str:
    """The record as one line of JSON (controls escaped), bounded."""
    text = json.dumps(record, ensure_ascii=True, sort_keys=True, default=str)
    return text if len(text) <= 600 else text[:599] + "…"


def _options_for(kind: object) -> str:
    """The options that choose a provider of ``kind`` (all kinds when unknown)."""
    entry = PROVIDER_KINDS.get(kind) if isinstance(kind, str) else None
    if entry is None:
        return "--provider " + "|".join(BASE_PROVIDERS) + " and its options"
    flags = sorted(set(entry.options.values()))
    return f"--provider {kind}" + (f" (with {', '.join(flags)} as needed)" if flags else "")


def _unverified(ns: argparse.Namespace, recorded: Mapping[str, Any]) -> None:
    """An unverified record: refused without ``--provider``, else shown and ignored."""
    what = (f"run {ns.run_id}'s recorded provider is not signed by this user's key (an edited "
            f"store, a store from elsewhere, or one recorded before records were signed): "
            f"{_shown(recorded)}")
    if ns.provider is None:
        raise CliError(f"{what}; it is not used without explicit provider options: give "
                       f"{_options_for(recorded.get('kind'))}")
    _warn(f"{what}; it is not used: this resume runs on the options given")


def _routes_rebuildable(recorded: Mapping[str, Any]) -> bool:
    routes = recorded.get("routes")
    return isinstance(routes, Mapping) and bool(routes) and all(
        isinstance(route, Mapping) and route.get("kind") in BASE_PROVIDERS
        for route in routes.values())


def _apply(ns: argparse.Namespace, recorded: Mapping[str, Any], live: int) -> None:
    """Fill the provider options ``ns`` lacks from the verified ``recorded`` record."""
    from dsh_workflow._failure import REDACTED

    kind = recorded.get("kind")
    entry = PROVIDER_KINDS.get(kind) if isinstance(kind, str) else None
    if entry is None:
        ns.provider = "echo"
        _warn(f"run {ns.run_id} was recorded with the provider {str(kind)!r}, which the command "
              f"line cannot rebuild: this resume runs on echo ({live} completed "
              f"call{'s' if live != 1 else ''} will run live); give --provider to choose")
        return
    if kind == "routing" and not _routes_rebuildable(recorded):
        ns.provider = "echo"
        _warn(f"run {ns.run_id} was recorded with a routing provider whose routes the command "
              f"line cannot all rebuild: this resume runs on echo ({live} completed "
              f"call{'s' if live != 1 else ''} will run live); give --provider to choose")
        return
    ns.provider = kind
    for attr, value in entry.from_record(recorded).items():
        if value is None or getattr(ns, attr, None) is not None:
            continue
        if isinstance(value, str) and REDACTED in value:
            raise CliError(f"run {ns.run_id}'s recorded {entry.options[attr]} had a secret "
                           f"taken out ({value!r}): give {entry.options[attr]} again")
        setattr(ns, attr, value)


def resume_provider(ns: argparse.Namespace, recorded: Mapping[str, Any] | None,
                    completed: Iterable[int], *, verified: bool = False) -> None:
    """Choose the resume's provider options (see the module docstring) and warn about what
    will not replay. ``completed`` are the seqs of the run's completed (journaled) calls;
    ``verified`` says whether ``recorded`` carried this user's signature for the run."""
    done = set(completed)
    for seq in sorted(ns.rerun - done):
        _warn(f"--rerun {seq}: run {ns.run_id} has no completed call {seq}, so there is no "
              "answer to replay (it runs live anyway)")
    if recorded is not None and not verified:
        _unverified(ns, recorded)
        recorded = None  # nothing of it is used, its identity included
    if not ns.model_alias:
        ns.model_alias = recorded_aliases(recorded)
    if ns.provider is None:
        if recorded is not None:
            _apply(ns, recorded, len(done - ns.rerun))
        else:
            ns.provider = "echo"
    old = None if recorded is None else recorded.get("identity")
    if not isinstance(old, str):
        return
    from .._provider_options import provider_options
    from .._secrets import run_secrets

    factory = provider_factory(ns, engine_config(ns))
    if factory is None:  # pragma: no cover - resume offers only the base providers
        return
    try:
        provider = factory()
        new = provider_options(provider)["identity"]
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if new != old:
        live = len(done - ns.rerun)
        _warn(f"run {ns.run_id} was recorded with the provider {old!r}, but this resume uses "
              f"{new!r}: its {live} completed call{'s' if live != 1 else ''} will run live "
              "instead of replaying (journal keys include the provider)",
              run_secrets(provider))


def command_resume(ns: argparse.Namespace) -> int:
    """``resume RUN_ID`` (and ``answer``'s continuing of a parked run): the run again on its
    recorded provider, replaying its journal (module docstring)."""
    from .execute import run_plan

    async def reader(store: SQLiteRunStore) -> tuple[RunRecord, dict[str, Any] | None, set[int]]:
        record = await run_record(store, ns, ns.run_id)
        # the journal is read here, so one that cannot be read is named before a start
        completed = {entry.seq for entry in await store.journal(record.id)
                     if entry.kind == "agent"}
        return record, await store.provider(record.id), completed

    found = read_store(ns, reader, None)
    if found is None:
        raise unknown_run(ns, ns.run_id)
    record, recorded_provider, completed = found
    if record.status == "running":
        from .._store.liveness import still_running

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
        meta, body = script_parts(ns.script, ns.meta, fallback_meta=stored_meta(record))
    else:
        meta = meta_option_value(ns.meta) if ns.meta is not None else stored_meta(record)
        if not isinstance(meta, dict):
            raise CliError("--meta must be a JSON object like "
                           "{\"name\": ..., \"description\": ...}")
        body = record.script
    args = args_value(ns.args) if ns.args is not None else record.args
    plan = plan_resume(RunOptions.from_namespace(ns), meta=meta, body=body, args=args,
                       resume_from=record.id)
    return run_plan(plan, ns)

