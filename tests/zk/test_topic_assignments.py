"""Topic znode payloads decoded by Spark: the same rows as the model's decoding, the same errors."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.partition_store.topic_assignments import _decoded, topic_assignments
from controller.zk import MalformedZnodeError
from controller.zk.models import TopicAssignment
from controller.zk.paths import TopicZNode
from statemachines.local_rows import local_frame
from tests.test_checkpoint import checkpointed_rdd_id, persisted_rdd_ids


def _model_rows(payloads: list[tuple[str, bytes]]) -> tuple[list[tuple], dict[str, int], int]:
    """What ``TopicZNode.decode`` makes of the payloads, as assignment rows."""
    rows, counts, width = [], {}, 0
    for topic, payload in payloads:
        a = TopicZNode.decode(payload, TopicZNode.path(topic))
        for key, replicas in a.partitions.items():
            adding = (a.adding_replicas or {}).get(key, [])
            removing = (a.removing_replicas or {}).get(key, [])
            rows.append((topic, int(key), replicas, adding, removing))
            width = max(width, len(replicas))
        counts[topic] = len(a.partitions)
    return sorted(rows), counts, width


def _spark_rows(
    spark, payloads: list[tuple[str, bytes]]
) -> tuple[list[tuple], dict[str, int], int]:
    read = topic_assignments(spark, payloads)
    rows = sorted(tuple(r) for r in read.rows.collect())
    read.release()
    return rows, read.counts, read.width


def _vouched(spark, payloads: list[tuple[str, bytes]]) -> dict[str, bool]:
    rows = [(t, p.decode()) for t, p in payloads]
    raw = local_frame(spark, rows, "topic string, payload string")
    return {r[0]: r[1] for r in _decoded(raw).select("topic", "_vouched").collect()}


CANONICAL = [
    ("v3", TopicZNode.encode(TopicAssignment(partitions={"0": [1, 2, 3], "1": [2, 3, 1]}))),
    (
        "moving",
        TopicZNode.encode(
            TopicAssignment(
                partitions={"0": [4, 5, 1, 2], "1": [2, 3]},
                adding_replicas={"0": [4, 5]},
                removing_replicas={"0": [1, 2]},
                topic_id="AAAAAAAAAAAAAAAAAAAAAA",
            )
        ),
    ),
    ("v1", TopicZNode.encode(TopicAssignment(version=1, partitions={"7": [3]}))),
    ("v2", TopicZNode.encode(TopicAssignment(version=2, partitions={"0": []}))),
    ("none", TopicZNode.encode(TopicAssignment(partitions={}))),
]


def test_the_decoded_payloads_stay_cached_until_released(spark) -> None:
    read = topic_assignments(spark, CANONICAL)
    assert read.rows.count() == 6  # reads them, after the summary's job materialised them
    rdd = checkpointed_rdd_id(read.decoded)
    assert rdd in persisted_rdd_ids(spark)
    read.release()
    assert rdd not in persisted_rdd_ids(spark)


def test_canonical_payloads_are_decoded_by_spark_as_the_model_decodes_them(spark) -> None:
    # A topic being reassigned is left to the model (rare, and its maps need more checks).
    assert _vouched(spark, CANONICAL) == {t: t != "moving" for t, _ in CANONICAL}
    assert _spark_rows(spark, CANONICAL) == _model_rows(CANONICAL)


# Valid for the model, but not the exact serialization of what Spark read: decoded by the model.
ODD = [
    ("spaced", b'{ "version": 3, "partitions": {"0": [1, 2]} }'),
    ("reordered", b'{"partitions":{"1":[2],"0":[1]},"version":2,"removing_replicas":{"1":[2]}}'),
    ("twice", b'{"version":3,"partitions":{"0":[1],"0":[2,3]}}'),
    ("null_maps", b'{"partitions":{"0":[1]},"adding_replicas":null,"removing_replicas":null}'),
    ("minus_zero", b'{"partitions":{"0":[-0,1]}}'),
    ("key_twice", b'{"version":1,"partitions":{"0":[1]},"version":3}'),
]


def test_odd_but_valid_payloads_are_read_by_the_model(spark) -> None:
    vouched = _vouched(spark, ODD)
    assert not any(
        vouched[t] for t in ("twice", "null_maps", "minus_zero", "reordered", "key_twice")
    )
    assert _spark_rows(spark, [*CANONICAL, *ODD]) == _model_rows([*CANONICAL, *ODD])


BAD = [
    b'{"version":3,"partitions":{"0":[1]}} trailing',
    b'{"version":3,"partitions":{"0":[1]},"extra":1}',
    b'{"version":"3","partitions":{"0":[1]}}',
    b'{"version":4,"partitions":{"0":[1]}}',
    b'{"version":3,"partitions":{"0":[1.0]}}',
    b'{"version":3,"partitions":{"0":[true]}}',
    b'{"version":3,"partitions":{"0":["1"]}}',
    b'{"version":3,"partitions":{"0":[null]}}',
    b'{"version":3,"partitions":{"0":null}}',
    b'{"version":3,"partitions":{"00":[1]}}',
    b'{"version":3,"partitions":{"zero":[1]}}',
    b'{"version":3}',
    b'{"version":3,"partitions":[1]}',
    b'{"version":1,"partitions":{"0":[1]},"adding_replicas":{"0":[2]}}',
    b'{"version":3,"partitions":{"0":[1]},"removing_replicas":{"1":[1]}}',
    b'{"version":2,"partitions":{"0":[1]},"topic_id":"AAAAAAAAAAAAAAAAAAAAAA"}',
    b'{"version":3,"partitions":{"0":[1]},"topic_id":5}',
    b'{"version":3,"partitions":{"0":[1]},"topic_id":"\xff"}',  # not UTF-8
    b"[1]",
    b"not json",
    b"",
]


@pytest.mark.parametrize("payload", BAD)
def test_a_payload_the_model_rejects_raises_its_error(spark, payload) -> None:
    path = TopicZNode.path("bad")
    with pytest.raises(MalformedZnodeError) as expected:
        TopicZNode.decode(payload, path)
    with pytest.raises(MalformedZnodeError) as got:
        topic_assignments(spark, [*CANONICAL, ("bad", payload)])
    assert str(got.value) == str(expected.value)


_ids = st.lists(st.integers(0, 50), max_size=4)


@st.composite
def _payload(draw) -> bytes:
    n = draw(st.integers(0, 6))
    partitions = {str(p): draw(_ids) for p in range(n)}
    version = draw(st.sampled_from([None, 1, 2, 3]))
    doc: dict = {} if version is None else {"version": version}
    doc["partitions"] = partitions
    if version != 1 and partitions and draw(st.booleans()):
        keys = draw(st.lists(st.sampled_from(sorted(partitions)), unique=True))
        doc["adding_replicas"] = {k: draw(_ids) for k in keys}
        doc["removing_replicas"] = {}
    items = list(doc.items())
    if draw(st.booleans()):
        items.reverse()
    return json.dumps(dict(items), separators=draw(st.sampled_from([(",", ":"), (", ", ": ")])))


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_payload(), max_size=12))
def test_spark_decoding_equals_the_model_on_random_payloads(spark, docs) -> None:
    payloads = [(f"t{i}", doc.encode()) for i, doc in enumerate(docs)]
    assert _spark_rows(spark, payloads) == _model_rows(payloads)
