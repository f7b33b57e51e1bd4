"""What crosses the run-store boundary: frozen records, journal entries, stored events, errors."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .._subagent import Usage

__all__ = ["JournalEntry", "JournalKind", "RunRecord", "RunStatus", "RunStoreError", "StoredEvent"]

RunStatus = Literal["running", "completed", "error", "cancelled", "interrupted", "broken",
                    "waiting"]
"""A stored run's status. ``waiting``: the run parked (open questions nobody was there to
answer, or a provider's usage limit); ``resume`` or ``answer`` continues it. ``interrupted``:
the process that owned the run died before it ended.
``broken``: its stored row cannot be read whole (corrupt, or written by something else); only a
listing returns such a record, with :attr:`RunRecord.problem` saying what is wrong, while a read
of that one run raises :class:`RunStoreError`."""

FinalStatus = Literal["completed", "error", "cancelled", "waiting"]
"""The statuses a run's owner may finish it with."""

JournalKind = Literal["agent", "clock", "random", "race"]
"""What a journal entry records: a completed ``agent()`` call, or one replayable value of
``Date.now()`` (``clock``) or ``Math.random()`` (``random``)."""


class RunStoreError(Exception):
    """The run store could not do what was asked: the one exception type every store raises.

    ``path`` is the store's file; ``reason`` says what went wrong in words a user can act on
    (the database is locked, the file is not a database, it is read-only, the disk is full, no
    such run, ...). ``str(error)`` carries both.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"run store {path}: {reason}")
        self.path = path
        self.reason = reason


class RunRecord(BaseModel):
    """One stored run.

    Times are POSIX seconds (``time.time()``). ``result`` is the final ``WorkflowResult``
    dumped as JSON data (None while running or when interrupted). ``owner_pid`` and
    ``owner_host`` name the process that ran it; ``agents`` counts started children,
    ``replayed`` children answered from a journal, ``usage`` the run's token totals,
    ``agents_failed`` children that failed, all as given to ``finish_run`` (zero until then);
    ``agents_cancelled`` children the run's stop cancelled, read from the stored result
    (zero for a result stored before results counted them). ``problem`` is None, except for
    a ``broken`` run: what is wrong with its stored row (its other fields then hold what
    could be read, or their defaults).
    """

    model_config = ConfigDict(frozen=True)

    id: str = Field(min_length=1)
    meta: dict[str, Any]
    script: str
    args: Any = None
    created_at: float
    ended_at: float | None = None
    status: RunStatus = "running"
    result: dict[str, Any] | None = None
    resumed_from: str | None = None
    owner_pid: int | None = None
    owner_host: str | None = None
    agents: int = Field(0, ge=0)
    replayed: int = Field(0, ge=0)
    usage: Usage = Field(default_factory=Usage)
    problem: str | None = None
    agents_failed: int = Field(0, ge=0)
    agents_cancelled: int = Field(0, ge=0)


class JournalEntry(BaseModel):
    """One journaled value of a run.

    ``kind="agent"``: a child that ended ``completed``; ``seq`` is its call's seq (1-based,
    the run's call order), ``key`` the call's content key, and ``text`` / ``structured`` /
    ``usage`` its result. ``kind="clock"`` / ``"random"``: the ``seq``-th value (1-based) the
    script got from ``Date.now()`` / ``Math.random()``, held in ``number``; ``key`` is unused.
    ``kind="race"``: the winner (its index, in ``number``) of the script's ``seq``-th
    ``first()`` call.
    ``(run_id, kind, seq)`` is unique.
    """

    model_config = ConfigDict(frozen=True)

    run_id: str = Field(min_length=1)
    seq: int = Field(ge=1)
    kind: JournalKind = "agent"
    key: str = ""
    text: str | None = None
    structured: Any = None
    usage: Usage | None = None
    number: float | None = None

    @model_validator(mode="after")
    def _shape_matches_kind(self) -> JournalEntry:
        if self.kind == "agent":
            if not self.key:
                raise ValueError("an agent entry needs its call's key")
            if self.number is not None:
                raise ValueError("an agent entry carries no number")
        elif self.number is None:
            raise ValueError(f"a {self.kind} entry needs its number")
        elif self.text is not None or self.structured is not None or self.usage is not None:
            raise ValueError(f"a {self.kind} entry carries only a number")
        return self


class StoredEvent(BaseModel):
    """One stored event of a run: ``seq`` is 1-based in append order, ``at`` when it was posted,
    ``data`` the event as the host gave it (JSON data)."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    seq: int
    at: float
    data: dict[str, Any]
