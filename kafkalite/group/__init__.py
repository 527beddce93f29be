"""Consumer groups and committed offsets (docs/architecture.md; Kafka's classic GroupCoordinator).

- ``records``: the ``__consumer_offsets`` key/value formats and ``partition_for``;
- ``metadata``: group/member state and the legal state transitions;
- ``core``: every coordinator decision, pure (clock injected, effects returned as data);
- ``coordinator``: the asyncio ``GroupCoordinator`` request handlers call;
- ``partition_writer``: ``GroupLogWriter`` on the broker's ReplicaManager.
"""

from kafkalite.group.config import GROUP_METADATA_TOPIC_NAME, GroupConfig, OffsetConfig
from kafkalite.group.coordinator import GroupCoordinator, GroupLogWriter
from kafkalite.group.core import (
    GroupCoordinatorCore,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    MemberIdentity,
    OffsetDeleteResult,
    OffsetFetchPartition,
    SyncGroupResult,
)
from kafkalite.group.metadata import (
    GroupOverview,
    GroupState,
    GroupSummary,
    JoinGroupResponseMember,
    MemberSummary,
    OffsetAndMetadata,
)
from kafkalite.group.partition_writer import ReplicaManagerLogWriter
from kafkalite.group.records import partition_for

__all__ = [
    "GROUP_METADATA_TOPIC_NAME",
    "GroupConfig",
    "GroupCoordinator",
    "GroupCoordinatorCore",
    "GroupLogWriter",
    "GroupOverview",
    "GroupState",
    "GroupSummary",
    "JoinGroupResponseMember",
    "JoinGroupResult",
    "LeaveGroupResult",
    "LeaveMemberResult",
    "MemberIdentity",
    "MemberSummary",
    "OffsetAndMetadata",
    "OffsetConfig",
    "OffsetDeleteResult",
    "OffsetFetchPartition",
    "ReplicaManagerLogWriter",
    "SyncGroupResult",
    "partition_for",
]
