"""A run ended by ``BUDGET_EXCEEDED`` tells how to resume it with a raised budget (docs/embedding.md,
"Cost in money"), and the command it prints, run as a real process, replays every call the
first run paid for and runs only the rest."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from _support import run_cli

SCRIPT = """export const meta = { name: 'budgeted', description: 'a budget test' };
const out = [];
for (let i = 1; i <= 5; i++) out.push(await agent('step ' + i));
return out;
"""


def cli(argv: list[str], cwd: Path, store: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*argv, cwd=cwd, store=store)


def paid_agent(tmp_path: Path) -> tuple[str, Path]:
    """A command agent that logs each prompt it answers and reports 100 tokens, $0.10."""
    calls = tmp_path / "calls.log"
    script = tmp_path / "agent.py"
    script.write_text(
        "import json, sys\n"
        "prompt = sys.stdin.read()\n"
        f"open({str(calls)!r}, 'a').write(prompt + '\\n')\n"
        "usage = {'input_tokens': 60, 'output_tokens': 40, 'cost_usd': 0.1}\n"
        "sys.stderr.write('dsh-workflow-usage: ' + json.dumps(usage) + '\\n')\n"
        "print('did ' + prompt)\n")
    return f"{sys.executable} {script}", calls


@pytest.mark.parametrize(("limit", "hint_option", "raised"), [
    (["--budget", "250"], "--budget", "500"),
    (["--budget-usd", "0.25"], "--budget-usd", "0.5"),
])
def test_the_hint_raises_the_budget_and_the_resume_replays_the_paid_calls(
        tmp_path: Path, limit: list[str], hint_option: str, raised: str) -> None:
    store = tmp_path / "runs.sqlite3"
    (tmp_path / "wf.js").write_text(SCRIPT, encoding="utf-8")
    command, calls = paid_agent(tmp_path)
    first = cli(["run", "wf.js", "--provider", "command", "--command", command, *limit],
                tmp_path, store)
    assert first.returncode == 1, first.stderr
    assert "BUDGET_EXCEEDED" in first.stdout
    if hint_option == "--budget-usd":
        assert "dollar budget" in first.stdout
    assert calls.read_text().split("\n")[:-1] == ["step 1", "step 2", "step 3"]
    found = re.search(r"Raise the budget and resume with: (dsh-workflow resume (\S+) "
                      rf"{re.escape(hint_option)} (\S+).*)$", first.stderr, re.MULTILINE)
    assert found is not None, first.stderr
    hinted, run_id, amount = found.groups()
    assert amount == raised
    argv = shlex.split(hinted)
    assert argv[:3] == ["dsh-workflow", "resume", run_id]
    resumed = cli(argv[1:], tmp_path, store)
    assert resumed.returncode == 0, resumed.stderr
    assert "3 replayed" in resumed.stderr
    # Only the two calls the first run never paid for ran again.
    assert calls.read_text().split("\n")[:-1] == [f"step {i}" for i in (1, 2, 3, 4, 5)]
