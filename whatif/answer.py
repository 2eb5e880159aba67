"""What a what-if question returns, and how it is written: all of it at once, or nothing.

Every question builds an ``Answer``; ``write_answer`` puts it under ``--out`` through
``staged_output`` (a temporary directory beside it, renamed into place when complete):
``summary.json`` (the figures under stable keys, ``docs/whatif.md``), one Parquet table per entry
of ``tables``, Kafka-format JSON plans (``reassignment.json``, ``rollback.json``,
``election.json``), the question's other files (``timeline.jsonl``) and ``report.html``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame

from html_report.page import Section, render_report
from spark_app.staged_output import staged_output, write_json


@dataclass(frozen=True)
class Answer:
    """A question's result.

    ``summary``: ``summary.json`` (JSON values only; broker ids as string keys); ``lines``: the
    short human summary printed on the terminal; ``tables``: Parquet outputs by file stem
    (per-partition and per-broker, before and after); ``plans``: Kafka-format JSON files by file
    name; ``sections``: the report's parts after its summary table; ``files``: other text files by
    name, written as given (e.g. JSON Lines).
    """

    question: str
    summary: Mapping[str, Any]
    lines: list[str]
    tables: Mapping[str, DataFrame] = field(default_factory=dict)
    plans: Mapping[str, Any] = field(default_factory=dict)
    sections: list[Section] = field(default_factory=list)
    files: Mapping[str, str] = field(default_factory=dict)


def reassignment_json(moves: list[tuple[str, int, list[int]]]) -> dict[str, Any]:
    """Kafka's reassignment JSON (``kafka-reassign-partitions.sh --execute``) for (topic,
    partition, replicas) entries, in the order given."""
    return {
        "version": 1,
        "partitions": [{"topic": t, "partition": p, "replicas": list(r)} for t, p, r in moves],
    }


def election_json(partitions: list[tuple[str, int]]) -> dict[str, Any]:
    """``kafka-leader-election.sh --path-to-json-file`` input for (topic, partition) entries."""
    return {"partitions": [{"topic": t, "partition": p} for t, p in partitions]}


def write_answer(out: Path, answer: Answer, source: str) -> None:
    """Write ``answer`` under ``out``, replacing an earlier output only when all of it is
    written."""
    with staged_output(out, "whatif") as staged:
        write_json(staged / "summary.json", answer.summary)
        for name, frame in answer.tables.items():
            frame.write.parquet(str(staged / f"{name}.parquet"))
        for name, plan in answer.plans.items():
            write_json(staged / name, plan)
        for name, text in answer.files.items():
            (staged / name).write_text(text, encoding="utf-8")
        render_report(
            staged / "report.html",
            title=f"kce whatif {answer.question}",
            question=f"{answer.question} — {source}",
            summary=answer.summary,
            sections=answer.sections,
        )
