"""All-or-nothing output directories: ``kce run --out DIR`` and ``kce whatif ... --out DIR``.

A command writes everything into a fresh directory beside ``DIR`` (same parent, so on one
filesystem) and only a command that finished swaps it in; a failed, interrupted or killed run never
leaves a half-written ``DIR``:

* on normal exit the staged directory replaces ``DIR``. Linux swaps the two in one
  ``renameat2(RENAME_EXCHANGE)``; elsewhere (or where the filesystem refuses the exchange) the old
  ``DIR`` is renamed away, the new one renamed in, and the old one deleted, so a kill between the two
  renames leaves no ``DIR`` rather than a mixed one;
* on any exception, ``KeyboardInterrupt`` included, the staged directory is deleted and an existing
  ``DIR`` is left exactly as it was;
* the staged directory holds ``.kce-output.json`` (``output_guard``): only a directory marked so
  by the same command (or empty, or absent) is ever replaced;
* a killed process leaves at most a stale ``.DIR.tmp-<pid>-<random>`` beside ``DIR``; the next
  successful run for the same ``DIR`` deletes those whose process is gone (the pid in the name keeps a
  concurrent run's staging directory safe).

This guards against the process dying, not against power loss: nothing is fsynced.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import json
import os
import secrets
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from spark_app.output_guard import Kind, claim, write_marker

_TMP = ".tmp-"
_OLD = ".old"
_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


@contextmanager
def staged_output(out: Path, kind: Kind) -> Iterator[Path]:
    """Yield a staging directory, marked as ``kind``'s output, that replaces ``out`` when the
    block finishes normally.

    ``ForeignOutputError`` when ``out`` is not an earlier output of ``kind``
    (``output_guard.claim``): it is left alone.
    """
    # The absolute path: "." has no name to stage beside.
    out = Path(os.path.abspath(out))
    claim(out, kind)
    out.parent.mkdir(parents=True, exist_ok=True)
    staged = _make_staging_dir(out)
    try:
        write_marker(staged, kind)
        yield staged
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    try:
        _replace(staged, out)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    _remove_stale(out)


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON: indent 2, keys in insertion order, a trailing newline.

    NaN and infinities are refused: they are not JSON, and Kafka's tools reject plans holding them.
    """
    text = json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False)
    Path(path).write_text(text + "\n", encoding="utf-8")


def _prefix(out: Path) -> str:
    return f".{out.name}{_TMP}"


def _make_staging_dir(out: Path) -> Path:
    # os.mkdir honours the umask (mkdtemp would leave the final DIR at 0700).
    while True:
        staged = out.parent / f"{_prefix(out)}{os.getpid()}-{secrets.token_hex(4)}"
        try:
            staged.mkdir()
        except FileExistsError:
            continue
        return staged


def _replace(staged: Path, out: Path) -> None:
    if not os.path.lexists(out):
        os.rename(staged, out)
        return
    if _exchange(staged, out):
        shutil.rmtree(staged, ignore_errors=True)  # now holds the previous DIR
        return
    old = staged.with_name(staged.name + _OLD)
    os.rename(out, old)
    try:
        os.rename(staged, out)
    except BaseException:
        os.rename(old, out)
        raise
    _remove(old)


def _exchange(a: Path, b: Path) -> bool:
    """Swap ``a`` and ``b`` atomically; False where the platform or filesystem cannot."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    done = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return done == 0


@functools.cache
def _renameat2() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return None  # a libc older than glibc 2.28, or not glibc
    renameat2.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    renameat2.restype = ctypes.c_int
    return renameat2


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _remove_stale(out: Path) -> None:
    prefix = _prefix(out)
    for entry in out.parent.iterdir():
        if not entry.name.startswith(prefix):
            continue
        pid = entry.name[len(prefix) :].partition("-")[0]
        if pid.isdigit() and _alive(int(pid)):
            continue
        _remove(entry)


def _alive(pid: int) -> bool:
    if pid == os.getpid() or os.name != "posix":
        return True  # off POSIX, signal 0 is CTRL_C_EVENT, not a probe
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True
