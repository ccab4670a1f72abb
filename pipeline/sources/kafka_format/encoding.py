"""The encoder: v2 batches, transaction markers and `.txnindex` entries as a broker writes them (valid CRC-32C,
varint-framed records, 78-byte markers), so tests, samples and the generator build logs byte for byte.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from crc32c import crc32c

from pipeline.sources.kafka_format.layout import (
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    COMPRESSION_NONE,
    CONTROL_KEY,
    CRC_START,
    LOG_OVERHEAD,
    MARKER_VALUE,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
    V2_HEADER,
)
from pipeline.sources.records.decompression import compress_records
from schemas.batches import CONTROL_ABORT, CONTROL_COMMIT

DEFAULT_TIMESTAMP = 1767225600000  # 2026-01-01T00:00:00Z
_TXN_INDEX_ENTRY = struct.Struct(">hqqqq")


def uvarint(value: int) -> bytes:
    """Kafka's unsigned varint (also the flexible versions' lengths and tags of the coordinator topics' messages)."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _zigzag(value: int) -> bytes:
    return uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None) -> bytes:
    body = bytearray(b"\x00")  # attributes
    body += _zigzag(timestamp_delta)
    body += _zigzag(offset_delta)
    for field in (key, value):
        if field is None:
            body += _zigzag(-1)
        else:
            body += _zigzag(len(field))
            body += field
    body += _zigzag(0)  # header count
    return _zigzag(len(body)) + bytes(body)


def encode_batch(
    base_offset: int,
    records: int | Sequence[bytes | None],
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    partition_leader_epoch: int = 0,
    base_timestamp: int = DEFAULT_TIMESTAMP,
    max_timestamp: int | None = None,
    compression: int = COMPRESSION_NONE,
    *,
    is_control: bool = False,
    timestamp_type: int = 0,
    keys: Sequence[bytes | None] | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """A v2 record batch as a broker stores it, with a valid CRC-32C.

    `records` is a record count (values `value-<i>`, null keys) or the record values. The last record carries
    `max_timestamp` (default `base_timestamp`), the others `base_timestamp`. `last_offset_delta` defaults to
    `count - 1`; pass a larger one to mimic a batch the cleaner has compacted. `compression` is a codec id, 0 (none)
    to 4 (zstd), framed as Kafka's producer frames it (`records.compress_records`).
    """
    values = [b"value-%d" % index for index in range(records)] if isinstance(records, int) else list(records)
    keys = [None] * len(values) if keys is None else list(keys)
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys for {len(values)} records")
    if max_timestamp is None:
        max_timestamp = base_timestamp
    body = compress_records(
        b"".join(
            _encode_record(
                index, max_timestamp - base_timestamp if index == len(values) - 1 else 0, keys[index], values[index]
            )
            for index in range(len(values))
        ),
        compression,
    )
    attributes = (
        compression
        | (ATTR_TIMESTAMP_TYPE if timestamp_type else 0)
        | (ATTR_TRANSACTIONAL if is_transactional else 0)
        | (ATTR_CONTROL if is_control else 0)
    )
    if last_offset_delta is None:
        last_offset_delta = max(len(values) - 1, 0)
    header = bytearray(
        V2_HEADER.pack(
            base_offset,
            RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(body),
            partition_leader_epoch,
            2,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(values),
        )
    )
    batch = header + body
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[CRC_START:]))
    return bytes(batch)


def encode_marker(
    offset: int,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp: int,
    partition_leader_epoch: int = 0,
) -> bytes:
    """A COMMIT or ABORT transaction marker: the 78-byte control batch the broker writes (spec §1.1.5)."""
    return encode_batch(
        offset,
        [MARKER_VALUE.pack(0, coordinator_epoch)],
        producer_id,
        producer_epoch,
        NO_SEQUENCE,
        True,
        partition_leader_epoch,
        timestamp,
        timestamp,
        is_control=True,
        keys=[CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)],
    )


def encode_txnindex_entry(producer_id: int, first_offset: int, last_offset: int, last_stable_offset: int) -> bytes:
    """One 34-byte `.txnindex` entry, version 0 (spec §1.3)."""
    return _TXN_INDEX_ENTRY.pack(0, producer_id, first_offset, last_offset, last_stable_offset)


def segment_file_name(base_offset: int, suffix: str = ".log") -> str:
    """`LogFileUtils.filenamePrefixFromOffset`: the base offset zero-padded to 20 digits, plus the suffix."""
    if base_offset < 0:
        raise ValueError(f"negative base offset {base_offset}")
    return f"{base_offset:020d}{suffix}"
