"""The store's schema: its tables, its version and the step-by-step migrations.

Schema version (``PRAGMA user_version``) history:

- **0** — an empty file (nothing created yet).
- **1** — ``runs`` (one row per run), ``events`` (a run's events in append order, several per
  row: the events of one run written by one transaction share a row, which makes an event cost
  a few bytes of JSON instead of a B-tree insert) and ``journal`` (a run's journaled values,
  one row each, unique per ``(run_id, kind, seq)``).
- **2** — the third release's columns, added in one step so that an old file is upgraded once:
  ``runs.agents_failed`` (children whose outcome was not ``completed``), ``runs.cost_usd`` (the
  run's cost in US dollars; NULL while no child's cost is known), ``runs.provider`` (a JSON
  object: the provider options the run was started with, never a secret; NULL when not
  recorded), ``runs.cancel_requested`` (when another process asked the owner to cancel the run;
  NULL when nobody did); ``journal.cost_usd``, ``journal.cache_read_tokens`` and
  ``journal.cache_write_tokens`` (a journaled answer's price and cache usage, NULL when not
  reported); and ``calls``, one row per ``agent()`` call of a run: what it was asked (its
  prompt and options) next to what it answered, its failure, usage and times.
- **3** — ``runs.cancel_origin``: where the cancel request of ``cancel_requested`` came from
  (``viewer``, ``command line``; NULL for none, or a request written before this version).
- **4** — ``journal.kind`` may be ``race`` (the winner of a script's ``first()`` call, so a
  resume picks the same one); SQLite cannot change a CHECK constraint in place, so the table
  is rebuilt with its rows.
- **5** — runs that wait (``ask()``, ``checkpoint()``, a provider's limit): ``runs.status`` may
  be ``waiting`` (a parked run; the CHECK constraint is widened in place, which every row
  already satisfies), and ``questions``, one row per question a run asked: its ``qid`` and
  ``seq``, journal ``key``, the question (JSON), when it was asked, its absolute ``deadline``,
  and once answered the answer (JSON), when and by whom.

The file also carries ``PRAGMA application_id = 0x64736877`` ("dshw"), so a store never writes
into another program's database. To change the schema, append a step to :data:`MIGRATIONS`
(step ``i`` upgrades version ``i`` to ``i + 1``); :func:`migrate` applies the missing steps in
order, all in one transaction, so a file is either fully upgraded or untouched.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from .models import RunStoreError

__all__ = ["APPLICATION_ID", "MIGRATIONS", "SCHEMA_VERSION", "migrate"]

APPLICATION_ID = 0x64736877

_V1 = """
CREATE TABLE runs (
    n             INTEGER PRIMARY KEY,     -- insertion order: breaks ties in listings
    id            TEXT NOT NULL UNIQUE,
    meta          TEXT NOT NULL,           -- JSON object
    script        TEXT NOT NULL,
    args          TEXT,                    -- JSON value; NULL for none
    created_at    REAL NOT NULL,
    ended_at      REAL,
    status        TEXT NOT NULL CHECK (status IN
                      ('running', 'completed', 'error', 'cancelled', 'interrupted')),
    result        TEXT,                    -- JSON object (the WorkflowResult)
    resumed_from  TEXT,
    owner         TEXT,                    -- the owning store's token (its lock file's name)
    owner_pid     INTEGER,
    owner_host    TEXT,
    agents        INTEGER NOT NULL DEFAULT 0,
    replayed      INTEGER NOT NULL DEFAULT 0,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_newest ON runs (created_at DESC, n DESC);
CREATE INDEX runs_running ON runs (owner) WHERE status = 'running';
CREATE TABLE events (
    run_id    TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    first_seq INTEGER NOT NULL,            -- the seq of the row's first event (1-based)
    last_seq  INTEGER NOT NULL,
    data      TEXT NOT NULL,               -- JSON array: [at, event] for first_seq..last_seq
    PRIMARY KEY (run_id, first_seq)
) WITHOUT ROWID;
CREATE TABLE journal (
    run_id        TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    kind          TEXT NOT NULL CHECK (kind IN ('agent', 'clock', 'random')),
    seq           INTEGER NOT NULL,
    key           TEXT NOT NULL,
    text          TEXT,
    structured    TEXT,                    -- JSON value; NULL for none
    number        REAL,
    input_tokens  INTEGER,                 -- NULL: the provider reported no usage
    output_tokens INTEGER,
    PRIMARY KEY (run_id, kind, seq)
) WITHOUT ROWID;
"""

_V2 = """
ALTER TABLE runs ADD COLUMN agents_failed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cost_usd REAL;
ALTER TABLE runs ADD COLUMN provider TEXT;
ALTER TABLE runs ADD COLUMN cancel_requested REAL;
ALTER TABLE journal ADD COLUMN cost_usd REAL;
ALTER TABLE journal ADD COLUMN cache_read_tokens INTEGER;
ALTER TABLE journal ADD COLUMN cache_write_tokens INTEGER;
CREATE TABLE calls (
    run_id      TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,          -- the call's seq (1-based, the run's call order)
    label       TEXT NOT NULL,
    phase       TEXT,
    request     TEXT NOT NULL,             -- JSON object: the prompt and the call's options
    started_at  REAL,                      -- NULL: answered from a journal (replayed)
    ended_at    REAL,
    outcome     TEXT,                      -- NULL while running
    text        TEXT,
    structured  TEXT,                      -- JSON value; NULL for none
    failure     TEXT,                      -- JSON object (an AgentFailure); NULL for none
    usage       TEXT,                      -- JSON object (a Usage); NULL for none
    replayed    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
"""


_V3 = """
ALTER TABLE runs ADD COLUMN cancel_origin TEXT;
"""

_V4 = """
CREATE TABLE journal_v4 (
    run_id             TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    kind               TEXT NOT NULL CHECK (kind IN ('agent', 'clock', 'random', 'race')),
    seq                INTEGER NOT NULL,
    key                TEXT NOT NULL,
    text               TEXT,
    structured         TEXT,               -- JSON value; NULL for none
    number             REAL,
    input_tokens       INTEGER,            -- NULL: the provider reported no usage
    output_tokens      INTEGER,
    cost_usd           REAL,
    cache_read_tokens  INTEGER,
    cache_write_tokens INTEGER,
    PRIMARY KEY (run_id, kind, seq)
) WITHOUT ROWID;
INSERT INTO journal_v4 (run_id, kind, seq, key, text, structured, number, input_tokens,
                        output_tokens, cost_usd, cache_read_tokens, cache_write_tokens)
    SELECT run_id, kind, seq, key, text, structured, number, input_tokens, output_tokens,
           cost_usd, cache_read_tokens, cache_write_tokens FROM journal;
DROP TABLE journal;
ALTER TABLE journal_v4 RENAME TO journal;
"""


_V5 = """
CREATE TABLE questions (
    run_id      TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    qid         TEXT NOT NULL,             -- q1, q2, ... in the run's ask order
    seq         INTEGER NOT NULL,          -- the call's seq (shared with agent() calls)
    key         TEXT NOT NULL,             -- the journal key (_questions.question_key)
    question    TEXT NOT NULL,             -- JSON object: the Question
    asked_at    REAL NOT NULL,
    deadline    REAL,                      -- POSIX seconds; NULL: never times out
    answered_at REAL,                      -- NULL while open
    answer      TEXT,                      -- JSON value
    answered_by TEXT,
    PRIMARY KEY (run_id, qid)
) WITHOUT ROWID;
"""

_OLD_STATUSES = "'running', 'completed', 'error', 'cancelled', 'interrupted')"
_NEW_STATUSES = "'running', 'completed', 'error', 'cancelled', 'interrupted', 'waiting')"


def _execute_script(conn: sqlite3.Connection, script: str) -> None:
    """Run each statement of ``script`` inside the caller's transaction (unlike
    ``executescript``, which commits first)."""
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            conn.execute(statement)
            statement = ""
    if statement.strip():
        raise ValueError(f"incomplete statement in a migration: {statement!r}")


def _create_v1(conn: sqlite3.Connection) -> None:
    _execute_script(conn, _V1)


def _add_v2(conn: sqlite3.Connection) -> None:
    _execute_script(conn, _V2)


def _add_v3(conn: sqlite3.Connection) -> None:
    _execute_script(conn, _V3)


def _add_v4(conn: sqlite3.Connection) -> None:
    _execute_script(conn, _V4)


def _add_v5(conn: sqlite3.Connection) -> None:
    _execute_script(conn, _V5)
    # SQLite cannot alter a CHECK constraint; widening one that every row satisfies may be done
    # by rewriting the table's definition in place (sqlite.org/lang_altertable.html, "making
    # other kinds of table schema changes"), then bumping the schema version so every
    # connection reloads it.
    version = int(conn.execute("PRAGMA schema_version").fetchone()[0])
    conn.execute("PRAGMA writable_schema = ON")
    try:
        conn.execute("UPDATE sqlite_schema SET sql = replace(sql, ?, ?) "
                     "WHERE type = 'table' AND name = 'runs'", (_OLD_STATUSES, _NEW_STATUSES))
        conn.execute(f"PRAGMA schema_version = {version + 1}")
    finally:
        conn.execute("PRAGMA writable_schema = OFF")


Migration = Callable[[sqlite3.Connection], None]

MIGRATIONS: tuple[Migration, ...] = (_create_v1, _add_v2, _add_v3, _add_v4, _add_v5)
"""``MIGRATIONS[i]`` upgrades schema version ``i`` to ``i + 1`` inside an open transaction."""

SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection, path: str,
            steps: Sequence[Migration] = MIGRATIONS) -> int:
    """Bring the file to version ``len(steps)``, one step at a time, in one transaction.

    Returns the version found before. Raises :class:`RunStoreError` when the file belongs to
    another program (other tables, or another ``application_id``) or was written by a newer
    release (a version above ``len(steps)``). Safe against several processes opening the same
    file at once: the version is re-read under the write lock.
    """
    target = len(steps)
    found = _version(conn)
    if found == target:
        _check_owner_app(conn, path)
        return found
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = _version(conn)
        if found > target:
            raise RunStoreError(path, f"schema version {found} is newer than this release "
                                      f"understands ({target}); upgrade dsh-workflow")
        _check_owner_app(conn, path)
        if found == 0:
            tables = conn.execute("SELECT count(*) FROM sqlite_schema "
                                  "WHERE name NOT LIKE 'sqlite_%'").fetchone()[0]
            if tables:
                raise RunStoreError(path, "the file is another program's SQLite database "
                                          "(it holds tables but no run-store schema)")
        for version in range(found, target):
            steps[version](conn)
        conn.execute(f"PRAGMA user_version = {int(target)}")
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return found


def _version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _check_owner_app(conn: sqlite3.Connection, path: str) -> None:
    app = int(conn.execute("PRAGMA application_id").fetchone()[0])
    if app not in (0, APPLICATION_ID):
        raise RunStoreError(path, f"the file belongs to another program (application_id {app:#x})")
