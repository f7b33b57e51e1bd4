"""Checking a script body before anything runs.

The body must be exactly one async function body. Compiling a wrapper such as
``(async () => { BODY })`` would *run* a body that closes the wrapper early
(``}); evil(); (async () => {``), so the check never evaluates anything reachable:

1. the body is compiled, in a throwaway QuickJS context with no host functions, as a *hoisted
   function declaration* placed after a ``throw`` statement. Global function declarations are
   instantiated before the first statement runs, and the ``throw`` stops everything else: no
   statement of the body, and nothing a breakout adds, is ever executed;
2. the declared function's source text must equal the wrapper around the whole body. A body that
   closes the wrapper early yields a shorter (or a different) function and is refused.
"""

from __future__ import annotations

import re
import threading

import quickjs

from ._errors import WorkflowError, WorkflowErrorCode

__all__ = ["RUN_FOOTER", "check_body", "import_error", "map_position", "run_header"]

_SENTINEL = "__dsh_workflow_parsed__"
_CHECK_NAME = "__dsh_workflow_body__"
_CHECK_HEADER = f'throw "{_SENTINEL}"; async function {_CHECK_NAME}() {{'
_CHECK_FN_HEADER = f"async function {_CHECK_NAME}() {{"
#: The wrapper the runtime evaluates around a checked body (``run_header(body) + body +
#: RUN_FOOTER``): a factory that takes the runtime's heap probe and returns the body as an async
#: function. The body runs inside ``try``, so when it throws a bare ``null`` (QuickJS's
#: out-of-memory that could not even allocate its error) the probe looks at the heap while the
#: body's own variables still hold their memory. Line 1 columns shift by the header's length.
_RUN_PREFIX = "(function (__dsh_workflow_probe__) { return async function () { "
RUN_FOOTER = ("\n} catch (__dsh_workflow_thrown__) { __dsh_workflow_probe__(__dsh_workflow_thrown__); "
              "throw __dsh_workflow_thrown__; }\n}; })")
_USE_STRICT = re.compile(r"""(['"])use strict\1\s*(?:;|\n|$)""")


def run_header(body: str) -> str:
    """The runtime's wrapper before ``body``; a body that opens with a "use strict" directive
    keeps it (inside ``try`` it would be a plain expression)."""
    strict = _USE_STRICT.match(body, _skip_leading_comments(body)) is not None
    return _RUN_PREFIX + ("'use strict'; try {" if strict else "try {")

_EXPORT_META = re.compile(r"export\s+const\s+meta\b")
_POSITION = re.compile(r"<input>:(\d+):(\d+)")
#: A static ES ``import`` statement at the start of a line: ``import x from "m"``,
#: ``import {a, b} from 'm'``, ``import * as m from "m"``, ``import "m"``. Looked for only in a
#: body that does not parse, so a prompt quoting one in a string is never taken for one.
_IMPORT = re.compile(r"^[ \t]*import(?=[\s{*'\"])[^\n(]{0,200}", re.MULTILINE)


def import_error(body: str) -> WorkflowError | None:
    """The error naming the body's first static ``import`` statement, or None without one
    (meant for a body that does not parse: see :data:`_IMPORT`)."""
    found = _IMPORT.search(body)
    if found is None:
        return None
    line = body.count("\n", 0, found.start()) + 1
    statement = found.group(0).strip()
    return WorkflowError(
        WorkflowErrorCode.SCRIPT_PARSE,
        f"workflow script uses an ES `import` statement, which is not supported (line {line}: "
        f"`{statement}`): a script is one self-contained body without modules; put what it "
        "imports into the script itself")


def _skip_leading_comments(body: str) -> int:
    """Index of the first character after leading whitespace and comments (one linear pass)."""
    i, n = 0, len(body)
    while i < n:
        if body[i].isspace():
            i += 1
        elif body.startswith("//", i):
            end = body.find("\n", i)
            i = n if end < 0 else end + 1
        elif body.startswith("/*", i):
            end = body.find("*/", i + 2)
            if end < 0:
                return i
            i = end + 2
        else:
            break
    return i


def map_position(line: int, column: int, header: str) -> tuple[int, int]:
    """Map an engine position inside ``header + body`` to the body's own (line, column)."""
    if line == 1:
        column = max(1, column - len(header))
    return line, column


def _parse_error(message: str, body: str) -> WorkflowError:
    first = message.split("\n", 1)[0].strip()
    where = _POSITION.search(message)
    text = f"workflow script does not parse: {first}"
    if where:
        line, column = map_position(int(where.group(1)), int(where.group(2)), _CHECK_HEADER)
        last_line = body.count("\n") + 1
        if line > last_line:
            text = "workflow script does not parse: SyntaxError: unexpected end of script " \
                   "(a bracket, brace or string is not closed)"
            line, column = last_line, len(body.rsplit("\n", 1)[-1]) + 1
        text += f" (line {line}, column {column})"
    return WorkflowError(WorkflowErrorCode.SCRIPT_PARSE, text)


_local = threading.local()


def _checker() -> quickjs.Context:
    """This thread's checking context: no host functions, and no code of a script ever runs
    in it. It is reused only after a clean check (a body that is exactly one function body
    declares nothing else); any other outcome discards it, so a body that closes the wrapper
    and declares globals cannot affect a later check."""
    ctx = getattr(_local, "checker", None)
    if ctx is None:
        ctx = quickjs.Context()
        ctx.set_max_stack_size(1024 * 1024)
        ctx.set_time_limit(1.0)
        _local.checker = ctx
    return ctx


#: Bodies that passed :func:`check_body` lately (at most this many, each at most
#: :data:`_PASSED_MAX_CHARS` long). The check is a pure function of the text, so a body started
#: again (a saved workflow, a retried or repeated run) is not compiled twice on the event loop.
_PASSED_MAX = 64
_PASSED_MAX_CHARS = 32 * 1024
_passed: dict[str, None] = {}
_passed_lock = threading.Lock()


def _rememberable(body: object) -> bool:
    # Only an exact str: a subclass could answer the lookup with its own __eq__.
    return type(body) is str and len(body) <= _PASSED_MAX_CHARS


def _remember_passed(body: str) -> None:
    if not _rememberable(body):
        return
    with _passed_lock:
        _passed[body] = None
        while len(_passed) > _PASSED_MAX:
            del _passed[next(iter(_passed))]


def check_body(body: str) -> None:
    """Prove ``body`` is exactly one async function body, running none of it.

    Raises ``WorkflowError(SCRIPT_PARSE)`` for a body that is not a string, still carries an
    ``export const meta`` statement, does not parse (with the script's own line and column; a
    body with a static ES ``import`` statement gets an error naming that statement instead), or
    closes the wrapper it is compiled in. A body that passed lately passes again without being
    compiled (only an exact ``str``: a subclass could answer the lookup with its own ``__eq__``).
    """
    if _rememberable(body) and body in _passed:
        return
    if not isinstance(body, str):
        raise WorkflowError(WorkflowErrorCode.SCRIPT_PARSE, "workflow script must be a string")
    if _EXPORT_META.match(body, _skip_leading_comments(body)):
        raise WorkflowError(
            WorkflowErrorCode.SCRIPT_PARSE,
            "workflow meta is passed as the `meta` parameter, not written in the script: remove "
            "the `export const meta = {...}` statement from the body")
    if "\x00" in body:
        raise WorkflowError(WorkflowErrorCode.SCRIPT_PARSE,
                            "workflow script contains a NUL character; remove it")
    try:
        body.encode("utf-8")
    except UnicodeEncodeError:
        raise WorkflowError(WorkflowErrorCode.SCRIPT_PARSE,
                            "workflow script contains a lone surrogate; it must be valid "
                            "Unicode text") from None
    ctx = _checker()
    clean = False
    try:
        ctx.set_memory_limit(max(32 * 1024 * 1024, 8 * len(body) + 16 * 1024 * 1024))
        ctx.set("__src", body)
        try:
            ctx.eval(_CHECK_HEADER + body + "\n}")
        except quickjs.JSException as exc:
            message = str(exc)
            if not message.startswith(_SENTINEL):
                raise import_error(body) or _parse_error(message, body) from None
        exact = ctx.eval(
            f"typeof {_CHECK_NAME} === 'function' && "
            f"Function.prototype.toString.call({_CHECK_NAME}) === "
            f"{_CHECK_FN_HEADER!r} + __src + '\\n}}'")
        clean = exact is True
    except quickjs.JSException as exc:
        raise _parse_error(str(exc), body) from None
    finally:
        ctx.set("__src", "")
        if not clean:
            _local.__dict__.pop("checker", None)
        del ctx
    if exact is not True:
        raise WorkflowError(
            WorkflowErrorCode.SCRIPT_PARSE,
            "workflow script does not parse as one function body: it closes the function it "
            "runs in (unbalanced `}`); write a plain script body ending in `return <value>`")
    _remember_passed(body)
