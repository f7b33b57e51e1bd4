"""``dsh-workflow check``'s warnings: what would parse but fail, or do nothing, when it runs.

:func:`lint` reads a script body with a real JavaScript parser (tree-sitter's JavaScript
grammar: modern syntax, error-tolerant, so strings, template literals, comments and regular
expressions are never mistaken for code) and reports, with 1-based line and column:

- ``agent()``/``subagent()`` option keys the engine does not support (an object literal as the
  second argument; spreads and computed keys are not judged; a real script's ``stallMs`` is
  one: unknown options stay fatal), and literal values of an option with a fixed set of them
  (``effort``, ``isolation``, ``failure``: ``_option_table.py``) outside that set;
- ``parallel()``/``pipeline()``/``settle()`` options (an object literal as parallel's or
  settle's second or pipeline's last argument): keys other than ``concurrency``, and a
  literal ``concurrency`` that is not a whole number of at least 1;
- literal ``agentType`` values that the agent registry does not define;
- ``.filter(Boolean)`` right after a ``parallel()`` whose thunks make a schema call (chained on
  ``(await parallel(...))``, or on a name the awaited result was assigned to): it drops every
  failed child without its reason, which ``settle()`` keeps;
- references to globals the sandbox does not have (timers, ``require``, ``process``,
  ``fetch``, browser and other runtimes' objects, ``import()``), unless the script declares
  a name of its own with that spelling.

Warnings never stop a script: ``check`` still exits 0 when it parses.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

import tree_sitter
import tree_sitter_javascript

from .._agents import AgentRegistry
from .._option_table import AGENT_OPTIONS as _AGENT_OPTION_TABLE

__all__ = ["AGENT_OPTIONS", "COMBINATOR_OPTIONS", "FILTER_BOOLEAN", "MISSING_GLOBALS",
           "LintWarning", "lint"]

#: Globals scripts written for other runtimes reach for; none exists in the sandbox.
MISSING_GLOBALS: dict[str, str] = {
    **{name: "there are no timers in the sandbox; await agent() calls instead of waiting"
       for name in ("setTimeout", "setInterval", "setImmediate", "clearTimeout",
                    "clearInterval", "clearImmediate")},
    **{name: "there is no module loading in the sandbox"
       for name in ("require", "module", "exports", "__dirname", "__filename")},
    **{name: "there is no network in the sandbox; let an agent() fetch what it needs"
       for name in ("fetch", "XMLHttpRequest", "WebSocket")},
    **{name: "there is no filesystem in the sandbox; let an agent() read or write files"
       for name in ("fs", "Buffer")},
    **{name: "there is no host process in the sandbox; pass settings in `args`"
       for name in ("process", "Deno", "Bun")},
    **{name: "there is no browser in the sandbox"
       for name in ("window", "document", "localStorage", "navigator")},
}

_HOOKS = ("agent", "subagent")
_COMBINATORS = ("parallel", "pipeline", "settle")
#: The agent() options check knows: the engine's own table (_option_table.py).
AGENT_OPTIONS: tuple[str, ...] = tuple(option.name for option in _AGENT_OPTION_TABLE)
#: option -> the values a literal may take, for the options with a fixed set of them.
_AGENT_CHOICES = {option.name: option.choices for option in _AGENT_OPTION_TABLE
                  if option.kind == "choice"}
#: The keys of parallel()/pipeline() options (hooks.js, concurrencyOption).
COMBINATOR_OPTIONS = ("concurrency",)
#: Why ``.filter(Boolean)`` after a parallel() of schema calls is flagged.
FILTER_BOOLEAN = (".filter(Boolean) after parallel() drops every failed schema call without its "
                  "reason; use settle(thunks) instead: one {ok, value} or {ok: false, error: "
                  "{kind, message}} per thunk, e.g. (await settle(thunks)).filter(r => r.ok)")
_DECLARING = {"variable_declarator": "name", "function_declaration": "name",
              "generator_function_declaration": "name", "class_declaration": "name",
              "function_expression": "name", "class": "name"}


@dataclass(frozen=True, order=True)
class LintWarning:
    """One finding: 1-based line and column in the file, and what is wrong."""

    line: int
    column: int
    message: str

    def __str__(self) -> str:
        return f"{self.line}:{self.column}: warning: {self.message}"


@cache
def _parser() -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_javascript.language()))


def _walk(node: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    cursor = node.walk()
    while True:
        assert cursor.node is not None
        yield cursor.node
        if cursor.goto_first_child():
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return


def _text(node: tree_sitter.Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _literal(node: tree_sitter.Node | None) -> str | None:
    """The value of a string literal (or a template literal without substitutions)."""
    if node is None:
        return None
    if node.type == "string":
        return "".join(_text(c) for c in node.named_children if c.type == "string_fragment")
    if node.type == "template_string":
        if any(c.type == "template_substitution" for c in node.named_children):
            return None
        return _text(node)[1:-1]
    return None


class _Linter:
    def __init__(self, body: str, agents: AgentRegistry | None) -> None:
        self.source = body.encode("utf-8")
        self.lines = body.split("\n")
        self.agents = agents
        self.found: list[LintWarning] = []

    def at(self, node: tree_sitter.Node, message: str) -> None:
        row, byte_column = node.start_point
        # tree-sitter counts bytes; report characters, as editors do
        line = self.lines[row].encode("utf-8") if row < len(self.lines) else b""
        column = len(line[:byte_column].decode("utf-8", "replace")) + 1
        self.found.append(LintWarning(row + 1, column, message))

    def run(self) -> list[LintWarning]:
        root = _parser().parse(self.source).root_node
        nodes = list(_walk(root))
        declared = self._declared(nodes)
        schema_results = self._schema_parallel_names(nodes)
        for node in nodes:
            if node.type == "call_expression":
                self._call(node)
                self._filter_boolean(node, schema_results)
            elif node.type == "identifier" and _text(node) in MISSING_GLOBALS \
                    and _text(node) not in declared and not self._is_declaration(node):
                name = _text(node)
                self.at(node, f"`{name}` is not defined in the workflow sandbox: "
                              f"{MISSING_GLOBALS[name]}")
        return sorted(set(self.found))

    @staticmethod
    def _is_declaration(node: tree_sitter.Node) -> bool:
        parent = node.parent
        return parent is not None and parent.type in _DECLARING \
            and parent.child_by_field_name(_DECLARING[parent.type]) == node

    @staticmethod
    def _declared(nodes: list[tree_sitter.Node]) -> set[str]:
        """Names the script binds itself (anywhere: scopes are not tracked)."""
        names: set[str] = set()
        for node in nodes:
            kind = node.type
            if kind in _DECLARING:
                name = node.child_by_field_name(_DECLARING[kind])
                if name is not None and name.type == "identifier":
                    names.add(_text(name))
            elif kind == "shorthand_property_identifier_pattern" or (
                    kind == "identifier" and node.parent is not None and (
                    node.parent.type in ("formal_parameters", "catch_clause", "array_pattern",
                                         "rest_pattern")
                    or (node.parent.type == "assignment_pattern"
                        and node.parent.child_by_field_name("left") == node)
                    or (node.parent.type == "arrow_function"
                        and node.parent.child_by_field_name("parameter") == node))):
                names.add(_text(node))
        return names

    @staticmethod
    def _awaited_schema_parallel(node: tree_sitter.Node | None) -> bool:
        """Whether ``node`` is ``await parallel(...)`` (parenthesized or not) whose arguments
        hold an ``agent()``/``subagent()`` call with a ``schema`` option."""
        while node is not None and node.type == "parenthesized_expression":
            node = node.named_children[0] if node.named_children else None
        if node is None or node.type != "await_expression" or not node.named_children:
            return False
        call = node.named_children[0]
        function = call.child_by_field_name("function") if call.type == "call_expression" \
            else None
        if function is None or function.type != "identifier" or _text(function) != "parallel":
            return False
        arguments = call.child_by_field_name("arguments")
        return arguments is not None and any(
            _Linter._has_schema(inner) for inner in _walk(arguments)
            if inner.type == "call_expression")

    @staticmethod
    def _has_schema(call: tree_sitter.Node) -> bool:
        function = call.child_by_field_name("function")
        arguments = call.child_by_field_name("arguments")
        if function is None or arguments is None or function.type != "identifier" \
                or _text(function) not in _HOOKS:
            return False
        given = [c for c in arguments.named_children if c.type != "comment"]
        return len(given) >= 2 and given[1].type == "object" and any(
            key == "schema" for _, key, _ in _Linter._entries(given[1]))

    def _schema_parallel_names(self, nodes: list[tree_sitter.Node]) -> set[str]:
        """Names assigned ``await parallel(...)`` of schema calls (scopes are not tracked)."""
        names: set[str] = set()
        for node in nodes:
            if node.type == "variable_declarator":
                target, value = node.child_by_field_name("name"), \
                    node.child_by_field_name("value")
            elif node.type == "assignment_expression":
                target, value = node.child_by_field_name("left"), \
                    node.child_by_field_name("right")
            else:
                continue
            if target is not None and target.type == "identifier" \
                    and self._awaited_schema_parallel(value):
                names.add(_text(target))
        return names

    def _filter_boolean(self, node: tree_sitter.Node, names: set[str]) -> None:
        """Flag ``X.filter(Boolean)`` where X is an awaited parallel() of schema calls."""
        function = node.child_by_field_name("function")
        arguments = node.child_by_field_name("arguments")
        if function is None or arguments is None or function.type != "member_expression":
            return
        prop = function.child_by_field_name("property")
        given = [c for c in arguments.named_children if c.type != "comment"]
        if prop is None or _text(prop) != "filter" or len(given) != 1 \
                or given[0].type != "identifier" or _text(given[0]) != "Boolean":
            return
        target = function.child_by_field_name("object")
        if target is not None and ((target.type == "identifier" and _text(target) in names)
                                   or self._awaited_schema_parallel(target)):
            self.at(prop, FILTER_BOOLEAN)

    def _call(self, node: tree_sitter.Node) -> None:
        function = node.child_by_field_name("function")
        if function is None:
            return
        if function.type == "import":
            self.at(function, "import() is not available in the workflow sandbox: there is no "
                              "module loading; put what you need in the script or in `args`")
            return
        if function.type != "identifier" or _text(function) not in (*_HOOKS, *_COMBINATORS):
            return
        arguments = node.child_by_field_name("arguments")
        if arguments is None:
            return
        given = [c for c in arguments.named_children if c.type != "comment"]
        name = _text(function)
        if name in ("parallel", "settle"):
            if len(given) >= 2 and given[1].type == "object":
                self._combinator_options(name, given[1])
        elif name == "pipeline":
            if len(given) >= 3 and given[-1].type == "object":
                self._combinator_options(name, given[-1])
        elif len(given) >= 2 and given[1].type == "object":
            self._options(name, given[1])

    @staticmethod
    def _entries(options: tree_sitter.Node) -> Iterator[
            tuple[tree_sitter.Node, str, tree_sitter.Node | None]]:
        """The judged entries of an object literal: (key node, key, value node or None);
        spreads, methods, comments and computed keys are skipped."""
        for entry in options.named_children:
            if entry.type == "shorthand_property_identifier":
                yield entry, _text(entry), None
            elif entry.type == "pair":
                key_node = entry.child_by_field_name("key")
                if key_node is None:
                    continue
                if key_node.type in ("property_identifier", "number"):
                    key = _text(key_node)
                elif key_node.type == "string":
                    key = _literal(key_node) or ""
                else:
                    continue  # computed key: not judged
                yield key_node, key, entry.child_by_field_name("value")

    def _combinator_options(self, hook: str, options: tree_sitter.Node) -> None:
        for key_node, key, value in self._entries(options):
            if key not in COMBINATOR_OPTIONS:
                self.at(key_node, f'{hook}() option "{key}" is not supported and will fail at '
                                  f"the call (supported: {', '.join(COMBINATOR_OPTIONS)})")
                continue
            if value is None:
                continue
            bad = value.type in ("string", "template_string", "null", "true", "false",
                                 "object", "array")
            if value.type == "number" or (value.type == "unary_expression"
                                          and _text(value).startswith("-")):
                try:
                    number = float(_text(value).replace("_", ""))
                except ValueError:
                    number = None
                bad = number is not None and (number < 1 or not number.is_integer())
            elif value.type == "identifier" and _text(value) in ("NaN", "Infinity", "undefined"):
                bad = _text(value) != "undefined"
            if bad:
                self.at(value, f'{hook}() option "concurrency" must be a whole number of at '
                               f"least 1 (got {_text(value)})")

    def _options(self, hook: str, options: tree_sitter.Node) -> None:
        for key_node, key, value in self._entries(options):
            if key not in AGENT_OPTIONS:
                self.at(key_node, f'{hook}() option "{key}" is not supported and will fail at '
                                  f"the call (supported: {', '.join(AGENT_OPTIONS)})")
                continue
            literal = _literal(value)
            if literal is None or value is None:
                continue
            choices = _AGENT_CHOICES.get(key)
            if choices is not None and literal not in choices:
                self.at(value, f'{hook}() option "{key}" must be one of '
                               + ", ".join(f'"{e}"' for e in choices) + f' (got "{literal}")')
            elif key == "agentType" and self.agents is not None and literal not in self.agents:
                self.at(value, f'agent type "{literal}" is not defined (known types: '
                               + ", ".join(self.agents.names)
                               + "); add .claude/agents/<name>.md or pass --agents DIR")


def lint(body: str, *, agents: AgentRegistry | None = None) -> list[LintWarning]:
    """Warnings for ``body`` (a workflow file with its meta blanked out, so positions are the
    file's own), sorted by position. ``agents``: the registry ``agentType`` values are checked
    against (None: not checked)."""
    return _Linter(body, agents).run()
