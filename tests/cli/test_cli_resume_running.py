"""Resuming a run that is still running is refused (docs/durable-runs.md): its process would go on
running its unfinished calls while the resume ran them a second time. A real second process
holds the running run; ``resume`` exits 2 and the library refuses with ``INVALID_ARGUMENT``; once
that process is gone (``kill -9``), the run reads ``interrupted`` and resumes."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import anyio
import pytest
from _support import await_until, cli_command, cli_env, run_cli, wait_until

from dsh_workflow import (
    EngineConfig,
    QuickJSEngine,
    SQLiteRunStore,
    WorkflowError,
    WorkflowErrorCode,
    WorkflowStartRequest,
)
from dsh_workflow.testing import FunctionProvider

SCRIPT = ("export const meta = { name: 'long', description: 'a long run' };\n"
          "return await agent('slow one');\n")
META = {"name": "long", "description": "a long run"}
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def started_run(err: Path, timeout: float = 60) -> str:
    def run_id() -> str | None:
        text = err.read_text(encoding="utf-8", errors="replace")
        found = re.search(f"run ({UUID})", text)
        return found.group(1) if found and "[agent 1 started]" in text else None

    return wait_until(run_id, what=f"the run to start (stderr in {err})", timeout=timeout)


async def library_resume(store: Path, run_id: str) -> str | None:
    """Start a resume of ``run_id`` in this process: None if accepted, else the refusal."""
    async with SQLiteRunStore(store) as opened, \
            QuickJSEngine(EngineConfig(), provider=FunctionProvider(), store=opened) as engine:
        try:
            run = engine.start(WorkflowStartRequest(meta=META, script="return 1",
                                                    resume_from=run_id))
        except WorkflowError as exc:
            assert exc.code == WorkflowErrorCode.INVALID_ARGUMENT
            return exc.message
        await run.result()
        await run.dispose()
        return None


def test_a_run_still_running_in_another_process_is_not_resumed(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    (tmp_path / "s.js").write_text(SCRIPT, encoding="utf-8")
    err = tmp_path / "run.err"
    with err.open("wb") as err_file:
        holder = subprocess.Popen(cli_command("run", "s.js",
                                   "--echo-latency", "60", "--store", str(store)),
                                  cwd=tmp_path, env=cli_env(), stdout=subprocess.DEVNULL,
                                  stderr=err_file)
    try:
        run_id = started_run(err)
        done = run_cli("resume", run_id, "--store", store, cwd=tmp_path)
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        [line] = done.stderr.strip().splitlines()
        assert line.startswith("Error: ") and f"run {run_id!r} is still running" in line
        assert f"process {holder.pid}" in line
        refused = anyio.run(library_resume, store, run_id)
        assert refused is not None and "is still running" in refused
        assert holder.poll() is None  # the holder was not disturbed
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    # its process is gone: the run reads interrupted and may be resumed
    assert anyio.run(library_resume, store, run_id) is None
    listed = run_cli("runs", "--store", store, cwd=tmp_path)
    assert re.search(f"^{run_id} .* interrupted ", listed.stdout, re.MULTILINE), listed.stdout


@pytest.mark.anyio
async def test_a_run_still_running_in_this_process_is_not_resumed(tmp_path: Path) -> None:
    release = anyio.Event()

    async def held(request: object) -> str:
        await release.wait()
        return "done"

    async with SQLiteRunStore(tmp_path / "runs.sqlite3") as store, \
            QuickJSEngine(EngineConfig(), provider=FunctionProvider(held),
                          store=store) as engine:
        first = engine.start(WorkflowStartRequest(meta=META, script="return await agent('x')"))
        await await_until(lambda: store.get_run(first.id), what="the run in the store",
                          timeout=20)
        with pytest.raises(WorkflowError, match="is still running") as caught:
            engine.start(WorkflowStartRequest(meta=META, script="return await agent('x')",
                                              resume_from=first.id))
        assert caught.value.code == WorkflowErrorCode.INVALID_ARGUMENT
        release.set()
        assert (await first.result()).value == "done"
        # settled: resumable at once, even before its end is written
        again = engine.start(WorkflowStartRequest(meta=META, script="return await agent('x')",
                                                  resume_from=first.id))
        result = await again.result()
        assert result.value == "done" and result.agents_replayed == 1
        await first.dispose()
        await again.dispose()
