"""Hostile files in the folders the command line reads (SPEC §19): they are skipped like any
bad file and never stop ``run`` or ``check``. The CLI runs as a real process."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from _support import run_cli

META = "export const meta = { name: 'hostile', description: 'reads hostile folders' };\n"


def test_deeply_nested_agent_front_matter_is_skipped_by_run_and_check(tmp_path: Path) -> None:
    home = tmp_path / "home"
    agents = home / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "deep.md").write_text("---\nname: deep\nx:\n  " + "- " * 50000 + "x\n---\nbody\n",
                                    "utf-8")
    (agents / "deeper.md").write_text("---\nname: deeper\nx: " + "[" * 50000 + "\n---\n",
                                      "utf-8")
    (agents / "reviewer.md").write_text("---\nname: reviewer\n---\nYou review.\n", "utf-8")
    script = tmp_path / "s.js"
    script.write_text(META + "return await agent('go', {agentType: 'reviewer'});", "utf-8")
    checked = run_cli("check", script, cwd=tmp_path, home=home)
    assert checked.returncode == 0, checked.stderr
    ran = run_cli("run", script, "--no-store", "-q", cwd=tmp_path, home=home)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == "echo: go"
    for stderr in (checked.stderr, ran.stderr):
        assert "Traceback" not in stderr and "RecursionError" not in stderr
        assert f"Warning: skipped agent definition {agents / 'deep.md'}: " in stderr
        assert f"Warning: skipped agent definition {agents / 'deeper.md'}: " in stderr
        assert "nested too deeply" in stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_a_fifo_named_js_never_blocks_run_and_the_timeout_fires(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    folder = tmp_path / ".dsh-workflow" / "workflows"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "pipe.js")
    (folder / "ok.js").write_text(
        "export const meta = { name: 'ok', description: 'fine' };\nreturn 'saved'", "utf-8")
    script = tmp_path / "s.js"
    script.write_text(META + """
        const out = [await workflow('ok')];
        try { await workflow({scriptPath: '.dsh-workflow/workflows/pipe.js'}); out.push('ran'); }
        catch (e) { log('refused: ' + e.message); }
        out.push(await agent('slow'));
        return out;""", "utf-8")
    started = time.monotonic()
    ran = run_cli("run", script, "--no-store", "--json", "--timeout", "2", "--echo-latency", "60",
              cwd=tmp_path, home=home, timeout=40)
    assert time.monotonic() - started < 30
    assert ran.returncode == 1, ran.stderr
    result = json.loads(ran.stdout)
    assert result["stop_reason"] == "error" and result["error_code"] == "TIMEOUT", result
    assert "--timeout 2" in result["error"] or "timeout" in result["error"].lower()
    assert "refused: " in ran.stderr and "is not a .js file inside the workflow folders" \
        in ran.stderr, ran.stderr
    listed = run_cli("list", cwd=tmp_path, home=home, timeout=40)
    assert listed.returncode == 0, listed.stderr
    assert "ok" in listed.stdout and "pipe.js" in listed.stderr
    assert "not a regular file" in listed.stderr
