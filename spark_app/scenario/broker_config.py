"""Brokers' dynamic configs in a scenario: what ``kafka-configs --entity-type brokers
--entity-name <id> --alter`` writes to ``/config/brokers/<id>`` (Kafka's ``DynamicConfig.Broker``).

The keys are the replication throttle rates, which Kafka takes only this way (not from
``server.properties``). Values are typed as Kafka's ``ConfigDef`` parses a LONG at least 0 and
stored as strings, as in ZooKeeper.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_serializer

from spark_app.scenario.kafka_values import kafka_int, unset_or

LONG_MAX = 2**63 - 1


def _rate(value: object) -> str:
    number = kafka_int(value)
    if not 0 <= number <= LONG_MAX:
        raise ValueError(f"{number} is not a rate in bytes/s: Kafka takes a long from 0")
    return str(number)


Rate = Annotated[str | None, BeforeValidator(unset_or(_rate))]


class BrokerConfig(BaseModel):
    """A broker's dynamic configs: the replication throttle rates in bytes/s. A key given as null
    is deleted (``--delete-config``); a rate that is not set is Kafka's default,
    ``Long.MaxValue``: unlimited.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, serialize_by_alias=True)

    leader_replication_throttled_rate: Rate = Field(
        None,
        alias="leader.replication.throttled.rate",
        description="bytes/s the broker, as leader, sends its throttled replicas "
        "(leader.replication.throttled.replicas) outside the ISR",
    )
    follower_replication_throttled_rate: Rate = Field(
        None,
        alias="follower.replication.throttled.rate",
        description="bytes/s the broker's throttled replicas "
        "(follower.replication.throttled.replicas) outside the ISR fetch",
    )

    @model_serializer(mode="wrap")
    def _given_only(self, handler: Any) -> Any:
        # Only the keys written: a key left out keeps its value, one given as null is deleted,
        # and a dumped event read back means the same.
        fields = type(self).model_fields
        given = self.model_fields_set | {fields[n].alias for n in self.model_fields_set}
        return {k: v for k, v in handler(self).items() if k in given}

    def overrides(self) -> dict[str, str]:
        """The keys set, as Kafka stores them (dotted key -> string)."""
        return {k: v for k, v in self.model_dump(by_alias=True).items() if v is not None}

    def deleted(self) -> list[str]:
        """The keys given as null."""
        return sorted(k for k, v in self.model_dump(by_alias=True).items() if v is None)
