"""A ZooKeeper client that can only read: what ``kce whatif --zk`` uses on a production cluster.

``ReadOnlyZkClient`` holds a ``KazooClient`` and offers only ``get``, ``get_children`` and
``exists`` (and their async forms, without watches). It is not a subclass: every other name of
``KazooClient`` (``create``, ``set``, ``delete``, ``transaction``, ``ensure_path``, ``set_acls``,
``reconfig``, the lock and queue recipes, ...) raises ``ReadOnlyViolation`` on access, before any
request exists. As a second fence, the held client's request queue refuses every request that is
not a read, so even code that reaches the private client cannot write.

Digest credentials (``auth_data=[("digest", "user:password")]``) and TLS (``use_ssl``,
``certfile``, ``keyfile``, ``ca``, ``verify_certs``) are kazoo's own parameters.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.protocol.serialization import Auth, Exists, GetChildren, GetChildren2, GetData
from kazoo.protocol.states import ZnodeStat

# The session's own requests (ping, close, watch re-registration) do not pass through the
# request queue guarded here; of the rest, only these read.
_READS = (GetData, GetChildren, GetChildren2, Exists, Auth)


class ReadOnlyViolation(RuntimeError):
    """A write was attempted through the read-only client; nothing was sent."""

    def __init__(self, operation: str) -> None:
        super().__init__(
            f"{operation} would change ZooKeeper; the what-if snapshot reader only reads "
            "(get, get_children, exists)"
        )
        self.operation = operation


class ZnodeReadError(Exception):
    """A read of ``path`` failed (no permission, connection lost, ...): ``cause`` says why."""

    def __init__(self, path: str, cause: Exception) -> None:
        super().__init__(f"{path}: {type(cause).__name__} {cause}".rstrip())
        self.path = path
        self.cause = cause


class ReadOnlyZkClient:
    """Reads of one ZooKeeper ensemble (``hosts`` may end in Kafka's chroot)."""

    __slots__ = ("__kazoo",)

    def __init__(
        self,
        hosts: str,
        *,
        timeout: float = 10.0,
        auth_data: Sequence[tuple[str, str]] | None = None,
        use_ssl: bool = False,
        certfile: str | None = None,
        keyfile: str | None = None,
        keyfile_password: str | None = None,
        ca: str | None = None,
        verify_certs: bool = True,
    ) -> None:
        kazoo = KazooClient(
            hosts=hosts,
            timeout=timeout,
            auth_data=list(auth_data) if auth_data else None,
            # A snapshot may come from a server cut off from its quorum.
            read_only=True,
            use_ssl=use_ssl,
            certfile=certfile,
            keyfile=keyfile,
            keyfile_password=keyfile_password,
            ca=ca,
            verify_certs=verify_certs,
        )
        call = kazoo._call

        def reads_only(request: Any, async_object: Any) -> Any:
            if not isinstance(request, _READS):
                async_object.set_exception(ReadOnlyViolation(type(request).__name__))
                return False
            return call(request, async_object)

        kazoo._call = reads_only
        self.__kazoo = kazoo

    def __getattr__(self, name: str) -> Any:
        # Only reached for names not defined here. Python's protocol probes (__deepcopy__, ...)
        # get their usual answer; every other name (KazooClient's writers, its recipes, which it
        # binds per instance, and anything not yet written) is refused.
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise ReadOnlyViolation(name)

    def __enter__(self) -> ReadOnlyZkClient:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- session ---------------------------------------------------------------------------------
    def start(self, timeout: float = 15.0) -> None:
        self.__kazoo.start(timeout=timeout)

    def close(self) -> None:
        self.__kazoo.stop()
        self.__kazoo.close()

    @property
    def connected(self) -> bool:
        return bool(self.__kazoo.connected)

    # -- reads -----------------------------------------------------------------------------------
    def get(self, path: str) -> tuple[bytes, ZnodeStat]:
        return self.__kazoo.get(path)

    def get_children(self, path: str) -> list[str]:
        return list(self.__kazoo.get_children(path))

    def exists(self, path: str) -> ZnodeStat | None:
        return self.__kazoo.exists(path)

    def get_async(self, path: str) -> Any:
        return self.__kazoo.get_async(path)

    def get_children_async(self, path: str) -> Any:
        return self.__kazoo.get_children_async(path)

    def exists_async(self, path: str) -> Any:
        return self.__kazoo.exists_async(path)

    def get_many(
        self, paths: Iterable[str], window: int = 1000
    ) -> Iterator[tuple[str, bytes | None, ZnodeStat | None]]:
        """``(path, data, stat)`` per path, in order, ``window`` gets in flight at once; a
        missing znode gives ``(path, None, None)``; any other failure raises ``ZnodeReadError``."""
        pending: deque[tuple[str, Any]] = deque()

        def done() -> tuple[str, bytes | None, ZnodeStat | None]:
            path, result = pending.popleft()
            try:
                data, stat = result.get()
            except NoNodeError:
                return path, None, None
            except KazooException as exc:
                raise ZnodeReadError(path, exc) from exc
            return path, data, stat

        for path in paths:
            pending.append((path, self.__kazoo.get_async(path)))
            if len(pending) >= window:
                yield done()
        while pending:
            yield done()

    def children_many(
        self, paths: Iterable[str], window: int = 1000
    ) -> Iterator[tuple[str, list[str] | None]]:
        """``(path, children)`` per path, in order; None for a missing znode."""
        pending: deque[tuple[str, Any]] = deque()

        def done() -> tuple[str, list[str] | None]:
            path, result = pending.popleft()
            try:
                return path, list(result.get())
            except NoNodeError:
                return path, None
            except KazooException as exc:
                raise ZnodeReadError(path, exc) from exc

        for path in paths:
            pending.append((path, self.__kazoo.get_children_async(path)))
            if len(pending) >= window:
                yield done()
        while pending:
            yield done()
