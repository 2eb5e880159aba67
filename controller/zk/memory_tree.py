"""The znode tree of the in-memory ZooKeeper: nodes, stats, and ZooKeeper's rules for each op.

Every change goes through a ``Staging``: ops are checked and applied to a private copy-on-write
overlay in order (later ops of a multi see earlier ones, as in ZooKeeper), and ``commit`` publishes
the overlay atomically under one zxid. A failed op leaves the tree untouched, which is what makes
multi all-or-nothing. Error precedence per op follows ZooKeeper's ``PrepRequestProcessor``:
create — NoNode (parent), NodeExists, NoChildrenForEphemerals; set/check — NoNode, BadVersion;
delete — NoNode, BadVersion, NotEmpty.

A subtree may be owned by a ``Region`` given to the store at construction (the emulation's
partition znodes ``/brokers/topics/T/partitions/P`` and ``.../P/state``, millions of them, kept
outside Python objects); the tree asks it for those nodes and hands it their committed changes,
so single ops on them behave like on any other znode.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kazoo.exceptions import (
    BadArgumentsError,
    BadVersionError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    UnimplementedError,
)
from kazoo.protocol.states import ZnodeStat

CREATED, DELETED, CHANGED, CHILD = "CREATED", "DELETED", "CHANGED", "CHILD"


@dataclass(slots=True)
class Znode:
    """One znode. ``children`` holds the names kept in this tree (region children are counted apart)."""

    data: bytes
    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int = 0
    cversion: int = 0
    ephemeral_owner: int = 0
    pzxid: int = 0
    children: dict[str, None] = field(default_factory=dict)
    # Sequential suffixes count child creations only, while the stat's cversion also counts
    # deletions (measured on ZooKeeper 3.8).
    child_creates: int = 0

    def copy(self) -> Znode:
        return dataclasses.replace(self, children=dict(self.children))

    def stat(self, extra_children: int = 0) -> ZnodeStat:
        return ZnodeStat(
            self.czxid,
            self.mzxid,
            self.ctime,
            self.mtime,
            self.version,
            self.cversion,
            0,
            self.ephemeral_owner,
            len(self.data),
            len(self.children) + extra_children,
            self.pzxid,
        )


class Region(Protocol):
    """A subtree stored outside the dict tree, at the level of znodes.

    Its nodes cannot be ephemeral, and below a region node only region nodes may live. The
    tree calls it under the store's lock.
    """

    def owns(self, path: str) -> bool:
        """Whether ``path`` (existing or not) belongs to the region."""
        ...

    def lookup(self, path: str) -> Znode | None:
        """The committed node at ``path`` (owned), or None."""
        ...

    def child_names(self, path: str) -> list[str]:
        """Names of the region's children of ``path`` (a node of the tree or of the region)."""
        ...

    def child_count(self, path: str) -> int:
        """``len(child_names(path))``, without listing them."""
        ...

    def commit(self, changes: dict[str, Znode | None]) -> None:
        """Publish a transaction's changes to owned paths (None: deleted)."""
        ...

    def drop_children(self, path: str) -> None:
        """Delete every region node below ``path`` at once (a recursive delete's bulk step;
        the caller fires the watches and deletes ``path`` itself)."""
        ...

    def close(self) -> None:
        """Free what the region holds; the store is closing."""
        ...


def split(path: str) -> tuple[str, str]:
    """``/a/b/c`` -> (``/a/b``, ``c``); the parent of a top-level node is ``/``."""
    parent, _, name = path.rpartition("/")
    return parent or "/", name


def validate(path: str) -> None:
    if not isinstance(path, str) or not path.startswith("/"):
        raise BadArgumentsError(f"path must start with /: {path!r}")
    if path != "/" and (path.endswith("/") or "//" in path):
        raise BadArgumentsError(f"invalid path {path!r}")
    if any(part in (".", "..") for part in path.split("/")):
        raise BadArgumentsError(f"relative path component in {path!r}")


class ZnodeTree:
    """The committed tree. Not locked itself: ``InMemoryZooKeeper`` serialises access."""

    def __init__(self, clock_ms: Callable[[], int]) -> None:
        self.clock_ms = clock_ms
        self.zxid = 0
        now = clock_ms()
        self.nodes: dict[str, Znode] = {"/": Znode(b"", 0, 0, now, now)}
        self.ephemerals: dict[int, set[str]] = {}
        self.region: Region | None = None
        for path in ("/zookeeper", "/zookeeper/config", "/zookeeper/quota"):
            staging = Staging(self)
            staging.create(path, b"")
            staging.commit()

    def lookup(self, path: str) -> Znode | None:
        node = self.nodes.get(path)
        if node is None and self.region is not None and self.region.owns(path):
            return self.region.lookup(path)
        return node

    def extra_children(self, path: str) -> int:
        return self.region.child_count(path) if self.region is not None else 0

    def children(self, path: str) -> list[str]:
        node = self.lookup(path)
        if node is None:
            raise NoNodeError(path)
        extra = self.region.child_names(path) if self.region is not None else []
        return list(node.children) + extra

    def stat(self, path: str) -> ZnodeStat | None:
        node = self.lookup(path)
        return None if node is None else node.stat(self.extra_children(path))

    def next_zxid(self) -> int:
        self.zxid += 1
        return self.zxid


Event = tuple[str, str]


class Staging:
    """Ops of one ZooKeeper transaction, applied to an overlay; ``commit`` publishes them."""

    def __init__(self, tree: ZnodeTree) -> None:
        self.tree = tree
        self.zxid = tree.zxid + 1
        self.now = tree.clock_ms()
        self.changes: dict[str, Znode | None] = {}
        self.region_child_delta: dict[str, int] = {}
        self.events: list[Event] = []

    def node(self, path: str) -> Znode | None:
        if path in self.changes:
            return self.changes[path]
        return self.tree.lookup(path)

    def _writable(self, path: str) -> Znode:
        node = self.node(path)
        if node is None:
            raise NoNodeError(path)
        if path not in self.changes:
            node = node.copy()
            self.changes[path] = node
        return node

    def _in_region(self, path: str) -> bool:
        region = self.tree.region
        return region is not None and region.owns(path)

    def _child_count(self, path: str, node: Znode) -> int:
        return (
            len(node.children)
            + self.tree.extra_children(path)
            + self.region_child_delta.get(path, 0)
        )

    def create(
        self, path: str, data: bytes, ephemeral_owner: int = 0, sequence: bool = False
    ) -> str:
        validate(path)
        if path == "/" and not sequence:
            raise NodeExistsError(path)
        parent_path, name = split(path)
        parent = self.node(parent_path)
        if parent is None:
            raise NoNodeError(parent_path)
        if sequence:
            path = f"{path}{parent.child_creates:010d}"
            name = split(path)[1]
        if self.node(path) is not None:
            raise NodeExistsError(path)
        if parent.ephemeral_owner:
            raise NoChildrenForEphemeralsError(parent_path)
        if self._in_region(parent_path) and not self._in_region(path):
            raise UnimplementedError(f"{path}: only 'state' may live under a partition znode")
        if self._in_region(path) and ephemeral_owner:
            raise UnimplementedError(f"{path}: partition znodes cannot be ephemeral")
        parent = self._writable(parent_path)
        self.changes[path] = Znode(
            data,
            self.zxid,
            self.zxid,
            self.now,
            self.now,
            ephemeral_owner=ephemeral_owner,
            pzxid=self.zxid,
        )
        if self._in_region(path) and not self._in_region(parent_path):
            self.region_child_delta[parent_path] = self.region_child_delta.get(parent_path, 0) + 1
        else:
            parent.children[name] = None
        parent.cversion += 1
        parent.child_creates += 1
        parent.pzxid = self.zxid
        self.events += [(CREATED, path), (CHILD, parent_path)]
        return path

    def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        validate(path)
        current = self.node(path)
        if current is None:
            raise NoNodeError(path)
        if version != -1 and version != current.version:
            raise BadVersionError(path)
        node = self._writable(path)
        node.data = data
        node.version += 1
        node.mzxid = self.zxid
        node.mtime = self.now
        self.events.append((CHANGED, path))
        return node.stat(self.tree.extra_children(path) + self.region_child_delta.get(path, 0))

    def check(self, path: str, version: int) -> None:
        validate(path)
        node = self.node(path)
        if node is None:
            raise NoNodeError(path)
        if version != -1 and version != node.version:
            raise BadVersionError(path)

    def delete(self, path: str, version: int = -1) -> None:
        validate(path)
        if path == "/":
            raise BadArgumentsError("cannot delete /")
        node = self.node(path)
        if node is None:
            raise NoNodeError(path)
        if version != -1 and version != node.version:
            raise BadVersionError(path)
        if self._child_count(path, node):
            raise NotEmptyError(path)
        parent_path, name = split(path)
        parent = self._writable(parent_path)
        if self._in_region(path) and not self._in_region(parent_path):
            self.region_child_delta[parent_path] = self.region_child_delta.get(parent_path, 0) - 1
        else:
            parent.children.pop(name, None)
        parent.cversion += 1
        parent.pzxid = self.zxid
        self.changes[path] = None
        self.events += [(DELETED, path), (CHILD, parent_path)]

    def commit(self) -> list[Event]:
        """Publish the overlay (one zxid for the whole transaction); return its watch events."""
        tree = self.tree
        if not self.changes:
            return []
        tree.zxid = self.zxid
        region_changes: dict[str, Znode | None] = {}
        for path, node in self.changes.items():
            if self._in_region(path):
                region_changes[path] = node
                continue
            old = tree.nodes.get(path)
            if old is not None and old.ephemeral_owner:
                tree.ephemerals.get(old.ephemeral_owner, set()).discard(path)
            if node is None:
                tree.nodes.pop(path, None)
            else:
                tree.nodes[path] = node
                if node.ephemeral_owner:
                    tree.ephemerals.setdefault(node.ephemeral_owner, set()).add(path)
        if region_changes and tree.region is not None:
            tree.region.commit(region_changes)
        return self.events
