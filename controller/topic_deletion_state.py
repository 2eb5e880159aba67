"""The controller's topic-deletion sets (spec §9.5), by topic index.

Kafka keeps them in its ``ControllerContext``: the topics queued for deletion
(``topics_to_be_deleted``), those whose deletion started, those ineligible for deletion, and the
topics with a replica in ReplicaDeletionStarted as of the last commit (Kafka's "in progress").
The bulk entry points (``controller.handlers.deletion.TopicDeletionManager``) read them; the
facts each step collects move them (``commit_facts``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from statemachines import schemas as s

COMPLETED, STARTED, INELIGIBLE, IN_PROGRESS = "completed", "started", "ineligible", "in_progress"
TOPIC_FACTS = (COMPLETED, STARTED, INELIGIBLE, IN_PROGRESS)


@dataclass
class TopicDeletionState:
    """Kafka's topic-deletion sets (kept in its ``ControllerContext``), by topic index."""

    enabled: bool = True
    topics_to_be_deleted: set[int] = field(default_factory=set)
    topics_with_deletion_started: set[int] = field(default_factory=set)
    topics_ineligible_for_deletion: set[int] = field(default_factory=set)
    topics_in_progress: set[int] = field(default_factory=set)

    # -- driver-only queries and updates ----------------------------------------------------
    def is_topic_queued_up_for_deletion(self, t: int) -> bool:
        return self.enabled and t in self.topics_to_be_deleted

    def is_topic_eligible_for_deletion(self, t: int) -> bool:
        return (
            self.is_topic_queued_up_for_deletion(t)
            and t not in self.topics_in_progress
            and t not in self.topics_ineligible_for_deletion
        )

    def mark_topic_ineligible_for_deletion(self, topics: Iterable[int]) -> None:
        if self.enabled:
            self.topics_ineligible_for_deletion |= set(topics) & self.topics_to_be_deleted

    def topic_gauges(self) -> dict[str, int]:
        return {
            "TopicsToDeleteCount": len(self.topics_to_be_deleted),
            "TopicsIneligibleToDeleteCount": len(self.topics_ineligible_for_deletion),
        }

    def commit_facts(self, facts: Iterable[Mapping[str, int | bool]]) -> set[int]:
        """Apply collected ``DeletionStep.topics`` rows; returns the topics whose deletion completed
        (the caller removes them from the context and deletes their znodes)."""
        done: set[int] = set()
        for row in facts:
            t = int(row[s.TOPIC_INDEX])
            if row[COMPLETED]:
                done.add(t)
                continue
            if row[STARTED]:
                self.topics_with_deletion_started.add(t)
            (
                self.topics_ineligible_for_deletion.add
                if row[INELIGIBLE]
                else self.topics_ineligible_for_deletion.discard
            )(t)
            (self.topics_in_progress.add if row[IN_PROGRESS] else self.topics_in_progress.discard)(
                t
            )
        for t in done:
            for kept in (
                self.topics_to_be_deleted,
                self.topics_with_deletion_started,
                self.topics_ineligible_for_deletion,
                self.topics_in_progress,
            ):
                kept.discard(t)
        return done

    def queue(self, topics: Iterable[int]) -> None:
        """Failover: the topics ``/admin/delete_topics`` names are queued again."""
        if self.enabled:
            self.topics_to_be_deleted |= set(topics)
