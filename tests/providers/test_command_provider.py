"""CommandProvider against real child processes (``sys.executable -c ...`` scripts)."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import await_until

from dsh_workflow._failure import ProviderUnavailable
from dsh_workflow._providers.command import CommandProvider
from dsh_workflow._providers.structured import parse_structured_reply
from dsh_workflow._subagent import SubagentRequest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="process groups are POSIX")

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def request(prompt: str = "hello", **fields: Any) -> SubagentRequest:
    fields.setdefault("label", "child")
    fields.setdefault("run_id", "run-7")
    fields.setdefault("seq", 3)
    return SubagentRequest(prompt=prompt, **fields)


def python(script: str, **options: Any) -> CommandProvider:
    return CommandProvider([sys.executable, "-c", textwrap.dedent(script)], **options)


def gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (absent, or a zombie nobody reaped)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] in (b"Z", b"X")
    except FileNotFoundError:
        return True
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def read_pids(path: Path, count: int) -> list[int]:
    def written() -> list[int]:
        pids = path.read_text().split() if path.exists() else []
        return [int(p) for p in pids] if len(pids) == count else []

    return await await_until(written, what=f"{count} pids in {path.name}", timeout=10)


# A child that starts a grandchild in its own group, writes both pids, then sleeps.
SPAWN_AND_SLEEP = """
import os, signal, subprocess, sys, time
ignore_term = {ignore!r}
grand = subprocess.Popen([sys.executable, "-c",
    "import signal, time\\n"
    + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n" if ignore_term else "")
    + "time.sleep(60)"])
if ignore_term:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
time.sleep(0.2)  # let the grandchild install its handler
with open({path!r} + ".tmp", "w") as f:
    f.write(f"{{os.getpid()}} {{grand.pid}}")
os.rename({path!r} + ".tmp", {path!r})
time.sleep(60)
"""


@pytest.mark.anyio
async def test_prompt_on_stdin_stdout_is_text() -> None:
    provider = python("import sys; sys.stdout.write(sys.stdin.read()[::-1] + ' ✓')")
    result = await provider.run(request("abc ü"))
    assert result.stop_reason == "completed"
    assert result.text == "ü cba ✓"
    assert result.structured is None and result.error is None


@pytest.mark.anyio
async def test_environment_is_explicit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_TEST_HOST_SECRET", "do-not-leak")
    script = "import json, os; print(json.dumps(dict(os.environ)))"
    default = await python(script).run(request(model="m-1", phase="Scan", schema=SCHEMA))
    env = json.loads(default.text or "")
    assert "DSH_TEST_HOST_SECRET" not in env
    assert env.pop("PATH") == os.environ["PATH"]
    env.pop("LC_CTYPE", None)  # the child interpreter may set it itself (PEP 538)
    assert env == {
        "DSH_WORKFLOW_LABEL": "child",
        "DSH_WORKFLOW_RUN_ID": "run-7",
        "DSH_WORKFLOW_SEQ": "3",
        "DSH_WORKFLOW_MODEL": "m-1",
        "DSH_WORKFLOW_PHASE": "Scan",
        "DSH_WORKFLOW_SCHEMA": json.dumps(SCHEMA),
    }
    explicit = await python(script, env={"ONLY": "this"}).run(request())
    env = json.loads(explicit.text or "")
    env.pop("LC_CTYPE", None)
    assert env == {
        "ONLY": "this",
        "DSH_WORKFLOW_LABEL": "child",
        "DSH_WORKFLOW_RUN_ID": "run-7",
        "DSH_WORKFLOW_SEQ": "3",
    }


@pytest.mark.anyio
async def test_cwd_is_used(tmp_path: Path) -> None:
    result = await python("import os; print(os.getcwd(), end='')", cwd=tmp_path).run(request())
    assert Path(result.text or "").resolve() == tmp_path.resolve()


@pytest.mark.anyio
async def test_schema_success_tolerates_fence() -> None:
    provider = python("print('\\n```json\\n{\"n\": 42}\\n```\\n')")
    result = await provider.run(request(schema=SCHEMA))
    assert result.stop_reason == "completed"
    assert result.structured == {"n": 42}


@pytest.mark.anyio
async def test_schema_violation_is_ordinary_failure() -> None:
    result = await python("print('{\"n\": \"seven\"}')").run(request(schema=SCHEMA))
    assert result.stop_reason == "error"
    assert result.structured == {"n": "seven"}  # the engine validates it: kind invalid
    assert result.error_kind == "invalid_answer"
    assert "value.n" in (result.error or "") and "integer" in (result.error or "")


@pytest.mark.anyio
async def test_schema_not_json_is_ordinary_failure() -> None:
    result = await python("print('sure! here it is')").run(request(schema=SCHEMA))
    assert result.stop_reason == "error"
    assert "not valid JSON" in (result.error or "")


@pytest.mark.anyio
async def test_nonzero_exit_reports_stderr_tail() -> None:
    script = "import sys; sys.stderr.write('x' * 20000 + 'THE-END'); print('partial'); sys.exit(3)"
    result = await python(script).run(request())
    assert result.stop_reason == "error"
    error = result.error or ""
    assert "exited with status 3" in error
    assert error.endswith("THE-END")
    first = error.split("\n", 1)[0]  # the last stderr line, bounded, then the 2,000-char tail
    assert first.startswith("…") and first.endswith("THE-END (command exited with status 3)")
    assert len(first) < 340 and len(error) < 2200 + 340


@pytest.mark.anyio
async def test_death_by_signal_is_named() -> None:
    result = await python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)").run(request())
    assert result.stop_reason == "error"
    assert "killed by SIGKILL" in (result.error or "")


@pytest.mark.anyio
async def test_timeout_is_ordinary_failure_and_kills(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    script = SPAWN_AND_SLEEP.format(ignore=False, path=str(pidfile))
    provider = python(
        "import sys; sys.stderr.write('working...'); sys.stderr.flush()\n" + textwrap.dedent(script),
        timeout_s=1.5,
    )
    started = time.monotonic()
    result = await provider.run(request())
    assert time.monotonic() - started < 5
    assert result.stop_reason == "error"
    assert "timed out after timeout_s=1.5" in (result.error or "")
    assert "working..." in (result.error or "")
    assert result.error_kind == "timeout"
    assert all(gone(pid) for pid in [int(p) for p in pidfile.read_text().split()])


@pytest.mark.anyio
@pytest.mark.parametrize("ignore_term", [False, True], ids=["sigterm", "sigkill"])
async def test_cancellation_kills_process_group(tmp_path: Path, ignore_term: bool) -> None:
    pidfile = tmp_path / "pids"
    provider = python(SPAWN_AND_SLEEP.format(ignore=ignore_term, path=str(pidfile)), kill_grace_s=0.5)
    finished = False

    async def child() -> None:
        nonlocal finished
        await provider.run(request())
        finished = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(child)
        pids = await read_pids(pidfile, 2)
        assert not any(gone(pid) for pid in pids)
        started = time.monotonic()
        tg.cancel_scope.cancel()
    assert not finished
    assert time.monotonic() - started < 3
    assert all(gone(pid) for pid in pids), pids


@pytest.mark.anyio
async def test_stragglers_are_terminated_after_normal_exit(tmp_path: Path) -> None:
    # The child leaves a grandchild behind that holds stdout open; run must not wait for it.
    script = """
    import subprocess, sys
    grand = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    print(grand.pid, flush=True)
    """
    started = time.monotonic()
    result = await python(script).run(request())
    assert time.monotonic() - started < 5
    assert result.stop_reason == "completed"
    assert gone(int((result.text or "").strip()))


@pytest.mark.anyio
async def test_large_output_within_limit() -> None:
    script = "import sys; sys.stdout.write('a' * 3_000_000)"
    result = await python(script, max_output_bytes=3_000_000).run(request())
    assert result.stop_reason == "completed"
    assert result.text == "a" * 3_000_000


@pytest.mark.anyio
async def test_output_over_limit_is_failure_and_child_killed() -> None:
    # The child would write forever; the provider stops it once the limit is passed.
    script = "import sys\nwhile True:\n    sys.stdout.write('b' * 65536)"
    started = time.monotonic()
    result = await python(script, max_output_bytes=1_000_000).run(request())
    assert time.monotonic() - started < 5
    assert result.stop_reason == "error"
    assert "exceeded max_output_bytes=1000000" in (result.error or "")
    assert result.text is None


@pytest.mark.anyio
async def test_child_ignoring_large_prompt() -> None:
    result = await python("print('ok', end='')").run(request("p" * 2_000_000))
    assert result.stop_reason == "completed"
    assert result.text == "ok"


@pytest.mark.anyio
async def test_invalid_utf8_output_is_replaced() -> None:
    result = await python("import sys; sys.stdout.buffer.write(b'a\\xffb')").run(request())
    assert result.text == "a\ufffdb"


@pytest.mark.anyio
async def test_concurrent_children() -> None:
    provider = python("import os, sys; sys.stdout.write(sys.stdin.read() + os.environ['DSH_WORKFLOW_SEQ'])")
    results: dict[int, str | None] = {}

    async def one(seq: int) -> None:
        results[seq] = (await provider.run(request(f"p{seq}-", seq=seq))).text

    async with anyio.create_task_group() as tg:
        for seq in range(1, 11):
            tg.start_soon(one, seq)
    assert results == {seq: f"p{seq}-{seq}" for seq in range(1, 11)}


@pytest.mark.anyio
async def test_missing_executable_raises() -> None:
    with pytest.raises(ProviderUnavailable, match="the command '/nonexistent/agent-cli' does "
                                                  "not exist"):
        await CommandProvider(["/nonexistent/agent-cli"]).run(request())


@pytest.mark.parametrize(
    ("argv", "options", "message"),
    [
        ([], {}, "argv"),
        ("echo hi", {}, "argv"),
        (["echo"], {"timeout_s": 0}, "timeout_s"),
        (["echo"], {"max_output_bytes": 0}, "max_output_bytes"),
        (["echo"], {"kill_grace_s": -1}, "kill_grace_s"),
    ],
)
def test_invalid_construction(argv: Any, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CommandProvider(argv, **options)


def test_parse_structured_reply() -> None:
    assert parse_structured_reply(' {"n": 1} ', SCHEMA) == ({"n": 1}, [])
    assert parse_structured_reply('```\n{"n": 2}\n```', SCHEMA) == ({"n": 2}, [])
    value, problems = parse_structured_reply('{"n": NaN}', SCHEMA)
    assert value is None and "not valid JSON" in problems[0]
    value, problems = parse_structured_reply('{"m": 1}', SCHEMA)
    assert value == {"m": 1} and problems and "'n' is a required property" in problems[0]


# -- Claude Code options: effort, agent definitions (docs/scripts.md) ----------------------------------

SHOW_OPTIONS = """
import json, os, sys
keys = ["DSH_WORKFLOW_EFFORT", "DSH_WORKFLOW_AGENT_TYPE", "DSH_WORKFLOW_SYSTEM_PROMPT",
        "DSH_WORKFLOW_AGENT_TOOLS", "DSH_WORKFLOW_MODEL", "DSH_WORKFLOW_WORKTREE"]
print(json.dumps({"argv": sys.argv[1:], "env": {k: os.environ.get(k) for k in keys}}))
"""


@pytest.mark.anyio
async def test_effort_and_agent_definition_reach_the_command() -> None:
    from dsh_workflow import AgentDefinition

    agent = AgentDefinition(name="reviewer", system_prompt="You review.\nBe brief {effort}.",
                            model="big-model", tools=("Read", "Grep"))
    provider = CommandProvider([sys.executable, "-c", SHOW_OPTIONS, "--effort={effort}",
                                "{model}", "{agent_type}", "{system_prompt}", "{other} {}"])
    result = await provider.run(request(effort="max", agent_type="reviewer", agent=agent,
                                        model="big-model"))
    shown = json.loads(result.text or "")
    assert shown["argv"] == ["--effort=max", "big-model", "reviewer",
                             "You review.\nBe brief {effort}.", "{other} {}"]
    assert shown["env"] == {
        "DSH_WORKFLOW_EFFORT": "max",
        "DSH_WORKFLOW_AGENT_TYPE": "reviewer",
        "DSH_WORKFLOW_SYSTEM_PROMPT": "You review.\nBe brief {effort}.",
        "DSH_WORKFLOW_AGENT_TOOLS": '["Read", "Grep"]',
        "DSH_WORKFLOW_MODEL": "big-model",
        "DSH_WORKFLOW_WORKTREE": None,
    }


@pytest.mark.anyio
async def test_absent_options_are_empty_placeholders_and_no_variables() -> None:
    from dsh_workflow import AgentDefinition

    provider = CommandProvider([sys.executable, "-c", SHOW_OPTIONS, "--effort={effort}",
                                "[{system_prompt}]", "[{agent_type}]"])
    plain = json.loads((await provider.run(request())).text or "")
    assert plain["argv"] == ["--effort=", "[]", "[]"]
    assert set(plain["env"].values()) == {None}
    general = AgentDefinition(name="general-purpose")
    typed = json.loads((await provider.run(request(agent_type="general-purpose",
                                                   agent=general))).text or "")
    assert typed["argv"] == ["--effort=", "[]", "[general-purpose]"]
    assert typed["env"]["DSH_WORKFLOW_AGENT_TYPE"] == "general-purpose"
    assert typed["env"]["DSH_WORKFLOW_SYSTEM_PROMPT"] is None
    assert typed["env"]["DSH_WORKFLOW_AGENT_TOOLS"] is None


# ---- usage and the output limit (budgets) -------------------------------------------------


@pytest.mark.anyio
async def test_usage_line_on_stderr_becomes_the_result_usage() -> None:
    provider = python("""
        import sys
        sys.stdin.read()
        print("warming up", file=sys.stderr)
        print('dsh-workflow-usage: {"input_tokens": 1, "output_tokens": 1}', file=sys.stderr)
        print('dsh-workflow-usage: {"input_tokens": 12, "output_tokens": 34}', file=sys.stderr)
        print("done")
    """)
    result = await provider.run(request())
    assert result.stop_reason == "completed" and result.text == "done\n"
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens) == (12, 34)


@pytest.mark.anyio
async def test_usage_of_a_failed_child_counts_and_bad_lines_are_ignored() -> None:
    failing = python("""
        import sys
        print('dsh-workflow-usage: {"input_tokens": 5}', file=sys.stderr)
        sys.exit(3)
    """)
    result = await failing.run(request())
    assert result.stop_reason == "error" and result.usage is not None
    assert result.usage.input_tokens == 5
    for line in ("dsh-workflow-usage: not json", 'say dsh-workflow-usage: {"input_tokens": 3}'):
        bad = python(f"""
            import sys
            print({line!r}, file=sys.stderr)
            print("ok")
        """)
        ignored = await bad.run(request())
        assert ignored.stop_reason == "completed" and ignored.usage is None, line
    # numbers no usage can hold fail the child, never raise (SPEC §24)
    for line in ('dsh-workflow-usage: {"input_tokens": -1}',
                 'dsh-workflow-usage: {"input_tokens": 1, "cost_usd": 1e999}'):
        hostile = python(f"""
            import sys
            print({line!r}, file=sys.stderr)
            print("ok")
        """)
        refused = await hostile.run(request())
        assert refused.stop_reason == "error" and refused.error_kind == "invalid_answer", line
        assert refused.usage is None and "cannot be counted" in (refused.error or "")
    silent = python("print('no usage')")
    assert (await silent.run(request())).usage is None


@pytest.mark.anyio
async def test_max_output_tokens_reaches_the_command() -> None:
    provider = CommandProvider([sys.executable, "-c",
                                "import os; print(os.environ.get('DSH_WORKFLOW_MAX_OUTPUT_TOKENS'),"
                                " end='|')", "{max_output_tokens}"])
    with_limit = await provider.run(request(max_output_tokens=321))
    assert with_limit.text == "321|"
    argv = CommandProvider([sys.executable, "-c", "import sys; print(sys.argv[1:])",
                            "--max={max_output_tokens}"])
    assert ((await argv.run(request(max_output_tokens=9))).text or "").strip() == "['--max=9']"
    assert ((await argv.run(request())).text or "").strip() == "['--max=']"


# ---- truthful outcomes (SPEC §17): why a command child failed -------------------------------

@pytest.mark.anyio
async def test_a_command_not_on_path_is_unavailable() -> None:
    with pytest.raises(ProviderUnavailable) as caught:
        await CommandProvider(["no-such-agent-cli-xyz", "--flag"]).run(request())
    assert str(caught.value) == "the command 'no-such-agent-cli-xyz' was not found on PATH"


@pytest.mark.anyio
async def test_a_command_that_is_not_executable_is_unavailable(tmp_path: Path) -> None:
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    with pytest.raises(ProviderUnavailable, match=r"the command '.*agent\.sh' is not executable"):
        await CommandProvider([str(script)]).run(request())


@pytest.mark.anyio
async def test_a_nonzero_exit_keeps_the_last_20_lines_of_stderr() -> None:
    script = """
        import sys
        for i in range(1, 41):
            print(f"line {i}", file=sys.stderr)
        print('dsh-workflow-usage: {"input_tokens": 1, "output_tokens": 2}', file=sys.stderr)
        sys.exit(7)
    """
    result = await python(script).run(request())
    assert result.stop_reason == "error"
    expected = "\n".join(f"line {i}" for i in range(21, 41))
    assert result.error == f"line 40 (command exited with status 7)\nstderr: {expected}"
    assert result.error_kind == "other"
    assert result.usage is not None and result.usage.output_tokens == 2


@pytest.mark.anyio
async def test_the_reason_is_the_last_stderr_line_not_the_traceback_header() -> None:
    script = """
        import sys
        print("loading model...", file=sys.stderr)
        raise ValueError("the input file is empty")
    """
    result = await python(script).run(request())
    error = result.error or ""
    first, rest = error.split("\n", 1)
    assert first == "ValueError: the input file is empty (command exited with status 1)"
    assert "Traceback (most recent call last):" in rest and "loading model..." in rest
    assert result.error_kind == "other"


@pytest.mark.anyio
async def test_an_invalid_answer_quotes_the_start_of_the_output() -> None:
    result = await python("print('{\"n\": \"x\"}')").run(request(schema=SCHEMA))
    assert result.stop_reason == "error"
    assert (result.error or "").startswith("command output does not satisfy the schema: ")
    assert """(the output began: '{"n": "x"}')""" in (result.error or "")
    assert result.error_kind == "invalid_answer" and result.structured == {"n": "x"}


@pytest.mark.anyio
@pytest.mark.parametrize(("output", "detail"), [
    ('{"n": "x"}', "/n: 'x' is not of type 'integer'"),
    ("no json here", "/: the answer is not JSON: it began 'no json here'"),
])
async def test_a_schema_failure_reaches_the_script_as_kind_invalid(output: str,
                                                                  detail: str) -> None:
    from dsh_workflow import AgentEnded, EngineConfig, QuickJSEngine, WorkflowStartRequest

    ends: list[AgentEnded] = []
    provider = python(f"print({output!r})")
    async with QuickJSEngine(EngineConfig(), provider=provider) as engine:
        engine.events.subscribe(lambda e: ends.append(e) if isinstance(e, AgentEnded) else None)
        run = engine.start(WorkflowStartRequest(
            meta={"name": "schema", "description": "d"},
            script=f"return await agent('p', {{schema: {json.dumps(SCHEMA)}}})"))
        result = await run.result()
        await run.dispose()
    assert result.stop_reason == "completed" and result.value is None
    (end,) = ends
    assert end.error is not None and (end.error.kind, end.error.cause) == ("invalid",
                                                                          "invalid_answer")
    assert end.error.details[0].startswith(detail)
