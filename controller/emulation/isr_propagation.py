"""The leaders' ``isr-change-propagation`` task before AlterIsr (IBP < 2.7-IV2, §12.4).

Every 2.5 s from its start, a broker with ISR changes not yet announced writes one sequential
``/isr_change_notification`` node for all of them, once no change came for 5 s or 60 s passed
since its last one. These functions say which brokers' runs propagate now, and when the next
run that will propagate comes, so nothing ticks in between.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from controller.emulation.replication_records import BrokerActivity

PROPAGATION_CHECK_MS = 2_500  # isr-change-propagation period
PROPAGATION_LINGER_MS = 5_000  # no change for this long ...
PROPAGATION_MAX_DELAY_MS = 60_000  # ... or this long since the last propagation


def _propagates(a: BrokerActivity, at_ms: int) -> bool:
    return (
        a.last_change_ms + PROPAGATION_LINGER_MS < at_ms
        or a.last_propagation_ms + PROPAGATION_MAX_DELAY_MS < at_ms
    )


def propagating(
    brokers: Mapping[int, BrokerActivity], running: Callable[[int], bool], now_ms: int
) -> list[int]:
    """Brokers whose task runs at ``now_ms`` and writes a notification, ascending."""
    return [
        b
        for b, a in sorted(brokers.items())
        if a.pending
        and running(b)
        and (now_ms - a.started_ms) % PROPAGATION_CHECK_MS == 0
        and _propagates(a, now_ms)
    ]


def next_propagation(
    brokers: Mapping[int, BrokerActivity], running: Callable[[int], bool], now_ms: int
) -> int | None:
    """The first run after ``now_ms`` of any broker's task that will write a notification."""
    due: list[int] = []
    for b, a in brokers.items():
        if not a.pending or not running(b):
            continue
        t = now_ms - (now_ms - a.started_ms) % PROPAGATION_CHECK_MS + PROPAGATION_CHECK_MS
        while not _propagates(a, t):
            t += PROPAGATION_CHECK_MS
        due.append(t)
    return min(due, default=None)
