"""`__transaction_state` records: TransactionLogKey and TransactionLogValue, checked field by field or read by a
path for the well-formed records that nearly all of them are."""

from __future__ import annotations

import struct
from typing import Any

from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.sources.coordinator_records.primitives import INT32_BYTES, INTEGERS, DecodeError, FixedFields, Reader
from pipeline.sources.coordinator_records.rows import CoordinatorRecords
from schemas.transaction_log import TRANSACTION_LOG, TRANSACTION_STATES, V1_TAGGED_FIELD_DEFAULTS

TRANSACTION_LOG_KEY_VERSION = 0
# TransactionLogValue v1 tagged fields: tag -> (column, width in bytes).
_TRANSACTION_LOG_TAGS = {
    0: ("previous_producer_id", 8),
    1: ("next_producer_id", 8),
    2: ("client_transaction_version", 2),
    3: ("next_producer_epoch", 2),
}

_VALUE_HEAD = FixedFields(
    ("producer_id", "producer id", 8),
    ("producer_epoch", "producer epoch", 2),
    ("transaction_timeout_ms", "transaction timeout", 4),
    ("state", "transaction status", 1),
)
_VALUE_TIMESTAMPS = FixedFields(
    ("last_update_timestamp_ms", "last update timestamp", 8),
    ("start_timestamp_ms", "start timestamp", 8),
)


def decode_transaction_log(key: bytes | None, value: bytes | None) -> dict[str, Any]:
    """TransactionLogKey v0 and TransactionLogValue v0/v1 (null value: tombstone) as `transaction_log` columns.

    Fields decoded before a fault are kept; the fault is in `decode_error`.
    """
    row: dict[str, Any] = {}
    try:
        if key is None:
            raise DecodeError("record has no key")
        reader = Reader(key, "key")
        row["key_version"] = reader.int16("key version")
        if row["key_version"] != TRANSACTION_LOG_KEY_VERSION:
            raise reader.fail(f"key version {row['key_version']} is not a TransactionLogKey (version 0)", 0)
        row["transactional_id"] = reader.string("transactional id")
        row["is_tombstone"] = value is None
        if value is not None:
            _decode_transaction_log_value(Reader(value, "value"), row)
    except DecodeError as exc:
        row["decode_error"] = str(exc)
    return row


def _decode_transaction_log_value(reader: Reader, row: dict[str, Any]) -> None:
    version = row["value_version"] = reader.int16("value version")
    if version not in (0, 1):
        raise reader.fail(f"value version {version} is not a TransactionLogValue version (0 or 1)", 0)
    flexible = version >= 1
    if flexible:
        row.update(V1_TAGGED_FIELD_DEFAULTS)
    reader.fields(_VALUE_HEAD, row)
    state = row["state"]
    row["state_name"] = TRANSACTION_STATES[state] if 0 <= state < len(TRANSACTION_STATES) else None
    if flexible:
        count = reader.compact_array_length("transaction partitions", 3, nullable=True)
    else:
        count = reader.array_length("transaction partitions", 6, nullable=True)
    partitions = None if count is None else []
    row["partitions"] = partitions
    for _ in range(count or 0):
        if flexible:
            topic = reader.compact_string("partition topic")
            ids_count = reader.compact_array_length("partition ids", INT32_BYTES)
        else:
            topic = reader.string("partition topic")
            ids_count = reader.array_length("partition ids", INT32_BYTES)
        partitions.append({"topic": topic, "partitions": reader.int32_array(ids_count)})
        if flexible:
            reader.tagged_fields({}, {})
    reader.fields(_VALUE_TIMESTAMPS, row)
    if flexible:
        reader.tagged_fields(_TRANSACTION_LOG_TAGS, row)


TRANSACTION_LOG_DECODED = (
    "key_version",
    "transactional_id",
    "is_tombstone",
    "value_version",
    "producer_id",
    "producer_epoch",
    "transaction_timeout_ms",
    "state",
    "state_name",
    "partitions",
    "last_update_timestamp_ms",
    "start_timestamp_ms",
    "previous_producer_id",
    "next_producer_id",
    "client_transaction_version",
    "next_producer_epoch",
    "decode_error",
)
_KEY_START = struct.Struct(">hh")  # key version, transactional id length
_VALUE_START = struct.Struct(">hqhib")  # value version .. transaction status: 17 bytes
_TIMESTAMPS = struct.Struct(">qq")
_INT16, _INT32 = INTEGERS[2], INTEGERS[4]
_TOMBSTONE_VALUE = (None,) * (len(TRANSACTION_LOG_DECODED) - 3)
_V0_TAGGED_FIELDS = (None,) * len(_TRANSACTION_LOG_TAGS)


class _Unusual(Exception):
    """A record the well-formed path leaves to `decode_transaction_log`."""


def transaction_log_values(key: bytes | None, value: bytes | None) -> tuple:
    """`decode_transaction_log` as a tuple in `TRANSACTION_LOG_DECODED` order, None for what it leaves out.

    Nearly every record is well formed and is read here with a few unpacks, without a reader or a dict. Anything
    else (a fault, a tagged field in a partition entry) goes to `decode_transaction_log`, which checks every field
    and names the fault. The fast path only ever returns what that decoder would: it gives up on everything the
    decoder rejects, and what it reads whole also passes the decoder's upfront count checks, as every array item
    it reads is at least as long as they assume.
    """
    try:
        return _well_formed_transaction_log(key, value)
    except (_Unusual, struct.error, IndexError, UnicodeDecodeError):
        return tuple(map(decode_transaction_log(key, value).get, TRANSACTION_LOG_DECODED))


def _well_formed_transaction_log(key: bytes | None, value: bytes | None) -> tuple:
    """Raises _Unusual (or a struct, index or UTF-8 error: bytes missing or invalid) for what it does not read."""
    if key is None:
        raise _Unusual
    key_version, length = _KEY_START.unpack_from(key)
    if key_version != TRANSACTION_LOG_KEY_VERSION or not 0 <= length <= len(key) - _KEY_START.size:
        raise _Unusual
    transactional_id = key[_KEY_START.size : _KEY_START.size + length].decode("utf-8")
    if value is None:
        return (key_version, transactional_id, True, *_TOMBSTONE_VALUE)
    version, producer_id, producer_epoch, timeout, state = _VALUE_START.unpack_from(value)
    if version == 0:
        partitions, position = _v0_partitions(value, _VALUE_START.size)
        last_update, start = _TIMESTAMPS.unpack_from(value, position)
        tagged_fields = _V0_TAGGED_FIELDS
    elif version == 1:
        partitions, position = _v1_partitions(value, _VALUE_START.size)
        last_update, start = _TIMESTAMPS.unpack_from(value, position)
        tagged_fields = _v1_tagged_fields(value, position + _TIMESTAMPS.size)
    else:
        raise _Unusual
    state_name = TRANSACTION_STATES[state] if 0 <= state < len(TRANSACTION_STATES) else None
    return (
        key_version,
        transactional_id,
        False,
        version,
        producer_id,
        producer_epoch,
        timeout,
        state,
        state_name,
        partitions,
        last_update,
        start,
        *tagged_fields,
        None,
    )


def _v0_partitions(value: bytes, position: int) -> tuple[list[dict[str, Any]] | None, int]:
    (count,) = _INT32.unpack_from(value, position)
    position += INT32_BYTES
    if count == -1:
        return None, position
    if count < 0:
        raise _Unusual
    partitions = []
    for _ in range(count):
        (length,) = _INT16.unpack_from(value, position)
        topic_end = position + _INT16.size + length
        (ids,) = _INT32.unpack_from(value, topic_end)  # also checks that the topic is there
        ids_start = topic_end + INT32_BYTES
        ids_end = ids_start + INT32_BYTES * ids
        if length < 0 or ids < 0 or ids_end > len(value):
            raise _Unusual
        topic = value[position + _INT16.size : topic_end].decode("utf-8")
        partitions.append({"topic": topic, "partitions": list(struct.unpack_from(f">{ids}i", value, ids_start))})
        position = ids_end
    return partitions, position


def _v1_partitions(value: bytes, position: int) -> tuple[list[dict[str, Any]] | None, int]:
    count, position = _uvarint(value, position)
    if count == 0:
        return None, position
    partitions = []
    for _ in range(count - 1):
        length, position = _uvarint(value, position)
        topic_end = position + length - 1
        ids, ids_start = _uvarint(value, topic_end)  # also checks that the topic is there
        ids_end = ids_start + INT32_BYTES * (ids - 1)
        if length == 0 or ids == 0 or ids_end >= len(value) or value[ids_end] != 0:  # no tagged fields in the entry
            raise _Unusual
        topic = value[position:topic_end].decode("utf-8")
        partitions.append({"topic": topic, "partitions": list(struct.unpack_from(f">{ids - 1}i", value, ids_start))})
        position = ids_end + 1
    return partitions, position


def _v1_tagged_fields(value: bytes, position: int) -> tuple[int, ...]:
    fields = dict(V1_TAGGED_FIELD_DEFAULTS)
    count, position = _uvarint(value, position)
    previous = -1
    for _ in range(count):
        tag, position = _uvarint(value, position)
        size, position = _uvarint(value, position)
        if tag <= previous or size > len(value) - position:
            raise _Unusual
        previous = tag
        if tag in _TRANSACTION_LOG_TAGS:
            column, width = _TRANSACTION_LOG_TAGS[tag]
            if size != width:
                raise _Unusual
            (fields[column],) = INTEGERS[width].unpack_from(value, position)
        position += size
    return tuple(fields[column] for column, _ in _TRANSACTION_LOG_TAGS.values())


def _uvarint(data: bytes, position: int) -> tuple[int, int]:
    """(value, next position) like `Reader.uvarint`; IndexError at the end of `data`."""
    value = 0
    for shift in range(0, 35, 7):
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & 0xFFFFFFFF, position
    raise _Unusual


transaction_log_rows = CoordinatorRecords(
    to_arrow_schema(TRANSACTION_LOG),
    transaction_log_values,
    TRANSACTION_LOG_DECODED,
    (
        ("batch_base_offset", "base_offset"),
        ("batch_timestamp", "max_timestamp"),
        ("partition_leader_epoch", "partition_leader_epoch"),
        ("batch_is_transactional", "is_transactional"),
        ("batch_compression", "compression"),
        ("batch_producer_id", "producer_id"),
        ("position", "position"),
    ),
    with_timestamp=True,
)
