"""Checkpoints of a ``kce run`` (``--checkpoint-every N``) and what ``--resume`` loads from them.

A checkpoint is taken at a quiet point: after the controllers drained, with nothing queued on any
controller and no ZooKeeper watch left to deliver. It holds the whole run as Python objects —
the brokers and their controller modules (contexts, committers, in-flight admin work, event
metrics), the in-memory ZooKeeper tree with its sessions and watches, the timing wheel with every
scheduled task (the scenario's remaining events, Kafka's periodic tasks), the replication logs,
the events processed so far — pickled whole (``cloudpickle``, which PySpark ships, for the
lambdas among the scheduled tasks and watches), so that whatever a component keeps is kept
without a serialiser of its own. What belongs to the process is not pickled but named, and
supplied again by the process that resumes:

* every Spark ``DataFrame`` reachable from the run (the partitions table and its generations,
  the ZooKeeper partition region, replication tables) is written as Parquet under ``frames/``
  with its schema, and read back with that schema (nullability included);
* the ``externals`` given by name: the Spark session, the terminal's progress line, the writer of
  the state-change log (whose files so far are carried in the checkpoint, ``outputs/``);
* locks are made anew (unlocked: nothing holds one at a quiet point); the in-memory ZooKeeper's
  dispatcher restarts its thread (``memory_watches.Dispatcher``). Any other thread refuses the
  checkpoint.

Layout under the checkpoint directory (``OUT/checkpoint`` unless ``--checkpoint-dir``):
``manifest.json`` (``CheckpointManifest``) names the complete state directory beside it,
``events-<n>/`` (n: scenario events played) with ``state.pickle``, ``frames/<i>/`` and
``outputs/``. A new state directory is written in full first, then the manifest is replaced
(write, fsync, rename: atomic), then the older directories are removed; a process killed at any
point leaves a manifest naming a complete checkpoint.

The pickle is code: resume only checkpoints this installation wrote. The manifest records the
``kce`` and Python versions and a digest of kce's sources, and a resume with others is refused,
as is one whose scenario (with ``--set`` and ``--driver-rows`` applied; ``spark`` settings aside)
differs from the checkpoint's.
"""

from __future__ import annotations

import functools
import hashlib
import io
import itertools
import json
import os
import pickle
import shutil
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pyspark import cloudpickle
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

import controller
import spark_app
import statemachines
from controller.commit.checkpoint import local_checkpoint
from spark_app import __version__
from spark_app.output_guard import OUTPUT_MARKER, write_marker
from spark_app.scenario import Scenario

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
STATE = "state.pickle"
FRAMES = "frames"
OUTPUTS = "outputs"

_LOCKS = {type(threading.Lock()): threading.Lock, type(threading.RLock()): threading.RLock}


class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed: missing, unreadable, or of another run or version."""


class SavedFrame(BaseModel):
    """A Spark DataFrame of the run, saved as Parquet under ``frames/<id>``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: int = Field(ge=0, description="Directory name under frames/ and the pickle's reference.")
    spark_schema: str = Field(description="The frame's Spark schema (JSON), nullability included.")


class CheckpointManifest(BaseModel):
    """``manifest.json``: which state directory is the checkpoint, and what run it belongs to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format_version: int = Field(description="Layout of the checkpoint; this kce reads 1.")
    kce_version: str = Field(description="The kce that wrote it (the pickle is tied to its code).")
    code: str = Field(
        pattern="^[0-9a-f]{64}$", description="sha256 of kce's Python sources that wrote it."
    )
    python: str = Field(description="Python major.minor that wrote the pickle.")
    scenario: str = Field(description="The scenario's name.")
    scenario_fingerprint: str = Field(
        pattern="^[0-9a-f]{64}$",
        description="sha256 of the scenario as run (--set and --driver-rows applied, spark aside).",
    )
    every: int = Field(ge=1, description="--checkpoint-every: scenario events between checkpoints.")
    scenario_events: int = Field(ge=0, description="Scenario events played before the checkpoint.")
    controller_events: int = Field(ge=0, description="Controller events processed by then.")
    virtual_time_ms: int = Field(ge=0, description="Virtual time of the checkpoint.")
    state: str = Field(
        pattern=r"^events-\d+$", description="The state directory beside the manifest."
    )
    frames: tuple[SavedFrame, ...] = Field(description="The DataFrames saved with the state.")
    outputs: tuple[str, ...] = Field(
        description="Outputs written so far, carried under outputs/ (names in the output dir)."
    )


def fingerprint(scenario: Scenario) -> str:
    """sha256 of what decides a run's result: the scenario as validated, ``spark`` left out."""
    text = scenario.model_dump_json(exclude={"spark"})
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


@functools.cache
def _code() -> str:
    """sha256 of the sources whose classes and functions a checkpoint's pickle names: one
    version string can cover several revisions of them."""
    digest = hashlib.sha256()
    for package in (controller, statemachines, spark_app):
        root = Path(package.__file__).parent  # type: ignore[arg-type]
        for source in sorted(root.rglob("*.py")):
            digest.update(source.relative_to(root.parent).as_posix().encode("utf-8"))
            digest.update(source.read_bytes())
    return digest.hexdigest()


class _Saver(cloudpickle.Pickler):
    """Pickles a run: externals by name, DataFrames as Parquet files, locks made anew."""

    def __init__(
        self, file: io.BufferedIOBase, frames_dir: Path, externals: Mapping[str, object]
    ) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._frames_dir = frames_dir
        self._externals = {id(obj): name for name, obj in externals.items()}
        self.frames: dict[int, SavedFrame] = {}  # by id() of the frame object

    def persistent_id(self, obj: Any) -> tuple[str, object] | None:
        name = self._externals.get(id(obj))
        if name is not None:
            return ("external", name)
        if isinstance(obj, DataFrame):
            saved = self.frames.get(id(obj))
            if saved is None:
                saved = SavedFrame(id=len(self.frames), spark_schema=obj.schema.json())
                obj.write.parquet(str(self._frames_dir / str(saved.id)))
                self.frames[id(obj)] = saved
            return ("frame", saved.id)
        if isinstance(obj, SparkSession):
            raise pickle.PicklingError("a Spark session that is not the run's")
        return None

    def reducer_override(self, obj: Any) -> Any:
        factory = _LOCKS.get(type(obj))
        if factory is not None:
            return (factory, ())
        if type(obj) is itertools.count:  # its own pickling is gone from Python 3.14
            return (itertools.count, (int(repr(obj)[len("count(") : -1]),))
        if isinstance(obj, threading.Thread):
            raise pickle.PicklingError(f"thread {obj.name!r} cannot be carried over")
        return super().reducer_override(obj)


class _Loader(pickle.Unpickler):
    """Reads what ``_Saver`` wrote: externals from this process, frames from their Parquet."""

    def __init__(
        self,
        file: io.BufferedIOBase,
        spark: SparkSession,
        frames_dir: Path,
        frames: tuple[SavedFrame, ...],
        externals: Mapping[str, object],
    ) -> None:
        super().__init__(file)
        self._spark = spark
        self._frames_dir = frames_dir
        self._schemas = {f.id: f.spark_schema for f in frames}
        self._externals = externals
        self._read: dict[int, DataFrame] = {}

    def persistent_load(self, pid: Any) -> object:
        kind, key = pid
        if kind == "external":
            if key not in self._externals:
                raise CheckpointError(f"the checkpoint needs {key!r}, which this run lacks")
            return self._externals[key]
        if key not in self._read:
            self._read[key] = _read_frame(
                self._spark, self._frames_dir / str(key), self._schemas[key]
            )
        return self._read[key]


def _read_frame(spark: SparkSession, path: Path, spark_schema: str) -> DataFrame:
    """The Parquet at ``path`` with its saved schema (Parquet reads every column as nullable),
    checkpointed in Spark: the run's next checkpoint replaces these files."""
    jspark = spark._jsparkSession  # type: ignore[attr-defined]
    rows = spark.read.parquet(str(path))._jdf.javaRDD()  # type: ignore[attr-defined]
    frame = jspark.createDataFrame(rows, jspark.parseDataType(spark_schema))
    return local_checkpoint(ClassicDataFrame(frame, spark))


def _carry(source: Path, target: Path) -> None:
    """Copy an output file or directory; Parquet files, never rewritten, are hard-linked."""
    if source.is_dir():
        shutil.copytree(source, target, copy_function=_link_or_copy)
    elif source.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)  # a text log is appended to: a copy of its own


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system, or one without hard links
        shutil.copy2(source, target)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


class RunCheckpoints:
    """Saves a run into ``directory`` every ``every`` scenario events (see the module doc)."""

    def __init__(self, directory: Path, every: int, scenario: Scenario, played: int = 0) -> None:
        if every < 1:
            raise ValueError(f"checkpoints every {every} events")
        self.directory = directory
        self.every = every
        self.scenario = scenario.name
        self.fingerprint = fingerprint(scenario)
        self.saved_at = played  # scenario events played at the last checkpoint

    def due(self, played: int) -> bool:
        return played - self.saved_at >= self.every

    def save(
        self,
        run: object,
        externals: Mapping[str, object],
        outputs: Mapping[str, Path],
        progress: tuple[int, int, int],
    ) -> CheckpointManifest:
        """Write ``run`` and the ``outputs`` so far (name -> path) as the latest checkpoint;
        ``progress`` is (scenario events played, controller events, virtual time)."""
        played, controller_events, now_ms = progress
        name = f"events-{played:06d}"
        state_dir = self.directory / name
        _remove(state_dir)  # a half-written one, from a process killed while writing it
        (state_dir / FRAMES).mkdir(parents=True)
        write_marker(self.directory, "checkpoint")  # what a later --checkpoint-dir may replace
        with (state_dir / STATE).open("wb") as f:
            saver = _Saver(f, state_dir / FRAMES, externals)
            saver.dump(run)
        for output, path in outputs.items():
            _carry(path, state_dir / OUTPUTS / output)
        manifest = CheckpointManifest(
            format_version=FORMAT_VERSION,
            kce_version=__version__,
            code=_code(),
            python=_python(),
            scenario=self.scenario,
            scenario_fingerprint=self.fingerprint,
            every=self.every,
            scenario_events=played,
            controller_events=controller_events,
            virtual_time_ms=now_ms,
            state=name,
            frames=tuple(saver.frames.values()),
            outputs=tuple(o for o, p in outputs.items() if p.exists()),
        )
        staged = self.directory / f"{MANIFEST}.new"
        with staged.open("w", encoding="utf-8") as f:
            f.write(manifest.model_dump_json(indent=2))
            f.flush()
            os.fsync(f.fileno())
        os.replace(staged, self.directory / MANIFEST)
        for old in self.directory.glob("events-*"):
            if old.name != name:
                _remove(old)
        self.saved_at = played
        return manifest

    def remove(self) -> None:
        """Remove the checkpoint: of an earlier run, or of this one once it completed. Only
        what checkpoints write goes (the directory may be one the user named)."""
        for path in (
            self.directory / MANIFEST,
            self.directory / f"{MANIFEST}.new",
            self.directory / OUTPUT_MARKER,
        ):
            path.unlink(missing_ok=True)
        for state_dir in self.directory.glob("events-*"):
            _remove(state_dir)
        if self.directory.is_dir() and not any(self.directory.iterdir()):
            self.directory.rmdir()


def read_manifest(directory: Path, scenario: Scenario) -> CheckpointManifest:
    """The latest checkpoint in ``directory``, if ``scenario`` may resume it; else
    ``CheckpointError`` saying why and what to do."""
    path = directory / MANIFEST
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CheckpointError(
            f"no checkpoint in {directory}/ (write one with --checkpoint-every N; a run that "
            "completes removes its checkpoint)"
        ) from None
    except OSError as err:
        raise CheckpointError(f"{path}: cannot read it: {err.strerror or err}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{path}: line {err.lineno}: not JSON: {err.msg}") from None
    if isinstance(data, dict) and data.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: format_version {data.get('format_version')!r}: this kce reads checkpoint "
            f"format {FORMAT_VERSION}; finish that run with the kce that wrote it"
        )
    try:
        manifest = CheckpointManifest.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in e['loc']) or '(top level)'}: {e['msg']}"
            for e in err.errors()
        )
        raise CheckpointError(f"{path}: {problems}") from None
    written_by = (manifest.kce_version, manifest.python, manifest.code)
    if written_by != (__version__, _python(), _code()):
        changed = " (its code changed since)" if written_by[:2] == (__version__, _python()) else ""
        raise CheckpointError(
            f"{path}: written by kce {written_by[0]} on Python {written_by[1]}; this is kce "
            f"{__version__}{changed} on Python {_python()}: resume with the installation that "
            "wrote it"
        )
    if manifest.scenario_fingerprint != fingerprint(scenario):
        raise CheckpointError(
            f"{path}: the checkpoint is of scenario {manifest.scenario!r} (sha256 "
            f"{manifest.scenario_fingerprint[:12]}…), not of this one ({scenario.name!r}, sha256 "
            f"{fingerprint(scenario)[:12]}…); resume with the scenario file and the --set and "
            "--driver-rows options the run was started with"
        )
    if not (directory / manifest.state / STATE).is_file():
        raise CheckpointError(f"{path}: its state {directory / manifest.state / STATE} is missing")
    return manifest


def load(
    directory: Path,
    manifest: CheckpointManifest,
    spark: SparkSession,
    externals: Mapping[str, object],
    outputs: Mapping[str, Path],
) -> Any:
    """The run saved in ``directory`` (as ``read_manifest`` checked it), with its outputs so far
    put back in place of whatever ``outputs`` (name -> path) hold now."""
    state_dir = directory / manifest.state
    for output, path in outputs.items():
        _remove(path)
        if output in manifest.outputs:
            _carry(state_dir / OUTPUTS / output, path)
    with (state_dir / STATE).open("rb") as f:
        loader = _Loader(f, spark, state_dir / FRAMES, manifest.frames, externals)
        try:
            return loader.load()
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError) as err:
            raise CheckpointError(
                f"{state_dir / STATE}: cannot be loaded ({type(err).__name__}: {err})"
            ) from None
