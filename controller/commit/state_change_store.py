"""Where the state-change log goes: Parquet per commit, and Kafka's log4j text for small runs.

The lines themselves come from ``controller.commit.state_change_log.state_change_lines``.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from controller.commit.state_change_log import (
    EVENT,
    EXCEPTION,
    LEVEL,
    LINE,
    LINE_COLUMNS,
    LOGGER,
    STEP,
)
from statemachines import schemas as s
from statemachines.reference_state_change_log import Line

# The lines' Parquet schema, as Spark writes them.
LINE_SCHEMA = pa.schema(
    [
        pa.field(s.TOPIC, pa.string(), nullable=False),
        (s.PARTITION, pa.int32()),
        (s.BROKER, pa.int32()),
        pa.field(LEVEL, pa.string(), nullable=False),
        (LINE, pa.string()),
        (STEP, pa.int32()),
        (EXCEPTION, pa.string()),
    ]
)


def log4j_time(epoch_ms: int) -> str:
    """Kafka's log4j ``%d``: ``yyyy-MM-dd HH:mm:ss,SSS`` (UTC)."""
    seconds, millis = divmod(epoch_ms, 1000)
    t = datetime.fromtimestamp(seconds, tz=timezone.utc)
    return f"{t:%Y-%m-%d %H:%M:%S},{millis:03d}"


class StateChangeLog:
    """The state-change log of a run: Parquet per event, plus an optional log4j text file.

    Parquet goes to ``out_dir/state-change/event=<index>/``; read the directory above as one
    dataset to get an ``event`` column. Text goes to ``out_dir/state-change.log`` as
    ``[<time>] <LEVEL> <line> (state.change.logger)`` (an ERROR's exception on the next line, as
    log4j prints a throwable), lines ordered by topic, partition, broker (partition lines
    first), step. Events without lines leave no directory and no text.

    One Spark job per event either way. Without text, the Spark writer runs and the line count is
    read from the written files' Parquet footers. With text, the lines are needed on the driver
    anyway, so they are fetched once (Arrow) and both the text and the Parquet file are written
    from that table; writing the Parquet with Spark too would recompute the lines in a second job.
    """

    def __init__(self, out_dir: Path, text: bool) -> None:
        self.out_dir = Path(out_dir)
        self.text = text

    @property
    def parquet_dir(self) -> Path:
        return self.out_dir / "state-change"

    @property
    def text_path(self) -> Path:
        return self.out_dir / "state-change.log"

    def event_dir(self, event_index: int) -> Path:
        return self.parquet_dir / f"{EVENT}={event_index}"

    def append(self, lines: DataFrame, event_index: int, virtual_time_ms: int) -> int:
        """Store one event's lines (``state_change_lines``); returns how many there were."""
        target = self.event_dir(event_index)
        if target.exists():
            shutil.rmtree(target)
        if self.text:
            return self._append_with_text(lines, target, virtual_time_ms)
        lines.select(*LINE_COLUMNS).write.mode("overwrite").parquet(str(target))
        count = sum(pq.read_metadata(f).num_rows for f in target.glob("*.parquet"))
        if count == 0:
            shutil.rmtree(target)
        return count

    def append_lines(self, lines: list[Line], event_index: int, virtual_time_ms: int) -> int:
        """``append`` for lines rendered on the driver (the driver path's commits): the same
        files, written without Spark."""
        target = self.event_dir(event_index)
        if target.exists():
            shutil.rmtree(target)
        ordered = sorted(
            lines, key=lambda x: (x.topic, x.partition, x.broker is not None, x.broker or 0, x.step)
        )
        columns = list(zip(*ordered, strict=True)) if ordered else [()] * len(LINE_SCHEMA)
        table = pa.Table.from_arrays(
            [pa.array(c, type=f.type) for c, f in zip(columns, LINE_SCHEMA, strict=True)],
            schema=LINE_SCHEMA,
        )
        return self._write_table(table, target, virtual_time_ms)

    def _append_with_text(self, lines: DataFrame, target: Path, virtual_time_ms: int) -> int:
        ordered = lines.select(*LINE_COLUMNS).orderBy(
            F.col(s.TOPIC), F.col(s.PARTITION), F.col(s.BROKER).asc_nulls_first(), F.col(STEP)
        )
        return self._write_table(ordered.toArrow(), target, virtual_time_ms)

    def _write_table(self, table: pa.Table, target: Path, virtual_time_ms: int) -> int:
        """Write one event's ordered lines as its Parquet file and, with ``text``, log4j text."""
        if table.num_rows == 0:
            return 0
        target.mkdir(parents=True)
        pq.write_table(table, target / "part-00000.parquet")
        if not self.text:
            return table.num_rows
        stamp = f"[{log4j_time(virtual_time_ms)}] "
        levels = table.column(LEVEL).to_pylist()
        texts = table.column(LINE).to_pylist()
        thrown = table.column(EXCEPTION).to_pylist()
        self.text_path.parent.mkdir(parents=True, exist_ok=True)
        with self.text_path.open("a", encoding="utf-8") as out:
            out.writelines(
                f"{stamp}{level} {text} ({LOGGER})\n" + ("" if exc is None else f"{exc}\n")
                for level, text, exc in zip(levels, texts, thrown, strict=True)
            )
        return table.num_rows


class EventStateChangeLog:
    """A run's state-change log written commit by commit (indices in commit order)."""

    def __init__(self, log: StateChangeLog) -> None:
        self.log = log
        self.commits = 0
        self.lines = 0

    def append(self, lines: DataFrame | list[Line], virtual_time_ms: int) -> int:
        if isinstance(lines, list):
            n = self.log.append_lines(lines, self.commits, virtual_time_ms)
        else:
            n = self.log.append(lines, self.commits, virtual_time_ms)
        self.commits += 1
        self.lines += n
        return n
