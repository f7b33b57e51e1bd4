"""Nesting depth of JSON data, measured without recursion.

Values entering a script (``args``, agent answers) are parsed by the runtime's recursive
``JSON.parse``, whose stack use grows with the nesting; the host keeps them within
``max_value_depth``, the same bound values leaving the script obey, and
:class:`~dsh_workflow.EngineConfig` checks that the stack limit holds a value that deep.

Python's ``json.loads`` recurses too (``RecursionError`` near 1,000 levels): JSON text from
outside (a provider's reply, a model's tool arguments) is parsed with :func:`loads_bounded`,
which measures the text's nesting first and raises :class:`TooDeep` — a ``ValueError``, like
any other text that is not acceptable JSON — instead.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["MAX_VALUE_DEPTH_CEILING", "STACK_BYTES_PER_LEVEL", "TooDeep", "deeper_than",
           "loads_bounded", "text_deeper_than"]

#: The most ``EngineConfig.max_value_depth`` allows: what a provider, which does not know the
#: engine's setting, lets through its parse (the engine then applies its own bound).
MAX_VALUE_DEPTH_CEILING = 512

#: Stack the runtime's JSON.parse needs per nesting level, with headroom: measured 144 bytes per
#: level (537 levels fit in 64 KiB, 992 in 128 KiB, quickjs-ng 0.17).
STACK_BYTES_PER_LEVEL = 160


def deeper_than(value: Any, limit: int) -> bool:
    """True when ``value`` nests objects/arrays more than ``limit`` levels deep (a top-level
    object or array is level 1)."""
    if not isinstance(value, (dict, list)):
        return False
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        todo.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


class TooDeep(ValueError):
    """JSON text nested deeper than the bound it was parsed with; ``limit`` is that bound."""

    def __init__(self, limit: int) -> None:
        beyond = " (more than any max_value_depth allows)" \
            if limit == MAX_VALUE_DEPTH_CEILING else ""
        self.limit = limit
        #: what is wrong, to follow "the reply is" or "the answer is"
        self.reason = f"nested deeper than {limit} levels{beyond}"
        super().__init__("the JSON is " + self.reason)


# A string (its closing quote optional, so an unterminated one swallows the rest) or a bracket.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)


def text_deeper_than(text: str, limit: int) -> bool:
    """True when the JSON ``text`` nests arrays/objects more than ``limit`` levels deep (as
    :func:`deeper_than` counts), brackets inside strings not counted. Iterative; text that is
    not JSON gets an answer too (the parse then rejects it)."""
    if text.count("[") + text.count("{") <= limit:
        return False  # the common case, decided in C
    depth = 0
    for token in _TOKEN.finditer(text):
        char = token.group()
        if char == "[" or char == "{":
            depth += 1
            if depth > limit:
                return True
        elif char == "]" or char == "}":
            depth -= 1
    return False


def loads_bounded(text: str | bytes | bytearray, limit: int = MAX_VALUE_DEPTH_CEILING,
                  **options: Any) -> Any:
    """``json.loads(text, **options)`` for text from outside: raises :class:`TooDeep` (a
    ``ValueError``) when it nests deeper than ``limit`` levels, and the ``ValueError`` of
    ``json.loads`` when it is not JSON; never ``RecursionError``."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode(json.detect_encoding(text), "surrogatepass")
    if text_deeper_than(text, limit):
        raise TooDeep(limit)
    try:
        return json.loads(text, **options)
    except RecursionError:  # a recursion limit set lower than the bound
        raise TooDeep(limit) from None
