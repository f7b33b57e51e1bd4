"""Who may import whom inside the package (ARCHITECTURE.md, "Layers"), checked on the source.

A layer may import its own modules and the layers listed for it; anything else is a violation,
named with the importing module and the imported one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import dsh_workflow

PACKAGE = Path(dsh_workflow.__file__).resolve().parent

#: The core: the seam's data types and the rules every layer shares (no I/O of its own).
CORE = {"_errors", "_meta", "_config", "_depth", "_subagent", "_result", "_request", "_events",
        "_run", "_tally", "_script", "_metafile", "_schema", "_schema_limits", "_patterns",
        "_schema_instance", "_agents", "_library", "_loop", "_failure", "_prices"}

#: layer -> the layers it may import besides itself (the core may import only the core).
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "_store": {"core"},
    "_engines": {"core", "_store"},
    "_providers": {"core"},
    "_tool": {"core"},
    "integrations": {"core", "_tool", "_providers"},
    "_ui": {"core", "_store"},
    "testing": {"core"},
    "_cli": {"core", "_store", "_engines", "_providers", "_tool", "integrations", "_ui", "api"},
    "api": {"core", "_store", "_engines", "_providers", "_tool"},
    "__main__": {"_cli"},
}


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "api"
    return "core" if parts[1] in CORE else parts[1]


def _imports(path: Path) -> list[tuple[str, str]]:
    """(importing module, imported module) for every import of a package module in ``path``."""
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    module = ".".join(parts)
    package = parts if is_package else parts[:-1]
    found: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if node.module is None:  # "from . import texts": each name is a module
                found += [(module, f"{target}.{alias.name}") for alias in node.names]
            else:
                found.append((module, target))
        elif isinstance(node, ast.Import):
            found += [(module, alias.name) for alias in node.names]
    return [(src, dst) for src, dst in found if dst.split(".")[0] == "dsh_workflow"]


def test_every_import_respects_the_layers() -> None:
    violations = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for src, dst in _imports(path):
            mine, theirs = _layer(src), _layer(dst)
            if mine != theirs and theirs not in ALLOWED[mine]:
                violations.append(f"{src} ({mine}) imports {dst} ({theirs})")
    assert not violations, "\n".join(violations)


def test_every_layer_is_known() -> None:
    layers = {_layer(f"dsh_workflow.{p.name.removesuffix('.py')}") for p in PACKAGE.glob("*")
              if p.name != "__init__.py" and (p.suffix == ".py" or (p / "__init__.py").exists())}
    assert layers <= set(ALLOWED), layers - set(ALLOWED)
