"""Hierarchical timing wheel (spec §14) over a virtual clock."""

from __future__ import annotations

import array
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.scheduler.timer import (
    PeriodicTask,
    Timer,
    TimerTask,
    TimingWheel,
    VirtualClock,
)


class Recorder:
    """Collects (name, fire time) as tasks run."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.fired: list[tuple[str, int]] = []

    def task(self, name: str, delay_ms: int) -> TimerTask:
        return TimerTask(delay_ms, lambda: self.fired.append((name, self.clock.now_ms())), name)


def make(start_ms: int = 0, **kwargs: int) -> tuple[VirtualClock, Timer, Recorder]:
    clock = VirtualClock(start_ms)
    return clock, Timer(clock, **kwargs), Recorder(clock)


def levels(timer: Timer) -> list[TimingWheel]:
    return timer.wheel.levels()


# -- clock --------------------------------------------------------------------------------------


def test_virtual_clock_moves_forward_only() -> None:
    clock = VirtualClock(10)
    clock.advance_by(5)
    clock.advance_to(20)
    assert clock.now_ms() == 20
    with pytest.raises(ValueError):
        clock.advance_to(19)


# -- structure and insertion --------------------------------------------------------------------


def test_defaults_are_kafkas_tick_and_wheel_size() -> None:
    _, timer, _ = make()
    assert (timer.wheel.tick_ms, timer.wheel.wheel_size, timer.wheel.interval_ms) == (1, 20, 20)


def test_current_time_is_rounded_down_to_a_tick() -> None:
    _, timer, _ = make(start_ms=1234, tick_ms=10)
    assert timer.wheel.current_time_ms == 1230


def test_task_within_first_interval_goes_to_level_one() -> None:
    _, timer, rec = make()
    task = rec.task("a", 19)
    assert timer.add(task)
    assert len(levels(timer)) == 1
    assert task.bucket is timer.wheel.buckets[19]
    assert task.bucket.expiration_ms == 19


def test_overflow_wheels_created_lazily_with_coarser_ticks() -> None:
    _, timer, rec = make(start_ms=0)
    timer.add(rec.task("c", 30))
    assert [(w.tick_ms, w.interval_ms) for w in levels(timer)] == [(1, 20), (20, 400)]
    timer.add(rec.task("far", 200_000))
    assert [(w.tick_ms, w.interval_ms) for w in levels(timer)] == [
        (1, 20),
        (20, 400),
        (400, 8_000),
        (8_000, 160_000),
        (160_000, 3_200_000),
    ]


def test_overflow_wheel_starts_at_current_time_of_level_below() -> None:
    _, timer, rec = make(start_ms=0)
    timer.add(rec.task("x", 5))
    timer.advance_clock(37)
    timer.add(rec.task("c", 100))
    assert timer.wheel.current_time_ms == 37
    assert timer.wheel.overflow_wheel is not None
    assert timer.wheel.overflow_wheel.current_time_ms == 20  # 37 rounded down to 20


def test_bucket_offered_once_per_revolution() -> None:
    _, timer, rec = make()
    timer.add(rec.task("a", 5))
    timer.add(rec.task("b", 5))
    timer.add(rec.task("c", 25))
    timer.add(rec.task("d", 39))  # same level-2 bucket as c
    assert timer.queued_bucket_count == 2
    assert len(timer) == 4


def test_kafka_worked_example_placement_and_reinsertion() -> None:
    """§14.4: tickMs=1, wheelSize=20, start 0."""
    _, timer, rec = make(start_ms=0)
    a, b, c, d, e = (rec.task(n, ms) for n, ms in zip("abcde", (5, 19, 30, 450, 0), strict=True))
    for task in (a, b, c, d):
        assert timer.add(task)
    l1, l2, l3 = levels(timer)
    assert a.bucket is l1.buckets[5] and a.bucket.expiration_ms == 5
    assert b.bucket is l1.buckets[19] and b.bucket.expiration_ms == 19
    assert (l2.tick_ms, l2.interval_ms) == (20, 400)
    assert c.bucket is l2.buckets[1] and c.bucket.expiration_ms == 20
    assert (l3.tick_ms, l3.interval_ms) == (400, 8_000)
    assert d.bucket is l3.buckets[1] and d.bucket.expiration_ms == 400
    assert not timer.add(e)  # already due: executed at once
    assert rec.fired == [("e", 0)]

    timer.advance_clock(20)  # the level-2 bucket (exp 20) is polled
    assert l1.current_time_ms == 20 and l2.current_time_ms == 20
    assert c.bucket is l1.buckets[10] and c.bucket.expiration_ms == 30

    timer.advance_clock(400)
    assert d.bucket is l2.buckets[2] and d.bucket.expiration_ms == 440
    timer.advance_clock(440)
    assert d.bucket is l1.buckets[10] and d.bucket.expiration_ms == 450
    timer.advance_clock(449)
    assert rec.fired[-1] == ("c", 30)
    timer.advance_clock(450)
    assert rec.fired == [("e", 0), ("a", 5), ("b", 19), ("c", 30), ("d", 450)]
    assert len(timer) == 0


# -- expiry ---------------------------------------------------------------------------------------


def test_tasks_fire_in_expiration_order_at_their_exact_times() -> None:
    clock, timer, rec = make()
    for name, delay in (("late", 9_000), ("soon", 3), ("mid", 401), ("mid2", 399)):
        timer.add(rec.task(name, delay))
    ran = timer.advance_clock(10_000)
    assert ran == 4
    assert rec.fired == [("soon", 3), ("mid2", 399), ("mid", 401), ("late", 9_000)]
    assert clock.now_ms() == 10_000


def test_ties_fire_in_insertion_order_even_across_levels() -> None:
    _, timer, rec = make()
    timer.add(rec.task("first", 30))  # level 2 at t=0
    timer.advance_clock(15)
    timer.add(rec.task("second", 15))  # expires at 30 too, straight into level 1
    timer.advance_clock(100)
    assert rec.fired == [("first", 30), ("second", 30)]


def test_overflow_task_fires_at_its_time_not_the_bucket_time() -> None:
    _, timer, rec = make()
    task = rec.task("x", 8_765)
    timer.add(task)
    assert task.bucket is not None and task.bucket.expiration_ms == 8_000
    timer.advance_clock(8_000)
    assert rec.fired == [] and task.pending
    timer.advance_clock(8_764)
    assert rec.fired == []
    timer.advance_clock(9_000)
    assert rec.fired == [("x", 8_765)]


def test_coarse_tick_runs_tasks_at_their_tick() -> None:
    _, timer, rec = make(tick_ms=10)
    timer.add(rec.task("b", 17))
    timer.add(rec.task("a", 15))
    timer.add(rec.task("c", 9))  # expires before the first tick ends: due at once
    timer.advance_clock(100)
    assert rec.fired == [("c", 0), ("a", 10), ("b", 10)]


def test_nothing_fires_before_its_time() -> None:
    _, timer, rec = make()
    timer.add(rec.task("x", 100))
    assert timer.advance_clock(99) == 0
    assert rec.fired == []


def test_cancel_before_fire() -> None:
    _, timer, rec = make()
    keep, drop = rec.task("keep", 50), rec.task("drop", 50)
    timer.add(keep)
    timer.add(drop)
    assert drop.cancel()
    assert not drop.cancel()  # no longer pending
    assert drop not in (keep.bucket or ())
    assert len(timer) == 1
    timer.advance_clock(1_000)
    assert rec.fired == [("keep", 50)]


def test_cancelled_task_is_never_added_again() -> None:
    _, timer, rec = make()
    task = rec.task("x", 5)
    task.cancel()
    assert not timer.add(task)
    timer.advance_clock(100)
    assert rec.fired == [] and len(timer) == 0


def test_task_cancelled_by_an_earlier_task_at_the_same_time_does_not_run() -> None:
    _, timer, rec = make()
    victim = rec.task("victim", 10)
    timer.add(TimerTask(10, victim.cancel))
    timer.add(victim)
    timer.advance_clock(10)
    assert rec.fired == []


def test_already_expired_task_runs_immediately() -> None:
    _, timer, rec = make(start_ms=100)
    assert not timer.add(rec.task("now", 0))
    assert not timer.add(rec.task("past", -5))
    assert rec.fired == [("now", 100), ("past", 100)]
    assert len(timer) == 0


def test_re_adding_a_task_moves_it() -> None:
    _, timer, rec = make()
    task = rec.task("x", 10)
    timer.add(task)
    task.delay_ms = 500
    timer.add(task)
    assert len(timer) == 1
    timer.advance_clock(1_000)
    assert rec.fired == [("x", 500)]


def test_task_scheduled_from_a_task_runs_at_its_own_time() -> None:
    _, timer, rec = make()
    timer.schedule_once(10, lambda: timer.add(rec.task("child", 5)))
    timer.schedule_once(10, lambda: timer.add(rec.task("now", 0)))
    timer.advance_clock(100)
    assert rec.fired == [("now", 10), ("child", 15)]


def test_failing_task_does_not_stop_the_timer(caplog: pytest.LogCaptureFixture) -> None:
    _, timer, rec = make()

    def boom() -> None:
        raise RuntimeError("boom")

    timer.schedule_once(5, boom, name="boom")
    timer.add(rec.task("after", 5))
    assert timer.advance_clock(10) == 2
    assert rec.fired == [("after", 5)]
    assert "boom" in caplog.text


def test_advance_never_moves_the_clock_back() -> None:
    clock, timer, _ = make(start_ms=50)
    timer.advance_clock(10)
    assert clock.now_ms() == 50


# -- next expiration and run_until -------------------------------------------------------------


def test_next_expiration_is_the_next_task_not_a_coarse_bucket() -> None:
    _, timer, rec = make()
    assert timer.next_expiration_ms() is None
    timer.add(rec.task("d", 450))  # level-3 bucket expires at 400
    assert timer.next_expiration_ms() == 450
    timer.advance_clock(45)
    timer.add(rec.task("e", 380))  # 425: level-2 bucket 420, polled after d's bucket (400)
    assert timer.queued_bucket_count == 2
    assert timer.next_expiration_ms() == 425
    timer.advance_clock(timer.next_expiration_ms() or 0)
    assert rec.fired == [("e", 425)]
    assert timer.next_expiration_ms() == 450


def test_next_expiration_ignores_cancelled_tasks() -> None:
    _, timer, rec = make()
    early = rec.task("early", 3)
    timer.add(early)
    timer.add(rec.task("late", 70))
    early.cancel()
    assert timer.next_expiration_ms() == 70


def test_run_until_steps_through_each_run_time() -> None:
    clock, timer, rec = make()
    for name, delay in (("a", 5), ("b", 5), ("c", 700)):
        timer.add(rec.task(name, delay))
    steps: list[tuple[int, int]] = []
    ran = timer.run_until(1_000, after_each=lambda now: steps.append((now, len(rec.fired))))
    assert ran == 3
    assert steps == [(5, 2), (700, 3)]
    assert clock.now_ms() == 1_000


def test_emulation_loop_jumps_from_event_to_event() -> None:
    _, timer, rec = make()
    for i, delay in enumerate((17, 4_000, 123_456)):
        timer.add(rec.task(str(i), delay))
    visited = []
    while (next_ms := timer.next_expiration_ms()) is not None:
        visited.append(next_ms)
        timer.advance_clock(next_ms)
    assert visited == [17, 4_000, 123_456]
    assert [t for _, t in rec.fired] == visited


# -- scheduler helpers --------------------------------------------------------------------------


def test_schedule_once_and_at() -> None:
    clock, timer, rec = make(start_ms=1_000)
    timer.schedule_once(250, lambda: rec.fired.append(("once", clock.now_ms())))
    timer.schedule_at(1_100, lambda: rec.fired.append(("at", clock.now_ms())))
    timer.advance_clock(5_000)
    assert rec.fired == [("at", 1_100), ("once", 1_250)]


def test_periodic_task_fires_at_exact_virtual_times() -> None:
    """Auto leader rebalance: first run 5 s after failover, then every 300 s."""
    clock, timer, _ = make(start_ms=42)
    runs: list[int] = []
    handle = timer.schedule_periodic(5_000, 300_000, lambda: runs.append(clock.now_ms()))
    assert isinstance(handle, PeriodicTask)
    timer.advance_clock(42 + 5_000 + 3 * 300_000)
    assert runs == [5_042, 305_042, 605_042, 905_042]
    assert handle.runs == 4 and handle.pending


def test_periodic_task_stops_when_cancelled() -> None:
    clock, timer, _ = make()
    runs: list[int] = []
    handle = timer.schedule_periodic(10, 10, lambda: runs.append(clock.now_ms()))
    timer.advance_clock(35)
    assert handle.cancel()
    timer.advance_clock(1_000)
    assert runs == [10, 20, 30]
    assert len(timer) == 0


def test_periodic_task_can_cancel_itself_and_survives_errors() -> None:
    clock, timer, _ = make()
    runs: list[int] = []
    handle: PeriodicTask

    def action() -> None:
        runs.append(clock.now_ms())
        if len(runs) == 2:
            raise RuntimeError("transient")
        if len(runs) == 4:
            handle.cancel()

    handle = timer.schedule_periodic(0, 7, action)
    timer.advance_clock(1_000)
    assert runs == [0, 7, 14, 21]


def test_periodic_rejects_non_positive_period() -> None:
    _, timer, _ = make()
    with pytest.raises(ValueError):
        timer.schedule_periodic(0, 0, lambda: None)


# -- scale and reference model --------------------------------------------------------------------


def test_a_million_timers_fire_once_in_time_order() -> None:
    n, horizon = 1_000_000, 60_000
    clock = VirtualClock()
    timer = Timer(clock)
    times = array.array("q")
    ids = array.array("q")

    class Probe(TimerTask):
        __slots__ = ("ident",)

        def run(self) -> None:
            times.append(clock.now_ms())
            ids.append(self.ident)

    rng = random.Random(7)
    expiry = [rng.randrange(horizon) for _ in range(n)]
    for i, delay in enumerate(expiry):
        task = Probe(delay)
        task.ident = i
        timer.add(task)
    timer.advance_clock(horizon)

    fired_ids = np.frombuffer(ids, dtype=np.int64)
    fire_times = np.frombuffer(times, dtype=np.int64)
    assert len(fired_ids) == n and len(timer) == 0
    assert np.array_equal(np.sort(fired_ids), np.arange(n))  # each exactly once
    assert np.array_equal(fire_times, np.asarray(expiry)[fired_ids])  # at its exact time
    assert np.all(np.diff(fire_times) >= 0)  # in non-decreasing time order


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(-3, 2_000)),
        st.tuples(st.just("cancel"), st.integers(0, 10_000)),
        st.tuples(st.just("advance"), st.integers(0, 800)),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(ops=_ops, wheel_size=st.integers(2, 20), start_ms=st.integers(0, 1_000))
def test_matches_sorted_list_reference(
    ops: list[tuple[str, int]], wheel_size: int, start_ms: int
) -> None:
    clock = VirtualClock(start_ms)
    timer = Timer(clock, wheel_size=wheel_size)
    fired: list[tuple[int, int]] = []  # (time, seq)
    expected: list[tuple[int, int]] = []
    pending: list[tuple[int, int]] = []  # reference: sorted (expiry, seq)
    tasks: list[TimerTask] = []

    def expire_reference(now: int) -> None:
        pending.sort()
        while pending and pending[0][0] <= now:
            expected.append(pending.pop(0))  # runs at exactly its expiry

    for op, arg in ops:
        now = clock.now_ms()
        if op == "add":
            seq = len(tasks)
            task = TimerTask(arg, lambda seq=seq: fired.append((clock.now_ms(), seq)))
            tasks.append(task)
            if arg <= 0:
                expected.append((now, seq))
            else:
                pending.append((now + arg, seq))
            timer.add(task)
        elif op == "cancel" and tasks:
            task = tasks[arg % len(tasks)]
            seq = arg % len(tasks)
            was_pending = any(s == seq for _, s in pending)
            assert task.cancel() == was_pending
            pending[:] = [(e, s) for e, s in pending if s != seq]
        elif op == "advance":
            expire_reference(now + arg)
            timer.advance_clock(now + arg)
        assert fired == expected
        assert len(timer) == len(pending)
        assert timer.next_expiration_ms() == (min(pending)[0] if pending else None)
    final = clock.now_ms() + 5_000
    expire_reference(final)
    timer.advance_clock(final)
    assert fired == expected
