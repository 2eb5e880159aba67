"""The rows one step of an event reads and writes on the driver, with its request batches and
per-row counters: what a Spark step carries as columns beside the compact ones."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from statemachines.compact_rows import CompactRow

Key = tuple[int, int]


@dataclass
class EventRows:
    """``rows``: the step's rows, replaced as its calls go (every row of the driver table, or
    those a scope selects); ``batch``: the last request batch the event used (each state-machine
    call takes the next, ``state_change_trail``); ``counters``: per-row counters by name, every
    counter the step produces listed (a zero counts: it names the event's counter keys)."""

    rows: dict[Key, CompactRow]
    # The rows as committed, when ``rows`` are some of the table's (a scope the driver fetched):
    # the commit then joins the changed ones to the table's delta.
    scope: dict[Key, CompactRow] | None = None
    batch: int = 0
    counters: dict[str, dict[Key, int]] = field(default_factory=dict)
    kept: dict[str, dict[Key, object]] = field(default_factory=dict)

    def next_batch(self) -> int:
        """The batch of the state-machine call about to be made."""
        self.batch += 1
        return self.batch

    def count(self, name: str, values: dict[Key, int] | Iterable[Key] = ()) -> None:
        """Add to counter ``name`` (1 per key of an iterable), naming it even if nothing counts."""
        counter = self.counters.setdefault(name, {})
        pairs = values.items() if isinstance(values, dict) else ((k, 1) for k in values)
        for key, n in pairs:
            if n:
                counter[key] = counter.get(key, 0) + n

    def keep(self, name: str, values: dict[Key, object]) -> None:
        """A per-row result an event's reply reads (an AlterIsr error code)."""
        self.kept.setdefault(name, {}).update(values)

    def where(self, test: Callable[[CompactRow], bool]) -> list[Key]:
        """The keys of the rows ``test`` holds for, in key order."""
        return [k for k, r in sorted(self.rows.items()) if test(r)]
