"""Start-up of the command line (SPEC §18): a command loads only what it uses.

``dsh-workflow --help`` must take at most 0.3 s and a trivial offline ``run`` at most 0.6 s on
the two-core reference machine; ``benchmarks/startup.py`` (S12) measures both. Timings are never
asserted here: these tests check, in real processes (``python -X importtime``), the property the
figures rest on — which third-party packages each command imports — and that the lazily
loaded public names still resolve.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _support import cli_env

META_HEADER = "export const meta = { name: 'startup', description: 'a start-up test' };\n"

#: Packages no command may load just to print its help.
HEAVY = ("pydantic", "pydantic_core", "anyio", "trio", "rich", "httpx", "jsonschema",
         "referencing", "quickjs", "yaml", "sqlite3", "asyncio", "tree_sitter")
#: Packages a trivial offline run (echo provider, no schema, progress on a pipe) does not need.
NOT_FOR_A_TRIVIAL_RUN = ("httpx", "jsonschema", "referencing", "rich", "yaml", "tree_sitter",
                         "asyncio", "dsh_workflow._tool.tool", "dsh_workflow._engines.subprocess",
                         "dsh_workflow._providers.openai", "dsh_workflow._providers.command")


def imported(*argv: str, cwd: Path | None = None, code: str | None = None
             ) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``python -X importtime -m dsh_workflow ARGV`` (or ``-c CODE``); return the process
    and every module it imported."""
    command = ["-c", code] if code is not None else ["-m", "dsh_workflow", *argv]
    proc = subprocess.run([sys.executable, "-X", "importtime", *command], cwd=cwd,
                          env=cli_env(), capture_output=True, text=True, timeout=60, check=False)
    modules = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
               if line.startswith("import time:") and "|" in line}
    return proc, modules


def loaded(modules: set[str], package: str) -> list[str]:
    return sorted(m for m in modules if m == package or m.startswith(package + "."))


def test_help_loads_no_heavy_package() -> None:
    proc, modules = imported("--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "run a workflow" in proc.stdout
    assert "dsh_workflow._cli.main" in modules  # the probe sees the CLI's own imports
    for package in HEAVY:
        assert not loaded(modules, package), f"--help imported {loaded(modules, package)}"


def test_every_subcommand_help_loads_no_heavy_package() -> None:
    for command in ("run", "check", "runs", "show", "resume", "list", "mcp", "ui", "worker"):
        proc, modules = imported(command, "--help")
        assert proc.returncode == 0, (command, proc.stderr[-2000:])
        heavy = [m for package in HEAVY for m in loaded(modules, package)]
        assert not heavy, f"{command} --help imported {heavy[:5]}"


def test_a_trivial_run_loads_only_what_it_uses(tmp_path: Path) -> None:
    script = tmp_path / "trivial.js"
    script.write_text(META_HEADER + "return 1;\n", encoding="utf-8")
    proc, modules = imported("run", str(script), "--store", str(tmp_path / "runs.sqlite3"),
                             cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == 1
    assert "dsh_workflow._engines.host" in modules  # it did run on the engine
    for package in NOT_FOR_A_TRIVIAL_RUN:
        assert not loaded(modules, package), f"run imported {loaded(modules, package)}"


def test_a_run_with_a_schema_still_checks_it(tmp_path: Path) -> None:
    """jsonschema loads on the first schema: the gate and the echo answer still work."""
    script = tmp_path / "schema.js"
    script.write_text(META_HEADER + """
const good = await agent('x', {schema: {type: 'object', properties: {a: {type: 'string'}},
                                        required: ['a']}});
let refused = null;
try { await agent('y', {schema: {type: 'nonsense'}}); } catch (e) { refused = e.code; }
return {good, refused};
""", encoding="utf-8")
    proc, modules = imported("run", str(script), "--no-store", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    value = json.loads(proc.stdout)
    assert isinstance(value["good"], dict) and isinstance(value["good"]["a"], str)
    assert value["refused"] == "UNSUPPORTED_SCHEMA"
    assert loaded(modules, "jsonschema")


def test_import_dsh_workflow_is_cheap_and_every_public_name_resolves() -> None:
    code = """
import sys
import dsh_workflow
assert "pydantic" not in sys.modules, "import dsh_workflow loaded pydantic"
names = dir(dsh_workflow)
assert set(dsh_workflow.__all__) <= set(names), set(dsh_workflow.__all__) - set(names)
for name in dsh_workflow.__all__:
    value = getattr(dsh_workflow, name)
    if isinstance(value, type):
        assert value.__module__ == "dsh_workflow", (name, value.__module__)
from dsh_workflow import *  # noqa: F403
try:
    dsh_workflow.NoSuchName
except AttributeError as exc:
    assert "NoSuchName" in str(exc)
else:
    raise AssertionError("an unknown name resolved")
print("ok", len(dsh_workflow.__all__))
"""
    proc, _ = imported(code=code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("ok ")


def test_providers_load_each_module_on_first_use() -> None:
    code = """
import sys
from dsh_workflow._providers import EchoProvider
assert "dsh_workflow._providers.openai" not in sys.modules
assert "httpx" not in sys.modules
from dsh_workflow._providers import OpenAIProvider, minimal_instance
assert minimal_instance({"type": "integer", "minimum": 3}) == 3
assert OpenAIProvider.__name__ == "OpenAIProvider"
print("ok")
"""
    proc, _ = imported(code=code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok"


@pytest.mark.parametrize("name", ["EchoProvider", "WorkflowError", "SQLiteRunStore"])
def test_a_lazy_name_is_the_defining_modules_object(name: str) -> None:
    import importlib

    import dsh_workflow

    home = dsh_workflow._homes()[name]
    module = importlib.import_module(home, "dsh_workflow")
    assert getattr(dsh_workflow, name) is getattr(module, name)
