"""Whole results: reading a part of a run's return value after the tool's text was cut.

``workflow_result(run_id, pointer?, offset?, limit?)`` (docs/embedding.md, "Whole results")
reads the stored result of a run (or, for an engine without a store, one of the tool's last
results: :class:`RecentResults`), takes the part a JSON pointer (RFC 6901) names, renders it as
the tool's text renders a value (JSON indented by 2, non-ASCII kept) and returns the characters
``offset`` to ``offset + limit`` of that text: every page is exactly ``limit`` characters but
the last. Nothing here runs a workflow; the reads are bounded by what was stored.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

__all__ = ["PartError", "RecentResults", "ResultPage", "rendered", "resolve_pointer",
           "result_page"]


class PartError(ValueError):
    """A part that cannot be read: an invalid or unmatched pointer, an offset past the end."""


def rendered(value: Any) -> str:
    """``value`` as the tool's text renders it (the same call as ``texts.render_value``)."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def _token(text: str) -> str:
    return text.replace("~1", "/").replace("~0", "~")


def resolve_pointer(value: Any, pointer: str) -> Any:
    """The part of ``value`` the JSON pointer ``pointer`` names (RFC 6901: ``""`` is the whole
    value, ``/a/0`` the first item of ``a``, ``~1`` a ``/`` and ``~0`` a ``~`` in a key).

    Raises :class:`PartError` naming the pointer for one that does not start with ``/``, an
    array index that is not a plain decimal (``0``, ``12``; ``-`` and ``01`` are none) or out
    of range, a key that is missing, or a step into a string, number, boolean or null."""
    if pointer == "":
        return value
    if not pointer.startswith("/"):
        raise PartError(f"pointer {pointer!r} must be empty (the whole value) or start with '/'")
    part = value
    walked = ""
    for raw in pointer[1:].split("/"):
        token = _token(raw)
        walked += "/" + raw
        if isinstance(part, dict):
            if token not in part:
                raise PartError(f"pointer {pointer!r}: {walked!r} names no key of the object")
            part = part[token]
        elif isinstance(part, list):
            if not token.isdecimal() or not token.isascii() or (len(token) > 1
                                                                 and token[0] == "0"):
                raise PartError(f"pointer {pointer!r}: {walked!r} is not an index of the array")
            index = int(token)
            if index >= len(part):
                raise PartError(f"pointer {pointer!r}: {walked!r} is past the end of the array "
                                f"({len(part)} items)")
            part = part[index]
        else:
            raise PartError(f"pointer {pointer!r}: {walked!r} steps into a "
                            f"{_kind(part)}, which has no parts")
    return part


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "string" if isinstance(value, str) else type(value).__name__


@dataclass(frozen=True)
class ResultPage:
    """One page of a part: ``text`` is characters ``offset`` to ``offset + len(text)`` of the
    part's rendered JSON, ``total`` characters long."""

    run_id: str
    pointer: str
    offset: int
    limit: int
    total: int
    text: str

    @property
    def end(self) -> int:
        return self.offset + len(self.text)

    @property
    def next_offset(self) -> int | None:
        """Where the next page starts, or None when this page is the last."""
        return self.end if self.end < self.total else None

    def as_data(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "pointer": self.pointer, "offset": self.offset,
                "limit": self.limit, "total_chars": self.total,
                "next_offset": self.next_offset, "text": self.text}


def result_page(run_id: str, value: Any, *, pointer: str, offset: int, limit: int) -> ResultPage:
    """The page of ``value``'s part at ``pointer`` from ``offset``, at most ``limit``
    characters; raises :class:`PartError` for a bad pointer or an offset past the end (an
    offset equal to the length is an empty last page)."""
    text = rendered(resolve_pointer(value, pointer))
    if offset > len(text):
        raise PartError(f"offset {offset} is past the end of the part ({len(text)} characters)")
    return ResultPage(run_id=run_id, pointer=pointer, offset=offset, limit=limit,
                      total=len(text), text=text[offset:offset + limit])


class RecentResults:
    """The return values of the last completed runs a tool (or an MCP server) answered, for an
    engine without a run store: at most ``max_runs`` runs and ``max_chars`` characters of
    rendered JSON in all, the oldest forgotten first; a value larger than ``max_chars`` alone
    is not kept."""

    def __init__(self, *, max_runs: int = 16, max_chars: int = 4_000_000) -> None:
        self._max_runs = max_runs
        self._max_chars = max_chars
        self._values: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._chars = 0

    def remember(self, run_id: str, value: Any, size: int) -> None:
        """Keep ``value`` (whose rendered JSON is ``size`` characters) as ``run_id``'s."""
        self.forget(run_id)
        if size > self._max_chars:
            return
        self._values[run_id] = (value, size)
        self._chars += size
        while len(self._values) > self._max_runs or self._chars > self._max_chars:
            _, (_, dropped) = self._values.popitem(last=False)
            self._chars -= dropped

    def forget(self, run_id: str) -> None:
        kept = self._values.pop(run_id, None)
        if kept is not None:
            self._chars -= kept[1]

    def get(self, run_id: str) -> tuple[bool, Any]:
        """``(True, value)`` for a remembered run, else ``(False, None)``."""
        kept = self._values.get(run_id)
        return (False, None) if kept is None else (True, kept[0])
