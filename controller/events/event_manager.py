"""The controller's event queue (spec §4.1): one FIFO, one consumer, handlers never overlap.

Producers (ZK watches, API handlers, the scheduler, broker responses) ``put`` events from any
thread. The consumer is either the daemon thread ``controller-event-thread`` (``start``/``close``)
or, in emulation and tests, the caller of ``run_until_idle`` — never both. The processor is
injected (``ControllerEventProcessor``), and so is the clock used for enqueue times.

State transitions (``state``, Kafka's ``ControllerState`` gauge):

* ``Idle`` -> ``event.state`` when an event is taken from the queue and starts processing;
* ``event.state`` -> ``Idle`` when its handler returns or raises (the error is logged and the loop
  carries on: the event loop cannot die), except for the processor's ``fatal`` exceptions, which
  go on to the consumer: the caller of ``run_until_idle`` ends what it runs (a ZooKeeper that
  stayed unreachable), and the thread stops;
* ``ShutdownEventThread`` is never processed: taking it stops the consumer with state ``Idle``.

Each ``QueuedEvent`` is consumed once: whichever of process (by the consumer) and preempt (by
``clear_and_put``, on the caller's thread) comes first wins.

Metrics: ``EventQueueSize`` (queue length), ``EventQueueTimeMs`` (enqueue to start of processing, on
the injected clock; cleared when the queue has been idle for 300 s, as in Kafka 2.7+), and one
rate-and-time summary per ``ControllerState`` that has one (§4.2) measuring processing time with
``time.perf_counter`` — a wall-clock measure by design, even under a virtual clock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from controller.events.controller_events import (
    ControllerEvent,
    ControllerState,
    ShutdownEventThread,
)
from controller.scheduler.timer import Clock, SystemClock

logger = logging.getLogger(__name__)

CONTROLLER_EVENT_THREAD_NAME = "controller-event-thread"
EVENT_QUEUE_TIME_RESET_MS = 300_000
"""Idle time after which the ``EventQueueTimeMs`` histogram is cleared (Kafka 2.7+)."""
HISTOGRAM_WINDOW = 1028


class ControllerEventProcessor(Protocol):
    """What the event manager drives: the controller."""

    def process(self, event: ControllerEvent) -> None: ...

    def preempt(self, event: ControllerEvent) -> None: ...


class QueuedEvent:
    """An event with its enqueue time; processed or preempted at most once."""

    __slots__ = ("_lock", "_spent", "_started", "enqueue_time_ms", "event")

    def __init__(self, event: ControllerEvent, enqueue_time_ms: int) -> None:
        self.event = event
        self.enqueue_time_ms = enqueue_time_ms
        self._spent = False
        self._lock = threading.Lock()
        self._started = threading.Event()

    def _claim(self) -> bool:
        with self._lock:
            if self._spent:
                return False
            self._spent = True
            return True

    def process(self, processor: ControllerEventProcessor) -> None:
        self._started.set()
        if self._claim():
            processor.process(self.event)

    def preempt(self, processor: ControllerEventProcessor) -> None:
        if self._claim():
            processor.preempt(self.event)

    @property
    def spent(self) -> bool:
        return self._spent

    def await_processing(self, timeout_s: float | None = None) -> bool:
        """Block until processing has started; False on timeout (Kafka's ``awaitProcessing``)."""
        return self._started.wait(timeout_s)

    def __repr__(self) -> str:
        return f"QueuedEvent({self.event!r}, enqueue_time_ms={self.enqueue_time_ms})"


@dataclass
class Histogram:
    """Count, sum, min and max of a series, plus percentiles over the latest samples (a sliding
    window the size of Yammer's default reservoir)."""

    count: int = 0
    total: float = 0.0
    min: float | None = None
    max: float | None = None
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=HISTOGRAM_WINDOW))

    def update(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.min = value if self.min is None else min(self.min, value)
        self.max = value if self.max is None else max(self.max, value)
        self.recent.append(value)

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def percentile(self, q: float) -> float:
        """Nearest-rank percentile (0 <= q <= 1) of the recent samples; 0.0 when empty."""
        if not self.recent:
            return 0.0
        ordered = sorted(self.recent)
        return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]

    def clear(self) -> None:
        self.count, self.total, self.min, self.max = 0, 0.0, None, None
        self.recent.clear()


@dataclass
class RateAndTime:
    """Kafka's per-state timer: how many events ran (``count``) and how long they took (ms)."""

    metric_name: str
    time_ms: Histogram = field(default_factory=Histogram)

    @property
    def count(self) -> int:
        return self.time_ms.count


@dataclass
class EventManagerMetrics:
    """``kafka.controller:type=ControllerEventManager`` plus the per-state timers of §4.2."""

    event_queue_time_ms: Histogram = field(default_factory=Histogram)
    rate_and_time: dict[ControllerState, RateAndTime] = field(
        default_factory=lambda: {
            state: RateAndTime(state.rate_and_time_metric_name)
            for state in ControllerState
            if state.rate_and_time_metric_name is not None
        }
    )
    processed: int = 0
    errors: int = 0
    preempted: int = 0


class ControllerEventManager:
    """Kafka's ``ControllerEventManager`` with an optional, caller-driven consumer."""

    def __init__(
        self,
        processor: ControllerEventProcessor,
        clock: Clock | None = None,
        controller_id: int | None = None,
        queue_time_reset_ms: int = EVENT_QUEUE_TIME_RESET_MS,
        fatal: tuple[type[Exception], ...] = (),
    ) -> None:
        self._processor = processor
        self._fatal = fatal
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._controller_id = controller_id
        self._queue_time_reset_ms = queue_time_reset_ms
        self._queue: deque[QueuedEvent] = deque()
        # Re-entrant: preempt callbacks run under the lock and may themselves put events.
        self._lock = threading.RLock()
        self._not_empty = threading.Condition(self._lock)
        self._state = ControllerState.Idle
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._idle_since_ms: int | None = None
        self.metrics = EventManagerMetrics()

    # -- producers ----------------------------------------------------------------------------

    def put(self, event: ControllerEvent) -> QueuedEvent:
        """Append ``event``; safe from any thread."""
        with self._lock:
            queued = QueuedEvent(event, self._clock.now_ms())
            self._queue.append(queued)
            self._not_empty.notify()
            return queued

    def clear_and_put(self, event: ControllerEvent) -> QueuedEvent:
        """Preempt every queued event in queue order (on this thread), then ``put(event)``."""
        with self._lock:
            drained = list(self._queue)
            self._queue.clear()
            for queued in drained:
                self._preempt(queued)
            return self.put(event)

    def _preempt(self, queued: QueuedEvent) -> None:
        try:
            queued.preempt(self._processor)
            self.metrics.preempted += 1
        except Exception:
            logger.exception("%sError preempting event %r", self._log_prefix, queued.event)

    # -- observers ----------------------------------------------------------------------------

    @property
    def state(self) -> ControllerState:
        """The ``ControllerState`` gauge: the running event's state, or Idle."""
        return self._state

    @property
    def queue_size(self) -> int:
        """The ``EventQueueSize`` gauge."""
        return len(self._queue)

    def queued_events(self) -> list[ControllerEvent]:
        with self._lock:
            return [queued.event for queued in self._queue]

    @property
    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def is_stopped(self) -> bool:
        """True once the consumer has stopped (it took ``ShutdownEventThread``, or ``close`` ran
        with no thread); nothing more is processed."""
        return self._stopped

    def maybe_reset_queue_time(self) -> bool:
        """Clear ``EventQueueTimeMs`` if the queue has been idle for the reset period; Kafka's
        thread does this when its poll times out. True iff it was cleared."""
        with self._lock:
            idle_since = self._idle_since_ms
            if (
                idle_since is None
                or self._queue
                or self._clock.now_ms() - idle_since < self._queue_time_reset_ms
            ):
                return False
            self._idle_since_ms = None
            had_samples = self.metrics.event_queue_time_ms.count > 0
            self.metrics.event_queue_time_ms.clear()
            return had_samples

    # -- consumer -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start ``controller-event-thread`` (daemon)."""
        if self._thread is not None:
            raise RuntimeError("event thread already started")
        if self._stopped:
            raise RuntimeError("event manager is shut down")
        self._thread = threading.Thread(
            target=self._run_thread, name=CONTROLLER_EVENT_THREAD_NAME, daemon=True
        )
        self._thread.start()

    def close(self, timeout_s: float | None = None) -> bool:
        """Preempt what is queued, stop the consumer, and wait for the thread (if any).

        Returns False if the thread is still alive after ``timeout_s``.
        """
        self.clear_and_put(ShutdownEventThread())
        thread = self._thread
        if thread is None:
            self._stopped = True
            return True
        if thread is not threading.current_thread():
            thread.join(timeout_s)
        return not thread.is_alive()

    def run_until_idle(self, max_events: int | None = None) -> int:
        """Process queued events on the calling thread until the queue is empty, including events
        put by handlers meanwhile, or until ``max_events``. Returns the number processed.

        For tests and emulation: the caller drives the loop, so nothing else may consume.
        """
        if self.is_running and self._thread is not threading.current_thread():
            raise RuntimeError("the event thread is running; run_until_idle would race it")
        processed = 0
        while not self._stopped and (max_events is None or processed < max_events):
            queued = self._poll()
            if queued is None:
                break
            if self._dispatch(queued):
                processed += 1
        return processed

    def take_queued(self, accept: Callable[[ControllerEvent], bool]) -> list[ControllerEvent]:
        """Claim the events at the head of the queue while ``accept`` holds, in queue order.

        A handler that coalesces (one bulk pass for several queued events of its kind) takes
        them here; they count as started now and are not processed again. Only the head run is
        taken, so no event overtakes one of another kind. ``accept`` runs under the queue lock.
        """
        taken: list[ControllerEvent] = []
        now = self._clock.now_ms()
        with self._lock:
            while self._queue and accept(self._queue[0].event):
                queued = self._queue.popleft()
                queued._started.set()
                if queued._claim():
                    self.metrics.event_queue_time_ms.update(now - queued.enqueue_time_ms)
                    taken.append(queued.event)
        return taken

    def _poll(self) -> QueuedEvent | None:
        with self._lock:
            if not self._queue:
                return None
            return self._take()

    def _take(self) -> QueuedEvent:
        # Called with the lock held and a non-empty queue.
        queued = self._queue.popleft()
        if self._idle_since_ms is not None:
            if queued.enqueue_time_ms - self._idle_since_ms >= self._queue_time_reset_ms:
                self.metrics.event_queue_time_ms.clear()
            self._idle_since_ms = None
        return queued

    def _run_thread(self) -> None:
        logger.info("%sStarting", self._log_prefix)
        while not self._stopped:
            with self._not_empty:
                while not self._queue:
                    self._not_empty.wait()
                queued = self._take()
            self._dispatch(queued)
        logger.info("%sStopped", self._log_prefix)

    def _dispatch(self, queued: QueuedEvent) -> bool:
        """Process one taken event; False for the shutdown sentinel, which stops the consumer."""
        event = queued.event
        if isinstance(event, ShutdownEventThread):
            self._stopped = True
            return False
        self._state = event.state
        self.metrics.event_queue_time_ms.update(self._clock.now_ms() - queued.enqueue_time_ms)
        started = time.perf_counter()
        try:
            queued.process(self._processor)
        except self._fatal:
            self.metrics.errors += 1
            raise
        except Exception:
            self.metrics.errors += 1
            logger.exception("%sUncaught error processing event %r", self._log_prefix, event)
        finally:
            timer = self.metrics.rate_and_time.get(event.state)
            if timer is not None:
                timer.time_ms.update((time.perf_counter() - started) * 1000.0)
            self.metrics.processed += 1
            self._state = ControllerState.Idle
            with self._lock:
                if not self._queue:
                    self._idle_since_ms = self._clock.now_ms()
        return True

    @property
    def _log_prefix(self) -> str:
        if self._controller_id is None:
            return "[ControllerEventThread] "
        return f"[ControllerEventThread controllerId={self._controller_id}] "
