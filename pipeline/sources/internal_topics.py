"""Records of the coordinator topics: `__transaction_state` and the transactional offset commits of
`__consumer_offsets`, decoded into the `transaction_log` and `offset_commits` tables (spec §5.1).

The key and value decoders are pure functions over bytes with a small reader for Kafka's primitive types, so
tests run them without Spark and executors run them inside `mapInArrow`. They never raise on bad bytes: an
unknown version, a short buffer or a length running past the end becomes `decode_error`, naming the byte
position in the key or value, and every length is checked against the bytes that are there before anything
is read or sized from it. A large log holds millions of `__transaction_state` records: those are first read by a
path for well-formed records (`transaction_log_values`), which leaves anything else to that checked decoder.

The Spark reader walks the segments of those topics like `segments.read_segments` (same byte-range split,
same entry walk from `kafka_format`) and reads the records of the batches it keeps with
`records.window_records`, a window at a time; only the batches that can hold such records are read again from
the file, and their rows are made as columns.
"""

from __future__ import annotations

import gc
import logging
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.arrow_pass import ArrowPass
from pipeline.config import Settings
from pipeline.sources.filesystems import resolve, shipped
from pipeline.sources.kafka_format.windows import iter_decoded, next_entry_start
from pipeline.sources.log_roots import SegmentFile
from pipeline.sources.records.api import RecordError, window_records
from pipeline.sources.segments import SEGMENT_DESCRIPTOR, SOURCE_FORMAT, segment_ranges
from schemas.batches import STATUS_OK
from schemas.offset_commits import CONSUMER_OFFSETS_TOPIC, GROUP_METADATA_KEY_VERSION, OFFSET_COMMITS
from schemas.transaction_log import (
    TRANSACTION_LOG,
    TRANSACTION_STATE_TOPIC,
    TRANSACTION_STATES,
    V1_TAGGED_FIELD_DEFAULTS,
)

log = logging.getLogger(__name__)

TRANSACTION_LOG_KEY_VERSION = 0
OFFSET_COMMIT_KEY_VERSIONS = (0, 1)
LOG_APPEND_TIME = 1  # `timestamp_type` of a batch whose timestamps the broker set

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_INTEGERS = {1: struct.Struct(">b"), 2: struct.Struct(">h"), 4: struct.Struct(">i"), 8: struct.Struct(">q")}
_INT32_BYTES = 4
# TransactionLogValue v1 tagged fields: tag -> (column, width in bytes).
_TRANSACTION_LOG_TAGS = {
    0: ("previous_producer_id", 8),
    1: ("next_producer_id", 8),
    2: ("client_transaction_version", 2),
    3: ("next_producer_epoch", 2),
}
_BATCH_FIELDS = (
    "base_offset",
    "position",
    "size_bytes",
    "partition_leader_epoch",
    "base_timestamp",
    "max_timestamp",
    "timestamp_type",
    "is_transactional",
    "compression",
    "producer_id",
    "producer_epoch",
)


class DecodeError(ValueError):
    """Bytes that do not hold what the schema says; the message names the byte position."""


class _FixedFields:
    """Consecutive fixed-width integer fields, each (column, description, size in bytes), read as one struct."""

    def __init__(self, *fields: tuple[str, str, int]) -> None:
        self.fields = fields
        self.columns = tuple(column for column, _, _ in fields)
        self.layout = struct.Struct(">" + "".join(_INTEGERS[size].format[1:] for _, _, size in fields))


class _Reader:
    """Kafka's primitive types (`ByteBufferAccessor`/`Readable`) over one key or value, bounds-checked."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.end = len(data)
        self.what = what
        self.position = 0

    def fail(self, reason: str, position: int | None = None) -> DecodeError:
        return DecodeError(f"{self.what} byte {self.position if position is None else position}: {reason}")

    def remaining(self) -> int:
        return self.end - self.position

    def _fixed(self, size: int, field: str) -> int:
        position = self.position
        if position + size > self.end:
            raise self.fail(f"{field} needs {size} bytes, {self.end - position} left")
        self.position = position + size
        return _INTEGERS[size].unpack_from(self.data, position)[0]

    def fields(self, fields: _FixedFields, into: dict[str, Any]) -> None:
        """Consecutive fixed-width fields read `into` the row with one unpack; a short buffer is read field by
        field, so the error names the field it cuts and the fields before it are kept."""
        position = self.position
        if position + fields.layout.size <= self.end:
            self.position = position + fields.layout.size
            into.update(zip(fields.columns, fields.layout.unpack_from(self.data, position), strict=True))
            return
        for column, description, size in fields.fields:
            into[column] = self._fixed(size, description)

    def int32_array(self, count: int) -> list[int]:
        """`count` int32s; `count` comes from `array_length`, which checked that they are there."""
        position = self.position
        self.position = position + _INT32_BYTES * count
        return list(struct.unpack_from(f">{count}i", self.data, position))

    def int8(self, field: str) -> int:
        return self._fixed(1, field)

    def int16(self, field: str) -> int:
        return self._fixed(2, field)

    def int32(self, field: str) -> int:
        return self._fixed(4, field)

    def int64(self, field: str) -> int:
        return self._fixed(8, field)

    def uvarint(self, field: str) -> int:
        """`ByteUtils.readUnsignedVarint`: at most 5 bytes."""
        start, value = self.position, 0
        for shift in range(0, 35, 7):
            if self.position >= len(self.data):
                raise self.fail(f"{field} ends inside its varint", start)
            byte = self.data[self.position]
            self.position += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value & 0xFFFFFFFF
        raise self.fail(f"{field} varint is longer than 5 bytes", start)

    def _text(self, length: int | None, field: str, start: int, nullable: bool) -> str | None:
        if length is None:
            if not nullable:
                raise self.fail(f"{field} is null but not nullable", start)
            return None
        if length > self.remaining():
            raise self.fail(f"{field} of {length} bytes runs past the end ({self.remaining()} left)", start)
        raw = bytes(self.data[self.position : self.position + length])
        self.position += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(f"{field} is not UTF-8 ({exc.reason})", start) from None

    def string(self, field: str, nullable: bool = False) -> str | None:
        """int16 length (-1 = null) + UTF-8."""
        start = self.position
        length = self.int16(f"{field} length")
        if length < -1:
            raise self.fail(f"{field} length {length} is negative", start)
        return self._text(None if length == -1 else length, field, start, nullable)

    def compact_string(self, field: str, nullable: bool = False) -> str | None:
        """uvarint length + 1 (0 = null) + UTF-8."""
        start = self.position
        length = self.uvarint(f"{field} length")
        return self._text(None if length == 0 else length - 1, field, start, nullable)

    def _count(self, count: int | None, min_item_bytes: int, field: str, start: int, nullable: bool) -> int | None:
        if count is None:
            if not nullable:
                raise self.fail(f"{field} is null but not nullable", start)
            return None
        if count * min_item_bytes > self.remaining():
            raise self.fail(
                f"{field} of {count} entries needs at least {count * min_item_bytes} bytes, {self.remaining()} left",
                start,
            )
        return count

    def array_length(self, field: str, min_item_bytes: int, nullable: bool = False) -> int | None:
        """int32 count (-1 = null), checked against the bytes left."""
        start = self.position
        count = self.int32(f"{field} length")
        if count < -1:
            raise self.fail(f"{field} length {count} is negative", start)
        return self._count(None if count == -1 else count, min_item_bytes, field, start, nullable)

    def compact_array_length(self, field: str, min_item_bytes: int, nullable: bool = False) -> int | None:
        """uvarint count + 1 (0 = null), checked against the bytes left."""
        start = self.position
        count = self.uvarint(f"{field} length")
        return self._count(None if count == 0 else count - 1, min_item_bytes, field, start, nullable)

    def tagged_fields(self, known: dict[int, tuple[str, int]], into: dict[str, Any]) -> None:
        """A flexible struct's tagged-field section: known integer tags go `into` by column name, others are skipped."""
        start = self.position
        count = self._count(self.uvarint("tagged field count"), 2, "tagged fields", start, False)
        previous = -1
        for _ in range(count or 0):
            start = self.position
            tag = self.uvarint("tag")
            if tag <= previous:
                raise self.fail(f"tag {tag} does not follow tag {previous}", start)
            previous = tag
            size = self.uvarint(f"tag {tag} size")
            if size > self.remaining():
                raise self.fail(f"tag {tag} of {size} bytes runs past the end ({self.remaining()} left)", start)
            if tag in known:
                column, width = known[tag]
                if size != width:
                    raise self.fail(f"tag {tag} ({column}) has {size} bytes, expected {width}", start)
                into[column] = self._fixed(width, column)
            else:
                self.position += size


# --- __transaction_state ---------------------------------------------------------------------------------

_VALUE_HEAD = _FixedFields(
    ("producer_id", "producer id", 8),
    ("producer_epoch", "producer epoch", 2),
    ("transaction_timeout_ms", "transaction timeout", 4),
    ("state", "transaction status", 1),
)
_VALUE_TIMESTAMPS = _FixedFields(
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
        reader = _Reader(key, "key")
        row["key_version"] = reader.int16("key version")
        if row["key_version"] != TRANSACTION_LOG_KEY_VERSION:
            raise reader.fail(f"key version {row['key_version']} is not a TransactionLogKey (version 0)", 0)
        row["transactional_id"] = reader.string("transactional id")
        row["is_tombstone"] = value is None
        if value is not None:
            _decode_transaction_log_value(_Reader(value, "value"), row)
    except DecodeError as exc:
        row["decode_error"] = str(exc)
    return row


def _decode_transaction_log_value(reader: _Reader, row: dict[str, Any]) -> None:
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
            ids_count = reader.compact_array_length("partition ids", _INT32_BYTES)
        else:
            topic = reader.string("partition topic")
            ids_count = reader.array_length("partition ids", _INT32_BYTES)
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
_INT16, _INT32 = _INTEGERS[2], _INTEGERS[4]
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
    position += _INT32_BYTES
    if count == -1:
        return None, position
    if count < 0:
        raise _Unusual
    partitions = []
    for _ in range(count):
        (length,) = _INT16.unpack_from(value, position)
        topic_end = position + _INT16.size + length
        (ids,) = _INT32.unpack_from(value, topic_end)  # also checks that the topic is there
        ids_start = topic_end + _INT32_BYTES
        ids_end = ids_start + _INT32_BYTES * ids
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
        ids_end = ids_start + _INT32_BYTES * (ids - 1)
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
            (fields[column],) = _INTEGERS[width].unpack_from(value, position)
        position += size
    return tuple(fields[column] for column, _ in _TRANSACTION_LOG_TAGS.values())


def _uvarint(data: bytes, position: int) -> tuple[int, int]:
    """(value, next position) like `_Reader.uvarint`; IndexError at the end of `data`."""
    value = 0
    for shift in range(0, 35, 7):
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & 0xFFFFFFFF, position
    raise _Unusual


# --- __consumer_offsets ----------------------------------------------------------------------------------


def decode_offset_commit(key: bytes | None, value: bytes | None) -> dict[str, Any]:
    """OffsetCommitKey v0/v1 and OffsetCommitValue v0..v4 (null value: tombstone) as `offset_commits` columns.

    A GroupMetadataKey (version 2) gives only `key_version`: it is not an offset commit and the caller drops it.
    Fields decoded before a fault are kept; the fault is in `decode_error`.
    """
    row: dict[str, Any] = {}
    try:
        if key is None:
            raise DecodeError("record has no key")
        reader = _Reader(key, "key")
        version = row["key_version"] = reader.int16("key version")
        if version == GROUP_METADATA_KEY_VERSION:
            return row
        if version not in OFFSET_COMMIT_KEY_VERSIONS:
            raise reader.fail(f"key version {version} is not an OffsetCommitKey (0, 1) or GroupMetadataKey (2)", 0)
        row["group"] = reader.string("group")
        row["committed_topic"] = reader.string("topic")
        row["committed_partition"] = reader.int32("partition")
        row["is_tombstone"] = value is None
        if value is not None:
            _decode_offset_commit_value(_Reader(value, "value"), row)
    except DecodeError as exc:
        row["decode_error"] = str(exc)
    return row


def _decode_offset_commit_value(reader: _Reader, row: dict[str, Any]) -> None:
    version = row["value_version"] = reader.int16("value version")
    if not 0 <= version <= 4:
        raise reader.fail(f"value version {version} is not an OffsetCommitValue version (0 to 4)", 0)
    row["committed_offset"] = reader.int64("offset")
    if version >= 3:
        row["leader_epoch"] = reader.int32("leader epoch")
    row["metadata"] = reader.compact_string("metadata") if version >= 4 else reader.string("metadata")
    row["commit_timestamp"] = reader.int64("commit timestamp")
    if version == 1:
        row["expire_timestamp"] = reader.int64("expire timestamp")
    if version >= 4:
        reader.tagged_fields({}, row)


# --- batches and records ---------------------------------------------------------------------------------

OFFSET_COMMIT_DECODED = (
    "key_version",
    "group",
    "committed_topic",
    "committed_partition",
    "is_tombstone",
    "value_version",
    "committed_offset",
    "leader_epoch",
    "metadata",
    "commit_timestamp",
    "expire_timestamp",
    "decode_error",
)


def _offset_commit_values(key: bytes | None, value: bytes | None) -> tuple:
    return tuple(map(decode_offset_commit(key, value).get, OFFSET_COMMIT_DECODED))


@dataclass(frozen=True)
class CoordinatorRecords:
    """How the records of a coordinator topic become rows of its table (`schema`): `decode` gives the `decoded`
    columns of a record's key and value; `batch_columns` are (table column, header field) pairs taken from its
    batch.

    Called with one batch entry it gives that entry's rows (for callers outside Spark); the executors make the
    rows of a whole window at once (`window`), as lists per column rather than a dict per row.
    """

    schema: pa.Schema
    decode: Callable[[bytes | None, bytes | None], tuple]
    decoded: tuple[str, ...]
    batch_columns: tuple[tuple[str, str], ...]
    with_timestamp: bool

    def __call__(self, entry: bytes, batch: dict[str, Any]) -> list[dict[str, Any]]:
        """The rows of the records of one batch entry (whole entry, header included), without provenance; `batch`
        holds the header fields of the entry (`kafka_format.DECODED_SCHEMA` names)."""
        batches = {field: [batch[field]] for field in _BATCH_FIELDS}
        return self.window(memoryview(entry), [0], [len(entry)], batches, {}).to_pylist()

    def window(
        self,
        view: memoryview,
        starts: list[int],
        ends: list[int],
        batches: dict[str, list[Any]],
        provenance: dict[str, Any],
    ) -> pa.RecordBatch:
        """The rows of the records of the batch entries at [starts, ends) of `view`, whose header fields are the
        lists of `batches`; `provenance` holds the columns every row shares. A batch whose records Kafka's reader
        would reject gives one row whose `decode_error` says why.

        Python's cycle collector is off meanwhile: the rows are thousands of small containers in no cycle, and
        every few thousand of them it would walk the worker's whole heap (pyspark, pyarrow, numba), which doubled
        the CPU of the decode. They are gone when it is back on.
        """
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._window(view, starts, ends, batches, provenance)
        finally:
            if enabled:
                gc.enable()

    def _window(
        self,
        view: memoryview,
        starts: list[int],
        ends: list[int],
        batches: dict[str, list[Any]],
        provenance: dict[str, Any],
    ) -> pa.RecordBatch:
        of_batch: list[int] = []  # the batch of each row
        offsets: list[int | None] = []
        timestamps: list[int | None] = []
        decoded: list[tuple] = []
        unreadable = (None,) * (len(self.decoded) - 1)
        for index, records in enumerate(window_records(view, starts, ends)):
            if isinstance(records, RecordError):
                of_batch.append(index)
                offsets.append(None)
                timestamps.append(None)
                decoded.append(
                    (*unreadable, f"records unreadable at byte {records.position} of the batch: {records.reason}")
                )
                continue
            base_offset, base_timestamp = batches["base_offset"][index], batches["base_timestamp"][index]
            log_append_time = batches["timestamp_type"][index] == LOG_APPEND_TIME
            for record in records:
                of_batch.append(index)
                offsets.append(_int64(base_offset + record.offset_delta))
                # `DefaultRecord.timestamp`: in a LogAppendTime batch every record has the batch's max timestamp.
                if log_append_time:
                    timestamps.append(batches["max_timestamp"][index])
                else:
                    timestamps.append(_int64(base_timestamp + record.timestamp_delta))
                decoded.append(self.decode(record.key, record.value))
        rows = len(of_batch)
        columns = {column: [value] * rows for column, value in provenance.items()}
        columns.update((column, [batches[field][index] for index in of_batch]) for column, field in self.batch_columns)
        columns["record_offset"] = offsets
        if self.with_timestamp:
            columns["record_timestamp"] = timestamps
        if decoded:
            columns.update(zip(self.decoded, zip(*decoded, strict=True), strict=True))
        arrays = [
            pa.array(columns[field.name], field.type) if field.name in columns else pa.nulls(rows, field.type)
            for field in self.schema
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _int64(value: int) -> int | None:
    """Offsets and timestamps computed from file values; a sum that leaves int64 has no meaning."""
    return value if _INT64_MIN <= value <= _INT64_MAX else None


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
# Group metadata records (key version 2) included, so the caller can count what it drops.
offset_commit_rows = CoordinatorRecords(
    to_arrow_schema(OFFSET_COMMITS),
    _offset_commit_values,
    OFFSET_COMMIT_DECODED,
    (
        ("batch_base_offset", "base_offset"),
        ("producer_id", "producer_id"),
        ("producer_epoch", "producer_epoch"),
        ("position", "position"),
    ),
    with_timestamp=False,
)


# --- Spark ----------------------------------------------------------------------------------------------

# topic -> (table schema, how its records become columns, whether only transactional data batches hold them)
_TOPIC_READERS: dict[str, tuple[T.StructType, CoordinatorRecords, bool]] = {
    TRANSACTION_STATE_TOPIC: (TRANSACTION_LOG, transaction_log_rows, False),
    CONSUMER_OFFSETS_TOPIC: (OFFSET_COMMITS, offset_commit_rows, True),
}


def internal_topic_passes(
    spark: SparkSession, segments: list[SegmentFile], settings: Settings
) -> tuple[ArrowPass | None, ArrowPass | None]:
    """(`transaction_log` rows, offset-commit records) of the `__transaction_state` and `__consumer_offsets`
    files among `segments` (those of a listing, `log_roots`), as passes that decode them on the executors; None
    for a topic without files.

    The second pass also makes the group metadata records of transactional batches (key version 2), which
    the `offset_commits` table leaves out (`dispatch.split_offset_commit_records`).
    """
    passes: list[ArrowPass | None] = []
    for topic, (schema, records, transactional_only) in _TOPIC_READERS.items():
        of_topic = [segment for segment in segments if segment.topic == topic]
        if not of_topic:
            passes.append(None)
            continue
        # Dealt to tasks by size like the batches decode: a few coordinator partitions often hold most records.
        rows, ranges, tasks = segment_ranges(spark, of_topic, settings.ingest.segment_split_bytes)
        log.debug(
            "decoding the %s records of %d segment files as %d byte ranges in %d tasks",
            topic,
            len(of_topic),
            ranges,
            tasks,
        )
        decode = partial(_decode_descriptors, records, transactional_only)
        passes.append(ArrowPass(spark.createDataFrame(rows, SEGMENT_DESCRIPTOR), shipped(spark, decode), schema))
    transaction_log, offset_commit_records = passes
    return transaction_log, offset_commit_records


def _decode_descriptors(
    records: CoordinatorRecords, transactional_only: bool, descriptor_batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Executor side: segment byte ranges in, table rows out, one Arrow batch per decoded window."""
    for descriptors in descriptor_batches:
        for descriptor in descriptors.to_pylist():
            yield from range_batches(SegmentFile(**descriptor), records, transactional_only)


def range_rows(
    segment: SegmentFile, records: CoordinatorRecords, transactional_only: bool
) -> Iterator[list[dict[str, Any]]]:
    """`range_batches` as rows, for callers outside Spark."""
    for batch in range_batches(segment, records, transactional_only):
        yield batch.to_pylist()


def range_batches(
    segment: SegmentFile, records: CoordinatorRecords, transactional_only: bool
) -> Iterator[pa.RecordBatch]:
    """Executor side of one byte range: rows of the batches that start in it, with provenance, per decoded window.

    Entries the broker cannot iterate (and legacy or control batches) hold no such records; `batches` reports
    them. The batches kept of a window are read again from the file in one read. An I/O error ends the range
    with one row whose `decode_error` says so, at the batch being read (or the last one read).
    """
    provenance = {
        "topic": segment.topic,
        "partition": segment.partition,
        "segment_base_offset": segment.segment_base_offset,
        "source_file": segment.location,
        "source_format": SOURCE_FORMAT,
        "broker_id": segment.broker_id,
        "cluster_id": segment.cluster_id,
    }
    position = segment.start
    try:
        filesystem, path = resolve(segment.location)
        with filesystem.open_input_file(path) as walk, filesystem.open_input_file(path) as entries:
            file_size = walk.size()
            first = next_entry_start(walk.read_at, file_size, segment.start)
            if first is None:
                return
            walk.seek(first)
            # Records are walked by `window_records`, only for the batches kept.
            for table in iter_decoded(walk.read, file_size, start=first, end=segment.end, verify_records=False):
                kept = pc.and_(pc.equal(table["entry_status"], STATUS_OK), pc.invert(table["is_control"]))
                if transactional_only:
                    kept = pc.and_(kept, table["is_transactional"])
                batches = table.filter(kept).select(list(_BATCH_FIELDS)).to_pydict()
                positions, sizes = batches["position"], batches["size_bytes"]
                if not positions:
                    continue
                position = positions[0]
                window = entries.read_at(positions[-1] + sizes[-1] - position, position)
                starts = [at - position for at in positions]
                # A file that shrank meanwhile gives short entries, which `window_records` reports.
                ends = [min(start + size, len(window)) for start, size in zip(starts, sizes, strict=True)]
                position = positions[-1]
                rows = records.window(memoryview(window), starts, ends, batches, provenance)
                if rows.num_rows:
                    yield rows
    except OSError as exc:
        log.warning("cannot read %s: %s", segment.location, exc)
        error = dict(provenance, position=position, decode_error=f"cannot read the file: {exc}")
        yield pa.RecordBatch.from_pylist([error], schema=records.schema)
