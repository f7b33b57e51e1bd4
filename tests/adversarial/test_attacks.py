"""The attack corpus: every hostile script in ``tests/adversarial/attacks/`` against every engine.

Each ``tests/adversarial/attacks/*.js`` file is a workflow body written the way a hostile (or badly broken)
model would write it. Its leading ``//`` comment lines form a header:

* ``// Attack: ...`` — what it tries (free text; any ``//`` line without a directive is prose);
* ``// expect: <outcome>`` (exactly one) — what a careful user wants to happen:
  ``completed <json>`` (the value), ``completed-len <n>`` (a value of length n),
  ``error <CODE|-> [fragment ...]`` (the run ends ``error``; its text starts with ``CODE:``, or
  for ``-`` with no engine code at all; every shell-quoted fragment occurs in it),
  ``error SCRIPT_PARSE [fragment ...]`` (refused by ``start()``, before any run or event),
  ``cancelled`` (with ``cancel-after``);
* ``// or-expect: error <CODE|-> [fragment ...]`` — a second outcome as good as the first, for
  the rare attack whose verdict honestly depends on the heap's layout (say why in the prose);
* optional: ``config: {json}`` (EngineConfig overrides), ``args: {json}`` (the run's args),
  ``cancel-after: <s>`` (the test cancels the run then), ``max-seconds: <s>`` (the run's
  result must arrive within this wall time; default :data:`DEFAULT_MAX_SECONDS`),
  ``max-logs: <n>``, ``max-event-chars: <n>``, ``max-error-chars: <n>`` (bounds on the run's
  narration, on any text an event carries, on the error text);
* ``xfail[-quickjs|-subprocess]: <reason>`` — a confirmed, reported engine problem: the test
  runs as ``xfail(strict=True)`` on that engine (or all), so a fix turns it into a failure
  that asks for the marker to be removed.

The corpus provider plays an obedient model: a prompt ``STRUCTURED:<json>`` is answered with
that structured value, ``DEEP:<n>`` with an object nested n levels deep, ``HANG`` never (the
child waits until it is cancelled), anything else with ``"ok:" + prompt``.

What one test (one file on one engine) proves:

1. exactly one result (``result()`` twice gives the same object; one ``WorkflowEnded``; the
   event contract holds: every ``AgentStarted`` paired once), with the expected stop reason,
   value or error, and the error names the cause (the setting and its value for limits);
2. the run ends within its time bound, and the event loop never stalls (heartbeat gap below
   :data:`MAX_LOOP_GAP_S`) — a script must not freeze the host; nor may it bloat the host: the
   host's resident memory, sampled on every heartbeat, never rises above its level before the
   attack by more than the run's ``memory_limit_bytes`` plus :data:`RSS_MARGIN_BYTES` (the peak,
   not the end: the allocator keeps freed memory, so "after" would hide nothing and blame
   caching), and once the engine has closed it is back within the same bound;
3. no host access: nothing is written to the working directory, the environment is unchanged,
   and a canary secret from the host's environment appears in no result, error or event;
4. isolation: a sibling run on the same engine, holding a child while the attack runs,
   completes with its correct value, and the intrinsics it sees before and after (and those of
   the next run on the engine) match a pristine fingerprint — nothing leaks between runs;
5. no leftovers: once the engine's block has exited, no engine thread and no sandbox process
   is alive.

The runtime is the target here, not the async backend, so the corpus runs on trio only (the
conformance suite and the fault tests cover both backends); this keeps the corpus within its
time budget on the 2-core reference machine.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import shlex
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import (
    ENGINE_SKIPS,
    EngineFactory,
    await_none_left,
    child_pids,
    quickjs_factory,
    subprocess_factory,
)

from dsh_workflow import (
    EngineConfig,
    LogEmitted,
    SubagentRequest,
    SubagentResult,
    WorkflowEngine,
    WorkflowError,
    WorkflowErrorCode,
    WorkflowEvent,
    WorkflowResult,
    WorkflowStarted,
    WorkflowStartRequest,
)
from dsh_workflow._errors import SCRIPT_FAILED
from dsh_workflow.testing import FunctionProvider, GatedProvider, check_run_events

ATTACKS = Path(__file__).parent / "attacks"
META = {"name": "attack", "description": "a hostile workflow from the attack corpus"}
#: Small limits so that every bomb trips quickly; the headers name these values.
CORPUS_CONFIG: dict[str, Any] = {
    "memory_limit_bytes": 16 * 1024 * 1024,
    "stack_limit_bytes": 256 * 1024,
    "slice_cpu_limit_s": 0.2,
    "max_total_agents": 20,
    "max_concurrent_agents": 4,
    "max_prompt_chars": 200_000,
    "dispose_grace_s": 0.5,
    "warm_runtimes": 1,
}
DEFAULT_MAX_SECONDS = 4.0
MAX_LOOP_GAP_S = 0.1
#: Host memory an attack may add beyond its run's heap cap: the host's own copies of what
#: crosses the boundary (outbox text, decoded values, events) and allocator slack.
RSS_MARGIN_BYTES = 16 * 1024 * 1024
START_CODES = {WorkflowErrorCode.SCRIPT_PARSE.value, WorkflowErrorCode.META_INVALID.value}
CODES = {code.value for code in WorkflowErrorCode}
DIRECTIVES = {"expect", "or-expect", "config", "args", "cancel-after", "max-seconds", "max-logs",
              "max-event-chars", "max-error-chars", "xfail", "xfail-quickjs",
              "xfail-subprocess"}
THREAD_PREFIX = "dsh-workflow"



# ---- engines ------------------------------------------------------------------------------

ENGINES: dict[str, EngineFactory | None] = {"quickjs": quickjs_factory,
                                            "subprocess": subprocess_factory(pool_size=3)}
_SUBPROCESS_SKIP = ENGINE_SKIPS.get("subprocess", "")

# ---- the corpus ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Attack:
    """One corpus file and its parsed header."""

    path: Path
    description: str
    expect: str
    expect_arg: str
    config: dict[str, Any] = field(default_factory=dict)
    args: Any = None
    cancel_after: float | None = None
    max_seconds: float = DEFAULT_MAX_SECONDS
    max_logs: int | None = None
    max_event_chars: int | None = None
    max_error_chars: int | None = None
    xfail: dict[str, str] = field(default_factory=dict)
    or_expect_arg: str | None = None  # the argument of an equally good ``error`` outcome

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def script(self) -> str:
        return self.path.read_text("utf-8")

    @property
    def start_time_error(self) -> bool:
        return self.expect == "error" and self.expect_arg.split(" ", 1)[0] in START_CODES


def parse_attack(path: Path) -> Attack:
    """Read the header of one corpus file (see the module docstring); malformed is an error."""
    found: dict[str, str] = {}
    prose: list[str] = []
    for line in path.read_text("utf-8").splitlines():
        if not line.startswith("//"):
            break
        text = line[2:].strip()
        key, sep, value = text.partition(":")
        if sep and key.strip() in DIRECTIVES:
            if key.strip() in found:
                raise ValueError(f"{path.name}: directive {key.strip()!r} given twice")
            found[key.strip()] = value.strip()
        else:
            prose.append(text)
    if "expect" not in found:
        raise ValueError(f"{path.name}: the header has no '// expect:' line")
    if not prose or not prose[0].startswith("Attack:"):
        raise ValueError(f"{path.name}: the header must start with '// Attack: <what it tries>'")
    kind, _, arg = found["expect"].partition(" ")
    if kind not in ("completed", "completed-len", "error", "cancelled"):
        raise ValueError(f"{path.name}: unknown expectation {kind!r}")
    or_kind, _, or_arg = found.get("or-expect", "").partition(" ")
    if "or-expect" in found and (or_kind != "error" or kind != "error"):
        raise ValueError(f"{path.name}: 'or-expect' pairs one 'error' outcome with another")
    if kind == "cancelled" and "cancel-after" not in found:
        raise ValueError(f"{path.name}: 'cancelled' needs a cancel-after directive")
    xfail = {engine: found[f"xfail-{engine}"] for engine in ENGINES if f"xfail-{engine}" in found}
    if "xfail" in found:
        xfail = {engine: found["xfail"] for engine in ENGINES}

    def number(key: str) -> float | None:
        return float(found[key]) if key in found else None

    def integer(key: str) -> int | None:
        return int(found[key]) if key in found else None

    return Attack(
        path=path, description=" ".join(prose)[len("Attack:"):].strip(), expect=kind,
        expect_arg=arg.strip(), config=json.loads(found.get("config", "{}")),
        args=json.loads(found["args"]) if "args" in found else None,
        cancel_after=number("cancel-after"),
        max_seconds=number("max-seconds") or DEFAULT_MAX_SECONDS,
        max_logs=integer("max-logs"), max_event_chars=integer("max-event-chars"),
        max_error_chars=integer("max-error-chars"), xfail=xfail,
        or_expect_arg=or_arg.strip() if "or-expect" in found else None)


CORPUS = [parse_attack(path) for path in sorted(ATTACKS.glob("*.js"))]


def _cases() -> list[Any]:
    cases = []
    for attack in CORPUS:
        for engine, factory in ENGINES.items():
            marks: list[Any] = []
            if factory is None:
                marks.append(pytest.mark.skip(reason=_SUBPROCESS_SKIP))
            elif engine in attack.xfail:
                marks.append(pytest.mark.xfail(strict=True, reason=attack.xfail[engine]))
            cases.append(pytest.param(attack, engine, id=f"{attack.name}-{engine}", marks=marks))
    return cases


# ---- the obedient model, the sibling, the fingerprint -----------------------------------


@functools.cache
def _deep(levels: int) -> dict[str, Any]:
    # Built once per depth: a 100,000-deep dict takes the loop ~50 ms to build (and to free),
    # which the loop-lag bound would blame on the engine.
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


async def corpus_reply(request: SubagentRequest) -> SubagentResult | str:
    """The corpus provider: obeys STRUCTURED:/DEEP:/HANG prompts, else answers ``ok:<prompt>``."""
    if request.prompt == "HANG":
        await anyio.sleep_forever()
    if request.prompt.startswith("STRUCTURED:"):
        return SubagentResult(structured=json.loads(request.prompt[len("STRUCTURED:"):]))
    if request.prompt.startswith("DEEP:"):
        return SubagentResult(structured=_deep(int(request.prompt[len("DEEP:"):])))
    return "ok:" + request.prompt


#: Everything a run can observe of the shared intrinsics; a leak between runs changes it.
FINGERPRINT = """(() => {
  const names = (o) => Reflect.ownKeys(o).map(String).sort().join(',');
  const src = (f) => Function.prototype.toString.call(f);
  return [names(globalThis), names(Object.prototype), names(Array.prototype),
    names(Promise.prototype), names(Function.prototype), names(String.prototype),
    names(Error.prototype), names(JSON), names(Promise), names(Math), names(Reflect),
    src(JSON.stringify), src(JSON.parse), src(Promise.prototype.then), src(Array.prototype.push),
    src(Object.defineProperty), String(src(agent).length), String(Object.isFrozen(agent)),
    String(Object.isFrozen(Object.prototype)), typeof sharedMarker, typeof pwned,
    String(({}).polluted), String(Math.random() < 1)];
})()"""
SIBLING = ("const before = " + FINGERPRINT + ";\nconst r = await agent('sibling');\n"
           "return {r, before, after: " + FINGERPRINT + "};")
NEXT_RUN = "return " + FINGERPRINT + ";"

# ---- leftovers ----------------------------------------------------------------------------


def engine_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX) and t.is_alive()}


def host_rss() -> int:
    """This process's resident set size in bytes (Linux ``/proc``; 0 elsewhere)."""
    try:
        with open("/proc/self/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Heartbeat:
    """Measures the longest gap between ticks of a 10 ms sleep loop on the event loop, and the
    host's peak resident memory (sampled on every tick)."""

    def __init__(self) -> None:
        self.max_gap = 0.0
        self.peak_rss = host_rss()

    async def run(self) -> None:
        last = time.monotonic()
        while True:
            await anyio.sleep(0.01)
            now = time.monotonic()
            self.max_gap = max(self.max_gap, now - last)
            last = now
            self.peak_rss = max(self.peak_rss, host_rss())


# ---- the test -----------------------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "trio"


@pytest.fixture(autouse=True)
def _frozen_heap() -> Iterator[None]:
    """Move everything made before the test (the session's own objects, cached test values)
    out of the garbage collector's reach, so a collection during the attack scans only what the
    attack made: the loop-lag bound then measures the engine, not the size of the test session
    (a full collection of that heap took 165 ms late in a corpus run). Freezing is a constant-
    time move of the collector's lists; collecting first would cost that full collection before
    every attack (83 s of a suite run), and what it would have freed is collected after the
    test instead."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def test_corpus_is_large_and_well_formed() -> None:
    """The corpus has at least 40 attacks, each with a header the harness understands."""
    assert len(CORPUS) >= 40, f"only {len(CORPUS)} attacks in {ATTACKS}"
    for attack in CORPUS:
        assert attack.description, attack.name
        if attack.expect == "completed":
            json.loads(attack.expect_arg)
        elif attack.expect == "error":
            for arg in filter(None, (attack.expect_arg, attack.or_expect_arg)):
                code = shlex.split(arg)[0]
                assert code == "-" or code in CODES, f"{attack.name}: unknown code {code!r}"


@pytest.mark.anyio
@pytest.mark.parametrize(("attack", "engine"), _cases())
async def test_attack(attack: Attack, engine: str, tmp_path: Path,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    gap = await _attack_once(attack, engine, tmp_path / "first", monkeypatch)
    if gap >= MAX_LOOP_GAP_S:
        # A heartbeat also misses when the whole process loses its core to another program on
        # a busy machine; a script that holds the loop holds it every time. So a miss is
        # measured once more, and the second measurement decides.
        gap = await _attack_once(attack, engine, tmp_path / "again", monkeypatch)
    assert gap < MAX_LOOP_GAP_S, f"the event loop was blocked for {gap:.3f} s (twice)"


async def _attack_once(attack: Attack, engine: str, tmp_path: Path,
                       monkeypatch: pytest.MonkeyPatch) -> float:
    """One run of the attack beside a sibling, checking everything but the loop's longest
    gap, which it returns."""
    tmp_path.mkdir()
    canary = f"canary-{os.getpid()}-{time.monotonic_ns()}"
    monkeypatch.setenv("DSH_ATTACK_CANARY", canary)
    monkeypatch.chdir(tmp_path)
    environ_before = dict(os.environ)
    threads_before, pids_before = engine_threads(), child_pids()
    factory = ENGINES[engine]
    assert factory is not None
    config = EngineConfig(**{**CORPUS_CONFIG, **attack.config})
    events: list[WorkflowEvent] = []
    heartbeat = Heartbeat()

    async with factory(config, FunctionProvider(corpus_reply)) as eng:
        eng.events.subscribe(events.append)
        async with anyio.create_task_group() as tg:
            tg.start_soon(heartbeat.run)
            gate = GatedProvider()
            sibling = eng.start(WorkflowStartRequest(meta=META, script=SIBLING, provider=gate))
            await gate.wait_running(1, timeout=10)

            rss_before = host_rss()
            heartbeat.peak_rss = rss_before
            attack_run_id, attack_result = await _run_attack(eng, attack, events, config)
            rss_peak = max(heartbeat.peak_rss, host_rss())

            gate.release_all()
            with anyio.fail_after(10):
                sibling_result = await sibling.result()
            await sibling.dispose()
            with anyio.fail_after(10):
                next_run = eng.start(WorkflowStartRequest(meta=META, script=NEXT_RUN))
                pristine = (await next_run.result()).value
                await next_run.dispose()
            tg.cancel_scope.cancel()

    # 4. the sibling was undisturbed and nothing leaked into it or the next run
    assert sibling_result.stop_reason == "completed", sibling_result
    value = sibling_result.value
    assert value["r"] == "ok:sibling", value
    assert value["before"] == pristine, "the next run's intrinsics differ from a fresh run's"
    assert value["after"] == value["before"], \
        "the attack changed what a sibling run on the same engine sees"
    check_run_events(events, sibling, sibling_result)

    # 2. the host's memory stayed bounded (the loop's liveness is decided by the caller)
    bound = config.memory_limit_bytes + RSS_MARGIN_BYTES
    assert rss_peak - rss_before <= bound, \
        f"host memory grew by {(rss_peak - rss_before) / 2**20:.1f} MiB during the attack " \
        f"(bound {bound / 2**20:.0f} MiB)"
    assert host_rss() - rss_before <= bound, \
        f"host memory is {(host_rss() - rss_before) / 2**20:.1f} MiB above its level before " \
        "the attack after the engine closed"

    # 3. no host access
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "the attack wrote to the host's cwd"
    assert dict(os.environ) == environ_before, "the attack changed the host's environment"
    mine = [e for e in events if e.run.id == attack_run_id] if attack_run_id else []
    assert all(canary not in repr(e) for e in mine), "a host secret reached the attack's events"
    assert canary not in repr(attack_result), "a host secret reached the attack's result"

    # 5. no leftovers
    settle_s = 3 * config.slice_cpu_limit_s + 3.0
    await await_none_left(lambda: {t.name for t in engine_threads() - threads_before},
                          what="the engine threads left behind to end", timeout=settle_s)
    await await_none_left(lambda: child_pids() - pids_before,
                          what="the sandbox processes left behind to end", timeout=settle_s)
    return heartbeat.max_gap


async def _run_attack(eng: WorkflowEngine, attack: Attack, events: list[WorkflowEvent],
                      config: EngineConfig) -> tuple[str | None, WorkflowResult | None]:
    """Start the attack and check its outcome (1, 2); returns its run id and result (None,
    None when start() refused it)."""
    request = WorkflowStartRequest(meta=META, script=attack.script, args=attack.args)
    if attack.start_time_error:
        code, *fragments = shlex.split(attack.expect_arg)
        count = len(events)
        with pytest.raises(WorkflowError) as info:
            eng.start(request)
        assert info.value.code == code, info.value
        for fragment in fragments:
            assert fragment in str(info.value), f"{fragment!r} missing from {info.value}"
        assert not any(isinstance(e, WorkflowStarted) for e in events[count:]), \
            "a refused start must emit no event"
        return None, None

    began = time.monotonic()
    run = eng.start(request)
    if attack.cancel_after is not None:
        await anyio.sleep(attack.cancel_after)
        run.cancel("the attack test cancelled the run")
    with anyio.move_on_after(max(10.0, 3 * attack.max_seconds)):
        result = await run.result()
    elapsed = time.monotonic() - began
    assert elapsed < attack.max_seconds, \
        f"the run took {elapsed:.2f} s (bound {attack.max_seconds} s)"
    assert await run.result() is result, "result() must give the one result"
    with anyio.fail_after(config.dispose_grace_s + 2.0):
        await run.dispose()
    _check_outcome(attack, result)
    check_run_events(events, run, result)

    mine = [e for e in events if e.run.id == run.id]
    if attack.max_logs is not None:
        logs = sum(isinstance(e, LogEmitted) for e in mine)
        assert logs <= attack.max_logs, f"{logs} log messages reached the host"
    if attack.max_event_chars is not None:
        longest = max(len(s) for e in mine for s in _strings(e.model_dump()))
        assert longest <= attack.max_event_chars, f"an event carries {longest} characters"
    if attack.max_error_chars is not None and result.error is not None:
        assert len(result.error) <= attack.max_error_chars, \
            f"the error text has {len(result.error)} characters"
    return run.id, result


def _check_outcome(attack: Attack, result: Any) -> None:
    if attack.or_expect_arg is None:
        _check_expected(attack, attack.expect_arg, result)
        return
    try:
        _check_expected(attack, attack.expect_arg, result)
    except AssertionError:
        _check_expected(attack, attack.or_expect_arg, result)


def _check_expected(attack: Attack, expect_arg: str, result: Any) -> None:
    where = f"{attack.name}: got {result.stop_reason}, value={_short(result.value)}, " \
            f"error={_short(result.error)}"
    assert (result.error is None) == (result.stop_reason == "completed"), where
    assert (result.error_code is None) == (result.stop_reason == "completed"), where
    if attack.expect == "completed":
        assert result.stop_reason == "completed", where
        assert result.value == json.loads(expect_arg), where
    elif attack.expect == "completed-len":
        assert result.stop_reason == "completed", where
        assert len(result.value) == int(expect_arg), where
    elif attack.expect == "cancelled":
        assert result.stop_reason == "cancelled", where
        assert result.error_code == WorkflowErrorCode.CANCELLED, where
    else:
        code, *fragments = shlex.split(expect_arg)
        assert result.stop_reason == "error" and result.value is None, where
        error = result.error
        if code == "-":
            assert not any(error.startswith(c + ":") for c in CODES), \
                f"the script's own failure is reported as an engine error: {where}"
            assert result.error_code == SCRIPT_FAILED, \
                f"the script's own failure has the code of a script failure: {where}"
        else:
            assert result.error_code == code and error.startswith(code + ":"), where
        for fragment in fragments:
            assert fragment in error, f"{fragment!r} missing: {where}"
        if code == WorkflowErrorCode.RESOURCE_LIMIT.value:
            assert "null" not in error.split(":", 1)[1][:12], where


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return [""]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 300 else text[:300] + f"... ({len(text)} chars)"
