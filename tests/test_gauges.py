"""The controller's gauges read the same on both execution paths, to the order of their keys."""

from __future__ import annotations

from controller.commit.gauges import GAUGES, Gauges


def test_an_events_counters_are_listed_by_name_whatever_order_the_commit_summed_them() -> None:
    """``final_state.json`` is compared byte for byte between the paths, and the Spark path's
    counters come in the order its handlers declared them: both list them by name."""
    row = {g: 1 for g in GAUGES} | {"isr_updated": 1, "failed_election": 0, "isr_shrinks": 2}
    declared = Gauges.of(row, ("isr_updated", "failed_election", "isr_shrinks"), 1, 0, 0)
    other = Gauges.of(row, ("isr_shrinks", "isr_updated", "failed_election"), 1, 0, 0)
    assert list(declared.counters) == list(other.counters) == sorted(declared.counters)
    assert declared.counters == {"failed_election": 0, "isr_shrinks": 2, "isr_updated": 1}
