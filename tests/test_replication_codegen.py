"""The replication table's transforms compile to generated code at the widths of real replica
sets (RF 3, and 4 while a replica moves), replication throttles included: a plan past the JVM's
64 KB method limit runs without generated code, seconds slower per step at scale (Spark only
logs it)."""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from controller.emulation.replica_logs import WRITTEN_SCHEMA, empty_frame
from statemachines import fetch_shares as fs
from statemachines import isr_expiration as ie
from statemachines import leader_and_isr as lai
from statemachines import replication as r
from statemachines import replication_throttles as rt
from statemachines import schemas as s
from statemachines.local_rows import local_frame

BROKERS = range(1, 101)  # as many literals as the benchmark's clusters carry


def _decided(spark: SparkSession, w: int) -> DataFrame:
    rows = []
    for p in range(8):
        replicas = [1 + (p + k) % 12 for k in range(w)]
        rows.append((0, p, *replicas, *replicas, replicas[0], 0, 0, 1, *[0] * w))
    columns = [f"{s.TOPIC_INDEX} int", f"{s.PARTITION} int"]
    columns += [f"{s.replica_col(k)} int" for k in range(w)]
    columns += [f"{s.isr_col(k)} int" for k in range(w)]
    columns += [f"{c} int" for c in (s.LEADER, s.LEADER_EPOCH, s.ZK_VERSION, s.CONTROLLER_EPOCH)]
    columns += [f"{lai.sent_epoch_col(k)} int" for k in range(w)]
    return spark.createDataFrame(rows, ", ".join(columns))


def _largest_methods(df: DataFrame) -> list[int]:
    df.collect()  # the adaptive plan is final once it has run
    subtrees = df._jdf.queryExecution().debug().codegenToSeq()
    return [subtrees.apply(i)._3().maxMethodCodeSize() for i in range(subtrees.size())]


@pytest.mark.parametrize(("w", "count_rule"), [(3, False), (4, True)])
def test_every_step_of_the_replication_table_is_generated_code(
    spark: SparkSession, w: int, count_rule: bool
) -> None:
    decided = _decided(spark, w)
    table = lai.receive(empty_frame(spark, w), decided, frozenset(), True, 0).localCheckpoint()
    brokers = frozenset(BROKERS)
    c = r.Conditions(
        start_ms=0,
        fetching=brokers,
        serving=brokers,
        fetch_share=dict.fromkeys(BROKERS, 1e6),
        caught_share=dict.fromkeys(BROKERS, 1e12),
        # Throttles on both sides, listed past ten replicas (a hash-set lookup) and a topic '*'.
        throttles=rt.Throttles(
            leader=rt.ThrottledReplicas(frozenset((0, p, b) for p in range(8) for b in BROKERS)),
            follower=rt.ThrottledReplicas(frozenset({(0, 1, 2)}), frozenset({0})),
            leader_share=dict.fromkeys(BROKERS, 5e5),
            follower_share=dict.fromkeys(BROKERS, 2e5),
        ),
        rates={0: 10.0},
        rate_anchors={0: 0},
        bytes_per_record={0: 1024},
        min_isr={0: 1},
    )
    rule = ie.IsrRule(30_000, count_rule=count_rule)
    written = local_frame(spark, [(0, 1, [1], 1)], WRITTEN_SCHEMA)
    halves: list[DataFrame] = []

    def materialize(df: DataFrame) -> DataFrame:
        halves.append(df.localCheckpoint())
        return halves[-1]

    plans = {
        "receive": lai.receive(table, decided, frozenset([2]), True, 100, brokers, materialize),
        "advance": r.advance(table, c, 1_000),
        "fetch_stats": fs.fetch_stats(table, c),
        "isr_updates": ie.isr_updates(table, c, rule, frozenset([1]), 1_000),
        "outlook": ie.outlook(table, c, rule, brokers, dict.fromkeys(BROKERS, 0), 0),
        "with_isr": ie.with_isr(table, written),
        "append": lai.append(table, F.lit(True), brokers, 5, "1", F.lit(1)),
        "lose_unflushed": lai.lose_unflushed(table, [1]),
        "divergent": table.select(lai.divergent(w)),
    }
    sizes = {name: _largest_methods(df) for name, df in plans.items()}
    assert halves, "receive materialized its first half"
    failed = {
        name: found for name, found in sizes.items() if not all(0 <= n < 64 * 1024 for n in found)
    }
    assert not failed, failed
