"""Parked runs on the command line (docs/durable-runs.md, "Runs that wait"; docs/cli.md): a run
without a terminal parks on its questions (exit 75) and prints how to answer each;
``dsh-workflow answer`` records an answer (checked: an invalid one records nothing) and
continues the parked run in its process; ``--no-continue`` only records; ``resume`` continues
too, and before a provider's limit resets says when it is due and calls nothing. Real
processes against a real store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[2]
SCRIPT = """export const meta = { name: 'approve', description: 'asks before it signs' };
const plan = await agent('draft');
const ok = await checkpoint('Ship ' + plan + '?', {details: 'goes live'});
const who = await ask('Who signs?', {choices: ['ana', 'bo']});
return {plan, ok, who, done: await agent('sign ' + who)};
"""


def cli(argv: list[str], cwd: Path, store: Path,
        extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "DSH_WORKFLOW_", "CLAUDE_")) and k not in ("COLUMNS",)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["TERM"] = "dumb"
    env["DSH_WORKFLOW_STORE"] = str(store)
    env.update(extra or {})
    return subprocess.run([sys.executable, "-m", "dsh_workflow", *argv], cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          encoding="utf-8", timeout=120)


def paid_agent(tmp_path: Path) -> tuple[list[str], Path]:
    """``--provider command`` options of an agent that logs each prompt it answers."""
    calls = tmp_path / "calls.log"
    script = tmp_path / "agent.py"
    script.write_text("import sys\nprompt = sys.stdin.read()\n"
                      f"open({str(calls)!r}, 'a').write(prompt + '\\n')\n"
                      "print('did ' + prompt, end='')\n")
    return ["--provider", "command", "--command", f"{sys.executable} {script}"], calls


def test_a_parked_run_is_answered_and_continued_by_answer(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    (tmp_path / "wf.js").write_text(SCRIPT)
    provider, calls = paid_agent(tmp_path)
    parked = cli(["run", "wf.js", *provider], tmp_path, store)
    assert parked.returncode == 75, parked.stderr
    document = json.loads(parked.stdout)
    assert document["stop_reason"] == "waiting" and document["waiting_reason"] == "question"
    run_id = document["run_id"]
    assert [q["qid"] for q in document["pending"]] == ["q1"]
    assert "q1 (checkpoint): Ship did draft?" in parked.stderr
    assert f"answer with: dsh-workflow answer {run_id} q1 --approve" in parked.stderr

    listed = cli(["runs"], tmp_path, store)
    assert "waiting" in listed.stdout
    shown = json.loads(cli(["show", run_id, "--json"], tmp_path, store).stdout)
    assert shown["status"] == "waiting" and shown["waiting_reason"] == "question"
    assert [q["qid"] for q in shown["pending"]] == ["q1"]
    assert "waiting:     for answers to q1 (Ship did draft?)" in cli(
        ["show", run_id], tmp_path, store).stdout
    assert "[checkpoint q1] Ship did draft?" in cli(["logs", run_id], tmp_path, store).stdout

    refused = cli(["answer", run_id, "--json", '"yes"'], tmp_path, store)
    assert refused.returncode == 2 and "true (approve) or false (reject)" in refused.stderr
    assert [q["qid"] for q in json.loads(
        cli(["show", run_id, "--json"], tmp_path, store).stdout)["pending"]] == ["q1"]

    again = cli(["answer", run_id, "--approve"], tmp_path, store)
    assert again.returncode == 75, again.stderr
    second = json.loads(again.stdout)
    assert [q["qid"] for q in second["pending"]] == ["q2"]
    assert "choices: ana, bo" in again.stderr and "[agent 1 replayed]" in again.stderr
    assert f"dsh-workflow answer {second['run_id']} q2 --json" in again.stderr

    done = cli(["answer", second["run_id"][:8], "q2", "--json", '"bo"'], tmp_path, store)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"plan": "did draft", "ok": True, "who": "bo",
                                       "done": "did sign bo"}
    assert calls.read_text().split() == ["draft", "sign", "bo"]  # the draft was paid once
    assert "[answered q2] by command" not in cli(["logs", second["run_id"]], tmp_path,
                                                 store).stdout  # answered once it had parked


def test_answer_no_continue_records_and_resume_continues(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    (tmp_path / "wf.js").write_text(
        "export const meta = {name: 'two', description: 'two questions at once'};\n"
        "const [a, b] = await Promise.all([ask('A?'), checkpoint('B?')]);\n"
        "return {a, b};\n")
    parked = cli(["run", "wf.js"], tmp_path, store)
    assert parked.returncode == 75
    run_id = json.loads(parked.stdout)["run_id"]
    ambiguous = cli(["answer", run_id, "--json", '"x"'], tmp_path, store)
    assert ambiguous.returncode == 2 and "q1, q2" in ambiguous.stderr
    one = cli(["answer", run_id, "q1", "--json", '"first"'], tmp_path, store)
    assert one.returncode == 75 and "q2 (checkpoint): B?" in one.stderr  # not continued yet
    twice = cli(["answer", run_id, "q1", "--json", '"again"'], tmp_path, store)
    assert twice.returncode == 2 and "already answered" in twice.stderr
    recorded = cli(["answer", run_id, "q2", "--reject", "--no-continue"], tmp_path, store)
    assert recorded.returncode == 0 and recorded.stdout == ""
    resumed = cli(["resume", run_id], tmp_path, store)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"a": "first", "b": False}


def test_resume_before_a_limit_resets_says_when_and_calls_nothing(tmp_path: Path) -> None:
    from dsh_workflow import (
        EngineConfig,
        QuickJSEngine,
        SQLiteRunStore,
        SubagentResult,
        WorkflowStartRequest,
    )
    from dsh_workflow.testing import FunctionProvider

    store = tmp_path / "runs.sqlite3"
    reset = datetime.now(UTC) + timedelta(hours=2)
    limited = FunctionProvider(lambda request: SubagentResult(
        stop_reason="error", error="usage limit", error_kind="limit", retry_at=reset))

    async def park() -> str:
        async with SQLiteRunStore(store) as opened, \
                QuickJSEngine(EngineConfig(), provider=limited, store=opened) as engine:
            run = engine.start(WorkflowStartRequest(
                meta={"name": "limited", "description": "d"}, script="return await agent('x')"))
            result = await run.result()
            await run.dispose()
            assert result.waiting_reason == "limit"
            return run.id

    run_id = anyio.run(park)
    early = cli(["resume", run_id], tmp_path, store)
    assert early.returncode == 75, early.stderr
    assert "usage limit to reset" in early.stderr and "nothing was called" in early.stderr
    assert "in 1h 59m" in early.stderr or "in 2h" in early.stderr
    assert reset.strftime("%Y-%m-%d %H:%M") in early.stderr
    shown = json.loads(cli(["show", run_id, "--json"], tmp_path, store).stdout)
    assert shown["waiting_reason"] == "limit"
    assert datetime.fromisoformat(shown["resume_after"]) == reset
    listed = cli(["runs"], tmp_path, store).stdout.strip().splitlines()
    assert len(listed) == 2  # the header and the one parked run: resume started nothing


def test_on_limit_is_an_option_of_run(tmp_path: Path) -> None:
    (tmp_path / "wf.js").write_text(
        "export const meta = {name: 'x', description: 'y'};\nreturn 1;\n")
    ran = cli(["run", "wf.js", "--on-limit", "fail"], tmp_path, tmp_path / "runs.sqlite3")
    assert ran.returncode == 0 and ran.stdout.strip() == "1"
    wrong = cli(["run", "wf.js", "--on-limit", "later"], tmp_path, tmp_path / "runs.sqlite3")
    assert wrong.returncode == 2


def test_a_claude_usage_limit_parks_the_run_and_resume_waits_for_the_reset(
        tmp_path: Path) -> None:
    """The fake ``claude`` (tests/providers/fake_clis) answers a prompt with LIMIT by Claude
    Code's usage-limit result, resetting in three hours."""
    fakes = REPO / "tests" / "providers" / "fake_clis"
    log = tmp_path / "claude.log"
    store = tmp_path / "runs.sqlite3"
    (tmp_path / "wf.js").write_text(
        "export const meta = {name: 'limited', description: 'meets a usage limit'};\n"
        "const a = await agent('one');\n"
        "return [a, await agent('LIMIT two')];\n")
    env = {"PATH": f"{fakes}{os.pathsep}{os.environ['PATH']}", "CLAUDE_FAKE_LOG": str(log)}
    parked = cli(["run", "wf.js", "--provider", "claude"], tmp_path, store, env)
    assert parked.returncode == 75, parked.stderr
    document = json.loads(parked.stdout)
    assert document["waiting_reason"] == "limit" and document["resume_after"] is not None
    assert "waiting for its provider's usage limit to reset" in parked.stderr
    assert "in 2h 59m" in parked.stderr or "in 3h" in parked.stderr
    assert f"continue it then with: dsh-workflow resume {document['run_id']}" in parked.stderr
    paid = len(log.read_text().splitlines())
    assert paid == 2
    early = cli(["resume", document["run_id"]], tmp_path, store, env)
    assert early.returncode == 75 and "nothing was called" in early.stderr
    assert len(log.read_text().splitlines()) == paid  # no call ran
