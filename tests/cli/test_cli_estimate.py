"""``run --estimate`` and ``run --confirm-above N`` (docs/embedding.md, "Cost in money") in real CLI
processes: the offline projection calls no provider and records nothing; the confirmation asks
on a real terminal (a pty) and refuses without one unless ``--yes``."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

import genai_prices
import pytest
from _support import cli_command, cli_env, run_cli, wait_while_running

SCRIPT = """export const meta = { name: 'estimated', description: 'an estimate test' };
phase('Research');
const found = await parallel(args.topics.map(t => () => agent('research ' + t, {model: 'gpt-4o'})));
phase('Report');
const report = await agent('write a report on ' + found.length + ' findings',
                           {model: 'no-such-model'});
return {report, n: found.length};
"""
# Offline calls: 3 in Research (gpt-4o), 1 in Report (unknown model).
DEAD_URL = "http://127.0.0.1:9/v1"  # nothing listens there: a provider call would fail


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "wf.js"
    path.write_text(SCRIPT, encoding="utf-8")
    return path


ARGS = ["--args", json.dumps({"topics": ["alpha", "beta", "gamma"]})]


def test_estimate_projects_calls_per_phase_and_model_offline(script: Path,
                                                              tmp_path: Path) -> None:
    store = tmp_path / "store" / "runs.sqlite3"
    done = run_cli("run", script, *ARGS, "--estimate", "--provider", "openai", "--model", "gpt-4o",
               "--base-url", DEAD_URL, cwd=tmp_path, store=store)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "agent calls: 4" in text
    assert "Research  3" in text and "Report    1" in text
    assert "gpt-4o" in text and "no-such-model" in text and "price unknown" in text
    assert "(+ 1 call at unknown prices)" in text
    assert not store.exists() and not store.parent.exists()  # nothing recorded


def test_estimate_json_prices_the_projected_tokens(script: Path, tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    done = run_cli("run", script, *ARGS, "--estimate", "--json", cwd=tmp_path, store=store)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["agents"] == 4 and found["phases"] == {"Research": 3, "Report": 1}
    gpt = found["models"]["gpt-4o"]
    assert gpt["agents"] == 3
    prompts = sum(len("research " + t) for t in ("alpha", "beta", "gamma"))
    assert gpt["input_tokens"][0] == sum(-(-len("research " + t) // 4)
                                         for t in ("alpha", "beta", "gamma"))
    assert gpt["input_tokens"][1] >= prompts // 3
    assert gpt["output_tokens"] == [300, 6000]
    for end in (0, 1):
        expected = genai_prices.calc_price(genai_prices.Usage(
            input_tokens=gpt["input_tokens"][end], output_tokens=gpt["output_tokens"][end]),
            model_ref="gpt-4o").total_price
        assert gpt["cost_usd"][end] == pytest.approx(float(expected))
    assert found["models"]["no-such-model"]["cost_usd"] is None
    assert found["cost_usd"] == gpt["cost_usd"] and found["unpriced_agents"] == 1
    assert not store.exists()


def test_estimate_prices_by_the_runs_rules_price_and_aliases(script: Path,
                                                             tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    done = run_cli("run", script, *ARGS, "--estimate", "--json", "--price", "no-such-model=10/20",
               "--price", "gpt-4o=0/0", cwd=tmp_path, store=store)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    report = found["models"]["no-such-model"]
    assert report["cost_usd"] == pytest.approx([
        (report["input_tokens"][end] * 10 + report["output_tokens"][end] * 20) / 1e6
        for end in (0, 1)])
    assert found["models"]["gpt-4o"]["cost_usd"] == [0.0, 0.0]  # --price wins over the data
    assert found["unpriced_agents"] == 0
    aliased = tmp_path / "alias.js"
    aliased.write_text(SCRIPT.replace("'gpt-4o'", "'sonnet[1m]'"), encoding="utf-8")
    done = run_cli("run", aliased, *ARGS, "--estimate", "--json", cwd=tmp_path, store=store)
    sonnet = json.loads(done.stdout)["models"]["sonnet[1m]"]
    from dsh_workflow._prices import CLAUDE_CODE_ALIASES

    expected = genai_prices.calc_price(genai_prices.Usage(
        input_tokens=sonnet["input_tokens"][1], output_tokens=sonnet["output_tokens"][1]),
        model_ref=CLAUDE_CODE_ALIASES["sonnet"]).total_price
    assert sonnet["cost_usd"][1] == pytest.approx(float(expected))


def test_confirm_above_refuses_without_a_terminal_unless_yes(script: Path,
                                                             tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    refused = run_cli("run", script, *ARGS, "--confirm-above", "2", cwd=tmp_path, store=store,
                  stdin="y\n")
    assert refused.returncode == 2
    assert "agent calls: 4" in refused.stderr  # the estimate is shown first
    assert "--confirm-above 2" in refused.stderr and "--yes" in refused.stderr
    assert refused.stdout == "" and not store.exists()  # nothing ran
    agreed = run_cli("run", script, *ARGS, "--confirm-above", "2", "--yes", cwd=tmp_path,
                 store=store)
    assert agreed.returncode == 0, agreed.stderr
    assert json.loads(agreed.stdout)["n"] == 3 and store.exists()
    below = run_cli("run", script, *ARGS, "--confirm-above", "4", cwd=tmp_path, store=store)
    assert below.returncode == 0, below.stderr  # 4 calls do not exceed 4: nothing to ask


def _wait_asked(process: subprocess.Popen[bytes], err_path: Path, times: int) -> None:
    """Wait until the question ``[y/N]`` is on stderr (the file ``err_path``) ``times`` times;
    fails at once, with that stderr, if ``process`` exits first."""
    wait_while_running(
        process,
        lambda: err_path.read_text(encoding="utf-8", errors="replace").count("[y/N]") >= times,
        what=f"[y/N] x{times} on stderr", timeout=60, output=err_path)


def _on_a_terminal(script: Path, tmp_path: Path, store: Path,
                   answer: bytes) -> tuple[int, str, str]:
    """Run with stdin on a pty, answering ``answer`` once the question is on stderr."""
    master, slave = pty.openpty()
    err_path = tmp_path / f"err-{answer.strip().decode() or 'empty'}.txt"
    with err_path.open("wb") as err:
        process = subprocess.Popen(
            cli_command("run", str(script), *ARGS,
             "--confirm-above", "2"), cwd=tmp_path, env=cli_env(store=store), stdin=slave,
            stdout=subprocess.PIPE, stderr=err)
    os.close(slave)
    try:
        _wait_asked(process, err_path, 1)
        os.write(master, answer)
        out, _ = process.communicate(timeout=120)
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()
    return process.returncode, out.decode(), err_path.read_text(encoding="utf-8")


def test_confirm_above_asks_on_a_terminal(script: Path, tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    code, out, err = _on_a_terminal(script, tmp_path, store, b"n\n")
    assert code == 2 and "not confirmed" in err and out == "" and not store.exists()
    code, out, err = _on_a_terminal(script, tmp_path, store, b"y\n")
    assert code == 0, err
    assert json.loads(out)["n"] == 3 and store.exists()


# A script that can tell echo answers from the real ones: it starts one more call per "MORE"
# answer; echo never answers MORE, the command below always does. It also reports its budget.
DIVERGING = """\
export const meta = { name: 'diverging', description: 'more calls than the dry run showed' };
log(`budget: ${budget.total}`);
let calls = 1;
while (calls < 4 && (await agent(`call ${calls}`)).includes('MORE')) calls++;
return {calls, budget: budget.total};
"""


def _diverging(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    path = tmp_path / "diverging.js"
    path.write_text(DIVERGING, encoding="utf-8")
    count = tmp_path / "count.txt"
    command = ["--provider", "command", "--command",
               f"sh -c 'echo call >> {count}; printf MORE'", "--budget", "100000"]
    return path, count, command


def test_the_confirmation_binds_the_run_without_a_terminal(tmp_path: Path) -> None:
    """The dry run shows 1 call; the real run is refused before its second call reaches the
    provider, with a reason naming the count shown — though --yes answered the first
    question, it said nothing of calls nobody was shown."""
    path, count, command = _diverging(tmp_path)
    store = tmp_path / "runs.sqlite3"
    done = run_cli("run", path, *command, "--confirm-above", "0", "--yes", cwd=tmp_path,
               store=store)
    assert "agent calls: 1" in done.stderr  # the estimate
    assert "budget: 100000" in done.stderr  # the dry run's log: the real run's budget
    assert done.returncode == 130, done.stderr
    result = json.loads(done.stdout)
    assert result["stop_reason"] == "cancelled"
    assert "not confirmed" in result["error"] and "the 1 shown by --confirm-above" \
        in result["error"]
    assert count.read_text().split() == ["call"], "a call past the confirmed count ran"


def test_a_run_within_what_was_shown_is_not_asked_again(tmp_path: Path) -> None:
    path, count, command = _diverging(tmp_path)
    command[3] = f"sh -c 'echo call >> {count}; printf done'"  # answers as echo would
    store = tmp_path / "runs.sqlite3"
    done = run_cli("run", path, *command, "--confirm-above", "0", "--yes", cwd=tmp_path,
               store=store)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"calls": 1, "budget": 100000}


def test_the_real_run_asks_again_on_a_terminal(tmp_path: Path) -> None:
    path, count, command = _diverging(tmp_path)
    store = tmp_path / "runs.sqlite3"
    master, slave = pty.openpty()
    err_path = tmp_path / "err.txt"
    with err_path.open("wb") as err:
        process = subprocess.Popen(
            cli_command("run", str(path), *command,
             "--confirm-above", "0"), cwd=tmp_path, env=cli_env(store=store), stdin=slave,
            stdout=subprocess.PIPE, stderr=err)
    os.close(slave)
    try:
        for expected in (1, 2):  # the estimate's question, then the run's own
            _wait_asked(process, err_path, expected)
            if expected == 2:
                assert count.read_text().split() == ["call"]  # held before the 2nd call
            os.write(master, b"y\n")
        out, _ = process.communicate(timeout=120)
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
    assert process.returncode == 0, err_path.read_text()
    assert json.loads(out) == {"calls": 4, "budget": 100000}
    assert "more agent calls than the 1 the estimate showed" in err_path.read_text()


def test_the_gate_reads_as_its_provider_to_the_engine_and_the_store() -> None:
    """What a run records of its provider (for ``resume``) and the model it prices children
    with are the gated provider's own, not the gate's."""
    from dsh_workflow import CommandProvider, RoutingProvider
    from dsh_workflow._cli.estimate import ConfirmationGate
    from dsh_workflow._engines.host.calls import default_model
    from dsh_workflow._provider_options import provider_options

    command = CommandProvider(["sh", "-c", "cat"], cwd="/")
    routed = RoutingProvider({"fast": command}, default="fast")
    for provider in (command, routed):
        gate = ConfirmationGate(provider, 1, lambda reason: None)
        assert provider_options(gate) == provider_options(provider)
        assert default_model(gate, None) == default_model(provider, None)
        assert gate.identity == provider.info.identity
