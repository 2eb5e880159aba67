"""The scenario model of replication below the controller: the replication events, the emulation
knobs and Kafka keys that go with them, their checks, and ``kce run --set``. Pure Python, no
Spark session."""

from __future__ import annotations

import copy
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml

from spark_app.cli import EXIT_INVALID, _parser, main
from spark_app.scenario import (
    EVENT_TYPES,
    REPLICATION_EVENT_TYPES,
    KafkaConfig,
    ScenarioError,
    ScenarioEvent,
    load_scenario,
    parse_scenario,
    scenario_from_data,
)
from spark_app.scenario import events as ev
from spark_app.scenario.emulation import Emulation

README = Path(__file__).resolve().parents[1] / "README.md"
SCENARIOS = README.parent / "docs" / "scenarios.md"

BASE: dict[str, Any] = {
    "name": "replication",
    "cluster": {
        "brokers": [{"id": 1}, {"id": 2}, {"id": 3}],
        "topics": [{"name": "orders", "partitions": 3, "replication_factor": 3}],
    },
    "until": "10m",
}


def scenario(*events: dict[str, Any], **top: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["events"] = [{"at": "1s", **e} for e in events]
    data.update(top)
    return data


def problems(data: dict[str, Any], overrides: tuple[str, ...] = ()) -> dict[str, str]:
    with pytest.raises(ScenarioError) as info:
        scenario_from_data(data, overrides=overrides)
    return dict(info.value.problems)


# -- the events --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "model", "fields"),
    [
        ({"type": "produce", "topic": "orders", "records": 10}, ev.Produce,
         {"topic": "orders", "partition": None, "records": 10, "acks": "all"}),
        ({"type": "produce", "topic": "orders", "partition": 2, "records": 1, "acks": 0}, ev.Produce,
         {"partition": 2, "acks": 0}),
        ({"type": "produce", "topic": "all", "records": 5, "acks": -1}, ev.Produce, {"acks": "all"}),
        ({"type": "produce", "topic": "all", "records": 5, "acks": "1"}, ev.Produce, {"acks": 1}),
        ({"type": "set_produce_rate", "topic": "all", "records_per_s": 500}, ev.SetProduceRate,
         {"records_per_s": 500.0, "bytes_per_record": 1024}),
        ({"type": "set_produce_rate", "topic": "orders", "records_per_s": 0.5, "bytes_per_record": 100},
         ev.SetProduceRate, {"bytes_per_record": 100}),
        ({"type": "fetch_stop", "brokers": [2], "duration": "30s"}, ev.FetchStop, {"duration": 30_000}),
        ({"type": "broker_pause", "brokers": [1, 3], "duration": 20_000}, ev.BrokerPause,
         {"brokers": (1, 3), "duration": 20_000}),
        ({"type": "slow_broker", "brokers": [3], "factor": 4, "duration": "5m"}, ev.SlowBroker,
         {"factor": 4.0, "duration": 300_000}),
        ({"type": "network_partition", "brokers": [1], "from": "zookeeper", "duration": "1m"},
         ev.NetworkPartition, {"from_": "zookeeper"}),
        ({"type": "power_loss", "brokers": [1, 2]}, ev.PowerLoss, {"brokers": (1, 2)}),
        ({"type": "broker_restart", "brokers": [2]}, ev.BrokerRestart, {"clean": True}),
        ({"type": "broker_restart", "brokers": [2], "clean": False}, ev.BrokerRestart, {"clean": False}),
        ({"type": "set_broker_config", "brokers": [1, 2], "config": {"leader.replication.throttled.rate": "5000"}},
         ev.SetBrokerConfig, {"brokers": (1, 2)}),
    ],
)  # fmt: skip
def test_each_replication_event_parses_to_its_model(
    event: dict[str, Any], model: type, fields: dict[str, Any]
) -> None:
    s = scenario_from_data(scenario(event))
    parsed = s.events[0]
    assert type(parsed) is model and parsed.at == 1000
    assert {k: getattr(parsed, k) for k in fields} == fields
    assert parsed.type in REPLICATION_EVENT_TYPES and s.replication_enabled()


def test_replication_event_types_are_scenario_event_types_with_a_model_each() -> None:
    members = typing.get_args(typing.get_args(ScenarioEvent)[0])
    by_type = {m.model_fields["type"].default: m for m in members}
    assert set(REPLICATION_EVENT_TYPES) <= set(EVENT_TYPES)
    assert {by_type[t] for t in REPLICATION_EVENT_TYPES} == set(ev.REPLICATION_EVENTS)
    assert all(by_type[t].__doc__ for t in REPLICATION_EVENT_TYPES)


def test_every_replication_event_round_trips_through_yaml() -> None:
    data = scenario(
        {"type": "produce", "topic": "orders", "partition": 0, "records": 3, "acks": 1},
        {"type": "set_produce_rate", "topic": "all", "records_per_s": 10},
        {"type": "fetch_stop", "brokers": [2], "duration": "3s"},
        {"type": "broker_pause", "brokers": [3], "duration": "20s"},
        {"type": "slow_broker", "brokers": [1], "factor": 1.5, "duration": "1m"},
        {"type": "network_partition", "brokers": [2], "from": "both", "duration": "10s"},
        {"type": "power_loss", "brokers": [1]},
        {"type": "broker_restart", "brokers": [3], "clean": False},
        {"type": "set_broker_config", "brokers": [2], "config": {"follower.replication.throttled.rate": None}},
    )  # fmt: skip
    s = scenario_from_data(data)
    dumped = s.model_dump(mode="json")
    assert dumped["events"][5]["from"] == "both" and "from_" not in dumped["events"][5]
    assert parse_scenario(yaml.safe_dump(dumped, sort_keys=False)) == s
    assert dumped["events"][8]["config"] == {"follower.replication.throttled.rate": None}


# -- bad input: one problem each, at its YAML path ---------------------------------------------


@pytest.mark.parametrize(
    ("event", "path", "fragment"),
    [
        ({"type": "fetch_stop", "brokers": [1], "duration": "1s", "durration": "2s"},
         "events[0].durration", "did you mean 'duration'"),
        ({"type": "network_partition", "brokers": [1], "from": "both", "duration": "1s", "from_": "zookeeper"},
         "events[0].from_", "did you mean 'from'"),
        ({"type": "produce", "topic": "orders", "records": "many"}, "events[0].records", "valid integer"),
        ({"type": "produce", "topic": "orders", "records": 0}, "events[0].records", "greater than or equal to 1"),
        ({"type": "produce", "topic": "orders", "records": 1, "acks": True}, "events[0].acks", "all, 1 or 0"),
        ({"type": "produce", "topic": "orders", "records": 1, "acks": 2}, "events[0].acks", "'all', 1 or 0"),
        ({"type": "set_produce_rate", "topic": "all", "records_per_s": "5"}, "events[0].records_per_s", "valid number"),
        ({"type": "set_produce_rate", "topic": "all", "records_per_s": -1}, "events[0].records_per_s", "greater than or equal to 0"),
        ({"type": "fetch_stop", "brokers": [9], "duration": "1s"}, "events[0].brokers[0]", "not a broker of the cluster"),
        ({"type": "broker_pause", "brokers": [2, 2], "duration": "1s"}, "events[0].brokers[1]", "listed twice"),
        ({"type": "power_loss", "brokers": []}, "events[0].brokers", "empty; list at least 1"),
        ({"type": "produce", "topic": "audit", "records": 1}, "events[0].topic", "does not exist at 1s"),
        ({"type": "set_produce_rate", "topic": "audit", "records_per_s": 1}, "events[0].topic", "does not exist at 1s"),
        ({"type": "produce", "topic": "orders", "partition": 3, "records": 1}, "events[0].partition", "partitions 0..2"),
        ({"type": "produce", "topic": "all", "partition": 0, "records": 1}, "events[0].partition", "needs a named topic"),
        ({"type": "fetch_stop", "brokers": [1], "duration": 0}, "events[0].duration", "give one > 0"),
        ({"type": "broker_pause", "brokers": [1], "duration": "0s"}, "events[0].duration", "give one > 0"),
        ({"type": "network_partition", "brokers": [1], "from": "zk", "duration": "1s"}, "events[0].from", "'brokers', 'zookeeper' or 'both'"),
        ({"type": "network_partition", "brokers": [1], "duration": "1s"}, "events[0].from", "required key 'from'"),
        ({"type": "slow_broker", "brokers": [1], "factor": 1, "duration": "1s"}, "events[0].factor", "greater than 1"),
        ({"type": "slow_broker", "brokers": [1], "factor": 0.5, "duration": "1s"}, "events[0].factor", "greater than 1"),
        ({"type": "broker_restart", "brokers": [1], "clean": "yes"}, "events[0].clean", "valid boolean"),
    ],
)  # fmt: skip
def test_bad_replication_event_names_the_field(
    event: dict[str, Any], path: str, fragment: str
) -> None:
    found = problems(scenario(event))
    assert list(found) == [path], found
    assert fragment in found[path]


def test_events_see_brokers_and_topics_as_they_are_at_their_time() -> None:
    data = scenario(
        {"type": "create_topic", "topic": {"name": "audit", "partitions": 2, "replication_factor": 1}},
        {"type": "broker_failure", "brokers": [3]},
        {"at": "2s", "type": "produce", "topic": "audit", "partition": 1, "records": 1},
        {"at": "500ms", "type": "set_produce_rate", "topic": "audit", "records_per_s": 1},
        {"at": "3s", "type": "fetch_stop", "brokers": [3], "duration": "1s"},
        {"at": "4s", "type": "delete_topic", "topic": "audit"},
        {"at": "5s", "type": "produce", "topic": "audit", "records": 1},
        {"at": "6s", "type": "controlled_shutdown", "broker": 2},
        {"at": "7s", "type": "broker_pause", "brokers": [2], "duration": "1s"},  # still registered
        {"at": "8s", "type": "broker_startup", "brokers": [3]},
        {"at": "9s", "type": "power_loss", "brokers": [3]},
    )  # fmt: skip
    found = problems(data)
    assert list(found) == ["events[3].topic", "events[4].brokers[0]", "events[6].topic"]
    assert "at 500ms" in found["events[3].topic"] and "at 5s" in found["events[6].topic"]
    assert "broker 3 is down at 3s" in found["events[4].brokers[0]"]


def test_a_clean_restart_leaves_its_brokers_up() -> None:
    data = scenario(
        {"type": "broker_restart", "brokers": [1]},
        {"at": "3s", "type": "broker_startup", "brokers": [1]},
    )
    found = problems(data)
    assert list(found) == ["events[1].brokers[0]"] and "already up" in found["events[1].brokers[0]"]


def test_crashed_brokers_stay_registered_until_their_sessions_expire() -> None:
    # Kafka's KafkaZkClient.registerBroker (checkedEphemeralCreate) fails with NodeExists while
    # the old session's /brokers/ids/<id> is there: a crash is noticed, and the broker can
    # start again, only zookeeper.session.timeout.ms (18 s in 2.8) later (spec §3.6).
    data = scenario(
        {"type": "broker_restart", "brokers": [1], "clean": False},
        {"at": "2s", "type": "power_loss", "brokers": [2]},
        {"at": "3s", "type": "broker_failure", "brokers": [3], "detection": "session_timeout"},
        {"at": "10s", "type": "broker_startup", "brokers": [1, 2, 3]},
        {"at": "15s", "type": "fetch_stop", "brokers": [1], "duration": "1s"},
        {"at": "21s", "type": "broker_startup", "brokers": [3]},
        {"at": "22s", "type": "broker_startup", "brokers": [1, 2, 3]},
    )
    found = problems(data)
    assert sorted(found) == [
        "events[3].brokers[0]", "events[3].brokers[1]", "events[3].brokers[2]",
        "events[4].brokers[0]", "events[5].brokers[0]", "events[6].brokers[0]",
        "events[6].brokers[1]",
    ]  # fmt: skip
    assert "session expires at 19s" in found["events[3].brokers[0]"]
    assert "start it after 20s" in found["events[3].brokers[1]"]
    assert "broker 1 is down at 15s" in found["events[4].brokers[0]"]
    assert "session expires at 21s" in found["events[5].brokers[0]"]  # the expiry comes after
    # Past their sessions the restarted brokers are up again; the failed one is down.
    assert all("already up" in found[f"events[6].brokers[{j}]"] for j in range(2))
    # Kafka 2.4's 6 s session: every session has expired by 10 s.
    early = problems(data, ("zookeeper.session.timeout.ms=6000",))
    assert sorted(early) == [
        "events[3].brokers[0]", "events[3].brokers[1]", "events[5].brokers[0]",
        "events[6].brokers[0]", "events[6].brokers[1]", "events[6].brokers[2]",
    ]  # fmt: skip
    assert all("already up" in m for m in early.values())


def test_detection_is_immediate_or_session_timeout() -> None:
    s = scenario_from_data(scenario({"type": "broker_failure", "brokers": [1]}))
    assert s.events[0].detection == "immediate"  # type: ignore[union-attr]
    assert not s.replication_enabled()  # as before: the controller learns at once
    timed = {"type": "broker_failure", "brokers": [1], "detection": "session_timeout"}
    assert scenario_from_data(scenario(timed)).replication_enabled()
    found = problems(scenario({**timed, "detection": "timeout"}))
    assert list(found) == ["events[0].detection"]
    assert "'immediate' or 'session_timeout'" in found["events[0].detection"]


# -- emulation ---------------------------------------------------------------------------------


def test_emulation_knobs_have_defaults_and_types() -> None:
    s = scenario_from_data(scenario())
    e = s.emulation
    assert (e.isr_rule, e.page_cache_flush_ms, e.fetch_mb_per_s, e.replication) == (
        "time", 30_000, 100.0, None,
    )  # fmt: skip
    assert s.replication_enabled() is False
    data = scenario(emulation={"isr_rule": "counts", "page_cache_flush_ms": "soon",
                               "fetch_mb_per_s": 0, "replication": "yes"})  # fmt: skip
    assert sorted(problems(data)) == [
        "emulation.fetch_mb_per_s",
        "emulation.isr_rule",
        "emulation.page_cache_flush_ms",
        "emulation.replication",
    ]


@pytest.mark.parametrize(
    ("replication", "events", "enabled"),
    [
        (None, [], False),
        (None, [{"type": "broker_failure", "brokers": [1]}], False),
        (None, [{"type": "set_produce_rate", "topic": "all", "records_per_s": 1}], True),
        (True, [], True),
        (False, [{"type": "produce", "topic": "all", "records": 1}], False),
    ],
)
def test_replication_is_on_with_a_replication_event_unless_forced(
    replication: bool | None, events: list[dict[str, Any]], enabled: bool
) -> None:
    emulation = {"isr_rule": "count"} | (
        {} if replication is None else {"replication": replication}
    )
    s = scenario_from_data(scenario(*events, emulation=emulation))
    assert s.replication_enabled() is enabled and s.emulation.isr_rule == "count"


def test_catch_up_ms_and_replication_exclude_each_other() -> None:
    produce = {"type": "produce", "topic": "orders", "records": 1}
    found = problems(scenario(produce, emulation={"catch_up_ms": "2s"}))
    assert list(found) == ["emulation.catch_up_ms"]
    assert "replication events" in found["emulation.catch_up_ms"]
    found = problems(scenario(emulation={"catch_up_ms": 500, "replication": True}))
    assert "emulation.replication is true" in found["emulation.catch_up_ms"]
    scenario_from_data(scenario(produce, emulation={"catch_up_ms": "2s", "replication": False}))
    scenario_from_data(scenario(produce, emulation={"catch_up_ms": 0}))


# -- Kafka configuration -----------------------------------------------------------------------


@pytest.mark.parametrize(("version", "fmt"), [("2.0", "2.0"), ("2.8", "2.8"), ("3.4", "3.0-IV1")])
def test_replication_keys_take_kafka_defaults(version: str, fmt: str) -> None:
    config = scenario_from_data(scenario(kafka_version=version)).config
    assert config.log_message_format_version == fmt
    assert config.replica_lag_max_messages == 4_000
    assert config.log_flush_interval_messages == 2**63 - 1
    assert config.log_flush_interval_ms is None
    assert config.get("log.flush.interval.ms") is None


def test_message_format_versions_parse_like_kafkas() -> None:
    def fmt(value: object) -> str:
        return KafkaConfig.resolve(
            "2.8", {"log.message.format.version": value}
        ).log_message_format_version

    assert [fmt(v) for v in ("0.10.2", "0.11.0-IV2", "2.8-IV1", "2.8.1", 2.7)] == [
        "0.10.2", "0.11.0-IV2", "2.8-IV1", "2.8", "2.7",
    ]  # fmt: skip
    old = KafkaConfig.resolve("2.8", {"log.message.format.version": "0.10.2"})
    assert old.message_format_at_least("0.10.0") and not old.message_format_at_least("0.11.0")
    assert KafkaConfig.resolve("2.8").message_format_at_least("0.11.0")
    data = scenario(config={"log.message.format.version": 0.10})  # unquoted: the number 0.1
    assert "quoted" in problems(data)["config.log.message.format.version"]
    for bad in ("0.10", "2", "5.0", "1.2", "latest"):
        data = scenario(config={"log.message.format.version": bad})
        assert "'0.10.2', '0.11.0'" in problems(data)["config.log.message.format.version"]


def test_message_format_newer_than_kafka_or_the_protocol_is_rejected() -> None:
    found = problems(scenario(kafka_version="2.6", config={"log.message.format.version": "2.7"}))
    assert "newer than kafka_version 2.6" in found["config.log.message.format.version"]
    config = {"log.message.format.version": "0.11.0", "inter.broker.protocol.version": "0.10.2"}
    found = problems(scenario(config=config))
    assert "record format v2" in found["config.log.message.format.version"]


def test_flush_keys_and_topic_overrides() -> None:
    data = scenario(config={"log.flush.interval.messages": "10000", "log.flush.interval.ms": 1000})
    data["cluster"]["topics"][0]["config"] = {"flush.messages": 1, "flush.ms": "0"}
    s = scenario_from_data(data)
    assert (s.config.log_flush_interval_messages, s.config.log_flush_interval_ms) == (10_000, 1000)
    assert s.cluster.topics[0].config.overrides() == {"flush.messages": "1", "flush.ms": "0"}
    data = scenario(config={"log.flush.interval.messages": 0, "log.flush.interval.ms": -1})
    data["cluster"]["topics"][0]["config"] = {"flush.messages": "0"}
    assert sorted(problems(data)) == [
        "cluster.topics[0].config.flush.messages",
        "config.log.flush.interval.messages",
        "config.log.flush.interval.ms",
    ]


# -- kce run --set -----------------------------------------------------------------------------


def _file(tmp_path: Path, data: dict[str, Any]) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_set_overrides_config_and_emulation_keys(tmp_path: Path) -> None:
    path = _file(tmp_path, scenario(config={"log.message.format.version": "2.8"}))
    s = load_scenario(path, ["log.message.format.version=0.10.2", "emulation.isr_rule=count",
                             "config.replica.lag.max.messages=100", "emulation.replication=true",
                             "emulation.page_cache_flush_ms=5s", "log.flush.interval.ms=null"])  # fmt: skip
    assert s.config.log_message_format_version == "0.10.2"
    assert s.config.replica_lag_max_messages == 100 and s.config.log_flush_interval_ms is None
    assert (s.emulation.isr_rule, s.emulation.page_cache_flush_ms) == ("count", 5000)
    assert s.replication_enabled()
    assert _parser().parse_args(["run", path, "--set", "a=1", "--set", "b=2"]).overrides == [
        "a=1", "b=2",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("option", "where", "fragment"),
    [
        ("log.mesage.format.version=0.10.2", "--set log.mesage.format.version",
         "did you mean 'log.message.format.version'?"),
        ("emulation.isr=count", "--set emulation.isr", "did you mean 'emulation.isr_rule'"),
        ("emulation.isr_rule=counts", "--set emulation.isr_rule", "'time' or 'count'"),
        ("log.message.format.version=0.10", "--set log.message.format.version", "'0.10.2'"),
        ("config.min.insync.replicas=[1, 2]", "--set config.min.insync.replicas", "scalar"),
        ("broker.rack=a", "--set broker.rack", "cluster.brokers[].rack"),
        ("isr_rule", "--set isr_rule", "--set KEY=VALUE"),
        ("emulation.replication=true", "emulation.catch_up_ms",
         "emulation.replication comes from --set emulation.replication"),
    ],
)  # fmt: skip
def test_bad_set_exits_2_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, where: str, fragment: str
) -> None:
    path = _file(tmp_path, scenario(emulation={"catch_up_ms": "1s"}))
    assert main(["run", path, "--set", option]) == EXIT_INVALID
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = next(x.strip() for x in err.splitlines() if x.strip().startswith(where))
    assert fragment in line


def test_every_bad_set_is_reported_with_the_files_problems(tmp_path: Path) -> None:
    data = scenario({"type": "fetch_stop", "brokers": ["seven"], "duration": "1s"})
    path = _file(tmp_path, data)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path, ["nope=1", "emulation.fetch_mb_per_s=0", "emulation.fetch_mb_per_s=1"])
    assert [p for p, _ in info.value.problems] == [
        "--set nope", "--set emulation.fetch_mb_per_s", "--set emulation.fetch_mb_per_s",
        "events[0].brokers[0]",
    ]  # fmt: skip


# -- documentation -----------------------------------------------------------------------------


def test_every_event_type_emulation_key_and_replication_config_key_is_documented() -> None:
    readme, scenarios = README.read_text(), SCENARIOS.read_text()
    # README names every event type; docs/scenarios.md has a row with the keys of each.
    events = readme[readme.index("## Event types") : readme.index("## Replication below")]
    assert all(f"`{t}`" in events and f"| `{t}` |" in scenarios for t in EVENT_TYPES)
    text = readme + scenarios
    annotated = text[text.index("## A scenario, annotated") : text.index("## Event types")]
    assert all(f"\n  {name}: " in annotated for name in Emulation.model_fields)
    keys = ("replica.lag.max.messages", "log.message.format.version", "log.flush.interval.messages",
            "log.flush.interval.ms", "flush.messages", "flush.ms", "leader.replication.throttled.rate",
            "follower.replication.throttled.rate", "leader.replication.throttled.replicas",
            "follower.replication.throttled.replicas")  # fmt: skip
    assert all(f"`{key}`" in text for key in keys)
    assert "--set KEY=VALUE" in text
