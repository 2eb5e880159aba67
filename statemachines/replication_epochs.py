"""The leader epoch cache and the truncation rule of spec §13 as Column expressions.

A cache is a column of ``EPOCHS_TYPE``: ``(epoch, start_offset)`` structs, strictly increasing
in both, as ``statemachines.reference_replication`` holds them in tuples (that module is the
oracle). Every function is lazy: it builds an expression and runs nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    StructField,
    StructType,
)

from statemachines.reference_replication import UNDEFINED, Epochs

EPOCH = "epoch"
START_OFFSET = "start_offset"
OFFSET = "offset"

EPOCH_ENTRY_TYPE = StructType(
    [StructField(EPOCH, IntegerType()), StructField(START_OFFSET, LongType())]
)
EPOCHS_TYPE = ArrayType(EPOCH_ENTRY_TYPE)
# The answer of endOffsetFor / OffsetsForLeaderEpoch.
EPOCH_END_TYPE = StructType([StructField(EPOCH, IntegerType()), StructField(OFFSET, LongType())])

# The state of the §13.2 loop, one step per entry of the follower's cache.
_CACHE, _LEO, _FETCH, _DONE, _RESULT = "cache", "leo", "fetch_offset", "done", "result"
_LOOP_TYPE = StructType(
    [
        StructField(_CACHE, EPOCHS_TYPE),
        StructField(_LEO, LongType()),
        StructField(_FETCH, LongType()),
        StructField(_DONE, BooleanType()),
        StructField(_RESULT, LongType()),
    ]
)


def _entry(epoch: Column, start: Column) -> Column:
    return F.struct(epoch.cast("int").alias(EPOCH), start.cast("bigint").alias(START_OFFSET))


def _answer(epoch: Column, offset: Column) -> Column:
    return F.struct(epoch.cast("int").alias(EPOCH), offset.cast("bigint").alias(OFFSET))


def _undefined_answer() -> Column:
    return _answer(F.lit(UNDEFINED), F.lit(UNDEFINED))


def epochs_literal(cache: Epochs) -> Column:
    """``cache`` as a Column of ``EPOCHS_TYPE``."""
    if not cache:
        return F.array().cast(EPOCHS_TYPE)
    return F.array(*[_entry(F.lit(e), F.lit(s)) for e, s in cache]).cast(EPOCHS_TYPE)


def _last(cache: Column) -> Column:
    # ``get`` answers null past either end whatever the ANSI setting, unlike ``element_at``.
    return F.get(cache, F.size(cache) - 1)


def assign(cache: Column, epoch: Column, start: Column) -> Column:
    """§13.1 ``assign(epoch, start)`` (oracle: ``reference_replication.assign``).

    The oracle drops matching entries from the end; in a strictly increasing cache the entries
    with an epoch or start not below the new one's are exactly a suffix, so one filter keeps the
    rest. A negative epoch or start fails the query, as Kafka rejects it.
    """
    latest = _last(cache)
    ignored = F.coalesce((latest[EPOCH] == epoch) & (start >= latest[START_OFFSET]), F.lit(False))
    kept = F.filter(cache, lambda x: (x[EPOCH] < epoch) & (x[START_OFFSET] < start))
    appended = F.concat(kept, F.array(_entry(epoch, start))).cast(EPOCHS_TYPE)
    return (
        F.when((epoch < 0) | (start < 0), F.raise_error(F.lit("invalid leader epoch entry")))
        .when(ignored, cache)
        .otherwise(appended)
    )


def truncate_from_end(cache: Column, offset: Column) -> Column:
    """§13.1 ``truncateFromEnd(off)``: drop the entries starting at or after ``offset``; a
    negative offset keeps the cache (oracle: ``reference_replication.truncate_from_end``)."""
    kept = F.filter(cache, lambda x: x[START_OFFSET] < offset)
    return F.when(offset < 0, cache).otherwise(kept)


def _let(value: Column, body: Callable[[Column], Column]) -> Column:
    """``body(value)`` with ``value`` computed once: Column expressions are trees, and a value
    used several times would otherwise be copied (and evaluated) at every use, which makes the
    §13.2 loop's expression grow exponentially with its nesting."""
    return F.get(F.transform(F.array(value), body), 0)


def end_offset_for(cache: Column, leo: Column, epoch: Column) -> Column:
    """§13.1 ``endOffsetFor(e)`` as a struct ``(epoch int, offset bigint)`` (oracle:
    ``reference_replication.end_offset_for``).

    Epochs increase along the cache, so the ``n`` entries at or below ``e`` are its first ``n``:
    the floor entry is entry ``n - 1`` and the smallest higher one entry ``n`` (null past the
    ends).
    """

    def answer(e: Column) -> Column:
        def at(n: Column) -> Column:
            higher, floor = F.get(cache, n), F.get(cache, n - 1)
            return (
                F.when(e == UNDEFINED, _undefined_answer())
                .when(F.coalesce(_last(cache)[EPOCH] == e, F.lit(False)), _answer(e, leo))
                .when(higher.isNull(), _undefined_answer())
                .when(floor.isNull(), _answer(e, higher[START_OFFSET]))
                .otherwise(_answer(floor[EPOCH], higher[START_OFFSET]))
            )

        return _let(F.size(F.filter(cache, lambda x: x[EPOCH] <= e)), at)

    return _let(epoch, answer)


def _step(state: Column, leader: Column, leader_leo: Column) -> Column:
    """One OffsetsForLeaderEpoch round of §13.2 on a loop state not yet done."""
    cache, leo, fetch = state[_CACHE], state[_LEO], state[_FETCH]

    def done(result: Column) -> Column:
        return F.struct(
            cache.alias(_CACHE),
            leo.alias(_LEO),
            fetch.alias(_FETCH),
            F.lit(True).alias(_DONE),
            result.cast("bigint").alias(_RESULT),
        ).cast(_LOOP_TYPE)

    def repeat(intermediate: Column) -> Column:
        return F.struct(
            truncate_from_end(cache, intermediate).alias(_CACHE),
            intermediate.alias(_LEO),
            intermediate.alias(_FETCH),
            F.lit(False).alias(_DONE),
            F.lit(None).cast("bigint").alias(_RESULT),
        ).cast(_LOOP_TYPE)

    def decide(asked: Column, own: Column) -> Column:
        leader_epoch, leader_end = asked[EPOCH], asked[OFFSET]
        own_epoch, own_end = own[EPOCH], own[OFFSET]
        return (
            F.when(leader_end == UNDEFINED, done(fetch))
            .when(own_end == UNDEFINED, done(F.least(leader_end, leo)))
            .when(own_epoch == leader_epoch, done(F.least(own_end, leader_end, leo)))
            .otherwise(repeat(F.least(own_end, leo)))
        )

    def with_answer(asked: Column) -> Column:
        return _let(end_offset_for(cache, leo, asked[EPOCH]), lambda own: decide(asked, own))

    asked = end_offset_for(leader, leader_leo, _last(cache)[EPOCH])
    return F.when(F.size(cache) == 0, done(fetch)).otherwise(_let(asked, with_answer))


def truncation_offset(
    follower: Column,
    follower_leo: Column,
    follower_hw: Column,
    leader: Column,
    leader_leo: Column,
    use_epochs: Column | bool,
) -> Column:
    """§13.2: the offset a follower truncates to, a bigint (oracle:
    ``reference_replication.truncation_offset``, whose docstring has the rule).

    The loop is one ``aggregate`` over the follower's cache: a step per entry. That is enough:
    every round that does not decide drops at least one entry (the smallest epoch above the
    leader's answer) and a decided state passes through the remaining steps unchanged. A state
    still undecided at the end has emptied its cache, so it falls back to its fetch offset, as
    the oracle does.
    """
    fetch_offset = F.least(follower_hw, follower_leo).cast("bigint")
    start = F.struct(
        follower.alias(_CACHE),
        follower_leo.cast("bigint").alias(_LEO),
        fetch_offset.alias(_FETCH),
        F.lit(False).alias(_DONE),
        F.lit(None).cast("bigint").alias(_RESULT),
    ).cast(_LOOP_TYPE)
    looped = F.aggregate(
        follower,
        start,
        lambda state, _: F.when(state[_DONE], state).otherwise(_step(state, leader, leader_leo)),
        lambda state: F.when(state[_DONE], state[_RESULT]).otherwise(state[_FETCH]),
    )
    if isinstance(use_epochs, bool):
        return looped if use_epochs else fetch_offset
    return F.when(use_epochs, looped).otherwise(fetch_offset)


def copy_lineage(follower: Column, leader: Column, start: Column, end: Column) -> Column:
    """The follower's lineage after copying the leader's records ``[start, end)``: each leader
    run that overlaps the range is assigned from where the copy enters it (§13.1: followers
    take the epochs of the batches they fetch)."""
    sentinel = F.struct(
        F.lit(-1).alias("epoch"), F.lit(None).cast(LongType()).alias("start_offset")
    )
    nexts = F.concat(F.slice(leader, 2, 1 << 30), F.array(sentinel))
    runs = F.zip_with(leader, nexts, lambda a, b: F.struct(a.alias("run"), b.alias("next")))
    overlapping = F.filter(
        runs,
        lambda r: (
            (r["run"]["start_offset"] < end)
            & (r["next"]["start_offset"].isNull() | (r["next"]["start_offset"] > start))
        ),
    )
    return F.aggregate(
        overlapping,
        follower,
        lambda acc, r: assign(acc, r["run"]["epoch"], F.greatest(r["run"]["start_offset"], start)),
    )
