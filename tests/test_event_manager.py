"""The controller event queue (spec §4.1)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from controller.events.controller_events import (
    BrokerChange,
    BrokerModifications,
    ControlledShutdown,
    ControllerEvent,
    ControllerState,
    Expire,
    MockEvent,
    PartitionModifications,
    ShutdownEventThread,
    TopicChange,
)
from controller.events.event_manager import (
    CONTROLLER_EVENT_THREAD_NAME,
    ControllerEventManager,
    QueuedEvent,
)
from controller.scheduler.timer import VirtualClock

JOIN_TIMEOUT_S = 10.0


class Recorder:
    """A ControllerEventProcessor that records calls and can run per-event hooks."""

    def __init__(self) -> None:
        self.processed: list[ControllerEvent] = []
        self.preempted: list[ControllerEvent] = []
        self.threads: set[str] = set()
        self.on_process: Callable[[ControllerEvent], object] | None = None

    def process(self, event: ControllerEvent) -> None:
        self.threads.add(threading.current_thread().name)
        self.processed.append(event)
        if isinstance(event, MockEvent):
            event.process_fn()
        if self.on_process is not None:
            self.on_process(event)

    def preempt(self, event: ControllerEvent) -> None:
        self.preempted.append(event)
        if isinstance(event, MockEvent) and event.preempt_fn is not None:
            event.preempt_fn()


def make(start_ms: int = 0) -> tuple[ControllerEventManager, Recorder, VirtualClock]:
    clock = VirtualClock(start_ms)
    processor = Recorder()
    return ControllerEventManager(processor, clock, controller_id=1), processor, clock


def test_events_are_processed_in_fifo_order() -> None:
    manager, processor, _ = make()
    events = [BrokerModifications(i) for i in range(5)]
    for event in events:
        manager.put(event)
    assert manager.queue_size == 5
    assert manager.run_until_idle() == 5
    assert processor.processed == events
    assert manager.queue_size == 0


def test_put_returns_queued_event_stamped_with_the_injected_clock() -> None:
    manager, _, clock = make(start_ms=1_000)
    clock.advance_to(1_234)
    queued = manager.put(TopicChange())
    assert isinstance(queued, QueuedEvent)
    assert (queued.event, queued.enqueue_time_ms) == (TopicChange(), 1_234)


def test_clear_and_put_preempts_queued_events_in_order_then_puts() -> None:
    manager, processor, _ = make()
    replies: list[tuple[int, str]] = []
    queued = [
        ControlledShutdown(i, 1, callback=lambda r, i=i: replies.append((i, r))) for i in (1, 2, 3)
    ]
    for event in queued:
        manager.put(event)

    def preempt(event: ControllerEvent) -> None:
        processor.preempted.append(event)
        assert isinstance(event, ControlledShutdown) and event.callback is not None
        event.callback("NOT_CONTROLLER")

    processor.preempt = preempt  # type: ignore[method-assign]
    manager.clear_and_put(Expire())
    assert processor.preempted == queued
    assert replies == [(1, "NOT_CONTROLLER"), (2, "NOT_CONTROLLER"), (3, "NOT_CONTROLLER")]
    assert manager.queued_events() == [Expire()]
    manager.run_until_idle()
    assert processor.processed == [Expire()]
    assert manager.metrics.preempted == 3


def test_queued_event_is_consumed_once() -> None:
    _, processor, _ = make()
    queued = QueuedEvent(TopicChange(), 0)
    queued.preempt(processor)
    queued.process(processor)
    queued.preempt(processor)
    assert processor.preempted == [TopicChange()] and processor.processed == []
    assert queued.spent
    assert queued.await_processing(0)  # processing "started", as in Kafka, even though spent


def test_preempt_callback_may_put_events() -> None:
    manager, _processor, _ = make()
    manager.put(MockEvent(lambda: None, preempt_fn=lambda: manager.put(BrokerChange())))
    manager.clear_and_put(Expire())
    assert manager.queued_events() == [BrokerChange(), Expire()]


def test_an_exception_in_one_event_does_not_stop_later_ones(
    caplog: pytest.LogCaptureFixture,
) -> None:
    manager, processor, _ = make()

    def boom() -> None:
        raise RuntimeError("handler failed")

    manager.put(BrokerModifications(1))
    manager.put(MockEvent(boom, controller_state=ControllerState.BrokerChange))
    manager.put(BrokerModifications(2))
    assert manager.run_until_idle() == 3
    assert [e for e in processor.processed if isinstance(e, BrokerModifications)] == [
        BrokerModifications(1),
        BrokerModifications(2),
    ]
    assert manager.metrics.errors == 1
    assert "Uncaught error processing event MockEvent" in caplog.text
    assert "handler failed" in caplog.text
    assert manager.state is ControllerState.Idle


def test_state_is_the_events_state_while_processing_and_idle_after() -> None:
    manager, processor, _ = make()
    seen: list[ControllerState] = []
    processor.on_process = lambda event: seen.append(manager.state)
    manager.put(BrokerChange())
    manager.put(PartitionModifications("t"))
    manager.put(MockEvent(lambda: None, controller_state=ControllerState.ControlledShutdown))
    assert manager.state is ControllerState.Idle
    manager.run_until_idle()
    assert seen == [
        ControllerState.BrokerChange,
        ControllerState.TopicChange,
        ControllerState.ControlledShutdown,
    ]
    assert manager.state is ControllerState.Idle


def test_queue_time_uses_the_injected_clock() -> None:
    manager, processor, clock = make()
    manager.put(TopicChange())  # at 0
    clock.advance_to(30)
    manager.put(TopicChange())  # at 30
    clock.advance_to(100)
    processor.on_process = lambda event: clock.advance_by(5)  # handlers take virtual time
    manager.run_until_idle()
    hist = manager.metrics.event_queue_time_ms
    assert (hist.count, hist.min, hist.max, hist.total) == (2, 75, 100, 175)
    assert hist.mean == 87.5
    assert (hist.percentile(0.5), hist.percentile(1.0)) == (75, 100)


def test_rate_and_time_recorded_per_state_that_has_a_metric() -> None:
    manager, _, _ = make()
    manager.put(BrokerChange())
    manager.put(BrokerChange())
    manager.put(TopicChange())
    manager.put(MockEvent(lambda: None))  # Idle: no metric
    manager.run_until_idle()
    stats = manager.metrics.rate_and_time
    assert stats[ControllerState.BrokerChange].count == 2
    assert stats[ControllerState.BrokerChange].metric_name == "LeaderElectionRateAndTimeMs"
    assert stats[ControllerState.TopicChange].count == 1
    assert ControllerState.Idle not in stats
    assert ControllerState.UpdateMetadataResponseReceived not in stats
    assert manager.metrics.processed == 4


def test_failed_events_are_timed_too() -> None:
    manager, _, _ = make()

    def boom() -> None:
        raise ValueError

    manager.put(MockEvent(boom, controller_state=ControllerState.IsrChange))
    manager.run_until_idle()
    assert manager.metrics.rate_and_time[ControllerState.IsrChange].count == 1


def test_queue_time_histogram_cleared_after_idle_period() -> None:
    manager, _, clock = make()
    manager.put(TopicChange())
    manager.run_until_idle()
    assert manager.metrics.event_queue_time_ms.count == 1
    clock.advance_by(299_999)
    assert not manager.maybe_reset_queue_time()
    clock.advance_by(1)
    assert manager.maybe_reset_queue_time()
    assert manager.metrics.event_queue_time_ms.count == 0


def test_queue_time_histogram_cleared_before_the_event_after_a_long_idle() -> None:
    manager, _, clock = make()
    manager.put(TopicChange())
    manager.run_until_idle()
    clock.advance_by(400_000)
    manager.put(TopicChange())
    clock.advance_by(7)
    manager.run_until_idle()
    hist = manager.metrics.event_queue_time_ms
    assert (hist.count, hist.max) == (1, 7)


def test_run_until_idle_processes_events_put_by_handlers() -> None:
    manager, processor, _ = make()
    chain = [BrokerModifications(i) for i in range(4)]

    def follow(event: ControllerEvent) -> None:
        if isinstance(event, BrokerModifications) and event.broker_id < 3:
            manager.put(chain[event.broker_id + 1])

    processor.on_process = follow
    manager.put(chain[0])
    assert manager.run_until_idle() == 4
    assert processor.processed == chain


def test_run_until_idle_respects_max_events() -> None:
    manager, _processor, _ = make()
    for i in range(5):
        manager.put(BrokerModifications(i))
    assert manager.run_until_idle(max_events=2) == 2
    assert manager.queue_size == 3


def test_shutdown_sentinel_stops_run_until_idle_and_is_not_dispatched() -> None:
    manager, processor, _ = make()
    manager.put(TopicChange())
    manager.put(ShutdownEventThread())
    manager.put(BrokerChange())
    assert manager.run_until_idle() == 1
    assert processor.processed == [TopicChange()]
    assert manager.is_stopped
    assert manager.run_until_idle() == 0


def test_close_without_thread_preempts_queued_events() -> None:
    manager, processor, _ = make()
    manager.put(TopicChange())
    assert manager.close()
    assert processor.preempted == [TopicChange()]
    assert manager.run_until_idle() == 0
    assert processor.processed == []


def test_event_thread_processes_and_stops_on_shutdown() -> None:
    manager, processor, _ = make()
    manager.start()
    assert manager.is_running
    queued = manager.put(BrokerChange())
    assert queued.await_processing(JOIN_TIMEOUT_S)
    assert manager.close(JOIN_TIMEOUT_S)
    assert not manager.is_running
    assert processor.processed == [BrokerChange()]
    assert processor.threads == {CONTROLLER_EVENT_THREAD_NAME}


def test_event_thread_is_a_daemon_named_like_kafkas() -> None:
    manager, _, _ = make()
    manager.start()
    try:
        thread = next(t for t in threading.enumerate() if t.name == CONTROLLER_EVENT_THREAD_NAME)
        assert thread.daemon
        assert CONTROLLER_EVENT_THREAD_NAME == "controller-event-thread"
    finally:
        assert manager.close(JOIN_TIMEOUT_S)


def test_event_thread_survives_handler_exceptions() -> None:
    manager, processor, _ = make()

    def boom() -> None:
        raise RuntimeError("boom")

    manager.start()
    manager.put(MockEvent(boom))
    last = manager.put(TopicChange())
    assert last.await_processing(JOIN_TIMEOUT_S)
    assert manager.close(JOIN_TIMEOUT_S)
    assert TopicChange() in processor.processed
    assert manager.metrics.errors == 1


def test_run_until_idle_refuses_to_race_the_event_thread() -> None:
    manager, _, _ = make()
    manager.start()
    try:
        with pytest.raises(RuntimeError):
            manager.run_until_idle()
    finally:
        assert manager.close(JOIN_TIMEOUT_S)


def test_close_preempts_what_the_thread_has_not_started() -> None:
    manager, processor, _ = make()
    release = threading.Event()
    manager.start()
    blocker = manager.put(MockEvent(lambda: release.wait(JOIN_TIMEOUT_S)))
    assert blocker.await_processing(JOIN_TIMEOUT_S)
    manager.put(BrokerModifications(7))
    closer = threading.Thread(target=manager.close, args=(JOIN_TIMEOUT_S,))
    closer.start()
    # close() preempts on its own thread before waiting for the event thread.
    while not processor.preempted and closer.is_alive():
        closer.join(0.01)
    release.set()
    closer.join(JOIN_TIMEOUT_S)
    assert not manager.is_running
    assert processor.preempted == [BrokerModifications(7)]
    assert BrokerModifications(7) not in processor.processed


def test_concurrent_producers_every_event_processed_exactly_once() -> None:
    manager, processor, _ = make()
    producers, per_producer = 4, 2_000
    manager.start()

    def produce(p: int) -> None:
        for i in range(per_producer):
            manager.put(BrokerModifications(p * per_producer + i))

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT_S)
    last = manager.put(TopicChange())
    assert last.await_processing(JOIN_TIMEOUT_S)
    assert manager.close(JOIN_TIMEOUT_S)

    ids = [e.broker_id for e in processor.processed if isinstance(e, BrokerModifications)]
    assert sorted(ids) == list(range(producers * per_producer))
    for p in range(producers):  # each producer's events stay in its order
        mine = [i for i in ids if i // per_producer == p]
        assert mine == sorted(mine)
    assert processor.processed[-1] == TopicChange()
