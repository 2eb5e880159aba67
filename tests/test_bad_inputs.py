"""The bad-input corpus (``tests/data/bad/manifest.yaml``), each item run through ``kce``'s own
entry point in this process: exit 2, exactly one message naming the file and the line, row or
field with the documented text, no traceback, and ``--out`` untouched. Items at even positions
get an ``--out`` that does not exist (it must not be created); odd ones an existing one (it must be
left byte for byte as it was). The ``zookeeper-payload`` items write their tree under a fresh
chroot of a real ZooKeeper server and point ``--zk`` at it."""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
import yaml
from kazoo.client import KazooClient
from pydantic import BaseModel, ConfigDict, Field
from pyspark.sql import SparkSession

from spark_app.cli import EXIT_INVALID, main
from spark_app.limits import MAX_LINE_CHARS, MAX_MESSAGE_LINES
from spark_app.output_guard import KINDS, write_marker
from tests.zk_server import ZooKeeperServer

BAD = Path(__file__).resolve().parent / "data" / "bad"
Category = Literal[
    "syntax", "unknown-key", "wrong-type", "impossible-value", "kafka-rejects-plan",
    "describe-text", "csv-row", "run-output", "zookeeper-payload", "oversized", "command-line",
]  # fmt: skip
# A message starts a line with "kce: " (ours) or "kce COMMAND: error: " (argparse's).
MESSAGE = re.compile(r"^kce(: | [\w -]+: error: )")


class Made(BaseModel):
    """A file the test makes (and its directory): ``bytes`` long and sparse, so a size limit
    costs nothing to test."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str = Field(description="where, with placeholders")
    bytes: int = Field(gt=0, description="its size")


class Item(BaseModel):
    """One bad input: the command that reads it and what it must say."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(description="test id")
    category: Category = Field(description="what is wrong with the input")
    command: list[str] = Field(description="kce's arguments, with placeholders")
    where: str = Field(description="the file and line, row or field the message names")
    error: str = Field(description="the documented text of the message")
    make: Made | None = Field(None, description="a file to make first")
    znodes: dict[str, str] | None = Field(None, description="a ZooKeeper tree under {zk}")


def _items() -> list[Item]:
    loaded = yaml.safe_load((BAD / "manifest.yaml").read_text(encoding="utf-8"))
    return [Item.model_validate(item) for item in loaded["items"]]


ITEMS = _items()


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _params() -> Iterator[object]:
    for index, item in enumerate(ITEMS):
        marks = [pytest.mark.zk] if item.znodes is not None else []
        yield pytest.param(index, item, id=item.id, marks=marks)


@pytest.fixture(scope="module")
def zk_server() -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer().start()
    yield server
    server.stop()


def _chroot_with(server: ZooKeeperServer, znodes: dict[str, str]) -> str:
    """``znodes`` written under a fresh chroot; its connect string."""
    chroot = f"/bad-{uuid.uuid4().hex[:8]}"
    client = KazooClient(server.hosts)
    client.start()
    try:
        for path, data in znodes.items():
            client.create(chroot + path, data.encode(), makepath=True)
    finally:
        client.stop()
        client.close()
    return server.hosts + chroot


def test_the_corpus_covers_every_category_and_names_each_item_once() -> None:
    ids = Counter(item.id for item in ITEMS)
    assert [i for i, n in ids.items() if n > 1] == []
    assert set(Counter(item.category for item in ITEMS)) == set(Category.__args__)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("index", "item"), list(_params()))
def test_bad_input_ends_in_one_clear_message_and_writes_nothing(
    index: int,
    item: Item,
    spark: SparkSession,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    out = tmp_path / "out"
    before = None
    if index % 2:  # an earlier output of the same command (quickstart writes none)
        (out / "tables").mkdir(parents=True)
        (out / "summary.json").write_text('{"previous": "run"}\n', encoding="utf-8")
        (out / "tables" / "part-0.parquet").write_bytes(b"previous table")
        if item.command[0] in KINDS:
            write_marker(out, item.command[0])
        before = _tree(out)
    values = {"{bad}": str(BAD), "{out}": str(out), "{tmp}": str(tmp_path)}
    if item.znodes is not None:
        values["{zk}"] = _chroot_with(request.getfixturevalue("zk_server"), item.znodes)

    def filled(text: str) -> str:
        for key, value in values.items():
            text = text.replace(key, value)
        return text

    made = Path(filled(item.make.path)) if item.make is not None else None
    if made is not None and item.make is not None:
        made.parent.mkdir(parents=True, exist_ok=True)
        with made.open("wb") as f:
            f.truncate(item.make.bytes)
    try:
        code = main([filled(arg) for arg in item.command])
    except SystemExit as exit:  # argparse's own errors
        code = exit.code
    err = capsys.readouterr().err

    assert code == EXIT_INVALID, err
    assert "Traceback" not in err, err
    messages = [line for line in err.splitlines() if MESSAGE.match(line)]
    assert len(messages) == 1, err
    # Bounded however large the input (spark_app.messages): three lines of a few hundred characters.
    assert len(err.splitlines()) <= MAX_MESSAGE_LINES, err
    assert max(len(line) for line in err.splitlines()) <= MAX_LINE_CHARS + len("kce: "), err
    assert filled(item.where) in err, err
    assert filled(item.error) in err, err
    if before is None:
        assert not out.exists()
    else:
        assert _tree(out) == before
    expected = {"out"}
    if made is not None and item.make is not None:
        expected.add(made.relative_to(tmp_path).parts[0])
        assert made.stat().st_size == item.make.bytes  # nothing it named was replaced
    assert {p.name for p in tmp_path.iterdir()} <= expected  # no staging directory left
