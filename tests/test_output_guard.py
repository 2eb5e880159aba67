"""``output_guard.claim``: ``--out`` and ``--checkpoint-dir`` replace only an earlier output of the
same command (issue "Input safety (nothing lost)"). Plain Python: no Spark, no command run; the
commands' own refusals are in the bad-input corpus (``tests/data/bad/manifest.yaml``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from spark_app.output_guard import (
    OUTPUT_MARKER,
    ForeignOutputError,
    claim,
    output_kind,
    write_marker,
)
from spark_app.preflight import InvalidArgumentError, announce, check_master, check_zk_connect


def test_nothing_to_lose_is_claimed_silently(tmp_path: Path) -> None:
    assert claim(tmp_path / "new" / "out", "run") is None
    (tmp_path / "empty").mkdir()
    assert claim(tmp_path / "empty", "whatif") is None


def test_an_earlier_output_of_the_same_command_is_replaced_and_announced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    write_marker(out, "scale")
    (out / "scaling.csv").write_text("x\n", encoding="utf-8")
    line = claim(out, "scale")
    assert (
        line
        == f"--out {out}: replacing the earlier kce scale output there when this one is written"
    )
    announce(None, line)
    assert capsys.readouterr().err.splitlines() == [f"kce: {line}"]
    marker = json.loads((out / OUTPUT_MARKER).read_text(encoding="utf-8"))
    assert marker["kind"] == "scale" and marker["command"] == "kce scale"


@pytest.mark.parametrize("kind", ["run", "whatif", "scale"])
def test_an_existing_file_is_never_replaced(tmp_path: Path, kind: str) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine", encoding="utf-8")
    with pytest.raises(
        ForeignOutputError,
        match=rf"^--out {notes}: an existing file, not an earlier output of kce {kind}",
    ):
        claim(notes, kind)  # type: ignore[arg-type]
    with pytest.raises(ForeignOutputError, match=f"{notes} is a file, not a directory"):
        claim(notes / "out", kind)  # type: ignore[arg-type]
    assert notes.read_text(encoding="utf-8") == "mine"


def test_a_foreign_directory_or_a_symbolic_link_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("mine", encoding="utf-8")
    (home / "summary.json").write_text("{}", encoding="utf-8")  # a summary alone proves nothing
    with pytest.raises(ForeignOutputError, match=r"holds files but no \.kce-output\.json"):
        claim(home, "whatif")
    link = tmp_path / "link"
    marked = tmp_path / "marked"
    marked.mkdir()
    write_marker(marked, "run")
    os.symlink(marked, link)
    with pytest.raises(ForeignOutputError, match="a symbolic link"):
        claim(link, "run")


def test_another_commands_output_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "whatif-fail"
    out.mkdir()
    write_marker(out, "whatif")
    with pytest.raises(
        ForeignOutputError,
        match="an earlier output of kce whatif, not of kce run; it is not replaced",
    ):
        claim(out, "run")


def test_outputs_written_before_the_marker_are_recognised_by_their_files(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "partitions.parquet").mkdir(parents=True)
    for name in ("summary.json", "events.jsonl", "metrics.jsonl", "final_state.json"):
        (run / name).write_text("{}", encoding="utf-8")
    scale = tmp_path / "scale"
    (scale / "charts").mkdir(parents=True)
    (scale / "scaling.json").write_text("{}", encoding="utf-8")
    whatif = tmp_path / "whatif"
    whatif.mkdir()
    for name in ("summary.json", "report.html", "reassignment.json"):
        (whatif / name).write_text("{}", encoding="utf-8")
    killed = tmp_path / "killed"  # a first run killed after a checkpoint
    (killed / "checkpoint" / "events-000003").mkdir(parents=True)
    (killed / "checkpoint" / "manifest.json").write_text("{}", encoding="utf-8")
    assert [output_kind(d) for d in (run, scale, whatif, killed)] == [
        "run",
        "scale",
        "whatif",
        "run",
    ]
    (run / "notes.txt").write_text("mine", encoding="utf-8")  # not a file kce run writes
    with pytest.raises(ForeignOutputError):
        claim(run, "run")


def test_checkpoint_dir_is_claimed_like_out(tmp_path: Path) -> None:
    checkpoints = tmp_path / "ckpt"
    (checkpoints / "events-000002").mkdir(parents=True)
    (checkpoints / "manifest.json").write_text("{}", encoding="utf-8")
    assert claim(checkpoints, "checkpoint", "--checkpoint-dir") == (
        f"--checkpoint-dir {checkpoints}: the earlier checkpoint there is replaced"
    )
    run = tmp_path / "run"
    run.mkdir()
    write_marker(run, "run")
    with pytest.raises(
        ForeignOutputError, match=rf"^--checkpoint-dir {run}: an earlier output of kce run"
    ):
        claim(run, "checkpoint", "--checkpoint-dir")


@pytest.mark.parametrize(
    ("connect", "problem"),
    [
        ("localhost:2181", None),
        ("zk1:2181,zk2:2181,[::1]:2181/kafka/prod", None),
        ("zk1", None),  # ZooKeeper's client port, 2181, by default
        ("localhost:99999", "port 99999 of 'localhost:99999' is out of range"),
        ("localhost:0", "is out of range"),
        ("zk1:2181:2182", "is not host:port"),
        ("zk1 :2181", "is not host:port"),
        ("/kafka", "no host"),
        ("zk1:2181/kafka/", "is not a ZooKeeper path"),
        ("zk1:2181/a/../b", "is not a ZooKeeper path"),
    ],
)
def test_zk_connect_strings_as_zookeeper_parses_them(connect: str, problem: str | None) -> None:
    # ZooKeeper's ConnectStringParser and PathUtils.validatePath; Kafka's zookeeper.connect.
    if problem is None:
        check_zk_connect(connect)
    else:
        with pytest.raises(InvalidArgumentError, match=problem):
            check_zk_connect(connect)


@pytest.mark.parametrize(
    ("master", "valid"),
    [
        ("local", True), ("local[*]", True), ("local[4]", True), ("local[2,3]", True),
        ("local-cluster[2,1,1024]", True), ("spark://host:7077", True),
        ("spark://a:7077,b:7077", True), ("yarn", True), ("k8s://https://api:6443", True),
        ("local[0]", False), ("garbage", False), ("spark://host", False), ("", False),
    ],
)  # fmt: skip
def test_spark_master_urls_as_spark_accepts_them(master: str, valid: bool) -> None:
    # SparkContext.createTaskScheduler's master URL forms.
    if valid:
        check_master(master)
    else:
        with pytest.raises(InvalidArgumentError, match="not a Spark master URL"):
            check_master(master)
