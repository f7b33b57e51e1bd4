"""What the viewer shows of a stored run: rows of the run list and the parts of a run page.

Pure functions over :class:`~dsh_workflow._store.RunRecord` (no I/O), so the pages and the
live stream describe a run the same way.

Bounded: a value, script or args block is shown as at most :data:`SHOWN_CHARS` characters of
its text (highlighted); a longer one is *folded* (:class:`Shown`), and the page fetches the
rest on request, :data:`CHUNK_CHARS` at a time (:func:`text_chunk`), as plain text. A value's
JSON text is made only as far as it is shown (the encoder stops there), so a page of a 5 MB
result costs about as much as one of a 64 kB result.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import JavascriptLexer, JsonLexer

from .._prices import cost_text
from .._result import code_in_text, stored_code
from .._store import RunRecord
from .._tally import StoredCounts

__all__ = ["CHUNK_CHARS", "HIGHLIGHT_CLASS", "PARTS", "SHOWN_CHARS", "ErrorView", "RunRow",
           "Shown", "error_view", "highlight_css", "highlight_js",
           "highlight_json", "part_text", "run_payload", "run_row", "show_js", "show_json",
           "text_chunk"]

HIGHLIGHT_CLASS = "hl"
_FORMATTER = HtmlFormatter(cssclass=HIGHLIGHT_CLASS, nowrap=False)

#: The most characters of one value's text a page or a stream message carries highlighted.
SHOWN_CHARS = 64_000
#: The most characters one "show more" request returns.
CHUNK_CHARS = 256_000
#: The parts of a run whose whole text can be fetched in chunks (:func:`part_text`).
PARTS = ("value", "result", "args", "script", "meta")


@dataclass(frozen=True)
class RunRow:
    """One line of the run list."""

    id: str
    name: str
    status: str
    agents: int
    replayed: int
    tokens: int
    cost: str  # ``$0.0123`` (``+``: some children's cost is unknown), ``—`` when none is known
    started: str
    duration: str
    problem: str | None = None  # a broken run: what is wrong with its stored row
    failed: int = 0  # children that failed (neither completed nor cancelled)
    cancelled: int = 0  # children the run's stop cancelled


@dataclass(frozen=True)
class ErrorView:
    """A run's error split into its code (None only for a stored result that has none) and its
    text."""

    code: str | None
    message: str


def run_name(record: RunRecord) -> str:
    name = record.meta.get("name")
    return name if isinstance(name, str) and name else "(unnamed)"


def format_time(at: float) -> str:
    """Local wall-clock time of a POSIX timestamp, to the second."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def format_duration(seconds: float) -> str:
    """``850 ms``, ``12.3 s``, ``4 min 05 s``, ``2 h 03 min``."""
    if seconds < 1:
        return f"{max(seconds, 0) * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def unpriced_of(record: RunRecord) -> int:
    """How many of a finished run's children had no known cost (its result's
    ``agents_unpriced``; 0 while it runs)."""
    value = (record.result or {}).get("agents_unpriced")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def run_row(record: RunRecord, *, now: float | None = None,
            so_far: StoredCounts | None = None) -> RunRow:
    """The run-list row of ``record``. A run still going shows its duration so far, and its
    counts so far when ``so_far`` is given (its events counted by
    :func:`~dsh_workflow._tally.count_stored`; else the store's totals)."""
    ended = record.ended_at if record.ended_at is not None else (now or time.time())
    counts = so_far or StoredCounts(agents=record.agents, replayed=record.replayed,
                                    input_tokens=record.usage.input_tokens,
                                    output_tokens=record.usage.output_tokens,
                                    cost_usd=record.usage.cost_usd, unpriced=unpriced_of(record),
                                    failed=record.agents_failed,
                                    cancelled=record.agents_cancelled)
    return RunRow(id=record.id, name=run_name(record), status=record.status,
                  agents=counts.agents, replayed=counts.replayed, tokens=counts.tokens,
                  cost=cost_text(counts.cost_usd, counts.unpriced) or "—",
                  started=format_time(record.created_at),
                  duration=format_duration(ended - record.created_at), problem=record.problem,
                  failed=counts.failed, cancelled=counts.cancelled)


def error_view(record: RunRecord) -> ErrorView | None:
    """The run's error with its code, or None when it has none (yet).

    The code is the result's ``error_code`` (derived from the text for a result stored without
    one; a run stored before ``SCRIPT_ERROR`` existed reads with it); the text's ``CODE:``
    prefix, when it has one, is taken off the message. Every error shows its code, the
    script's own error included (``SCRIPT_ERROR``).
    """
    result = record.result or {}
    error = result.get("error")
    if not isinstance(error, str):
        return None
    code = stored_code(result)
    named = code_in_text(error)
    if named is not None:
        error = error[len(named.value) + 1:].lstrip()
    if len(error) > SHOWN_CHARS:  # bounded like every other block of a page
        error = f"{error[:SHOWN_CHARS]}\n… ({len(error) - SHOWN_CHARS} more characters)"
    return ErrorView(code=None if code is None else code.value, message=error)


@dataclass(frozen=True)
class Shown:
    """A block as a page shows it: highlighted HTML of the first ``shown`` characters of its
    text; ``folded`` when the text goes on (its whole length is what :func:`part_text`
    gives, made only when asked)."""

    html: str
    shown: int
    folded: bool


def _json_encoder() -> json.JSONEncoder:
    return json.JSONEncoder(indent=2, ensure_ascii=False, default=str)


def _json_text(value: Any) -> str:
    return _json_encoder().encode(value)


def _json_prefix(value: Any, limit: int) -> tuple[str, bool]:
    """The first ``limit`` characters of ``value``'s JSON text (as :func:`_json_text` makes
    it), and whether the text goes on — encoding stops soon after ``limit``."""
    pieces: list[str] = []
    size = 0
    for piece in _json_encoder().iterencode(value):
        pieces.append(piece)
        size += len(piece)
        if size > limit:
            return "".join(pieces)[:limit], True
    return "".join(pieces), False


def show_json(value: Any, limit: int = SHOWN_CHARS) -> Shown:
    """``value`` as indented JSON, its first ``limit`` characters highlighted."""
    text, more = _json_prefix(value, limit)
    return _shown_text(text, more, JsonLexer)


def show_js(source: str, limit: int = SHOWN_CHARS) -> Shown:
    """Script ``source``, its first ``limit`` characters highlighted."""
    return _shown_text(source[:limit], len(source) > limit, JavascriptLexer)


def _shown_text(text: str, more: bool, lexer: Any) -> Shown:
    html = str(highlight(text, lexer(ensurenl=not more), _FORMATTER))
    if more and not text.endswith("\n"):
        # the highlighted part ends where the fetched rest goes on: no line break between
        html = html.replace("\n</pre>", "</pre>", 1)
    return Shown(html=html, shown=len(text), folded=more)


def part_text(record: RunRecord, part: str) -> str | None:
    """The whole text of one of :data:`PARTS` of ``record`` (None: the run has no such part
    yet). ``value`` is the result's value, ``result`` the whole result object."""
    if part == "script":
        return record.script
    if part == "args":
        return _json_text(record.args)
    if part == "meta":
        return _json_text(record.meta)
    if record.result is None:
        return None
    if part == "value":
        return _json_text(record.result.get("value"))
    if part == "result":
        return _json_text(record.result)
    raise ValueError(f"unknown part {part!r}")


def text_chunk(text: str, offset: int, size: int = CHUNK_CHARS) -> str:
    """At most ``size`` characters of ``text`` from ``offset`` on."""
    return text[max(offset, 0):max(offset, 0) + size]


def highlight_js(source: str) -> str:
    """``source`` as highlighted HTML (Pygments' JavaScript lexer)."""
    return str(highlight(source, JavascriptLexer(), _FORMATTER))


def highlight_json(value: Any) -> str:
    """``value`` as indented, highlighted JSON HTML."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return str(highlight(text, JsonLexer(), _FORMATTER))


def highlight_css() -> str:
    """The style sheet of the highlighted blocks."""
    return str(_FORMATTER.get_style_defs(f".{HIGHLIGHT_CLASS}"))


def result_warnings(record: RunRecord) -> list[str]:
    """The warnings stored with a run's result (lossy steps of its return value's conversion
    to JSON); empty for a run without any, or stored before results carried them."""
    result = record.result
    raw = result.get("warnings") if isinstance(result, dict) else None
    return [w for w in raw if isinstance(w, str)] if isinstance(raw, list) else []


def _shown(shown: Shown | None) -> dict[str, Any] | None:
    return None if shown is None else {"html": shown.html, "shown": shown.shown,
                                       "folded": shown.folded}


def run_payload(record: RunRecord, *, with_result: bool = True) -> dict[str, Any]:
    """What the live stream sends when a run has ended: its row, error and — unless the page
    already shows it (``with_result=False``) — its result (``value`` and the whole ``result``
    object, each as :class:`Shown` fields: ``html``, ``shown``, ``folded``)."""
    error = error_view(record)
    result = record.result if with_result else None
    return {
        "status": record.status,
        "row": run_row(record).__dict__,
        "ended_at": record.ended_at,
        "error": None if error is None else {"code": error.code, "message": error.message},
        "value": _shown(None if result is None else show_json(result.get("value"))),
        "result": _shown(None if result is None else show_json(result)),
        "warnings": result_warnings(record),
    }
