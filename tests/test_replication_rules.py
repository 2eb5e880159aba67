"""Replica-side rules (spec §12.1–12.3, §13.1–13.3): the oracle against the spec's text and
worked examples, hypothesis properties of the oracle, and the Spark Columns of
``statemachines.replication_epochs`` against the oracle (one Spark job per example)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, IntegerType, LongType, StructField, StructType

from statemachines import reference_replication as r
from statemachines import replication_epochs as rx
from statemachines.reference_replication import Epochs, FollowerProgress

LAG = 30_000

# §12.1 Follower progress


def test_fetch_at_the_leader_leo_is_caught_up_now() -> None:
    p = r.record_fetch(FollowerProgress(5, 8, 1_000, 500), 10, 10, 2_000)
    assert p == FollowerProgress(10, 10, 2_000, 2_000)


def test_fetch_trailing_a_busy_leader_by_one_batch_was_caught_up_at_the_previous_fetch() -> None:
    p = r.record_fetch(FollowerProgress(5, 8, 1_000, 500), 8, 12, 2_000)
    assert p == FollowerProgress(8, 12, 2_000, 1_000)


def test_fetch_behind_the_previous_leader_leo_keeps_the_caught_up_time() -> None:
    p = r.record_fetch(FollowerProgress(5, 8, 1_000, 500), 7, 12, 2_000)
    assert p == FollowerProgress(7, 12, 2_000, 500)


def test_become_leader_resets_followers_by_isr_membership() -> None:
    p = FollowerProgress(7, 9, 100, 50)
    assert r.on_become_leader(p, 12, 5_000, True, False) == FollowerProgress(-1, 12, 5_000, 5_000)
    assert r.on_become_leader(p, 12, 5_000, False, False) == FollowerProgress(-1, 12, 5_000, 0)
    assert r.on_become_leader(p, 12, 5_000, True, True) == FollowerProgress(7, 12, 5_000, 5_000)


# §12.2 Shrink rule


def test_worked_timeline_stalled_follower_kept_at_30s_removed_at_45s() -> None:
    period = r.isr_check_period_ms(LAG, count_rule=False)
    assert period == 15_000
    # The producer writes continuously: one record per millisecond on the leader.
    progress = r.record_fetch(FollowerProgress(0, 0, 0, 0), 2_000, 2_000, 2_000)
    assert progress.last_caught_up_ms == 2_000
    verdicts = {
        t: r.out_of_sync_by_time(t, progress.leo, progress.last_caught_up_ms, t, LAG)
        for t in range(period, 4 * period, period)
    }
    assert verdicts == {15_000: False, 30_000: False, 45_000: True}


def test_stopped_follower_with_exactly_the_leader_leo_is_not_removed() -> None:
    assert not r.out_of_sync_by_time(40, 40, 0, 10 * LAG, LAG)
    assert r.out_of_sync_by_time(41, 40, 0, 10 * LAG, LAG)


def test_legacy_count_rule_removes_stuck_or_slow_followers() -> None:
    lag, most = 10_000, 4_000
    assert r.isr_check_period_ms(lag, count_rule=True) == lag
    assert r.out_of_sync_by_count(50, 50, 0, lag + 1, lag, most)  # stuck, even when level
    assert not r.out_of_sync_by_count(50, 50, 0, lag, lag, most)
    assert r.out_of_sync_by_count(5_000, 999, 9_000, 9_500, lag, most)  # slow, though fetching
    assert not r.out_of_sync_by_count(5_000, 1_000, 9_000, 9_500, lag, most)
    assert not r.out_of_sync_by_count(5_000, -1, 9_000, 9_500, lag, most)  # unknown LEO


# §12.3 Expand rule and high watermark


def test_expand_needs_the_hw_and_the_epoch_start_offset_not_recent_fetches() -> None:
    assert r.may_expand(False, 10, 10, 8)
    assert not r.may_expand(True, 10, 10, 8)
    assert not r.may_expand(False, 9, 10, 8)
    assert not r.may_expand(False, 10, 7, 11)


def test_high_watermark_counts_isr_and_recently_caught_up_followers() -> None:
    now = 100_000
    followers = [(8, True, 0), (6, False, now - LAG), (3, False, now - LAG - 1)]
    assert r.high_watermark(4, 10, followers, now, LAG) == 6
    assert r.high_watermark(4, 10, [], now, LAG) == 10


def test_high_watermark_never_moves_back() -> None:
    assert r.high_watermark(7, 10, [(-1, True, 0), (5, True, 0)], 1_000, LAG) == 7


# §13.1 The cache


def test_assign_ignores_later_batches_of_the_latest_epoch() -> None:
    assert r.assign(((0, 0), (1, 5)), 1, 9) == ((0, 0), (1, 5))


def test_assign_drops_entries_from_the_end_that_would_break_the_order() -> None:
    assert r.assign(((0, 0), (1, 5)), 1, 3) == ((0, 0), (1, 3))
    assert r.assign(((0, 0), (1, 5), (3, 7)), 2, 6) == ((0, 0), (1, 5), (2, 6))
    assert r.assign(((0, 0), (1, 5), (3, 7)), 4, 5) == ((0, 0), (4, 5))
    assert r.assign((), 2, 0) == ((2, 0),)


@pytest.mark.parametrize(("epoch", "start"), [(-1, 0), (0, -1)])
def test_assign_rejects_negative_values(epoch: int, start: int) -> None:
    with pytest.raises(ValueError):
        r.assign(((0, 0),), epoch, start)


def test_truncate_from_end_and_start() -> None:
    cache = ((0, 0), (2, 5), (3, 9))
    assert r.truncate_from_end(cache, 9) == ((0, 0), (2, 5))
    assert r.truncate_from_end(cache, 5) == ((0, 0),)
    assert r.truncate_from_end(cache, -1) == cache
    assert r.truncate_from_start(cache, 6) == ((2, 6), (3, 9))
    assert r.truncate_from_start(cache, 9) == ((3, 9),)
    assert r.truncate_from_start(((2, 5),), 3) == ((2, 5),)


def test_end_offset_for_each_bullet() -> None:
    cache = ((1, 0), (3, 5), (4, 9))
    assert r.end_offset_for(cache, 12, -1) == (-1, -1)
    assert r.end_offset_for(cache, 12, 4) == (4, 12)
    assert r.end_offset_for(cache, 12, 7) == (-1, -1)  # no higher epoch
    assert r.end_offset_for(cache, 12, 0) == (0, 0)  # no floor: the requested epoch
    assert r.end_offset_for(cache, 12, 2) == (1, 5)
    assert r.end_offset_for(cache, 12, 3) == (3, 9)
    assert r.end_offset_for((), 12, 0) == (-1, -1)


# §13.3 The two KIP-101 scenarios, step by step


def test_kip101_scenario1_hw_rule_loses_the_acknowledged_message() -> None:
    a, b = r.assign((), 0, 0), r.assign((), 0, 0)  # m1 at 0 and m2 at 1 in epoch 0
    # Step 3: B (LEO 2, HW 1) restarts; A is still leader of epoch 0 with LEO 2.
    b_at = r.truncation_offset(b, 2, 1, a, 2, use_epochs=False)
    assert b_at == 1
    # Step 4: A crashes, B becomes leader of epoch 1 at its LEO.
    b = r.assign(r.after_truncation(b, b_at), 1, b_at)
    # Step 5: A (LEO 2, HW 2) returns as follower: keeps m2, then meets B's LEO 1.
    a_at = r.truncation_offset(a, 2, 2, b, b_at, use_epochs=False)
    assert a_at == 2
    assert r.fetch_start(a_at, b_at) == 1  # m2 is gone from both replicas


def test_kip101_scenario1_epoch_rule_keeps_the_acknowledged_message() -> None:
    a, b = r.assign((), 0, 0), r.assign((), 0, 0)
    b_at = r.truncation_offset(b, 2, 1, a, 2, use_epochs=True)
    assert b_at == 2  # A: "epoch 0 ends at 2"
    b = r.assign(r.after_truncation(b, b_at), 1, b_at)
    a_at = r.truncation_offset(a, 2, 2, b, b_at, use_epochs=True)
    assert r.fetch_start(a_at, b_at) == 2  # both keep m1, m2


def test_kip101_scenario2_hw_rule_diverges_epoch_rule_truncates() -> None:
    a = r.assign((), 0, 0)  # m1, m2: LEO 2, HW 2
    b = r.assign((), 0, 0)  # m2 lost in the power loss: LEO 1
    b = r.assign(b, 1, 1)  # B leads epoch 1 at its LEO and accepts m3 at offset 1
    assert b == ((0, 0), (1, 1))
    assert r.end_offset_for(b, 2, 0) == (0, 1)
    assert r.truncation_offset(a, 2, 2, b, 2, use_epochs=False) == 2  # keeps m2 at offset 1
    assert r.truncation_offset(a, 2, 2, b, 2, use_epochs=True) == 1  # drops m2, fetches m3


def test_kip279_follower_with_an_epoch_the_leader_never_saw_asks_again() -> None:
    follower, leader = ((0, 0), (2, 5)), ((0, 0), (1, 3), (3, 6))
    # The leader ends epoch 2 where its epoch 3 starts, reported as its epoch 1.
    assert r.end_offset_for(leader, 8, 2) == (1, 6)
    # The follower never saw epoch 1: it truncates to where its epoch 0 ends and asks again.
    assert r.end_offset_for(follower, 7, 1) == (0, 5)
    assert r.end_offset_for(leader, 8, 0) == (0, 3)
    assert r.truncation_offset(follower, 7, 0, leader, 8, use_epochs=True) == 3


def test_kip279_short_lived_leader_entry_without_records_is_dropped() -> None:
    # The follower led epoch 2 briefly: assigned at its LEO 5, wrote nothing.
    follower = r.assign(((0, 0),), 2, 5)
    leader = ((0, 0), (1, 3), (3, 6))
    assert r.after_truncation(follower, 5) == ((0, 0),)
    assert r.truncation_offset(follower, 5, 0, leader, 8, use_epochs=True) == 3


def test_empty_cache_or_no_epochs_falls_back_to_the_high_watermark() -> None:
    assert r.truncation_offset((), 9, 4, ((0, 0),), 9, use_epochs=True) == 4
    assert r.truncation_offset(((0, 0),), 9, 4, ((0, 0),), 9, use_epochs=False) == 4
    assert r.truncation_offset(((0, 0),), 3, 4, ((0, 0),), 9, use_epochs=False) == 3
    # The leader knows no epoch at or above the follower's: its initial fetch offset.
    assert r.truncation_offset(((5, 0),), 9, 4, ((0, 0), (2, 3)), 9, use_epochs=True) == 4


# Hypothesis: properties of the oracle

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), st.integers(0, 8), st.integers(0, 30)),
        st.tuples(st.just("end"), st.integers(-1, 30), st.just(0)),
        st.tuples(st.just("start"), st.integers(0, 30), st.just(0)),
    ),
    max_size=25,
)


def _increasing(cache: Epochs) -> bool:
    return all(a[0] < b[0] and a[1] < b[1] for a, b in pairwise(cache))


@settings(max_examples=300, deadline=None)
@given(ops=OPS)
def test_cache_stays_strictly_increasing(ops: list[tuple[str, int, int]]) -> None:
    cache: Epochs = ()
    for op, x, y in ops:
        if op == "assign":
            cache = r.assign(cache, x, y)
        elif op == "end":
            cache = r.truncate_from_end(cache, x)
        else:
            cache = r.truncate_from_start(cache, x)
        assert _increasing(cache)


@st.composite
def caches(draw: st.DrawFn, max_size: int = 5) -> Epochs:
    """A strictly increasing cache."""
    steps = draw(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 4)), max_size=max_size))
    epoch, start, out = draw(st.integers(-1, 2)), draw(st.integers(-1, 3)), []
    for de, ds in steps:
        epoch, start = epoch + de, start + ds
        out.append((epoch, start))
    return tuple(out)


@dataclass(frozen=True)
class Diverged:
    """Two replicas of one history that diverged: the leader leads the newest epoch."""

    follower: Epochs
    follower_leo: int
    follower_hw: int
    leader: Epochs
    leader_leo: int
    common: int


def _log_cache(tags: list[int], empty_epochs: dict[int, int]) -> Epochs:
    """The cache of a log whose record i has epoch tags[i]; ``empty_epochs`` maps an epoch led
    without writing to the LEO it was assigned at (KIP-279)."""
    events = [*enumerate(tags), *((o, e) for e, o in empty_epochs.items())]
    cache: Epochs = ()
    for offset, epoch in sorted(events, key=lambda x: (x[1], x[0])):
        cache = r.assign(cache, epoch, offset)
    return cache


@st.composite
def diverged(draw: st.DrawFn) -> Diverged:
    counts = st.integers(0, 3)
    shared: list[int] = []
    shared_epochs = draw(st.lists(counts, max_size=4))
    for e, n in enumerate(shared_epochs):
        shared += [e] * n
    follower, leader = list(shared), list(shared)
    if shared:
        # Either replica may hold more of the last shared epoch than the other.
        follower += [shared[-1]] * draw(counts)
        leader += [shared[-1]] * draw(counts)
    common = min(len(follower), len(leader))
    f_empty: dict[int, int] = {}
    l_empty: dict[int, int] = {}
    epoch = len(shared_epochs)
    for to_follower in draw(st.lists(st.booleans(), max_size=4)):
        log, empty = (follower, f_empty) if to_follower else (leader, l_empty)
        n = draw(counts)
        if n == 0:
            empty[epoch] = len(log)
        log += [epoch] * n
        epoch += 1
    l_empty[epoch] = len(leader)  # the current leader's epoch, assigned on becoming leader
    leader += [epoch] * draw(counts)
    return Diverged(
        _log_cache(follower, f_empty),
        len(follower),
        draw(st.integers(0, common)),
        _log_cache(leader, l_empty),
        len(leader),
        common,
    )


@settings(max_examples=300, deadline=None)
@given(f=caches(), lead=caches(), offsets=st.tuples(*[st.integers(0, 25)] * 3), use=st.booleans())
def test_truncation_offset_never_exceeds_the_follower_leo(
    f: Epochs, lead: Epochs, offsets: tuple[int, int, int], use: bool
) -> None:
    leo, hw, leader_leo = offsets
    assert r.truncation_offset(f, leo, hw, lead, leader_leo, use) <= leo


@settings(max_examples=300, deadline=None)
@given(d=diverged())
def test_epoch_rule_keeps_exactly_the_common_prefix(d: Diverged) -> None:
    state = (d.follower, d.follower_leo, d.follower_hw, d.leader, d.leader_leo)
    assert r.truncation_offset(*state, use_epochs=True) == d.common
    assert r.truncation_offset(*state, use_epochs=False) == d.follower_hw


# Hypothesis: the Spark Columns equal the oracle, one job per example

SPARK_SETTINGS = settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
CASE_SCHEMA = StructType(
    [
        StructField("f", rx.EPOCHS_TYPE),
        StructField("fl", LongType()),
        StructField("fh", LongType()),
        StructField("l", rx.EPOCHS_TYPE),
        StructField("ll", LongType()),
        StructField("use", BooleanType()),
        StructField("e", IntegerType()),
        StructField("s", LongType()),
        StructField("o", LongType()),
    ]
)
Case = tuple[Epochs, int, int, Epochs, int, bool, int, int, int]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    if draw(st.booleans()):
        d = draw(diverged())
        f, fl, fh, lead, ll = d.follower, d.follower_leo, d.follower_hw, d.leader, d.leader_leo
    else:
        f, lead = draw(caches()), draw(caches())
        fl, fh, ll = (draw(st.integers(0, 25)) for _ in range(3))
    return (
        f,
        fl,
        fh,
        lead,
        ll,
        draw(st.booleans()),
        draw(st.integers(-1, 20)),
        draw(st.integers(0, 25)),
        draw(st.integers(-1, 25)),
    )


@SPARK_SETTINGS
@given(batch=st.lists(cases(), min_size=50, max_size=200))
def test_spark_epoch_rules_equal_the_oracle(spark: SparkSession, batch: list[Case]) -> None:
    df = spark.createDataFrame(batch, CASE_SCHEMA)
    f, lead, e = F.col("f"), F.col("l"), F.col("e")
    epoch = F.greatest(e, F.lit(0))  # assign rejects negative epochs
    got = df.select(
        rx.assign(f, epoch, F.col("s")),
        rx.truncate_from_end(f, F.col("o")),
        rx.end_offset_for(f, F.col("fl"), e),
        rx.truncation_offset(f, F.col("fl"), F.col("fh"), lead, F.col("ll"), F.col("use")),
    ).collect()
    for (c, fl, fh, ld, ll, use, ep, s, o), row in zip(batch, got, strict=True):
        assert [tuple(x) for x in row[0]] == list(r.assign(c, max(ep, 0), s))
        assert [tuple(x) for x in row[1]] == list(r.truncate_from_end(c, o))
        assert tuple(row[2]) == r.end_offset_for(c, fl, ep)
        assert row[3] == r.truncation_offset(c, fl, fh, ld, ll, use)


def test_spark_kip279_loop_on_literal_caches_with_a_python_flag(spark: SparkSession) -> None:
    follower = rx.epochs_literal(((0, 0), (2, 5)))
    leader = rx.epochs_literal(((0, 0), (1, 3), (3, 6)))
    leo, hw, leader_leo = (F.lit(v).cast("bigint") for v in (7, 0, 8))
    df = spark.range(1).select(
        rx.epochs_literal(()).alias("empty"),
        follower.alias("follower"),
        rx.truncation_offset(follower, leo, hw, leader, leader_leo, True).alias("epochs"),
        rx.truncation_offset(follower, leo, hw, leader, leader_leo, False).alias("hw"),
    )
    assert df.schema["follower"].dataType == rx.EPOCHS_TYPE
    row = df.collect()[0]
    assert row.empty == [] and [tuple(x) for x in row.follower] == [(0, 0), (2, 5)]
    assert (row.epochs, row.hw) == (3, 0)
    with pytest.raises(Exception, match="invalid leader epoch entry"):
        df.select(rx.assign(F.col("follower"), F.lit(-1), F.lit(3))).collect()
