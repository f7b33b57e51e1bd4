"""What a sandbox process imports (``_engines/subprocess/child.py``, step 2 of its start).

Every subprocess run starts a fresh interpreter, so each module the child imports costs every
run its start-up time and the process its memory for as long as the run lives. The child boots
exactly as ``sandbox.command`` starts it (isolated, the package registered without running its
``__init__``) and imports what ``child.main`` imports before it confines itself; then the
modules it holds are compared with what it must never load.
"""

from __future__ import annotations

import json
import subprocess

from dsh_workflow import EngineConfig
from dsh_workflow._engines.subprocess import sandbox

#: The child's imports before confinement, as ``child.main`` makes them.
_PROBE = """
from dsh_workflow._engines.subprocess.child import main
from dsh_workflow._engines.script import prelude
from dsh_workflow._engines.script.limits import RuntimeLimits
from dsh_workflow._engines.script.thread import ThreadRuntime
prelude.source()
print(json.dumps(sorted(sys.modules)))
"""

#: Never in a sandbox process: the library beyond the runtime (validation, providers, the
#: store, event loops, HTTP) and standard modules the child has no use for.
_FORBIDDEN = ("pydantic", "anyio", "trio", "asyncio", "httpx", "sqlite3", "jsonschema",
              "platform", "dsh_workflow._store", "dsh_workflow._providers",
              "dsh_workflow._engines.host", "dsh_workflow._config", "dsh_workflow._events")


def _child_modules() -> list[str]:
    spec = sandbox.child_spec(EngineConfig().model_dump(mode="json"), sandbox.SandboxPolicy())
    argv = sandbox.command(spec)
    boot = argv[argv.index("-c") + 1]
    head = boot[:boot.index("from dsh_workflow._engines.subprocess.child import main")]
    probe = [*argv[:argv.index("-c")], "-c", head + _PROBE, *argv[argv.index("-c") + 2:]]
    done = subprocess.run(probe, capture_output=True, text=True, env={}, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]  # a JSON list of names


def test_the_sandbox_process_imports_only_the_runtime() -> None:
    modules = _child_modules()
    assert "dsh_workflow._engines.script.thread" in modules, "the probe imported the runtime"
    loaded = [name for name in modules
              if any(name == bad or name.startswith(bad + ".") for bad in _FORBIDDEN)]
    assert loaded == []
