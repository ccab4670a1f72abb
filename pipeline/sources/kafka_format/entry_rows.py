"""The rows of entries that are not whole v2 batches (legacy magic 0/1 entries, the entry the walk stopped at) and
the control records of markers.
"""

from __future__ import annotations

import struct
import zlib

from pipeline.sources.kafka_format.layout import (
    ATTR_COMPRESSION_MASK,
    ATTR_TIMESTAMP_TYPE,
    COMPRESSION_NONE,
    CONTROL_KEY,
    DECODED_SCHEMA,
    HEADER_SIZE_UP_TO_MAGIC,
    INT32,
    LOG_OVERHEAD,
    MARKER_VALUE,
    Malformed,
    Stop,
)
from schemas.batches import CONTROL_ABORT, CONTROL_COMMIT, STATUS_LEGACY

RECORD_OVERHEAD_V1 = 22
_NULL_ROW = dict.fromkeys(DECODED_SCHEMA.names)
_INT64 = struct.Struct(">q")
_LEGACY_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes


def legacy_row(view, start: int, end: int, file_position: int) -> dict:
    """A magic 0/1 message: kept for integrity checks, never for producer state (spec §1.1.6)."""
    offset, size, stored_crc, magic, attributes = _LEGACY_PREFIX.unpack_from(view, start)
    attributes &= 0xFF
    compression = attributes & ATTR_COMPRESSION_MASK
    row = dict(
        _NULL_ROW,
        last_offset=offset,
        magic=magic,
        attributes=attributes,
        compression=compression,
        batch_length=size,
        crc=stored_crc,
        crc_valid=zlib.crc32(view[start + 16 : end]) == stored_crc,
        is_transactional=False,
        is_control=False,
        entry_status=STATUS_LEGACY,
        position=file_position + start,
        size_bytes=end - start,
    )
    notes = []
    if compression == COMPRESSION_NONE:
        row.update(base_offset=offset, record_count=1)
    else:
        notes.append("compressed legacy wrapper: its offset is the last inner offset")
    if magic == 1:
        row["timestamp_type"] = (attributes & ATTR_TIMESTAMP_TYPE) >> 3
        if size >= RECORD_OVERHEAD_V1:
            timestamp = _INT64.unpack_from(view, start + 18)[0]
            row["max_timestamp"] = timestamp
            if compression == COMPRESSION_NONE:
                row["base_timestamp"] = timestamp
        else:
            notes.append(f"v1 message of {size} bytes is below the {RECORD_OVERHEAD_V1}-byte message overhead")
    if notes:
        row["entry_note"] = "; ".join(notes)
    return row


def stop_row(view, stop: Stop, file_position: int, file_size: int) -> dict:
    """The entry the broker's iterator stops at; `size_bytes` spans everything from it to the end of the file."""
    available = len(view) - stop.position
    row = dict(
        _NULL_ROW,
        entry_status=stop.status,
        entry_note=stop.note,
        position=file_position + stop.position,
        size_bytes=file_size - file_position - stop.position,
    )
    if available >= 8:
        row["base_offset"] = _INT64.unpack_from(view, stop.position)[0]
    if available >= LOG_OVERHEAD:
        row["batch_length"] = INT32.unpack_from(view, stop.position + 8)[0]
    if available >= HEADER_SIZE_UP_TO_MAGIC:
        row["magic"] = struct.unpack_from(">b", view, stop.position + 16)[0]
    return row


def parse_control_record(view, start: int, end: int, compression: int, record_count: int):
    """(control type, coordinator epoch, note) of the single record of an uncompressed control batch (§1.1.5)."""
    if compression != COMPRESSION_NONE:
        return None, None, "compressed control batch: control record not decoded"
    if record_count <= 0 or start >= end:
        return None, None, "control batch holds no record"
    try:
        length, position = _read_varint(view, start, end, 32)
        if length < 0 or position + length > end:
            raise Malformed("control record length runs past the batch")
        record_end = position + length
        position += 1  # attributes
        _, position = _read_varint(view, position, record_end, 64)  # timestamp delta
        _, position = _read_varint(view, position, record_end, 32)  # offset delta
        key_length, position = _read_varint(view, position, record_end, 32)
        if key_length < CONTROL_KEY.size or position + key_length > record_end:
            raise Malformed(f"control record key of {key_length} bytes is not a 4-byte version + type")
        key_version, control_type = CONTROL_KEY.unpack_from(view, position)
        if key_version < 0:
            raise Malformed(f"control record key version {key_version} is negative")
        position += key_length
        notes = [f"control key version {key_version} read as version 0"] if key_version > 0 else []
        if control_type not in (CONTROL_ABORT, CONTROL_COMMIT):
            return control_type, None, "; ".join(notes) or None
        value_length, position = _read_varint(view, position, record_end, 32)
        if value_length < MARKER_VALUE.size or position + value_length > record_end:
            notes.append(f"marker value of {value_length} bytes is not a 6-byte version + coordinator epoch")
            return control_type, None, "; ".join(notes)
        value_version, coordinator_epoch = MARKER_VALUE.unpack_from(view, position)
        if value_version < 0:
            notes.append(f"marker value version {value_version} is negative")
            return control_type, None, "; ".join(notes)
        if value_version > 0:
            notes.append(f"marker value version {value_version} read as version 0")
        return control_type, coordinator_epoch, "; ".join(notes) or None
    except Malformed as exc:
        return None, None, str(exc)


def _read_varint(view, position: int, end: int, bits: int) -> tuple[int, int]:
    """Zig-zag LEB128 like `ByteUtils.readVarint` (32 bits, 5 bytes at most) / `readVarlong` (64, 10), bounded."""
    raw = 0
    for shift in range(0, 7 * ((bits + 6) // 7), 7):
        if position >= end:
            raise Malformed("control record ends inside a varint")
        byte = view[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            raw &= (1 << bits) - 1
            return (raw >> 1) ^ -(raw & 1), position
    raise Malformed(f"varint longer than {(bits + 6) // 7} bytes")
