"""TopicDeletionManager: drives topics queued in ``/admin/delete_topics`` to deletion.

Kafka's ``TopicDeletionManager`` made sans-I/O. A topic is deleted in these steps (StopReplica
to every broker that hosts one of its replicas):

1. ``enqueue_topics_for_deletion``: the topic is queued; from now on its partitions are never
   elected, UpdateMetadata shows them with leader -2 so brokers stop serving them, and
   partition additions to it are refused.
2. ``_on_topic_deletion``: partitions move Offline -> NonExistent (first time only); every live
   replica moves Offline (StopReplica without delete: followers stop fetching) and then
   ReplicaDeletionStarted (StopReplica with delete=true); replicas on dead brokers move to
   ReplicaDeletionIneligible and the topic becomes ineligible until such a broker comes back.
3. The StopReplica responses arrive as events: success -> ReplicaDeletionSuccessful
   (``complete_replica_deletion``), error -> ReplicaDeletionIneligible
   (``fail_replica_deletion``), which is retried when deletion is resumed.
4. When every replica is ReplicaDeletionSuccessful: replicas -> NonExistentReplica, and the
   store loses ``/brokers/topics/<t>``, ``/config/topics/<t>`` and ``/admin/delete_topics/<t>``
   (one ``DeleteTopic`` write); the context forgets the topic.

A topic is *eligible* for deletion when queued, no replica is in ReplicaDeletionStarted and it
is not marked ineligible. Every method returns the ``ControllerResult`` of its state changes.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafkalite.zk.writes import DeleteTopic, DeleteTopicDeletions

from .broker_request_batch import update_metadata_requests
from .context import ControllerContext, PartitionAndReplica
from .partition_state_machine import (
    NON_EXISTENT_PARTITION,
    OFFLINE_PARTITION,
    PartitionStateMachine,
)
from .replica_state_machine import (
    NEW_REPLICA,
    NON_EXISTENT_REPLICA,
    OFFLINE_REPLICA,
    ONLINE_REPLICA,
    REPLICA_DELETION_INELIGIBLE,
    REPLICA_DELETION_STARTED,
    REPLICA_DELETION_SUCCESSFUL,
    ReplicaStateMachine,
)
from .results import ControllerResult


class TopicDeletionManager:
    def __init__(
        self,
        ctx: ControllerContext,
        partition_state_machine: PartitionStateMachine,
        replica_state_machine: ReplicaStateMachine,
        delete_topic_enable: bool = True,
    ) -> None:
        self.ctx = ctx
        self.psm = partition_state_machine
        self.rsm = replica_state_machine
        self.is_delete_topic_enabled = delete_topic_enable

    def init(
        self,
        initial_topics_to_be_deleted: Iterable[str],
        initial_topics_ineligible_for_deletion: Iterable[str],
    ) -> ControllerResult:
        """On election, with the markers found in ``/admin/delete_topics``."""
        result = ControllerResult()
        to_delete = set(initial_topics_to_be_deleted)
        if self.is_delete_topic_enabled:
            self.ctx.queue_topic_deletion(to_delete)
            self.ctx.topics_ineligible_for_deletion.update(
                set(initial_topics_ineligible_for_deletion) & self.ctx.topics_to_be_deleted
            )
        elif to_delete:
            result.writes.append(DeleteTopicDeletions(tuple(sorted(to_delete))))
        return result

    def try_topic_deletion(self) -> ControllerResult:
        if self.is_delete_topic_enabled:
            return self.resume_deletions()
        return ControllerResult()

    def enqueue_topics_for_deletion(self, topics: Iterable[str]) -> ControllerResult:
        if not self.is_delete_topic_enabled:
            return ControllerResult()
        self.ctx.queue_topic_deletion(topics)
        return self.resume_deletions()

    def resume_deletion_for_topics(self, topics: Iterable[str]) -> ControllerResult:
        ctx = self.ctx
        to_resume = set(topics) & ctx.topics_to_be_deleted & ctx.topics_ineligible_for_deletion
        ctx.topics_ineligible_for_deletion -= to_resume
        if to_resume:
            return self.resume_deletions()
        return ControllerResult()

    def fail_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> ControllerResult:
        result = ControllerResult()
        if not self.is_delete_topic_enabled:
            return result
        failed = [r for r in replicas if self.ctx.is_topic_queued_up_for_deletion(r.topic)]
        if failed:
            result += self._move_to_deletion_ineligible(failed)
            self.mark_topic_ineligible_for_deletion({r.topic for r in failed})
            result += self.resume_deletions()
        return result

    def _move_to_deletion_ineligible(self, replicas: list[PartitionAndReplica]) -> ControllerResult:
        """Move ``replicas`` to ReplicaDeletionIneligible; replicas never stopped (New, Online)
        pass through Offline first, as the table demands; Ineligible ones stay."""
        state = self.rsm.replica_state
        result = self.rsm.handle_state_changes(
            [r for r in replicas if state(r) in (NEW_REPLICA, ONLINE_REPLICA)], OFFLINE_REPLICA
        )
        result += self.rsm.handle_state_changes(
            [r for r in replicas if state(r) in (OFFLINE_REPLICA, REPLICA_DELETION_STARTED)],
            REPLICA_DELETION_INELIGIBLE,
        )
        return result

    def complete_replica_deletion(
        self, replicas: Iterable[PartitionAndReplica]
    ) -> ControllerResult:
        result = ControllerResult()
        deleted = [
            r
            for r in replicas
            if self.ctx.is_topic_queued_up_for_deletion(r.topic)
            and self.rsm.replica_state(r) is REPLICA_DELETION_STARTED
        ]
        result += self.rsm.handle_state_changes(deleted, REPLICA_DELETION_SUCCESSFUL)
        result += self.resume_deletions()
        return result

    def mark_topic_ineligible_for_deletion(self, topics: Iterable[str]) -> None:
        if self.is_delete_topic_enabled:
            self.ctx.topics_ineligible_for_deletion.update(
                set(topics) & self.ctx.topics_to_be_deleted
            )

    def is_topic_ineligible_for_deletion(self, topic: str) -> bool:
        return self.is_delete_topic_enabled and topic in self.ctx.topics_ineligible_for_deletion

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        return self.is_delete_topic_enabled and self.ctx.is_any_replica_in_state(
            topic, REPLICA_DELETION_STARTED
        )

    def is_topic_eligible_for_deletion(self, topic: str) -> bool:
        return (
            self.ctx.is_topic_queued_up_for_deletion(topic)
            and not self.is_topic_deletion_in_progress(topic)
            and not self.is_topic_ineligible_for_deletion(topic)
        )

    def resume_deletions(self) -> ControllerResult:
        """Finish the topics whose replicas are all deleted, retry failed replicas, and start
        the deletion of eligible topics."""
        ctx = self.ctx
        result = ControllerResult()
        retry: set[str] = set()
        eligible: set[str] = set()
        for topic in sorted(ctx.topics_to_be_deleted):
            if ctx.are_all_replicas_in_state(topic, REPLICA_DELETION_SUCCESSFUL):
                result += self._complete_delete_topic(topic)
                continue
            if not ctx.is_any_replica_in_state(
                topic, REPLICA_DELETION_STARTED
            ) and ctx.is_any_replica_in_state(topic, REPLICA_DELETION_INELIGIBLE):
                retry.add(topic)
            if self.is_topic_eligible_for_deletion(topic):
                eligible.add(topic)
        if retry:
            failed = [
                r
                for topic in sorted(retry)
                for r in ctx.replicas_in_state(topic, REPLICA_DELETION_INELIGIBLE)
            ]
            result += self.rsm.handle_state_changes(failed, OFFLINE_REPLICA)
        if eligible:
            result += self._on_topic_deletion(eligible)
        return result

    def _complete_delete_topic(self, topic: str) -> ControllerResult:
        ctx = self.ctx
        result = self.rsm.handle_state_changes(
            ctx.replicas_in_state(topic, REPLICA_DELETION_SUCCESSFUL), NON_EXISTENT_REPLICA
        )
        result.writes.append(DeleteTopic(topic))
        ctx.remove_topic(topic)
        return result

    def _on_topic_deletion(self, topics: set[str]) -> ControllerResult:
        ctx = self.ctx
        result = ControllerResult()
        unseen = sorted(topics - ctx.topics_with_deletion_started)
        if unseen:
            partitions = [tp for topic in unseen for tp in ctx.partitions_for_topic(topic)]
            # Partitions of a topic whose creation never completed are still New: Kafka's
            # table moves them through Offline like every other partition.
            result += self.psm.handle_state_changes(partitions, OFFLINE_PARTITION)
            result += self.psm.handle_state_changes(partitions, NON_EXISTENT_PARTITION)
            ctx.begin_topic_deletion(unseen)
        # Tell every broker to stop serving the topics (leader -2 in UpdateMetadata).
        result.requests.extend(
            update_metadata_requests(
                ctx,
                self.psm.controller_id,
                ctx.live_or_shutting_down_broker_ids,
                [tp for topic in sorted(topics) for tp in ctx.partitions_for_topic(topic)],
            )
        )
        result += self._on_partition_deletion(topics)
        return result

    def _on_partition_deletion(self, topics: set[str]) -> ControllerResult:
        ctx = self.ctx
        dead: list[PartitionAndReplica] = []
        retry: list[PartitionAndReplica] = []
        ineligible: set[str] = set()
        for topic in sorted(topics):
            replicas = ctx.replicas_for_topic(topic)
            alive = [r for r in replicas if ctx.is_replica_online(r.replica, r.topic_partition)]
            dead_here = [
                r for r in replicas if not ctx.is_replica_online(r.replica, r.topic_partition)
            ]
            successfully_deleted = set(ctx.replicas_in_state(topic, REPLICA_DELETION_SUCCESSFUL))
            retry.extend(r for r in alive if r not in successfully_deleted)
            dead.extend(dead_here)
            if dead_here:
                ineligible.add(topic)
        # Replicas on dead brokers cannot answer a StopReplica: straight to Ineligible.
        result = self._move_to_deletion_ineligible(dead)
        # Stop the followers (no more fetching from the leader), then delete.
        result += self.rsm.handle_state_changes(retry, OFFLINE_REPLICA)
        result += self.rsm.handle_state_changes(retry, REPLICA_DELETION_STARTED)
        if ineligible:
            self.mark_topic_ineligible_for_deletion(ineligible)
        return result
