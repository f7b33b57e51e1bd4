"""Soak test: many runs through one long-lived engine must leave memory and threads flat.

    python -m benchmarks.soak                 # 10,000 sequential runs + 20 rounds of 100 at once
    python -m benchmarks.soak --quick         # 2,000 sequential + 10 rounds of 100 (~30 s)
    python -m benchmarks.soak --engine subprocess --backend asyncio --out soak.json

``main(argv)`` is the entry point (``python -m benchmarks soak`` is wired to it by the
benchmarks CLI). Two phases run on one engine each:

* **sequential** — one run at a time; every run draws its script from :data:`MIX` (agents,
  parallel/pipeline, schemas, narration, script errors, memory/stack/CPU limits, stalls,
  unserializable results, agent caps, cancellations of a run waiting on a child), so every
  path through the engine is exercised thousands of times;
* **concurrent** — rounds of ``--concurrent`` runs started together from the same mix.

Every ``--sample-every`` runs (and after each concurrent round) the process is sampled after a
``gc.collect()``: ``VmRSS`` of this process plus its children (the subprocess engine's
sandboxes), the thread count and the open descriptor count. After the warm-up (the first
``--warmup`` fraction of samples) the least-squares slope of each series per 1,000 runs must
not rise above its bound (a leak grows; memory returned to the OS is fine), and every run must
end the way its script says; the exit status is 0 when all holds, 1 otherwise, 2 for bad
arguments.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio

from dsh_workflow import (
    EngineConfig,
    QuickJSEngine,
    SubagentRequest,
    SubagentResult,
    WorkflowStartRequest,
)

__all__ = ["MIX", "Sample", "analyse", "main"]

META = {"name": "soak", "description": "a soak-test workflow"}
SCHEMA = {"type": "object", "properties": {"v": {"type": "string"}}, "required": ["v"]}
#: Bounds on the post-warm-up slopes, per 1,000 runs. Concurrent rounds hold up to 100 heaps
#: at once, so their RSS samples scatter by a few MiB; their bound is wider.
RSS_SLOPE_KIB = {"sequential": 1024.0, "concurrent": 4096.0}
THREAD_SLOPE = 0.5
FD_SLOPE = 0.5


@dataclass(frozen=True)
class Kind:
    """One script of the mix and the stop reason (and error fragment) it must end with."""

    name: str
    script: str
    stop: str
    fragment: str = ""
    cancel: bool = False
    max_total_agents: int | None = None


MIX: tuple[Kind, ...] = (
    Kind("agents", "const a = await agent('one');\n"
         "const b = await parallel([1, 2, 3, 4].map((i) => () => agent('p' + i)));\n"
         "return [a, b.length];", "completed"),
    Kind("pipeline", "log('piping'); phase('pipe');\n"
         "return await pipeline(['a', 'b', 'c'], (x) => agent(x), (y) => y.length);",
         "completed"),
    Kind("schema", f"return await agent('s', {{schema: {json.dumps(SCHEMA)}}});", "completed"),
    Kind("agents", "const r = [];\nfor (let i = 0; i < 5; i++) r.push(await agent('seq' + i));\n"
         "return r.length;", "completed"),
    Kind("script-error", "await agent('x');\nthrow new Error('boom');", "error", "boom"),
    Kind("memory", "const a = [];\nfor (;;) a.push('x'.repeat(4096) + a.length);", "error",
         "memory_limit_bytes"),
    Kind("agents", "return (await parallel([() => agent('a'), () => { throw new Error('x'); }]))"
         ".length;", "completed"),
    Kind("stack", "function f() { return f() + 1; }\nreturn f();", "error",
         "stack_limit_bytes"),
    Kind("cpu", "await agent('x');\nfor (;;) {}", "error", "slice_cpu_limit_s"),
    Kind("stall", "await new Promise(() => {});", "error", "nothing will ever settle"),
    Kind("unserializable", "return {f() {}};", "error", "RESULT_UNSERIALIZABLE"),
    Kind("agent-cap", "await agent('a'); await agent('b'); await agent('c');", "error",
         "AGENT_CAP", max_total_agents=2),
    Kind("cancel", "return await agent('hang');", "cancelled", cancel=True),
    Kind("agents", "return await agent('last', {label: 'L', phase: 'P'});", "completed"),
)


class SoakProvider:
    """Answers at once; ``hang`` prompts wait until cancelled (and announce that they wait)."""

    def __init__(self) -> None:
        self.waiting: dict[str, anyio.Event] = {}

    def started(self, run_id: str) -> anyio.Event:
        return self.waiting.setdefault(run_id, anyio.Event())

    async def run(self, request: SubagentRequest) -> SubagentResult:
        if request.prompt == "hang":
            self.started(request.run_id).set()
            try:
                await anyio.sleep_forever()
            finally:
                self.waiting.pop(request.run_id, None)
        await anyio.lowlevel.checkpoint()
        if request.schema is not None:
            return SubagentResult(structured={"v": request.prompt})
        return SubagentResult(text="re:" + request.prompt)


@dataclass
class Sample:
    phase: str
    runs: int
    seconds: float
    rss_kib: int
    threads: int
    fds: int


@dataclass
class Phase:
    name: str
    samples: list[Sample] = field(default_factory=list)
    runs: int = 0
    mismatches: list[str] = field(default_factory=list)
    by_kind: dict[str, int] = field(default_factory=dict)
    slowest: dict[str, float] = field(default_factory=dict)  # kind -> longest run (seconds)


# ---- sampling -------------------------------------------------------------------------------


def _status_value(pid: int | str, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                name, _, rest = line.partition(":")
                if name == key:
                    return int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _descendants() -> list[int]:
    found: list[int] = []
    stack = [os.getpid()]
    while stack:
        pid = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                kids = Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
            except OSError:
                continue
            for kid in kids:
                found.append(int(kid))
                stack.append(int(kid))
    return found


def _trim() -> None:
    """Return freed heap to the OS (glibc), so RSS shows live memory, not allocator slack."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def take_sample(phase: str, runs: int, began: float) -> Sample:
    gc.collect()
    _trim()
    rss = _status_value("self", "VmRSS") + sum(_status_value(p, "VmRSS") for p in _descendants())
    try:
        fds = len(os.listdir("/proc/self/fd"))
    except OSError:
        fds = 0
    return Sample(phase=phase, runs=runs, seconds=round(time.perf_counter() - began, 3),
                  rss_kib=rss, threads=threading.active_count(), fds=fds)


def slope_per_1000(samples: Sequence[Sample], attr: str) -> float:
    """Least-squares slope of ``attr`` against the run count, per 1,000 runs."""
    xs = [s.runs for s in samples]
    ys = [float(getattr(s, attr)) for s in samples]
    if len(xs) < 2:
        return 0.0
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    if var == 0:
        return 0.0
    return 1000.0 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var


def analyse(phase: Phase, warmup: float) -> dict[str, Any]:
    """Slopes after the warm-up and whether each stays within its bound."""
    skip = int(len(phase.samples) * warmup)
    steady = phase.samples[skip:]
    figures: dict[str, Any] = {
        "rss_kib_per_1000": slope_per_1000(steady, "rss_kib"),
        "threads_per_1000": slope_per_1000(steady, "threads"),
        "fds_per_1000": slope_per_1000(steady, "fds"),
        "rss_first_kib": steady[0].rss_kib if steady else None,
        "rss_last_kib": steady[-1].rss_kib if steady else None,
        "threads_range": [min(s.threads for s in steady), max(s.threads for s in steady)]
        if steady else None,
    }
    # Growth is what a leak looks like; memory handed back to the OS is not a failure.
    figures["flat"] = (figures["rss_kib_per_1000"] <= RSS_SLOPE_KIB[phase.name]
                       and figures["threads_per_1000"] <= THREAD_SLOPE
                       and figures["fds_per_1000"] <= FD_SLOPE)
    return figures

# ---- running ------------------------------------------------------------------------------


async def one_run(engine: Any, provider: SoakProvider, kind: Kind, phase: Phase) -> None:
    began = time.perf_counter()
    run = engine.start(WorkflowStartRequest(meta=META, script=kind.script,
                                            max_total_agents=kind.max_total_agents))
    if kind.cancel:
        with anyio.move_on_after(10):
            await provider.started(run.id).wait()
        run.cancel("soak cancellation")
    with anyio.move_on_after(30) as scope:
        result = await run.result()
    await run.dispose()
    phase.runs += 1
    phase.by_kind[kind.name] = phase.by_kind.get(kind.name, 0) + 1
    took = time.perf_counter() - began
    phase.slowest[kind.name] = max(phase.slowest.get(kind.name, 0.0), round(took, 4))
    if scope.cancelled_caught:
        phase.mismatches.append(f"{kind.name}: no result within 30 s")
        return
    text = result.error or ""
    if result.stop_reason != kind.stop or kind.fragment not in text:
        if len(phase.mismatches) < 20:
            phase.mismatches.append(f"{kind.name}: {result.stop_reason} {text[:200]!r}")
        else:
            phase.mismatches.append("...")


def make_engine(kind: str, config: EngineConfig, provider: SoakProvider) -> Any:
    if kind == "quickjs":
        return QuickJSEngine(config, provider=provider)
    from dsh_workflow._engines.subprocess import SubprocessEngine

    return SubprocessEngine(config, provider=provider)


def soak_config() -> EngineConfig:
    return EngineConfig(memory_limit_bytes=8 * 1024 * 1024, stack_limit_bytes=256 * 1024,
                        slice_cpu_limit_s=0.05, dispose_grace_s=1.0, run_timeout_s=20.0)


async def sequential(args: argparse.Namespace, report: Any) -> Phase:
    phase = Phase("sequential")
    provider = SoakProvider()
    began = time.perf_counter()
    async with make_engine(args.engine, soak_config(), provider) as engine:
        phase.samples.append(take_sample(phase.name, 0, began))
        for i in range(args.sequential):
            await one_run(engine, provider, MIX[i % len(MIX)], phase)
            if (i + 1) % args.sample_every == 0:
                sample = take_sample(phase.name, i + 1, began)
                phase.samples.append(sample)
                report(sample)
    return phase


async def concurrent(args: argparse.Namespace, report: Any) -> Phase:
    phase = Phase("concurrent")
    provider = SoakProvider()
    began = time.perf_counter()
    async with make_engine(args.engine, soak_config(), provider) as engine:
        phase.samples.append(take_sample(phase.name, 0, began))
        offset = 0
        for _ in range(args.rounds):
            async with anyio.create_task_group() as tg:
                for j in range(args.concurrent):
                    tg.start_soon(one_run, engine, provider, MIX[(offset + j) % len(MIX)],
                                  phase)
            offset += args.concurrent
            sample = take_sample(phase.name, phase.runs, began)
            phase.samples.append(sample)
            report(sample)
    return phase


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=(
        "Soak test: many mixed runs through one engine; memory and threads must stay flat."))
    parser.add_argument("--quick", action="store_true", help="a short version (~30 s)")
    parser.add_argument("--engine", choices=("quickjs", "subprocess"), default="quickjs")
    parser.add_argument("--backend", choices=("trio", "asyncio"), default="trio")
    parser.add_argument("--sequential", type=int, help="sequential runs (default 10000)")
    parser.add_argument("--concurrent", type=int, default=100, help="runs per concurrent round")
    parser.add_argument("--rounds", type=int, help="concurrent rounds (default 20)")
    parser.add_argument("--sample-every", type=int, help="sample every N sequential runs")
    parser.add_argument("--warmup", type=float,
                        help="fraction of samples ignored as warm-up (default 0.2; 0.5 with "
                        "--quick: the first ~1,000 runs fill the interpreter's caches)")
    parser.add_argument("--out", type=Path, help="write samples and figures as JSON here")
    args = parser.parse_args(list(argv))
    if args.sequential is None:
        args.sequential = 2000 if args.quick else 10_000
    if args.warmup is None:
        args.warmup = 0.5 if args.quick else 0.2
    if args.rounds is None:
        args.rounds = 10 if args.quick else 20
    if args.sample_every is None:
        args.sample_every = max(1, args.sequential // 40)
    if args.sequential < 1 or args.concurrent < 1 or args.rounds < 1 or args.sample_every < 1 \
            or not 0 <= args.warmup < 1:
        parser.error("counts must be positive and --warmup in [0, 1)")
    return args


def _print_row(sample: Sample) -> None:
    print(f"  {sample.phase:<10} {sample.runs:>7} {sample.seconds:>9.1f} "
          f"{sample.rss_kib / 1024:>9.1f} {sample.threads:>7} {sample.fds:>5}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:
        return int(exc.code or 0) if exc.code in (0, None) else 2
    print(f"soak: engine={args.engine} backend={args.backend} sequential={args.sequential} "
          f"concurrent={args.rounds}x{args.concurrent} mix={len(MIX)} scripts", flush=True)
    print(f"  {'phase':<10} {'runs':>7} {'seconds':>9} {'RSS MiB':>9} {'threads':>7} "
          f"{'fds':>5}", flush=True)

    async def both() -> list[Phase]:
        return [await sequential(args, _print_row), await concurrent(args, _print_row)]

    phases = anyio.run(both, backend=args.backend)
    ok = True
    figures: dict[str, Any] = {}
    for phase in phases:
        result = analyse(phase, args.warmup)
        figures[phase.name] = {**result, "runs": phase.runs, "by_kind": phase.by_kind,
                               "slowest_s": phase.slowest, "mismatches": phase.mismatches}
        good = result["flat"] and not phase.mismatches
        ok = ok and good
        bound = RSS_SLOPE_KIB[phase.name]
        print(f"{phase.name}: {phase.runs} runs; after warm-up RSS "
              f"{result['rss_kib_per_1000']:+.1f} KiB/1000 runs (bound +{bound:g}), "
              f"threads {result['threads_per_1000']:+.3f}/1000 (+{THREAD_SLOPE:g}), "
              f"fds {result['fds_per_1000']:+.3f}/1000 (+{FD_SLOPE:g}); "
              f"{len(phase.mismatches)} unexpected outcomes -> {'FLAT' if good else 'FAIL'}")
        slow = sorted(phase.slowest.items(), key=lambda item: -item[1])[:3]
        print("    slowest runs: " + ", ".join(f"{name} {secs:.3f} s" for name, secs in slow))
        for line in phase.mismatches[:10]:
            print(f"    unexpected: {line}")
    if args.out is not None:
        args.out.write_text(json.dumps({
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "figures": figures,
            "samples": [asdict(s) for p in phases for s in p.samples],
        }, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
