"""Everything ``kce scale`` writes under ``--out``, all at once or nothing (``staged_output``).

* ``scaling.csv``: one row per point and operation (``results.COLUMNS``; an empty cell is a
  figure that does not apply, such as Kafka's work for a what-if question);
* ``scaling.json``: ``name``, ``sweep`` (the file), ``environment`` (machine and Spark),
  ``columns``, ``rows`` (the CSV's rows, each with ``error_messages`` and, for a what-if
  question, ``answer``: its ``summary.json``), ``exponents`` (operation → series → figure →
  growth exponent over every size), ``step_exponents`` (operation → series → figure → the
  exponent between each two consecutive sizes: ``from``, ``to``, ``exponent``),
  ``budgets_exceeded``;
* ``charts/<operation>.png``, ``summary.md`` and ``report.html`` (``report``).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scaling.growth import exponents, steps
from scaling.report import charts, markdown, write_report
from scaling.results import COLUMNS
from spark_app.staged_output import staged_output, write_json


def _csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for r in rows:
            writer.writerow(["" if r[c] is None else r[c] for c in COLUMNS])


def write_outputs(
    out: Path,
    name: str,
    source: str,
    rows: Sequence[Mapping[str, Any]],
    details: Sequence[Mapping[str, Any]],
    exceeded: Sequence[str],
    environment: Mapping[str, Any],
) -> None:
    """Write the sweep's outputs to ``out``; ``details[i]`` adds to ``rows[i]`` in the JSON."""
    drawn = charts(rows)
    with staged_output(out, "scale") as staged:
        _csv(staged / "scaling.csv", rows)
        write_json(
            staged / "scaling.json",
            {
                "name": name,
                "sweep": source,
                "environment": dict(environment),
                "columns": list(COLUMNS),
                "rows": [{**r, **d} for r, d in zip(rows, details, strict=True)],
                "exponents": exponents(rows),
                "step_exponents": steps(rows),
                "budgets_exceeded": list(exceeded),
            },
        )
        (staged / "charts").mkdir()
        for operation, png in drawn.items():
            (staged / "charts" / f"{operation}.png").write_bytes(png)
        (staged / "summary.md").write_text(
            markdown(name, rows, exceeded, environment), encoding="utf-8"
        )
        summary = {
            "name": name,
            "points": len({tuple(r[c] for c in COLUMNS[:6]) for r in rows}),
            "operations": len(drawn),
            "rows": len(rows),
            "errors": sum(r["errors"] for r in rows),
            "budgets_exceeded": len(exceeded),
        }
        write_report(staged / "report.html", name, summary, rows, drawn)
