"""Secrets never leave (SPEC §23), run as real processes: the ``claude`` and ``codex`` presets
run fake agent CLIs (``leaky_clis/``) that echo their API key from the environment in their
answer, their stderr and their error; the key is in no output of ``run``, ``show``,
``show --agent``, ``logs`` or ``runs``, and in no byte of the store's files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _support import cli_env, run_cli

LEAKY = Path(__file__).resolve().parent / "leaky_clis"
META = "export const meta = { name: 'leaky', description: 'children that echo their key' };\n"
#: Matches none of the generic patterns (no ``sk-``, no ``key=``): only naming it redacts it.
SECRET = "ant4live7f3a9c2e4b1d8a6"


def cli(*argv: str | Path, store: Path, env_key: str) -> subprocess.CompletedProcess[str]:
    """The command with the agent CLIs' own keys dropped, the leaky fake CLIs first on PATH and
    the secret in ``env_key``."""
    env = cli_env(store=store, path_first=LEAKY, drop_prefixes=("ANTHROPIC_", "CODEX_", "CLAUDE_"))
    env[env_key] = SECRET
    return run_cli(*argv, env=env, timeout=90)


SCRIPT = META + """
log('starting');
const answers = await parallel([
  () => agent('LEAK please', { label: 'leak' }),
  () => agent('FAIL please', { label: 'fail' }),
]);
return { answers };
"""


@pytest.mark.parametrize(("preset", "env_key"), [("claude", "ANTHROPIC_API_KEY"),
                                                  ("codex", "CODEX_API_KEY")])
def test_a_key_the_child_echoes_is_in_no_output_and_no_store_byte(
        tmp_path: Path, preset: str, env_key: str) -> None:
    store = tmp_path / "runs.sqlite3"
    script = tmp_path / "s.js"
    script.write_text(SCRIPT, encoding="utf-8")
    done = cli("run", script, "--provider", preset, "--json", store=store, env_key=env_key)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    # The child did echo it: the answer and the failure say where it was.
    assert result["value"]["answers"][0].endswith("[REDACTED]")
    assert result["failures"][0]["seq"] == 2
    assert "[REDACTED]" in result["failures"][0]["message"]
    texts = [done.stdout, done.stderr]
    run_id = result["run_id"]
    for argv in (("show", run_id), ("show", run_id, "--json"), ("show", run_id, "--agent", "1"),
                 ("show", run_id, "--agent", "2", "--full"), ("logs", run_id), ("runs",)):
        shown = cli(*argv, store=store, env_key=env_key)
        assert shown.returncode == 0, (argv, shown.stderr)
        texts += [shown.stdout, shown.stderr]
    assert "[REDACTED]" in "".join(texts)
    for text in texts:
        assert SECRET not in text
    # The store's files: the database, its -wal and -shm, the owners' folder (and the script).
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert any(path.name == "runs.sqlite3" for path in files)
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path.name


def test_resume_warnings_name_no_key(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    script = tmp_path / "s.js"
    script.write_text(META + "return await agent('hi')", encoding="utf-8")
    answer = f"{sys.executable} -c \"import sys; print('ok ' + sys.stdin.read())\""
    done = cli("run", script, "--json", "--provider", "command", "--command", answer,
               store=store, env_key="OPENAI_API_KEY")
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    # Another command, holding the key in its argv: the resume warns that its calls run live.
    resumed = cli("resume", run_id, "--provider", "command", "--command", f"{answer} {SECRET}",
                  store=store, env_key="OPENAI_API_KEY")
    assert resumed.returncode == 0, resumed.stderr
    warning = next(line for line in resumed.stderr.splitlines() if "recorded with" in line)
    assert "[REDACTED]" in warning and SECRET not in resumed.stderr + resumed.stdout
