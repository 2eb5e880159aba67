"""The ``kce run`` progress line: drawn on a real terminal (a pty), silent on a pipe or file."""

from __future__ import annotations

import io
import os

from spark_app.progress import Progress, WorkProgress, format_seconds


def _read_all(fd: int) -> str:
    """Everything written to the pty; call after its terminal side is closed (reads end in EIO)."""
    chunks = []
    while True:
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode()


def test_progress_redraws_one_line_on_a_terminal() -> None:
    master, slave = os.openpty()
    with os.fdopen(slave, "w", closefd=True) as tty:
        progress = Progress(600_000, tty, interval_s=0)
        progress.update(300_000, 12)
        progress.close(600_000, 40)
    text = _read_all(master)
    os.close(master)
    frames = [f for f in text.replace("\r\n", "\n").split("\r") if f]
    assert frames[0].startswith("[" + "#" * 15 + " " * 15 + "] 300.0s / 600.0s virtual · 12 events")
    assert frames[-1].rstrip("\n").strip() == (
        "[" + "#" * 30 + "] 600.0s / 600.0s virtual · 40 events"
    )
    assert text.endswith("\n")


def test_progress_is_silent_when_not_a_terminal() -> None:
    out = io.StringIO()
    progress = Progress(1_000, out, interval_s=0)
    progress.update(500, 1)
    progress.close(1_000, 2)
    assert out.getvalue() == ""


def test_sweep_progress_counts_points_and_runs_weighted_by_size() -> None:
    master, slave = os.openpty()
    with os.fdopen(slave, "w", closefd=True) as tty:
        progress = WorkProgress(2, [1000.0, 1000.0, 4000.0, 4000.0], tty, interval_s=0)
        progress.update(1, 0)
        progress.update(2, 3)
        progress.close()
    text = _read_all(master)
    os.close(master)
    frames = [f.rstrip() for f in text.replace("\r\n", "\n").split("\r") if f]
    assert frames[0] == "[" + " " * 30 + "] point 1/2 · 0/4 runs · ETA …"
    # 6,000 of the 10,000 partitions' worth of runs done: 18 of 30.
    assert frames[1].startswith("[" + "#" * 18 + " " * 12 + "] point 2/2 · 3/4 runs · ETA ")
    assert frames[-1] == "[" + "#" * 30 + "] point 2/2 · 4/4 runs · ETA 0s"


def test_seconds_are_shown_as_hours_minutes_seconds() -> None:
    assert [format_seconds(s) for s in (0.4, 59, 75, 3599, 3700)] == [
        "0s", "59s", "1m15s", "59m59s", "1h01m",
    ]  # fmt: skip
