"""``kce whatif``'s inputs, read and validated before Spark starts (``spark_app.preflight``).

``--master`` and ``--zk`` are checked for their syntax, ``--out`` is claimed, the snapshot and the
side files are read (``sources.read_cluster``) and a plan is parsed. What needs the cluster as
data (a plan's partitions against the snapshot's) is checked by the question itself.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from spark_app.messages import cut
from spark_app.preflight import (
    ForeignOutputError,
    InvalidArgumentError,
    announce,
    check_master,
    check_zk_connect,
    claim_output,
)
from whatif.cluster import WhatIfInputError
from whatif.failure import named_brokers
from whatif.failure_sets import check_any
from whatif.options import DecommissionOptions, FailOptions, RollOptions
from whatif.plan_check import parse_plan
from whatif.roll import check_batches
from whatif.snapshot_checks import check_execute_plan
from whatif.sources import ClusterInput, ZkOptions, read_cluster


def check_arguments(
    args: argparse.Namespace, options: object, out: Path, zk_options: ZkOptions
) -> ClusterInput:
    """Every input of ``args`` validated (``WhatIfInputError`` names the first problem); the
    snapshot, ready to be built."""
    try:
        check_master(args.master)
        check_zk_connect(args.zk)
        replacing = claim_output(out, "whatif")
    except (InvalidArgumentError, ForeignOutputError) as err:
        raise WhatIfInputError(str(err)) from None
    plan = getattr(args, "plan", None)
    snapshot = read_cluster(
        describe=args.describe,
        zk=args.zk,
        run=args.run,
        scenario=args.scenario,
        rack_map=args.rack_map,
        sizes=args.sizes,
        config=args.config,
        zk_options=zk_options,
    )
    if snapshot.known is not None:
        _check_named_brokers(snapshot, options)
    if plan is not None:
        parsed = parse_plan(plan)
        if args.question == "execute" and snapshot.known is not None:
            # The brokers a scale-out's plan adds (--new-brokers) are live for the check, as
            # they are once started: racks are checked with them by the question itself.
            new = getattr(options, "new_brokers", ())
            racks = {**snapshot.merged_racks(), **{b.id: b.rack for b in new}}
            live = [*snapshot.live, *(b.id for b in new)]
            check_execute_plan(snapshot.known, plan, parsed, live, racks)
    announce(replacing)
    return snapshot


def _check_named_brokers(snapshot: ClusterInput, options: object) -> None:
    """The brokers and the rack a question names, against a snapshot read in plain Python."""
    racks = snapshot.merged_racks()
    if isinstance(options, FailOptions):
        if options.any_k is None:
            named_brokers(snapshot.live, racks, snapshot.name, options, snapshot.down)
        else:
            check_any(snapshot.live, options.any_k)
    if isinstance(options, RollOptions):
        check_batches(snapshot.live, racks, options)
    if isinstance(options, DecommissionOptions) and snapshot.known is not None:
        unknown = sorted(set(options.brokers) - snapshot.known.brokers)
        if unknown:
            listed = ",".join(map(str, options.brokers))
            known = ",".join(map(str, sorted(snapshot.known.brokers)))
            raise WhatIfInputError(
                f"--brokers {listed}: unknown broker(s) {','.join(map(str, unknown))} — the "
                f"snapshot knows {cut(known)}"
            )
