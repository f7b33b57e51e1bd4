"""Cost in money on the command line (docs/embedding.md, "Cost in money"), as real processes on a real
store file: the final line, ``runs``, ``show`` (text and JSON), with children that report their
own cost (a command agent's usage line) or are priced from their model."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import genai_prices
import pytest
from _support import cli_env, run_cli
from rich.console import Console

from dsh_workflow import (
    AgentEnded,
    AgentStarted,
    RunInfo,
    Usage,
    WorkflowEnded,
    WorkflowMeta,
    WorkflowStarted,
)
from dsh_workflow._cli.progress import PlainProgress, RichProgress, make_progress

META = "export const meta = { name: 'cost-cli', description: 'costs on the command line' };\n"


def cli(*argv: str | Path, cwd: Path, store: Path | None = None, path_dir: Path | None = None,
        stdin: str | None = None, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return run_cli(*argv, cwd=cwd, env=cli_env(store=store, path_first=path_dir), stdin=stdin,
                   timeout=timeout)


def agent_command(tmp_path: Path) -> str:
    """A command agent: ``cost:X`` prompts report cost X; others report tokens only."""
    script = tmp_path / "agent.py"
    script.write_text(
        "import json, sys\n"
        "prompt = sys.stdin.read()\n"
        "usage = {'input_tokens': 1000, 'output_tokens': 100}\n"
        "if prompt.startswith('cost:'):\n"
        "    usage['cost_usd'] = float(prompt[5:])\n"
        "sys.stderr.write('dsh-workflow-usage: ' + json.dumps(usage) + '\\n')\n"
        "print('done ' + prompt)\n")
    return f"{sys.executable} {script}"


def write_script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "wf.js"
    path.write_text(META + body, encoding="utf-8")
    return path


def test_reported_costs_are_summed_shown_and_stored(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    script = write_script(tmp_path, "return [await agent('cost:0.125'), await agent('cost:0.5')];")
    done = cli("run", script, "--provider", "command", "--command", agent_command(tmp_path),
               cwd=tmp_path, store=store)
    assert done.returncode == 0, done.stderr
    assert "2,200 tokens, $0.6250" in done.stderr  # the final line
    listed = cli("runs", cwd=tmp_path, store=store)
    assert listed.returncode == 0 and "COST" in listed.stdout and "$0.6250" in listed.stdout
    as_json = json.loads(cli("runs", "--json", cwd=tmp_path, store=store).stdout)
    assert as_json[0]["cost_usd"] == pytest.approx(0.625)
    run_id = as_json[0]["id"]
    shown = cli("show", run_id, cwd=tmp_path, store=store)
    assert "2,200 tokens, $0.6250" in shown.stdout
    assert "$0.1250" in shown.stdout and "$0.5000" in shown.stdout  # per agent
    document = json.loads(cli("show", run_id, "--json", cwd=tmp_path, store=store).stdout)
    assert document["usage"]["cost_usd"] == pytest.approx(0.625)
    assert [row["cost_usd"] for row in document["agent_calls"]] == [0.125, 0.5]


def test_a_call_naming_a_known_model_is_priced_and_an_unknown_one_flags_the_total(
        tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    script = write_script(tmp_path, "return [await agent('a', {model: 'gpt-4o'}), "
                                    "await agent('b', {model: 'not-a-real-model'})];")
    done = cli("run", script, "--provider", "command", "--command", agent_command(tmp_path),
               "--json", cwd=tmp_path, store=store)
    assert done.returncode == 0, done.stderr
    expected = float(genai_prices.calc_price(
        genai_prices.Usage(input_tokens=1000, output_tokens=100), model_ref="gpt-4o").total_price)
    record = json.loads(cli("runs", "--json", cwd=tmp_path, store=store).stdout)[0]
    assert record["cost_usd"] == pytest.approx(expected)
    shown = cli("show", record["id"], cwd=tmp_path, store=store).stdout
    assert f"${expected:.4f}+" in shown  # a lower bound: one child's cost is unknown


def test_echo_runs_show_no_cost(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    script = write_script(tmp_path, "return await agent('x');")
    done = cli("run", script, cwd=tmp_path, store=store)
    assert done.returncode == 0 and "$" not in done.stderr
    record = json.loads(cli("runs", "--json", cwd=tmp_path, store=store).stdout)[0]
    assert record["cost_usd"] is None


INFO = RunInfo(id="run-9", meta=WorkflowMeta(name="demo", description="d"))


def _priced_run() -> list[Any]:
    return [WorkflowStarted(run=INFO),
            AgentStarted(run=INFO, seq=1, label="a"), AgentStarted(run=INFO, seq=2, label="b"),
            AgentEnded(run=INFO, seq=1, label="a", outcome="completed",
                       usage=Usage(input_tokens=100, output_tokens=20, cost_usd=0.25)),
            AgentEnded(run=INFO, seq=2, label="b", outcome="completed",
                       usage=Usage(input_tokens=10, output_tokens=2))]


def test_the_live_panel_shows_the_cost_against_the_dollar_budget() -> None:
    stream = io.StringIO()
    progress = make_progress(stream, quiet=False, budget_usd=2.0)
    assert isinstance(progress, PlainProgress)  # not a terminal
    panel = RichProgress(Console(file=io.StringIO(), force_terminal=True, width=120,
                                 color_system=None))
    panel.tally.budget_usd = 2.0
    for event in _priced_run():
        panel(event)
        progress(event)
    assert "132 tokens, $0.2500+ of $2.00" in panel.counts().plain  # one child's cost unknown
    done = WorkflowEnded(run=INFO, stop_reason="completed", agents_started=2,
                         usage=Usage(input_tokens=110, output_tokens=22, cost_usd=0.25))
    progress(done)
    assert stream.getvalue().splitlines()[-1].endswith("132 tokens, $0.2500+ of $2.00")


def test_logs_final_line_carries_the_cost(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    script = write_script(tmp_path, "return [await agent('cost:0.125'), await agent('free')];")
    done = cli("run", script, "--provider", "command", "--command", agent_command(tmp_path),
               cwd=tmp_path, store=store)
    assert done.returncode == 0, done.stderr
    run_id = json.loads(cli("runs", "--json", cwd=tmp_path, store=store).stdout)[0]["id"]
    logs = cli("logs", run_id, cwd=tmp_path, store=store)
    assert logs.stdout.splitlines()[-1].endswith("2,200 tokens, $0.1250+")


# ---- prices at the seam, and a dollar budget never silently unenforced ----------------------


def test_spend_of_unknown_cost_reads_unpriced_never_zero_dollars(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    script = write_script(tmp_path, "return [await agent('cost:0.125'), "
                                    "await agent('b', {model: 'my-own-model'})];")
    command = agent_command(tmp_path)
    done = cli("run", script, "--provider", "command", "--command", command,
               cwd=tmp_path, store=store)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1].endswith("2,200 tokens, $0.1250+")
    run_id = json.loads(cli("runs", "--json", cwd=tmp_path, store=store).stdout)[0]["id"]
    shown = cli("show", run_id, cwd=tmp_path, store=store).stdout
    assert "2,200 tokens, $0.1250+" in shown
    assert re.search(r"2\s+b\s+-\s+completed\s+1,100\s+unpriced", shown), shown  # per agent
    # a run none of whose spend is priced, under a dollar budget (a token budget holds too)
    unknown = write_script(tmp_path, "return await agent('b', {model: 'my-own-model'});")
    capped = cli("run", unknown, "--provider", "command", "--command", command,
                 "--budget-usd", "1", "--budget", "100000", cwd=tmp_path, store=store)
    assert capped.returncode == 0, capped.stderr
    assert "1,100 of 100,000 tokens, unpriced of $1.00\n" in capped.stderr  # the final line
    assert "the dollar budget cannot count agent 1: model 'my-own-model' has no price" \
        in capped.stderr  # and the result's warning
    assert "$0.0000" not in capped.stderr
    listed = cli("runs", cwd=tmp_path, store=store).stdout
    assert "unpriced" in listed and "$0.1250+" in listed and "$0.0000" not in listed


def test_price_prices_a_model_the_price_data_does_not_know(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    script = write_script(tmp_path, "return await agent('a', {model: 'my-own-model'});")
    done = cli("run", script, "--provider", "command", "--command", agent_command(tmp_path),
               "--price", "my-own-model=1/2", "--budget-usd", "1", cwd=tmp_path, store=store)
    assert done.returncode == 0, done.stderr
    # 1,000 input tokens at $1 and 100 output tokens at $2 per million
    assert "1,100 tokens, $0.0012 of $1.00" in done.stderr
    bad = cli("run", script, "--price", "my-own-model=1", cwd=tmp_path, store=store)
    assert bad.returncode == 2 and "MODEL=IN/OUT" in bad.stderr


def test_a_dollar_budget_on_a_model_without_a_price_is_refused_at_start(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    script = write_script(tmp_path, "return await agent('a');")
    done = cli("run", script, "--provider", "openai", "--model", "my-own-model", "--base-url",
               "http://127.0.0.1:9/v1", "--budget-usd", "0.5", cwd=tmp_path, store=store)
    assert done.returncode == 2, done.stderr
    assert "'my-own-model' has no price" in done.stderr
    assert "--price my-own-model=IN/OUT" in done.stderr and "--budget" in done.stderr
    assert json.loads(cli("runs", "--json", cwd=tmp_path, store=store).stdout) == []


def test_a_child_the_dollar_budget_cannot_count_ends_the_run_or_warns(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    script = write_script(tmp_path, "return [await agent('cost:0.001'), "
                                    "await agent('b', {model: 'my-own-model'})];")
    command = agent_command(tmp_path)
    done = cli("run", script, "--provider", "command", "--command", command,
               "--budget-usd", "1", cwd=tmp_path, store=store)
    assert done.returncode == 1
    assert "BUDGET_EXCEEDED: the dollar budget cannot count agent 2: model 'my-own-model' has " \
           "no price" in done.stderr
    warned = cli("run", script, "--provider", "command", "--command", command,
                 "--budget-usd", "1", "--budget", "100000", "--json", cwd=tmp_path, store=store)
    assert warned.returncode == 0, warned.stderr
    result = json.loads(warned.stdout)
    assert "the dollar budget cannot count agent 2: model 'my-own-model' has no price; only " \
           "the token budget limits it" in json.dumps(result)
