"""The names ``hooks.js`` and ``boundary.js`` share are the ones ``script/prelude.py`` lists.

boundary.js is spliced into hooks.js as text, so each may use what the other declares at its top
level. Both files are parsed here (tree-sitter) and every name one uses that the other declares
must be listed in :mod:`dsh_workflow._engines.script.prelude`; a listed name neither declared by
one nor used by the other is stale and fails too. A name a file declares anywhere itself (a
local, a parameter) counts as its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import tree_sitter
import tree_sitter_javascript

from dsh_workflow._engines.script import prelude

_NAMES = ("identifier", "shorthand_property_identifier_pattern")
#: Nodes whose ``name`` field binds a name.
_DECLARING = ("variable_declarator", "function_declaration", "class_declaration",
              "function_expression", "generator_function_declaration", "class")


def _walk(node: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def _text(node: tree_sitter.Node) -> str:
    assert node.text is not None
    return node.text.decode()


def _bound(node: tree_sitter.Node | None) -> set[str]:
    """The names a declarator's or parameter's pattern binds."""
    if node is None:
        return set()
    return {_text(n) for n in _walk(node) if n.type in _NAMES}


class _File:
    """One runtime file, parsed as the body of the prelude's function (as it runs)."""

    def __init__(self, name: str) -> None:
        text = (Path(prelude.RUNTIME_JS) / name).read_text("utf-8")
        parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_javascript.language()))
        tree = parser.parse(("(function (config) {\n" + text + "\n})").encode())
        errors = [n for n in _walk(tree.root_node) if n.type == "ERROR" or n.is_missing]
        assert not errors, f"{name} does not parse: {errors[0]}"
        function = next(n for n in _walk(tree.root_node) if n.type == "function_expression")
        body = function.child_by_field_name("body")
        assert body is not None
        #: Names declared by the file's top-level statements.
        self.top: set[str] = set()
        for statement in body.named_children:
            if statement.type in ("lexical_declaration", "variable_declaration"):
                for declarator in statement.named_children:
                    self.top |= _bound(declarator.child_by_field_name("name"))
            elif statement.type in ("function_declaration", "class_declaration",
                                    "generator_function_declaration"):
                self.top |= _bound(statement.child_by_field_name("name"))
        #: Every name the file binds anywhere (its own, wherever it is used).
        self.own = set(self.top)
        for node in _walk(body):
            if node.type in _DECLARING:
                self.own |= _bound(node.child_by_field_name("name"))
            elif node.type == "formal_parameters":
                self.own |= _bound(node)
            elif node.type == "catch_clause" or node.type == "arrow_function":
                self.own |= _bound(node.child_by_field_name("parameter"))
        #: Names the file uses that it does not bind itself.
        self.free = {_text(n) for n in _walk(body)
                     if n.type in ("identifier", "shorthand_property_identifier")} - self.own


HOOKS, BOUNDARY = _File("hooks.js"), _File("boundary.js")


def test_the_two_files_declare_no_name_twice() -> None:
    assert not HOOKS.top & BOUNDARY.top


def test_boundary_uses_only_the_listed_names_of_hooks() -> None:
    used = HOOKS.top & BOUNDARY.free
    listed = set(prelude.HOOKS_NAMES_BOUNDARY_USES)
    assert not used - listed, f"boundary.js uses names of hooks.js not listed: {used - listed}"
    assert not listed - used, f"listed but not used by boundary.js: {listed - used}"


def test_hooks_uses_only_the_listed_names_of_boundary() -> None:
    used = BOUNDARY.top & HOOKS.free
    listed = set(prelude.BOUNDARY_NAMES_HOOKS_USES)
    assert not used - listed, f"hooks.js uses names of boundary.js not listed: {used - listed}"
    assert not listed - used, f"listed but not used by hooks.js: {listed - used}"


def test_the_prelude_splices_boundary_into_hooks() -> None:
    source = prelude.source()
    assert "//__BOUNDARY__" not in source
    assert "function materialize(" in source and "const agent = async function agent(" in source
