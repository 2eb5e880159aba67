"""What the brokers do with the controller's decisions and with their own logs, in bulk.

``receive`` applies the leadership the controller committed (its LeaderAndIsr requests): the new
leader assigns its epoch at its LEO (KIP-279) and the replicas that follow a new leader, or that
restarted, truncate by §13.2 — the epoch rule when the log carries epochs, else their high
watermark. An election whose leader lacks acknowledged records loses them, and the loss is
counted there. ``append``, ``lose_unflushed`` and ``divergent`` are a producer's burst, a power
loss and the check that two replicas hold different records at one offset.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from statemachines import replication as r
from statemachines import replication_epochs as epochs
from statemachines import schemas as s
from statemachines.columns import any_of

LAST_LEADER = r.LAST_LEADER
KEY = (s.TOPIC_INDEX, s.PARTITION)
_OLD = "o_"


def sent_epoch_col(k: int) -> str:
    """A decided row's column: the leader epoch of the LeaderAndIsr the controller sends replica
    k's broker, ``replication.STOPPED`` where it sends StopReplica instead, null where nothing
    reaches the broker (one the controller does not hold live: its registration is gone)."""
    return f"sent_epoch_{k}"


def fresh(k: int, now: Column) -> dict[str, Column]:
    """An empty log on position k: a replica just created, or one a reassignment adds."""
    zero = F.lit(0).cast("bigint")
    return {
        r.leo_col(k): zero,
        r.hw_col(k): zero,
        r.caught_col(k): zero,
        r.fetch_col(k): now,
        r.fetch_leo_col(k): zero,
        r.flushed_col(k): zero,
        r.epochs_col(k): F.array().cast(epochs.EPOCHS_TYPE),
        r.known_epoch_col(k): F.lit(r.STOPPED).cast("bigint"),
    }


def agreement(a: Column, a_leo: Column, b: Column, b_leo: Column) -> Column:
    """The offset up to which two logs hold the same records: their lineages agree run by run
    up to the first run that differs (§13.1 keeps both strictly increasing)."""
    pairs = F.arrays_zip(a.alias("a"), b.alias("b"))
    differing = F.filter(pairs, lambda p: ~(p["a"].eqNullSafe(p["b"])))
    first = F.get(differing, 0)
    ends = [a_leo, b_leo, first["a"]["start_offset"], first["b"]["start_offset"]]
    return F.least(*ends)


def receive(
    table: DataFrame,
    decided: DataFrame,
    restarted: frozenset[int],
    use_epochs: bool,
    now_ms: int,
    running: frozenset[int] | None = None,
    materialize: Callable[[DataFrame], DataFrame] = lambda df: df,
) -> DataFrame:
    """The replication table after the brokers receive ``decided`` (the controller's rows in
    the replication layout: key, replica_k, isr_k, leader, leader_epoch, zk_version,
    controller_epoch, sent_epoch_k). Each replica keeps the epoch it was sent (``known_epoch``);
    one that nothing reached keeps the one it had, or none if its broker restarted. Partitions the controller no longer has are gone; new ones start empty.
    ``restarted``: brokers that came back since the last call (their replicas truncate);
    ``running``: brokers whose process runs (None: all) — a stopped broker truncates when it
    restarts, not when the controller's requests to it fail. ``materialize`` is applied between
    the two halves (the logs moved to their positions; the leaders and followers acting on
    them): a caller that checkpoints there keeps each half's generated code under the JVM's
    64 KB method limit at widths of 4 and more."""
    wo, w = s.width(table), s.width(decided)
    now = F.lit(now_ms).cast("bigint")
    old = table.select(
        *[F.col(c).alias(_OLD + c) if c not in KEY else F.col(c) for c in table.columns]
    )
    j = decided.join(old, list(KEY), "left")
    o = lambda name: F.col(_OLD + name)  # noqa: E731
    known = o(s.LEADER_EPOCH).isNotNull()
    back = [r.member(F.col(s.replica_col(k)), restarted) for k in range(w)]
    new_epoch = ~known | (F.col(s.LEADER_EPOCH) != o(s.LEADER_EPOCH))
    newer = new_epoch | (F.col(s.ZK_VERSION) > o(s.ZK_VERSION))
    leader = F.col(s.LEADER)
    led = leader != s.NO_LEADER
    leader_back = r.member(leader, restarted)
    leader_changed = led & (~known | (leader != o(s.LEADER)) | leader_back)
    # Each position takes the log of the same broker's old position, or starts empty.
    moved: dict[str, Column] = {}
    for k in range(w):
        same = [o(s.replica_col(i)) == F.col(s.replica_col(k)) for i in range(wo)]
        for name, empty in fresh(k, now).items():
            base = name.rsplit("_", 1)[0]
            moved[name] = r.pick([(same[i], o(f"{base}_{i}")) for i in range(wo)], empty)
    j = j.withColumns(moved)
    last = F.when(known & (o(s.LEADER) != s.NO_LEADER), o(s.LEADER)).otherwise(o(LAST_LEADER))
    leo_l = r.leader_value(w, r.leo_col, F.lit(0).cast("bigint"))
    no_lineage = F.array().cast(epochs.EPOCHS_TYPE)
    epochs_l = r.leader_value(w, r.epochs_col, no_lineage)
    # What the cluster acknowledged is the record of what producers were told; a log the same
    # failure shortened (a power loss) is not: a new leader holding it all loses nothing.
    acked = F.coalesce(o(r.ACKED), F.lit(0).cast("bigint"))
    acked_epochs = F.coalesce(o(r.ACKED_EPOCHS), no_lineage)
    kept = agreement(epochs_l, leo_l, acked_epochs, acked)
    lost_now = F.when(leader_changed, F.greatest(acked - kept, F.lit(0))).otherwise(0)
    acked_after = F.when(leader_changed, F.least(acked, kept)).otherwise(acked)
    # A leader change fails the acks=all writes still waiting (NOT_LEADER_OR_FOLLOWER).
    awaited = F.coalesce(o(r.AWAITED), F.lit(0).cast("bigint"))
    zero = F.lit(0).cast("bigint")
    j = r.replace(
        j,
        {
            "_known": known,
            "_new_epoch": new_epoch,
            "_newer": newer,
            "_leader_changed": leader_changed,
            r.LOST: F.coalesce(o(r.LOST), F.lit(0).cast("bigint")) + lost_now,
            r.ACKED: acked_after,
            r.ACKED_EPOCHS: F.when(
                leader_changed, epochs.truncate_from_end(acked_epochs, acked_after)
            ).otherwise(acked_epochs),
            r.AWAITED: F.when(leader_changed, F.least(awaited, acked_after)).otherwise(awaited),
            r.REFUSED: F.coalesce(o(r.REFUSED), zero),
            r.UNSERVED: F.coalesce(o(r.UNSERVED), zero),
            LAST_LEADER: F.when(led, leader).otherwise(F.coalesce(last, F.lit(s.NO_LEADER))),
            r.LEADER_START: F.when(led & new_epoch, leo_l).otherwise(
                F.coalesce(o(r.LEADER_START), F.lit(0).cast("bigint"))
            ),
        },
    )
    j = materialize(j)
    known, new_epoch, newer = F.col("_known"), F.col("_new_epoch"), F.col("_newer")
    leader_changed = F.col("_leader_changed")
    # The leader's LEO and lineage once, as columns: every position's truncation reads them.
    j = j.withColumns({"_leo_l": leo_l, "_epochs_l": epochs_l})
    leo_l, epochs_l = F.col("_leo_l"), F.col("_epochs_l")
    # The new leader stamps its epoch at its LEO (KIP-279), before anything is written.
    leader_epochs = F.when(
        led & newer, epochs.assign(epochs_l, F.col(s.LEADER_EPOCH), leo_l)
    ).otherwise(epochs_l)
    j = j.withColumn("_leader_epochs", leader_epochs)
    # One truncation expression over an array of the positions, not one per position: the
    # §13.2 loop is large, and W copies of it pass the JVM's 64 KB method limit.
    logs = F.array(
        *[
            F.struct(
                F.col(r.epochs_col(k)).alias("epochs"),
                F.col(r.leo_col(k)).alias("leo"),
                F.col(r.hw_col(k)).alias("hw"),
            )
            for k in range(w)
        ]
    )
    j = j.withColumn(
        "_cuts",
        F.transform(
            logs,
            lambda x: epochs.truncation_offset(
                x["epochs"], x["leo"], x["hw"], F.col("_leader_epochs"), leo_l, use_epochs
            ),
        ),
    )
    flags: dict[str, Column] = {}
    for k in range(w):
        follower = r.is_follower(k) & led
        up = F.lit(True) if running is None else r.member(F.col(s.replica_col(k)), running)
        flags[f"_truncates_{k}"] = follower & up & (leader_changed | back[k])
        flags[f"_cut_{k}"] = F.least(F.get(F.col("_cuts"), k), leo_l, F.col(r.leo_col(k)))
    j = j.withColumns(flags)
    updates: dict[str, Column] = {}
    for k in range(w):
        leo, hw = F.col(r.leo_col(k)), F.col(r.hw_col(k))
        follower = r.is_follower(k) & led
        truncates, cut = F.col(f"_truncates_{k}"), F.col(f"_cut_{k}")
        updates[r.leo_col(k)] = F.when(truncates, cut).otherwise(leo)
        updates[r.hw_col(k)] = F.when(truncates, F.least(hw, cut)).otherwise(hw)
        updates[r.flushed_col(k)] = F.when(
            truncates, F.least(F.col(r.flushed_col(k)), cut)
        ).otherwise(F.col(r.flushed_col(k)))
        updates[r.epochs_col(k)] = (
            F.when(r.is_leader(k), F.col("_leader_epochs"))
            .when(truncates, epochs.truncate_from_end(F.col(r.epochs_col(k)), cut))
            .otherwise(F.col(r.epochs_col(k)))
        )
        # §12.1: a leader of a new epoch starts its followers' clocks afresh.
        resets = follower & new_epoch
        updates[r.caught_col(k)] = F.when(
            resets, F.when(r.in_isr(k, w), now).otherwise(F.lit(0).cast("bigint"))
        ).otherwise(F.col(r.caught_col(k)))
        updates[r.fetch_col(k)] = F.when(resets, now).otherwise(F.col(r.fetch_col(k)))
        updates[r.fetch_leo_col(k)] = F.when(resets, leo_l).otherwise(F.col(r.fetch_leo_col(k)))
        had = F.when(back[k], F.lit(r.STOPPED).cast("bigint")).otherwise(
            F.col(r.known_epoch_col(k))
        )
        updates[r.known_epoch_col(k)] = F.coalesce(F.col(sent_epoch_col(k)).cast("bigint"), had)
    j = r.replace(j, updates)
    # Where the brokers' own write is newer than the controller's view, they keep theirs.
    keep_ours = known & ~newer
    mine = {
        c: F.when(keep_ours, o(c)).otherwise(F.col(c))
        for c in [s.ZK_VERSION, s.CONTROLLER_EPOCH, *(s.isr_col(k) for k in range(min(w, wo)))]
    }
    j = r.replace(j, mine)
    return r.maybe_increment_hw(j.select(*r.columns(w)))  # drops the old columns, helpers


ACKS_ALL = "all"  # the acks settings as scenarios give them (str of "all", 1, 0)
ACKS_LEADER = "1"


def append(
    table: DataFrame,
    where: Column,
    serving: frozenset[int],
    records: int,
    acks: str,
    min_isr: Column,
) -> DataFrame:
    """A producer's burst of ``records`` to each partition ``where`` holds, with its ``acks``
    ("all", "1" or "0"). Without a leader that serves (``serving``) nothing is appended and the
    records count as ``UNSERVED``; with acks=all the leader refuses them while the ISR is below
    ``min.insync.replicas`` (NOT_ENOUGH_REPLICAS, ``REFUSED``). acks=1 is acknowledged on
    append, acks=all once the high watermark passes it (``AWAITED``), acks=0 never."""
    w = s.width(table)
    served = where & (F.col(s.LEADER) != s.NO_LEADER) & r.member(F.col(s.LEADER), serving)
    refused = served & F.lit(acks == ACKS_ALL) & (r.isr_size(w) < min_isr)
    ok = served & ~refused
    n = F.lit(records).cast("bigint")
    updates: dict[str, Column] = {}
    leo_l = r.leader_value(w, r.leo_col, F.lit(0).cast("bigint"))
    for k in range(w):
        lead = ok & r.is_leader(k)
        updates[r.leo_col(k)] = F.when(lead, F.col(r.leo_col(k)) + n).otherwise(F.col(r.leo_col(k)))
        updates[r.epochs_col(k)] = F.when(
            lead, epochs.assign(F.col(r.epochs_col(k)), F.col(s.LEADER_EPOCH), F.col(r.leo_col(k)))
        ).otherwise(F.col(r.epochs_col(k)))
    if acks == ACKS_LEADER:
        acked = F.when(ok, F.greatest(F.col(r.ACKED), leo_l + n)).otherwise(F.col(r.ACKED))
        lineage = r.pick(
            [(r.is_leader(k), updates[r.epochs_col(k)]) for k in range(w)],
            F.array().cast(epochs.EPOCHS_TYPE),
        )
        updates[r.ACKED] = acked
        updates[r.ACKED_EPOCHS] = r.acked_lineage(acked, lineage)
    elif acks == ACKS_ALL:
        updates[r.AWAITED] = F.when(ok, F.greatest(F.col(r.AWAITED), leo_l + n)).otherwise(
            F.col(r.AWAITED)
        )
    updates[r.REFUSED] = F.col(r.REFUSED) + F.when(refused, n).otherwise(0)
    updates[r.UNSERVED] = F.col(r.UNSERVED) + F.when(where & ~served, n).otherwise(0)
    return r.replace(table, updates)


def lose_unflushed(table: DataFrame, brokers: Sequence[int]) -> DataFrame:
    """Power loss on ``brokers``: each of their logs keeps only what reached the disk."""
    w = s.width(table)
    updates: dict[str, Column] = {}
    for k in range(w):
        hit = r.member(F.col(s.replica_col(k)), frozenset(brokers))
        disk = F.col(r.flushed_col(k))
        updates[r.leo_col(k)] = F.when(hit, disk).otherwise(F.col(r.leo_col(k)))
        updates[r.hw_col(k)] = F.when(hit, F.least(F.col(r.hw_col(k)), disk)).otherwise(
            F.col(r.hw_col(k))
        )
        updates[r.epochs_col(k)] = F.when(
            hit, epochs.truncate_from_end(F.col(r.epochs_col(k)), disk)
        ).otherwise(F.col(r.epochs_col(k)))
    return r.replace(table, updates)


def divergent(w: int) -> Column:
    """Some replica holds, below both ends, records other than the leader's (or, while the
    partition has no leader, its last leader's)."""
    ref = F.when(F.col(s.LEADER) != s.NO_LEADER, F.col(s.LEADER)).otherwise(F.col(LAST_LEADER))
    is_ref = [F.col(s.replica_col(k)) == ref for k in range(w)]
    ref_epochs = r.pick([(is_ref[k], F.col(r.epochs_col(k))) for k in range(w)], F.lit(None))
    ref_leo = r.pick([(is_ref[k], F.col(r.leo_col(k))) for k in range(w)], F.lit(None))
    differ = [
        (F.col(s.replica_col(k)) != s.EMPTY_SLOT)
        & ~is_ref[k]
        & (
            agreement(F.col(r.epochs_col(k)), F.col(r.leo_col(k)), ref_epochs, ref_leo)
            < F.least(F.col(r.leo_col(k)), ref_leo)
        )
        for k in range(w)
    ]
    return F.coalesce(any_of(differ), F.lit(False))
