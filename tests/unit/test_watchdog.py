"""The sandbox watchdog's decisions, driven by a fake clock and fake CPU readings.

``Watchdog`` reads no clock and no ``/proc``: every test hands it the time and the CPU seconds,
so each threshold is checked at its exact edge and a run of many minutes takes no time.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_workflow._engines.subprocess.watchdog import Kill, KillReason, Wake, Watchdog

# Binary fractions, so every edge below is exact in floating point.
SLICE = 0.25
HANG = 1.0
GRACE = 0.25
INTERVAL = 0.0625  # min(0.1, max(0.01, SLICE / 4))
OVERRUN = 1.0  # 2 * SLICE + 0.5


class Cpu:
    """A fake CPU reader: returns ``value`` and counts how often it was read."""

    def __init__(self, value: float | None = 0.0) -> None:
        self.value = value
        self.reads = 0

    def __call__(self) -> float | None:
        self.reads += 1
        return self.value


def _dog() -> Watchdog:
    return Watchdog(slice_cpu_limit_s=SLICE, hang_after_s=HANG, grace_s=GRACE)


def _busy(dog: Watchdog, now: float, cpu: Cpu, *, since: float = 0.0,
          idle_cpu: float = 0.0) -> Wake | Kill:
    return dog.check(now, busy_since=since, stopped_at=None, ended_at=None,
                     cpu_at_idle=idle_cpu, cpu=cpu)


def _started(dog: Watchdog, cpu: Cpu, since: float = 0.0) -> None:
    """The first look at the stretch that began at ``since`` (it measures nothing)."""
    assert _busy(dog, since, cpu, since=since) == Wake(since + INTERVAL)


def test_the_numbers_derive_from_the_settings() -> None:
    dog = _dog()
    assert dog.overrun_cpu_s == OVERRUN
    assert dog.interval_s == INTERVAL
    assert dog.unmeasured_limit_s == HANG + 4 * SLICE


@pytest.mark.parametrize(("slice_s", "interval"), [(10.0, 0.1), (0.2, 0.05), (0.001, 0.01)])
def test_the_interval_is_a_quarter_slice_between_10_and_100_ms(slice_s: float,
                                                               interval: float) -> None:
    dog = Watchdog(slice_cpu_limit_s=slice_s, hang_after_s=HANG, grace_s=GRACE)
    assert dog.interval_s == pytest.approx(interval)


def test_an_idle_process_is_never_measured_nor_killed() -> None:
    dog, cpu = _dog(), Cpu(1e9)
    for now in (0.0, 1e3, 1e6):
        verdict = dog.check(now, busy_since=None, stopped_at=None, ended_at=None,
                            cpu_at_idle=0.0, cpu=cpu)
        assert verdict == Wake(math.inf)
    assert cpu.reads == 0


def test_the_first_measurement_comes_one_interval_into_a_stretch() -> None:
    dog, cpu = _dog(), Cpu(1e9)  # a reading that would be an overrun at once
    # The first look measures nothing, even when it comes late: it wakes one interval after the
    # stretch began.
    assert _busy(dog, 0.5, cpu, since=0.0) == Wake(INTERVAL)
    assert cpu.reads == 0
    assert _busy(dog, 0.5, cpu) == Kill(KillReason.OVERRUN)
    assert cpu.reads == 1


def test_each_look_reads_the_cpu_once_and_wakes_an_interval_later() -> None:
    dog, cpu = _dog(), Cpu(0.0)
    _started(dog, cpu)
    for step in range(1, 6):
        now = step * INTERVAL
        cpu.value = step / 64
        assert _busy(dog, now, cpu) == Wake(now + INTERVAL)
        assert cpu.reads == step


def test_a_stretch_is_killed_once_it_used_more_than_twice_the_slice_plus_half_a_second() -> None:
    dog, cpu = _dog(), Cpu()
    idle = 8.0  # CPU the process used before this stretch does not count
    _started(dog, cpu)
    cpu.value = idle + OVERRUN  # exactly the limit: not more
    assert _busy(dog, 1.0, cpu, idle_cpu=idle) == Wake(1.0 + INTERVAL)
    cpu.value = idle + OVERRUN + 1 / 64
    assert _busy(dog, 1.0 + INTERVAL, cpu, idle_cpu=idle) == Kill(KillReason.OVERRUN)


def test_overrun_is_judged_before_progress() -> None:
    # A reading past the limit kills even though it is also progress.
    dog, cpu = _dog(), Cpu()
    _started(dog, cpu)
    cpu.value = 100.0
    assert _busy(dog, INTERVAL, cpu) == Kill(KillReason.OVERRUN)


def test_a_busy_process_without_cpu_progress_is_hung_after_hang_after_s() -> None:
    dog, cpu = _dog(), Cpu(0.5)
    _started(dog, cpu)
    # The first reading always counts as progress: the hang timer runs from it.
    first = INTERVAL
    assert _busy(dog, first, cpu) == Wake(first + INTERVAL)
    assert _busy(dog, first + HANG, cpu) == Wake(first + HANG + INTERVAL)  # exactly: not yet
    assert _busy(dog, first + HANG + 1 / 64, cpu) == Kill(KillReason.HUNG)


def test_cpu_progress_restarts_the_hang_timer() -> None:
    dog, cpu = _dog(), Cpu(0.125)
    _started(dog, cpu)
    assert isinstance(_busy(dog, INTERVAL, cpu), Wake)
    cpu.value = 0.126  # a little progress at 0.875
    assert isinstance(_busy(dog, 0.875, cpu), Wake)
    assert isinstance(_busy(dog, 0.875 + HANG, cpu), Wake)
    assert _busy(dog, 0.875 + HANG + 1 / 64, cpu) == Kill(KillReason.HUNG)


def test_cpu_going_backwards_is_no_progress() -> None:
    dog, cpu = _dog(), Cpu(0.5)
    _started(dog, cpu)
    assert isinstance(_busy(dog, INTERVAL, cpu), Wake)
    cpu.value = 0.375
    assert isinstance(_busy(dog, 0.5, cpu), Wake)
    assert _busy(dog, INTERVAL + HANG + 1 / 64, cpu) == Kill(KillReason.HUNG)


def test_unreadable_cpu_falls_back_to_hang_after_s_plus_four_slices_of_wall_time() -> None:
    dog, cpu = _dog(), Cpu(None)
    since = 3.0
    _started(dog, cpu, since)
    limit = since + HANG + 4 * SLICE
    # Past hang_after_s without any reading: no hang verdict, the fallback is longer.
    assert _busy(dog, since + HANG + 0.5, cpu, since=since) == Wake(since + HANG + 0.5 + INTERVAL)
    assert _busy(dog, limit, cpu, since=since) == Wake(limit + INTERVAL)
    assert _busy(dog, limit + 1 / 64, cpu, since=since) == Kill(KillReason.HUNG)


def test_the_first_readable_reading_starts_the_hang_timer() -> None:
    # Unreadable at first: once the CPU can be read, that first reading is the progress the
    # hang timer counts from (not the stretch's start).
    dog, cpu = _dog(), Cpu(None)
    _started(dog, cpu)
    assert isinstance(_busy(dog, 0.5, cpu), Wake)
    cpu.value = 0.25
    assert _busy(dog, HANG + 1 / 64, cpu) == Wake(HANG + 1 / 64 + INTERVAL)  # first reading
    assert _busy(dog, HANG + 1 / 64 + HANG + 1 / 64, cpu) == Kill(KillReason.HUNG)


def test_an_unreadable_moment_keeps_the_last_progress() -> None:
    dog, cpu = _dog(), Cpu(0.25)
    _started(dog, cpu)
    assert isinstance(_busy(dog, INTERVAL, cpu), Wake)
    cpu.value = None
    assert isinstance(_busy(dog, 0.5, cpu), Wake)
    cpu.value = 0.25  # readable again, and no progress since the first reading
    assert _busy(dog, INTERVAL + HANG + 1 / 64, cpu) == Kill(KillReason.HUNG)


def test_a_new_stretch_starts_its_measurement_and_hang_timer_over() -> None:
    dog, cpu = _dog(), Cpu(0.25)
    _started(dog, cpu, 0.0)
    assert isinstance(_busy(dog, INTERVAL, cpu), Wake)
    assert isinstance(_busy(dog, 0.875, cpu), Wake)  # still since the first reading
    # The process went idle and a new stretch began at 1.0: it is not measured at first, and
    # the old stretch's stillness does not count against it.
    new = 1.0
    reads = cpu.reads
    assert _busy(dog, new, cpu, since=new) == Wake(new + INTERVAL)
    assert cpu.reads == reads
    assert isinstance(_busy(dog, new + INTERVAL, cpu, since=new), Wake)  # its first reading
    assert isinstance(_busy(dog, new + INTERVAL + HANG, cpu, since=new), Wake)
    assert _busy(dog, new + INTERVAL + HANG + 1 / 64, cpu, since=new) == Kill(KillReason.HUNG)


@pytest.mark.parametrize("which", ["stopped_at", "ended_at"])
def test_a_stopped_or_ended_process_is_killed_after_the_grace_with_no_verdict(which: str) -> None:
    dog, cpu = _dog(), Cpu(1e9)  # an overrunning reading is never even taken

    def look(now: float) -> Wake | Kill:
        times = {"stopped_at": None, "ended_at": None, which: 2.0}
        return dog.check(now, busy_since=1.0, cpu_at_idle=0.0, cpu=cpu, **times)

    assert look(2.0) == Wake(2.0 + GRACE)
    assert look(2.0 + GRACE - 1 / 64) == Wake(2.0 + GRACE)
    assert look(2.0 + GRACE) == Kill(KillReason.OUTLIVED)
    assert cpu.reads == 0


def test_the_grace_runs_from_the_earlier_of_stop_and_end() -> None:
    dog, cpu = _dog(), Cpu()
    assert dog.check(5.0, busy_since=None, stopped_at=5.0, ended_at=4.875, cpu_at_idle=0.0,
                     cpu=cpu) == Wake(4.875 + GRACE)
    assert dog.check(5.0, busy_since=None, stopped_at=4.75, ended_at=4.875, cpu_at_idle=0.0,
                     cpu=cpu) == Kill(KillReason.OUTLIVED)


def test_a_stop_during_a_hang_wins_over_the_hang() -> None:
    dog, cpu = _dog(), Cpu(0.125)
    _started(dog, cpu)
    assert isinstance(_busy(dog, INTERVAL, cpu), Wake)
    verdict = dog.check(HANG + 0.5, busy_since=0.0, stopped_at=HANG + 0.375, ended_at=None,
                        cpu_at_idle=0.0, cpu=cpu)
    assert verdict == Wake(HANG + 0.375 + GRACE)


def _drive(dog: Watchdog, rate: float, until: float) -> tuple[float, Kill | None]:
    """Run the watch loop on a fake clock over one stretch from 0 in which the process uses
    ``rate`` CPU seconds per wall second; returns when it was killed (or ``until``) and why."""
    now, cpu = 0.0, Cpu()
    while now < until:
        cpu.value = rate * now
        verdict = _busy(dog, now, cpu)
        if isinstance(verdict, Kill):
            return now, verdict
        now = verdict.at
    return now, None


@given(slice_s=st.floats(0.01, 5.0), rate=st.floats(0.2, 1.0))
def test_a_spinning_stretch_is_killed_for_overrun_one_interval_past_its_limit(
        slice_s: float, rate: float) -> None:
    dog = Watchdog(slice_cpu_limit_s=slice_s, hang_after_s=1e9, grace_s=GRACE)
    when, verdict = _drive(dog, rate, until=2 * dog.overrun_cpu_s / rate + 1)
    assert verdict == Kill(KillReason.OVERRUN)
    assert rate * when > dog.overrun_cpu_s
    assert rate * (when - dog.interval_s) <= dog.overrun_cpu_s + 1e-9


@given(slice_s=st.floats(0.01, 5.0), hang=st.floats(0.1, 60.0))
def test_a_still_stretch_is_killed_as_hung_one_interval_past_hang_after_s(
        slice_s: float, hang: float) -> None:
    dog = Watchdog(slice_cpu_limit_s=slice_s, hang_after_s=hang, grace_s=GRACE)
    when, verdict = _drive(dog, 0.0, until=2 * hang + 1)
    assert verdict == Kill(KillReason.HUNG)
    assert hang < when <= hang + 2 * dog.interval_s + 1e-9


@given(slice_s=st.floats(0.01, 5.0), hang=st.floats(0.1, 60.0))
def test_a_stretch_that_makes_progress_under_its_limit_is_never_killed(
        slice_s: float, hang: float) -> None:
    dog = Watchdog(slice_cpu_limit_s=slice_s, hang_after_s=hang, grace_s=GRACE)
    # Four hang periods, slowly enough that the overrun is never reached in them.
    until = 4 * hang
    when, verdict = _drive(dog, dog.overrun_cpu_s / (2 * until), until=until)
    assert verdict is None and when >= until
