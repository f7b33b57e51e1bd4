"""Recorded runs as the command line reads them: the store opened for one command's reading,
and a run found by its id or a prefix of it.

Contract (docs/durable-runs.md, command line):

- :func:`read_store` runs a reader on the command's store (:func:`.stores.store_path`) under
  trio and never creates the file: a missing file gives the reader's ``missing`` value. A
  store that cannot be read is a :class:`CliError` (exit 2) naming what is wrong.
- A RUN_ID may be given by any prefix of at least :data:`MIN_PREFIX` characters that only one
  run's id starts with (:func:`find_run`); no such run, or an ambiguous prefix (the matching
  runs listed), is a :class:`CliError`.

Every command that reads a recorded run (``show``, ``logs``, ``resume``, ``save``, ``cancel``,
``replay-check``) reads it here.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import CliError
from .stores import store_path

if TYPE_CHECKING:  # loaded where used: declaring the commands must stay cheap (start-up time)
    from dsh_workflow import RunRecord, RunStore, SQLiteRunStore

__all__ = ["MIN_PREFIX", "find_run", "read_store", "run_record", "stored_meta", "unknown_run"]

#: The fewest characters of a run id that name a run (when no other id starts with them).
MIN_PREFIX = 4

T = TypeVar("T")


def read_store(ns: argparse.Namespace, reader: Callable[[SQLiteRunStore], Awaitable[T]],
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


def unknown_run(ns: argparse.Namespace, run_id: str) -> CliError:
    """The usage error of a run id the command's store does not hold."""
    return CliError(f"no run {run_id!r} in the run store {store_path(ns)}")


async def find_run(store: RunStore, run_id: str, *, where: str) -> RunRecord:
    """The run ``run_id`` names: its whole id, else the one run whose id starts with it (at
    least :data:`MIN_PREFIX` characters, any case). Raises :class:`CliError` (exit 2) for no
    such run and for an ambiguous prefix, listing the runs it matches; ``where`` names the
    store in the message."""
    found = await store.get_run(run_id)
    if found is not None:
        return found
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


async def run_record(store: RunStore, ns: argparse.Namespace, run_id: str) -> RunRecord:
    """:func:`find_run` in the command's store, the store named in its messages."""
    return await find_run(store, run_id, where=str(store_path(ns)))


def stored_meta(found: RunRecord) -> dict[str, Any]:
    """The run's stored meta without its unset (None) fields: what a new run of it gets."""
    return {key: value for key, value in found.meta.items() if value is not None}
