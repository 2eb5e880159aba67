"""Kafka's replica assignment (``AdminUtils.assignReplicasToBrokers``), in plain Python and in Spark.

The plain-Python functions transliterate Kafka's rules (spec §9.3, §9.4) and are the project's
reference oracle for placement. ``with_assigned_replicas`` computes the same placement for every row
of a DataFrame of partitions, with no Python UDF and no driver loop over partitions.

The algorithm, for ``n`` brokers in order ``B`` (rack-aware: the rack-alternated order):
    first(pid) = (pid + start) mod n                         the leader walks round-robin
    shift(pid) = shift0 + #{m multiple of n : max(1, start_pid) <= m <= pid}
    follower j sits at (first + 1 + (shift + j) mod (n - 1)) mod n
Rack-unaware placement is therefore closed-form in (first, shift). Rack-aware placement skips
brokers whose rack (or the broker itself) already holds a replica, with a counter ``k`` that keeps
growing across the follower slots, so it has no closed form; but it depends only on ``first`` and
``(shift * racks) mod (n - 1)``, which gives a lookup table of at most n*(n-1) rows computed on the
driver from the broker list and broadcast-joined.

``start`` and ``shift0`` are Kafka's two ``rand.nextInt(n)`` draws, or both equal ``fixedStartIndex``.
Duplicate broker ids are rejected (Kafka's callers never pass them; Kafka would place a replica
twice).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType, StructField, StructType

from statemachines.schemas import PARTITION, REPLICAS

START_INDEX = "start_index"
REPLICA_SHIFT = "shift"

# Helper columns of the Spark path; prefixed so they never collide with a caller's columns.
_FIRST = "_assign_first"
_RACK_SHIFT = "_assign_rack_shift"


class AdminOperationError(ValueError):
    """Kafka's ``AdminOperationException``: the broker list cannot be used for assignment."""


class InvalidPartitionsError(ValueError):
    """Kafka's ``InvalidPartitionsException``."""


class InvalidReplicationFactorError(ValueError):
    """Kafka's ``InvalidReplicationFactorException``."""


@dataclass(frozen=True)
class BrokerMetadata:
    """A broker as assignment sees it: its id and its rack (``None`` = no ``broker.rack``)."""

    id: int
    rack: str | None = None


BrokerLike = BrokerMetadata | tuple[int, str | None] | int


class RackAwareMode(Enum):
    """How racks are used (Kafka's ``RackAwareMode``; tools default to ``ENFORCED``)."""

    ENFORCED = "Enforced"  # error if some but not all brokers have a rack
    SAFE = "Safe"  # ignore racks unless every broker has one
    DISABLED = "Disabled"  # always ignore racks


def as_broker_metadata(brokers: Sequence[BrokerLike]) -> list[BrokerMetadata]:
    """Normalise ``BrokerMetadata``, ``(id, rack|None)`` or bare ids, keeping the order."""
    out = []
    for broker in brokers:
        if isinstance(broker, BrokerMetadata):
            out.append(broker)
        elif isinstance(broker, int):
            out.append(BrokerMetadata(broker))
        else:
            broker_id, rack = broker
            out.append(BrokerMetadata(int(broker_id), rack))
    dupes = sorted(b for b, count in Counter(b.id for b in out).items() if count > 1)
    if dupes:
        raise AdminOperationError(
            f"Duplicate broker ids {dupes} in the broker list; pass each broker once."
        )
    return out


def get_broker_metadatas(
    brokers: Sequence[BrokerLike], mode: RackAwareMode = RackAwareMode.ENFORCED
) -> list[BrokerMetadata]:
    """The broker list assignment should use under ``mode``, sorted by id (``getBrokerMetadatas``)."""
    metas = as_broker_metadata(brokers)
    with_rack = sum(1 for b in metas if b.rack is not None)
    if mode is RackAwareMode.ENFORCED and 0 < with_rack < len(metas):
        raise AdminOperationError(
            "Not all brokers have rack information; give every broker a rack or use "
            "RackAwareMode.SAFE/DISABLED to assign replicas without rack information."
        )
    if mode is RackAwareMode.DISABLED or with_rack < len(metas):
        metas = [BrokerMetadata(b.id) for b in metas]
    return sorted(metas, key=lambda b: b.id)


def rack_alternated_brokers(rack_of: Mapping[int, str]) -> list[int]:
    """Brokers interleaved across racks: racks in lexicographic order, ids ascending within a rack.

    E.g. ``{0: r1, 1: r3, 2: r3, 3: r2, 4: r2, 5: r1}`` -> ``[0, 3, 1, 5, 4, 2]``.
    """
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(rack_of):
        by_rack.setdefault(rack_of[broker], []).append(broker)
    racks = sorted(by_rack)
    out: list[int] = []
    # Round i takes the i-th broker of every rack that still has one.
    for i in range(max((len(v) for v in by_rack.values()), default=0)):
        out.extend(by_rack[r][i] for r in racks if i < len(by_rack[r]))
    return out


def replica_index(first: int, shift: int, j: int, n: int) -> int:
    """Position of follower ``j`` (0-based); never ``first`` because the offset is in [1, n-1]."""
    return (first + 1 + (shift + j) % (n - 1)) % n


def _validate(n_brokers: int, n_partitions: int, replication_factor: int) -> None:
    if n_partitions <= 0:
        raise InvalidPartitionsError(
            f"Number of partitions must be larger than 0 (got {n_partitions})."
        )
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(
            f"Replication factor must be larger than 0 (got {replication_factor})."
        )
    if replication_factor > n_brokers:
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{n_brokers}; lower the replication factor or add brokers."
        )


def _placement_order(metas: Sequence[BrokerMetadata]) -> tuple[list[int], dict[int, str] | None]:
    """Broker ids in the order positions index, and the rack map (``None`` = rack-unaware)."""
    if all(b.rack is None for b in metas):
        return [b.id for b in metas], None
    if any(b.rack is None for b in metas):
        missing = sorted(b.id for b in metas if b.rack is None)
        raise AdminOperationError(
            "Not all brokers have rack information for replica rack aware assignment "
            f"(no rack: {missing}); give every broker a rack or drop the racks "
            "(see RackAwareMode)."
        )
    rack_of = {b.id: b.rack for b in metas if b.rack is not None}
    return rack_alternated_brokers(rack_of), rack_of


def _rack_aware_replicas(
    arranged: Sequence[int],
    rack_of: Mapping[int, str],
    num_racks: int,
    first: int,
    rack_shift: int,
    replication_factor: int,
) -> list[int]:
    """One partition's replicas, rack-aware; ``rack_shift`` is Kafka's ``nextReplicaShift * numRacks``."""
    n = len(arranged)
    leader = arranged[first]
    replicas, racks_used, brokers_used = [leader], {rack_of[leader]}, {leader}
    k = 0  # not reset per follower slot: Kafka's quirk, it decides the placement
    for _ in range(replication_factor - 1):
        while True:
            broker = arranged[replica_index(first, rack_shift, k, n)]
            k += 1
            rack = rack_of[broker]
            if (rack not in racks_used or len(racks_used) == num_racks) and (
                broker not in brokers_used or len(brokers_used) == n
            ):
                replicas.append(broker)
                racks_used.add(rack)
                brokers_used.add(broker)
                break
    return replicas


def assign_replicas_to_brokers(
    brokers: Sequence[BrokerLike],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Kafka's ``assignReplicasToBrokers``: partition id -> ordered replicas (first = preferred leader).

    Without ``fixed_start_index`` the start index and the initial shift are two ``rng.randrange(n)``
    draws, in that order; with it, both equal ``fixed_start_index``. Partition ids run from
    ``max(0, start_partition_id)``. Rack-unaware placement depends on the broker order given;
    rack-aware placement does not.
    """
    metas = as_broker_metadata(brokers)
    _validate(len(metas), n_partitions, replication_factor)
    order, rack_of = _placement_order(metas)
    n = len(order)
    rng = rng if rng is not None else random.Random()
    start = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    num_racks = len(set(rack_of.values())) if rack_of is not None else 0
    out: dict[int, list[int]] = {}
    pid = max(0, start_partition_id)
    for _ in range(n_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        if rack_of is None:
            out[pid] = [order[first]] + [
                order[replica_index(first, shift, j, n)] for j in range(replication_factor - 1)
            ]
        else:
            out[pid] = _rack_aware_replicas(
                order, rack_of, num_racks, first, shift * num_racks, replication_factor
            )
        pid += 1
    return out


def rack_aware_lookup(
    brokers: Sequence[BrokerLike], replication_factor: int
) -> dict[tuple[int, int], list[int]]:
    """Every rack-aware placement, keyed by (first, (shift * racks) mod (n - 1)); n*(n-1) entries."""
    metas = as_broker_metadata(brokers)
    _validate(len(metas), 1, replication_factor)
    order, rack_of = _placement_order(metas)
    if rack_of is None:
        raise AdminOperationError("rack_aware_lookup needs brokers with racks.")
    n, num_racks = len(order), len(set(rack_of.values()))
    return {
        (first, s): _rack_aware_replicas(order, rack_of, num_racks, first, s, replication_factor)
        for first in range(n)
        for s in range(max(1, n - 1))
    }


def _as_column(value: Column | str | int) -> Column:
    if isinstance(value, Column):
        return value
    return F.col(value) if isinstance(value, str) else F.lit(value)


def with_assigned_replicas(
    df: DataFrame,
    brokers: Sequence[BrokerLike],
    replication_factor: int,
    *,
    start_index: Column | str | int = START_INDEX,
    shift: Column | str | int = REPLICA_SHIFT,
    start_partition_id: Column | str | int = -1,
) -> DataFrame:
    """Add (or replace) ``replicas`` array<int>: Kafka's placement of each row's ``partition``.

    Per row (typically per topic): ``start_index`` and ``shift`` are Kafka's two draws (both equal
    to ``fixedStartIndex`` when fixed), ``start_partition_id`` the first partition id of the call
    that created the row (-1/0 for topic creation, the old partition count for additions); each
    is a Column, a column name or a literal int. Each row gets what ``assign_replicas_to_brokers``
    gives its partition id with the same inputs. Negative draws are taken modulo n. The replication
    factor is one for the whole call. No Spark job runs.
    """
    metas = as_broker_metadata(brokers)
    _validate(len(metas), 1, replication_factor)
    order, rack_of = _placement_order(metas)
    n = len(order)
    pid = F.col(PARTITION).cast("long")
    p0 = F.greatest(_as_column(start_partition_id).cast("long"), F.lit(1))
    first = F.pmod(pid + F.pmod(_as_column(start_index).cast("long"), F.lit(n)), F.lit(n))
    # Kafka bumps the shift at every multiple of n in [max(1, start_pid), pid]; floor() is exact
    # here because partition ids are far below 2**53.
    bumps = F.floor(pid / n) - F.floor((p0 - 1) / n)
    current_shift = _as_column(shift).cast("long") + bumps
    order_lit = F.array(*[F.lit(b) for b in order])
    out = df.drop(REPLICAS) if REPLICAS in df.columns else df

    if rack_of is None or replication_factor == 1:
        # Closed form; with n == 1 the RF is 1 and no follower term (mod n-1 == 0) is built.
        positions = [first] + [
            F.pmod(first + 1 + F.pmod(current_shift + j, F.lit(n - 1)), F.lit(n))
            for j in range(replication_factor - 1)
        ]
        replicas = F.array(*[F.get(order_lit, p.cast("int")) for p in positions])
        return out.withColumn(REPLICAS, replicas)

    # Rack-aware, RF >= 2 (so n >= 2): look the placement up by (first, shift*racks mod (n-1)).
    num_racks = len(set(rack_of.values()))
    rack_shift = F.pmod(F.pmod(current_shift, F.lit(n - 1)) * num_racks, F.lit(n - 1))
    table_schema = StructType(
        [
            StructField(_FIRST, IntegerType(), nullable=False),
            StructField(_RACK_SHIFT, IntegerType(), nullable=False),
            StructField(REPLICAS, ArrayType(IntegerType(), containsNull=False), nullable=False),
        ]
    )
    lookup = rack_aware_lookup(metas, replication_factor)
    # From Arrow the table is a local relation: broadcasting it needs no Spark job of its own.
    arrow = pa.table(
        {
            _FIRST: pa.array([f for f, _ in lookup], pa.int32()),
            _RACK_SHIFT: pa.array([s for _, s in lookup], pa.int32()),
            REPLICAS: pa.array(list(lookup.values()), pa.list_(pa.int32())),
        }
    )
    table = df.sparkSession.createDataFrame(arrow, table_schema)
    keyed = out.withColumn(_FIRST, first.cast("int")).withColumn(
        _RACK_SHIFT, rack_shift.cast("int")
    )
    # Every key exists in the table; a left join still guarantees that no partition is dropped.
    return keyed.join(F.broadcast(table), on=[_FIRST, _RACK_SHIFT], how="left").drop(
        _FIRST, _RACK_SHIFT
    )
