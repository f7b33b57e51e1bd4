"""S13: the crash-and-replay oracle over many seeds (SPEC §25; docs/durable-runs.md, "How we
prove it").

The test suite runs the oracle (``tests/durable/oracle/``) on three fixed seeds; this scenario
runs it on many: for each seed an uninterrupted reference run, then several crashed chains — the
first process killed at a distinct journal commit, its resumes killed early in theirs — each
resumed until done and checked (a broken promise fails the scenario, naming the seed). It
reports what it covered: the distinct crash points that really killed a process (a kill after
the same earlier kills of the same seed counts once), the first runs' kill points against the
commit points they offered, the processes killed and resumed, the calls replayed and the calls
paid again (those in flight when a process died, and failed ones: never a journaled one).

It is slow (a few processes per chain) and measures no speed, so ``--quick`` leaves it out
unless ``--only S13`` names it (then it runs two seeds). ``DSH_ORACLE_BENCH_SEEDS=N`` sets how
many seeds a full run takes (default 12); the seeds are 1000, 1001, ...
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from pathlib import Path

import anyio

from .scenarios import Ctx, Metric, Samples, Scenario

__all__ = ["S13"]

ORACLE = Path(__file__).resolve().parent.parent / "tests" / "durable" / "oracle"
CASE = "generated workflows, kill -9 at the k-th journal commit"
FIRST_SEED = 1000


def _seeds(ctx: Ctx) -> range:
    count = int(os.environ.get("DSH_ORACLE_BENCH_SEEDS", "") or ctx.pick(12, 2))
    return range(FIRST_SEED, FIRST_SEED + count)


def _sample(kind: str, ctx: Ctx) -> Samples:
    sys.path.insert(0, str(ORACLE))
    from _oracle_harness import prepare, reference, run_case

    chains_per_seed = ctx.pick(4, 2)
    started = time.perf_counter()
    points: set[tuple[int, ...]] = set()  # (seed, k1, ..., kn): a kill after the same ones
    firsts_hit: set[tuple[int, int]] = set()
    offered = chains = killed = resumes = replayed = paid_again = 0
    for seed in _seeds(ctx):
        with tempfile.TemporaryDirectory(prefix="dsh-bench-oracle-") as name:
            folder = Path(name)
            program = prepare(seed, folder)
            ref = reference(program, folder, engine=kind, backend=ctx.backend)
            offered += ref.commits
            rng = random.Random(seed)
            firsts = rng.sample(range(1, ref.commits + 1), min(chains_per_seed, ref.commits))
            for index, first in enumerate(firsts):
                # each resume killed early (re-journaling replays) or anywhere, or not at all
                kills = (first, *(rng.randint(1, rng.choice((3, ref.commits)))
                                  for _ in range(rng.randint(0, 2))))
                chain = run_case(program, folder, ref, kills, name=f"chain{index}",
                                 engine=kind, backend=ctx.backend)
                chains += 1
                died = [k for _, k in chain.crashes]
                points.update((seed, *died[:n + 1]) for n in range(len(died)))
                if died:
                    firsts_hit.add((seed, died[0]))
                killed += len(chain.crashes)
                resumes += len(chain.attempts) - 1
                replayed += int(chain.attempts[-1].field("replayed") or 0)
                paid_again += _paid(folder / f"chain{index}.ledger") - sum(ref.asked.values())
    return {CASE: {"seeds": [float(len(_seeds(ctx)))], "chains": [float(chains)],
                   "crash_points": [float(len(points))],
                   "first_points": [float(len(firsts_hit))],
                   "commit_points": [float(offered)], "killed": [float(killed)],
                   "resumes": [float(resumes)], "replayed": [float(replayed)],
                   "paid_again": [float(paid_again)],
                   "wall_s": [time.perf_counter() - started]}}


def _paid(ledger: Path) -> int:
    return sum(1 for _ in ledger.open(encoding="utf-8")) if ledger.exists() else 0


async def s13(kind: str, ctx: Ctx) -> Samples:
    """The oracle's coverage on ``kind`` (the baseline has no journal: no figures)."""
    if kind == "baseline":
        return {}
    return await anyio.to_thread.run_sync(_sample, kind, ctx)


S13 = Scenario(
    "S13", "crash-and-replay oracle: generated workflows killed and resumed (many seeds)",
    (CASE,),
    {"seeds": Metric("", label="generated workflows (12; 2 with --quick)", compare=False),
     "chains": Metric("", label="crashed chains, each resumed until done and checked",
                      compare=False),
     "crash_points": Metric("", label="distinct kills that happened: (seed, k1, ..., kn), "
                                      "the n-th process killed at its kn-th commit",
                            compare=False),
     "first_points": Metric("", label="distinct (seed, k) first runs killed at", compare=False),
     "commit_points": Metric("", label="journal commits of the uninterrupted runs (the "
                                       "first kills' range)", compare=False),
     "killed": Metric("", label="processes killed at their k-th commit", compare=False),
     "resumes": Metric("", label="processes that resumed a killed run", compare=False),
     "replayed": Metric("", label="calls the completing resumes replayed", compare=False),
     "paid_again": Metric("", label="calls paid again: in flight at a kill or failed (never "
                                    "journaled)", compare=False),
     "wall_s": Metric("s", label="the whole scenario", compare=False)},
    s13, quick=False)
