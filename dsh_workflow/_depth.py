"""Nesting depth of JSON data, measured without recursion.

Values entering a script (``args``, agent answers) are parsed by the runtime's recursive
``JSON.parse``, whose stack use grows with the nesting; the host keeps them within
``max_value_depth``, the same bound values leaving the script obey, and
:class:`~dsh_workflow.EngineConfig` checks that the stack limit holds a value that deep.
"""

from __future__ import annotations

from typing import Any

__all__ = ["STACK_BYTES_PER_LEVEL", "deeper_than"]

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
