"""The replica-side rules of spec §12 and §13, one partition at a time: the leader's view of its
followers (§12.1), the ISR shrink and expand rules and the high watermark (§12.2, §12.3), the
leader epoch cache (§13.1) and the offset a follower truncates to (§13.2).

Plain Python over tuples and frozen dataclasses: the oracle of ``statemachines.replication_epochs``
and the rules the driver applies to small clusters. Offsets are message offsets, times are
milliseconds; -1 means undefined (an unknown LEO, an undefined epoch or offset), as in Kafka.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# A leader-epoch cache: (epoch, start_offset) entries, strictly increasing in both.
Epochs = tuple[tuple[int, int], ...]

UNDEFINED = -1
_UNDEFINED_PAIR = (UNDEFINED, UNDEFINED)


# §13.1 The cache


def assign(cache: Epochs, epoch: int, start: int) -> Epochs:
    """§13.1 ``assign(epoch, start)``: the cache after a batch of ``epoch`` starting at ``start``
    is appended (or after becoming leader of ``epoch`` with LEO ``start``, KIP-279).

    Ignored when ``epoch`` is the latest epoch and ``start`` is not before its start offset (a
    later batch of the current epoch). Otherwise every entry from the end with an epoch or a
    start offset not below the new one's is dropped first, so both stay strictly increasing.

    Raises ValueError for a negative epoch or start offset, as Kafka rejects them.
    """
    if epoch < 0 or start < 0:
        raise ValueError(f"invalid leader epoch entry ({epoch}, {start})")
    if cache and cache[-1][0] == epoch and start >= cache[-1][1]:
        return cache
    kept = list(cache)
    while kept and (kept[-1][0] >= epoch or kept[-1][1] >= start):
        kept.pop()
    return (*kept, (epoch, start))


def truncate_from_end(cache: Epochs, offset: int) -> Epochs:
    """§13.1 ``truncateFromEnd(off)``: the cache after the log is truncated to ``offset``; every
    entry starting at or after it goes. A negative offset changes nothing (Kafka's guard)."""
    if offset < 0:
        return cache
    return tuple(e for e in cache if e[1] < offset)


def truncate_from_start(cache: Epochs, offset: int) -> Epochs:
    """§13.1 ``truncateFromStart(off)``: the cache after the log start offset moves to
    ``offset``. The leading entries starting at or before it go, and the last of them comes back
    starting at ``offset``: the records from ``offset`` on still belong to its epoch."""
    removed = [e for e in cache if e[1] <= offset]
    if not removed:
        return cache
    return ((removed[-1][0], offset), *cache[len(removed) :])


def end_offset_for(cache: Epochs, leo: int, epoch: int) -> tuple[int, int]:
    """§13.1 ``endOffsetFor(e)``, the answer to OffsetsForLeaderEpoch: ``(epoch, end offset)``.

    Undefined ``epoch`` ⇒ (-1, -1); the latest epoch ⇒ (epoch, ``leo``); otherwise the end is
    the start of the smallest epoch above ``epoch`` (none ⇒ (-1, -1)), reported with the largest
    epoch at or below it, or with ``epoch`` itself when the cache holds none.
    """
    if epoch == UNDEFINED:
        return _UNDEFINED_PAIR
    if cache and cache[-1][0] == epoch:
        return (epoch, leo)
    higher = next((e for e in cache if e[0] > epoch), None)
    if higher is None:
        return _UNDEFINED_PAIR
    floor = [e for e in cache if e[0] <= epoch]
    return (floor[-1][0] if floor else epoch, higher[1])


# §13.2 The truncation rule


def truncation_offset(
    follower: Epochs,
    follower_leo: int,
    follower_hw: int,
    leader: Epochs,
    leader_leo: int,
    use_epochs: bool,
) -> int:
    """§13.2: the offset a replica truncates its log to when it becomes a follower of a leader
    with cache ``leader`` and LEO ``leader_leo`` (or restarts as one).

    Without epochs (``use_epochs`` false: before KIP-101, or the old message format) or with an
    empty cache, the follower truncates to its high watermark (never beyond its LEO).

    Otherwise it asks the leader where its latest epoch ``Ef`` ends, ``(El, Eo)``, and decides:

    * ``Eo`` undefined ⇒ its fetch offset (initially its high watermark);
    * ``(fEpoch, fOff) = endOffsetFor(El)`` on its own cache and LEO. An undefined ``fOff``
      (Kafka's ``Log.endOffsetForEpoch`` returning None) ⇒ ``min(Eo, LEO)``;
      ``fEpoch ≠ El`` (it never saw ``El``) ⇒ truncate to ``min(fOff, LEO)``, drop the cache
      entries from there and ask again with its new latest epoch (KIP-279);
      ``fEpoch == El`` ⇒ ``min(fOff, Eo, LEO)``.

    The spec's "no epoch ≤ El" is read through ``endOffsetFor`` as Kafka does: a follower whose
    epochs all lie above ``El`` gets ``(El, start of its first epoch)`` and takes the last branch,
    so it never keeps records of an epoch the leader does not know below ``Eo``. The old
    protocol's ``El`` undefined with ``Eo`` known never arises: ``endOffsetFor`` answers both or
    neither.

    The loop ends: each repeat drops at least the entry ``fOff`` starts (the smallest epoch above
    ``El``), so it asks at most ``len(follower)`` times. An emptied cache falls back to the fetch
    offset, as Kafka's truncate-to-high-watermark path does for a replica without epochs.

    The caller then fetches from the result; if that is beyond the leader's LEO the fetch is out
    of range and the follower truncates to the leader's LEO (KIP-101 scenario 1 step 5), see
    ``fetch_start``.
    """
    fetch_offset = min(follower_hw, follower_leo)
    if not use_epochs or not follower:
        return fetch_offset
    cache, leo = follower, follower_leo
    while cache:
        leader_epoch, leader_end = end_offset_for(leader, leader_leo, cache[-1][0])
        if leader_end == UNDEFINED:
            return fetch_offset
        own_epoch, own_end = end_offset_for(cache, leo, leader_epoch)
        if own_end == UNDEFINED:
            return min(leader_end, leo)
        if own_epoch == leader_epoch:
            return min(own_end, leader_end, leo)
        # Kafka's fetcher keeps the intermediate offset as the partition's fetch offset.
        leo = fetch_offset = min(own_end, leo)
        cache = after_truncation(cache, leo)
    return fetch_offset


def after_truncation(follower: Epochs, offset: int) -> Epochs:
    """§13.2 step 3: the follower's cache after its log is truncated to ``offset``. Kafka
    truncates the cache even when the log has nothing at or beyond ``offset``, which drops an
    entry a short-lived leader assigned at its LEO before writing anything."""
    return truncate_from_end(follower, offset)


def fetch_start(truncated_to: int, leader_leo: int) -> int:
    """§13.3 scenario 1 step 5: where a follower that truncated to ``truncated_to`` fetches
    from. A fetch beyond the leader's LEO is out of range, and the follower truncates to the
    leader's LEO and fetches from there."""
    return min(truncated_to, leader_leo)


# §12.1 Follower progress on the leader


@dataclass(frozen=True)
class FollowerProgress:
    """§12.1: what a leader tracks of one remote replica."""

    leo: int
    """The follower's log end offset as of its last fetch (-1 unknown)."""
    last_fetch_leader_leo: int
    """The leader's LEO at the follower's last fetch."""
    last_fetch_ms: int
    """When the follower last fetched."""
    last_caught_up_ms: int
    """The last time the follower had everything the leader had (0 never)."""


def record_fetch(
    p: FollowerProgress, fetch_offset: int, leader_leo: int, now: int
) -> FollowerProgress:
    """§12.1: the progress after a fetch at ``fetch_offset`` at time ``now`` while the leader's
    LEO is ``leader_leo``.

    A follower that reached the leader's LEO is caught up now; one that reached what the leader
    had at its previous fetch was caught up then, so a follower trailing a busy leader by one
    batch still counts as caught up.
    """
    caught_up = p.last_caught_up_ms
    if fetch_offset >= leader_leo:
        caught_up = max(caught_up, now)
    elif fetch_offset >= p.last_fetch_leader_leo:
        caught_up = max(caught_up, p.last_fetch_ms)
    return FollowerProgress(fetch_offset, leader_leo, now, caught_up)


def on_become_leader(
    p: FollowerProgress, leader_leo: int, now: int, in_isr: bool, was_leader: bool
) -> FollowerProgress:
    """§12.1 last paragraph: a remote replica's progress when this broker becomes leader with
    LEO ``leader_leo`` at ``now``. ISR members start caught up now, others never; a new leader
    knows nothing of its followers' LEOs yet."""
    return FollowerProgress(
        leo=p.leo if was_leader else UNDEFINED,
        last_fetch_leader_leo=leader_leo,
        last_fetch_ms=now,
        last_caught_up_ms=now if in_isr else 0,
    )


# §12.2 Shrink rule


def out_of_sync_by_time(
    leader_leo: int, follower_leo: int, last_caught_up_ms: int, now: int, lag_ms: int
) -> bool:
    """§12.2 (0.9+): an ISR follower is out of sync when it lacks some of the leader's log and
    has not been caught up for more than ``lag_ms``. A follower that stopped fetching but holds
    exactly the leader's LEO stays: nothing was written that it misses."""
    return follower_leo != leader_leo and now - last_caught_up_ms > lag_ms


def out_of_sync_by_count(
    leader_leo: int,
    follower_leo: int,
    last_fetch_ms: int,
    now: int,
    lag_ms: int,
    max_messages: int,
) -> bool:
    """§12.2, the legacy rule of Kafka ≤ 0.8.x (``replica.lag.max.messages``): an ISR follower
    is out of sync when it is stuck (no fetch for more than ``lag_ms``) or slow (more than
    ``max_messages`` behind the leader's LEO). 0.8.2 counts a follower of unknown LEO as stuck
    at most, never as slow."""
    stuck = now - last_fetch_ms > lag_ms
    slow = follower_leo >= 0 and leader_leo - follower_leo > max_messages
    return stuck or slow


def isr_check_period_ms(lag_ms: int, count_rule: bool) -> int:
    """§12.2: the period of the ``isr-expiration`` task. The time rule checks every half lag,
    so removal takes at most 1.5 × lag; 0.8's count rule scheduled it every full lag."""
    return lag_ms if count_rule else lag_ms // 2


# §12.3 Expand rule and high watermark


def may_expand(
    in_isr: bool, follower_leo: int, leader_hw: int, leader_epoch_start_offset: int
) -> bool:
    """§12.3: a fetch lets a follower outside the ISR join it once it has reached the high
    watermark and (2.1+) the leader's LEO when its epoch began, so it holds every record written
    before the current epoch and could lead without losing one. Lag time is not checked."""
    return not in_isr and follower_leo >= leader_hw and follower_leo >= leader_epoch_start_offset


def high_watermark(
    current_hw: int,
    leader_leo: int,
    followers: Sequence[tuple[int, bool, int]],
    now: int,
    lag_ms: int,
) -> int:
    """§12.3: the leader's high watermark given its remote replicas as
    ``(leo, in_isr, last_caught_up_ms)``: the smallest LEO of the leader and of every follower in
    the ISR or caught up within ``lag_ms``. It only moves forward; counting recently caught-up
    followers outside the ISR makes the HW wait for them: else a follower catching up with a leader
    alone in the ISR could trail the HW forever and never rejoin."""
    candidate = min(
        [leader_leo]
        + [leo for leo, in_isr, caught_up in followers if in_isr or now - caught_up <= lag_ms]
    )
    return max(current_hw, candidate)
