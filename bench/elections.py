"""Benchmark: offline election after a broker failure, and preferred-leader imbalance per broker.

Three implementations on identical data, per cluster size (RF 3, 100 brokers, 3 racks, 100
partitions per topic, fixed seed):

- Spark: the controller's bulk path over the compact table (``handle_state_changes`` with
  ``OfflinePartitionLeaderElectionStrategy``; ``rebalance.imbalance_ratios``), fully evaluated.
  The table is stored as the controller stores a committed generation (``--storage checkpoint``:
  a local checkpoint, rows in memory) or in Spark's columnar cache (``--storage cache``).
- oracle: the per-partition Python loop of ``statemachines.reference`` (up to ``--oracle-max``).
- numpy: the same rules vectorised over int32 columns, the single-process limit.

Inputs are cached and materialised before timing; the numpy and oracle inputs are converted once
from the same cached tables with ``toArrow()`` (column-wise, outside the timing). The Spark path
never brings O(partitions) rows to the driver: correctness checks compare the affected rows
(about 1 % of partitions) and order-independent checksums of the full next generation.

    python bench/elections.py [--sizes 1e5,1e6,1e7] [--runs 5] [--oracle-max 1e6]
                              [--storage checkpoint|cache] [--out bench/results/elections.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

# Run as a script, this file's directory comes first on the path, and ``bench/controller.py``
# would shadow the ``controller`` package.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

from controller.commit.checkpoint import local_checkpoint, release
from spark_app.session import environment, get_spark, parse_sizes
from statemachines import reference as ref
from statemachines import schemas as s
from statemachines.brokers import BrokerSet, ClusterView
from statemachines.election import LeadershipChange, OfflinePartitionLeaderElectionStrategy
from statemachines.generator import generate_cluster
from statemachines.layout import to_compact, topic_dictionary
from statemachines.partition_states import PartitionState, handle_state_changes
from statemachines.rebalance import NOT_PREFERRED, PREFERRED, RATIO, TOTAL, imbalance_ratios

BROKERS = 100
RACKS = 3
RF = 3
PARTITIONS_PER_TOPIC = 100
SEED = 42
MASTER = "local[2]"
RECIPIENTS = LeadershipChange.RECIPIENTS
# Share of partitions of the imbalance input whose leader is moved off the preferred replica,
# and share without a state znode (no cached leadership), on top of the post-failure moves.
MOVED_PERCENT = 10
NO_LEADERSHIP_PERCENT = 1

Arrays = dict[str, np.ndarray]


class DisagreementError(AssertionError):
    """Two implementations produced different results: the benchmark numbers would be void."""


def fail(what: str, detail: str) -> None:
    raise DisagreementError(f"{what}: implementations disagree: {detail}")


# ---- timing ----------------------------------------------------------------------------------


@dataclass
class Timing:
    runs: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.runs)


def measure(fn: Callable[[], object], runs: int) -> Timing:
    """One untimed warm-up (codegen, JIT caches, page-ins), then ``runs`` timed calls."""
    fn()
    timing = Timing()
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        fn()
        timing.runs.append(time.perf_counter() - start)
    return timing


def noop(df: DataFrame) -> None:
    df.write.format("noop").mode("overwrite").save()


# ---- inputs ----------------------------------------------------------------------------------


def stored(df: DataFrame, storage: str) -> DataFrame:
    """``df`` materialised in ``storage``: a local checkpoint, or the columnar cache."""
    if storage == "checkpoint":
        return local_checkpoint(df)
    cached = df.cache()
    cached.count()
    return cached


def drop(df: DataFrame) -> None:
    release(df)
    df.unpersist()


def build_compact(spark: SparkSession, n: int, storage: str) -> tuple[DataFrame, DataFrame]:
    """The generated cluster as a materialised compact table, and its topic dictionary."""
    cluster = generate_cluster(
        spark, BROKERS, RACKS, n // PARTITIONS_PER_TOPIC, PARTITIONS_PER_TOPIC, RF, seed=SEED
    )
    topics = topic_dictionary(cluster.partitions).cache()
    topics.count()
    return stored(to_compact(cluster.partitions, topics, RF), storage), topics


def imbalance_input(next_generation: DataFrame) -> DataFrame:
    """The post-failure generation with more leadership moved, as a rebalance would find it.

    A fixed hash of the key moves ~MOVED_PERCENT % of leaders to the second ISR member and
    leaves ~NO_LEADERSHIP_PERCENT % without a state znode, so every branch of the rule counts.
    """
    bucket = F.pmod(F.xxhash64(F.col(s.TOPIC_INDEX), F.col(s.PARTITION), F.lit(SEED)), F.lit(100))
    no_znode = bucket < NO_LEADERSHIP_PERCENT
    moved = (bucket >= 100 - MOVED_PERCENT) & (F.col(s.isr_col(1)) != s.EMPTY_SLOT)
    leader = (
        F.when(no_znode, F.lit(s.NO_LEADER))
        .when(moved, F.col(s.isr_col(1)))
        .otherwise(F.col(s.LEADER))
    )
    zk_version = F.when(no_znode, F.lit(s.NO_ZK_VERSION)).otherwise(F.col(s.ZK_VERSION))
    return next_generation.withColumns({s.LEADER: leader, s.ZK_VERSION: zk_version})


def to_arrays(df: DataFrame, columns: list[str]) -> Arrays:
    """Columns of a (cached) table as numpy arrays, through Arrow: no Python Row objects."""
    table = df.select(*columns).toArrow()
    return {c: table.column(c).to_numpy() for c in columns}


# ---- numpy: the same rules, vectorised ----------------------------------------------------------


def np_offline_election(a: Arrays, failed_broker: int, w: int, full: bool) -> Arrays:
    """Kafka's offline election for partitions led by ``failed_broker`` (unclean disabled).

    Mirrors ``OfflinePartitionLeaderElectionStrategy``: leader = first live replica (assignment
    order) in the ISR; new ISR = the ISR's live members in ISR order; recipients = live
    positions; epoch and zk version +1. Returns the written rows, or with ``full`` the whole
    next generation plus the ``written`` and ``failed`` masks.
    """
    reps = [a[s.replica_col(k)] for k in range(w)]
    isr = [a[s.isr_col(k)] for k in range(w)]
    leader = a[s.LEADER]
    valid = np.isin(a[s.STATE_CODE], [0, 1, 2])
    selected = (leader == failed_broker) & valid
    online = [(r != s.EMPTY_SLOT) & (r != failed_broker) for r in reps]
    elected = np.full(leader.shape, s.EMPTY_SLOT, dtype=np.int32)
    for k in reversed(range(w)):
        in_isr = np.zeros(leader.shape, dtype=bool)
        for x in isr:
            in_isr |= x == reps[k]
        elected = np.where(online[k] & in_isr, reps[k], elected)
    ok = elected != s.EMPTY_SLOT
    written = selected & ok
    keep = []
    for x in isr:
        live = np.zeros(leader.shape, dtype=bool)
        for k in range(w):
            live |= (reps[k] == x) & online[k]
        keep.append(live)
    counts = np.cumsum(np.stack(keep), axis=0)
    new_isr = []
    for j in range(w):
        slot = np.full(leader.shape, s.EMPTY_SLOT, dtype=np.int32)
        for k in reversed(range(j, w)):
            slot = np.where(keep[k] & (counts[k] == j + 1), isr[k], slot)
        new_isr.append(slot)
    recipients = np.zeros(leader.shape, dtype=np.int32)
    for k in range(w):
        recipients |= online[k].astype(np.int32) << k
    if not full:
        rows = np.flatnonzero(written)
        out = {
            s.TOPIC_INDEX: a[s.TOPIC_INDEX][rows],
            s.PARTITION: a[s.PARTITION][rows],
            s.LEADER: elected[rows],
            s.LEADER_EPOCH: a[s.LEADER_EPOCH][rows] + 1,
            s.ZK_VERSION: a[s.ZK_VERSION][rows] + 1,
            RECIPIENTS: recipients[rows],
            "row": rows,
        }
        for j in range(w):
            out[s.isr_col(j)] = new_isr[j][rows]
        out["failed_rows"] = np.flatnonzero(selected & ~ok)
        return out
    nxt = dict(a)
    nxt[s.LEADER] = np.where(written, elected, leader)
    nxt[s.LEADER_EPOCH] = np.where(written, a[s.LEADER_EPOCH] + 1, a[s.LEADER_EPOCH])
    nxt[s.ZK_VERSION] = np.where(written, a[s.ZK_VERSION] + 1, a[s.ZK_VERSION])
    nxt[s.CONTROLLER_EPOCH] = np.where(written, np.int32(1), a[s.CONTROLLER_EPOCH])
    nxt[s.STATE_CODE] = np.where(written, np.int8(1), a[s.STATE_CODE])
    for j in range(w):
        nxt[s.isr_col(j)] = np.where(written, new_isr[j], isr[j])
    nxt["written"] = written
    nxt["failed"] = selected & ~ok
    return nxt


def np_imbalance(a: Arrays) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(brokers, partitions, not-preferred) per preferred broker, like ``imbalance_ratios``."""
    preferred = a[s.replica_col(0)]
    bad = (a[s.ZK_VERSION] != s.NO_ZK_VERSION) & (a[s.LEADER] != preferred)
    total = np.bincount(preferred, minlength=BROKERS)
    not_pref = np.bincount(preferred, weights=bad, minlength=BROKERS).astype(np.int64)
    brokers = np.flatnonzero(total)
    return brokers, total[brokers], not_pref[brokers]


# ---- the oracle: reference records ---------------------------------------------------------------


def oracle_records(a: Arrays, names: list[str], w: int) -> list[ref.Partition]:
    """``reference.Partition`` records for the rows of ``a`` (built outside the timing)."""
    cols = [a[c].tolist() for c in s.compact_columns(w) if c in a]
    keys = [c for c in s.compact_columns(w) if c in a]
    at = {c: i for i, c in enumerate(keys)}
    records = []
    for row in zip(*cols, strict=True):
        reps = tuple(row[at[s.replica_col(k)]] for k in range(w) if row[at[s.replica_col(k)]] >= 0)
        isr = tuple(row[at[s.isr_col(k)]] for k in range(w) if row[at[s.isr_col(k)]] >= 0)
        records.append(
            ref.Partition(
                topic=names[row[at[s.TOPIC_INDEX]]],
                partition=row[at[s.PARTITION]],
                replicas=reps,
                isr=isr,
                leader=row[at[s.LEADER]],
                leader_epoch=row[at[s.LEADER_EPOCH]],
                zk_version=row[at[s.ZK_VERSION]],
                controller_epoch=row[at[s.CONTROLLER_EPOCH]],
                state=PartitionState(row[at[s.STATE_CODE]]),
            )
        )
    return records


def oracle_election(
    records: list[ref.Partition], view: ref.View, failed_broker: int
) -> tuple[list[tuple[ref.Partition, ref.Election]], list[ref.Partition]]:
    """The controller loop: partitions with an offline leader, elected one at a time."""
    elected: list[tuple[ref.Partition, ref.Election]] = []
    failed: list[ref.Partition] = []
    for p in records:
        if p.leader == failed_broker:
            e = ref.elect_offline(p, view, False)
            if e is None:
                failed.append(p)
            else:
                elected.append((p, e))
    return elected, failed


def oracle_next_generation(
    by_key: dict[tuple[str, int], ref.Partition], view: ref.View, failed_broker: int
) -> ref.PartitionChanges:
    targets = [k for k, p in by_key.items() if p.leader == failed_broker]
    return ref.handle_partition_state_changes(
        by_key, targets, PartitionState.OnlinePartition, view, ref.offline_strategy()
    )


# ---- checks --------------------------------------------------------------------------------------


def _key_order(d: Arrays) -> np.ndarray:
    return np.lexsort((d[s.PARTITION], d[s.TOPIC_INDEX]))


def check_election_spark_numpy(spark_rows: Arrays, np_rows: Arrays, w: int) -> int:
    fields = [
        s.TOPIC_INDEX,
        s.PARTITION,
        s.LEADER,
        *(s.isr_col(j) for j in range(w)),
        s.LEADER_EPOCH,
        s.ZK_VERSION,
        RECIPIENTS,
    ]
    n_spark, n_np = len(spark_rows[s.LEADER]), len(np_rows[s.LEADER])
    if n_spark != n_np:
        fail("offline election", f"{n_spark} changed rows in Spark, {n_np} in numpy")
    si, ni = _key_order(spark_rows), _key_order(np_rows)
    for f in fields:
        if not np.array_equal(spark_rows[f][si], np_rows[f][ni]):
            bad = int(np.flatnonzero(spark_rows[f][si] != np_rows[f][ni])[0])
            fail("offline election", f"column {f} differs, first at sorted row {bad}")
    return n_spark


def check_election_oracle(
    elected: list[tuple[ref.Partition, ref.Election]],
    failed: list[ref.Partition],
    np_rows: Arrays,
    names: list[str],
    a_key: Arrays,
    w: int,
) -> None:
    """The oracle's elections (leader, ISR, recipients, epochs) against numpy's written rows."""
    failed_keys = sorted((p.topic, p.partition) for p in failed)
    np_failed = sorted(
        (names[int(a_key[s.TOPIC_INDEX][r])], int(a_key[s.PARTITION][r]))
        for r in np_rows["failed_rows"]
    )
    if failed_keys != np_failed:
        fail(
            "offline election",
            f"failed partitions: oracle {len(failed_keys)}, numpy {len(np_failed)}",
        )
    expected = {}
    for i in range(len(np_rows[s.LEADER])):
        r = int(np_rows["row"][i])
        replicas = [int(a_key[s.replica_col(k)][r]) for k in range(w)]
        mask = int(np_rows[RECIPIENTS][i])
        expected[(names[int(np_rows[s.TOPIC_INDEX][i])], int(np_rows[s.PARTITION][i]))] = (
            int(np_rows[s.LEADER][i]),
            tuple(int(np_rows[s.isr_col(j)][i]) for j in range(w) if np_rows[s.isr_col(j)][i] >= 0),
            tuple(b for k, b in enumerate(replicas) if mask >> k & 1),
            int(np_rows[s.LEADER_EPOCH][i]),
            int(np_rows[s.ZK_VERSION][i]),
        )
    got = {
        (p.topic, p.partition): (
            e.leader,
            e.isr,
            e.recipients,
            p.leader_epoch + 1,
            p.zk_version + 1,
        )
        for p, e in elected
    }
    if got != expected:
        diff = sorted(set(got.items()) ^ set(expected.items()))[:3]
        fail("offline election", f"oracle vs numpy ({len(got)} vs {len(expected)}), e.g. {diff}")


def checksum_columns(w: int) -> list[str]:
    return [c for c in s.compact_columns(w) if c not in (s.TOPIC_INDEX, s.PARTITION)]


def spark_checksums(df: DataFrame, w: int) -> list[int]:
    """Order-independent sums of every column, plain and weighted by a key hash (small longs)."""
    weight = F.pmod(F.col(s.TOPIC_INDEX) * PARTITIONS_PER_TOPIC + F.col(s.PARTITION), F.lit(1009))
    aggs = []
    for c in checksum_columns(w):
        v = F.col(c).cast("long")
        aggs += [F.sum(v), F.sum(v * (weight + 1))]
    return [int(x) for x in df.agg(*aggs).first()]  # type: ignore[union-attr]


def np_checksums(a: Arrays, w: int) -> list[int]:
    key = a[s.TOPIC_INDEX].astype(np.int64) * PARTITIONS_PER_TOPIC + a[s.PARTITION]
    weight = key % 1009 + 1
    out = []
    for c in checksum_columns(w):
        v = a[c].astype(np.int64)
        out += [int(v.sum()), int((v * weight).sum())]
    return out


def check_imbalance(
    spark_rows: list[Any],
    np_result: tuple[np.ndarray, np.ndarray, np.ndarray],
    oracle: dict[int, float] | None,
) -> dict[str, float]:
    spark = {
        int(r[PREFERRED]): (int(r[TOTAL]), int(r[NOT_PREFERRED]), float(r[RATIO]))
        for r in spark_rows
    }
    brokers, total, bad = np_result
    numpy = {
        int(b): (int(t), int(n), float(n) / float(t))
        for b, t, n in zip(brokers, total, bad, strict=True)
    }
    if spark != numpy:
        fail("imbalance", f"Spark vs numpy: {sorted(set(spark.items()) ^ set(numpy.items()))[:3]}")
    if oracle is not None:
        expected = {b: v[2] for b, v in numpy.items()}
        if oracle != expected:
            fail(
                "imbalance",
                f"oracle vs numpy: {sorted(set(oracle.items()) ^ set(expected.items()))[:3]}",
            )
    ratios = [v[2] for v in numpy.values()]
    return {"brokers": len(ratios), "max_ratio": max(ratios), "mean_ratio": statistics.mean(ratios)}


# ---- one size ------------------------------------------------------------------------------------


def bench_size(
    spark: SparkSession, n: int, runs: int, oracle_max: int, failed_broker: int, storage: str
) -> list[dict[str, Any]]:
    w = RF
    setup = time.perf_counter()
    compact, topics = build_compact(spark, n, storage)
    names_table = topics.orderBy(s.TOPIC_INDEX).toArrow()
    names = [str(x) for x in names_table.column(s.TOPIC).to_pylist()]
    if names_table.column(s.TOPIC_INDEX).to_pylist() != list(range(len(names))):
        raise RuntimeError("topic dictionary is not indexed 0..T-1")
    view = ClusterView(live=BrokerSet.of(b for b in range(BROKERS) if b != failed_broker))
    strategy = OfflinePartitionLeaderElectionStrategy()

    def election() -> Any:
        return handle_state_changes(
            compact,
            F.col(s.LEADER) == failed_broker,
            PartitionState.OnlinePartition,
            view,
            strategy,
        )

    a = to_arrays(compact, s.compact_columns(w))
    setup_s = time.perf_counter() - setup
    print(f"[{n:.0e}] setup {setup_s:.1f}s, {storage} partitions {compact.rdd.getNumPartitions()}")

    # -- correctness of the election: affected rows (≈1 %) Spark vs numpy, full generation by checksum
    spark_rows = to_arrays(
        election().changed_leadership,
        [
            s.TOPIC_INDEX,
            s.PARTITION,
            s.LEADER,
            *(s.isr_col(j) for j in range(w)),
            s.LEADER_EPOCH,
            s.ZK_VERSION,
            RECIPIENTS,
        ],
    )
    spark_failed = election().failed.count()
    np_rows = np_offline_election(a, failed_broker, w, full=False)
    changed = check_election_spark_numpy(spark_rows, np_rows, w)
    if spark_failed != len(np_rows["failed_rows"]):
        fail(
            "offline election",
            f"failed rows: Spark {spark_failed}, numpy {len(np_rows['failed_rows'])}",
        )
    nxt_np = np_offline_election(a, failed_broker, w, full=True)
    if spark_checksums(election().partitions, w) != np_checksums(nxt_np, w):
        fail("next generation", "checksums of the full table differ between Spark and numpy")

    oracle_on = n <= oracle_max
    records: list[ref.Partition] = []
    ref_view = ref.View(live=frozenset(view.live.ids))
    if oracle_on:
        records = oracle_records(a, names, w)
        o_elected, o_failed = oracle_election(records, ref_view, failed_broker)
        check_election_oracle(o_elected, o_failed, np_rows, names, a, w)
        o_next = oracle_next_generation(
            {(p.topic, p.partition): p for p in records}, ref_view, failed_broker
        )
        if len(o_next.elected) != changed or o_next.failed or o_next.invalid:
            fail("next generation", "oracle changed a different set of partitions")
    print(f"[{n:.0e}] election agrees: {changed} partitions re-elected, {spark_failed} failed")

    results: list[dict[str, Any]] = []

    def record(
        op: str, sp: Timing, orc: Timing | None, nump: Timing, extra: dict[str, Any]
    ) -> None:
        row = {
            "operation": op,
            "partitions": n,
            "spark_s": sp.median,
            "oracle_s": orc.median if orc else None,
            "numpy_s": nump.median,
            "spark_over_oracle": sp.median / orc.median if orc else None,
            "spark_over_numpy": sp.median / nump.median,
            "runs": {"spark": sp.runs, "oracle": orc.runs if orc else None, "numpy": nump.runs},
            "load_avg_1m": os.getloadavg()[0],
            **extra,
        }
        results.append(row)
        print(
            f"[{n:.0e}] {op}: Spark {sp.median:.3f}s, "
            f"oracle {row['oracle_s'] if orc is None else f'{orc.median:.3f}s'}, "
            f"numpy {nump.median:.4f}s (load {row['load_avg_1m']:.2f})"
        )

    # -- 1a. what the controller consumes: changed-leadership rows and failed rows (one job)
    def spark_changed() -> None:
        noop(election().decisions)

    sp = measure(spark_changed, runs)
    nump = measure(lambda: np_offline_election(a, failed_broker, w, full=False), runs)
    orc = (
        measure(lambda: oracle_election(records, ref_view, failed_broker), runs)
        if oracle_on
        else None
    )
    record("offline election: changed + failed rows", sp, orc, nump, {"changed": changed})

    # -- 1b. the complete next generation (what a commit materialises)
    by_key = {(p.topic, p.partition): p for p in records}
    sp = measure(lambda: noop(election().partitions), runs)
    nump = measure(lambda: np_offline_election(a, failed_broker, w, full=True), runs)
    orc = (
        measure(lambda: oracle_next_generation(by_key, ref_view, failed_broker), runs)
        if oracle_on
        else None
    )
    record("offline election: next generation", sp, orc, nump, {"changed": changed})
    # Free the first record set before building the second (≈1 KB per record at 1e6).
    by_key.clear()
    records.clear()
    gc.collect()

    # -- 2. preferred-leader imbalance on a generation where leadership has moved
    moved = stored(imbalance_input(election().partitions), storage)
    drop(compact)
    cols = [
        s.TOPIC_INDEX,
        s.PARTITION,
        *(s.replica_col(k) for k in range(w)),
        *(s.isr_col(k) for k in range(w)),
        s.LEADER,
        s.LEADER_EPOCH,
        s.ZK_VERSION,
        s.CONTROLLER_EPOCH,
        s.STATE_CODE,
    ]
    b = to_arrays(moved, cols)
    orc_records = oracle_records(b, names, w) if oracle_on else []
    oracle_ratios = ref.imbalance_ratios(orc_records) if oracle_on else None
    summary = check_imbalance(imbalance_ratios(moved).collect(), np_imbalance(b), oracle_ratios)
    print(f"[{n:.0e}] imbalance agrees: {summary}")

    sp = measure(lambda: imbalance_ratios(moved).collect(), runs)
    nump = measure(lambda: np_imbalance(b), runs)
    orc = measure(lambda: ref.imbalance_ratios(orc_records), runs) if oracle_on else None
    record("imbalance ratio per broker", sp, orc, nump, summary)

    drop(moved)
    topics.unpersist()
    orc_records.clear()
    gc.collect()
    for row in results:
        row["setup_s"] = setup_s
    return results


# ---- report --------------------------------------------------------------------------------------


def fmt(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "| operation | partitions | Spark s | oracle s | numpy s | Spark/oracle | Spark/numpy |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['operation']} | {r['partitions']:.0e} | {fmt(r['spark_s'])} | "
            f"{fmt(r['oracle_s'])} | {fmt(r['numpy_s'], 4)} | {fmt(r['spark_over_oracle'], 2)} | "
            f"{fmt(r['spark_over_numpy'], 1)} |"
        )
    return "\n".join(lines)


def machine(spark: SparkSession) -> dict[str, Any]:
    return {**environment(spark), "numpy": np.__version__}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e5,1e6,1e7", help="partition counts, comma separated")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per measurement")
    parser.add_argument("--oracle-max", default="1e6", help="largest size the oracle runs at")
    parser.add_argument("--failed-broker", type=int, default=0, help="the broker that fails")
    parser.add_argument("--driver-memory", default="6g", help="JVM heap (cached inputs at 1e7)")
    parser.add_argument(
        "--storage",
        choices=("checkpoint", "cache"),
        default="checkpoint",
        help="how the input table is held: as the controller holds a generation, or columnar",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark conf for experiments (repeatable; recorded in the JSON)",
    )
    parser.add_argument("--out", default="bench/results/elections.json")
    args = parser.parse_args(argv)
    sizes = parse_sizes(args.sizes)
    for n in sizes:
        if n % PARTITIONS_PER_TOPIC:
            parser.error(
                f"size {n} is not a multiple of {PARTITIONS_PER_TOPIC} partitions per topic"
            )

    started = time.perf_counter()
    extra = dict(kv.split("=", 1) for kv in args.conf)
    spark = get_spark(MASTER, {"spark.driver.memory": args.driver_memory, **extra})
    info = machine(spark)
    load_start = os.getloadavg()
    results: list[dict[str, Any]] = []
    for n in sizes:
        results += bench_size(
            spark, n, args.runs, int(float(args.oracle_max)), args.failed_broker, args.storage
        )
    load_end = os.getloadavg()

    table = markdown(results)
    line = (
        f"Machine: {info['cores']} cores, Spark master {info['spark_master']}, "
        f"Java {info['java']}, pyspark {info['pyspark']}, Python {info['python']}, "
        f"numpy {info['numpy']}; input held as {args.storage}; load average (1/5/15 min) at start "
        f"{'/'.join(f'{x:.2f}' for x in load_start)}, at end {'/'.join(f'{x:.2f}' for x in load_end)}; "
        f"medians of {args.runs} runs after one warm-up."
    )
    print()
    print(table)
    print()
    print(line)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "machine": info,
        "config": {
            "sizes": sizes,
            "runs": args.runs,
            "oracle_max": int(float(args.oracle_max)),
            "failed_broker": args.failed_broker,
            "storage": args.storage,
            "spark_conf": extra,
            "brokers": BROKERS,
            "racks": RACKS,
            "replication_factor": RF,
            "partitions_per_topic": PARTITIONS_PER_TOPIC,
            "seed": SEED,
            "imbalance_moved_percent": MOVED_PERCENT,
            "imbalance_no_leadership_percent": NO_LEADERSHIP_PERCENT,
        },
        "load_avg_start": load_start,
        "load_avg_end": load_end,
        "total_s": time.perf_counter() - started,
        "results": results,
        "markdown": table,
    }
    out.write_text(json.dumps(doc, indent=2))
    print(f"wrote {out} ({doc['total_s']:.0f}s total)")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
