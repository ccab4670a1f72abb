"""The cluster a run writes: topics, where each partition lives, leader epochs and identifiers.

Data partitions are spread round robin over three topics and over the brokers. Each has its leader there and,
at a replication factor N above 1, N-1 followers on the next brokers in turn (Kafka's default assignment
without racks: the replicas of a partition on consecutive brokers, the leader first). The default factor of 1
keeps output size equal to what was produced. `__transaction_state` has Kafka's default 50 partitions,
placed and replicated the same way: real clusters replicate it (`transaction.state.log.replication.factor`,
3 by default), and the audit compares its copies as it does a compacted topic's. Topic, cluster and directory
ids are drawn from the cluster stream, so they are stable for a seed; replica placement draws nothing, so a
seed gives the same leaders, epochs and ids at every replication factor.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from pipeline.generate.rand import STREAM_CLUSTER, Rng

TOPICS = ("orders", "payments", "inventory-changelog")
COMPACTED_TOPICS_GLOB = "*-changelog"
"""A glob for `audit.compacted_topics` that matches the compacted-style topic."""
TRANSACTIONAL_TOPICS = ("orders", "payments")
TRANSACTION_STATE_TOPIC = "__transaction_state"
TRANSACTION_STATE_PARTITIONS = 50  # transaction.state.log.num.partitions default


@dataclass(frozen=True)
class PartitionPlacement:
    topic: str
    partition: int
    broker_id: int
    leader_epoch: int
    followers: tuple[int, ...] = ()  # broker ids of the follower copies, in assignment order

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def replicas(self) -> tuple[int, ...]:
        """Every broker holding a copy, the leader first (the partition's replica list)."""
        return (self.broker_id, *self.followers)


@dataclass(frozen=True)
class Cluster:
    brokers: int
    cluster_id: str
    directory_ids: tuple[str, ...]
    topic_ids: dict[str, str]
    data_partitions: tuple[PartitionPlacement, ...]
    transaction_state_partitions: tuple[PartitionPlacement, ...]

    def is_compacted(self, topic: str) -> bool:
        return topic.endswith(COMPACTED_TOPICS_GLOB.lstrip("*"))


def _uuid(rng: Rng) -> str:
    """Kafka prints UUIDs as URL-safe base64 without padding; never the zero (or sentinel) UUID."""
    raw = bytes(rng.below(256) for _ in range(16))
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def followers_of(leader: int, brokers: int, replication_factor: int) -> tuple[int, ...]:
    """The follower brokers of a partition led by `leader`: the next brokers round robin."""
    return tuple((leader + shift) % brokers for shift in range(1, replication_factor))


def build_cluster(seed: int, partitions: int, brokers: int, replication_factor: int = 1) -> Cluster:
    rng = Rng(seed, STREAM_CLUSTER)
    data = tuple(
        PartitionPlacement(
            TOPICS[index % len(TOPICS)],
            index // len(TOPICS),
            index % brokers,
            rng.between(0, 4),
            followers_of(index % brokers, brokers, replication_factor),
        )
        for index in range(partitions)
    )
    # Coordinator epochs are the leader epochs of these partitions; from 1 up, so a zombie marker can go below.
    state = tuple(
        PartitionPlacement(
            TRANSACTION_STATE_TOPIC,
            index,
            index % brokers,
            rng.between(1, 6),
            followers_of(index % brokers, brokers, replication_factor),
        )
        for index in range(TRANSACTION_STATE_PARTITIONS)
    )
    topics = sorted({placement.topic for placement in data}) + [TRANSACTION_STATE_TOPIC]
    return Cluster(
        brokers=brokers,
        cluster_id=_uuid(rng),
        directory_ids=tuple(_uuid(rng) for _ in range(brokers)),
        topic_ids={topic: _uuid(rng) for topic in topics},
        data_partitions=data,
        transaction_state_partitions=state,
    )


def java_string_hash(text: str) -> int:
    """`String.hashCode` (UTF-16 code units, int32 overflow)."""
    value = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        value = (31 * value + int(unit, 16)) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def transaction_state_partition(transactional_id: str) -> int:
    """`TransactionStateManager.partitionFor`: `Utils.abs(transactionalId.hashCode) % partitions`."""
    value = java_string_hash(transactional_id)
    return (0 if value == -(1 << 31) else abs(value)) % TRANSACTION_STATE_PARTITIONS
