"""A one-line progress bar for ``kce run`` on a terminal: virtual time and events processed."""

from __future__ import annotations

import sys
import time
from typing import TextIO

WIDTH = 30


class Progress:
    """Redraws ``[#####.....] 12.0s / 600.0s virtual · 34 events`` in place, at most every
    ``interval_s``; writes nothing unless ``stream`` is a terminal (logs and pipes stay clean)."""

    def __init__(
        self, until_ms: int, stream: TextIO | None = None, interval_s: float = 0.2
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty()
        self.until_ms = max(1, until_ms)
        self.interval_s = interval_s
        self._last = float("-inf")
        self._line = ""

    def update(self, now_ms: int, events: int, force: bool = False) -> None:
        if not self.enabled:
            return
        tick = time.monotonic()
        if not force and tick - self._last < self.interval_s:
            return
        self._last = tick
        done = min(1.0, max(0.0, now_ms / self.until_ms))
        bar = "#" * round(done * WIDTH)
        line = (
            f"[{bar:<{WIDTH}}] {now_ms / 1000:.1f}s / {self.until_ms / 1000:.1f}s virtual"
            f" · {events} events"
        )
        # Pad over a longer previous line, then return to the line start.
        self.stream.write("\r" + line.ljust(len(self._line)))
        self.stream.flush()
        self._line = line

    def close(self, now_ms: int, events: int) -> None:
        if self.enabled:
            self.update(now_ms, events, force=True)
            self.stream.write("\n")
            self.stream.flush()
