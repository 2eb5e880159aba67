"""Controller-epoch fencing (spec §2.3): every controller write is a multi whose first op checks
the ``/controller_epoch`` zk version this controller won with.

``FencedWriter(client, epoch_zk_version).multi(ops)`` sends ``check`` + ``ops`` as one transaction.
A failed check (BADVERSION) raises ``ControllerMovedError``; any other failure raises the failing
op's own kazoo exception (the check's, if ``/controller_epoch`` is gone). On success the results
of ``ops`` are returned without the check's. ``create``/``set``/``delete`` wrap single ops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import BadVersionError, RolledBackError, RuntimeInconsistency, ZookeeperError
from kazoo.protocol.states import ZnodeStat

from controller.zk.errors import ControllerMovedError
from controller.zk.paths import CONTROLLER_EPOCH
from controller.zk.protocol import ZkClient


@dataclass(frozen=True)
class Create:
    path: str
    value: bytes = b""
    ephemeral: bool = False
    sequence: bool = False


@dataclass(frozen=True)
class SetData:
    path: str
    value: bytes
    version: int = -1


@dataclass(frozen=True)
class Delete:
    path: str
    version: int = -1


@dataclass(frozen=True)
class Check:
    path: str
    version: int


Op = Create | SetData | Delete | Check


def add_op(txn: Any, op: Op) -> None:
    if isinstance(op, Create):
        txn.create(op.path, op.value, ephemeral=op.ephemeral, sequence=op.sequence)
    elif isinstance(op, SetData):
        txn.set_data(op.path, op.value, op.version)
    elif isinstance(op, Delete):
        txn.delete(op.path, op.version)
    else:
        txn.check(op.path, op.version)


def raise_for_fenced_results(results: list[Any], epoch_zk_version: int) -> list[Any]:
    """Turn a fenced multi's results into the ops' results or the right exception."""
    if results and isinstance(results[0], BadVersionError):
        raise ControllerMovedError(epoch_zk_version)
    for result in results:
        if isinstance(result, ZookeeperError) and not isinstance(
            result, (RolledBackError, RuntimeInconsistency)
        ):
            raise result
    return results[1:]


@dataclass(frozen=True)
class FencedWriter:
    """Writes of the controller that won with ``/controller_epoch`` at ``epoch_zk_version``."""

    client: ZkClient
    epoch_zk_version: int

    def multi(self, ops: list[Op]) -> list[Any]:
        txn = self.client.transaction()
        txn.check(CONTROLLER_EPOCH, self.epoch_zk_version)
        for op in ops:
            add_op(txn, op)
        return raise_for_fenced_results(txn.commit(), self.epoch_zk_version)

    def create(self, path: str, value: bytes = b"", sequence: bool = False) -> str:
        return str(self.multi([Create(path, value, sequence=sequence)])[0])

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        result: ZnodeStat = self.multi([SetData(path, value, version)])[0]
        return result

    def delete(self, path: str, version: int = -1) -> None:
        self.multi([Delete(path, version)])
