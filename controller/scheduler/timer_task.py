"""Timer tasks and the buckets that hold them (Kafka's ``TimerTask`` and ``TimerTaskList``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

Action = Callable[[], object]


class TaskTimer(Protocol):
    """What a task needs of the timer that holds it (``controller.scheduler.timer.Timer``)."""

    def add_at(self, task: TimerTask, expiration_ms: int) -> bool: ...

    def task_removed(self) -> None: ...


class TimerTask:
    """A delayed action: ``run()`` is called once ``delay_ms`` after the task is added to a timer.

    Subclasses may override ``run``. A task belongs to at most one bucket: adding it again moves it.
    ``cancel()`` is O(1) and final; a cancelled task is never run or added again.
    """

    # _bucket: the bucket holding the task, _DUE once it is in the due batch, None otherwise.
    __slots__ = ("_action", "_bucket", "_cancelled", "_expiration_ms", "_seq", "_timer")
    __slots__ += ("delay_ms", "name")

    def __init__(self, delay_ms: int, action: Action | None = None, name: str = "") -> None:
        self.delay_ms = delay_ms
        self.name = name
        self._action = action
        self._bucket: TimerTaskList | None = None
        self._cancelled = False
        self._expiration_ms = -1
        self._seq = -1
        self._timer: TaskTimer | None = None

    def run(self) -> None:
        if self._action is not None:
            self._action()

    def cancel(self) -> bool:
        """Stop the task from running; True iff it was pending."""
        self._cancelled = True
        return self._unschedule()

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def pending(self) -> bool:
        """True while the task waits in a bucket or in the due batch."""
        return self._bucket is not None

    @property
    def expiration_ms(self) -> int:
        """Absolute expiration of the latest scheduling (-1 before the first)."""
        return self._expiration_ms

    @property
    def bucket(self) -> TimerTaskList | None:
        return None if self._bucket is _DUE else self._bucket

    def _unschedule(self) -> bool:
        bucket = self._bucket
        if bucket is None:
            return False
        # A due-batch entry whose task is no longer _DUE is skipped when the batch runs.
        bucket.remove(self)
        if self._timer is not None:
            self._timer.task_removed()
        return True

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return f"<{type(self).__name__}{label} expiration_ms={self._expiration_ms}>"


class PeriodicTask(TimerTask):
    """Runs ``action`` every ``period_ms`` after the first run until cancelled; fixed rate in
    virtual time (each run is scheduled from the previous expiration)."""

    __slots__ = ("period_ms", "runs")

    def __init__(
        self, initial_delay_ms: int, period_ms: int, action: Action, name: str = ""
    ) -> None:
        if period_ms <= 0:
            raise ValueError(f"period_ms must be positive, got {period_ms}")
        super().__init__(initial_delay_ms, action, name)
        self.period_ms = period_ms
        self.runs = 0

    def run(self) -> None:
        # Reschedule first: the action may cancel this handle, and an exception in it must not
        # stop later runs (Kafka's scheduler logs and carries on).
        if self._timer is not None:
            self._timer.add_at(self, self._expiration_ms + self.period_ms)
        self.runs += 1
        super().run()


class TimerTaskList:
    """One bucket: tasks in insertion order plus the bucket's expiration (-1 when unset)."""

    __slots__ = ("_tasks", "expiration_ms", "tick_ms")

    def __init__(self, tick_ms: int) -> None:
        self._tasks: dict[TimerTask, None] = {}
        self.expiration_ms = -1
        self.tick_ms = tick_ms

    def remove(self, task: TimerTask) -> None:
        self._tasks.pop(task, None)
        task._bucket = None

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[TimerTask]:
        return iter(self._tasks)


# Marks a task as waiting in the due batch; it never holds tasks.
_DUE = TimerTaskList(0)
