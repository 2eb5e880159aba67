"""One-line progress bars on a terminal: ``kce run``'s virtual time and events processed, and
``kce scale``'s runs done with an estimate of the time left. Off a terminal, ``kce scale`` logs a
line per step instead, since one of its runs can take an hour."""

from __future__ import annotations

import sys
import time
from typing import TextIO

WIDTH = 30


class _Line:
    """A line redrawn in place, at most every ``interval_s``; writes nothing unless ``stream``
    is a terminal (logs and pipes stay clean)."""

    def __init__(self, stream: TextIO | None, interval_s: float) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty()
        self.interval_s = interval_s
        self._last = float("-inf")
        self._line = ""

    def due(self, force: bool) -> bool:
        if not self.enabled:
            return False
        tick = time.monotonic()
        if not force and tick - self._last < self.interval_s:
            return False
        self._last = tick
        return True

    def draw(self, done: float, text: str) -> None:
        bar = "#" * round(min(1.0, max(0.0, done)) * WIDTH)
        line = f"[{bar:<{WIDTH}}] {text}"
        # Pad over a longer previous line, then return to the line start.
        self.stream.write("\r" + line.ljust(len(self._line)))
        self.stream.flush()
        self._line = line

    def log(self, text: str) -> None:
        """A timestamped line, written only off a terminal (where no bar is drawn)."""
        if not self.enabled:
            self.stream.write(f"{time.strftime('%H:%M:%S')} {text}\n")
            self.stream.flush()

    def end(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


class Progress:
    """Redraws ``[#####.....] 12.0s / 600.0s virtual · 34 events`` in place."""

    def __init__(
        self, until_ms: int, stream: TextIO | None = None, interval_s: float = 0.2
    ) -> None:
        self._out = _Line(stream, interval_s)
        self.enabled = self._out.enabled
        self.until_ms = max(1, until_ms)

    def update(self, now_ms: int, events: int, force: bool = False) -> None:
        if self._out.due(force):
            self._out.draw(
                now_ms / self.until_ms,
                f"{now_ms / 1000:.1f}s / {self.until_ms / 1000:.1f}s virtual · {events} events",
            )

    def close(self, now_ms: int, events: int) -> None:
        self.update(now_ms, events, force=True)
        self._out.end()


def format_seconds(seconds: float) -> str:
    """``75`` -> ``1m15s``; ``3700`` -> ``1h01m``."""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class WorkProgress:
    """Redraws ``[####......] point 2/6 · 5/24 runs · ETA 1m15s`` in place.

    Each run has a weight (its cluster's partitions): the time left is the time so far scaled by
    the weight left over the weight done, so a sweep's larger points count for more. Off a
    terminal, ``log`` writes each finished step on a line of its own instead."""

    def __init__(
        self, points: int, weights: list[float], stream: TextIO | None = None,
        interval_s: float = 0.2,
    ) -> None:  # fmt: skip
        self._out = _Line(stream, interval_s)
        self.points = points
        self.weights = weights
        self.started = time.monotonic()
        self.done = 0

    def eta(self) -> float | None:
        """Seconds left, None before the first run ends."""
        done = sum(self.weights[: self.done])
        if done <= 0:
            return None
        left = sum(self.weights[self.done :])
        return (time.monotonic() - self.started) * left / done

    def update(self, point: int, runs_done: int, force: bool = False) -> None:
        self.done = runs_done
        if self._out.due(force):
            eta = self.eta()
            total = sum(self.weights) or 1
            self._out.draw(
                sum(self.weights[:runs_done]) / total,
                f"point {point}/{self.points} · {runs_done}/{len(self.weights)} runs · ETA "
                + ("…" if eta is None else format_seconds(eta)),
            )

    def log(self, text: str) -> None:
        self._out.log(text)

    def close(self) -> None:
        self.update(self.points, len(self.weights), force=True)
        self._out.end()
