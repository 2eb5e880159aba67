"""Columns every handler carries from the table it starts from to the generation it returns."""

from __future__ import annotations

from pyspark.sql import DataFrame

from controller.commit.diff import PREVIOUS
from controller.commit.pending import RESULTS
from statemachines.state_change_errors import ERRORS
from statemachines.state_change_trail import REQUEST_BATCH, TRAIL

# A row's refused transitions and the transitions it went through (for the state-change log and
# the broker requests) with the count of request batches they took so far, its values in the
# generation the handler started from (so the commit finds the changed rows, and their old
# values, without a join), and the per-row results of the event's earlier steps
# (``controller.commit.pending``).
TRACKED = (ERRORS, TRAIL, REQUEST_BATCH, PREVIOUS, RESULTS)


def tracked(df: DataFrame) -> list[str]:
    """The ``TRACKED`` columns ``df`` has, to list beside the compact ones in a select."""
    return [c for c in TRACKED if c in df.columns]
