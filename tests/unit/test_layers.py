"""Who may import whom inside the package (ARCHITECTURE.md, "Layers"), checked on the source.

A layer may import its own modules and the layers listed for it; anything else is a violation,
named with the importing module and the imported one. Every import counts, those inside
functions (kept there so that ``dsh-workflow --help`` loads little) and under
``TYPE_CHECKING`` included. ARCHITECTURE.md's table of layers is the picture of :data:`ALLOWED`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import dsh_workflow
from dsh_workflow._cli import main as cli_main

PACKAGE = Path(dsh_workflow.__file__).resolve().parent
ARCHITECTURE = PACKAGE.parent / "ARCHITECTURE.md"

#: The core: the seam's data types and the rules every layer shares (no I/O of its own).
CORE = {"_errors", "_meta", "_config", "_depth", "_subagent", "_result", "_request", "_events",
        "_run", "_tally", "_script", "_metafile", "_schema", "_schema_limits", "_patterns",
        "_schema_instance", "_agents", "_library", "_loop", "_failure", "_prices",
        "_secrets", "_text", "_questions", "_agent_options", "_provider_options",
        "_telemetry", "_option_table"}

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
    # The command line is a client: the engines only through the public API (``api``).
    "_cli": {"core", "_store", "_providers", "_tool", "integrations", "_ui", "api"},
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


# ---- the engine package's floors ---------------------------------------------------------------

#: The floors of ``_engines/`` (ARCHITECTURE.md): the script side, the host side of a run, and the
#: engines on top (everything else in ``_engines/``: the engines, their base, ``subprocess/``).
#: floor -> the floors it may import besides itself; every floor may import the core.
ENGINE_FLOORS: dict[str, set[str]] = {
    "script": set(),
    "host": {"_store", "script"},
    "engines": {"_store", "script", "host"},
}
#: The host imports of the script floor only the shapes that cross and the runtime's limits.
HOST_SEES_OF_SCRIPT = {"dsh_workflow._engines.script.wire", "dsh_workflow._engines.script.limits"}


def _floor(module: str) -> str:
    """The floor of a module, or its layer outside ``_engines/``."""
    parts = module.split(".")
    if len(parts) < 2 or parts[1] != "_engines":
        return _layer(module)
    if len(parts) > 2 and parts[2] in ("script", "host"):
        return parts[2]
    return "engines"


def test_the_engine_floors_exist() -> None:
    for floor in ("script", "host"):
        assert (PACKAGE / "_engines" / floor / "__init__.py").is_file(), floor


def test_every_engine_import_respects_the_floors() -> None:
    violations = []
    for path in sorted((PACKAGE / "_engines").rglob("*.py")):
        for src, dst in _imports(path):
            mine, theirs = _floor(src), _floor(dst)
            if mine == theirs or theirs == "core":
                continue
            if theirs not in ENGINE_FLOORS[mine]:
                violations.append(f"{src} ({mine}) imports {dst} ({theirs})")
            elif mine == "host" and theirs == "script" and dst not in HOST_SEES_OF_SCRIPT:
                violations.append(f"{src} (host) imports {dst}: of the script floor the host "
                                  f"sees only {sorted(HOST_SEES_OF_SCRIPT)}")
    assert not violations, "\n".join(violations)


# ---- no import circle --------------------------------------------------------------------------

def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def _import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports anywhere: at module level, under
    ``TYPE_CHECKING`` (a circle of types is a circle too) and inside functions (a circle that
    only closes when a function runs is a circle all the same)."""
    paths = {_module_name(p)[0]: p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        is_package = _module_name(path)[1]
        package = module.split(".") if is_package else module.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
                continue
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1]
                                + ([node.module] if node.module else []))
            for alias in node.names:  # a name that is a module is that module, else the base's
                targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base)
        graph[module] = {t for t in targets if t in paths and t != module}
    return graph


def test_no_import_circle_in_the_package() -> None:
    graph = _import_graph()
    circles: list[list[str]] = []
    done: set[str] = set()

    def visit(module: str, trail: list[str]) -> None:
        if module in trail:
            circles.append([*trail[trail.index(module):], module])
            return
        if module in done:
            return
        for target in sorted(graph[module]):
            visit(target, [*trail, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert not circles, "\n".join(" -> ".join(circle) for circle in circles)


def test_the_import_graph_sees_module_level_imports() -> None:
    """The circle check is only as good as its graph: the sandbox child's imports are in it."""
    graph = _import_graph()
    assert "dsh_workflow._engines.subprocess.child" in graph
    assert graph["dsh_workflow._engines.subprocess.child"], "the child's imports were not seen"


def test_the_import_graph_sees_imports_inside_functions() -> None:
    """``run`` imports the module that executes a plan only inside its handler (start-up
    time); the graph has that edge all the same."""
    assert "dsh_workflow._cli.execute" in _import_graph()["dsh_workflow._cli.run"]


# ---- the command line: a client, whose commands share only non-command modules ---------------

#: The command modules: those whose ``register`` is in the table of commands (``main.py``).
COMMAND_MODULES = {register.__module__ for register in cli_main.COMMANDS}


def test_command_modules_do_not_import_each_other() -> None:
    """What two commands share lives in a module of ``_cli/`` that registers no command (plan,
    options, output, stores, records, saved, ...) or in the core."""
    graph = _import_graph()
    assert len(COMMAND_MODULES) >= 7, COMMAND_MODULES
    violations = [f"{module} imports {target}" for module in sorted(COMMAND_MODULES)
                  for target in sorted(graph[module])
                  if target in COMMAND_MODULES or target.rsplit(".", 1)[0] in COMMAND_MODULES]
    assert not violations, "\n".join(violations)


def test_the_command_line_imports_nothing_of_the_engines_host_floor() -> None:
    """What the command line needs of a run's host is declared on the seam or in the core."""
    violations = [f"{src} imports {dst}"
                  for path in sorted((PACKAGE / "_cli").rglob("*.py"))
                  for src, dst in _imports(path)
                  if _floor(dst) == "host"]
    assert not violations, "\n".join(violations)


# ---- ARCHITECTURE.md's picture ----------------------------------------------------------------

#: The names ARCHITECTURE.md's table gives the layers.
_LAYER_NAMES = {"core": "core", "store": "_store", "engines": "_engines",
                "providers": "_providers", "tool": "_tool", "integrations": "integrations",
                "viewer": "_ui", "testing": "testing", "api": "api", "cli": "_cli"}


def _architecture_layers() -> dict[str, tuple[str, str]]:
    """layer -> (its modules, what it may import) as ARCHITECTURE.md's "Layers" table says."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text[text.index("## Layers"):]
    rows: dict[str, tuple[str, str]] = {}
    for line in section.splitlines()[1:]:
        if line.startswith("#"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] in _LAYER_NAMES:
            rows[_LAYER_NAMES[cells[0]]] = (cells[1], cells[2])
    return rows


def test_architecture_md_pictures_the_layers_as_checked() -> None:
    rows = _architecture_layers()
    assert set(rows) == set(ALLOWED) - {"__main__"}, set(rows) ^ (set(ALLOWED) - {"__main__"})
    for layer, (_, may_import) in rows.items():
        # "core, tool, providers", "the core only", "core, store, ... (the engines through api)"
        named = re.sub(r"\([^)]*\)", "", may_import)
        said = set() if named.strip() == "the core only" else {
            _LAYER_NAMES[item.strip()] for item in named.split(",")}
        assert said == ALLOWED[layer], f"{layer}: ARCHITECTURE.md says {sorted(said)}, the " \
                                       f"check allows {sorted(ALLOWED[layer])}"
    core = set(re.findall(r"`(_[a-z_]+)`", re.sub(r"\([^)]*\)", "", rows["core"][0])))
    assert core == CORE, f"ARCHITECTURE.md's core differs: {sorted(core ^ CORE)}"


#: The integrations' third-party packages: extras (ARCHITECTURE.md, "Layers").
EXTRAS = ("mcp", "temporalio", "langchain_core", "agents", "pydantic_ai", "uvicorn", "starlette")


def test_no_layer_below_the_integrations_imports_an_extra() -> None:
    """Nothing in the core, the store, the engines, the providers, the tool or the viewer imports
    an extra (the CLI and the integrations may)."""
    violations = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module, _ = _module_name(path)
        if _layer(module) in ("integrations", "_cli", "__main__", "_ui"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            violations += [f"{module} imports {name}" for name in names
                           if name.split(".")[0] in EXTRAS]
    assert not violations, "\n".join(violations)
