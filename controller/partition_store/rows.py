"""Row layout and paths of the DataFrame-backed partition znodes; conversion to and from
``Znode``s."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from controller.zk.errors import MalformedZnodeError
from controller.zk.memory_tree import Znode
from controller.zk.paths import PartitionStateZNode
from statemachines.schemas import (
    CONTROLLER_EPOCH,
    ISR,
    LEADER,
    LEADER_EPOCH,
    PARTITION,
    TOPIC,
    ZK_VERSION,
)

Key = tuple[str, int]
KEY = [TOPIC, PARTITION]  # of the rows

STATE_COLUMNS = (LEADER, LEADER_EPOCH, ISR, CONTROLLER_EPOCH)
# Per partition: the partition node's stat (p_*), the state node's payload columns and stat.
INTERNAL_SCHEMA = StructType(
    [
        StructField(TOPIC, StringType(), False),
        StructField(PARTITION, IntegerType(), False),
        StructField("p_data", BinaryType(), True),
        StructField("p_version", IntegerType(), False),
        StructField("p_czxid", LongType(), False),
        StructField("p_mzxid", LongType(), False),
        StructField("p_ctime", LongType(), False),
        StructField("p_mtime", LongType(), False),
        StructField("p_cversion", IntegerType(), False),
        StructField("p_pzxid", LongType(), False),
        StructField("has_state", BooleanType(), False),
        StructField(LEADER, IntegerType(), True),
        StructField(LEADER_EPOCH, IntegerType(), True),
        StructField(ISR, ArrayType(IntegerType(), False), True),
        StructField(CONTROLLER_EPOCH, IntegerType(), True),
        StructField(ZK_VERSION, IntegerType(), True),
        StructField("s_czxid", LongType(), True),
        StructField("s_mzxid", LongType(), True),
        StructField("s_ctime", LongType(), True),
        StructField("s_mtime", LongType(), True),
        # The state payload when it is not the canonical encoding of the columns (else null).
        StructField("raw", BinaryType(), True),
    ]
)
ROW_COLUMNS = [f.name for f in INTERNAL_SCHEMA.fields]


_NODE = re.compile(r"^/brokers/topics/([^/]+)/partitions/(0|[1-9][0-9]{0,8})(/state)?$")


def parse(path: str) -> tuple[Key, bool] | None:
    """(topic, partition), is_state — for a partition or state path; None otherwise."""
    match = _NODE.match(path)
    if match is None:
        return None
    return (match.group(1), int(match.group(2))), match.group(3) is not None


@dataclass
class Entry:
    partition: Znode | None
    state: Znode | None


def decode_state(
    key: Key, data: bytes
) -> tuple[tuple[int, int, list[int], int] | None, bytes | None]:
    path = PartitionStateZNode.path(*key)
    try:
        state = PartitionStateZNode.decode(data, path)
    except MalformedZnodeError:
        return None, data
    fields = (state.leader, state.leader_epoch, list(state.isr), state.controller_epoch)
    canonical = PartitionStateZNode.encode_fields(*fields) == data
    return fields, None if canonical else data


def from_row(r: dict[str, Any]) -> Entry:
    children = {"state": None} if r["has_state"] else {}
    partition = Znode(
        bytes(r["p_data"] or b""), r["p_czxid"], r["p_mzxid"], r["p_ctime"], r["p_mtime"],
        r["p_version"], r["p_cversion"], 0, r["p_pzxid"], children,
    )  # fmt: skip
    state = None
    if r["has_state"]:
        data = r["raw"]
        if data is None:
            data = PartitionStateZNode.encode_fields(
                r[LEADER], r[LEADER_EPOCH], r[ISR], r[CONTROLLER_EPOCH]
            )
        state = Znode(
            bytes(data), r["s_czxid"], r["s_mzxid"], r["s_ctime"], r["s_mtime"],
            r[ZK_VERSION], 0, 0, r["s_czxid"],
        )  # fmt: skip
    return Entry(partition, state)


def to_row(key: Key, entry: Entry) -> tuple:
    p, s = entry.partition, entry.state
    assert p is not None
    fields, raw = decode_state(key, s.data) if s is not None else (None, None)
    leader, epoch, isr, cepoch = fields or (None, None, None, None)
    return (
        key[0], key[1], p.data or None, p.version, p.czxid, p.mzxid, p.ctime, p.mtime,
        p.cversion, p.pzxid, s is not None, leader, epoch, isr, cepoch,
        s.version if s else None, s.czxid if s else None, s.mzxid if s else None,
        s.ctime if s else None, s.mtime if s else None, raw,
    )  # fmt: skip
