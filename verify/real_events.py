"""Scenario events played on a real Kafka cluster with Kafka's own tools and signals.

Brokers: start (``kafka.Kafka``), crash (SIGKILL; ZooKeeper expires the session after
``zookeeper.session.timeout.ms``), clean shutdown (SIGTERM: Kafka's controlled shutdown, then
exit), session expiry (SIGSTOP until ZooKeeper dropped the registration, then SIGCONT). Admin
requests: ``kafka-topics`` (``TopicCommand``) to create, extend and delete topics,
``kafka-configs`` (``ConfigCommand``) for topic configs, the Admin client's
``alterPartitionReassignments`` (KIP-455) or the ``/admin/reassign_partitions`` znode,
``kafka-leader-election`` (``LeaderElectionCommand``) or ``/admin/preferred_replica_election``.

Where Kafka's tool draws a random placement (a topic or partitions without an explicit
assignment), the real request carries the placement the emulator drew, so that both clusters
start from the same assignment and the comparison is of the controller's behaviour.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from spark_app.scenario import Scenario, ScenarioEvent
from spark_app.scenario import events as se
from verify.real_cluster import RealClusterError, RealKafkaCluster

TOPICS = "kafka.admin.TopicCommand"
CONFIGS = "kafka.admin.ConfigCommand"
# The Admin API's AlterPartitionReassignments, from a Java source file the JVM compiles and runs.
# (kafka-reassign-partitions checks a plan's broker ids against the live brokers itself before it
# sends it, so it cannot send what the API and the controller would accept.)
ALTER_REASSIGNMENTS = str(Path(__file__).with_name("java") / "AlterPartitionReassignments.java")
ELECTION = "kafka.admin.LeaderElectionCommand"

# Events a real cluster cannot be made to do from outside, each with the reason.
UNPLAYABLE: dict[str, str] = {
    "isr_change": "an ISR change is the partition leader's own decision (its replica fetchers' "
    "lag); a real cluster cannot be told to make one",
    "log_dir_failure": "a real log directory failure needs a failing disk (not yet played)",
    **dict.fromkeys(
        se.REPLICATION_EVENT_TYPES,
        "a replication event; its effect on a real cluster depends on timing (not yet played)",
    ),
}

Assignment = dict[int, list[int]]


def unplayable(scenario: Scenario) -> list[str]:
    """Why the scenario cannot be played on a real cluster, one line per reason (empty: it can)."""
    problems = [
        f"events[{i}] ({e.type} at {e.at} ms): {UNPLAYABLE[e.type]}"
        for i, e in enumerate(scenario.events)
        if e.type in UNPLAYABLE
    ]
    if scenario.cluster.state is not None:
        problems.append(
            "cluster.state: a real cluster's partition states come from its controller; "
            "explicit starting states cannot be written into one"
        )
    return problems


def _assignment_arg(assignment: Assignment) -> str:
    # kafka-topics --replica-assignment: partitions in id order, replicas joined by ':'.
    return ",".join(":".join(map(str, assignment[p])) for p in sorted(assignment))


class RealPlayer:
    """Plays scenario events on ``cluster``; ``assignment(topic)`` reads the emulator's."""

    def __init__(self, cluster: RealKafkaCluster, assignment: Callable[[str], Assignment]) -> None:
        self.cluster = cluster
        self.assignment = assignment
        self.plans = 0

    def play(self, event: ScenarioEvent) -> str | None:
        """Play one event; the admin tool's error when Kafka refused the request, else None."""
        try:
            getattr(self, event.type)(event)
        except RealClusterError as err:
            if event.type in ("broker_startup", "broker_failure", "controlled_shutdown"):
                raise  # a broker that does not start or stop is the harness's failure
            return str(err)
        return None

    def _plan(self, entries: list[dict[str, object]]) -> str:
        """A tool's JSON input file (kept with the cluster's logs)."""
        self.plans += 1
        path = self.cluster.root / f"plan-{self.plans}.json"
        path.write_text(json.dumps({"version": 1, "partitions": entries}))
        return str(path)

    def _bootstrap(self) -> str:
        return self.cluster.bootstrap_servers()

    # -- brokers -------------------------------------------------------------------------------
    def broker_startup(self, event: se.BrokerStartup) -> None:
        for b in event.brokers:
            self.cluster.start_broker(b)

    def broker_failure(self, event: se.BrokerFailure) -> None:
        for b in event.brokers:
            self.cluster.kill(b)

    def controlled_shutdown(self, event: se.ControlledShutdown) -> None:
        self.cluster.terminate(event.broker)

    def zk_session_expiry(self, event: se.ZkSessionExpiry) -> None:
        self.cluster.expire_session(event.broker)

    # -- topics --------------------------------------------------------------------------------
    def create_topic(self, event: se.CreateTopic) -> None:
        spec = event.topic
        configs = [a for k, v in spec.config.overrides().items() for a in ("--config", f"{k}={v}")]
        placed = self.assignment(spec.name) or {
            p: list(r) for p, r in (spec.assignment or {}).items()
        }
        # A topic the emulator refused (and no explicit assignment): Kafka places it itself.
        placement = (
            ["--replica-assignment", _assignment_arg(placed)] if placed
            else ["--partitions", str(spec.partitions),
                  "--replication-factor", str(spec.replication_factor)]
        )  # fmt: skip
        self.cluster.tool(
            TOPICS, "--bootstrap-server", self._bootstrap(), "--create", "--topic", spec.name,
            *placement, *configs,
        )  # fmt: skip

    def add_partitions(self, event: se.AddPartitions) -> None:
        # kafka-topics --alter takes the whole assignment and sends the new partitions' part.
        self.cluster.tool(
            TOPICS, "--bootstrap-server", self._bootstrap(), "--alter", "--topic", event.topic,
            "--partitions", str(event.total), *self._new_partitions(event),
        )  # fmt: skip

    def _new_partitions(self, event: se.AddPartitions) -> list[str]:
        placed = self.assignment(event.topic)
        if len(placed) < event.total:  # the emulator refused: Kafka places them itself
            return []
        return ["--replica-assignment", _assignment_arg(placed)]

    def delete_topic(self, event: se.DeleteTopic) -> None:
        self.cluster.tool(
            TOPICS, "--bootstrap-server", self._bootstrap(), "--delete", "--topic", event.topic
        )

    def set_topic_config(self, event: se.SetTopicConfig) -> None:
        pairs = ",".join(f"{k}={v}" for k, v in event.config.overrides().items())
        self.cluster.tool(
            CONFIGS, "--bootstrap-server", self._bootstrap(), "--entity-type", "topics",
            "--entity-name", event.topic, "--alter", "--add-config", pairs,
        )  # fmt: skip

    # -- reassignments -------------------------------------------------------------------------
    def reassign_partitions(self, event: se.ReassignPartitions) -> None:
        entries: list[dict[str, object]] = [
            {"topic": e.topic, "partition": e.partition, "replicas": list(e.replicas)}
            for e in event.plan.partitions
        ]
        if event.via == "zk":
            self.cluster.write_admin_znode(
                "/admin/reassign_partitions", {"version": 1, "partitions": entries}
            )
            return
        targets = [
            f"{e.topic}:{e.partition}={','.join(map(str, e.replicas))}"
            for e in event.plan.partitions
        ]
        self.cluster.tool(ALTER_REASSIGNMENTS, self._bootstrap(), *targets)

    def cancel_reassignment(self, event: se.CancelReassignment) -> None:
        targets = [f"{p.topic}:{p.partition}=" for p in event.partitions]
        self.cluster.tool(ALTER_REASSIGNMENTS, self._bootstrap(), *targets)

    # -- elections -----------------------------------------------------------------------------
    def elect_leaders(self, event: se.ElectLeaders) -> None:
        if isinstance(event.partitions, str):
            scope = self._all_partitions()
        else:
            scope = [{"topic": p.topic, "partition": p.partition} for p in event.partitions]
        if event.via == "zk":
            self.cluster.write_admin_znode(
                "/admin/preferred_replica_election", {"version": 1, "partitions": scope}
            )
            return
        kind = event.election_type.upper()
        if isinstance(event.partitions, str):
            self.cluster.tool(
                ELECTION, "--bootstrap-server", self._bootstrap(), "--election-type", kind,
                "--all-topic-partitions",
            )  # fmt: skip
            return
        plan = self._plan(scope)
        self.cluster.tool(
            ELECTION, "--bootstrap-server", self._bootstrap(), "--election-type", kind,
            "--path-to-json-file", plan,
        )  # fmt: skip

    def _all_partitions(self) -> list[dict[str, object]]:
        """Every partition in ZooKeeper, as the zk path's tool listed them for 'all'."""
        zk = self.cluster.zk
        assert zk is not None
        return [
            {"topic": t, "partition": int(p)}
            for t in sorted(zk.get_children("/brokers/topics"))
            for p in sorted(zk.get_children(f"/brokers/topics/{t}/partitions"), key=int)
        ]
