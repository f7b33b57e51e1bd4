"""The crash-and-replay oracle on a fixed set of seeds (SPEC §25; docs/durable-runs.md, "How we
prove it"; the machinery is in ``_oracle_harness.py``, the benchmark runs many more seeds).

Each seed is a generated workflow (``agent()`` with and without a schema, ``parallel``,
``pipeline``, loops, ``workflow()`` of saved workflows, repeated prompts, calls that fail,
``first()`` races, ``ask()`` and ``checkpoint()``) against a provider whose completions are
shuffled by a seed and which records every call it is paid for (and an answerer that records
every question it is asked). A child
process running a real engine over a real SQLite store kills itself (SIGKILL) right after its
k-th journal commit, then is resumed in another process — which may be killed too, at a commit
counted within the resume — until a process completes the run. The last value must equal an
uninterrupted run's, no journaled call may be paid again (nor a journaled question asked
again), the store must hold one final state
per run and the events must keep the contract.

``DSH_ORACLE_SEEDS=3,11 pytest tests/durable/oracle`` runs other seeds (a failure names its seed,
its crash points and the generated script).
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _oracle_gen import KINDS, generate
from _oracle_harness import kill_points, prepare, reference, run_case

#: Chosen so that together they use every call kind (checked below).
SEEDS = (2, 5, 17)


def seeds() -> tuple[int, ...]:
    given = os.environ.get("DSH_ORACLE_SEEDS", "").strip()
    return tuple(int(x) for x in given.split(",")) if given else SEEDS


def test_the_fixed_seeds_use_every_call_kind() -> None:
    used = set().union(*(generate(seed).kinds for seed in SEEDS))
    assert used == set(KINDS), set(KINDS) - used


def test_a_seed_reproduces_its_program() -> None:
    assert generate(13) == generate(13)
    assert generate(13).script != generate(14).script


@pytest.mark.parametrize("seed", seeds())
def test_crash_at_the_kth_commit_then_resume_until_done(seed: int, tmp_path: Path) -> None:
    program = prepare(seed, tmp_path)
    ref = reference(program, tmp_path)
    assert ref.commits >= 2, (seed, ref)
    rng = random.Random(seed)
    # first commit; mid-run then the resume's first commit; late, then two resumes killed
    # while they journal their replayed answers again
    cases = [(1,), (max(1, ref.commits // 2), 1), (*kill_points(rng, ref.commits, 1), 2, 1)]
    engines = [{"engine": "quickjs", "backend": "trio"},
               {"engine": "quickjs", "backend": "asyncio"},
               {"engine": "subprocess" if sys.platform.startswith("linux") else "quickjs",
                "backend": "trio"}]
    crashes = []
    for index, (kills, engine) in enumerate(zip(cases, engines, strict=True)):
        chain = run_case(program, tmp_path, ref, kills, name=f"chain{index}", **engine)
        crashes += chain.crashes
    # the first commit of a run and of a resume always comes: these kills cannot miss
    assert (1, 1) in crashes and (2, 1) in crashes, crashes
