"""``whatif.sources.read_cluster``: the snapshot and its side files checked in plain Python, before
Spark (no session here), with the two exceptions Kafka's own ``kafka-topics.sh --describe`` output
justifies (``whatif.snapshot_checks``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from whatif.errors import WhatIfInputError
from whatif.sources import read_cluster

BAD = Path(__file__).resolve().parent / "data" / "bad"


def test_filtered_describe_output_makes_an_unknown_sizes_row_a_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # --under-replicated-partitions prints partition lines only (TopicCommand's filtered
    # describe): a sizes file of the whole cluster names partitions it does not list.
    sizes = BAD / "sizes-unknown-partition.csv"
    snapshot = read_cluster(describe=BAD / "describe-filtered.txt", sizes=sizes)
    assert capsys.readouterr().err.splitlines() == [
        f"kce: warning: {sizes}: 1 row(s) name partitions the filtered describe output does not "
        "list (first orders-7, line 3); they are not used"
    ]
    assert snapshot.known is not None and snapshot.known.filtered


def test_the_full_describe_output_refuses_a_sizes_row_naming_no_partition() -> None:
    with pytest.raises(WhatIfInputError, match=r"sizes-unknown-partition\.csv:3: orders-7 is not"):
        read_cluster(describe=BAD / "describe-valid.txt", sizes=BAD / "sizes-unknown-partition.csv")


def test_a_rack_map_adds_idle_brokers_to_describe_text_only() -> None:
    # Describe text lists replicas, not brokers: broker 9, holding none, is known from the map.
    racks = BAD / "racks-unknown-broker.csv"
    snapshot = read_cluster(describe=BAD / "describe-valid.txt", rack_map=racks)
    assert snapshot.live == (1, 2, 3, 9)
    assert snapshot.merged_racks() == {1: "a", 2: "b", 3: "c", 9: "d"}
    with pytest.raises(WhatIfInputError, match="broker\\(s\\) 9 are not brokers of the snapshot"):
        read_cluster(scenario=BAD / "scenario-valid.yaml", rack_map=racks)
