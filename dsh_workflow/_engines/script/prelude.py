"""The runtime prelude: ``runtime_js/`` read from one place, and the names its two files share.

The JavaScript a run's QuickJS context evaluates before any script code is ``hooks.js`` with
``boundary.js`` spliced in as text at its ``//__BOUNDARY__`` line, the whole wrapped in one strict
function ``(config)`` (see :func:`source`). Both files therefore share one scope: each uses names
the other declares at its top level. Those names are stated here, once
(:data:`HOOKS_NAMES_BOUNDARY_USES`, :data:`BOUNDARY_NAMES_HOOKS_USES`), and
``tests/unit/test_prelude.py`` parses both files and fails when either uses a name of the other
that is not listed.

``runtime_js/`` stays at the repository's top level; a wheel ships it as
``dsh_workflow/runtime_js/`` (see pyproject.toml). :data:`RUNTIME_JS` is the one folder both are
read from: the wheel's when it exists, else the checkout's. A sandbox process calls
:func:`source` (or :func:`body_line_offset`) before it confines itself, while files are still
readable; the result is cached.

This module is pure Python without pydantic (the sandbox child imports it).
"""

from __future__ import annotations

import json
import os
import re
from functools import cache
from typing import TYPE_CHECKING

from ..._option_table import agent_options_shape
from ..._script import run_header

if TYPE_CHECKING:
    from .limits import RuntimeLimits

__all__ = ["BOUNDARY_NAMES_HOOKS_USES", "HOOKS_NAMES_BOUNDARY_USES", "RUNTIME_JS",
           "body_line_offset", "heap_evidence_bytes", "js_config", "source"]


def _folder() -> str:
    # Plain paths, not importlib.resources or pathlib: those cost a sandbox process ~15 ms of
    # start-up. This file is dsh_workflow/_engines/script/prelude.py.
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    shipped = os.path.join(package, "runtime_js")  # an installed wheel
    return shipped if os.path.isdir(shipped) else os.path.join(os.path.dirname(package),
                                                                  "runtime_js")


#: The folder ``hooks.js`` and ``boundary.js`` are read from.
RUNTIME_JS = _folder()

#: Names ``hooks.js`` declares at its top level that ``boundary.js`` uses (the intrinsics captured
#: before any script code runs, and the memory evidence of a bare ``null``).
HOOKS_NAMES_BOUNDARY_USES: tuple[str, ...] = (
    "_ArrayIsArray", "_ArrayPrototype", "_InternalErrorPrototype", "_ObjectPrototype",
    "_RangeErrorPrototype", "_String", "_WeakSet", "_apply", "_charCodeAt", "_create",
    "_getOwnPropertyDescriptor", "_getOwnPropertySymbols", "_getPrototypeOf", "_hasOwn",
    "_identifier", "_index", "_isError", "_isFinite", "_keys", "_stringIndexOf", "_stringSlice",
    "_stringify", "_weakSetAdd", "_weakSetHas", "noteNull", "nullWasOutOfMemory",
    "scriptErrors",
)

#: Names ``boundary.js`` declares at its top level that ``hooks.js`` uses (the value boundary's
#: API: crossing, describing and rendering values, and telling limits apart).
BOUNDARY_NAMES_HOOKS_USES: tuple[str, ...] = (
    "UNRENDERABLE", "describeKind", "isBoundaryError", "isRevoked", "isScriptThrow", "jsonText",
    "limitKind", "materialize", "newWarnings", "renderBrief", "renderLimit", "renderParts",
    "renderValue", "textOf", "warningsText",
)

_COMMENT_LINE = re.compile(r"(?m)^[ \t]*//.*$")

#: How close to ``memory_limit_bytes`` the heap must be (at least; or 1 % of the limit) to count
#: as full. QuickJS throws a bare null when fewer than a few hundred bytes are left (measured:
#: 1.3 KB below a 16 MiB limit while the script still held its data).
_HEAP_EVIDENCE_BYTES = 64 * 1024


def heap_evidence_bytes(memory_limit_bytes: int) -> int:
    """Free heap below which the heap counts as full (the runtime's probe allocates this)."""
    return max(_HEAP_EVIDENCE_BYTES, memory_limit_bytes // 100)


def _read(name: str) -> str:
    with open(os.path.join(RUNTIME_JS, name), encoding="utf-8") as handle:
        return handle.read()


@cache
def source() -> str:
    """The runtime prelude: hooks.js with boundary.js spliced in, as one strict function."""
    hooks = _read("hooks.js").replace("//__BOUNDARY__", _read("boundary.js"))
    # Whole-line comments are blanked (not removed, so line numbers hold): QuickJS compiles the
    # runtime once per run, and its comments cost a fifth of that time.
    hooks = _COMMENT_LINE.sub("", hooks)
    return "(function (config) {\n'use strict';\n" + hooks + "\n})"


@cache
def body_line_offset() -> int:
    """Blank lines put before the body, so its stack lines are told apart from the runtime's."""
    return source().count("\n") + 2


def js_config(limits: RuntimeLimits) -> str:
    """The JSON the prelude function is called with (its ``config``) for a run under ``limits``."""
    return json.dumps({
        "maxItemsPerCall": limits.max_items_per_call,
        "maxValueDepth": limits.max_value_depth,
        "maxPromptChars": limits.max_prompt_chars,
        "maxLogChars": limits.max_log_chars,
        "bodyLineOffset": body_line_offset(),
        # Call positions on the body's first line are shifted by the wrapper before it
        # (a body that opens with "use strict" has a longer one; see _script.run_header).
        "bodyHeaderChars": len(run_header("")),
        "heapEvidenceBytes": heap_evidence_bytes(limits.memory_limit_bytes),
        # What agent()'s error names when its options are not an object (the one table).
        "agentOptions": agent_options_shape(),
    })
