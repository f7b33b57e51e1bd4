"""Values as SQLite holds them: text (or the bytes of a lone-surrogate text), JSON text, and
integers within SQLite's 64-bit range. Used by the store's writes and reads alike."""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

__all__ = ["MAX_INTEGER", "bound", "count", "dumps", "loads", "text", "text_or_none", "untext"]

MAX_INTEGER = 2**63 - 1  # SQLite's INTEGER is 64-bit signed


def bound(value: int) -> int:
    """An integer query parameter within SQLite's range (any ``after`` or ``limit`` a caller
    passes reads as the nearest value SQLite can compare with, instead of raising)."""
    return max(-MAX_INTEGER, min(int(value), MAX_INTEGER))


def count(value: int) -> int:
    """A token count as SQLite can hold it: a provider may report any size, and a count past
    SQLite's range would fail the write (and with it the run's journal); it is clamped."""
    return value if value <= MAX_INTEGER else MAX_INTEGER

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def text(value: str) -> str | bytes:
    """A string as SQLite can hold it. A lone surrogate (which JSON text from a script may
    carry) is not UTF-8, so such a string is kept as its ``surrogatepass`` bytes instead."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass")
    return value


def text_or_none(value: str | None) -> str | bytes | None:
    """:func:`text` of ``value``; None stays None (a column that may be empty)."""
    return None if value is None else text(value)


def untext(value: str | bytes) -> str:
    """The string :func:`text` stored."""
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


def dumps(value: Any) -> str | bytes:
    """JSON text of ``value``. pydantic-core's encoder is several times faster than the stdlib
    one (this is on the hot path: every event and journal entry); the stdlib one takes over for
    what it refuses (lone surrogates) and raises ``TypeError`` for what is not JSON data."""
    try:
        return to_json(value).decode()
    except PydanticSerializationError:
        return text(_encode(value))


def loads(value: str | bytes) -> Any:
    """The JSON value :func:`dumps` stored."""
    return json.loads(untext(value))
