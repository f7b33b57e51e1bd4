"""A child's structured answer (a call with ``schema``): parsed, validated, repaired once.

Contract:

- :func:`parse_structured_reply` reads a reply as one JSON value (surrounding whitespace and one
  Markdown code fence tolerated; ``NaN``/``Infinity`` are not JSON) and validates it against
  the schema with the project's validator. It never raises.
- :func:`parse_with_one_repair` is the loop a conversational provider (the OpenAI-compatible
  one, MCP sampling) runs: parse the reply; when it is invalid, ask once more through the
  provider's ``ask_again(previous_reply, repair_message)`` — which adds the assistant's reply
  and the :func:`repair_message` (the violations, listed) to its conversation and returns the
  new reply — and parse that. Parsing runs in a worker thread (a large reply must not stall
  the event loop). What ``ask_again`` raises propagates unchanged.
- Still invalid after the repair is an ordinary failure; its error text begins with
  :func:`still_invalid` (a provider may add to it).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from .._depth import TooDeep, loads_bounded
from .._schema import value_violations

__all__ = ["StructuredReply", "parse_structured_reply", "parse_with_one_repair",
           "repair_message", "still_invalid"]

_FENCE = re.compile(r"\A```[\w+-]*[ \t]*\r?\n(.*?)\r?\n?```\Z", re.DOTALL)

#: ``ask_again(previous_reply, repair_message)``: the provider's next reply in the conversation.
AskAgain = Callable[[str, str], Awaitable[str]]


def parse_structured_reply(text: str, schema: dict[str, Any]) -> tuple[Any, list[str]]:
    """Parse ``text`` as one JSON value and validate it against ``schema``.

    Surrounding whitespace and one Markdown code fence (```` ```json ... ``` ````) are tolerated;
    ``NaN``/``Infinity`` are not JSON, nor is a value nested deeper than
    :data:`~dsh_workflow._depth.MAX_VALUE_DEPTH_CEILING` levels (``/: the answer is nested
    deeper than ...``). Returns ``(value, violations)``: an empty list means the value is valid;
    otherwise ``value`` is ``None`` when the text was not JSON at all. Never raises.
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        value = loads_bounded(body, parse_constant=_reject_constant)
    except TooDeep as exc:
        return None, [f"/: the answer is {exc.reason}"]
    except ValueError as exc:
        return None, [f"the reply is not valid JSON: {exc}"]
    return value, value_violations(schema, value)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def repair_message(violations: list[str]) -> str:
    """The user message that asks for a corrected reply, listing what was wrong."""
    listed = "\n".join(f"- {v}" for v in violations)
    return (
        "Your reply does not satisfy the required JSON schema:\n"
        f"{listed}\n"
        "Reply again with only the corrected JSON value: no prose, no code fence."
    )


def still_invalid(violations: list[str]) -> str:
    """The start of the error text of a reply still invalid after the repair."""
    return "the reply does not satisfy the schema after one repair attempt: " + "; ".join(violations)


@dataclass(frozen=True)
class StructuredReply:
    """The last reply's text, its parsed value and its violations (empty: valid)."""

    text: str
    value: Any
    violations: list[str]


async def parse_with_one_repair(reply: str, schema: dict[str, Any],
                                ask_again: AskAgain) -> StructuredReply:
    """Parse ``reply``; when invalid, repair once through ``ask_again`` (module docstring)."""
    value, violations = await anyio.to_thread.run_sync(parse_structured_reply, reply, schema)
    if violations:
        reply = await ask_again(reply, repair_message(violations))
        value, violations = await anyio.to_thread.run_sync(parse_structured_reply, reply, schema)
    return StructuredReply(text=reply, value=value, violations=violations)
