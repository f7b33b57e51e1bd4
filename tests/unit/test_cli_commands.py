"""The command line's structure rules (``dsh_workflow/_cli/commands.py``): one way to register a
command, one function that finds the run store. Checked on the source."""

from __future__ import annotations

import ast
from pathlib import Path

import dsh_workflow._cli as cli_package
from dsh_workflow._cli import main

CLI = Path(cli_package.__file__).resolve().parent


def _calls(tree: ast.AST, attribute: str) -> bool:
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr == attribute for node in ast.walk(tree))


def test_every_command_module_registers_through_the_table() -> None:
    registered = {register.__module__ for register in main.COMMANDS}
    adding = set()
    for path in sorted(CLI.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if _calls(tree, "add_parser"):
            adding.add(f"dsh_workflow._cli.{path.stem}")
            functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
            assert "register" in functions, f"{path.name} adds parsers outside register()"
    assert adding == registered, (adding ^ registered)
    assert all(register.__name__ == "register" for register in main.COMMANDS)


def test_only_stores_resolves_the_store() -> None:
    for path in sorted(CLI.glob("*.py")):
        if path.name == "stores.py":
            continue
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        reads_option = any(isinstance(node, ast.Attribute) and node.attr == "store"
                           and isinstance(node.value, ast.Name) and node.value.id == "ns"
                           for node in ast.walk(tree))
        assert not reads_option, f"{path.name} reads ns.store: use stores.store_path(ns)"
        assert "DSH_WORKFLOW_STORE\"" not in source and "ENV_VAR" not in source, path.name
