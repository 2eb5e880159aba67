"""Controller property tests: small emulated clusters, event steps, invariants and a plain model.

``Harness`` boots a cluster on the in-memory ZooKeeper (every broker up, the first broker's module
starts first and wins ``/controller``), applies resolved ``Event``s the way brokers and admins
cause them, and takes a ``Snapshot`` of the active controller and ZooKeeper (both tables in one collect).
``violations`` lists every broken invariant of a snapshot (against the one before it), and
``predict`` drives ``statemachines.reference_controller.ReferenceController`` (Kafka's rules in
plain Python) through the same events, for as long as the controller does not move.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import strategies as st
from pyspark.sql import Row, SparkSession
from pyspark.sql import functions as F

from controller.emulation.cluster import CONTROLLED_SHUTDOWN_MAX_RETRIES, EmulatedCluster
from controller.events import controller_events as ev
from controller.kafka_controller import KafkaController
from controller.partition_store import EmulatedEnsemble, Ensemble, bootstrap_cluster
from controller.records import ControllerSettings, EventRecord
from controller.zk.admin_zk_client import request_topic_deletion, set_topic_config
from controller.zk.kafka_zk_client import get_controller_id
from controller.zk.paths import ControllerEpochZNode, PartitionStateZNode
from statemachines import schemas as s
from statemachines.election_kinds import ElectionTrigger, ElectionType
from statemachines.layout import to_public_partitions
from statemachines.partition_states import PartitionState
from statemachines.reference import Partition
from statemachines.reference_controller import ReferenceController
from statemachines.replica_states import ReplicaState

Key = tuple[str, int]
DELETION_STARTED = ReplicaState.ReplicaDeletionStarted

UNCLEAN = "unclean.leader.election.enable"
CHECK_INTERVAL_S = 30
IMBALANCE_PERCENTAGE = 10
SETTINGS = ControllerSettings(
    auto_leader_rebalance_enable=True,
    leader_imbalance_per_broker_percentage=IMBALANCE_PERCENTAGE,
    leader_imbalance_check_interval_seconds=CHECK_INTERVAL_S,
)
# Failures a handler may legitimately end with: a deposed controller noticing it was deposed.
EXPECTED_FAILURES = (None, "ControllerMovedException")


def name(key: Key) -> str:
    return f"{key[0]}-{key[1]}"


# ---- the starting cluster -----------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class ClusterSpec:
    """Brokers (all up at the start), partitions as a healthy cluster left them, unclean topics."""

    brokers: tuple[int, ...]
    partitions: tuple[Partition, ...]
    unclean_topics: frozenset[str]

    @property
    def keys(self) -> list[Key]:
        return sorted((p.topic, p.partition) for p in self.partitions)

    def rows(self) -> list[tuple[Any, ...]]:
        """``PARTITIONS_SCHEMA`` rows for ``bootstrap_cluster``."""
        return [
            (p.topic, p.partition, list(p.replicas), [], [], list(p.isr), p.leader,
             p.leader_epoch, p.zk_version, p.controller_epoch, p.state.name)
            for p in self.partitions
        ]  # fmt: skip

    def __repr__(self) -> str:
        return f"ClusterSpec<{self.describe()}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """What a failing example prints (hypothesis' printer hook)."""
        printer.text(repr(self))

    def describe(self) -> str:
        parts = "; ".join(
            f"{name((p.topic, p.partition))} replicas={list(p.replicas)} isr={list(p.isr)} "
            f"leader={p.leader}"
            for p in self.partitions
        )
        unclean = ",".join(sorted(self.unclean_topics)) or "none"
        return f"brokers={list(self.brokers)}; unclean topics: {unclean}; {parts}"


@st.composite
def cluster_specs(draw: st.DrawFn) -> ClusterSpec:
    """3–5 brokers, 2–3 topics of 1–3 partitions, RF 1–3; ISR ⊆ replicas, leader ∈ ISR."""
    brokers = tuple(range(1, draw(st.integers(3, 5)) + 1))
    parts: list[Partition] = []
    unclean: set[str] = set()
    for t in range(draw(st.integers(2, 3))):
        topic = f"t{t}"
        if draw(st.booleans()):
            unclean.add(topic)
        rf = draw(st.integers(1, 3))
        for p in range(draw(st.integers(1, 3))):
            replicas = tuple(draw(st.permutations(brokers))[:rf])
            # Followers may already be out of sync; the leader is always in the ISR.
            isr = tuple(r for r in draw(st.permutations(replicas)) if draw(st.booleans()))
            isr = isr or replicas[:1]
            leader = draw(st.sampled_from(isr))
            parts.append(
                Partition(topic, p, replicas, isr, leader, leader_epoch=0, zk_version=0,
                          controller_epoch=1, state=PartitionState.OnlinePartition)
            )  # fmt: skip
    return ClusterSpec(brokers, tuple(parts), frozenset(unclean))


# ---- steps and events ---------------------------------------------------------------------------

BROKER_KINDS = ("crash", "start", "controlled_shutdown", "expire", "log_dir_failure")
# AlterIsr variants (``Step.pick``): drop a follower, add an out-of-sync replica, an older ISR
# version, an older leader epoch.
ALTER_ISR_KINDS = ("shrink", "expand", "stale_version", "fenced_epoch")


@dataclass(frozen=True)
class Step:
    """What to do next, resolved against the cluster when it runs (see ``Harness.resolve``).

    ``target`` picks the active controller's broker or one of the others for broker steps;
    ``pick`` chooses among the candidates; ``subset`` is a bit mask over the sorted partition keys
    for elections (0 = every partition).
    """

    kind: str
    target: str = "follower"
    pick: int = 0
    election: ElectionType = ElectionType.PREFERRED
    subset: int = 0

    def __repr__(self) -> str:
        if self.kind == "elect":
            return f"Step(elect {self.election.name} subset={self.subset})"
        if self.kind == "rebalance":
            return "Step(rebalance)"
        if self.kind in ("unclean_enable", "delete_topic"):
            return f"Step({self.kind} pick={self.pick})"
        if self.kind == "alter_isr":
            return f"Step(alter_isr {ALTER_ISR_KINDS[self.pick % 4]} subset={self.subset})"
        return f"Step({self.kind} {self.target} pick={self.pick})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


def steps(failover: bool) -> st.SearchStrategy[Step]:
    """Steps over every event the controller handles; ``failover`` lets them hit the controller."""
    targets = ["controller", "follower"] if failover else ["follower"]
    broker = st.builds(
        Step,
        kind=st.sampled_from(BROKER_KINDS),
        target=st.sampled_from(targets),
        pick=st.integers(0, 4),
    )
    elect = st.builds(
        Step,
        kind=st.just("elect"),
        election=st.sampled_from(list(ElectionType)),
        subset=st.one_of(st.just(0), st.integers(1, 511)),
    )
    other = st.builds(
        Step,
        kind=st.sampled_from(["rebalance", "unclean_enable", "delete_topic"]),
        pick=st.integers(0, 2),
    )
    alter_isr = st.builds(
        Step, kind=st.just("alter_isr"), pick=st.integers(0, 3), subset=st.integers(0, 63)
    )
    return st.one_of(broker, broker, elect, other, alter_isr)


@dataclass(frozen=True)
class Event:
    """A resolved step: a broker event, an ElectLeaders request, an auto-rebalance check, a
    topic's unclean election turned on, or an AlterIsr request from a partition's leader."""

    kind: str
    broker: int = -1
    election: ElectionType = ElectionType.PREFERRED
    partitions: frozenset[Key] | None = None
    of_controller: bool = False
    topic: str = ""
    alter: tuple[Key, ev.AlterIsrItem] | None = None

    def __str__(self) -> str:
        if self.kind == "elect":
            which = (
                "all" if self.partitions is None else ",".join(map(name, sorted(self.partitions)))
            )
            return f"ElectLeaders {self.election.name} [{which}]"
        if self.kind == "rebalance":
            return f"auto-rebalance check (+{CHECK_INTERVAL_S}s)"
        if self.kind == "unclean_enable":
            return f"{UNCLEAN}=true on topic {self.topic}"
        if self.kind == "delete_topic":
            return f"delete topic {self.topic}"
        if self.kind == "alter_isr" and self.alter is not None:
            key, item = self.alter
            return f"AlterIsr from broker {self.broker} for {name(key)}: {item}"
        role = " (active controller)" if self.of_controller else ""
        return f"{self.kind.replace('_', ' ')} of broker {self.broker}{role}"


# ---- the harness --------------------------------------------------------------------------------

# Past any run: lagging followers never rejoin the ISR (the events here, like the model, have no
# ISR expansion by leaders).
NO_CATCH_UP_MS = 10**12


@dataclass(frozen=True)
class Snapshot:
    """The active controller, its committed partitions, and ZooKeeper's view, after one event."""

    controllers: tuple[int, ...]  # running brokers whose module is active
    zk_controller: int
    zk_epoch: tuple[int, int]  # /controller_epoch data and version
    epoch: tuple[int, int]  # the active context's epoch and epoch zk version
    live: dict[int, int]  # the controller's live brokers and their epochs
    shutting_down: frozenset[int]
    registered: dict[int, int]  # running, registered brokers and their epochs (ground truth)
    partitions: dict[Key, Partition]
    zk_states: dict[Key, tuple[int, int, tuple[int, ...], int, int]]
    offline_gauge: int | None
    failures: tuple[str, ...]
    deleting: frozenset[str] = frozenset()  # topics queued for deletion


@dataclass
class Harness:
    """One emulated cluster built from a ``ClusterSpec``; close it when done."""

    spark: SparkSession
    spec: ClusterSpec
    previous_controller_epoch: int = 0  # what an earlier controller left in /controller_epoch
    records: list[EventRecord] = field(default_factory=list)
    settings: ControllerSettings = SETTINGS  # driver_rows picks the execution path
    ensemble: Ensemble | None = None  # default: a new in-memory ZooKeeper
    catch_up_ms: int = NO_CATCH_UP_MS

    def __post_init__(self) -> None:
        self.cluster = EmulatedCluster(
            self.spark,
            self.ensemble if self.ensemble is not None else EmulatedEnsemble(),
            self.settings,
            self.records.append,
            catch_up_ms=self.catch_up_ms,
        )
        self.admin = self.cluster.admin
        if self.previous_controller_epoch:
            epoch = ControllerEpochZNode.encode(self.previous_controller_epoch)
            self.admin.create(ControllerEpochZNode.path(), epoch, makepath=True)
        rows = self.spark.createDataFrame(self.spec.rows(), s.PARTITIONS_SCHEMA)
        bootstrap_cluster(self.admin, {}, rows, self.cluster.states)
        self.unclean_topics = set(self.spec.unclean_topics)
        for topic in sorted(self.unclean_topics):
            set_topic_config(self.admin, topic, {UNCLEAN: "true"})
        for b in self.spec.brokers:
            self.cluster.add_broker(b)
        for b in self.spec.brokers:
            self.cluster.start_broker(b, start_controller=False)
        for b in self.spec.brokers:  # broker 1's module starts first and wins /controller
            self.cluster.brokers[b].controller.startup()
            self.cluster.drain()
        self._seen = 0

    def close(self) -> None:
        self.cluster.zookeeper.close()

    # -- events --------------------------------------------------------------------------------
    def running(self) -> list[int]:
        return sorted(b.id for b in self.cluster.running())

    def active(self) -> KafkaController:
        ctrl = self.cluster.active_controller()
        assert ctrl is not None, "no active controller"
        return ctrl

    def resolve(self, step: Step) -> Event | None:
        """The concrete event for ``step`` now, or None when nothing fits (e.g. all brokers up).

        A crash or controlled shutdown needs another running broker, so one always stays up.
        """
        if step.kind == "rebalance":
            return Event("rebalance")
        if step.kind == "unclean_enable":
            clean = sorted({t for t, _ in self.spec.keys} - self.unclean_topics)
            return Event("unclean_enable", topic=clean[step.pick % len(clean)]) if clean else None
        if step.kind == "delete_topic":
            topics = sorted(self.active().ctx.topics)
            # One topic always stays: the snapshot reads the table of an active controller.
            if len(topics) < 2:
                return None
            return Event("delete_topic", topic=topics[step.pick % len(topics)])
        if step.kind == "elect":
            keys = self.spec.keys
            chosen = frozenset(k for i, k in enumerate(keys) if step.subset >> i & 1)
            return Event("elect", election=step.election, partitions=chosen or None)
        if step.kind == "alter_isr":
            return self._alter_isr(step)
        running = self.running()
        if step.kind == "start":
            stopped = sorted(set(self.spec.brokers) - set(running))
            return Event("start", stopped[step.pick % len(stopped)]) if stopped else None
        if step.kind in ("crash", "controlled_shutdown", "log_dir_failure") and len(running) < 2:
            return None
        me = self.active().broker_id
        candidates = [me] if step.target == "controller" else [b for b in running if b != me]
        if not candidates:
            return None
        b = candidates[step.pick % len(candidates)]
        return Event(step.kind, b, of_controller=b == me)

    def _alter_isr(self, step: Step) -> Event | None:
        """An AlterIsr item from the leader of the ``subset``-th partition, as the state znode
        holds it: the ISR without its last follower, with the first out-of-sync replica (live or
        not: Kafka 2.8 does not check), or a
        change proposed at an older ISR version or leader epoch."""
        ctrl = self.active()
        keys = [k for k in self.spec.keys if k[0] in ctrl.ctx.topics]  # not deleted
        if not keys:
            return None
        key = keys[step.subset % len(keys)]
        data, stat = self.admin.get(PartitionStateZNode.path(*key))
        state = PartitionStateZNode.decode(data, "")
        sender = ctrl.ctx.live_brokers.get(state.leader)
        if sender is None:
            return None
        replicas = next(p.replicas for p in self.spec.partitions if (p.topic, p.partition) == key)
        isr = tuple(state.isr)
        kind = ALTER_ISR_KINDS[step.pick % len(ALTER_ISR_KINDS)]
        followers = [r for r in isr if r != state.leader]
        new_isr = tuple(r for r in isr if r != followers[-1]) if followers else isr
        if kind == "expand":
            missing = [r for r in replicas if r not in isr]
            new_isr = (*isr, missing[0]) if missing else isr
        epoch = state.leader_epoch - (kind == "fenced_epoch")
        version = stat.version - (kind == "stale_version")
        item = ev.AlterIsrItem(epoch, new_isr, version)
        return Event("alter_isr", sender.id, alter=(key, item))

    def apply(self, event: Event) -> int:
        """Run ``event`` to quiescence; returns how many auto-rebalance checks ran meanwhile."""
        before = len(self.records)
        c = self.cluster
        if event.kind == "crash":
            c.crash(event.broker)
        elif event.kind == "start":
            c.start_broker(event.broker)
        elif event.kind == "controlled_shutdown":
            c.controlled_shutdown(event.broker)
        elif event.kind == "expire":
            c.expire_session(event.broker)
        elif event.kind == "log_dir_failure":
            c.log_dir_failure(event.broker)
        elif event.kind == "delete_topic":
            request_topic_deletion(self.admin, event.topic)
        elif event.kind == "alter_isr":
            assert event.alter is not None
            (topic, partition), item = event.alter
            ctrl = self.active()
            epoch = ctrl.ctx.live_brokers[event.broker].epoch
            tp = ev.TopicPartition(topic, partition)
            ctrl.events.put(ev.AlterIsrReceived(event.broker, epoch, {tp: item}))
        elif event.kind == "elect":
            tps = None
            if event.partitions is not None:
                tps = frozenset(ev.TopicPartition(t, p) for t, p in event.partitions)
            self.active().events.put(
                ev.ReplicaLeaderElection(tps, event.election, ElectionTrigger.AdminClientTriggered)
            )
        elif event.kind == "rebalance":
            c.advance_to(c.clock.now_ms() + CHECK_INTERVAL_S * 1000)
        elif event.kind == "unclean_enable":
            # An admin turns the topic's unclean election on; the controller broker's config
            # handler raises the event.
            set_topic_config(self.admin, event.topic, {UNCLEAN: "true"})
            self.unclean_topics.add(event.topic)
            self.active().events.put(ev.TopicUncleanLeaderElectionEnable(event.topic))
        else:
            raise ValueError(f"unknown event {event}")
        c.drain()
        return sum(r.event == "AutoPreferredReplicaLeaderElection" for r in self.records[before:])

    # -- observation -----------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """Controller, ZooKeeper and the committed table; one collect for both tables."""
        running = list(self.cluster.running())
        controllers = tuple(b.id for b in running if b.controller.is_active)
        ctrl = self.active()
        ctx = ctrl.ctx
        assert ctx.partitions is not None
        table = to_public_partitions(ctx.partitions, ctx.topics_frame()).withColumn(
            "_controller", F.lit(True)
        )
        zk = self.cluster.states.read_states(self.spark)
        rows = table.unionByName(
            zk.withColumn("_controller", F.lit(False)), allowMissingColumns=True
        ).collect()
        data, stat = self.admin.get(ControllerEpochZNode.path())
        new = self.records[self._seen :]
        self._seen = len(self.records)
        gauges = ctrl.last_gauges
        return Snapshot(
            controllers=controllers,
            zk_controller=get_controller_id(self.admin),
            zk_epoch=(ControllerEpochZNode.decode(data), stat.version),
            epoch=(ctx.epoch, ctx.epoch_zk_version),
            live={b.id: b.epoch for b in ctx.live_brokers.values()},
            shutting_down=frozenset(ctx.shutting_down),
            registered={b.id: b.epoch for b in running if b.registered},
            partitions={(r.topic, r.partition): _partition(r) for r in rows if r._controller},
            zk_states={
                (r.topic, r.partition): (
                    r.leader,
                    r.leader_epoch,
                    tuple(r.isr),
                    r.controller_epoch,
                    r.zk_version,
                )
                for r in rows
                if not r._controller
            },
            offline_gauge=None if gauges is None else gauges.offline_partitions_count,
            failures=tuple(
                f"{r.event} on controller {r.controller_id}: {first_line(r.failed)}"
                for r in new
                if r.failed not in EXPECTED_FAILURES
            ),
            deleting=frozenset(ctx.topic_names(set(ctx.deleting))),
        )


def first_line(error: str | None, limit: int = 240) -> str:
    line = error.splitlines()[0] if error else ""
    return line if len(line) <= limit else line[:limit] + "…"


def _partition(r: Row) -> Partition:
    return Partition(
        r.topic,
        r.partition,
        tuple(r.replicas),
        tuple(r.isr),
        r.leader,
        r.leader_epoch,
        r.zk_version,
        r.controller_epoch,
        PartitionState[r.state],
        tuple(r.adding_replicas),
        tuple(r.removing_replicas),
    )


# ---- invariants ---------------------------------------------------------------------------------


def violations(snap: Snapshot, before: Snapshot | None) -> list[str]:
    """Every invariant ``snap`` breaks, as readable lines (empty when all hold)."""
    out: list[str] = []
    if len(snap.controllers) != 1:
        out.append(f"active controllers among running brokers: {list(snap.controllers)}")
    if snap.zk_controller not in snap.controllers:
        out.append(f"/controller names {snap.zk_controller}, active: {list(snap.controllers)}")
    epoch = snap.epoch[0]
    if snap.zk_epoch != snap.epoch:
        out.append(f"/controller_epoch (epoch, version) {snap.zk_epoch} != context {snap.epoch}")
    if before is not None and epoch < before.epoch[0]:
        out.append(f"controller epoch went back from {before.epoch[0]} to {epoch}")
    if snap.live != snap.registered:
        out.append(f"controller's live brokers {snap.live} != registered {snap.registered}")
    if snap.shutting_down:
        out.append(f"brokers still shutting down after the event: {sorted(snap.shutting_down)}")
    out += [f"handler failed: {f}" for f in snap.failures]
    live = set(snap.registered)
    offline = 0
    for key, p in sorted(snap.partitions.items()):
        tp = name(key)
        if not set(p.isr) <= set(p.replicas):
            out.append(f"{tp}: ISR {list(p.isr)} not within replicas {list(p.replicas)}")
        if p.has_leadership and not p.isr:
            out.append(f"{tp}: empty ISR")
        if p.leader >= 0 and p.leader not in p.isr:
            out.append(f"{tp}: leader {p.leader} not in ISR {list(p.isr)}")
        if key[0] in snap.deleting:
            # §9.5: a topic being deleted goes Offline then NonExistent, and is left out of
            # OfflinePartitionsCount.
            out += _compare_zk(tp, p, snap.zk_states.get(key))
            continue
        # §5.3/§8.2: a failed election leaves the partition Offline, and the dead leader's
        # replica going OfflineReplica then clears the leader; anything Online has a live leader.
        if p.state == PartitionState.OnlinePartition and p.leader not in live:
            out.append(f"{tp}: OnlinePartition led by {p.leader}, live brokers {sorted(live)}")
        elif p.state == PartitionState.OfflinePartition:
            offline += 1
            if p.leader != s.NO_LEADER:
                out.append(f"{tp}: OfflinePartition with leader {p.leader}")
        elif p.state not in (PartitionState.OnlinePartition, PartitionState.OfflinePartition):
            out.append(f"{tp}: unexpected state {p.state.name}")
        if p.controller_epoch > epoch:
            out.append(f"{tp}: controller epoch {p.controller_epoch} > controller's {epoch}")
        out += _compare_zk(tp, p, snap.zk_states.get(key))
        if before is not None and key in before.partitions:
            # A controller that resigned during the step (its own controlled shutdown) wrote
            # with its epoch before the next one took over.
            writers = range(before.epoch[0], epoch + 1)
            out += _monotonic(tp, before.partitions[key], p, writers)
    if snap.offline_gauge != offline:
        out.append(f"OfflinePartitionsCount {snap.offline_gauge} != {offline} Offline rows")
    missing = set(snap.zk_states) - set(snap.partitions)
    if missing:
        out.append(f"state znodes of partitions the controller lacks: {sorted(missing)}")
    return out


def _compare_zk(
    tp: str, p: Partition, zk: tuple[int, int, tuple[int, ...], int, int] | None
) -> list[str]:
    if not p.has_leadership:
        return []
    mine = (p.leader, p.leader_epoch, p.isr, p.controller_epoch, p.zk_version)
    if zk != mine:
        return [
            f"{tp}: ZooKeeper (leader, leader_epoch, isr, controller_epoch, zk_version) = {zk}, "
            f"controller has {mine}"
        ]
    return []


def _monotonic(tp: str, old: Partition, new: Partition, writers: range) -> list[str]:
    out = []
    if new.leader_epoch < old.leader_epoch:
        out.append(f"{tp}: leader epoch went back from {old.leader_epoch} to {new.leader_epoch}")
    if new.zk_version < old.zk_version:
        out.append(f"{tp}: zk_version went back from {old.zk_version} to {new.zk_version}")
    # A new leader always comes with a new leader epoch (§5.5); any change is a znode write.
    if new.leader != old.leader and new.leader_epoch <= old.leader_epoch:
        out.append(f"{tp}: leader {old.leader} -> {new.leader} without a new leader epoch")
    changed = (new.leader, new.isr, new.leader_epoch) != (old.leader, old.isr, old.leader_epoch)
    if changed and new.zk_version <= old.zk_version:
        out.append(f"{tp}: {brief(old)} -> {brief(new)} without a znode write")
    if new.leader_epoch - old.leader_epoch > new.zk_version - old.zk_version:
        out.append(
            f"{tp}: leader epoch grew more than the znode version: {brief(old)} -> {brief(new)}"
        )
    # Every controller write carries the writer's epoch (KafkaZkClient.updateLeaderAndIsr).
    if new.zk_version > old.zk_version and new.controller_epoch not in writers:
        out.append(
            f"{tp}: written by controllers of epochs {writers.start}..{writers.stop - 1} but "
            f"carries controller epoch {new.controller_epoch}"
        )
    return out


# ---- the prediction -----------------------------------------------------------------------------


def predictor(spec: ClusterSpec, epoch: int) -> ReferenceController:
    """Kafka's rules for the controller that won at boot (epoch ``epoch``), every broker up.

    It follows that controller only: its context is the active one's while it stays in charge.
    """
    unclean = {t: True for t in spec.unclean_topics}
    return ReferenceController.after_failover(spec.partitions, spec.brokers, epoch, unclean)


def failover(
    rc: ReferenceController, spec: ClusterSpec, live: set[int], epoch: int, rebalance_checks: int
) -> ReferenceController:
    """Kafka's rules for the controller that took over from ``rc``'s (epoch ``epoch``, the
    ``live`` brokers registered): it reads the partitions as ``rc`` left them in ZooKeeper
    (failed log directories are not in ZooKeeper), learns the failed log directories of running
    brokers when its failover changed something (the LeaderAndIsr answers KAFKA_STORAGE_ERROR,
    as the emulated cluster notifies them), then runs its auto-rebalance checks."""
    zk = [replace(p, offline_dir_replicas=frozenset()) for p in rc.partitions.values()]
    unclean = {t: True for t in rc.unclean_by_topic if rc.unclean_by_topic[t]}
    new = ReferenceController.after_failover(zk, live, epoch, unclean)
    failed = rc.offline_dir_brokers & live
    changed = any(new.partitions[(p.topic, p.partition)] != p for p in zk)
    if failed and changed:
        new.on_log_dir_failure(failed)
    for _check in range(rebalance_checks):
        new.check_and_trigger_auto_leader_rebalance(IMBALANCE_PERCENTAGE)
    return new


def predict(rc: ReferenceController, event: Event, rebalance_checks: int) -> None:
    """Apply ``event`` to the reference controller as the harness applied it to the cluster."""
    if event.kind == "crash":
        rc.on_broker_failure({event.broker})
    elif event.kind == "start":
        rc.on_broker_startup({event.broker})
    elif event.kind == "expire":  # a bounce in one BrokerChange (§8.3)
        rc.on_broker_bounce({event.broker})
    elif event.kind == "log_dir_failure":
        rc.on_log_dir_failure({event.broker})
    elif event.kind == "delete_topic":
        rc.on_topic_deletion({event.topic})
    elif event.kind == "alter_isr":
        assert event.alter is not None
        key, item = event.alter
        rc.on_alter_isr(event.broker, {key: item})
    elif event.kind == "controlled_shutdown":
        # The broker retries while partitions remain (§8.4), as EmulatedCluster does.
        rc.shut_down_broker(event.broker, CONTROLLED_SHUTDOWN_MAX_RETRIES)
    elif event.kind == "elect":
        rc.on_replica_election(
            event.partitions, event.election, ElectionTrigger.AdminClientTriggered
        )
    elif event.kind == "unclean_enable":
        rc.on_topic_unclean_leader_election_enable(event.topic)
    answer_stop_replicas(rc)
    for _check in range(rebalance_checks):
        rc.check_and_trigger_auto_leader_rebalance(IMBALANCE_PERCENTAGE)


def answer_stop_replicas(rc: ReferenceController) -> None:
    """The emulated brokers' answers to StopReplica(delete=true): every live broker with
    replicas in ReplicaDeletionStarted answers for them without error, in broker order, until
    no more are asked (a completed deletion may start another's)."""
    while True:
        asked = sorted(
            {b for (_t, _p, b), st in rc.states.items() if st == DELETION_STARTED and b in rc.live}
        )
        if not asked:
            return
        for broker in asked:
            rc.on_stop_replica_response(broker)


def differences(predicted: Mapping[Key, Partition], actual: Mapping[Key, Partition]) -> list[str]:
    """One line per partition where the prediction and the controller disagree."""
    out = []
    for key in sorted(set(predicted) | set(actual)):
        want, got = predicted.get(key), actual.get(key)
        if want is not None:  # the table keeps failed log directories per broker, not per row
            want = replace(want, offline_dir_replicas=frozenset())
        if want != got:
            out.append(f"{name(key)}: model {brief(want)}, controller {brief(got)}")
    return out


def brief(p: Partition | None) -> str:
    if p is None:
        return "absent"
    return (
        f"(leader={p.leader}, isr={list(p.isr)}, leader_epoch={p.leader_epoch}, "
        f"zk_version={p.zk_version}, controller_epoch={p.controller_epoch}, {p.state.name})"
    )


# ---- a whole plan ------------------------------------------------------------------------------


def play_steps(
    spark: SparkSession,
    spec: ClusterSpec,
    plan: list[Step],
    with_model: bool,
    say: Callable[[str], None] = lambda _: None,
    settings: ControllerSettings = SETTINGS,
) -> list[Snapshot]:
    """Run ``plan`` on a new cluster, checking the invariants (and, ``with_model``, the
    reference controller while it can follow) after each step; the snapshots after boot and
    after each step that had something to do. A broken invariant raises AssertionError."""
    h = Harness(spark, spec, settings=settings)
    try:
        snap = h.snapshot()
        snaps = [snap]
        say(f"boot: controller {snap.controllers} epoch {snap.epoch[0]}")
        _check(snap, None, "boot")
        model: ReferenceController | None = predictor(spec, snap.epoch[0])
        # Failover with every broker up must leave the bootstrapped partitions as they were.
        diff = differences(model.partitions, snap.partitions)
        assert not diff, "after boot:\n  " + "\n  ".join(diff)
        for i, step in enumerate(plan, 1):
            event = h.resolve(step)
            if event is None:
                say(f"{i}. ({step.kind}: nothing to do)")
                continue
            checks = h.apply(event)
            before, snap = snap, h.snapshot()
            snaps.append(snap)
            moved = snap.controllers != before.controllers
            say(f"{i}. {event}" + (f" (controller now {list(snap.controllers)})" if moved else ""))
            _check(snap, before, f"step {i}: {event}")
            if not with_model or model is None:
                continue
            if event.of_controller and model.topics_to_be_deleted:
                model = None  # the successor resumes the deletion: not followed
                continue
            if event.kind == "crash" and event.of_controller:
                # The controller died with ZooKeeper as the model left it; its successor fails
                # over onto it with the brokers still registered (§3.3, §5.4, §6.4).
                model = failover(model, spec, set(snap.registered), snap.epoch[0], checks)
            elif moved or event.of_controller:
                model = None  # a move inside a step (its own shutdown or expiry): not followed
                continue
            else:
                predict(model, event, checks)
            diff = differences(model.partitions, snap.partitions)
            assert not diff, f"after step {i}: {event}:\n  " + "\n  ".join(diff)
        return snaps
    finally:
        h.close()


def _check(snap: Snapshot, before: Snapshot | None, when: str) -> None:
    problems = violations(snap, before)
    assert not problems, f"after {when}:\n  " + "\n  ".join(problems)
