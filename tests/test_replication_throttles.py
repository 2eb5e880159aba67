"""Kafka's replication throttles: the throttled-replicas format as Kafka validates it, the scenario
inputs that set throttles, the shares the brokers deal of their rates, the lagging followers
outside the ISR they cap (rows, and Spark against the rows), and what
``kafka-reassign-partitions --throttle`` writes."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pyspark.sql import SparkSession

from controller.emulation.replication_quotas import KEEPS_UP_BYTES_PER_S, FetchGroup, deal
from controller.zk import InMemoryZooKeeper, connect
from controller.zk.admin_zk_client import set_broker_config
from spark_app.scenario import ScenarioError, scenario_from_data
from statemachines import fetch_shares as fs
from statemachines import replication as r
from statemachines import replication_rows as rr
from statemachines import replication_throttles as rt
from statemachines import schemas as s
from tests.test_replication_table import _conditions, _frame, _row, _schema, _slot
from whatif.execute_throttles import throttle_writes
from whatif.execute_waves import Move

NO = s.NO_LEADER


# -- the format ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("0:1,1:2", [(0, 1), (1, 2)]),
        (" 0:1 , 10:3 ", [(0, 1), (10, 3)]),  # the validator trims each entry
        ("*", "*"),
        (" * ", "*"),
        ("", []),  # an empty list: no throttle (removeThrottle)
        ("0:1,", [(0, 1)]),
    ],
)
def test_throttled_replicas_kafka_accepts(value: str, parsed: object) -> None:
    assert rt.parse(value) == parsed


@pytest.mark.parametrize("value", ["0:1,*", "0-1", "1:2:3", "a:1", "0:", "all", "0:1;1:2"])
def test_throttled_replicas_kafka_refuses(value: str) -> None:
    with pytest.raises(ValueError, match=r"literal '\*' or a list of replicas"):
        rt.parse(value)


# -- scenario inputs ----------------------------------------------------------------------------


def _scenario(events: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "name": "t",
        "cluster": {
            "brokers": [{"id": 1}, {"id": 2}, {"id": 3}],
            "topics": [{"name": "t", "partitions": 1, "replication_factor": 2}],
        },
        "events": events,
        "until": "10s",
        **extra,
    }


def _problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ScenarioError) as err:
        scenario_from_data(data)
    return [(str(path), message) for path, message in err.value.problems]


def test_set_broker_config_turns_replication_on_and_reads_null_as_a_deletion() -> None:
    rates = {
        "leader.replication.throttled.rate": "1024000",
        "follower.replication.throttled.rate": None,
    }
    s = scenario_from_data(
        _scenario([{"at": "1s", "type": "set_broker_config", "brokers": [1, 3], "config": rates}])
    )
    (e,) = s.events
    assert s.replication_enabled()
    assert e.config.overrides() == {"leader.replication.throttled.rate": "1024000"}
    assert e.config.deleted() == ["follower.replication.throttled.rate"]
    again = scenario_from_data(s.model_dump(by_alias=True))  # a key left out stays out
    assert again.events[0].config.deleted() == ["follower.replication.throttled.rate"]


def test_bad_throttle_inputs_name_the_field_and_the_fix() -> None:
    def event(kind: str, config: dict[str, Any], **target: Any) -> dict[str, Any]:
        return {"at": 0, "type": kind, "config": config, **target}

    events = [
        event("set_broker_config", {"leader.replication.throttled.rat": 5}, brokers=[1]),
        event("set_broker_config", {"follower.replication.throttled.rate": -1}, brokers=[2]),
        event("set_topic_config", {"follower.replication.throttled.replicas": 62}, topic="t"),
        event("set_topic_config", {"leader.replication.throttled.replicas": "0:1,*"}, topic="t"),
    ]
    config = {"leader.replication.throttled.rate": 1000}  # dynamic only, as in Kafka
    found = dict(_problems(_scenario(events, config=config)))
    assert found == {
        "config.leader.replication.throttled.rate": "'leader.replication.throttled.rate' is not "
        "accepted here: a dynamic broker config in Kafka (kafka-configs, not "
        "server.properties): set it with a set_broker_config event",
        "events[0].config.leader.replication.throttled.rat": "unknown key "
        "'leader.replication.throttled.rat'; did you mean 'leader.replication.throttled.rate'?",
        "events[1].config.follower.replication.throttled.rate": "-1 is not a rate in bytes/s: "
        "Kafka takes a long from 0",
        "events[2].config.follower.replication.throttled.replicas": "62 is not a list of "
        "replicas; quote it, e.g. '1:2' or '*' (YAML reads an unquoted 1:2 as the number 62 and "
        "* as an alias)",
        "events[3].config.leader.replication.throttled.replicas": "must be the literal '*' or a "
        "list of replicas in the format [partitionId]:[brokerId],[partitionId]:[brokerId],...",
    }
    unknown = event("set_broker_config", {"leader.replication.throttled.rate": 5}, brokers=[1, 9])
    assert _problems(_scenario([unknown])) == [
        (
            "events[0].brokers[1]",
            "broker 9 is not a broker of the cluster; use one of [1, 2, 3] or add it to "
            "cluster.brokers",
        )
    ]


def test_broker_configs_merge_and_delete_in_their_znode_as_kafka_configs_does() -> None:
    store = InMemoryZooKeeper()
    client = connect(store=store)
    rates = {"leader.replication.throttled.rate": "10", "follower.replication.throttled.rate": "20"}
    assert set_broker_config(client, 3, rates) == rates
    held = set_broker_config(
        client,
        3,
        {"leader.replication.throttled.rate": "30"},
        ["follower.replication.throttled.rate"],
    )
    assert held == {"leader.replication.throttled.rate": "30"}
    data, _ = client.get("/config/brokers/3")
    assert data == b'{"version":1,"config":{"leader.replication.throttled.rate":"30"}}'
    client.stop()
    store.close()


# -- the shares of the brokers' rates ------------------------------------------------------------


def test_without_throttles_each_broker_splits_its_throughput_equally() -> None:
    groups = [
        FetchGroup(2, NO, False, False, 300.0, 3, 5),
        FetchGroup(3, NO, False, False, 900.0, 2, 4),
    ]
    shares = deal(groups, {2: 1000.0, 3: 600.0, 4: 50.0}, {}, {})
    # Broker 2 keeps up with its followers at the end and shares the rest; 3 does not: every
    # follower gets an equal part; 4 follows nothing behind.
    assert shares.fetch == {2: 700.0 / 3, 3: 150.0, 4: 50.0}
    assert shares.caught == {2: KEEPS_UP_BYTES_PER_S, 3: 150.0, 4: KEEPS_UP_BYTES_PER_S}
    assert shares.leader == shares.follower == {}


def test_throttle_rates_are_shared_max_min_fair() -> None:
    groups = [
        # Leader 1 throttles three lagging followers, on brokers 2, 3 and 4.
        FetchGroup(2, 1, False, True, 0.0, 1, 1),
        FetchGroup(3, 1, False, True, 0.0, 1, 1),
        FetchGroup(4, 1, True, True, 0.0, 1, 1),  # also held by broker 4's follower rate
        # Broker 3 also copies an unthrottled follower.
        FetchGroup(3, NO, False, False, 0.0, 1, 1),
    ]
    shares = deal(groups, dict.fromkeys((2, 3, 4), 100.0), {1: 30.0}, {4: 5.0})
    # 4's copy stops at 5 B/s; leader 1's other two take the 25 left, 12.5 each; broker 3's
    # unthrottled copy takes what its throughput has left: 87.5.
    assert shares.follower == {4: 5.0}
    assert shares.leader == {1: 12.5}
    assert shares.fetch == {2: 100.0, 3: 87.5, 4: 100.0}


def test_listed_followers_in_the_isr_spend_the_rates_before_the_copies() -> None:
    # Kafka counts the bytes of every listed follower: leader 1's two followers in the ISR on
    # broker 2 need 800 B/s of produce, which leaves 200 of its 1,000 to the copy on broker 3.
    groups = [FetchGroup(2, 1, False, False, 800.0, 0, 2), FetchGroup(3, 1, False, True, 0.0, 1, 1)]
    capacity = {2: 1e6, 3: 1e6}
    assert deal(groups, capacity, {1: 1_000.0}, {}).leader == {1: 200.0}
    # Below the produce rate the copy stops (Kafka's docs: throttle < BytesInPerSec).
    assert deal(groups, capacity, {1: 600.0}, {}).leader == {1: 0.0}


# -- the rates of the followers they hold --------------------------------------------------------


def _throttled_rows() -> tuple[list[dict[str, Any]], r.Conditions]:
    """Leader 1 at 1,000 records of 100 B. Partition 0: 2 lags outside the ISR, 3 lags inside
    it, both listed on the follower side. Partition 1: 3 lags outside the ISR, its leader 1
    listed on the leader side; 2 is at the leader's end, outside the ISR (it joins now)."""
    head = _slot(1_000, 1_000, [(1, 0)])
    rows = [
        _row([1, 2, 3], [1, 3], 1, [head, _slot(100, 100, [(1, 0)]), _slot(400, 100, [(1, 0)])]),
        _row([1, 3, 2], [1], 1, [head, _slot(0, 0, []), head], partition=1),
    ]
    # More than ten entries: Spark's IN becomes a hash-set lookup.
    follower = {(0, 0, 2), (0, 0, 3), (0, 1, 2)} | {(0, p, 9) for p in range(2, 12)}
    th = rt.Throttles(
        leader=rt.ThrottledReplicas(frozenset({(0, 1, 1)})),
        follower=rt.ThrottledReplicas(frozenset(follower)),
        leader_share={1: 500.0},
        follower_share={2: 2_000.0},
    )
    c = _conditions(
        fetching=frozenset({2, 3}),
        fetch_share={2: 10_000.0, 3: 10_000.0},
        caught_share={2: 1e9, 3: 1e9},
        throttles=th,
    )
    return rows, c


def test_only_lagging_followers_outside_the_isr_are_throttled() -> None:
    rows, c = _throttled_rows()
    p0, p1 = rr.advance(rows, c, 20_000)  # 10 s
    assert p0["leo_1"] == 100 + 200  # its broker's follower share: 2,000 B/s, 20 records/s
    assert p0["leo_2"] == 400 + 600  # in the ISR: its fetch share (100/s), up to the leader
    assert p1["leo_1"] == 50  # its leader's share: 500 B/s
    assert p1["leo_2"] == 1_000
    # Grouped by the rates that count their bytes (listed) and whether they can be held back.
    keys = (s.BROKER, fs.THROTTLED_LEADER, fs.THROTTLED_FOLLOWER, fs.HELD)
    assert [tuple(g[k] for k in keys) for g in rr.fetch_stats(rows, c)] == [
        (2, NO, True, True),  # p0's 2
        (2, 1, True, False),  # p1's 2, at the end
        (3, NO, True, False),  # p0's 3, in the ISR
        (3, 1, False, True),  # p1's 3
    ]
    bare = dataclasses.replace(c, throttles=rt.Throttles())
    assert rr.advance(rows, bare, 20_000)[0]["leo_1"] == 1_000  # unthrottled: 100/s


def test_spark_throttles_the_followers_the_rows_throttle(spark: SparkSession) -> None:
    rows, c = _throttled_rows()
    df = _frame(spark, rows, _schema(3))
    got = [x.asDict() for x in r.advance(df, c, 20_000).collect()]
    want = rr.advance(rows, c, 20_000)
    key = (s.PARTITION, "leo_0", "leo_1", "leo_2", "hw_0", "caught_1", "caught_2")
    assert sorted(tuple(x[k] for k in key) for x in got) == [tuple(x[k] for k in key) for x in want]
    stats = [x.asDict() for x in fs.fetch_stats(df, c).collect()]
    assert sorted(stats, key=lambda x: tuple(x.values())) == sorted(
        rr.fetch_stats(rows, c), key=lambda x: tuple(x.values())
    )


# -- kafka-reassign-partitions --throttle --------------------------------------------------------


def test_the_tool_throttles_sources_as_leaders_and_new_replicas_as_followers() -> None:
    moves = [
        Move("a", 10, (1, 2), (1, 3), 0),
        Move("a", 2, (2, 1), (4, 2), 0),
        Move("b", 0, (5, 6), (6, 5), 0),  # a reorder: its replicas as leaders, no follower
    ]
    writes = throttle_writes(moves, 1_024_000)
    # Scala's TreeSet of strings: "10:1" sorts before "2:1".
    assert writes.topics == {
        "a": {
            "leader.replication.throttled.replicas": "10:1,10:2,2:1,2:2",
            "follower.replication.throttled.replicas": "10:3,2:4",
        },
        "b": {
            "leader.replication.throttled.replicas": "0:5,0:6",
            "follower.replication.throttled.replicas": "",
        },
    }
    assert writes.brokers == (1, 2, 3, 4, 5, 6)
    assert writes.broker_config() == {
        "leader.replication.throttled.rate": "1024000",
        "follower.replication.throttled.rate": "1024000",
    }
    assert writes.listed() == (6, 2)
