"""The public surface: one import, a sorted __all__, and names that read as dsh_workflow.X."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import dsh_workflow

SPEC_NAMES = {
    "WorkflowMeta", "PhaseMeta", "WorkflowStartRequest", "WorkflowRun", "WorkflowResult",
    "WorkflowError", "WorkflowErrorCode", "EngineConfig", "RunInfo", "WorkflowStarted",
    "WorkflowEnded", "PhaseStarted", "LogEmitted", "AgentStarted", "AgentEnded",
    "SubagentRequest", "SubagentResult", "Usage", "SubagentProvider", "EchoProvider",
    "OpenAIProvider", "CommandProvider", "QuickJSEngine", "WorkflowTool",
}


def test_all_is_sorted_and_complete() -> None:
    assert dsh_workflow.__all__ == sorted(dsh_workflow.__all__)
    assert set(dsh_workflow.__all__) >= SPEC_NAMES
    for name in dsh_workflow.__all__:
        assert hasattr(dsh_workflow, name), name


def test_public_classes_name_the_package() -> None:
    for name in dsh_workflow.__all__:
        obj = getattr(dsh_workflow, name)
        if isinstance(obj, type):
            assert obj.__module__ == "dsh_workflow", name


def test_error_codes_are_the_specified_set() -> None:
    assert {code.value for code in dsh_workflow.WorkflowErrorCode} == {
        "SCRIPT_PARSE", "META_INVALID", "INVALID_ARGUMENT", "UNSUPPORTED_OPTION",
        "UNSUPPORTED_SCHEMA", "AGENT_CAP", "ITEM_CAP", "AGENT_FAILED", "RESULT_UNSERIALIZABLE",
        "RESOURCE_LIMIT", "TIMEOUT", "CANCELLED", "BUDGET_EXCEEDED", "SCRIPT_ERROR"}


def _typing_block() -> list[ast.stmt]:
    """The ``if TYPE_CHECKING:`` block of ``dsh_workflow/__init__.py`` as a type checker reads it."""
    tree = ast.parse(Path(dsh_workflow.__file__).read_text(encoding="utf-8"))
    blocks = [node.body for node in tree.body if isinstance(node, ast.If)
              and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"]
    assert len(blocks) == 1, "the public names are one 'if TYPE_CHECKING:' block"
    return blocks[0]


def test_the_public_names_are_written_once_and_read_as_a_type_checker_reads_them() -> None:
    """SPEC §28: each public name is one line of the typing block; the lazy loading and
    ``__all__`` are read from it, and they read what mypy and pyright see."""
    seen: dict[str, str] = {}
    for statement in _typing_block():
        assert isinstance(statement, ast.ImportFrom), ast.unparse(statement)
        assert len(statement.names) == 1, f"one name a line: {ast.unparse(statement)}"
        alias = statement.names[0]
        assert alias.asname == alias.name, f"re-exported as itself: {ast.unparse(statement)}"
        seen[alias.name] = "." * statement.level + (statement.module or "")
    assert dsh_workflow._homes() == seen
    assert dsh_workflow.__all__ == sorted(seen)
    assert set(dir(dsh_workflow)) >= set(seen)


def test_a_public_name_written_otherwise_is_refused() -> None:
    good = ["if TYPE_CHECKING:\n", "    from ._x import A as A  # why\n", "\n",
            "    # a comment\n", "    from ._y.z import B as B\n", "\n", "X = 1\n",
            "    from ._w import C as C\n"]
    assert dsh_workflow._read_homes(good) == {"A": "._x", "B": "._y.z"}
    for bad in ("    from ._x import A\n", "    from ._x import A as B\n",
                "    from ._x import A as A, B as B\n", "    import os\n"):
        with pytest.raises(ImportError, match="from <module> import <Name> as <Name>"):
            dsh_workflow._read_homes(["if TYPE_CHECKING:\n", bad])


def test_importing_the_package_reads_and_loads_nothing_more() -> None:
    code = ("import sys, dsh_workflow as d\n"
            "before = d._HOME is None and not any(m.startswith('dsh_workflow.') for m in sys.modules)\n"
            "d.EngineConfig\n"
            "print(before, d._HOME is not None)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.split() == ["True", "True"]
