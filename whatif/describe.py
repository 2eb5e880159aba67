"""``--describe FILE``: the text ``kafka-topics.sh --describe`` prints (Kafka 2.x and later).

A topic header line, then one line per partition::

    Topic: orders	TopicId: 6MZ3...	PartitionCount: 3	ReplicationFactor: 3	Configs: min.insync.replicas=2
        Topic: orders	Partition: 0	Leader: 1	Replicas: 1,2,3	Isr: 1,2	Adding Replicas: 4	Removing Replicas: 1

Older releases print headers without a space after the colons (``Topic:orders``) and an offline
leader as ``-1`` instead of ``none``. Fields are found by their Kafka names, so tabs and runs of
spaces between them are both fine. Filtered output (``--under-replicated-partitions``) has no
header lines; its partitions are taken as they are, with the broker defaults as configs.

Kafka 2.8+ ends the header and partition lines of a topic marked for deletion (``--zookeeper``:
``/admin/delete_topics/<t>``) with ``MarkedForDeletion: true``, after ``Configs:``; the topic is
then queued for deletion (``WhatIfCluster.deleting_topics``).

The describe output has no epochs or znode versions: they are 0. A partition with a leader is
``OnlinePartition``, one without (``none``) ``OfflinePartition``. Live brokers are the ones named
in any replica list, less those the snapshot proves down (``cluster.proven_down``: the ISR of a
partition Kafka left without a leader). The file is read in one pass into column lists and
handed to Spark as one Arrow table.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_app.limits import MAX_PARTITIONS
from statemachines import schemas as s
from whatif.cluster import (
    OFFLINE,
    ONLINE,
    BrokerDefaults,
    TopicConfigs,
    WhatIfInputError,
    empty_columns,
    replica_problem,
    topic_configs,
)
from whatif.lines import bounded_lines

MARKED = "MarkedForDeletion"
_INFORMATIONAL = ("Offline", MARKED, "Elr", "LastKnownElr", "TopicId")
_KEYS = (
    "Topic", "PartitionCount", "ReplicationFactor", "Configs", "Partition", "Leader", "Replicas",
    "Isr", "Adding Replicas", "Removing Replicas", *_INFORMATIONAL,
)  # fmt: skip
# Longest names first, so "Adding Replicas" wins over "Replicas" and "TopicId" over "Topic".
_FIELD = re.compile(
    r"(?<!\S)(" + "|".join(re.escape(k) for k in sorted(_KEYS, key=len, reverse=True)) + r")\s*:"
)
_ID_LIST = re.compile(r"\d+(?:\s*,\s*\d+)*")
_PARTITION_LINE = ("Topic", "Partition", "Leader", "Replicas", "Isr")
# The common partition line, matched at once; anything else goes field by field.
_CANONICAL = re.compile(
    r"\s*Topic:\s*([\w.-]+)\s+Partition:\s*(\d+)\s+Leader:\s*(\d+|none|-1)"
    r"\s+Replicas:\s*(\d+(?:,\d+)*)\s+Isr:[ \t]*(\d+(?:,\d+)*)?\s*"
)
_FIX_FORMAT = "pass the unedited output of kafka-topics.sh --describe"
# TopicDescription.printDescription prints the mark after Configs:, whose value runs to it.
_MARKED_AT_END = re.compile(r"\s+" + MARKED + r"\s*:\s*(\S*)\s*$")


@dataclass
class DescribeSnapshot:
    """The parsed file: public partitions columns, brokers named, and per-topic ``Configs:``."""

    columns: dict[str, list[Any]] = field(default_factory=empty_columns)
    brokers: set[int] = field(default_factory=set)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    config_lines: dict[str, int] = field(default_factory=dict)
    deleting: set[str] = field(default_factory=set)


def _fields(line: str, where: str) -> dict[str, str]:
    """Field name -> value text of one line; ``Configs`` takes the rest of the line."""
    matches = list(_FIELD.finditer(line))
    if not matches or line[: matches[0].start()].strip():
        raise WhatIfInputError(
            f"{where}: not a kafka-topics.sh --describe line: {line.strip()[:80]!r} — "
            f"remove it or {_FIX_FORMAT}"
        )
    found: dict[str, str] = {}
    for i, m in enumerate(matches):
        key = m.group(1)
        if key in found:
            raise WhatIfInputError(f"{where}: {key}: appears twice on the line — {_FIX_FORMAT}")
        if key == "Configs":
            rest = line[m.end() :]
            marked = _MARKED_AT_END.search(rest)
            if marked is not None:
                found[MARKED] = marked.group(1)
                rest = rest[: marked.start()]
            found[key] = rest.strip()
            break
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        found[key] = line[m.end() : end].strip()
    return found


def _ids(value: str, name: str, where: str) -> list[int]:
    if not value:
        return []
    if not _ID_LIST.fullmatch(value):
        raise WhatIfInputError(
            f"{where}: {name}: {value!r} is not a comma-separated list of broker ids — "
            "broker ids are integers >= 0, e.g. 1,2,3"
        )
    return [int(x) for x in value.split(",")]  # ids above Kafka's Int: replica_problem


def _marked(fields: dict[str, str], where: str) -> bool:
    """``MarkedForDeletion:``'s value: Kafka prints ``true`` (and nothing when not marked)."""
    value = fields.get(MARKED, "false")
    if value not in ("true", "false"):
        raise WhatIfInputError(f"{where}: {MARKED}: {value!r} is not true or false — {_FIX_FORMAT}")
    return value == "true"


def _int(value: str, name: str, where: str, most: int = s.INT_MAX) -> int:
    """``value`` as an integer from 0 to ``most`` (Kafka's Int, or ``MAX_PARTITIONS`` for a
    count)."""
    if not value.isdigit():
        raise WhatIfInputError(f"{where}: {name}: {value!r} is not an integer >= 0 — {_FIX_FORMAT}")
    if int(value) > most:
        raise WhatIfInputError(f"{where}: {name}: {value} is above {most:,} — {_FIX_FORMAT}")
    return int(value)


def _configs(value: str) -> dict[str, str]:
    """``k=v,k=v``; Kafka joins configs with commas unescaped, so a piece without ``=``
    continues the previous value (``cleanup.policy=compact,delete``)."""
    configs: dict[str, str] = {}
    last: str | None = None
    for piece in value.split(",") if value else ():
        key, eq, text = piece.partition("=")
        if eq and key.strip():
            last = key.strip()
            configs[last] = text.strip()
        elif last is not None:
            configs[last] += "," + piece.strip()
    return configs


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with path.open(encoding="utf-8") as f:
            yield from enumerate(bounded_lines(f, str(path)), start=1)
    except FileNotFoundError:
        raise WhatIfInputError(f"{path}: no such file — check the --describe path") from None
    except UnicodeDecodeError as exc:
        raise WhatIfInputError(
            f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}) — {_FIX_FORMAT}"
        ) from None
    except OSError as exc:
        raise WhatIfInputError(
            f"{path}: cannot read it ({exc.strerror}) — check the path"
        ) from None


def _header(
    fields: dict[str, str],
    where: str,
    number: int,
    snap: DescribeSnapshot,
    counts: dict[str, tuple[int, int]],
) -> None:
    if "PartitionCount" not in fields or "Topic" not in fields:
        missing = "PartitionCount" if "Topic" in fields else "Topic"
        raise WhatIfInputError(
            f"{where}: a topic line needs Topic: and PartitionCount:, {missing}: is "
            f"missing — {_FIX_FORMAT}"
        )
    topic = fields["Topic"]
    if topic in counts:
        raise WhatIfInputError(
            f"{where}: topic {topic} is described twice (first on line "
            f"{counts[topic][1]}) — keep one describe output per topic"
        )
    count = _int(fields["PartitionCount"], "PartitionCount", where, MAX_PARTITIONS)
    counts[topic] = (count, number)
    if "ReplicationFactor" in fields:
        _int(fields["ReplicationFactor"], "ReplicationFactor", where)
    snap.configs[topic] = _configs(fields.get("Configs", ""))
    snap.config_lines[topic] = number
    if _marked(fields, where):
        snap.deleting.add(topic)


def parse_describe(path: str | Path) -> DescribeSnapshot:
    """Read the file in one pass; the first problem raises ``WhatIfInputError`` (FILE:LINE)."""
    path = Path(path)
    snap = DescribeSnapshot()
    cols = snap.columns
    topic_col, partition_col, replicas_col = cols[s.TOPIC], cols[s.PARTITION], cols[s.REPLICAS]
    adding_col, removing_col, isr_col = (
        cols[s.ADDING_REPLICAS],
        cols[s.REMOVING_REPLICAS],
        cols[s.ISR],
    )
    leader_col, state_col = cols[s.LEADER], cols[s.STATE]
    seen: dict[tuple[str, int], int] = {}
    counts: dict[str, tuple[int, int]] = {}  # topic -> (PartitionCount, header line)
    name = str(path)
    for number, line in _lines(path):
        if not line.strip():
            continue
        where = f"{name}:{number}"
        canonical = _CANONICAL.fullmatch(line)
        if canonical is not None:
            topic, partition_text, leader_text, replicas_text, isr_text = canonical.groups("")
            partition = _int(partition_text, "Partition", where)
            # Ids above Kafka's Int are refused by replica_problem below.
            replicas = [int(x) for x in replicas_text.split(",")]
            isr = [int(x) for x in isr_text.split(",")] if isr_text else []
            adding, removing = [], []
        else:
            fields = _fields(line, where)
            if "Partition" not in fields:
                _header(fields, where, number, snap, counts)
                continue
            absent = [k for k in _PARTITION_LINE if k not in fields]
            if absent:
                raise WhatIfInputError(
                    f"{where}: a partition line needs "
                    f"{', '.join(k + ':' for k in _PARTITION_LINE)}; "
                    f"{', '.join(k + ':' for k in absent)} missing — {_FIX_FORMAT}"
                )
            topic, leader_text = fields["Topic"], fields["Leader"]
            if not topic:
                raise WhatIfInputError(f"{where}: Topic: is empty — {_FIX_FORMAT}")
            partition = _int(fields["Partition"], "Partition", where)
            replicas = _ids(fields["Replicas"], "Replicas", where)
            isr = _ids(fields["Isr"], "Isr", where)
            adding = _ids(fields.get("Adding Replicas", ""), "Adding Replicas", where)
            removing = _ids(fields.get("Removing Replicas", ""), "Removing Replicas", where)
            if _marked(fields, where):
                snap.deleting.add(topic)
        key = (topic, partition)
        if key in seen:
            raise WhatIfInputError(
                f"{where}: partition {topic}-{partition} is listed twice (first on line "
                f"{seen[key]}) — keep one line per partition"
            )
        seen[key] = number
        if leader_text in ("none", "-1"):
            leader = s.NO_LEADER
        elif leader_text.isdigit():
            leader = _int(leader_text, "Leader", where)
        else:
            raise WhatIfInputError(
                f"{where}: Leader: {leader_text!r} is not a broker id — write an id, or none "
                "for an offline partition"
            )
        problem = replica_problem(replicas, isr, leader, adding, removing)
        if problem is not None:
            raise WhatIfInputError(f"{where}: partition {topic}-{partition}: {problem}")
        snap.brokers.update(replicas)
        topic_col.append(topic)
        partition_col.append(partition)
        replicas_col.append(replicas)
        adding_col.append(adding)
        removing_col.append(removing)
        isr_col.append(isr)
        leader_col.append(leader)
        state_col.append(ONLINE if leader != s.NO_LEADER else OFFLINE)
    if not seen:
        raise WhatIfInputError(f"{path}: no partition lines — {_FIX_FORMAT}")
    _check_counts(path, seen, counts)
    zeros = [0] * len(topic_col)
    cols[s.LEADER_EPOCH] = zeros
    cols[s.ZK_VERSION] = zeros
    cols[s.CONTROLLER_EPOCH] = zeros
    return snap


def _check_counts(
    path: Path, seen: dict[tuple[str, int], int], counts: dict[str, tuple[int, int]]
) -> None:
    listed: dict[str, list[int]] = {}
    for (topic, partition), number in seen.items():
        if topic in counts and partition >= counts[topic][0]:
            count, header = counts[topic]
            raise WhatIfInputError(
                f"{path}:{number}: partition {topic}-{partition} is outside PartitionCount: "
                f"{count} of line {header} — the header and partition lines disagree; "
                f"{_FIX_FORMAT}"
            )
        listed.setdefault(topic, []).append(partition)
    for topic, (count, header) in counts.items():
        have = set(listed.get(topic, ()))
        if len(have) == count:  # every listed partition is below count: none is missing
            continue
        missing = list(itertools.islice((p for p in range(count) if p not in have), 6))
        if missing:
            raise WhatIfInputError(
                f"{path}:{header}: topic {topic} has PartitionCount: {count} but no line for "
                f"partition {', '.join(map(str, missing[:5]))}"
                f"{' ...' if len(missing) > 5 else ''} — the header and partition lines "
                f"disagree; {_FIX_FORMAT}"
            )


def describe_configs(
    path: str | Path, snap: DescribeSnapshot, defaults: BrokerDefaults
) -> dict[str, TopicConfigs]:
    """Every topic's configs: its ``Configs:`` over ``defaults`` (a bad value names its line)."""
    topics = dict.fromkeys(snap.columns[s.TOPIC])
    out: dict[str, TopicConfigs] = {}
    for topic in topics:
        line = snap.config_lines.get(topic)
        where = f"{path}:{line}" if line is not None else str(path)
        out[topic] = topic_configs(defaults, snap.configs.get(topic, {}), where)
    return out
