"""Helpers shared by the ZooKeeper tests."""

from __future__ import annotations

from typing import Any


def elect(client: Any, broker_id: int) -> int:
    """Kafka's election multi (spec §3.2): create /controller, bump /controller_epoch.

    Returns the new zk version of ``/controller_epoch`` (the fencing token).
    """
    if client.exists("/controller_epoch") is None:
        client.create("/controller_epoch", b"0")
    data, stat = client.get("/controller_epoch")
    t = client.transaction()
    controller = b'{"version":1,"brokerid":%d,"timestamp":"1"}' % broker_id
    t.create("/controller", controller, ephemeral=True)
    t.set_data("/controller_epoch", str(int(data) + 1).encode(), stat.version)
    results = t.commit()
    assert not any(isinstance(r, Exception) for r in results), results
    return int(results[1].version)
