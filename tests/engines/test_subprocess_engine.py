"""SubprocessEngine specifics: the process boundary, supervision, the warm pool, no leftovers.

What every engine shares is checked by the conformance kit (``test_conformance_subprocess.py``);
this file checks what only the sandbox-process engine promises, by inspecting the sandbox
processes through ``/proc`` (Linux).
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

import anyio
import pytest
from _support import alive, await_until, child_pids

from dsh_workflow import (
    AgentEnded,
    AgentStarted,
    EngineConfig,
    SubagentRequest,
    SubagentResult,
    WorkflowEvent,
    WorkflowRun,
    WorkflowStartRequest,
)
from dsh_workflow._engines.subprocess import SandboxPolicy, SubprocessEngine, sandbox
from dsh_workflow._engines.subprocess import frames as protocol
from dsh_workflow._engines.subprocess.sandbox import address_space_limit, cpu_backstop_s
from dsh_workflow._errors import ENGINE_FAILED
from dsh_workflow.testing import GatedProvider

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc"),
]

META = {"name": "sandbox-test", "description": "a sandbox engine test"}
CONFIG = EngineConfig(slice_cpu_limit_s=0.3, dispose_grace_s=1.0)


def request(script: str, **kwargs: object) -> WorkflowStartRequest:
    return WorkflowStartRequest(meta=META, script=script, **kwargs)


class Answer:
    """Answers every child at once; records the process it ran in."""

    def __init__(self) -> None:
        self.pids: set[int] = set()

    async def run(self, req: SubagentRequest) -> SubagentResult:
        self.pids.add(os.getpid())
        await anyio.lowlevel.checkpoint()
        return SubagentResult(text=f"re: {req.prompt}")


def gone(pid: int) -> bool:
    """True once ``pid`` no longer exists, not even as a zombie (it has been reaped)."""
    return pid not in child_pids()


async def pid_of(engine: SubprocessEngine, run: WorkflowRun) -> int:
    return await await_until(lambda: engine.sandbox_pid(run) or 0,
                             what="the run's sandbox process", timeout=5)


def limits_of(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/limits") as handle:
        lines = handle.read().splitlines()[1:]
    return {line[:26].strip(): line[26:47].strip() for line in lines}


def status_of(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as handle:
        return dict(line.split(":\t", 1) for line in handle.read().splitlines() if ":\t" in line)


def cpu_of(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def test_the_sandbox_process_is_confined(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_WORKFLOW_TEST_SECRET", "s3cr3t-token")
    gate = GatedProvider()
    policy = SandboxPolicy()
    async with SubprocessEngine(CONFIG, provider=gate, pool_size=1, policy=policy) as engine:
        run = engine.start(request("return await agent('hold')"))
        await gate.wait_running(1)
        pid = await pid_of(engine, run)
        with open(f"/proc/{pid}/environ", "rb") as handle:
            assert handle.read() == b"", "the sandbox must start with an empty environment"
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            assert b"s3cr3t" not in handle.read()
        assert sorted(os.listdir(f"/proc/{pid}/fd")) == ["0", "1", "2"]

        limits = limits_of(pid)
        assert limits["Max address space"] == \
            str(address_space_limit(CONFIG.memory_limit_bytes, policy))
        assert limits["Max cpu time"] == str(cpu_backstop_s(CONFIG.slice_cpu_limit_s, policy))
        assert limits["Max open files"] == "3"
        assert limits["Max file size"] == "0"
        assert limits["Max core file size"] == "0"
        assert limits["Max processes"] == "0"

        status = status_of(pid)
        assert status["NoNewPrivs"].strip() == "1"
        if os.uname().machine == "x86_64":
            assert status["Seccomp"].strip() == "2", "a seccomp filter is installed"
        # main (reads frames), the runtime thread, and the QuickJS binding's idle helper thread
        assert int(status["Threads"]) <= 3
        if os.geteuid() == 0:
            assert status["Uid"].split() == ["65534"] * 4
            assert status["Gid"].split() == ["65534"] * 4
            assert status["Groups"].strip() == ""
        assert os.getsid(pid) == pid, "the sandbox runs in its own session"
        workdir = os.readlink(f"/proc/{pid}/cwd")
        assert os.listdir(workdir) == []

        gate.release_all()
        assert (await run.result()).value == "ok:hold"
        await run.dispose()
        await await_until(lambda: gone(pid), what="the sandbox process to be gone", timeout=2)
        assert not os.path.exists(workdir), "the private working directory is removed"


async def test_the_provider_stays_in_the_engine_process() -> None:
    provider = Answer()
    async with SubprocessEngine(CONFIG, provider=provider, pool_size=0) as engine:
        run = engine.start(request("return await agent('where')"))
        assert (await run.result()).value == "re: where"
        await run.dispose()
    assert provider.pids == {os.getpid()}


async def test_sigkill_of_the_sandbox_ends_the_run_as_error_promptly() -> None:
    gate = GatedProvider()
    events: list[WorkflowEvent] = []
    async with SubprocessEngine(CONFIG, provider=gate, pool_size=0) as engine:
        engine.events.subscribe(events.append)
        run = engine.start(request("const a = await agent('held'); return a"))
        sibling = engine.start(request("return await agent('sibling')"))
        await gate.wait_started(2)  # seqs count per run: both runs have a child 1
        pid = await pid_of(engine, run)
        os.kill(pid, signal.SIGKILL)
        begun = time.monotonic()
        with anyio.fail_after(1.0):
            result = await run.result()
        assert time.monotonic() - begun < 1.0
        assert result.stop_reason == "error" and result.error_code == ENGINE_FAILED
        assert "SIGKILL" in (result.error or ""), result
        mine = [e for e in events if e.run.id == run.id]
        assert [type(e) for e in mine if isinstance(e, (AgentStarted, AgentEnded))] == \
            [AgentStarted, AgentEnded], "the child of the killed run is still paired"
        gate.release_all()
        assert (await sibling.result()).value == "ok:sibling", "other runs are not disturbed"
        await run.dispose()
        await sibling.dispose()
        assert gone(pid), "the killed process has been reaped"


async def test_a_hung_sandbox_process_is_killed() -> None:
    config = EngineConfig(slice_cpu_limit_s=20.0, dispose_grace_s=1.0)
    policy = SandboxPolicy(hang_after_s=0.5)
    async with SubprocessEngine(config, provider=Answer(), pool_size=0, policy=policy) as engine:
        run = engine.start(request("while (true) {}"))
        pid = await pid_of(engine, run)
        await await_until(lambda: cpu_of(pid) >= 0.05, what="the script to spin", timeout=5)
        os.kill(pid, signal.SIGSTOP)
        begun = time.monotonic()
        with anyio.fail_after(3):
            result = await run.result()
        assert time.monotonic() - begun < 2.0
        assert result.stop_reason == "error" and result.error_code == ENGINE_FAILED
        assert "stopped responding" in (result.error or ""), result
        await run.dispose()
        assert gone(pid)


async def test_dispose_kills_a_spinning_sandbox_within_the_grace() -> None:
    config = EngineConfig(slice_cpu_limit_s=20.0, dispose_grace_s=0.5)
    async with SubprocessEngine(config, provider=Answer(), pool_size=0) as engine:
        run = engine.start(request("await agent('x'); while (true) {}"))
        pid = await pid_of(engine, run)
        await await_until(lambda: cpu_of(pid) >= 0.05, what="the script to spin", timeout=5)
        begun = time.monotonic()
        await run.dispose()
        assert time.monotonic() - begun < 0.5 + 0.2
        assert (await run.result()).stop_reason == "cancelled"
        assert gone(pid)


async def test_leaving_the_engine_kills_and_reaps_every_process() -> None:
    config = EngineConfig(slice_cpu_limit_s=20.0, dispose_grace_s=0.5)
    async with SubprocessEngine(config, provider=Answer(), pool_size=2) as engine:
        spinning = engine.start(request("while (true) {}"))
        pids = [await pid_of(engine, spinning)]
        pids += engine.pooled_pids()  # refilled only once a run settles
        assert len(pids) == 2
        await await_until(lambda: cpu_of(pids[0]) >= 0.05, what="the first script to spin", timeout=5)
        begun = time.monotonic()
    assert time.monotonic() - begun < 1.5
    assert (await spinning.result()).stop_reason == "cancelled"
    assert not any(pid in child_pids() for pid in pids)
    assert child_pids() == set()


async def test_the_pool_hands_out_each_process_once_and_refills() -> None:
    async with SubprocessEngine(CONFIG, provider=Answer(), pool_size=2) as engine:
        pooled = engine.pooled_pids()
        assert len(pooled) == 2
        used: list[int] = []
        for _ in range(3):
            await await_until(lambda: len(engine.pooled_pids()) >= 2, what="two warm processes in the pool", timeout=5)
            ready = engine.pooled_pids()
            run = engine.start(request("return await agent('x')"))
            pid = engine.sandbox_pid(run)
            assert pid in ready, "a run takes a warm process from the pool"
            used.append(pid)
            assert (await run.result()).value == "re: x"
            await run.dispose()
        assert used[0] in pooled
        assert len(set(used)) == 3, "a process never serves a second run"
        await await_until(lambda: len(engine.pooled_pids()) >= 2, what="two warm processes in the pool", timeout=5)
        assert not set(engine.pooled_pids()) & set(used)
        assert all(gone(pid) for pid in used)


async def test_twenty_concurrent_runs() -> None:
    script = ("const r = await parallel([1, 2, 3].map(i => () => agent(args.n + ':' + i)));"
              " return r")
    async with SubprocessEngine(CONFIG, provider=Answer(), pool_size=2) as engine:
        runs = [engine.start(request(script, args={"n": n})) for n in range(20)]
        with anyio.fail_after(30):
            results = [await run.result() for run in runs]
        for n, result in enumerate(results):
            assert result.stop_reason == "completed", result
            assert result.value == [f"re: {n}:{i}" for i in (1, 2, 3)]
        for run in runs:
            await run.dispose()
    assert child_pids() == set()


# ---- protocol violations and crashes, through a stand-in child ----------------------------

FAKE_CHILD = r"""
import os, struct, sys, time
mode = sys.argv[1]

def frame(kind, payload):
    body = kind + payload
    os.write(1, struct.pack(">I", len(body)) + body)

def read_exactly(n):
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            sys.exit(0)
        data += chunk
    return data

if mode == "exit-before-ready":
    sys.exit(7)
if mode == "wrong-version":
    frame(b"R", b"[99, 0.0, []]")
elif mode == "outbox-before-ready":
    frame(b"O", b"[]")
else:
    frame(b"R", b"[1, 0.0, []]")
read_exactly(struct.unpack(">I", read_exactly(4))[0])  # the run frame
if mode == "unknown-kind":
    frame(b"Z", b"null")
elif mode == "oversized":
    os.write(1, struct.pack(">I", 2**31))
elif mode == "bad-json":
    frame(b"I", b"{")
elif mode == "bad-outbox":
    frame(b"O", b'[["agent", 1, ')
elif mode == "idle-overclaims":
    frame(b"I", b"[5, 0.0]")
elif mode == "bad-end":
    frame(b"E", b'{"ok": "yes"}')
elif mode == "spin":
    while True:
        pass
time.sleep(60)
"""


class FaultyChildEngine(SubprocessEngine):
    """Starts a stand-in child that misbehaves as ``mode`` says (the test hook)."""

    def __init__(self, mode: str, config: EngineConfig) -> None:
        super().__init__(config, provider=Answer(), pool_size=0)
        self.mode = mode

    def _sandbox_command(self) -> Sequence[str]:
        return [sys.executable, "-c", FAKE_CHILD, self.mode]


@pytest.mark.parametrize(("mode", "fragment"), [
    ("unknown-kind", "broke the engine protocol: it sent an unknown frame kind"),
    ("oversized", "broke the engine protocol: it sent a frame of 2147483648 bytes"),
    ("bad-json", "broke the engine protocol: it sent a I frame that is not JSON"),
    ("bad-outbox", "malformed message"),
    ("idle-overclaims", "settlements never sent"),
    ("bad-end", "outcome has the wrong shape"),
    ("wrong-version", "protocol version 99"),
    ("outbox-before-ready", "before its ready frame"),
    ("exit-before-ready", "ended without a result (exit status 7)"),
])
async def test_a_misbehaving_child_ends_the_run_as_error(mode: str, fragment: str) -> None:
    async with FaultyChildEngine(mode, CONFIG) as engine:
        run = engine.start(request("return 1"))
        with anyio.fail_after(2):
            result = await run.result()
        assert result.stop_reason == "error" and result.error_code == ENGINE_FAILED, result
        assert fragment in (result.error or ""), result
        await run.dispose()
        assert child_pids() == set(), "the process was killed and reaped"


async def test_a_stretch_past_the_slice_is_killed_by_the_engine() -> None:
    config = EngineConfig(slice_cpu_limit_s=0.2, dispose_grace_s=1.0)
    async with FaultyChildEngine("spin", config) as engine:
        run = engine.start(request("return 1"))
        pid = await pid_of(engine, run)
        used = 0.0  # the child's CPU seconds, last seen while it existed

        async def sample() -> None:
            nonlocal used
            while True:
                try:
                    used = cpu_of(pid)
                except OSError:  # reaped
                    return
                await anyio.sleep(0.005)

        async with anyio.create_task_group() as tg:
            tg.start_soon(sample)
            with anyio.fail_after(30):  # a hang, not a slow machine
                result = await run.result()
            tg.cancel_scope.cancel()
        # Killed once the stretch passed 2 × slice + 0.5 = 0.9 s of CPU, read every 50 ms:
        # judged by the child's CPU, which a busy machine does not stretch as it does the wall
        # clock (the child's start-up and the CPU read's lag are the margin).
        assert 0.5 < used < 0.9 + 0.3, f"the child used {used:.2f} s of CPU before it was killed"
        assert result.stop_reason == "error" and result.error_code == "RESOURCE_LIMIT"
        assert "RESOURCE_LIMIT" in (result.error or "")
        assert "slice_cpu_limit_s=0.2" in (result.error or "")
        await run.dispose()
        assert gone(pid)


async def test_a_cancel_before_the_kill_reads_as_cancelled() -> None:
    gate = GatedProvider()
    async with SubprocessEngine(CONFIG, provider=gate, pool_size=0) as engine:
        run = engine.start(request("return await agent('held')"))
        await gate.wait_running(1)
        pid = await pid_of(engine, run)
        run.cancel("enough")
        os.kill(pid, signal.SIGKILL)
        result = await run.result()
        assert result.stop_reason == "cancelled" and result.error_code == "CANCELLED"
        assert "enough" in (result.error or "")
        await run.dispose()


ORPHANING_ENGINE = r"""
import anyio, sys
from dsh_workflow import EngineConfig, WorkflowStartRequest
from dsh_workflow._engines.subprocess import SubprocessEngine
from dsh_workflow.testing import HangingProvider

async def main():
    config = EngineConfig(slice_cpu_limit_s=30.0)
    async with SubprocessEngine(config, provider=HangingProvider(), pool_size=1) as engine:
        meta = {"name": "orphan", "description": "x"}
        spinning = engine.start(WorkflowStartRequest(meta=meta, script="while (true) {}"))
        waiting = engine.start(WorkflowStartRequest(meta=meta, script="await agent('x')"))
        with anyio.fail_after(30):  # both runs have their process
            while None in (pids := [engine.sandbox_pid(spinning), engine.sandbox_pid(waiting)]):
                await anyio.sleep(0.01)
        print(" ".join(str(pid) for pid in pids), flush=True)
        await anyio.sleep(60)

anyio.run(main)
"""


async def test_sandboxes_die_with_a_killed_engine_process() -> None:
    import dsh_workflow

    root = os.path.dirname(os.path.dirname(os.path.abspath(dsh_workflow.__file__)))
    env = {**os.environ, "PYTHONPATH": root}
    async with await anyio.open_process([sys.executable, "-c", ORPHANING_ENGINE],
                                        env=env) as engine_process:
        assert engine_process.stdout is not None
        with anyio.fail_after(10):
            line = b""
            async for chunk in engine_process.stdout:
                line += chunk
                if b"\n" in line:
                    break
        pids = [int(pid) for pid in line.split()]
        started_alive = all(alive(pid) for pid in pids)
        engine_process.kill()  # SIGKILL: the engine gets no chance to clean up
        await engine_process.wait()
    assert len(pids) == 2 and started_alive  # two runs; the pool refills only after a run
    await await_until(lambda: not any(alive(pid) for pid in pids), what="the orphaned processes to die", timeout=2)


async def test_a_sandbox_outlives_the_thread_that_started_it() -> None:
    """trio starts processes from worker threads that retire when idle; the parent-death
    signal fires then, and must not kill a sandbox whose engine process is alive."""
    spec = sandbox.child_spec(CONFIG.model_dump(mode="json"), SandboxPolicy())
    started: list[subprocess.Popen[bytes]] = []
    confined = threading.Event()

    def spawn() -> None:
        started.append(subprocess.Popen(
            sandbox.command(spec), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env={}, cwd="/", start_new_session=True))
        confined.wait(10)  # the thread lives until the child has armed its parent-death signal

    thread = threading.Thread(target=spawn)
    thread.start()
    await await_until(lambda: started, what="the spawning thread to start the child", timeout=5)
    process = started[0]
    assert process.stdin is not None and process.stdout is not None
    stdout, stdin = process.stdout, process.stdin
    ready = await anyio.to_thread.run_sync(stdout.read, 4)
    await anyio.to_thread.run_sync(stdout.read, struct.unpack(">I", ready)[0])
    confined.set()
    await anyio.to_thread.run_sync(thread.join)

    def frames_until_end() -> list[bytes]:
        kinds = []
        while True:
            (length,) = struct.unpack(">I", stdout.read(4))
            body = stdout.read(length)
            kinds.append(body[:1])
            if body[:1] == protocol.END:
                return [*kinds, body[1:]]

    try:
        await anyio.sleep(0.3)  # the starting thread is gone by now
        assert process.poll() is None, "the sandbox died with the thread that started it"
        stdin.write(protocol.encode(protocol.RUN, ["return 6 * 7", None]))
        stdin.flush()
        with anyio.fail_after(5):
            frames = await anyio.to_thread.run_sync(frames_until_end)
        assert frames[-1] == b'{"ok": true, "value": 42}'
    finally:
        process.kill()
        process.wait()
        stdin.close()
        stdout.close()
