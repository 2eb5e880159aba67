"""``transaction()`` of the in-memory client: kazoo's ``TransactionRequest``, all-or-nothing.

Results mirror kazoo exactly: on success one entry per op (created path, ``True`` for delete and
check, ``ZnodeStat`` for set_data); on failure nothing is applied and the list holds
``RolledBackError`` for the ops before the failing one, the failing op's own exception
(e.g. ``BadVersionError``), and ``RuntimeInconsistency`` for the ops after it — returned, not
raised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kazoo.exceptions import RolledBackError, RuntimeInconsistency, ZookeeperError

from controller.zk.memory_server import Server
from controller.zk.memory_tree import Staging

Op = Callable[[Staging, int], Any]


def _check_types(path: Any, **typed: tuple[Any, type]) -> None:
    if not isinstance(path, str):
        raise TypeError("Invalid type for 'path' (string expected)")
    for name, (value, kind) in typed.items():
        if not isinstance(value, kind):
            raise TypeError(f"Invalid type for '{name}' ({kind.__name__} expected)")


class InMemoryTransaction:
    """Builder of one multi-op; ``commit()`` applies it atomically on ``server`` for the
    session ``live()`` returns (it raises when the client has none)."""

    def __init__(self, server: Server, live: Callable[[], int]) -> None:
        self.server = server
        self.live = live
        self.operations: list[Op] = []
        self.committed = False

    def create(
        self,
        path: str,
        value: bytes = b"",
        acl: Any = None,
        ephemeral: bool = False,
        sequence: bool = False,
    ) -> None:
        _check_types(
            path, value=(value, bytes), ephemeral=(ephemeral, bool), sequence=(sequence, bool)
        )
        self.operations.append(
            lambda st, session: st.create(path, value, session if ephemeral else 0, sequence)
        )

    def delete(self, path: str, version: int = -1) -> None:
        _check_types(path, version=(version, int))
        self.operations.append(lambda st, _: st.delete(path, version) or True)

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        _check_types(path, value=(value, bytes), version=(version, int))
        self.operations.append(lambda st, _: st.set(path, value, version))

    def check(self, path: str, version: int) -> None:
        _check_types(path, version=(version, int))
        self.operations.append(lambda st, _: st.check(path, version) or True)

    def commit(self) -> list[Any]:
        if self.committed:
            raise ValueError("Transaction already committed")
        self.committed = True
        store = self.server
        with store.lock:
            session = self.live()
            staging = Staging(store.tree)
            results: list[Any] = []
            for i, op in enumerate(self.operations):
                try:
                    results.append(op(staging, session))
                except ZookeeperError as exc:
                    rest = len(self.operations) - i - 1
                    return (
                        [RolledBackError() for _ in range(i)]
                        + [exc]
                        + [RuntimeInconsistency() for _ in range(rest)]
                    )
            store.fire(staging.commit())
            return results

    def __enter__(self) -> InMemoryTransaction:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.commit()
