"""The scenarios S1–S11: what each one runs, on an engine and on the Python baseline.

Every scenario is one async function ``fn(kind, ctx)`` where ``kind`` is ``"baseline"``,
``"quickjs"`` or ``"subprocess"``; it returns ``{case: {metric: [samples]}}``. An *isolated*
scenario (memory figures) is run in a fresh interpreter once per repetition, so the process's
peak RSS (``VmHWM``) belongs to that scenario alone; its function returns one sample per
metric.
"""

from __future__ import annotations

import math
import os
import queue
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio

from dsh_workflow import (
    EchoProvider,
    EngineConfig,
    JournalEntry,
    QuickJSEngine,
    SQLiteRunStore,
    SubagentRequest,
    WorkflowStartRequest,
)
from dsh_workflow._loop import LoopHandle

from . import baseline as B
from .measure import RssSampler, Ticker, now, percentile, quiesce, read_status_kb

__all__ = ["SCENARIOS", "Ctx", "Metric", "Scenario", "Target", "engine_class", "engine_kinds"]

META = {"name": "bench", "description": "benchmark run"}
ENGINE_KINDS = ("quickjs", "subprocess")
T = TypeVar("T")  # what Ctx.pick chooses between


# ---- engines --------------------------------------------------------------------------------

def engine_class(kind: str) -> Any:
    """The engine class for ``kind``; ImportError when it is not (yet) available."""
    if kind == "quickjs":
        return QuickJSEngine
    if kind == "subprocess":
        from dsh_workflow import SubprocessEngine
        return SubprocessEngine
    raise ValueError(f"unknown engine {kind!r}")


def engine_kinds(choice: str) -> tuple[list[str], list[str]]:
    """The engines to measure for ``--engine`` and notes about the ones skipped."""
    wanted = list(ENGINE_KINDS) if choice == "all" else [choice]
    kinds: list[str] = []
    notes: list[str] = []
    for kind in wanted:
        try:
            engine_class(kind)
        except Exception as exc:  # noqa: BLE001 - an engine still being written is skipped
            notes.append(f"engine {kind!r} skipped: not available ({type(exc).__name__}: {exc})")
        else:
            kinds.append(kind)
    return kinds, notes


# ---- what a scenario is ---------------------------------------------------------------------

@dataclass(frozen=True)
class Ctx:
    quick: bool
    backend: str

    def pick(self, full: T, quick: T) -> T:
        return quick if self.quick else full


@dataclass(frozen=True)
class Metric:
    unit: str
    higher_is_better: bool = False
    label: str = ""
    compare: bool = True  # False: a descriptor of the case (no ratio to the baseline)


@dataclass(frozen=True)
class Target:
    """A bar for QuickJSEngine's median: ``abs`` (figure ≤ limit), ``ratio`` (figure ≤ limit ×
    baseline median) or ``expect`` (informational: the median lies between 0.9 × E and
    1.2 × (E + Z) + 25 ms, E the case's ``expected_ms`` — what the cap alone implies — Z its
    ``zero_latency_ms``, what the engine adds on its own, 25 ms timer slack)."""

    case: str
    metric: str
    kind: str
    limit: float
    engines: tuple[str, ...] = ("quickjs",)
    full_only: bool = False  # the quick run measures a smaller case: no verdict there

    def describe(self, unit: str, limit: float | None = None) -> str:
        limit = self.limit if limit is None else limit
        if self.kind == "ratio":
            return f"≤ {limit:g}× base"
        if self.kind == "expect":
            return f"≈ {limit:g} {unit}"
        return f"≤ {limit:g} {unit}"


Samples = dict[str, dict[str, list[float]]]


@dataclass(frozen=True)
class Scenario:
    id: str
    title: str
    cases: tuple[str, ...]
    metrics: dict[str, Metric]
    fn: Callable[[str, Ctx], Awaitable[Any]]
    targets: tuple[Target, ...] = ()
    isolated: bool = False
    reps: tuple[int, int] = (1, 1)  # isolated only: processes (full, quick)
    notes: dict[str, str] = field(default_factory=dict)  # engine kind -> remark
    quick: bool = True  # False: --quick leaves it out unless --only names it


# ---- one interface over engines and the baseline --------------------------------------------

@dataclass(frozen=True)
class Work:
    """One orchestration: the script for the engines and its Python twin for the baseline."""

    script: str
    py: Callable[..., Awaitable[Any]]
    n: int | None = None
    expect: Any = None  # the completed value to check (None: do not check)
    expect_reason: str = "completed"


class _Handle:
    def __init__(self, run: Any, engine: bool) -> None:
        self.run = run
        self.engine = engine

    async def outcome(self) -> tuple[str, Any, str | None]:
        if self.engine:
            r = await self.run.result()
            return r.stop_reason, r.value, r.error
        value = await self.run.result()
        return self.run.stop_reason, value, None

    def cancel(self) -> None:
        self.run.cancel()

    async def dispose(self) -> None:
        if self.engine:
            await self.run.dispose()


class _Host:
    """An engine or the baseline host, started the same way."""

    def __init__(self, target: Any, engine: bool) -> None:
        self.target = target
        self.engine = engine

    def prepare(self, work: Work) -> Any:
        if self.engine:
            return WorkflowStartRequest(meta=META, script=work.script,
                                        args=None if work.n is None else {"n": work.n})
        return (work.py, () if work.n is None else (work.n,))

    def start(self, prepared: Any) -> _Handle:
        if self.engine:
            return _Handle(self.target.start(prepared), True)
        py, args = prepared
        return _Handle(self.target.start(py, *args), False)


@asynccontextmanager
async def open_host(kind: str, config: EngineConfig, provider: Any) -> AsyncIterator[_Host]:
    if kind == "baseline":
        async with B.BaselineHost(provider, config.max_concurrent_agents) as host:
            yield _Host(host, False)
    else:
        async with engine_class(kind)(config, provider=provider) as engine:
            yield _Host(engine, True)


def check(work: Work, outcome: tuple[str, Any, str | None], kind: str) -> None:
    reason, value, error = outcome
    if reason != work.expect_reason:
        raise AssertionError(f"{kind}: expected {work.expect_reason}, got {reason}: {error}")
    if work.expect is not None and value != work.expect:
        raise AssertionError(f"{kind}: expected value {work.expect!r}, got {value!r}")


async def timed_runs(kind: str, config: EngineConfig, provider: Any, work: Work, *,
                     warmup: int, reps: int, gap_s: float = 0.0) -> list[float]:
    """Start → result of ``reps`` runs one after another (after ``warmup``), in ms."""
    samples: list[float] = []
    async with open_host(kind, config, provider) as host:
        prepared = host.prepare(work)
        for index in range(warmup + reps):
            quiesce()
            if gap_s:
                await anyio.sleep(gap_s)
            t0 = now()
            handle = host.start(prepared)
            outcome = await handle.outcome()
            t1 = now()
            await handle.dispose()
            check(work, outcome, kind)
            if index >= warmup:
                samples.append((t1 - t0) * 1000.0)
    return samples


#: Runtimes the engine keeps prepared: the latency-sensitive setting (the default, 0, prepares
#: each runtime when its run starts, about a millisecond more per start).
WARM_RUNTIMES = 2


def _config(**caps: Any) -> EngineConfig:
    return EngineConfig(**{"warm_runtimes": WARM_RUNTIMES, **caps})


# ---- the scripts ----------------------------------------------------------------------------

TRIVIAL = Work("return 1", B.trivial, expect=1)
ONE_AGENT = Work("return await agent('hello')", B.one_agent, expect="echo: hello")


def fanout_parallel(n: int) -> Work:
    return Work("const r = await parallel(Array.from({length: args.n}, "
                "(_, i) => () => agent('item ' + i)));\nreturn r.length;",
                B.fanout, n=n, expect=n)


def fanout_promise_all(n: int) -> Work:
    return Work("const r = await Promise.all(Array.from({length: args.n}, "
                "(_, i) => agent('item ' + i)));\nreturn r.length;",
                B.fanout, n=n, expect=n)


def sequential(n: int) -> Work:
    return Work("let count = 0;\nfor (let i = 0; i < args.n; i++) {\n"
                "  if (await agent('step ' + i) !== null) count++;\n}\nreturn count;",
                B.sequential, n=n, expect=n)


def pipeline3(n: int) -> Work:
    return Work("const r = await pipeline(Array.from({length: args.n}, (_, i) => i),\n"
                "  (prev, item) => agent('a ' + item),\n"
                "  (prev) => agent('b ' + prev),\n"
                "  (prev) => agent('c ' + prev));\nreturn r.length;",
                B.pipeline3, n=n, expect=n)


# ---- S1 trivial run -------------------------------------------------------------------------

async def s1(kind: str, ctx: Ctx) -> Samples:
    provider = EchoProvider(latency_s=0.0)
    config = _config()
    latency = await timed_runs(kind, config, provider, TRIVIAL, warmup=ctx.pick(20, 2),
                               reps=ctx.pick(300, 15), gap_s=0.02)
    # The same with 2 ms gaps: what the idle gap costs on its own (a VM's idle cores wake slowly).
    warm = await timed_runs(kind, config, provider, TRIVIAL, warmup=ctx.pick(20, 2),
                            reps=ctx.pick(300, 15), gap_s=0.002)
    batch, budget_s = ctx.pick(500, 30), ctx.pick(2.0, 0.5)
    rates: list[float] = []
    async with open_host(kind, config, provider) as host:
        prepared = host.prepare(TRIVIAL)
        for index in range(ctx.pick(1, 0) + ctx.pick(7, 1)):
            quiesce()
            await anyio.sleep(0.05)
            t0 = now()
            count = 0
            # up to `batch` runs, time-boxed so a slow engine still finishes in seconds
            while count < batch and (count < 5 or now() - t0 < budget_s):
                handle = host.start(prepared)
                outcome = await handle.outcome()
                await handle.dispose()
                count += 1
            elapsed = now() - t0
            check(TRIVIAL, outcome, kind)
            if index >= ctx.pick(1, 0):
                rates.append(count / elapsed)
    return {"return 1": {"latency_ms": latency, "busy_latency_ms": warm, "runs_per_s": rates}}


# ---- S2 one agent() call --------------------------------------------------------------------

async def s2(kind: str, ctx: Ctx) -> Samples:
    samples = await timed_runs(kind, _config(), EchoProvider(latency_s=0.0), ONE_AGENT,
                               warmup=ctx.pick(20, 2), reps=ctx.pick(200, 10), gap_s=0.02)
    return {"one agent()": {"latency_ms": samples}}


# ---- S3 fan-out -----------------------------------------------------------------------------

S3_SIZES = (10, 100, 1000, 10000)


def _raised_caps(n: int) -> EngineConfig:
    return _config(max_concurrent_agents=max(n, 16), max_total_agents=max(n, 1000),
                   max_items_per_call=max(n, 4096))


async def s3(kind: str, ctx: Ctx) -> Samples:
    provider = EchoProvider(latency_s=0.0)
    out: Samples = {}
    for n in S3_SIZES:
        big = n >= 10000
        warmup = ctx.pick(1 if big else 3, 0 if big else 1)
        reps = ctx.pick(7 if big else 15, 1 if big else 3)
        for label, make in (("parallel", fanout_parallel), ("Promise.all", fanout_promise_all)):
            samples = await timed_runs(kind, _raised_caps(n), provider, make(n),
                                       warmup=warmup, reps=reps)
            out[f"{label} N={n}"] = {"wall_ms": samples}
    return out


# ---- S4 sequential awaits -------------------------------------------------------------------

async def s4(kind: str, ctx: Ctx) -> Samples:
    n = 1000
    samples = await timed_runs(kind, _raised_caps(n), EchoProvider(latency_s=0.0), sequential(n),
                               warmup=ctx.pick(3, 1), reps=ctx.pick(15, 2))
    out: Samples = {"sequential N=1000": {"wall_ms": samples}}
    if kind == "baseline":
        floor = [await thread_round_trips(n) for _ in range(ctx.pick(3, 1) + ctx.pick(15, 2))]
        out[S4_FLOOR] = {"wall_ms": floor[ctx.pick(3, 1):]}
    return out


S4_FLOOR = "bare round trips N=1000"


async def thread_round_trips(n: int) -> float:
    """Wall ms of ``n`` bare round trips between the event loop and a thread, over the primitives
    QuickJSEngine uses (``LoopHandle.post`` one way, a ``SimpleQueue`` back) with no work on
    either side: what any engine that keeps script code off the loop thread pays per
    sequential ``agent()`` at the least."""
    loop = LoopHandle()
    inbox: queue.SimpleQueue[int] = queue.SimpleQueue()
    done = anyio.Event()

    def back(index: int) -> None:
        if index == n:
            done.set()
        else:
            inbox.put(index)

    def bounce() -> None:
        for index in range(n):
            loop.post(back, index)
            inbox.get()
        loop.post(back, n)

    quiesce()
    thread = threading.Thread(target=bounce, name="bench-round-trips")
    t0 = now()
    thread.start()
    await done.wait()
    t1 = now()
    thread.join()
    return (t1 - t0) * 1000.0


# ---- S5 pipeline ----------------------------------------------------------------------------

async def s5(kind: str, ctx: Ctx) -> Samples:
    n = 100
    samples = await timed_runs(kind, _raised_caps(n), EchoProvider(latency_s=0.0), pipeline3(n),
                               warmup=ctx.pick(3, 1), reps=ctx.pick(15, 3))
    return {"pipeline 3x100": {"wall_ms": samples}}


# ---- S6 100 runs in flight (isolated) -------------------------------------------------------

S6_CASE = "runs x 10 agents"


async def s6(kind: str, ctx: Ctx) -> dict[str, dict[str, float]]:
    runs, agents = ctx.pick(100, 25), 10
    provider = EchoProvider(latency_s=0.0)
    work = fanout_parallel(agents)
    before = read_status_kb()["VmRSS"]
    with RssSampler() as sampler:
        async with open_host(kind, _config(), provider) as host:
            prepared = host.prepare(work)

            async def wave(count: int) -> float:
                quiesce()
                t0 = now()
                handles = [host.start(prepared) for _ in range(count)]
                outcomes: list[Any] = [None] * count

                async def wait(i: int) -> None:
                    outcomes[i] = await handles[i].outcome()

                async with anyio.create_task_group() as tg:
                    for i in range(count):
                        tg.start_soon(wait, i)
                elapsed = now() - t0
                for outcome in outcomes:
                    check(work, outcome, kind)
                async with anyio.create_task_group() as tg:
                    for handle in handles:
                        tg.start_soon(handle.dispose)
                return elapsed

            await wave(10)  # warm-up
            await anyio.sleep(0.1)
            elapsed = await wave(runs)
    status = read_status_kb()
    return {S6_CASE: {
        "runs": float(runs),
        "wall_ms": elapsed * 1000.0,
        "peak_rss_mb": status["VmHWM"] / 1024.0,
        "peak_tree_rss_mb": sampler.peak_kb / 1024.0,
        "rss_before_mb": before / 1024.0,
    }}


# ---- S7 1,000 runs alive at once (isolated) -------------------------------------------------

def s7_runs(kind: str, ctx: Ctx) -> int:
    # A child process per run: 1,000 of them would need many GB; measure 100 and compare
    # the per-run figures. The quick run measures a fifth.
    return ctx.pick(100, 20) if kind == "subprocess" else ctx.pick(1000, 200)


async def s7(kind: str, ctx: Ctx) -> dict[str, dict[str, float]]:
    runs, agents = s7_runs(kind, ctx), 10
    provider = B.GateProvider()
    work = Work("const r = await parallel(Array.from({length: args.n}, "
                "(_, i) => () => agent('item ' + i)));\nreturn r.length;",
                B.fanout, n=agents, expect=agents)
    async with open_host(kind, _config(), provider) as host:
        prepared = host.prepare(work)
        # warm-up: one run through, so lazily imported code and caches are in place
        provider.arm()
        handle = host.start(prepared)
        await provider.wait_started(agents)
        provider.open()
        check(work, await handle.outcome(), kind)
        await handle.dispose()
        quiesce()
        await anyio.sleep(0.2)
        before = read_status_kb()["VmRSS"]
        tree_before, _ = _tree()

        provider.arm()
        t0 = now()
        handles = [host.start(prepared) for _ in range(runs)]
        await provider.wait_started(runs * agents)
        ramp = now() - t0
        await anyio.sleep(0.2)  # let every runtime thread settle into its wait
        alive = read_status_kb()["VmRSS"]
        tree_alive, children = _tree()
        provider.open()
        outcomes = [await handle.outcome() for handle in handles]
        for outcome in outcomes:
            check(work, outcome, kind)
        async with anyio.create_task_group() as tg:
            for handle in handles:
                tg.start_soon(handle.dispose)
    peak = read_status_kb()["VmHWM"]
    figures = {
        "runs": float(runs),
        "peak_rss_mb": peak / 1024.0,
        "alive_rss_mb": alive / 1024.0,
        "rss_per_run_kb": (alive - before) / runs,
        "ramp_ms": ramp * 1000.0,
    }
    if kind == "subprocess":
        figures["alive_tree_rss_mb"] = tree_alive / 1024.0
        figures["tree_rss_per_run_kb"] = (tree_alive - tree_before) / runs
        figures["child_processes"] = float(children)
    return {S7_CASE: figures}


S7_CASE = "runs alive x 10 pending"


def _tree() -> tuple[int, int]:
    from .measure import tree_rss_kb

    return tree_rss_kb()


# ---- S8 event-loop lag while a sibling spins ------------------------------------------------

SPIN_CASES = {
    "spin at start": "while (true) {}",
    "spin after await": "await agent('warm up');\nwhile (true) {}",
}


def _python_spin(cpu_s: float) -> None:
    end = time.thread_time() + cpu_s
    while time.thread_time() < end:
        pass


async def s8(kind: str, ctx: Ctx) -> Samples:
    slice_s = ctx.pick(1.0, 0.25)
    provider = EchoProvider(latency_s=0.0)
    config = _config(slice_cpu_limit_s=slice_s)
    reps = ctx.pick(5, 1)
    out: Samples = {}
    async with open_host(kind, config, provider) as host:
        if kind == "baseline":
            # The loop's own floor: the ticker with nothing else running.
            maxes, p99s = [], []
            for _ in range(reps):
                quiesce()
                ticker = Ticker()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(ticker.run)
                    await anyio.sleep(0.05)
                    mark = ticker.mark()
                    await anyio.sleep(slice_s)
                    lags = ticker.lags[mark:]
                    ticker.stop()
                maxes.append(max(lags) * 1000.0)
                p99s.append(percentile(lags, 99) * 1000.0)
            out["idle loop"] = {"max_lag_ms": maxes, "p99_lag_ms": p99s}
        for case, script in SPIN_CASES.items():
            maxes, p99s, walls = [], [], []
            for _ in range(reps):
                quiesce()
                ticker = Ticker()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(ticker.run)
                    await anyio.sleep(0.05)
                    mark = ticker.mark()
                    t0 = now()
                    if kind == "baseline":
                        # Python's way to keep a spinning sibling off the loop: a worker thread
                        # (it still competes for the GIL).
                        if case == "spin after await":
                            await provider.run(SubagentRequest(prompt="warm up",
                                                                 label="warm up",
                                                                 run_id="b", seq=1))
                        await anyio.to_thread.run_sync(_python_spin, slice_s)
                    else:
                        handle = host.start(WorkflowStartRequest(meta=META, script=script))
                        reason, _, error = await handle.outcome()
                        if reason != "error" or "RESOURCE_LIMIT" not in (error or ""):
                            raise AssertionError(f"{kind}: spin should hit the CPU limit, got "
                                                 f"{reason}: {error}")
                    walls.append((now() - t0) * 1000.0)
                    lags = ticker.lags[mark:]
                    ticker.stop()
                    if kind != "baseline":
                        await handle.dispose()
                maxes.append(max(lags) * 1000.0)
                p99s.append(percentile(lags, 99) * 1000.0)
            out[case] = {"max_lag_ms": maxes, "p99_lag_ms": p99s, "run_ms": walls}
    return out


# ---- S9 cancel latency ----------------------------------------------------------------------

async def s9(kind: str, ctx: Ctx) -> Samples:
    n = 100
    provider = B.GateProvider()
    work = Work("const r = await parallel(Array.from({length: args.n}, "
                "(_, i) => () => agent('item ' + i)));\nreturn r.length;",
                B.fanout, n=n, expect_reason="cancelled")
    samples: list[float] = []
    warmup = ctx.pick(3, 1)
    async with open_host(kind, _raised_caps(n), provider) as host:
        prepared = host.prepare(work)
        for index in range(warmup + ctx.pick(30, 3)):
            quiesce()
            await anyio.sleep(0.02)
            provider.arm()
            handle = host.start(prepared)
            await provider.wait_started(n)
            t0 = now()
            handle.cancel()
            outcome = await handle.outcome()
            t1 = now()
            await handle.dispose()
            check(work, outcome, kind)
            if index >= warmup:
                samples.append((t1 - t0) * 1000.0)
    return {"100 agents pending": {"cancel_ms": samples}}


# ---- S10 the concurrency cap governs --------------------------------------------------------

S10_LATENCY_S = 0.05
S10_CAPS = (16, 256)


def s10_expected_ms(n: int, cap: int) -> float:
    """Waves of ``cap`` children, each wave one latency long."""
    return math.ceil(n / cap) * S10_LATENCY_S * 1000.0


async def s10(kind: str, ctx: Ctx) -> Samples:
    n = ctx.pick(1000, 250)
    provider = EchoProvider(latency_s=S10_LATENCY_S)
    out: Samples = {}
    for cap in S10_CAPS:
        config = _config(max_concurrent_agents=cap, max_total_agents=max(n, 1000),
                         max_items_per_call=max(n, 4096))
        small = cap >= 256
        samples = await timed_runs(kind, config, provider, fanout_parallel(n),
                                   warmup=ctx.pick(1, 0), reps=ctx.pick(5 if small else 3, 1))
        # the same fan-out with a zero-latency provider: what the engine adds on its own
        fixed = await timed_runs(kind, config, EchoProvider(latency_s=0.0), fanout_parallel(n),
                                 warmup=ctx.pick(1, 0), reps=ctx.pick(5, 1))
        out[f"cap {cap}"] = {"wall_ms": samples, "expected_ms": [s10_expected_ms(n, cap)],
                             "zero_latency_ms": fixed, "agents": [float(n)]}
    return out


# ---- S11 the run store's cost ----------------------------------------------------------------

S11_N = 1000
S11_FANOUT = "parallel N=1000"
S11_RESUME = "resume N=1000"


async def _store_fanout_baseline(store: Any, provider: Any, n: int) -> None:
    """The Python twin of a durable fan-out: the run is recorded, each child's entry is
    committed before its value is used, two events per child are filed, the end is recorded."""
    orch = B.Orchestrator(provider, n)
    await store.create_run(orch.run_id, meta=META, script="baseline")

    async def child(index: int) -> None:
        orch.seq += 1
        seq = orch.seq
        request = SubagentRequest(prompt=f"item {index}", label=f"item {index}",
                                    run_id=orch.run_id, seq=seq)
        store.post_events(orch.run_id, [{"event": "AgentStarted", "seq": seq}])
        async with orch.slots:
            result = await provider.run(request)
        store.post_events(orch.run_id, [{"event": "AgentEnded", "seq": seq}])
        await store.commit_journal([JournalEntry(run_id=orch.run_id, seq=seq,
                                                 key=f"{seq:064x}", text=result.text)])

    async with anyio.create_task_group() as tg:
        for index in range(n):
            tg.start_soon(child, index)
    await store.finish_run(orch.run_id, status="completed", result={"value": n}, agents=n)


async def s11(kind: str, ctx: Ctx) -> Samples:
    """Fan-out of 1,000 zero-latency agents with ``SQLiteRunStore`` on a temp file and without,
    measured in pairs in the same process (alternating which goes first); and the resume of
    each stored run (every call replayed from its journal) against that run's own time."""
    n = S11_N
    provider = EchoProvider(latency_s=0.0)
    work = fanout_parallel(n)
    warmup, reps = ctx.pick(3, 1), ctx.pick(15, 3)
    plain_ms: list[float] = []
    store_ms: list[float] = []
    ratios: list[float] = []
    cpu: dict[str, list[float]] = {"plain": [], "store": [], "ratio": []}
    original_ms: list[float] = []
    resume_ms: list[float] = []
    resume_ratios: list[float] = []
    with tempfile.TemporaryDirectory(prefix="dsh-bench-store-") as folder:
        store = SQLiteRunStore(os.path.join(folder, "runs.sqlite3"))
        if kind == "baseline":
            async with store, open_host(kind, _raised_caps(n), provider) as host:
                prepared = host.prepare(work)
                for index in range(warmup + reps):
                    pair: dict[str, float] = {}
                    for which in (("plain", "store") if index % 2 else ("store", "plain")):
                        quiesce()
                        t0 = now()
                        if which == "plain":
                            handle = host.start(prepared)
                            check(work, await handle.outcome(), kind)
                        else:
                            await _store_fanout_baseline(store, provider, n)
                        pair[which] = (now() - t0) * 1000.0
                    if index >= warmup:
                        plain_ms.append(pair["plain"])
                        store_ms.append(pair["store"])
                        ratios.append(pair["store"] / pair["plain"])
            return {S11_FANOUT: {"no_store_ms": plain_ms, "store_ms": store_ms,
                                 "store_ratio": ratios}}
        cls = engine_class(kind)
        async with cls(_raised_caps(n), provider=provider) as plain, \
                cls(_raised_caps(n), provider=provider, store=store) as durable:
            request = WorkflowStartRequest(meta=META, script=work.script, args={"n": n})
            for index in range(warmup + reps):
                pair = {}
                stored_id = ""
                for which in (("plain", "store") if index % 2 else ("store", "plain")):
                    engine = plain if which == "plain" else durable
                    quiesce()
                    c0 = time.process_time()
                    t0 = now()
                    run = engine.start(request)
                    result = await run.result()
                    pair[which] = (now() - t0) * 1000.0
                    pair[which + "_cpu"] = (time.process_time() - c0) * 1000.0
                    await run.dispose()
                    check(work, (result.stop_reason, result.value, result.error), kind)
                    if which == "store":
                        stored_id = run.id
                # the stored run, resumed: all n calls answered from its journal
                quiesce()
                t0 = now()
                run = durable.start(request.model_copy(update={"resume_from": stored_id}))
                result = await run.result()
                pair["resume"] = (now() - t0) * 1000.0
                await run.dispose()
                check(work, (result.stop_reason, result.value, result.error), kind)
                if result.agents_replayed != n or result.agents_started != 0:
                    raise AssertionError(f"{kind}: resume replayed {result.agents_replayed} "
                                         f"and started {result.agents_started} of {n}")
                if index >= warmup:
                    plain_ms.append(pair["plain"])
                    store_ms.append(pair["store"])
                    ratios.append(pair["store"] / pair["plain"])
                    cpu["plain"].append(pair["plain_cpu"])
                    cpu["store"].append(pair["store_cpu"])
                    cpu["ratio"].append(pair["store_cpu"] / pair["plain_cpu"])
                    original_ms.append(pair["store"])
                    resume_ms.append(pair["resume"])
                    resume_ratios.append(pair["resume"] / pair["store"])
    return {S11_FANOUT: {"no_store_ms": plain_ms, "store_ms": store_ms, "store_ratio": ratios,
                         "no_store_cpu_ms": cpu["plain"], "store_cpu_ms": cpu["store"],
                         "store_cpu_ratio": cpu["ratio"]},
            S11_RESUME: {"original_ms": original_ms, "resume_ms": resume_ms,
                         "resume_ratio": resume_ratios}}


# ---- the list -------------------------------------------------------------------------------

_WALL = {"wall_ms": Metric("ms", label="start → result")}

SCENARIOS: tuple[Scenario, ...] = (
    Scenario("S1", "trivial run (`return 1`)", ("return 1",),
             {"latency_ms": Metric("ms", label="start → result, 20 ms idle between runs"),
              "busy_latency_ms": Metric("ms", label="start → result, 2 ms between runs"),
              "runs_per_s": Metric("runs/s", higher_is_better=True,
                                   label="back to back, start → result → dispose")},
             s1, targets=(Target("return 1", "latency_ms", "abs", 0.5),)),
    Scenario("S2", "one agent() call", ("one agent()",),
             {"latency_ms": Metric("ms", label="start → result")}, s2),
    Scenario("S3", "fan-out (parallel / Promise.all)",
             tuple(f"{label} N={n}" for n in S3_SIZES for label in ("parallel", "Promise.all")),
             _WALL, s3,
             targets=(Target("parallel N=1000", "wall_ms", "ratio", 3.0),
                      Target("Promise.all N=1000", "wall_ms", "ratio", 3.0))),
    Scenario("S4", "sequential awaits", ("sequential N=1000", S4_FLOOR), _WALL, s4,
             targets=(Target("sequential N=1000", "wall_ms", "ratio", 4.0),)),
    Scenario("S5", "pipeline, 3 stages", ("pipeline 3x100",), _WALL, s5,
             targets=(Target("pipeline 3x100", "wall_ms", "ratio", 3.0),)),
    Scenario("S6", "100 runs in flight, 10 agents each (fresh process)",
             (S6_CASE,),
             {"runs": Metric("", label="runs started at once (100; 25 with --quick)",
                             compare=False),
              "wall_ms": Metric("ms", label="start all → all results"),
              "peak_rss_mb": Metric("MB", label="VmHWM of the process"),
              "peak_tree_rss_mb": Metric("MB", label="sampled RSS incl. child processes"),
              "rss_before_mb": Metric("MB", label="VmRSS before the engine started", compare=False)},
             s6, isolated=True, reps=(5, 1)),
    Scenario("S7", "1,000 runs alive, 10 agents pending each (fresh process)",
             (S7_CASE,),
             {"runs": Metric("", label="runs alive at once (1,000; 200 with --quick)", compare=False),
              "peak_rss_mb": Metric("MB", label="VmHWM of the process (total)"),
              "alive_rss_mb": Metric("MB", label="VmRSS with every run alive"),
              "rss_per_run_kb": Metric("KiB", label="(alive − before) / runs"),
              "ramp_ms": Metric("ms", label="start all → every agent pending"),
              "alive_tree_rss_mb": Metric("MB", label="RSS incl. child processes"),
              "tree_rss_per_run_kb": Metric("KiB", label="incl. child processes"),
              "child_processes": Metric("", label="child processes alive", compare=False)},
             s7, isolated=True, reps=(3, 1),
             targets=(Target(S7_CASE, "peak_rss_mb", "abs", 400.0, full_only=True),),
             notes={"subprocess": "S7 keeps 100 runs alive on the subprocess engine, not 1,000 "
                                  "(a child process each would need ~15 GB): compare the per-run "
                                  "figures"}),
    Scenario("S8", "event-loop lag while a sibling spins to its CPU limit (1 s)",
             ("idle loop", *SPIN_CASES),
             {"max_lag_ms": Metric("ms", label="worst 1 ms tick"),
              "p99_lag_ms": Metric("ms", label="p99 of 1 ms ticks"),
              "run_ms": Metric("ms", label="spin start → result")},
             s8, targets=tuple(Target(case, "max_lag_ms", "abs", 20.0) for case in SPIN_CASES)),
    Scenario("S9", "cancel latency", ("100 agents pending",),
             {"cancel_ms": Metric("ms", label="cancel() → result()")}, s9,
             targets=(Target("100 agents pending", "cancel_ms", "abs", 20.0),)),
    Scenario("S10", "cap governs wall time (echo latency 50 ms, fan-out 1,000)",
             tuple(f"cap {cap}" for cap in S10_CAPS),
             {"wall_ms": Metric("ms", label="start → result"),
              "expected_ms": Metric("ms", label="ceil(N / cap) × 50 ms", compare=False),
              "zero_latency_ms": Metric("ms", label="the same fan-out, provider latency 0"),
              "agents": Metric("", label="N (1,000; 250 with --quick)", compare=False)}, s10,
             targets=tuple(Target(f"cap {cap}", "wall_ms", "expect", 0.0,
                                  engines=("baseline", "quickjs", "subprocess"))
                           for cap in S10_CAPS)),
    Scenario("S11", "run store: fan-out 1,000 with SQLiteRunStore vs without; resume",
             (S11_FANOUT, S11_RESUME),
             {"no_store_ms": Metric("ms", label="start → result, no store"),
              "store_ms": Metric("ms", label="start → result, SQLiteRunStore on a temp file"),
              "store_ratio": Metric("×", label="store ÷ no store, per pair", compare=False),
              "no_store_cpu_ms": Metric("ms", label="CPU time of this process (every thread; "
                                                    "not a sandbox child's), no store"),
              "store_cpu_ms": Metric("ms", label="the same with SQLiteRunStore"),
              "store_cpu_ratio": Metric("×", label="store ÷ no store CPU, per pair",
                                        compare=False),
              "original_ms": Metric("ms", label="the stored run, start → result"),
              "resume_ms": Metric("ms", label="its resume, every call replayed"),
              "resume_ratio": Metric("×", label="resume ÷ original, per pair", compare=False)},
             s11, targets=(Target(S11_FANOUT, "store_ratio", "abs", 1.5),)),
)

BY_ID = {scenario.id: scenario for scenario in SCENARIOS}
