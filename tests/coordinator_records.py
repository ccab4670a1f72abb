"""`__transaction_state` and `__consumer_offsets` keys and values, written by small encoders field by field from the
message schemas (TransactionLogKey/Value.json, OffsetCommitKey/Value.json), not by the code under test."""

from __future__ import annotations

import struct

from pipeline.sources.kafka_format.encoding import uvarint


def string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def compact_string(text: str) -> bytes:
    raw = text.encode()
    return uvarint(len(raw) + 1) + raw


def txn_key(transactional_id: str, version: int = 0) -> bytes:
    return struct.pack(">h", version) + string(transactional_id)


def txn_value_v0(producer_id, epoch, timeout, state, partitions, last_update, start) -> bytes:
    body = struct.pack(">hqhib", 0, producer_id, epoch, timeout, state)
    if partitions is None:
        body += struct.pack(">i", -1)
    else:
        body += struct.pack(">i", len(partitions))
        for topic, ids in partitions:
            body += string(topic) + struct.pack(f">i{len(ids)}i", len(ids), *ids)
    return body + struct.pack(">qq", last_update, start)


def txn_value_v1(producer_id, epoch, timeout, state, partitions, last_update, start, tags: dict[int, bytes]) -> bytes:
    body = struct.pack(">hqhib", 1, producer_id, epoch, timeout, state)
    if partitions is None:
        body += uvarint(0)
    else:
        body += uvarint(len(partitions) + 1)
        for topic, ids in partitions:
            body += compact_string(topic) + uvarint(len(ids) + 1) + struct.pack(f">{len(ids)}i", *ids) + b"\x00"
    body += struct.pack(">qq", last_update, start)
    body += uvarint(len(tags))
    for tag, data in sorted(tags.items()):
        body += uvarint(tag) + uvarint(len(data)) + data
    return body


def offset_key(group: str, topic: str, partition: int, version: int = 1) -> bytes:
    return struct.pack(">h", version) + string(group) + string(topic) + struct.pack(">i", partition)


def offset_value(version: int, offset: int, metadata: str, commit: int, leader_epoch=-1, expire=-1) -> bytes:
    body = struct.pack(">hq", version, offset)
    if version >= 3:
        body += struct.pack(">i", leader_epoch)
    body += compact_string(metadata) if version >= 4 else string(metadata)
    body += struct.pack(">q", commit)
    if version == 1:
        body += struct.pack(">q", expire)
    if version >= 4:
        body += b"\x00"
    return body


TAGS = {
    0: struct.pack(">q", 41),  # PreviousProducerId
    1: struct.pack(">q", 43),  # NextProducerId
    2: struct.pack(">h", 2),  # ClientTransactionVersion
    3: struct.pack(">h", 6),  # NextProducerEpoch
    9: b"\x01\x02\x03",  # a tag this reader does not know: skipped
}
