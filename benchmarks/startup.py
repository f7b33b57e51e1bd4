"""S12: start-up time of the command line (docs/cli.md; SPEC §18).

Two figures a person feels every time they type the command, each the wall time of a whole
process from spawn to exit, median of repeated runs after warm-up runs (which leave the
bytecode caches written):

- ``dsh-workflow --help`` — at most 0.3 s on the two-core reference machine;
- ``dsh-workflow run`` of a trivial offline workflow (``return 1`` on the echo provider,
  recorded in a run store on a temp file, plain progress on a pipe) — at most 0.6 s.

Bytecode caches are allowed to be written (the warm-up runs write them), as an installed
command has them. The CPU time of each process (user + system, from ``wait4``) is recorded beside it: on a busy
shared machine it moves much less than the wall time. The baseline is the interpreter alone
(``python -c pass``), the floor every Python command line starts from. The subprocess engine
measures only the run (``--help`` does not depend on the engine).
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from .measure import quiesce
from .scenarios import Ctx, Metric, Samples, Scenario, Target

__all__ = ["HELP_CASE", "RUN_CASE", "S12", "cli_argv", "measure_process"]

HELP_CASE = "dsh-workflow --help"
RUN_CASE = "run `return 1`"
HELP_LIMIT_MS = 300.0
RUN_LIMIT_MS = 600.0
TRIVIAL = 'export const meta = {name: "startup", description: "start-up benchmark"};\nreturn 1;\n'


def cli_argv() -> list[str]:
    """How to start the installed command: the ``dsh-workflow`` script beside this
    interpreter, else ``python -m dsh_workflow``."""
    script = Path(sys.executable).with_name("dsh-workflow")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    found = shutil.which("dsh-workflow")
    if found is not None:
        return [found]
    return [sys.executable, "-m", "dsh_workflow"]


def _env() -> dict[str, str]:
    """The environment of a measured process: this one's, with bytecode caching allowed (an
    installed command has its ``.pyc`` files; the warm-up runs write them here) and no
    variable that would force rich's live panel onto the pipe."""
    return {key: value for key, value in os.environ.items()
            if key not in ("PYTHONDONTWRITEBYTECODE", "FORCE_COLOR", "TTY_COMPATIBLE")}


def measure_process(argv: list[str], cwd: str) -> tuple[float, float]:
    """Run ``argv`` to completion (stdout and stderr to pipes that are drained); return its
    wall time and CPU time (user + system), in milliseconds. A failing command raises.

    The CPU time is the growth of ``RUSAGE_CHILDREN`` across the run: nothing else in this
    process runs children meanwhile."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=_env(), stdin=subprocess.DEVNULL,
                          capture_output=True, check=False)
    wall_ms = (time.perf_counter() - started) * 1000.0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}: "
                           f"{proc.stderr.decode(errors='replace')[-2000:]}")
    cpu_ms = ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000.0
    return wall_ms, cpu_ms


def _commands(kind: str, folder: str) -> dict[str, list[str]]:
    if kind == "baseline":
        floor = [sys.executable, "-c", "pass"]
        return {HELP_CASE: floor, RUN_CASE: floor}
    script = os.path.join(folder, "trivial.js")
    store = os.path.join(folder, "runs.sqlite3")
    run = [*cli_argv(), "run", script, "--store", store, "--engine", kind]
    if kind == "subprocess":
        return {RUN_CASE: run}
    return {HELP_CASE: [*cli_argv(), "--help"], RUN_CASE: run}


def _sample(kind: str, ctx: Ctx) -> Samples:
    warmup, reps = ctx.pick(2, 1), ctx.pick(15, 3)
    figures: Samples = {}
    with tempfile.TemporaryDirectory(prefix="dsh-bench-startup-") as folder:
        Path(folder, "trivial.js").write_text(TRIVIAL, encoding="utf-8")
        commands = _commands(kind, folder)
        for index in range(warmup + reps):
            for case, argv in commands.items():  # interleaved, so load drifts hit both alike
                quiesce()
                wall_ms, cpu_ms = measure_process(argv, folder)
                if index >= warmup:
                    metrics = figures.setdefault(case, {"wall_ms": [], "cpu_ms": []})
                    metrics["wall_ms"].append(wall_ms)
                    metrics["cpu_ms"].append(cpu_ms)
    return figures


async def s12(kind: str, ctx: Ctx) -> Samples:
    """Each case's process wall and CPU time (see the module docstring)."""
    return await anyio.to_thread.run_sync(_sample, kind, ctx)


S12 = Scenario(
    "S12", "command-line start-up (process wall time)", (HELP_CASE, RUN_CASE),
    {"wall_ms": Metric("ms", label="spawn → exit of the whole process"),
     "cpu_ms": Metric("ms", label="user + system CPU time of the process")},
    s12,
    targets=(Target(HELP_CASE, "wall_ms", "abs", HELP_LIMIT_MS),
             Target(RUN_CASE, "wall_ms", "abs", RUN_LIMIT_MS)))
