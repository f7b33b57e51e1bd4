"""Runs under control from the command line (README, "Runs under control"), as real processes on
a real store file: ``show --agent``, ``cancel`` from another process, ``resume --rerun``,
``resume`` on the recorded provider, and ``replay-check``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
HEADER = "export const meta = { name: 'control-cli', description: 'runs under control' };\n"


def env_for() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "DSH_WORKFLOW_"))
           and k not in ("COLUMNS", "FORCE_COLOR")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["TERM"] = "dumb"
    return env


def cli(*argv: str | Path, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dsh_workflow", *map(str, argv)], cwd=cwd,
                          env=env_for(), capture_output=True, text=True, encoding="utf-8",
                          timeout=timeout)


def start(*argv: str | Path, cwd: Path, err: Path) -> subprocess.Popen[bytes]:
    with err.open("wb") as err_file:
        return subprocess.Popen([sys.executable, "-m", "dsh_workflow", *map(str, argv)], cwd=cwd,
                                env=env_for(), stdout=subprocess.PIPE, stderr=err_file)


def wait_for(path: Path, pattern: str, timeout: float = 30) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(pattern, path.read_text(encoding="utf-8", errors="replace")
                          if path.exists() else "")
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"{pattern!r} not seen in {path}: {path.read_text()!r}")


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def run_id_of(stderr: str) -> str:
    found = re.search(f"run id: ({UUID})|\\(run ({UUID})\\)", stderr)
    assert found, stderr
    return found.group(1) or found.group(2)


def runs_json(cwd: Path, store: Path) -> list[dict[str, Any]]:
    done = cli("runs", "--json", "--store", store, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]  # a JSON array


# -- show --agent ------------------------------------------------------------------------------


def test_show_agent_prints_what_a_call_was_asked_and_answered(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    agents = tmp_path / "agents"
    agents.mkdir()
    write(agents, "critic.md", "---\nname: critic\ndescription: criticises\nmodel: big\n---\n"
          "You are a harsh critic.\n")
    script = write(tmp_path, "flow.js", HEADER + """
phase('ask');
const long = await agent('tell me ' + 'x'.repeat(5000), {label: 'long one', effort: 'low'});
const typed = await agent('typed', {agentType: 'critic', label: 'critic',
  schema: {type: 'object', properties: {s: {type: 'string', minLength: 3, maxLength: 2}},
           required: ['s']}});
return [long.length, typed];
""")
    done = cli("run", script, "--store", store, "--agents", agents, "--model-alias",
               "big=model-big", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_id = run_id_of(done.stderr)
    first = cli("show", run_id, "--agent", "1", "--store", store, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    text = first.stdout
    assert "agent:       1  long one" in text and "phase:       ask" in text
    assert "outcome:     completed" in text and "effort:      low" in text
    assert "tell me xxx" in text and "[folded: " in text and "--full" in text
    assert len(text) < 6000  # the 5,000-character prompt and its echo are folded
    full = cli("show", run_id, "--agent", "1", "--full", "--store", store, cwd=tmp_path)
    assert "x" * 5000 in full.stdout and "[folded" not in full.stdout
    second = cli("show", run_id, "--agent", "2", "--store", store, cwd=tmp_path).stdout
    assert "outcome:     failed" in second
    assert "failure:     " in second  # no answer can satisfy the schema
    assert "You are a harsh critic." in second and "agent type:  critic" in second
    assert "model:       model-big" in second and '"maxLength": 2' in second
    as_json = json.loads(cli("show", run_id, "--agent", "2", "--json", "--store", store,
                             cwd=tmp_path).stdout)
    assert as_json["seq"] == 2 and as_json["options"]["agent_type"] == "critic"
    assert as_json["model_used"] == "model-big" and as_json["failure"]["kind"]
    missing = cli("show", run_id, "--agent", "3", "--store", store, cwd=tmp_path)
    assert missing.returncode == 2
    assert "has no agent() call 3 (it has calls 1-2)" in missing.stderr
    assert cli("show", "nope", "--agent", "1", "--store", store,
               cwd=tmp_path).returncode == 2
