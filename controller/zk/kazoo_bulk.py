"""Bulk partition-state reads and writes against a real ZooKeeper through kazoo.

No per-row round trip: requests are pipelined (``window`` in flight on one session).

* Writes: each batch is one multi ``check(/controller_epoch) + ops`` of at most ``max_ops`` ops and
  ``max_bytes`` of payload (ZooKeeper rejects requests over ~1 MB). A batch whose check fails
  raises ``ControllerMovedError``; a batch with a failing row (BADVERSION, NONODE, NODEEXISTS) is
  rolled back by ZooKeeper, so that row is reported and the rest of the batch is resent.
* Reads: ZooKeeper 3.6+'s ``multiRead`` (opcode 22), which kazoo lacks, fetches up to ``max_ops``
  children lists or payloads per request; a missing node is an error entry, not a failure.

Each reply is awaited through ``settle(pending, resend)`` (``KazooZkClient.settle``: bounded, and
a request lost with the connection is sent again); the default waits on kazoo alone.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from kazoo.client import KazooClient
from kazoo.exceptions import (
    EXCEPTIONS,
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
    ZookeeperError,
)
from kazoo.protocol.serialization import (
    CheckVersion,
    Create,
    MultiHeader,
    SetData,
    Transaction,
    int_struct,
    multiheader_struct,
    read_buffer,
    read_string,
    stat_struct,
    write_string,
)
from kazoo.protocol.states import ZnodeStat
from kazoo.security import OPEN_ACL_UNSAFE

from controller.zk.fencing import raise_for_fenced_results
from controller.zk.paths import CONTROLLER_EPOCH, PartitionStateZNode, TopicPartitionZNode

GET_DATA, GET_CHILDREN = 4, 8
ERROR_CODES = {BadVersionError: "BADVERSION", NoNodeError: "NONODE", NodeExistsError: "NODEEXISTS"}


class MultiRead(NamedTuple):
    """A read-only multi of getData or getChildren ops (no watches)."""

    op_type: int
    paths: list[str]

    @property
    def type(self) -> int:
        return 22

    def serialize(self) -> bytearray:
        b = bytearray()
        for path in self.paths:
            b.extend(MultiHeader(self.op_type, False, -1).serialize())
            b.extend(write_string(path))
            b.append(0)
        return b + multiheader_struct.pack(-1, True, -1)

    def deserialize(self, data: bytes, offset: int) -> list[Any]:
        results: list[Any] = []
        header, offset = MultiHeader.deserialize(data, offset)
        while not header.done:
            if header.type == GET_DATA:
                value, offset = read_buffer(data, offset)
                stat = ZnodeStat._make(stat_struct.unpack_from(data, offset))
                offset += stat_struct.size
                results.append((value, stat))
            elif header.type == GET_CHILDREN:
                count = int_struct.unpack_from(data, offset)[0]
                offset += int_struct.size
                names = []
                for _ in range(max(count, 0)):
                    name, offset = read_string(data, offset)
                    names.append(name)
                results.append(names)
            else:
                err = int_struct.unpack_from(data, offset)[0]
                offset += int_struct.size
                results.append(EXCEPTIONS[err]())
            header, offset = MultiHeader.deserialize(data, offset)
        return results


Settle = Callable[[Any, Callable[[], Any]], Any]


def kazoo_settle(pending: Any, resend: Callable[[], Any]) -> Any:
    """Wait for ``pending`` as kazoo does (no bound, no resend)."""
    return pending.get()


def _pipelined(
    submit: Callable[[Any], Any], items: Iterable[Any], window: int, settle: Settle
) -> Iterator[Any]:
    """Submit ``items`` keeping ``window`` in flight; yield (item, result) in order."""
    in_flight: deque[tuple[Any, Any]] = deque()

    def done() -> tuple[Any, Any]:
        item, pending = in_flight.popleft()
        return item, settle(pending, lambda: submit(item))

    for item in items:
        in_flight.append((item, submit(item)))
        if len(in_flight) >= window:
            yield done()
    while in_flight:
        yield done()


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def multi_read(
    kz: KazooClient,
    op_type: int,
    paths: Iterable[str],
    max_ops: int,
    window: int,
    settle: Settle = kazoo_settle,
) -> Iterator[tuple[str, Any]]:
    """(path, result) for every path: (bytes, ZnodeStat), a children list, or an exception."""
    chroot = kz.chroot or ""

    def submit(batch: list[str]) -> Any:
        result = kz.handler.async_result()
        kz._call(MultiRead(op_type, [chroot + p for p in batch]), result)
        return result

    for batch, results in _pipelined(submit, _chunks(paths, max_ops), window, settle):
        yield from zip(batch, results, strict=True)


# A row to write: (topic, partition, leader, leader_epoch, isr, controller_epoch, expected_version,
# writes): ``writes`` conditional writes of the same payload, as a controller that wrote the znode
# that many times in one event leaves it (version expected + writes).


# A partition-state write: topic, partition, leader, leader epoch, ISR, controller epoch, the
# expected zk version (-1 to create the partition and its state) and the number of writes.
StateRow = tuple[str, int, int, int, list[int], int, int, int]


def _ops(row: StateRow, chroot: str) -> list[Any]:
    """The multi ops (kazoo wire records) writing one row."""
    topic, partition, leader, epoch, isr, cepoch, expected, writes = row
    data = PartitionStateZNode.encode_fields(leader, epoch, isr, cepoch)
    state = chroot + PartitionStateZNode.path(topic, partition)
    if expected == -1:
        node = chroot + TopicPartitionZNode.path(topic, partition)
        created = [Create(node, b"", OPEN_ACL_UNSAFE, 0), Create(state, data, OPEN_ACL_UNSAFE, 0)]
        return created + [SetData(state, data, v) for v in range(writes - 1)]
    return [SetData(state, data, expected + i) for i in range(writes)]


Batch = list[tuple[StateRow, list[Any]]]


def _row_of_op(batch: Batch, op_index: int) -> int:
    """Index of the row whose ops include multi op ``op_index`` (op 0 is the epoch check)."""
    end = 1
    for i, (_, ops) in enumerate(batch):
        end += len(ops)
        if op_index < end:
            return i
    raise IndexError(op_index)


def write_batches(
    kz: KazooClient,
    rows: Iterable[StateRow],
    epoch_zk_version: int,
    max_ops: int,
    max_bytes: int,
    window: int,
    settle: Settle = kazoo_settle,
) -> Iterator[tuple[StateRow, str]]:
    """Write ``rows`` in fenced, pipelined multis; yield (row, error code) for every failed row."""
    chroot = kz.chroot or ""
    check = CheckVersion(chroot + CONTROLLER_EPOCH, epoch_zk_version)

    def batches(source: Iterable[list[StateRow]]) -> Iterator[Batch]:
        for group in source:
            batch: Batch = []
            n_ops = size = 0
            for row in group:
                ops = _ops(row, chroot)
                weight = sum(len(o.path) + len(getattr(o, "data", b"")) + 16 for o in ops)
                if batch and (n_ops + len(ops) > max_ops or size + weight > max_bytes):
                    yield batch
                    batch, n_ops, size = [], 0, 0
                batch.append((row, ops))
                n_ops += len(ops)
                size += weight
            if batch:
                yield batch

    def submit(batch: Batch) -> Any:
        # kazoo's wire records directly: TransactionRequest re-validates and normalises every
        # path, which costs more than the network at these rates.
        result = kz.handler.async_result()
        kz._call(Transaction([check, *(op for _, ops in batch for op in ops)]), result)
        return result

    retry: deque[list[StateRow]] = deque()
    fresh = iter(rows)

    def source() -> Iterator[list[StateRow]]:
        for chunk in _chunks(fresh, 10_000):
            yield chunk
            while retry:
                yield retry.popleft()
        while retry:
            yield retry.popleft()

    while True:
        for batch, results in _pipelined(submit, batches(source()), window, settle):
            culprit = next(
                (
                    i
                    for i, r in enumerate(results)
                    if isinstance(r, ZookeeperError)
                    and not isinstance(r, (RolledBackError, RuntimeInconsistency))
                ),
                None,
            )
            if culprit is None:
                continue
            if culprit == 0 or type(results[culprit]) not in ERROR_CODES:
                raise_for_fenced_results(results, epoch_zk_version)
            row_index = _row_of_op(batch, culprit)
            yield batch[row_index][0], ERROR_CODES[type(results[culprit])]
            rest = [row for row, _ in batch[:row_index] + batch[row_index + 1 :]]
            if rest:
                retry.append(rest)
        if not retry:
            return
