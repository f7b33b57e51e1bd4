"""Script-supplied regular expressions: bounded analysis, compilation and matching.

Schema patterns (``pattern``, ``patternProperties`` keys, strings checked as ``format:
"regex"``) come from the script or a child, so both compiling and matching them are hostile
work. Matching is the ``regex`` package's, under a timeout. Compiling is the hazard this
module bounds: the ``regex`` package expands counted repeats when it compiles, so a
30-character pattern of nested repeats (``((a{100}){100}){100}``) costs seconds of CPU and
gigabytes of memory before any timeout applies.

:func:`pattern_cost` is a single linear scan that estimates the compiled size of a pattern:
every atom counts 1, a group counts the sum of its alternatives, and a repeat multiplies its
operand by its lower bound (``x{m}``, ``x{m,}`` and ``x{m,n}`` are expanded to ``m`` copies;
``*``, ``+`` and ``?`` are not expanded). It never builds anything larger than the pattern and
stops as soon as the estimate exceeds the limit. It is meant to over-estimate, never to
under-estimate: where its view of a pattern could differ from the ``regex`` parser's (the
version-1 set syntax, verbose mode), the pattern is refused instead (:class:`PatternRefused`).

:func:`compile_bounded` compiles only after the analysis passed, and never through the
package's process-wide cache (``cache_pattern=False``); this module keeps its own small LRU of
cheap patterns, so a process that served hostile scripts holds at most a few megabytes of
their patterns.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import regex

__all__ = [
    "CACHED_PATTERN_COST",
    "PatternRefused",
    "compile_bounded",
    "pattern_cost",
]

CACHED_PATTERN_COST = 500
"""Patterns whose cost is at most this go to the process-wide LRU (about 100 KB each at most;
the patterns models write cost well under 100)."""

_CACHE_SIZE = 64
_cache: OrderedDict[str, Any] = OrderedDict()
_cache_lock = threading.Lock()
_HUGE = 10**12
_MAX_DIGITS = 9  # a repeat count with more digits is "huge" (and never parsed into an int)


class PatternRefused(ValueError):
    """The pattern is too costly to compile, or written in a syntax the analysis refuses."""


def _repeat_at(pattern: str, i: int) -> tuple[int, int] | None:
    """``(lower bound, index after it)`` if a ``{m}``, ``{m,}``, ``{m,n}`` or ``{,n}`` repeat
    starts at ``pattern[i]`` (which is ``{``); None when the brace is a literal."""
    j = i + 1
    n = len(pattern)
    start = j
    while j < n and pattern[j].isdigit() and j - start <= _MAX_DIGITS + 1:
        j += 1
    low_digits = pattern[start:j]
    high_digits = ""
    if j < n and pattern[j] == ",":
        j += 1
        start_high = j
        while j < n and pattern[j].isdigit() and j - start_high <= _MAX_DIGITS + 1:
            j += 1
        high_digits = pattern[start_high:j]
    if j >= n or pattern[j] != "}" or not (low_digits or high_digits):
        return None
    if not low_digits:
        return 0, j + 1
    if len(low_digits) > _MAX_DIGITS:
        return _HUGE, j + 1
    return int(low_digits), j + 1


def _inline_flags(pattern: str, i: int) -> str:
    """The flag letters of a ``(?flags)`` / ``(?flags:`` group starting at ``pattern[i]``."""
    j = i + 2
    while j < len(pattern) and (pattern[j].isalpha() or pattern[j] in "-0123456789"):
        j += 1
    return pattern[i + 2: j] if j < len(pattern) and pattern[j] in "):" else ""


def _skip_class(pattern: str, i: int) -> int:
    """Index after the character class starting at ``pattern[i]`` (``[``), version-0 rules:
    a leading ``]`` (after an optional ``^``) is literal, escapes are skipped, POSIX classes
    ``[:name:]`` are skipped whole; an unterminated class runs to the end."""
    n = len(pattern)
    j = i + 1
    if j < n and pattern[j] == "^":
        j += 1
    if j < n and pattern[j] == "]":
        j += 1
    while j < n:
        char = pattern[j]
        if char == "\\":
            j += 2
        elif char == "]":
            return j + 1
        elif char == "[" and pattern.startswith(":", j + 1):
            end = pattern.find(":]", j + 2)
            name = pattern[j + 2: end] if end != -1 else ""
            j = end + 2 if name and name.lstrip("^").isalpha() else j + 1
        else:
            j += 1
    return n


def pattern_cost(pattern: str, limit: int) -> int:
    """The estimated compiled size of ``pattern`` (see the module doc), or ``limit + 1`` as
    soon as it exceeds ``limit``. Linear in ``len(pattern)``; never raises for a cost.

    Raises :class:`PatternRefused` for syntax the estimate could misjudge: the ``V1`` or
    verbose (``x``) inline flags, and parentheses that do not balance.
    """
    over = limit + 1
    # One frame per open group: [finished alternatives, current alternative, its last item]
    frames: list[list[int]] = [[0, 0, 0]]
    n = len(pattern)
    i = 0
    while i < n:
        char = pattern[i]
        frame = frames[-1]
        atom = 1
        if char == "\\":
            j = i + 2
            if pattern[i + 1: i + 2] in ("p", "P", "N", "x", "u", "U", "g") and j < n \
                    and pattern[j] in "{<":
                close = pattern.find("}" if pattern[j] == "{" else ">", j)
                j = n if close == -1 else close + 1
            i = j
        elif char == "[":
            i = _skip_class(pattern, i)
        elif char == "(":
            if pattern.startswith("(?#", i):
                close = pattern.find(")", i)
                i = n if close == -1 else close + 1
                continue
            if pattern.startswith("(?", i):
                flags = _inline_flags(pattern, i)
                if "V1" in flags or "x" in flags.split("-")[0]:
                    raise PatternRefused("the inline flags V1 and x (verbose) are not supported "
                                         "in schema patterns")
            frames.append([0, 0, 0])
            i += 1
            continue
        elif char == ")":
            if len(frames) == 1:
                raise PatternRefused("unbalanced parenthesis")
            done, current, _ = frames.pop()
            frame = frames[-1]
            atom = min(1 + done + current, over)
            i += 1
        elif char == "|":
            frame[0] = min(frame[0] + frame[1], over)
            frame[1] = frame[2] = 0
            i += 1
            continue
        elif char == "{" and frame[2]:
            repeat = _repeat_at(pattern, i)
            if repeat is not None:
                low, i = repeat
                grown = min(frame[2] * max(low, 1), over)
                frame[1] = min(frame[1] - frame[2] + grown, over)
                frame[2] = grown
                if frame[0] + frame[1] > limit:
                    return over
                continue
            i += 1
        else:
            i += 1
        frame[1] = min(frame[1] + atom, over)
        frame[2] = atom
        if frame[0] + frame[1] > limit:
            return over
    if len(frames) != 1:
        raise PatternRefused("unbalanced parenthesis")
    return min(frames[0][0] + frames[0][1], over)


def check_pattern(pattern: str, limit: int) -> int:
    """The cost of ``pattern``; :class:`PatternRefused` naming ``max_pattern_cost=limit``
    when it is over the limit or in refused syntax."""
    cost = pattern_cost(pattern, limit)
    if cost > limit:
        raise PatternRefused(
            f"too costly to compile (its counted repeats expand to more than max_pattern_cost="
            f"{limit} units); use fewer or smaller counted repeats, e.g. + or * instead of "
            "{n} inside {m}")
    return cost


def compile_bounded(pattern: str, limit: int, memo: dict[str, Any] | None = None) -> Any:
    """``pattern`` compiled by the ``regex`` package once :func:`check_pattern` passed.

    Cheap patterns (cost at most :data:`CACHED_PATTERN_COST`) come from a small process-wide
    LRU; costlier ones are compiled each time unless ``memo`` (a per-call dict the caller
    drops when done) holds them. Raises :class:`PatternRefused` or ``regex.error``. Call it
    off the event loop: a compile at the cost limit takes milliseconds.
    """
    cost = check_pattern(pattern, limit)
    with _cache_lock:
        found = _cache.get(pattern)
        if found is not None:
            _cache.move_to_end(pattern)
            return found
    if memo is not None and pattern in memo:
        return memo[pattern]
    compiled = regex.compile(pattern, cache_pattern=False)
    if cost <= CACHED_PATTERN_COST:
        with _cache_lock:
            _cache[pattern] = compiled
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    elif memo is not None:
        memo[pattern] = compiled
    return compiled
