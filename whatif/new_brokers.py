"""``--new-brokers``: brokers a plan places replicas on that the snapshot does not have yet.

A ``scale-out`` plan puts replicas on brokers that are started, empty, before the plan runs;
until then Kafka's tool refuses the plan (``kafka-reassign-partitions.sh`` checks every broker
id of a plan against the live brokers: "Unknown broker id"). ``audit`` and ``execute`` take them
as ``--new-brokers ID[:RACK],...`` or as the scale-out's own ``summary.json`` (or its output
directory), and add them to the snapshot's live brokers, with no replica, before the plan is
checked and run.

Checks: ids are Kafka broker ids listed once and not already in the snapshot; racks are given
for every new broker when every live broker of the snapshot has one, and for none otherwise
(Kafka's rack-aware placement needs all brokers racked or none, spec §9.4).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from statemachines.schemas import INT_MAX
from whatif.errors import WhatIfInputError

if TYPE_CHECKING:  # the command line reads --new-brokers before Spark is imported
    from whatif.cluster import WhatIfCluster

EXAMPLE = "--new-brokers 31:a,32:b (or a scale-out's summary.json)"


@dataclass(frozen=True)
class NewBroker:
    """A broker the plan assumes started, empty: its id and ``broker.rack`` (None: rackless)."""

    id: int
    rack: str | None = None


def parse_new_brokers(text: str) -> tuple[NewBroker, ...]:
    """``ID[:RACK],...``, or the path of a scale-out's ``summary.json`` or output directory."""
    path = Path(text)
    if text.endswith(".json") or "/" in text or path.is_dir():
        return _from_summary(path / "summary.json" if path.is_dir() else path)
    out = []
    for item in (x.strip() for x in text.split(",")):
        broker, colon, rack = item.partition(":")
        if not broker.strip().isdigit() or (colon and not rack.strip()):
            raise WhatIfInputError(
                f"--new-brokers {text}: {item!r} is not ID or ID:RACK — write e.g. {EXAMPLE}"
            )
        out.append(NewBroker(int(broker), rack.strip() if colon else None))
    return _checked(out, f"--new-brokers {text}")


def _from_summary(path: Path) -> tuple[NewBroker, ...]:
    where = f"--new-brokers {path}"
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise WhatIfInputError(f"{where}: cannot read it ({exc.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WhatIfInputError(f"{where}: not a summary.json ({exc}) — give {EXAMPLE}") from None
    ids = data.get("new_brokers") if isinstance(data, dict) else None
    racks = data.get("new_broker_racks", {}) if isinstance(data, dict) else None
    if not isinstance(ids, list) or not isinstance(racks, dict):
        raise WhatIfInputError(
            f"{where}: it lists no new_brokers — give the summary.json of a kce whatif "
            f"scale-out, or {EXAMPLE}"
        )
    if not all(isinstance(b, int) and not isinstance(b, bool) for b in ids):
        raise WhatIfInputError(f"{where}: new_brokers {ids!r} are not broker ids — give {EXAMPLE}")
    return _checked([NewBroker(b, racks.get(str(b))) for b in ids], where)


def _checked(brokers: list[NewBroker], where: str) -> tuple[NewBroker, ...]:
    ids = [b.id for b in brokers]
    if not brokers:
        raise WhatIfInputError(f"{where}: no broker — write e.g. {EXAMPLE}")
    big = [b for b in ids if not 0 <= b <= INT_MAX]
    if big:
        raise WhatIfInputError(f"{where}: broker id {big[0]} is not 0..{INT_MAX} (a Kafka Int)")
    twice = sorted({b for b in ids if ids.count(b) > 1})
    if twice:
        raise WhatIfInputError(f"{where}: broker {twice[0]} is listed twice — list each once")
    racked = {b.rack is not None for b in brokers}
    if len(racked) > 1:
        raise WhatIfInputError(
            f"{where}: some new brokers have a rack and some not — give one to all or none"
        )
    return tuple(brokers)


def with_new_brokers(cluster: WhatIfCluster, new: tuple[NewBroker, ...]) -> WhatIfCluster:
    """``cluster`` with the ``new`` brokers live and empty (the snapshot unchanged when none)."""
    if not new:
        return cluster
    known = set(cluster.brokers) | set(cluster.racks)
    ids = ",".join(str(b.id) for b in new)
    clash = sorted(b.id for b in new if b.id in known)
    if clash:
        raise WhatIfInputError(
            f"--new-brokers {ids}: broker {clash[0]} is already in the snapshot — new brokers "
            f"take ids it does not have (it has {_ids(sorted(known))})"
        )
    racked = bool(cluster.brokers) and all(cluster.racks.get(b) for b in cluster.brokers)
    if racked and new[0].rack is None:
        raise WhatIfInputError(
            f"--new-brokers {ids}: the snapshot's brokers have racks, the new ones none — give "
            "each its rack as ID:RACK (Kafka's rack-aware placement needs every broker racked)"
        )
    if not racked and new[0].rack is not None:
        raise WhatIfInputError(
            f"--new-brokers {ids}: the snapshot's brokers have no racks (all need one) — give "
            "theirs with --rack-map, or the new brokers without racks"
        )
    return dataclasses.replace(
        cluster,
        brokers=tuple(sorted({*cluster.brokers, *(b.id for b in new)})),
        racks={**cluster.racks, **{b.id: b.rack for b in new}},
    )


def _ids(ids: list[int]) -> str:
    return ",".join(map(str, ids)) if len(ids) <= 10 else f"{ids[0]}..{ids[-1]}"
