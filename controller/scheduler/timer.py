"""Kafka's hierarchical timing wheel over an injected virtual clock (spec §14).

Structure:

* ``TimingWheel(tick_ms, wheel_size, start_ms)`` has ``wheel_size`` buckets, each ``tick_ms`` wide,
  and covers ``[current_time_ms, current_time_ms + interval_ms)`` with
  ``interval_ms = tick_ms * wheel_size``; ``current_time_ms`` is rounded down to a tick. A task
  beyond that range goes to the overflow wheel, created lazily with ``tick_ms`` = the interval of
  the level below, so each level is ``wheel_size`` times coarser (defaults 1 ms x 20: 20 ms,
  400 ms, 8 s, 160 s, ...).
* A bucket (``TimerTaskList``) holds the tasks whose expirations fall in one tick of its wheel.
  Its expiration is the start of that tick and is set once per revolution of the wheel; tasks are
  kept in an insertion-ordered dict, so adding and removing one is O(1).
* ``Timer`` keeps the buckets in a heap ordered by bucket expiration (Kafka's ``DelayQueue`` holds
  buckets, not tasks). ``advance_clock(t)`` pops the due buckets in expiration order, moves the
  wheels forward and re-inserts each of their tasks: into a finer wheel, or into the due batch
  once it has expired ("reinsertion"). A due batch runs in (expiration, insertion) order, so with
  the default 1 ms tick every task runs at exactly its expiration time.

Nothing sleeps: ``advance_clock`` moves a ``VirtualClock`` straight to the next due bucket, and
``next_expiration_ms`` tells an emulation loop when the next task will run.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import operator
from collections.abc import Callable

from controller.scheduler.clock import Clock, SystemClock, VirtualClock
from controller.scheduler.timer_task import _DUE, Action, PeriodicTask, TimerTask, TimerTaskList

logger = logging.getLogger(__name__)

DEFAULT_TICK_MS = 1
DEFAULT_WHEEL_SIZE = 20

_due_order = operator.attrgetter("_expiration_ms", "_seq")


# Kafka's DelayQueue of buckets: a heap of (expiration, tick, bucket). A bucket is in it at most
# once, and two buckets of one level never share an expiration, so buckets are never compared.
_BucketQueue = list[tuple[int, int, "TimerTaskList"]]


class TimingWheel:
    """One level of the hierarchy; levels above are created on demand (§14.1, §14.2)."""

    def __init__(self, tick_ms: int, wheel_size: int, start_ms: int, queue: _BucketQueue) -> None:
        if tick_ms <= 0 or wheel_size <= 0:
            raise ValueError("tick_ms and wheel_size must be positive")
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.interval_ms = tick_ms * wheel_size
        self.current_time_ms = 0
        self._due_before_ms = 0
        self._end_ms = 0
        self._set_current_time(start_ms - start_ms % tick_ms)
        self.buckets: tuple[TimerTaskList, ...] = tuple(
            TimerTaskList(tick_ms) for _ in range(wheel_size)
        )
        self.overflow_wheel: TimingWheel | None = None
        self._queue = queue

    def _add_overflow_wheel(self) -> TimingWheel:
        self.overflow_wheel = TimingWheel(
            self.interval_ms, self.wheel_size, self.current_time_ms, self._queue
        )
        return self.overflow_wheel

    def add(self, task: TimerTask) -> bool:
        """Place ``task`` in the finest wheel that covers it; False if cancelled or already due."""
        if task._cancelled:
            return False
        expiration = task._expiration_ms
        # Only the finest level can find a task due: every coarser level starts no later than
        # this one and ends where this one's range ends.
        if expiration < self._due_before_ms:
            return False
        wheel = self
        while expiration >= wheel._end_ms:
            wheel = wheel.overflow_wheel or wheel._add_overflow_wheel()
        tick = wheel.tick_ms
        virtual_id = expiration // tick
        bucket = wheel.buckets[virtual_id % wheel.wheel_size]
        bucket._tasks[task] = None
        task._bucket = bucket
        bucket_expiration = virtual_id * tick
        if bucket.expiration_ms != bucket_expiration:
            # Offered once per revolution, when the bucket's expiration is first set.
            bucket.expiration_ms = bucket_expiration
            heapq.heappush(wheel._queue, (bucket_expiration, tick, bucket))
        return True

    def advance_clock(self, time_ms: int) -> None:
        """Move this level and the ones above to ``time_ms``, rounded down to each tick."""
        wheel: TimingWheel | None = self
        while wheel is not None and time_ms >= wheel._due_before_ms:
            wheel._set_current_time(time_ms - time_ms % wheel.tick_ms)
            wheel = wheel.overflow_wheel

    def _set_current_time(self, current_time_ms: int) -> None:
        self.current_time_ms = current_time_ms
        # Cached bounds of [current, current + interval) for ``add``.
        self._due_before_ms = current_time_ms + self.tick_ms
        self._end_ms = current_time_ms + self.interval_ms

    def levels(self) -> list[TimingWheel]:
        """This wheel and the overflow wheels created so far, finest first."""
        result: list[TimingWheel] = []
        wheel: TimingWheel | None = self
        while wheel is not None:
            result.append(wheel)
            wheel = wheel.overflow_wheel
        return result


class Timer:
    """Kafka's ``SystemTimer`` over a virtual clock: tasks run on the thread that advances time.

    Resolution is the finest tick: with ``tick_ms > 1`` a task runs at its expiration rounded
    down to a tick, as in Kafka. Tasks that raise are logged and do not stop the timer. Not
    thread-safe: use it from the thread that drives the emulation.
    """

    def __init__(
        self,
        clock: VirtualClock,
        tick_ms: int = DEFAULT_TICK_MS,
        wheel_size: int = DEFAULT_WHEEL_SIZE,
        start_ms: int | None = None,
    ) -> None:
        self._clock = clock
        self._queue: _BucketQueue = []
        start = clock.now_ms() if start_ms is None else start_ms
        self.wheel = TimingWheel(tick_ms, wheel_size, start, self._queue)
        self._seq = itertools.count()
        self._pending = 0
        # Due tasks: the batch running now and the next one (tasks that expired meanwhile).
        self._batch: list[TimerTask] = []
        self._due: list[TimerTask] = []
        self._running_due = False

    def __len__(self) -> int:
        """Tasks waiting to run (Kafka's ``Timer.size``)."""
        return self._pending

    @property
    def queued_bucket_count(self) -> int:
        """Buckets in the delay queue (each offered once per wheel revolution)."""
        return len(self._queue)

    def add(self, task: TimerTask) -> bool:
        """Schedule ``task`` ``task.delay_ms`` from now, O(1). False if it was cancelled (it never
        runs) or already expired: then it runs before this returns (or, from a running task, right
        after the current due batch)."""
        return self.add_at(task, self._clock.now_ms() + task.delay_ms)

    def task_removed(self) -> None:
        """A pending task left its bucket (cancelled or rescheduled)."""
        self._pending -= 1

    def add_at(self, task: TimerTask, expiration_ms: int) -> bool:
        """Schedule ``task`` at an absolute time; otherwise as ``add``."""
        if task._cancelled:
            return False
        if task._bucket is not None:
            task._unschedule()
        task._timer = self
        task._expiration_ms = expiration_ms
        task._seq = next(self._seq)
        self._pending += 1
        if self.wheel.add(task):
            return True
        task._bucket = _DUE
        self._due.append(task)
        if not self._running_due:
            self._run_due()
        return False

    def schedule_once(self, delay_ms: int, action: Action, name: str = "") -> TimerTask:
        task = TimerTask(delay_ms, action, name)
        self.add(task)
        return task

    def schedule_at(self, at_ms: int, action: Action, name: str = "") -> TimerTask:
        task = TimerTask(at_ms - self._clock.now_ms(), action, name)
        self.add_at(task, at_ms)
        return task

    def schedule_periodic(
        self,
        initial_delay_ms: int,
        period_ms: int,
        action: Action,
        name: str = "",
    ) -> PeriodicTask:
        """Run ``action`` after ``initial_delay_ms`` and then every ``period_ms``; cancel the
        returned handle to stop it."""
        task = PeriodicTask(initial_delay_ms, period_ms, action, name)
        self.add(task)
        return task

    def next_expiration_ms(self) -> int | None:
        """When the next pending task will run (never before now); None if nothing is pending.

        Coarse buckets expire before their tasks do, so the search looks inside every bucket that
        expires before the best time found so far (walking the heap in order, pruned).
        """
        now = self._clock.now_ms()
        if any(task._bucket is _DUE for task in itertools.chain(self._batch, self._due)):
            return now
        heap = self._queue
        if not heap:
            return None
        base_tick = self.wheel.tick_ms
        best: int | None = None
        frontier = [(heap[0][0], 0)]
        while frontier:
            bucket_expiration, index = heapq.heappop(frontier)
            if best is not None and bucket_expiration >= best:
                break
            bucket = heap[index][2]
            if bucket._tasks:
                if bucket.tick_ms == base_tick:
                    candidate = bucket_expiration
                else:
                    earliest = min(task._expiration_ms for task in bucket._tasks)
                    candidate = earliest - earliest % base_tick
                if best is None or candidate < best:
                    best = candidate
            for child in (2 * index + 1, 2 * index + 2):
                if child < len(heap):
                    heapq.heappush(frontier, (heap[child][0], child))
        return None if best is None else max(best, now)

    def advance_clock(self, to_ms: int) -> int:
        """Run every task due at or before ``to_ms`` and leave the clock at ``to_ms`` (never
        earlier than it was). Tasks run with the clock at their own time. Returns tasks run."""
        return self.run_until(to_ms)

    def run_until(
        self,
        deadline_ms: int,
        after_each: Callable[[int], object] | None = None,
        before_each: Callable[[int], object] | None = None,
    ) -> int:
        """``advance_clock`` that calls ``after_each(now_ms)`` after each distinct run time, e.g.
        to drain the controller's event queue before time moves on, and ``before_each(now_ms)``
        once the clock reached a run time, before its tasks run. Returns tasks run."""
        clock = self._clock
        if self._running_due:
            raise RuntimeError("advance_clock called from a running task")
        heap = self._queue
        wheel = self.wheel
        base_tick = wheel.tick_ms
        ran = 0
        while heap and heap[0][0] <= deadline_ms:
            step_ms = heap[0][0]
            if step_ms > clock.now_ms():
                clock.advance_to(step_ms)
            wheel.advance_clock(step_ms)
            # All buckets due now; their tasks move to finer wheels or into the due batch.
            due = self._due
            while heap and heap[0][0] <= step_ms:
                bucket = heapq.heappop(heap)[2]
                # Kafka's TimerTaskList.flush: empty the bucket and unset its expiration.
                tasks = bucket._tasks
                bucket._tasks = {}
                bucket.expiration_ms = -1
                # Every task of a finest-level bucket is due at the bucket's expiration.
                finest = bucket.tick_ms == base_tick
                for task in tasks:
                    if finest or not wheel.add(task):
                        task._bucket = _DUE
                        due.append(task)
            if self._due:
                if before_each is not None:
                    before_each(clock.now_ms())
                n = self._run_due()
                ran += n
                if n and after_each is not None:
                    after_each(clock.now_ms())
        if deadline_ms > clock.now_ms():
            clock.advance_to(deadline_ms)
        # Keep the wheels in step with the clock so later adds are placed relative to now; no
        # bucket expires before the deadline any more, so no slot can be reused too early.
        wheel.advance_clock(clock.now_ms())
        return ran

    def _run_due(self) -> int:
        """Run the due batch in (expiration, insertion) order; tasks added already expired while
        it runs form the next batch."""
        self._running_due = True
        ran = 0
        try:
            while self._due:
                batch = self._batch = self._due
                self._due = []
                batch.sort(key=_due_order)
                for task in batch:
                    if task._bucket is not _DUE:
                        continue  # cancelled or rescheduled since it became due
                    task._bucket = None
                    self._pending -= 1
                    ran += 1
                    try:
                        task.run()
                    except Exception:
                        logger.exception("Uncaught exception in timer task %r", task)
        finally:
            self._batch = []
            self._running_due = False
        return ran


__all__ = [
    "DEFAULT_TICK_MS",
    "DEFAULT_WHEEL_SIZE",
    "Action",
    "Clock",
    "PeriodicTask",
    "SystemClock",
    "Timer",
    "TimerTask",
    "TimerTaskList",
    "TimingWheel",
    "VirtualClock",
]
