"""Clocks in milliseconds: the wall clock, and a virtual one that emulations move by hand."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Anything that tells the time in milliseconds."""

    def now_ms(self) -> int: ...


class SystemClock:
    """Wall-clock milliseconds since the epoch (Kafka's ``Time.SYSTEM.milliseconds``)."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class VirtualClock:
    """A clock that only moves when told to; it never goes backwards."""

    __slots__ = ("_now_ms",)

    def __init__(self, start_ms: int = 0) -> None:
        self._now_ms = start_ms

    def now_ms(self) -> int:
        return self._now_ms

    def advance_to(self, to_ms: int) -> None:
        if to_ms < self._now_ms:
            raise ValueError(f"cannot move the clock back from {self._now_ms} to {to_ms}")
        self._now_ms = to_ms

    def advance_by(self, delta_ms: int) -> None:
        self.advance_to(self._now_ms + delta_ms)
