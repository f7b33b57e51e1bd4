"""Truthful outcomes on the command line (SPEC §17), run as a real process: a command typo is
one clear line, failed children show their reasons, the final line and the ``warning:`` summary
count them, ``runs``/``show``/``logs`` list them, ``--max-failed-agents`` ends a run."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
META_HEADER = "export const meta = { name: 'cli-failures', description: 'failed children' };\n"
_STORE_DIR = tempfile.TemporaryDirectory(prefix="dsh-cli-failures-")
STORE = Path(_STORE_DIR.name) / "runs.sqlite3"


def cli(*argv: str | Path, timeout: float = 60, store: Path = STORE) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "DSH_WORKFLOW_")) and k not in ("COLUMNS", "FORCE_COLOR")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["TERM"] = "dumb"
    env["DSH_WORKFLOW_STORE"] = str(store)
    return subprocess.run(
        [sys.executable, "-m", "dsh_workflow", *map(str, argv)], cwd=REPO, env=env,
        capture_output=True, text=True, encoding="utf-8", timeout=timeout)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_command_typo_is_one_clear_line(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", META_HEADER + "return await agent('hi')")
    done = cli("run", script, "--provider", "command", "--command", "no-such-agent-cli-xyz --x")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "Error: --command 'no-such-agent-cli-xyz --x': the command 'no-such-agent-cli-xyz' was "
        "not found on PATH"]
    assert done.stdout == ""


def test_a_command_that_is_not_executable_is_one_clear_line(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", META_HEADER + "return await agent('hi')")
    agent = write(tmp_path, "agent.sh", "#!/bin/sh\necho hi\n")
    done = cli("run", script, "--provider", "command", "--command", str(agent))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"Error: --command '{agent}': the command '{agent}' is not executable"]
