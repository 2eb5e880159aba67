"""``staged_output``: ``--out DIR`` is replaced only by a run that finished; a failed, interrupted or
killed run leaves an existing ``DIR`` exactly as it was."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spark_app.output_guard import OUTPUT_MARKER, ForeignOutputError, write_marker
from spark_app.staged_output import staged_output, write_json

ROOT = Path(__file__).resolve().parents[1]


def _tree(root: Path) -> dict[str, bytes]:
    """The files under ``root`` but its marker (``test_output_guard`` checks that)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != OUTPUT_MARKER
    }


def _leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name != out.name)


@pytest.fixture
def old_out(tmp_path: Path) -> Path:
    out = tmp_path / "plan"
    (out / "tables").mkdir(parents=True)
    (out / "summary.json").write_text('{"question": "old"}\n', encoding="utf-8")
    (out / "tables" / "part-0.parquet").write_bytes(b"old table")
    write_marker(out, "whatif")
    return out


def test_success_creates_out_with_the_staged_files(tmp_path: Path) -> None:
    out = tmp_path / "nested" / "plan"
    with staged_output(out, "whatif") as staged:
        assert staged.parent == out.parent
        assert staged.name.startswith(".plan.tmp-")
        assert [p.name for p in staged.iterdir()] == [OUTPUT_MARKER]
        assert not out.exists()
        write_json(staged / "summary.json", {"question": "fail"})
    assert _tree(out) == {"summary.json": b'{\n  "question": "fail"\n}\n'}
    assert json.loads((out / OUTPUT_MARKER).read_text(encoding="utf-8"))["kind"] == "whatif"
    assert _leftovers(out) == []


def test_success_replaces_an_existing_out_completely(old_out: Path) -> None:
    with staged_output(old_out, "whatif") as staged:
        (staged / "report.html").write_text("<p>new</p>", encoding="utf-8")
        assert _tree(old_out)["summary.json"] == b'{"question": "old"}\n'
    assert _tree(old_out) == {"report.html": b"<p>new</p>"}
    assert _leftovers(old_out) == []


def test_the_staged_directory_gets_ordinary_permissions(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    umask = os.umask(0o022)
    try:
        with staged_output(out, "whatif"):
            pass
    finally:
        os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o755


def test_exception_removes_the_staging_dir_and_creates_no_out(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    with pytest.raises(ValueError, match="no such broker"), staged_output(out, "whatif") as staged:
        (staged / "summary.json").write_text("{}", encoding="utf-8")
        raise ValueError("no such broker")
    assert not out.exists()
    assert _leftovers(out) == []


@pytest.mark.parametrize("error", [RuntimeError("question failed"), KeyboardInterrupt()])
def test_failure_keeps_an_existing_out_as_it_was(old_out: Path, error: BaseException) -> None:
    before = _tree(old_out)
    with pytest.raises(type(error)), staged_output(old_out, "whatif") as staged:
        (staged / "summary.json").write_text('{"question": "new"}', encoding="utf-8")
        raise error
    assert _tree(old_out) == before
    assert _leftovers(old_out) == []


def test_a_directory_that_is_not_an_earlier_output_is_never_replaced(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("mine", encoding="utf-8")
    with (
        pytest.raises(ForeignOutputError, match=r"no \.kce-output\.json"),
        staged_output(home, "whatif"),
    ):
        pytest.fail("no staging directory for a directory of someone else's files")
    assert _tree(home) == {"notes.txt": b"mine"}
    assert _leftovers(home) == []
    empty = tmp_path / "empty"
    empty.mkdir()
    with staged_output(empty, "whatif") as staged:  # an empty directory holds nothing to lose
        write_json(staged / "summary.json", {"question": "fail"})
    assert list(_tree(empty)) == ["summary.json"]


def test_an_existing_file_at_out_is_never_replaced(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    out.write_text("not a directory", encoding="utf-8")
    with pytest.raises(ForeignOutputError, match="an existing file"), staged_output(out, "whatif"):
        pytest.fail("no staging directory for a file")
    assert out.read_text(encoding="utf-8") == "not a directory"
    assert _leftovers(out) == []


_KILLED_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from spark_app.staged_output import staged_output, write_json

    with staged_output(Path(sys.argv[1]), "whatif") as staged:
        write_json(staged / "summary.json", {"question": "new"})
        with open(staged / "big.parquet", "wb") as half:
            half.write(b"x" * 65536)
            half.flush()
            print("writing", flush=True)
            sys.stdin.read()  # blocks until the parent kills us
    """
)


def test_a_killed_writer_leaves_the_old_out_and_the_next_run_cleans_up(old_out: Path) -> None:
    before = _tree(old_out)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    writer = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(old_out)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None and writer.stdin is not None
    try:
        assert writer.stdout.readline() == "writing\n"
        writer.send_signal(signal.SIGKILL)
    finally:
        writer.stdin.close()
        writer.stdout.close()
        writer.wait()
    assert writer.returncode == -signal.SIGKILL

    assert _tree(old_out) == before
    stale = _leftovers(old_out)
    assert len(stale) == 1 and stale[0].startswith(f".plan.tmp-{writer.pid}-")
    assert (old_out.parent / stale[0] / "big.parquet").stat().st_size == 65536

    with staged_output(old_out, "whatif") as staged:
        write_json(staged / "summary.json", {"question": "again"})
    assert json.loads((old_out / "summary.json").read_text(encoding="utf-8")) == {
        "question": "again"
    }
    assert _leftovers(old_out) == []


def test_a_failed_run_leaves_stale_dirs_for_a_later_successful_run(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    stale = tmp_path / ".plan.tmp-999999999-deadbeef"  # no such process
    other = tmp_path / ".planB.tmp-999999999-deadbeef"  # another DIR's
    for d in (stale, other):
        d.mkdir()
    with pytest.raises(OSError), staged_output(out, "whatif"):
        raise OSError("disk full")
    assert stale.exists()
    with staged_output(out, "whatif"):
        pass
    assert not stale.exists()
    assert other.exists()


def test_write_json_keeps_insertion_order_and_ends_with_a_newline(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    write_json(
        path, {"version": 1, "partitions": [{"topic": "b", "partition": 0, "replicas": [3, 1]}]}
    )
    assert path.read_text(encoding="utf-8") == (
        "{\n"
        '  "version": 1,\n'
        '  "partitions": [\n'
        "    {\n"
        '      "topic": "b",\n'
        '      "partition": 0,\n'
        '      "replicas": [\n'
        "        3,\n"
        "        1\n"
        "      ]\n"
        "    }\n"
        "  ]\n"
        "}\n"
    )


def test_write_json_refuses_values_json_cannot_hold(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_json(tmp_path / "summary.json", {"ratio": float("nan")})
