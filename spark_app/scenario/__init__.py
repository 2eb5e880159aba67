"""Scenario files for ``kce run SCENARIO.yaml``: strict models, cross-field checks, loading.

``load_scenario(path)`` returns a validated ``Scenario`` or raises ``ScenarioError`` whose
``problems`` are ``(yaml.path, message)`` pairs, one per problem, YAML syntax errors included.
"""

from spark_app.scenario.durations import Duration, format_duration, parse_duration
from spark_app.scenario.errors import Problem, ScenarioError, format_problems
from spark_app.scenario.events import (
    EVENT_TYPES,
    REPLICATION_EVENT_TYPES,
    ScenarioEvent,
    TopicSpec,
)
from spark_app.scenario.kafka_config import KafkaConfig, TopicConfig
from spark_app.scenario.kafka_values import DEFAULT_KAFKA_VERSION, SUPPORTED_KAFKA_VERSIONS
from spark_app.scenario.loading import (
    load_scenario,
    load_scenario_or_report,
    parse_scenario,
    scenario_from_data,
)
from spark_app.scenario.model import Scenario

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "EVENT_TYPES",
    "REPLICATION_EVENT_TYPES",
    "SUPPORTED_KAFKA_VERSIONS",
    "Duration",
    "KafkaConfig",
    "Problem",
    "Scenario",
    "ScenarioError",
    "ScenarioEvent",
    "TopicConfig",
    "TopicSpec",
    "format_duration",
    "format_problems",
    "load_scenario",
    "load_scenario_or_report",
    "parse_duration",
    "parse_scenario",
    "scenario_from_data",
]
