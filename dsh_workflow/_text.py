"""Hostile text made safe where it goes (docs/scripts.md, "Hostile text").

Two rules, each decided here once:

- **Text UTF-8 cannot hold.** JavaScript strings, and so a script's values and logs, may hold
  a lone surrogate (half an emoji); a provider's text may too. Such text crashes whatever encodes
  it (a pipe, a file, SQLite, an HTTP response, pydantic). :func:`valid_text` and
  :func:`valid_data` turn each lone surrogate into U+FFFD (a surrogate *pair* becomes the
  character it encodes) and say so: :func:`valid_data` returns a warning per place, worded
  ``<where>: a lone surrogate became U+FFFD`` (``return value.items[2]: ...``).
- **Control characters never reach a terminal raw.** :func:`escape_controls` shows every C0
  control but newline and tab as ``\\xNN``, DEL and every C1 control (U+0080–U+009F) as
  ``\\u00NN`` (valid inside a JSON string too), so an
  escape sequence from a script, a child or a store reads ``\\x1b]0;title\\x07`` instead of
  retitling the window, writing the clipboard or rewriting a line.

Both are pure functions of their input, never raise, and return the very object they were
given when there is nothing to change.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

__all__ = ["LONE_SURROGATE", "escape_controls", "json_may_hold_surrogates", "valid_data",
           "valid_text"]

_T = TypeVar("_T")

#: How a warning says what happened, after its ``<where>: ``.
LONE_SURROGATE = "a lone surrogate became U+FFFD"

_SURROGATE = re.compile("[\ud800-\udfff]")
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
# a literal first character: the search skips ahead in C (an alternation would not)
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")
#: Most warnings :func:`valid_data` returns for one value (the rest are counted in the last).
MAX_WARNINGS = 20


def valid_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD and each surrogate pair joined into
    its character; ``text`` itself when it holds none (the common case, decided in C)."""
    if not _holds_surrogate(text):
        return text
    # String operations only: no codec is loaded (the sandbox process cannot open one).
    joined = _PAIR.sub(lambda m: chr(0x10000 + ((ord(m.group()[0]) - 0xD800) << 10)
                                     + ord(m.group()[1]) - 0xDC00), text)
    return _SURROGATE.sub("\ufffd", joined)


def _holds_surrogate(text: str) -> bool:
    """Whether ``text`` holds a surrogate code point, decided in C: ASCII text at once, other
    text by encoding it (a few milliseconds a megabyte; a regular expression takes ten times
    that, and a run's host calls this on its event loop)."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def json_may_hold_surrogates(text: str) -> bool:
    """Whether JSON ``text`` may decode to a string holding a surrogate (a ``\\udXXX`` escape
    or a raw one): when not, its value needs no :func:`valid_data` (decided in C)."""
    return _ESCAPED_SURROGATE.search(text) is not None or _holds_surrogate(text)


def valid_data(value: _T, where: str) -> tuple[_T, list[str]]:
    """``value`` (JSON data: dicts, lists, strings, numbers, ...) with :func:`valid_text`
    applied to every string and key, and one warning per string changed (``where`` names the
    root, e.g. ``return value``; paths as a script writes them: ``.key``, ``["odd key"]``,
    ``[2]``), at most :data:`MAX_WARNINGS` and a ``... and N more`` line. Iterative, so any
    depth is fine; the containers holding a changed string are copied, the rest shared."""
    found: list[str] = []
    fixed: _T = _fixed(value, where, found)
    if len(found) > MAX_WARNINGS:
        found = [*found[:MAX_WARNINGS], f"... and {len(found) - MAX_WARNINGS} more"]
    return fixed, found


def _fixed(root: Any, where: str, found: list[str]) -> Any:
    if isinstance(root, str):
        text = valid_text(root)
        if text is not root:
            found.append(f"{where}: {LONE_SURROGATE}")
        return text
    if not isinstance(root, (dict, list)) or not _data_holds_surrogate(root):
        return root
    # Rebuild bottom-up: each container is copied once its children are fixed.
    top: Any = {} if isinstance(root, dict) else []
    todo: list[tuple[Any, Any, str]] = [(root, top, where)]
    while todo:
        source, target, path = todo.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, child in items:
            if isinstance(source, dict):
                name = valid_text(key) if isinstance(key, str) else key
                child_path = _key_path(path, str(name))
                if name is not key:
                    found.append(f"{child_path} (its key): {LONE_SURROGATE}")
            else:
                name, child_path = key, f"{path}[{key}]"
            if isinstance(child, str):
                text = valid_text(child)
                if text is not child:
                    found.append(f"{child_path}: {LONE_SURROGATE}")
                made: Any = text
            elif isinstance(child, (dict, list)):
                made = {} if isinstance(child, dict) else []
                todo.append((child, made, child_path))
            else:
                made = child
            if isinstance(target, dict):
                target[name] = made
            else:
                target.append(made)
    return top


def _data_holds_surrogate(root: dict[Any, Any] | list[Any]) -> bool:
    todo: list[Any] = [root]
    while todo:
        item = todo.pop()
        children = list(item.items()) if isinstance(item, dict) else item
        for child in children:
            if isinstance(item, dict):
                key, child = child
                if isinstance(key, str) and _holds_surrogate(key):
                    return True
            if isinstance(child, str):
                if _holds_surrogate(child):
                    return True
            elif isinstance(child, (dict, list)):
                todo.append(child)
    return False


def _key_path(path: str, key: str) -> str:
    if _IDENTIFIER.match(key):
        return f"{path}.{key}"
    escaped = key.replace("\\", "\\\\").replace('"', '\\"')
    return f'{path}["{escaped}"]'


def escape_controls(text: str) -> str:
    """``text`` fit for a terminal: every C0 control but ``\\n`` and ``\\t`` as ``\\xNN`` (ESC
    reads ``\\x1b``, a carriage return ``\\x0d``), DEL and C1 controls as ``\\u00NN``, and lone
    surrogates as U+FFFD. Newline and tab stay: multi-line output (a stored script, a
    multi-line answer) is legitimate, and neither can move the cursor up or rewrite a line."""
    text = valid_text(text)
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    # DEL and C1 as \u00NN: the same text is valid inside a JSON string, which escapes C0 itself
    return f"\\x{code:02x}" if code < 0x7F else f"\\u{code:04x}"
