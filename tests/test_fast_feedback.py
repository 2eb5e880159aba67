"""Fast feedback: every item of the bad-input corpus (``tests/data/bad/manifest.yaml``) is refused
before Spark starts, in a fresh ``kce`` process of its own kind.

Starting the JVM is what made an input error cost 16-30 s; parsing and validating every input is
plain Python (pydantic, PyYAML, csv, pyarrow footers, kazoo). The check is behavioural rather than
timed: one subprocess runs ``spark_app.cli.main`` on every item in turn and records, after each,
whether a JVM gateway exists (``SparkContext._gateway``, set when ``pyspark`` launches Java). Once
one item started it, every later item would see it too: the first offender is the one to fix. The
``zookeeper-payload`` items need a live ZooKeeper and are left to ``test_bad_inputs``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.test_bad_inputs import BAD, ITEMS

ROOT = Path(__file__).resolve().parents[1]

_SCRIPT = textwrap.dedent(
    """
    import json
    import sys

    from spark_app.cli import main

    results = []
    for item_id, argv in json.loads(open(sys.argv[1], encoding="utf-8").read()):
        try:
            code = main(argv)
        except SystemExit as exit:  # argparse's own errors
            code = exit.code
        pyspark = sys.modules.get("pyspark")
        jvm = pyspark is not None and pyspark.SparkContext._gateway is not None
        results.append([item_id, code, jvm])
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(results, f)
    """
)


def test_every_bad_input_exits_2_before_a_jvm_starts(tmp_path: Path) -> None:
    runs = []
    for item in ITEMS:
        if item.znodes is not None:
            continue
        scratch = tmp_path / item.id
        scratch.mkdir()
        values = {"{bad}": str(BAD), "{out}": str(scratch / "out"), "{tmp}": str(scratch)}

        def filled(text: str, values: dict[str, str] = values) -> str:
            for key, value in values.items():
                text = text.replace(key, value)
            return text

        if item.make is not None:
            made = Path(filled(item.make.path))
            made.parent.mkdir(parents=True, exist_ok=True)
            with made.open("wb") as f:
                f.truncate(item.make.bytes)
        runs.append([item.id, [filled(arg) for arg in item.command]])
    listed, results = tmp_path / "items.json", tmp_path / "results.json"
    listed.write_text(json.dumps(runs), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(listed), str(results)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    outcome = json.loads(results.read_text(encoding="utf-8"))
    assert len(outcome) == len(runs) > 100
    assert [(i, code) for i, code, _ in outcome if code != 2] == []
    assert [i for i, _, jvm in outcome if jvm][:1] == []  # the first item that started a JVM
