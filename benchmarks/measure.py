"""Measuring tools: statistics, memory (``/proc``), event-loop lag, machine description.

Everything here is backend-neutral (anyio) and dependency-free beyond the project's own.
"""

from __future__ import annotations

import datetime as _dt
import gc
import math
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

import anyio

__all__ = [
    "RssSampler",
    "Ticker",
    "machine_info",
    "now",
    "percentile",
    "quiesce",
    "read_status_kb",
    "stats",
    "tree_rss_kb",
]

now = time.perf_counter


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by nearest rank; NaN for no samples."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def stats(samples: Sequence[float]) -> dict[str, Any]:
    """Median, min and max of repeated measurements (the figures the table shows)."""
    values = [float(v) for v in samples]
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0, "samples": []}
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
        "samples": [round(v, 6) for v in values],
    }


def quiesce() -> None:
    """Collect garbage before a timed sample so the collector's pauses fall outside it."""
    gc.collect()


# ---- memory ---------------------------------------------------------------------------------

def read_status_kb(pid: int | str = "self") -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` (peak RSS) of a process, in KiB (0 when unreadable)."""
    out = {"VmRSS": 0, "VmHWM": 0}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in out:
                    out[key] = int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return out


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            text = Path(f"/proc/{pid}/task/{tid}/children").read_text()
        except OSError:
            continue
        kids.extend(int(x) for x in text.split())
    return kids


def tree_rss_kb(pid: int | None = None) -> tuple[int, int]:
    """RSS of a process plus all its descendants (KiB), and how many descendants there are."""
    root = os.getpid() if pid is None else pid
    total = read_status_kb(root)["VmRSS"]
    count = 0
    stack = _children(root)
    while stack:
        child = stack.pop()
        count += 1
        total += read_status_kb(child)["VmRSS"]
        stack.extend(_children(child))
    return total, count


class RssSampler:
    """Samples the RSS of this process and its descendants on a background thread.

    ``VmHWM`` already gives this process's own peak; the sampler adds child processes (the
    subprocess engine's runtimes), whose memory is not in the parent's figures.
    """

    def __init__(self, interval_s: float = 0.05) -> None:
        self.interval_s = interval_s
        self.peak_kb = 0
        self.peak_children = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-rss-sampler", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def sample(self) -> int:
        total, count = tree_rss_kb()
        if total > self.peak_kb:
            self.peak_kb = total
        self.peak_children = max(self.peak_children, count)
        return total

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()


# ---- event-loop lag -------------------------------------------------------------------------

class Ticker:
    """A task that sleeps ``period_s`` over and over and records how late each wake-up is.

    The lag of one tick is ``actual sleep − requested sleep``: the time the event loop could
    not run this task although it was due.
    """

    def __init__(self, period_s: float = 0.001) -> None:
        self.period_s = period_s
        self.lags: list[float] = []
        self._running = True

    def mark(self) -> int:
        return len(self.lags)

    def stop(self) -> None:
        self._running = False

    async def run(self) -> None:
        period = self.period_s
        lags = self.lags
        while self._running:
            t0 = now()
            await anyio.sleep(period)
            lags.append(now() - t0 - period)


# ---- the machine ----------------------------------------------------------------------------

def _git_free_version(module: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:  # noqa: BLE001 - a version that cannot be read is None
        return None


def machine_info(backend: str) -> dict[str, Any]:
    """Date, CPU count, architecture, kernel, Python and library versions."""
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_total_mb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_total_mb = int(line.split()[1]) // 1024
                break
    except (OSError, ValueError):
        pass
    try:
        uname_m = subprocess.run(["uname", "-m"], capture_output=True, text=True,
                                 check=False).stdout.strip() or platform.machine()
    except OSError:
        uname_m = platform.machine()
    return {
        "date": _dt.datetime.now(_dt.UTC).astimezone().isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "uname_m": uname_m,
        "cpu_model": model,
        "mem_total_mb": mem_total_mb,
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "python_impl": platform.python_implementation(),
        "backend": backend,
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        "versions": {name: _git_free_version(name)
                     for name in ("quickjs-ng", "anyio", "trio", "pydantic")},
    }
