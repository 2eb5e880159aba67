"""How many replicas and leaderships each broker holds: what sizes a broker event's rows before
any job (the driver path takes them when they are few, ``Committer.driver_step``).

O(brokers) on the driver: counted over the table in one aggregation when first asked for after a
Spark commit, and moved by each driver-path commit's changed rows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from statemachines import schemas as s
from statemachines.compact_rows import CompactRow


@dataclass
class BrokerCounts:
    """Replicas in the assignment, and leaderships, per broker id."""

    replicas: Counter[int] = field(default_factory=Counter)
    leaders: Counter[int] = field(default_factory=Counter)

    @classmethod
    def of_table(cls, table: DataFrame) -> BrokerCounts:
        """Counted over a compact table, in one job."""
        w = s.width(table)
        slots = F.explode(F.array(*[F.col(s.replica_col(k)) for k in range(w)])).alias("b")
        replicas = table.select(slots).where(F.col("b") != s.EMPTY_SLOT).groupBy("b").count()
        leaders = table.where(F.col(s.LEADER) >= 0).groupBy(F.col(s.LEADER).alias("b")).count()
        both = replicas.withColumn("kind", F.lit(0)).unionByName(
            leaders.withColumn("kind", F.lit(1))
        )
        out = cls()
        for b, n, kind in both.collect():
            (out.leaders if kind else out.replicas)[b] = n
        return out

    def move(self, was: Iterable[CompactRow], now: Iterable[CompactRow]) -> None:
        """Rows replaced by others (a commit's changed rows, as they were and are)."""
        for sign, rows in ((-1, was), (1, now)):
            for r in rows:
                for b in r.replicas:
                    self.replicas[b] += sign
                if r.leader >= 0:
                    self.leaders[r.leader] += sign
