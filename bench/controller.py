"""Benchmark: the controller end to end, one event at a time, on generated clusters.

Per cluster size (RF 3, 100 brokers in 3 racks, 100 partitions per topic, fixed seed) the
cluster is generated and bootstrapped into the in-memory ZooKeeper with the bulk paths, 100
emulated brokers register, and broker 0's controller module wins and loads the context. Then,
``--repeat`` times, on ``local[2]``:

1. broker failure: a broker of rack 2 crashes (``BrokerChange``);
2. broker startup: it returns (``BrokerChange``);
3. controller failover, after the returned broker caught up: the active controller's broker
   dies and another module loads the whole context from ZooKeeper (the ``Reelect`` whose
   processing ran ``on_controller_failover``);
4. preferred re-election after startup: an ``AutoPreferredReplicaLeaderElection`` pass moves the
   returned broker's preferred leaderships (~1 % of partitions) back;
5. controlled shutdown of a broker of rack 1 (the sum of its ``ControlledShutdown`` events);
6. nine more brokers of rack 1 crash, all ten return and catch up, a second failover (3.);
7. auto-rebalance pass on an imbalanced cluster: ~10 % of partitions move back.

Each step is timed twice: the processing time of the event(s) that matter (``EventRecord``
``processing_ms``: wall time inside the handler, what the targets judge) and the wall clock of the
whole step (watch delivery, every module's queue, ZooKeeper writes, until all modules are idle).
Partitions have one replica per rack, so brokers of one rack leaving take no partition offline.

Untimed, between the steps: a returning broker is back in the ISRs once its leaders wrote them
(Kafka's ISR expansion); the bench writes those state znodes in bulk and the failover that
follows loads them, so every pass moves exactly the brokers named above (crashed controllers
stay out of the ISRs). A controller's broker moves its leaderships away before it dies, because
elections made during a failover are not mirrored to ZooKeeper yet (see ``controller_leaves``).
Any automatic follower catch-up of the emulation is pushed past the end of the run.

Also: a burst of 1,000 single-partition ISR changes (``EmulatedCluster.isr_changes``: leaders
shrinking them in one pass), events/s from the first write until the controller is idle; driver
memory (Python RSS, JVM heap after a full GC, cached blocks) after setup and after the events; and a
lineage check on the ``--lineage-size`` cluster: ``--lineage-events`` alternating small events
(an ElectLeaders of one partition, a crash or return of one broker), first 20 vs last 20.

With ``--bursts-only`` the steps above are replaced by one broker failure and its return (the
tables then hold deltas, as after any event), and ``--repeat`` counts the ZooKeeper bursts.

    python bench/controller.py [--sizes 1e5,1e6,1e7] [--repeat 3] [--lineage-events 200]
                               [--bursts-only] [--driver-memory 8g]
                               [--out bench/results/controller-DATE.json]
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

# Run as a script, this file's directory comes first on the path and its name would shadow the
# ``controller`` package.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

from controller.emulation.cluster import EmulatedCluster
from controller.events import controller_events as ev
from controller.kafka_controller import KafkaController
from controller.partition_store import STATE_COLUMNS, EmulatedEnsemble, bootstrap_cluster
from controller.records import ControllerSettings, EventRecord
from controller.zk.paths import CONTROLLER_EPOCH
from controller.zk.protocol import ZkClient
from spark_app.scenario.model import DEFAULT_DRIVER_ROWS
from spark_app.session import environment, get_spark, parse_sizes
from statemachines import schemas as s
from statemachines.election_kinds import ElectionTrigger, ElectionType
from statemachines.generator import SyntheticCluster, generate_cluster

BROKERS = 100
RACKS = 3
RF = 3
PARTITIONS_PER_TOPIC = 100
SEED = 42
MASTER = "local[2]"
GROUP = 10  # brokers of one rack that leave and return before the imbalanced-cluster pass
LINEAGE_WINDOW = 20
LINEAGE_LIMIT = 1.2
ISR_BURST = 1_000
ALTER_ISR_BURST = ISR_BURST  # requests queued back to back share one bulk pass
BULK_TARGETS = {10**6: 1.0, 10**7: 5.0}
FAILOVER_TARGETS = {10**7: 20.0}
ISR_RATE_TARGET = 100.0
NEVER_MS = 10 * 365 * 24 * 3600 * 1000  # a follower catch-up delay that never comes due

# Operation names (rows of the table), in the order they are reported.
BROKER_FAILURE = "broker failure (BrokerChange)"
BROKER_STARTUP = "broker startup (BrokerChange)"
PREFERRED_AFTER_STARTUP = "preferred re-election after startup (auto-rebalance pass)"
CONTROLLED_SHUTDOWN = "controlled shutdown (ControlledShutdown)"
REBALANCE_IMBALANCED = f"auto-rebalance pass, {GROUP} brokers imbalanced"
FAILOVER = "controller failover (Reelect, context load)"
INITIAL_LOAD = "first controller election (Startup, context load)"
BULK = (
    BROKER_FAILURE,
    BROKER_STARTUP,
    PREFERRED_AFTER_STARTUP,
    CONTROLLED_SHUTDOWN,
    REBALANCE_IMBALANCED,
)
ORDER = (*BULK, FAILOVER, INITIAL_LOAD)


# ---- measurements --------------------------------------------------------------------------------


@dataclass
class Runs:
    """Samples of one operation at one size: step wall clock and summed event processing."""

    wall_s: list[float] = field(default_factory=list)
    processing_s: list[float] = field(default_factory=list)
    elected: list[int] = field(default_factory=list)
    zk_writes: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def median_wall(self) -> float:
        return statistics.median(self.wall_s)

    def median_processing(self) -> float:
        return statistics.median(self.processing_s)


def python_rss_mb() -> float:
    """Resident set size of this process now (``/proc/self/statm``, no psutil)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def python_peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def memory(spark: SparkSession) -> dict[str, float | int | None]:
    """Driver memory: Python RSS (now, peak), JVM heap used after a full GC, cached blocks.

    In ``local`` mode the executor lives in the driver JVM, so the heap includes the committed
    generation; ``cached_mb`` separates those blocks from the rest.
    """
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    # Dropped generations are freed by Spark's cleaner thread after a JVM GC, asynchronously:
    # a few rounds with a pause let it catch up, so the reading is the live set.
    for _ in range(3):
        gc.collect()
        jvm.System.gc()
        time.sleep(1)
    runtime = jvm.java.lang.Runtime.getRuntime()
    cached_mb: float | None = None
    cached_rdds: int | None = None
    try:
        infos = spark.sparkContext._jsc.sc().getRDDStorageInfo()  # type: ignore[union-attr]
        cached_mb = sum(int(i.memSize()) for i in infos) / 2**20
        cached_rdds = len(infos)
    except Exception:  # a py4j detail of one Spark version must not void the run
        pass
    return {
        "python_rss_mb": round(python_rss_mb(), 1),
        "python_peak_rss_mb": round(python_peak_rss_mb(), 1),
        "jvm_heap_used_mb": round((runtime.totalMemory() - runtime.freeMemory()) / 2**20, 1),
        "jvm_heap_max_mb": round(runtime.maxMemory() / 2**20, 1),
        "cached_mb": None if cached_mb is None else round(cached_mb, 1),
        "cached_rdds": cached_rdds,
    }


# ---- the emulated cluster ------------------------------------------------------------------------


@dataclass
class Bench:
    """One size's cluster, its event records and the samples taken on it."""

    spark: SparkSession
    n: int
    generated: SyntheticCluster
    store: EmulatedEnsemble
    admin: ZkClient
    cluster: EmulatedCluster
    records: list[EventRecord]
    runs: dict[str, Runs] = field(default_factory=dict)

    def active(self) -> KafkaController:
        active = self.cluster.active_controller()
        if active is None:
            raise RuntimeError("no active controller")
        return active

    def step(
        self, op: str | None, action: Callable[[], None], events: Iterable[str]
    ) -> list[EventRecord]:
        """Run ``action`` and drain; the active controller's ``events`` are the measured ones.

        With ``op`` the wall clock and the summed processing time are recorded as a sample.
        An event that failed is recorded as an error of ``op`` (and printed).
        """
        gc.collect()
        mark = len(self.records)
        started = time.perf_counter()
        action()
        self.cluster.drain()
        wall = time.perf_counter() - started
        controller = self.active().broker_id
        wanted = set(events)
        measured = [
            r
            for r in self.records[mark:]
            if r.event in wanted and r.controller_id == controller and r.gauges is not None
        ]
        failed = [f"{r.event}: {r.failed}" for r in self.records[mark:] if r.failed]
        if op is None:
            if failed:
                print(f"[{self.n:.0e}] setup step: failed events {failed}")
            return measured
        if not measured:
            failed.append(f"no {'/'.join(sorted(wanted))} committed by controller {controller}")
        runs = self.runs.setdefault(op, Runs())
        runs.wall_s.append(wall)
        runs.processing_s.append(sum(r.processing_ms for r in measured) / 1000)
        runs.elected.append(sum(r.counters.get("elected", 0) for r in measured))
        runs.zk_writes.append(sum(r.zk_writes for r in measured))
        runs.errors += failed
        print(
            f"[{self.n:.0e}] {op}: wall {wall:.3f}s, processing "
            f"{runs.processing_s[-1]:.3f}s, elected {runs.elected[-1]}, "
            f"zk writes {runs.zk_writes[-1]}" + (f", FAILED {failed}" if failed else "")
        )
        return measured

    # -- what brokers and admins do ----------------------------------------------------------
    def crash(self, brokers: Iterable[int]) -> None:
        for b in brokers:
            self.cluster.crash(b)

    def start(self, brokers: Iterable[int]) -> None:
        for b in brokers:
            self.cluster.start_broker(b)

    def auto_rebalance(self) -> None:
        self.active().events.put(ev.AutoPreferredReplicaLeaderElection())

    def elect_preferred(self, topic: str, partition: int) -> None:
        self.active().events.put(
            ev.ReplicaLeaderElection(
                frozenset({ev.TopicPartition(topic, partition)}),
                ElectionType.PREFERRED,
                ElectionTrigger.AdminClientTriggered,
            )
        )

    def rejoin_isr(self, brokers: Iterable[int]) -> int:
        """The leaders add these (running) brokers back to every ISR they belong in.

        Kafka's leader appends a caught-up follower to the ISR and writes the state znode; here
        the writes go in bulk (conditional on each znode's version), and the controller learns
        the new ISRs at its next failover. Returns the partitions written.
        """
        ids = sorted(brokers)
        members = F.array(*[F.lit(b) for b in ids])
        states = self.cluster.states.read_states(self.spark)
        hosts = F.arrays_overlap(F.col(s.REPLICAS), members)
        replicas = self.generated.partitions.where(hosts).select(s.TOPIC, s.PARTITION, s.REPLICAS)
        joined = states.join(replicas, [s.TOPIC, s.PARTITION])
        isr = F.col(s.ISR)
        back = F.filter(
            F.col(s.REPLICAS), lambda r: F.array_contains(members, r) & ~F.array_contains(isr, r)
        )
        updates = (
            joined.where(F.size(back) > 0)
            .withColumn(s.ISR, F.concat(isr, back))
            .select(*STATE_COLUMNS)
            .localCheckpoint()  # the store merges it; its plan need not carry this join
        )
        written = updates.count()
        stat = self.admin.exists(CONTROLLER_EPOCH)
        assert stat is not None
        failed = self.cluster.states.write_states(updates, stat.version).count()
        if failed:
            raise RuntimeError(f"ISR rejoin: {failed} state writes failed")
        return written


def setup(spark: SparkSession, n: int, driver_rows: int = 0) -> tuple[Bench, dict[str, float]]:
    """Generate, bootstrap (bulk), register 100 brokers, elect broker 0 and load the context."""
    timings: dict[str, float] = {}
    started = time.perf_counter()
    generated = generate_cluster(
        spark, BROKERS, RACKS, n // PARTITIONS_PER_TOPIC, PARTITIONS_PER_TOPIC, RF, seed=SEED
    )
    store = EmulatedEnsemble()
    admin = store.client()
    not_written = bootstrap_cluster(
        admin, {}, generated.partitions, store.state_store(admin)
    ).count()
    if not_written:
        raise RuntimeError(f"bootstrap: {not_written} partition states not written")
    timings["bootstrap_s"] = time.perf_counter() - started

    records: list[EventRecord] = []
    # The bench triggers every rebalance pass itself: a scheduled one would land inside others.
    settings = ControllerSettings(auto_leader_rebalance_enable=False, driver_rows=driver_rows)
    # Followers rejoin ISRs when the bench says so (``rejoin_isr``): an emulation that lets them
    # catch up by itself would do it inside the timed steps.
    fields = getattr(EmulatedCluster, "__dataclass_fields__", {})
    extra: dict[str, Any] = {"catch_up_ms": NEVER_MS} if "catch_up_ms" in fields else {}
    if "alter_isr" in fields:  # the bursts pick their ISR path themselves
        extra["alter_isr"] = False
    cluster = EmulatedCluster(spark, store, settings, on_event=records.append, **extra)
    bench = Bench(spark, n, generated, store, admin, cluster, records)
    mark = time.perf_counter()
    for b in range(BROKERS):
        cluster.add_broker(b, f"rack-{b % RACKS}")
        cluster.start_broker(b, start_controller=False)
    timings["brokers_s"] = time.perf_counter() - mark

    mark = time.perf_counter()
    loaded = bench.step(None, cluster.brokers[0].controller.startup, ["Startup"])
    for b in range(1, BROKERS):
        cluster.brokers[b].controller.startup()
    cluster.drain()
    timings["first_election_s"] = time.perf_counter() - mark
    if not loaded or bench.active().broker_id != 0:
        raise RuntimeError("broker 0 did not become the controller")
    first = bench.runs.setdefault(INITIAL_LOAD, Runs())
    first.wall_s.append(timings["first_election_s"])
    first.processing_s.append(loaded[0].processing_ms / 1000)
    first.elected.append(loaded[0].counters.get("elected", 0))
    first.zk_writes.append(loaded[0].zk_writes)
    timings["setup_s"] = time.perf_counter() - started
    return bench, timings


# ---- the scenario --------------------------------------------------------------------------------


def rack(r: int) -> list[int]:
    return [b for b in range(BROKERS) if b % RACKS == r]


def controller_leaves(bench: Bench) -> int:
    """The active controller's broker moves its leaderships away (untimed); returns its id.

    After a hard crash the new controller would also elect the dead broker's partitions during
    the failover: the timed step would be a context load plus a broker failure's elections.
    A controlled shutdown first keeps it a context load.
    """
    old = bench.active()
    epoch = bench.cluster.brokers[old.broker_id].epoch
    bench.step(None, lambda: old.events.put(ev.ControlledShutdown(old.broker_id, epoch)), [])
    return old.broker_id


def failover(bench: Bench, old: int) -> None:
    """The controller's broker dies; another module wins and loads the context. Then it returns."""
    bench.step(FAILOVER, lambda: bench.crash([old]), ["Reelect"])
    if bench.active().broker_id == old:
        raise RuntimeError("the crashed controller is still active")
    bench.step(None, lambda: bench.start([old]), [])


def failed_broker(r: int) -> int:
    """The broker of rack 2 that fails in repeat ``r`` (never a controller: 0 or 1)."""
    spare = [b for b in rack(2) if b not in {0, 1}]
    return spare[r % len(spare)]


def one_repeat(bench: Bench, r: int) -> None:
    """One sample of every bulk operation and two controller failovers (see module docstring).

    Brokers of racks 1 and 2 are the ones that leave; rack 0 holds broker 0, and the controllers
    (0 and 1, which alternate) are never picked. Partitions have one replica per rack, so a whole
    group of one rack leaving takes no partition offline.
    """
    controllers = {0, 1}
    failed = failed_broker(r)
    group_pool = [b for b in rack(1) if b not in controllers]
    groups = len(group_pool) // GROUP
    group = group_pool[(r % groups) * GROUP : (r % groups + 1) * GROUP]
    if bench.active().broker_id in (failed, *group):
        raise RuntimeError("a picked broker is the controller")

    # Phase A: one broker fails and returns; after it caught up, a failover and a rebalance pass.
    bench.step(BROKER_FAILURE, lambda: bench.crash([failed]), ["BrokerChange"])
    bench.step(BROKER_STARTUP, lambda: bench.start([failed]), ["BrokerChange"])
    leaving = controller_leaves(bench)  # before the ISR writes: it writes with its cached versions
    bench.rejoin_isr([failed])
    failover(bench, leaving)
    bench.step(
        PREFERRED_AFTER_STARTUP, bench.auto_rebalance, ["AutoPreferredReplicaLeaderElection"]
    )

    # Phase B: one broker shuts down cleanly, nine of its rack fail; all return and catch up.
    shutdown, others = group[0], group[1:]
    bench.step(
        CONTROLLED_SHUTDOWN,
        lambda: bench.cluster.controlled_shutdown(shutdown),
        ["ControlledShutdown"],
    )
    bench.step(None, lambda: bench.crash(others), [])
    bench.step(None, lambda: bench.start(group), [])
    leaving = controller_leaves(bench)
    bench.rejoin_isr(group)
    failover(bench, leaving)
    bench.step(REBALANCE_IMBALANCED, bench.auto_rebalance, ["AutoPreferredReplicaLeaderElection"])


def lineage(bench: Bench, events: int) -> dict[str, Any]:
    """Alternate small events; compare the first and last ``LINEAGE_WINDOW`` step times.

    The cycle is: ElectLeaders (preferred) of one partition, crash of one broker, ElectLeaders
    of another partition, the broker's return. Every event commits a generation.
    """
    broker = rack(2)[-1]
    topics = bench.n // PARTITIONS_PER_TOPIC
    wall: list[float] = []
    processing: list[float] = []
    errors: list[str] = []
    for i in range(events):
        gc.collect()
        mark = len(bench.records)
        started = time.perf_counter()
        kind = i % 4
        if kind in (0, 2):
            bench.elect_preferred(f"topic-{i % topics}", (i // 4) % PARTITIONS_PER_TOPIC)
        elif kind == 1:
            bench.cluster.crash(broker)
        else:
            bench.cluster.start_broker(broker)
        bench.cluster.drain()
        wall.append(time.perf_counter() - started)
        controller = bench.active().broker_id
        done = [r for r in bench.records[mark:] if r.controller_id == controller]
        processing.append(sum(r.processing_ms for r in done) / 1000)
        errors += [f"{r.event}: {r.failed}" for r in bench.records[mark:] if r.failed]
    window = min(LINEAGE_WINDOW, max(1, events // 2))
    first, last = statistics.median(wall[:window]), statistics.median(wall[-window:])
    result = {
        "events": events,
        "window": window,
        "first_wall_s": first,
        "last_wall_s": last,
        "first_processing_s": statistics.median(processing[:window]),
        "last_processing_s": statistics.median(processing[-window:]),
        "ratio": last / first,
        # Per kind: ElectLeaders of one partition, and one broker's crash or return.
        "elect_one_processing_s": statistics.median(processing[0::2]),
        "one_broker_processing_s": statistics.median(processing[1::2] or [0.0]),
        "met": last <= LINEAGE_LIMIT * first,
        "wall_s": wall,
        "processing_s": processing,
        "errors": errors,
        "generation": bench.active().ctx.generation,
    }
    print(
        f"[{bench.n:.0e}] lineage: {events} events, median of first {window} {first:.3f}s, "
        f"last {window} {last:.3f}s (x{last / first:.2f}); processing, median: ElectLeaders "
        f"of one partition {result['elect_one_processing_s']:.3f}s, one broker's crash or "
        f"return {result['one_broker_processing_s']:.3f}s"
        + (f", FAILED {errors[:3]}" if errors else "")
    )
    return result


def isr_burst(bench: Bench, offset: int, changes: int, alter_isr: bool) -> dict[str, Any] | None:
    """``changes`` single-partition ISR shrinks by their leaders, then the controller drains.

    With ``alter_isr`` False each change is the leader's state-znode write plus an
    ``/isr_change_notification`` node (IBP < 2.7); with True it is one AlterIsr request (2.7+).
    The leaders make them in one pass (``EmulatedCluster.isr_changes``, as Kafka's ISR
    expiration task; one ``isr_change`` after another in releases without it). Partitions are
    taken topic by topic from topic ``offset``. Returns None when the emulation has no
    ``isr_change`` yet.
    """
    change = getattr(bench.cluster, "isr_change", None)
    if change is None:
        return None
    one_pass = getattr(bench.cluster, "isr_changes", None)
    topics = bench.n // PARTITIONS_PER_TOPIC
    picked = [
        (f"topic-{(offset + i // PARTITIONS_PER_TOPIC) % topics}", i % PARTITIONS_PER_TOPIC)
        for i in range(changes)
    ]
    selection = bench.spark.createDataFrame(picked, "topic string, partition int")
    current = bench.cluster.states.read_states(bench.spark, selection).collect()
    shrinks: list[tuple[str, int, list[int]]] = []
    for row in sorted(current, key=lambda r: (r[s.TOPIC], r[s.PARTITION])):
        isr = list(row[s.ISR])
        followers = [b for b in isr if b != row[s.LEADER]]
        if followers:  # the last follower falls behind
            shrinks.append((row[s.TOPIC], row[s.PARTITION], [b for b in isr if b != followers[-1]]))
    previous = getattr(bench.cluster, "alter_isr", None)
    if previous is None and alter_isr:
        return None
    if previous is not None:
        bench.cluster.alter_isr = alter_isr  # type: ignore[attr-defined]
    gc.collect()
    mark = len(bench.records)
    started = time.perf_counter()
    try:
        if one_pass is not None:
            one_pass(shrinks)
        else:
            for topic, partition, isr in shrinks:
                change(topic, partition, isr)
        written = time.perf_counter()
        bench.cluster.drain()
    finally:
        if previous is not None:
            bench.cluster.alter_isr = previous  # type: ignore[attr-defined]
    wall = time.perf_counter() - started
    controller = bench.active().broker_id
    done = [r for r in bench.records[mark:] if r.controller_id == controller]
    processing = sum(r.processing_ms for r in done) / 1000
    result = {
        "path": "AlterIsr" if alter_isr else "ZooKeeper notification",
        "changes": len(shrinks),
        "wall_s": wall,
        "writes_s": written - started,  # the leaders' side (emulation), before the controller
        "events_per_s": len(shrinks) / wall,
        "controller_events_per_s": len(shrinks) / max(processing, 1e-9),
        "controller_events": len(done),
        "processing_s": processing,
        "errors": [f"{r.event}: {r.failed}" for r in bench.records[mark:] if r.failed],
    }
    print(
        f"[{bench.n:.0e}] ISR-change burst ({result['path']}): {len(shrinks)} changes in "
        f"{wall:.3f}s ({result['events_per_s']:.1f}/s; writes {result['writes_s']:.3f}s, "
        f"{len(done)} controller events {result['processing_s']:.3f}s)"
        + (f", FAILED {result['errors'][:3]}" if result["errors"] else "")
    )
    return result


def failure_and_return(bench: Bench) -> None:
    """One broker failure and its return (the first sample of ``one_repeat``'s phase A)."""
    failed = failed_broker(0)
    bench.step(BROKER_FAILURE, lambda: bench.crash([failed]), ["BrokerChange"])
    bench.step(BROKER_STARTUP, lambda: bench.start([failed]), ["BrokerChange"])
    bench.rejoin_isr([failed])


def bench_size(
    spark: SparkSession,
    n: int,
    repeat: int,
    lineage_events: int | None,
    isr_changes: int,
    alter_isr_changes: int,
    bursts_only: bool = False,
    driver_rows: int = 0,
) -> dict[str, Any]:
    bench, timings = setup(spark, n, driver_rows)
    print(
        f"[{n:.0e}] setup {timings['setup_s']:.1f}s (generate + bootstrap "
        f"{timings['bootstrap_s']:.1f}s, brokers {timings['brokers_s']:.1f}s, first election "
        f"{timings['first_election_s']:.1f}s)"
    )
    after_setup = memory(spark)
    print(f"[{n:.0e}] memory after setup: {after_setup}")
    if bursts_only:
        failure_and_return(bench)
    else:
        for r in range(repeat):
            one_repeat(bench, r)
    lineage_result = lineage(bench, lineage_events) if lineage_events else None
    bursts: dict[str, list[dict[str, Any]] | None] = {"zk": None, "alter_isr": None}
    topics_per_burst = -(-max(isr_changes, alter_isr_changes, 1) // PARTITIONS_PER_TOPIC)
    if isr_changes:
        found = [isr_burst(bench, r * topics_per_burst, isr_changes, False) for r in range(repeat)]
        bursts["zk"] = None if found[0] is None else [b for b in found if b is not None]
    if alter_isr_changes:
        one = isr_burst(bench, repeat * topics_per_burst, alter_isr_changes, True)
        bursts["alter_isr"] = None if one is None else [one]
    if isr_changes and bursts["zk"] is None:
        print(f"[{n:.0e}] ISR-change burst: not available (no EmulatedCluster.isr_change yet)")
    after_events = memory(spark)
    print(f"[{n:.0e}] memory after events: {after_events}")
    result = {
        "partitions": n,
        "setup": timings,
        "generations": bench.active().ctx.generation,
        "events_processed": len(bench.records),
        "memory": {"after_setup": after_setup, "after_events": after_events},
        "operations": {
            op: {
                "median_wall_s": runs.median_wall(),
                "median_processing_s": runs.median_processing(),
                **asdict(runs),
            }
            for op, runs in bench.runs.items()
        },
        "lineage": lineage_result,
        "isr_burst": bursts,
        "load_avg_1m": os.getloadavg()[0],
    }
    bench.store.close()
    del bench
    spark.catalog.clearCache()
    gc.collect()
    spark.sparkContext._jvm.System.gc()  # type: ignore[union-attr]
    return result


# ---- report --------------------------------------------------------------------------------------


def target_of(op: str, n: int) -> float | None:
    if op in BULK:
        return BULK_TARGETS.get(n)
    if op == FAILOVER:
        return FAILOVER_TARGETS.get(n)
    return None


def verdict(ok: bool | None) -> str:
    return "—" if ok is None else ("yes" if ok else "**no**")


def rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The table's rows; ``met`` judges the per-event processing time against the target."""
    out = []
    for size in results:
        n = size["partitions"]
        for op in ORDER:
            o = size["operations"].get(op)
            if o is None:
                continue
            target = target_of(op, n)
            met = None if target is None else o["median_processing_s"] <= target
            if o["errors"]:
                met = False
            out.append(
                {
                    "operation": op,
                    "partitions": n,
                    "wall": f"{o['median_wall_s']:.3f}",
                    "processing": f"{o['median_processing_s']:.3f}",
                    "runs": len(o["wall_s"]),
                    "target": "—" if target is None else f"≤ {target:g} s",
                    "met": verdict(met) + (" (errors)" if o["errors"] else ""),
                }
            )
        for key, label in (("zk", "ZooKeeper notifications"), ("alter_isr", "AlterIsr requests")):
            out.append(burst_row(size, key, label))
        lin = size["lineage"]
        if lin:
            w = lin["window"]
            out.append(
                {
                    "operation": f"lineage: first {w} of {lin['events']} small events",
                    "partitions": n,
                    "wall": f"{lin['first_wall_s']:.3f}",
                    "processing": f"{lin['first_processing_s']:.3f}",
                    "runs": w,
                    "target": "—",
                    "met": "—",
                }
            )
            out.append(
                {
                    "operation": f"lineage: last {w} of {lin['events']} small events",
                    "partitions": n,
                    "wall": f"{lin['last_wall_s']:.3f}",
                    "processing": f"{lin['last_processing_s']:.3f}",
                    "runs": w,
                    "target": f"≤ {LINEAGE_LIMIT:g} × first {w} (wall)",
                    "met": verdict(lin["met"] and not lin["errors"]),
                }
            )
    return out


def burst_row(size: dict[str, Any], key: str, label: str) -> dict[str, Any]:
    """One ISR-change burst row: the median rate over the runs, or why there is none."""
    bursts = size["isr_burst"][key]
    target = f"≥ {ISR_RATE_TARGET:g} events/s"
    if not bursts:
        return {
            "operation": f"ISR-change burst ({label}): not run or not available",
            "partitions": size["partitions"],
            "wall": "—",
            "processing": "—",
            "runs": 0,
            "target": target,
            "met": "—",
        }
    rate = statistics.median(b["events_per_s"] for b in bursts)
    alone = statistics.median(b["controller_events_per_s"] for b in bursts)
    errors = any(b["errors"] for b in bursts)
    return {
        "operation": f"ISR-change burst ({bursts[0]['changes']:,} {label}): {rate:.1f} events/s "
        f"(controller alone {alone:.1f}/s)",
        "partitions": size["partitions"],
        "wall": f"{statistics.median(b['wall_s'] for b in bursts):.3f}",
        "processing": f"{statistics.median(b['processing_s'] for b in bursts):.3f}",
        "runs": len(bursts),
        "target": target,
        "met": verdict(rate >= ISR_RATE_TARGET and not errors),
    }


def markdown(table: list[dict[str, Any]]) -> str:
    lines = [
        "| operation | partitions | median s (wall) | median s (processing) | runs | target | met? |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in table:
        lines.append(
            f"| {r['operation']} | {r['partitions']:.0e} | {r['wall']} | {r['processing']} | "
            f"{r['runs']} | {r['target']} | {r['met']} |"
        )
    return "\n".join(lines)


def memory_markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "| partitions | when | Python RSS MB | Python peak MB | JVM heap used MB (after GC) "
        "| cached blocks MB | JVM max MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for size in results:
        for when, m in size["memory"].items():
            lines.append(
                f"| {size['partitions']:.0e} | {when.replace('_', ' ')} | {m['python_rss_mb']} | "
                f"{m['python_peak_rss_mb']} | {m['jvm_heap_used_mb']} | {m['cached_mb']} | "
                f"{m['jvm_heap_max_mb']} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e5,1e6,1e7", help="partition counts, comma separated")
    parser.add_argument("--repeat", type=int, default=3, help="samples of every operation")
    parser.add_argument(
        "--lineage-events", type=int, default=200, help="small events of the lineage check"
    )
    parser.add_argument(
        "--lineage-size", default="1e5", help="the cluster size the lineage check runs on"
    )
    parser.add_argument(
        "--isr-changes", type=int, default=ISR_BURST, help="ISR changes per burst (0: none)"
    )
    parser.add_argument(
        "--alter-isr-changes",
        type=int,
        default=ALTER_ISR_BURST,
        help="ISR changes of the one AlterIsr burst per size (0: none)",
    )
    parser.add_argument(
        "--bursts-only",
        action="store_true",
        help="one broker failure and return, then the ISR bursts (no other steps)",
    )
    parser.add_argument(
        "--driver-rows",
        type=int,
        default=DEFAULT_DRIVER_ROWS,
        help="execution.driver_rows of the controllers (0: every event in Spark)",
    )
    parser.add_argument(
        "--driver-memory",
        default="auto",
        help="JVM heap, where the cached tables live (auto: 8g, 16g when 1e7 is among the sizes)",
    )
    parser.add_argument(
        "--out",
        default=f"bench/results/controller-{datetime.date.today().isoformat()}.json",
    )
    args = parser.parse_args(argv)
    sizes = parse_sizes(args.sizes)
    for n in sizes:
        if n % PARTITIONS_PER_TOPIC or n < PARTITIONS_PER_TOPIC * GROUP:
            parser.error(f"size {n} must be a multiple of {PARTITIONS_PER_TOPIC}, at least 1000")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    lineage_size = int(float(args.lineage_size))

    started = time.perf_counter()
    memory_arg = args.driver_memory
    if memory_arg == "auto":
        # The ZooKeeper store and the committed generation are both cached in the driver JVM:
        # about 60 MB per 1e5 partitions, so about 6 GB at 1e7 before the working set.
        memory_arg = "16g" if max(sizes) >= 10**7 else "8g"
    spark = get_spark(MASTER, {"spark.driver.memory": memory_arg})
    info = environment(spark)
    load_start = os.getloadavg()
    results = []
    for n in sizes:
        events = args.lineage_events if n == lineage_size else None
        results.append(
            bench_size(
                spark,
                n,
                args.repeat,
                events,
                args.isr_changes,
                args.alter_isr_changes,
                args.bursts_only,
                args.driver_rows,
            )
        )
    load_end = os.getloadavg()

    table = rows(results)
    text = markdown(table)
    mem = memory_markdown(results)
    setup = " ".join(f"{r['partitions']:.0e}: {r['setup']['setup_s']:.1f}s;" for r in results)
    line = (
        f"Machine: {info['cores']} cores, {info['memory_gib']} GiB, Spark {info['spark']} "
        f"({info['spark_master']}, driver memory {info['driver_memory']}), Java {info['java']}, "
        f"Python {info['python']}; load average (1/5/15 min) at start "
        f"{'/'.join(f'{x:.2f}' for x in load_start)}, at end "
        f"{'/'.join(f'{x:.2f}' for x in load_end)}; medians of {args.repeat} runs. "
        f"'processing' is the measured event(s)' handler time (what the targets judge), 'wall' "
        f"the whole step until every controller module is idle. Setup: {setup}"
    )
    print()
    print(text)
    print()
    print(mem)
    print()
    print(line)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "machine": info,
        "config": {
            "sizes": sizes,
            "repeat": args.repeat,
            "lineage_events": args.lineage_events,
            "bursts_only": args.bursts_only,
            "driver_rows": args.driver_rows,
            "lineage_size": lineage_size,
            "brokers": BROKERS,
            "racks": RACKS,
            "replication_factor": RF,
            "partitions_per_topic": PARTITIONS_PER_TOPIC,
            "seed": SEED,
            "imbalanced_group": GROUP,
            "isr_changes": args.isr_changes,
            "alter_isr_changes": args.alter_isr_changes,
        },
        "load_avg_start": load_start,
        "load_avg_end": load_end,
        "total_s": time.perf_counter() - started,
        "results": results,
        "table": table,
        "markdown": text,
        "memory_markdown": mem,
    }
    out.write_text(json.dumps(doc, indent=2))
    print(f"wrote {out} ({doc['total_s']:.0f}s total)")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
