"""Records of the coordinator topics: `__transaction_state` and the transactional offset commits of
`__consumer_offsets`, decoded into the `transaction_log` and `offset_commits` tables (spec §5.1).

The key and value decoders are pure functions over bytes with a small reader for Kafka's primitive types, so
tests run them without Spark and executors run them inside `mapInArrow`. They never raise on bad bytes: an
unknown version, a short buffer or a length running past the end becomes `decode_error`, naming the byte
position in the key or value, and every length is checked against the bytes that are there before anything
is read or sized from it.

The Spark reader walks the segments of those topics like `segments.read_segments` (same byte-range split,
same entry walk from `kafka_format`) and reads the records of the batches it keeps with
`records.iter_records`; only the batches that can hold such records are read again from the file.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterator
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
from pipeline.sources.records.api import RecordError, iter_records
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

_KeyValueDecoder = Callable[[bytes | None, bytes | None], dict[str, Any]]


def transaction_log_rows(entry: bytes, batch: dict[str, Any]) -> list[dict[str, Any]]:
    """`transaction_log` columns of the records of one batch entry (whole entry, header included).

    `batch` holds the header fields of the entry (`kafka_format.DECODED_SCHEMA` names). A batch whose records
    Kafka's reader would reject gives one row whose `decode_error` says why.
    """
    fields = {
        "batch_base_offset": batch["base_offset"],
        "batch_timestamp": batch["max_timestamp"],
        "partition_leader_epoch": batch["partition_leader_epoch"],
        "batch_is_transactional": batch["is_transactional"],
        "batch_compression": batch["compression"],
        "batch_producer_id": batch["producer_id"],
        "position": batch["position"],
    }
    return _record_rows(entry, batch, fields, decode_transaction_log, with_timestamp=True)


def offset_commit_rows(entry: bytes, batch: dict[str, Any]) -> list[dict[str, Any]]:
    """`offset_commits` columns of the records of one transactional batch entry, group metadata included
    (key version 2) so the caller can count what it drops."""
    fields = {
        "batch_base_offset": batch["base_offset"],
        "producer_id": batch["producer_id"],
        "producer_epoch": batch["producer_epoch"],
        "position": batch["position"],
    }
    return _record_rows(entry, batch, fields, decode_offset_commit, with_timestamp=False)


def _record_rows(
    entry: bytes, batch: dict[str, Any], fields: dict[str, Any], decode: _KeyValueDecoder, with_timestamp: bool
) -> list[dict[str, Any]]:
    rows = []
    try:
        for record in iter_records(entry):
            row = dict(fields, record_offset=_int64(batch["base_offset"] + record.offset_delta))
            if with_timestamp:
                row["record_timestamp"] = _record_timestamp(batch, record.timestamp_delta)
            row.update(decode(record.key, record.value))
            rows.append(row)
    except RecordError as exc:
        rows.append(dict(fields, decode_error=f"records unreadable at byte {exc.position} of the batch: {exc.reason}"))
    return rows


def _record_timestamp(batch: dict[str, Any], timestamp_delta: int) -> int | None:
    """`DefaultRecord.timestamp`: in a LogAppendTime batch every record has the batch's max timestamp."""
    if batch["timestamp_type"] == LOG_APPEND_TIME:
        return batch["max_timestamp"]
    return _int64(batch["base_timestamp"] + timestamp_delta)


def _int64(value: int) -> int | None:
    """Offsets and timestamps computed from file values; a sum that leaves int64 has no meaning."""
    return value if _INT64_MIN <= value <= _INT64_MAX else None


# --- Spark ----------------------------------------------------------------------------------------------

_RowsOfEntry = Callable[[bytes, dict[str, Any]], list[dict[str, Any]]]
# topic -> (table schema, rows of a batch entry, whether only transactional data batches hold its records)
_TOPIC_READERS: dict[str, tuple[T.StructType, _RowsOfEntry, bool]] = {
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
    for topic, (schema, rows_of_entry, transactional_only) in _TOPIC_READERS.items():
        of_topic = [segment for segment in segments if segment.topic == topic]
        if not of_topic:
            passes.append(None)
            continue
        # Dealt to tasks by size like the batches decode: a few coordinator partitions often hold most records.
        rows, ranges, tasks = segment_ranges(spark, of_topic, settings.ingest.segment_split_bytes)
        log.info(
            "decoding the %s records of %d segment files as %d byte ranges in %d tasks",
            topic,
            len(of_topic),
            ranges,
            tasks,
        )
        decode = partial(_decode_descriptors, rows_of_entry, transactional_only, to_arrow_schema(schema))
        passes.append(ArrowPass(spark.createDataFrame(rows, SEGMENT_DESCRIPTOR), shipped(spark, decode), schema))
    transaction_log, offset_commit_records = passes
    return transaction_log, offset_commit_records


def _decode_descriptors(
    rows_of_entry: _RowsOfEntry,
    transactional_only: bool,
    schema: pa.Schema,
    descriptor_batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """Executor side: segment byte ranges in, table rows out, one Arrow batch per decoded window."""
    for descriptors in descriptor_batches:
        for descriptor in descriptors.to_pylist():
            segment = SegmentFile(**descriptor)
            for rows in range_rows(segment, rows_of_entry, transactional_only):
                yield pa.RecordBatch.from_pylist(rows, schema=schema)


def range_rows(
    segment: SegmentFile, rows_of_entry: _RowsOfEntry, transactional_only: bool
) -> Iterator[list[dict[str, Any]]]:
    """Executor side of one byte range: rows of the batches that start in it, with provenance, per decoded window.

    Entries the broker cannot iterate (and legacy or control batches) hold no such records; `batches` reports
    them. An I/O error ends the range with one row whose `decode_error` says so.
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
            # Records are walked by `iter_records` below, only for the batches kept.
            for table in iter_decoded(walk.read, file_size, start=first, end=segment.end, verify_records=False):
                kept = pc.and_(pc.equal(table["entry_status"], STATUS_OK), pc.invert(table["is_control"]))
                if transactional_only:
                    kept = pc.and_(kept, table["is_transactional"])
                rows = []
                for batch in table.filter(kept).select(list(_BATCH_FIELDS)).to_pylist():
                    position = batch["position"]
                    entry = entries.read_at(batch["size_bytes"], position)
                    rows.extend(dict(provenance, **row) for row in rows_of_entry(entry, batch))
                if rows:
                    yield rows
    except OSError as exc:
        log.warning("cannot read %s: %s", segment.location, exc)
        yield [dict(provenance, position=position, decode_error=f"cannot read the file: {exc}")]
