"""The options of each what-if question, as the command line gives them (``spark_app.cli``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from whatif.new_brokers import NewBroker


@dataclass(frozen=True)
class FailOptions:
    """``fail``: exactly one of ``brokers``, ``rack`` or ``any_k``; ``samples`` bounds the
    K-subsets evaluated (all of them when there are at most that many, else that many random
    ones drawn with ``seed``)."""

    brokers: tuple[int, ...] | None = None
    rack: str | None = None
    any_k: int | None = None
    samples: int = 1000
    seed: int = 0


@dataclass(frozen=True)
class DecommissionOptions:
    """``decommission --brokers B``: move only B's replicas, unless ``rebalance`` (then also
    balance every other broker's replicas and preferred leaders, as ``rebalance`` does)."""

    brokers: tuple[int, ...]
    seed: int = 0
    rebalance: bool = False


@dataclass(frozen=True)
class RollOptions:
    """``roll``: batches of at most ``batch`` brokers, or one rack at a time when ``by_rack``;
    ``solver_seconds`` bounds the search for the fewest batches and the largest safe batch."""

    batch: int | None = None
    by_rack: bool = False
    solver_seconds: float = 10.0


@dataclass(frozen=True)
class ScaleOutOptions:
    """``scale-out --add N [--racks a,b,…]``; ``rebalance`` is ``add=0``. New brokers take
    the ids after the highest existing one, in order; ``racks`` gives theirs in that order."""

    add: int = 0
    racks: tuple[str, ...] | None = None
    seed: int = 0


@dataclass(frozen=True)
class LeadersOptions:
    pass


@dataclass(frozen=True)
class ExposureOptions:
    seed: int = 0


@dataclass(frozen=True)
class AuditOptions:
    """``audit PLAN.json``; ``new_brokers``: brokers the plan adds, started empty before it."""

    plan: Path
    new_brokers: tuple[NewBroker, ...] = ()


@dataclass(frozen=True)
class ExecuteOptions:
    """``execute PLAN.json``: the movement caps (``max_moves`` None: no cluster-wide cap), each
    broker's fetch throughput in MB/s, Kafka's replication throttle in bytes/s (None: none) and the
    brokers the plan adds, started empty before it."""

    plan: Path
    max_moves_per_broker: int = 5
    max_moves: int | None = None
    max_leader_moves: int = 1000
    fetch_mb_per_s: float = 100.0
    throttle: int | None = None
    new_brokers: tuple[NewBroker, ...] = ()
