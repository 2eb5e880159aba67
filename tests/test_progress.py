"""Progress of long work: a rich bar with the time left on a terminal, a timestamped line per step
in a log, nothing for work shorter than the delay, and nothing for work nested in another's.

A fake clock drives rich's task timing, so the ETA shown is exact; no test measures real time."""

from __future__ import annotations

import io
import re

from rich.console import Console

from spark_app.progress import Progress, SweepProgress, WorkProgress, format_seconds

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=120, color_system=None), out


def _frames(out: io.StringIO) -> list[str]:
    """The bar's renderings, control codes removed (rich redraws the line in place)."""
    text = ANSI.sub("", out.getvalue())
    return [f.strip() for f in re.split(r"[\r\n]+", text) if f.strip()]


def test_sweep_bar_shows_runs_and_the_time_left_weighted_by_size() -> None:
    clock = Clock()
    console, out = _console(terminal=True)
    progress = SweepProgress(2, [1000.0, 1000.0, 4000.0, 4000.0], console, clock, False)
    progress.update(1, 0)
    clock.now += 60  # 6,000 of the 10,000 partitions' worth of runs done in 60 s: 40 s left
    progress.update(2, 3)
    progress.close()
    frames = _frames(out)
    assert frames[0].startswith("sweep") and frames[0].endswith("point 1/2 · 0/4 runs ETA …")
    assert any(f.endswith("point 2/2 · 3/4 runs ETA 40s") for f in frames)
    assert frames[-1].endswith("point 2/2 · 4/4 runs ETA 0s")
    assert "\n" not in ANSI.sub("", out.getvalue()).strip()  # one line, redrawn


def test_off_a_terminal_each_step_is_a_line_and_no_bar_is_drawn() -> None:
    console, out = _console(terminal=False)
    progress = SweepProgress(1, [1.0, 1.0], console, Clock())
    progress.log("1e+03 partitions: set up in 3s")
    progress.update(1, 1)
    progress.log("1e+03 partitions · broker failure: 1.2 s")
    progress.close()
    lines = out.getvalue().splitlines()
    assert [line[9:] for line in lines] == [
        "1e+03 partitions: set up in 3s",
        "1e+03 partitions · broker failure: 1.2 s",
    ]
    assert all(re.fullmatch(r"\d\d:\d\d:\d\d", line[:8]) for line in lines)


def test_run_bar_appears_after_the_delay_with_virtual_time_and_events() -> None:
    clock = Clock()
    console, out = _console(terminal=True)
    progress = Progress(600_000, console, delay_s=3, get_time=clock, auto_refresh=False)
    progress.update(60_000, 5)
    assert out.getvalue() == ""  # a run shorter than the delay leaves the terminal as it was
    clock.now += 10  # 300 of 600 virtual seconds in 10 s of wall time: 10 s left
    progress.update(300_000, 12)
    progress.update(600_000, 40)
    progress.step("outputs", "writing the outputs")  # the phase replaces the word before the bar
    progress.stop()
    frames = _frames(out)
    assert frames[0].startswith("run") and frames[0].endswith(
        "300.0s / 600.0s virtual · 12 events ETA 10s"
    )
    assert frames[-1].startswith("outputs")
    assert frames[-1].endswith("600.0s / 600.0s virtual · 40 events ETA 0s")
    assert "writing the outputs" not in out.getvalue()  # a terminal gets no log lines


def test_run_logs_a_line_every_interval_and_its_end_off_a_terminal() -> None:
    clock = Clock()
    console, out = _console(terminal=False)
    with Progress(600_000, console, delay_s=3, log_every_s=10, get_time=clock) as progress:
        progress.update(1_000, 1)  # within the delay: nothing
        clock.now += 4
        progress.update(2_000, 2)  # the first line
        clock.now += 5
        progress.update(3_000, 3)  # 5 s after it: none
        clock.now += 6
        progress.update(4_000, 4)  # 11 s after it: a line
        progress.step("outputs", "writing the outputs")
        progress.close(600_000, 9)
    assert [line[9:] for line in out.getvalue().splitlines()] == [
        "2.0s / 600.0s virtual · 2 events",
        "4.0s / 600.0s virtual · 4 events",
        "writing the outputs",
        "600.0s / 600.0s virtual · 9 events",
    ]


def test_each_phase_estimates_its_time_left_from_its_own_start() -> None:
    clock = Clock()
    console, out = _console(terminal=True)
    with Progress(600_000, console, delay_s=3, get_time=clock, auto_refresh=False) as progress:
        progress.step("setup", "building the starting table")
        clock.now += 20  # the setup's 20 s say nothing of the timeline's pace
        progress.step("run", "playing the timeline")
        clock.now += 10
        progress.update(300_000, 12)
    assert _frames(out)[-1].startswith("run")
    assert _frames(out)[-1].endswith("300.0s / 600.0s virtual · 12 events ETA 10s")


def test_a_long_phase_shows_the_bar_once_it_is_due() -> None:
    # The timeline played within the delay; writing the outputs takes longer.
    clock = Clock()
    console, out = _console(terminal=True)
    with Progress(10_000, console, delay_s=3, get_time=clock, auto_refresh=False) as progress:
        progress.update(10_000, 7, force=True)
        progress.step("outputs", "writing the outputs")
        assert out.getvalue() == ""
        clock.now += 5
        progress.step("outputs", "writing the outputs")
    assert _frames(out)[-1].startswith("outputs")
    assert _frames(out)[-1].endswith("10.0s / 10.0s virtual · 7 events ETA 0s")


def test_a_short_run_off_a_terminal_writes_nothing() -> None:
    console, out = _console(terminal=False)
    progress = Progress(1_000, console, delay_s=3, get_time=Clock())
    progress.update(500, 1)
    progress.close(1_000, 2)
    assert out.getvalue() == ""


def test_work_nested_in_another_display_is_silent() -> None:
    console, out = _console(terminal=False)
    with WorkProgress("sweep", 2, console) as outer:
        with WorkProgress("execute", 3, console) as inner:
            inner.log("wave 1: 3 moves")
            assert not inner.enabled
        outer.log("point done")
    with WorkProgress("execute", 3, console) as alone:  # once the outer one has closed
        alone.log("wave 1: 3 moves")
    assert [line[9:] for line in out.getvalue().splitlines()] == ["point done", "wave 1: 3 moves"]


def test_seconds_are_shown_as_hours_minutes_seconds() -> None:
    assert [format_seconds(s) for s in (0.4, 59, 75, 3599, 3700)] == [
        "0s", "59s", "1m15s", "59m59s", "1h01m",
    ]  # fmt: skip
