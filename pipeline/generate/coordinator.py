"""The transaction coordinator's side: `__transaction_state` records (spec §5).

Every state change of a transactional id is one record, keyed by the id, in the partition
`abs(id.hashCode) % 50`, written as the coordinator writes it: TransactionLogKey v0 and TransactionLogValue
v0 (a 3.x broker), `null` partitions for Empty, an empty list for Complete*, and the start timestamp of the
transaction on everything but Empty. The coordinator epoch carried by markers is the leader epoch of that
partition, so `XTX-007` holds by construction.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.generate.cluster import transaction_state_partition
from pipeline.generate.partition_log import TransactionStatePartition

NO_START = -1


def transaction_log_key(transactional_id: str, version: int = 0) -> bytes:
    encoded = transactional_id.encode()
    return struct.pack(">hh", version, len(encoded)) + encoded


def transaction_log_value(
    producer_id: int,
    epoch: int,
    timeout_ms: int,
    state: int,
    partitions: Iterable[tuple[str, int]] | None,
    last_update_ms: int,
    start_ms: int,
) -> bytes:
    """TransactionLogValue version 0; `partitions` are (topic, partition) pairs, None for a null array."""
    value = bytearray(struct.pack(">hqhib", 0, producer_id, epoch, timeout_ms, state))
    if partitions is None:
        value += struct.pack(">i", -1)
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(partitions):
            by_topic.setdefault(topic, []).append(partition)
        value += struct.pack(">i", len(by_topic))
        for topic, ids in by_topic.items():
            name = topic.encode()
            value += struct.pack(f">h{len(name)}si{len(ids)}i", len(name), name, len(ids), *ids)
    value += struct.pack(">qq", last_update_ms, start_ms)
    return bytes(value)


@dataclass
class Record:
    """Where a coordinator record went: for the ground truth of anomalies located at it."""

    partition: TransactionStatePartition
    offset: int


class Coordinator:
    """Writes the records of every transactional id to its `__transaction_state` partition."""

    def __init__(self, partitions: list[TransactionStatePartition]) -> None:
        self.partitions = partitions
        self._partition_of: dict[str, TransactionStatePartition] = {}

    def partition_of(self, transactional_id: str) -> TransactionStatePartition:
        partition = self._partition_of.get(transactional_id)
        if partition is None:
            partition = self._partition_of[transactional_id] = self.partitions[
                transaction_state_partition(transactional_id)
            ]
        return partition

    def write(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        timeout_ms: int,
        state: int,
        partitions: Iterable[tuple[str, int]] | None,
        now: int,
        start_ms: int,
        last_update_ms: int | None = None,
        key_version: int = 0,
        compression: int = 0,
    ) -> Record:
        """The record of a state change; the last three arguments are for anomalies."""
        partition = self.partition_of(transactional_id)
        value = transaction_log_value(
            producer_id,
            epoch,
            timeout_ms,
            state,
            partitions,
            now if last_update_ms is None else last_update_ms,
            start_ms,
        )
        key = transaction_log_key(transactional_id, key_version)
        return Record(partition, partition.append(key, value, now, compression))

    def tombstone(self, transactional_id: str, now: int) -> Record:
        partition = self.partition_of(transactional_id)
        return Record(partition, partition.append(transaction_log_key(transactional_id), None, now))
