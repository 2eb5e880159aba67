"""Progress of long work, drawn by ``rich``: on a terminal a bar with the time left; in a log (a
pipe or a file) a timestamped line per step instead, since a bar redrawn in place is unreadable
there. Used by ``kce run`` (virtual time and events processed), ``kce scale`` (runs done, weighted
by their cluster's size) and ``kce whatif execute`` (moves completed).

Work that ends within ``delay_s`` shows nothing: a quick command's terminal stays as it was. Only
one display shows at a time: work nested in another's (a what-if question inside a sweep) is
silent, so the outer bar is never torn and its log never interleaved.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, ProgressColumn, Task, TaskID, TextColumn
from rich.progress import Progress as RichProgress
from rich.text import Text

WIDTH = 30
Clock = Callable[[], float]

_open: list[WorkProgress] = []  # the displays shown now, outermost first


def format_seconds(seconds: float) -> str:
    """``75`` -> ``1m15s``; ``3700`` -> ``1h01m``."""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class _Eta(ProgressColumn):
    """The time left: the time so far scaled by the work left over the work done (rich's own
    column estimates from recent speed, which a sweep's few long runs do not give)."""

    def render(self, task: Task) -> Text:
        done, elapsed = task.completed, task.elapsed
        if task.total is None or done <= 0 or elapsed is None:
            return Text("ETA …")
        left = max(0.0, task.total - done)
        return Text(f"ETA {format_seconds(elapsed * left / done)}")


class WorkProgress:
    """``total`` units of work (any unit: bytes, weights, milliseconds) done step by step.

    ``update(done, text)`` moves the bar (a terminal) and ``log(text)`` writes a step's line (a
    log); ``close()`` ends both. ``console`` defaults to stderr, so stdout keeps only results."""

    def __init__(
        self,
        description: str,
        total: float,
        console: Console | None = None,
        delay_s: float = 0.0,
        get_time: Clock = time.monotonic,
        auto_refresh: bool = True,
    ) -> None:
        self.console = console if console is not None else Console(stderr=True)
        self.description = description
        self.total = max(total, 1e-9)
        self.delay_s = delay_s
        self.clock = get_time
        self.started = self.origin = get_time()
        self.auto_refresh = auto_refresh
        self.terminal = self.console.is_terminal
        self.enabled = not _open  # nested in another display: silent
        if self.enabled:
            _open.append(self)
        self._bar: RichProgress | None = None
        self._task: TaskID | None = None
        self._done, self._text = 0.0, ""

    def due(self) -> bool:
        """Past the delay, and not nested in another display."""
        return self.enabled and self.clock() - self.started >= self.delay_s

    def update(self, done: float, text: str = "") -> None:
        """``done`` of ``total`` units; ``text`` beside the bar."""
        self._done, self._text = done, text
        if not self.terminal or not self.due():
            return
        if self._bar is None:
            self._bar = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(bar_width=WIDTH),
                TextColumn("{task.fields[text]}"),
                _Eta(),
                console=self.console,
                auto_refresh=self.auto_refresh,
                get_time=self.clock,
            )
            self._task = self._bar.add_task(
                self.description, total=self.total, completed=min(done, self.total), text=text
            )
            # The bar appears late (``delay_s``): its clock, and so the ETA, counts from the start.
            self._bar.tasks[0].start_time = self.origin
            self._bar.start()
        assert self._task is not None
        self._bar.update(self._task, completed=min(done, self.total), text=text)
        if not self.auto_refresh:
            self._bar.refresh()

    def describe(self, description: str) -> None:
        """The word before the bar, from now on: a new phase of the work, whose time left is
        estimated from its own start (a setup's time says nothing of the work after it)."""
        self.description = description
        self.origin = self.clock()
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, description=description)
            self._bar.tasks[0].start_time = self.origin
        self.update(self._done, self._text)  # a long phase shows the bar once it is due

    def log(self, text: str) -> None:
        """A timestamped line, written only off a terminal (where no bar is drawn)."""
        if not self.terminal and self.due():
            stamp = time.strftime("%H:%M:%S")
            self.console.print(f"{stamp} {text}", markup=False, highlight=False, soft_wrap=True)

    def close(self) -> None:
        """End the display; again is harmless."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        if self in _open:
            _open.remove(self)
        self.enabled = False

    def __enter__(self) -> WorkProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Progress:
    """``kce run``: ``run ━━━━━━╺━━━ 12.0s / 600.0s virtual · 34 events ETA 1m15s`` on a terminal
    once the run has taken ``delay_s``; off a terminal a line every ``log_every_s``. The word
    before the bar is the run's phase: ``bootstrap``, ``run``, ``outputs`` (``step``)."""

    def __init__(
        self,
        until_ms: int,
        console: Console | None = None,
        delay_s: float = 3.0,
        log_every_s: float = 10.0,
        get_time: Clock = time.monotonic,
        auto_refresh: bool = True,
    ) -> None:
        self.until_ms = max(1, until_ms)
        self.work = WorkProgress("run", self.until_ms, console, delay_s, get_time, auto_refresh)
        self.log_every_s = log_every_s
        self._logged: float | None = None

    def _text(self, now_ms: int, events: int) -> str:
        return f"{now_ms / 1000:.1f}s / {self.until_ms / 1000:.1f}s virtual · {events} events"

    def update(self, now_ms: int, events: int, force: bool = False) -> None:
        text = self._text(now_ms, events)
        self.work.update(now_ms, text)
        now = self.work.clock()
        if not self.work.due():
            return
        if force or self._logged is None or now - self._logged >= self.log_every_s:
            self._logged = now
            self.work.log(text)

    def step(self, phase: str, text: str) -> None:
        """A new phase of the run: ``phase`` before the bar; ``text`` a log's line."""
        self.work.describe(phase)
        self.work.log(text)

    def close(self, now_ms: int, events: int) -> None:
        """The run has played to ``now_ms``: the bar's last state, or the log's last line (when
        the log has any), then the display ends."""
        self.update(now_ms, events, force=self._logged is not None)
        self.stop()

    def stop(self) -> None:
        """End the display as it is (a failed run); again is harmless."""
        self.work.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SweepProgress:
    """``kce scale``: ``sweep ━━━━╺━━━ point 2/6 · 5/24 runs ETA 1m15s``.

    Each run has a weight (its cluster's partitions): the time left is the time so far scaled by
    the weight left over the weight done, so a sweep's larger points count for more. Off a
    terminal, ``log`` writes each finished step on a line of its own instead."""

    def __init__(
        self, points: int, weights: list[float], console: Console | None = None,
        get_time: Clock = time.monotonic, auto_refresh: bool = True,
    ) -> None:  # fmt: skip
        self.points = points
        self.weights = weights
        self.work = WorkProgress(
            "sweep", sum(weights), console, get_time=get_time, auto_refresh=auto_refresh
        )

    def update(self, point: int, runs_done: int) -> None:
        self.work.update(
            sum(self.weights[:runs_done]),
            f"point {point}/{self.points} · {runs_done}/{len(self.weights)} runs",
        )

    def log(self, text: str) -> None:
        self.work.log(text)

    def close(self) -> None:
        self.update(self.points, len(self.weights))
        self.work.close()
