"""Bytes of the files a broker writes beside the segments (producer-state snapshots, offset and time indexes),
written field by field for the tests, not by the code under test."""

from __future__ import annotations

import struct

from crc32c import crc32c

from pipeline.sources.partition_files.binary_files import SNAPSHOT_ENTRY
from pipeline.sources.partition_files.index_checks import OFFSET_INDEX_ENTRY, TIME_INDEX_ENTRY

TIMESTAMP = 1767225600000

# JSON field names of broker-segments/_expected/*.snapshot.json -> producer_snapshots columns
SNAPSHOT_FIELDS = {
    "producerId": "producer_id",
    "producerEpoch": "producer_epoch",
    "lastSequence": "last_sequence",
    "lastOffset": "last_offset",
    "offsetDelta": "offset_delta",
    "timestamp": "timestamp",
    "coordinatorEpoch": "coordinator_epoch",
    "currentTxnFirstOffset": "current_txn_first_offset",
}
PRODUCER_FIELDS = list(SNAPSHOT_FIELDS.values())


def snapshot_bytes(entries: list[tuple[int, ...]], version: int = 1) -> bytes:
    """A producer-state snapshot as the broker writes it: CRC-32C over the count and the entries."""
    body = struct.pack(">i", len(entries)) + b"".join(SNAPSHOT_ENTRY.pack(*entry) for entry in entries)
    return struct.pack(">hI", version, crc32c(body)) + body


def offset_index(*entries: tuple[int, int]) -> bytes:
    return b"".join(OFFSET_INDEX_ENTRY.pack(*entry) for entry in entries)


def time_index(*entries: tuple[int, int]) -> bytes:
    return b"".join(TIME_INDEX_ENTRY.pack(*entry) for entry in entries)
