"""One name for one thing (SPEC §22): no two modules of the package define a class or a type
alias (a CapWords name bound at module level) of the same name, so a type's name found in a
traceback, a docstring or a review names one type."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import dsh_workflow

PACKAGE = Path(dsh_workflow.__file__).resolve().parent

#: Names still defined twice, each left to the part of the tree it lives in: ``Outcome`` is the
#: CLI's run outcome (``_cli/execute.py``) and the wire's settle outcome (``_engines/wire.py``).
NOT_YET_ONE: set[str] = set()


def _type_names(tree: ast.Module) -> list[str]:
    """Classes and type aliases (``Name = ...`` with a CapWords name) the module defines."""
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)
                      and t.id.lstrip("_")[:1].isupper() and not t.id.isupper()]
    return names


def test_every_type_name_is_defined_once() -> None:
    homes: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        for name in _type_names(ast.parse(path.read_text(encoding="utf-8"))):
            homes[name].append(str(path.relative_to(PACKAGE)))
    repeated = {name: where for name, where in homes.items()
                if len(where) > 1 and name not in NOT_YET_ONE}
    assert not repeated, "\n".join(f"{name}: {', '.join(where)}"
                                   for name, where in sorted(repeated.items()))
