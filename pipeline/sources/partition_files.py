"""The files beside a partition's segments: decoders, sanity checks, and their Spark reader.

Covers `.txnindex` (spec §1.3), producer-state `.snapshot` (§1.4), `.index`/`.timeindex`, and the text files
`leader-epoch-checkpoint`, `partition.metadata` and the log-dir offset checkpoints (§1.2). The decoders are
pure Python and never raise on bad content: they turn what the broker would reject into rows and problems,
so the rules of §6.1 and §6.6 are filters. Lengths read from a file are compared with the file's size and
never used to allocate, and the binary files are read and decoded ROWS_PER_BATCH entries at a time.

As for segments, the driver only lists the log roots; every file is read and decoded on the executors
inside `mapInArrow`. A file that cannot be read gives an 'unreadable' row (`.txnindex`, `.snapshot`) or a
problem row naming the I/O error, instead of failing the job.
"""

from __future__ import annotations

import base64
import bisect
import logging
import math
import re
import struct
import sys
from array import array
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import astuple, dataclass
from functools import lru_cache, partial, reduce
from itertools import islice
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
from crc32c import crc32c
from pyarrow import fs as pafs
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.config import IngestSettings, Settings
from pipeline.sources.dumplog import SOURCE_FORMAT as DUMPLOG_FORMAT
from pipeline.sources.filesystems import resolve, shipped
from pipeline.sources.kafka_format import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V0,
)
from pipeline.sources.segments import META_PROPERTIES, PARTITION_DIR, RootListing, list_root
from pipeline.sources.segments import SOURCE_FORMAT as SEGMENT_FORMAT
from schemas.checkpoints import CHECKPOINT_KINDS, CHECKPOINTS
from schemas.file_problems import (
    FILE_PROBLEMS,
    PROBLEM_FILE_NAME,
    PROBLEM_LEADER_EPOCH_CHECKPOINT,
    PROBLEM_OFFSET_INDEX,
    PROBLEM_PARTITION_METADATA,
    PROBLEM_TIME_INDEX,
)
from schemas.leader_epochs import LEADER_EPOCHS
from schemas.partition_metadata import PARTITION_METADATA
from schemas.producer_snapshots import PRODUCER_SNAPSHOTS
from schemas.txn_index import TXN_INDEX

log = logging.getLogger(__name__)


STATUS_OK = "ok"
STATUS_TRUNCATED = "truncated"
STATUS_UNREADABLE = "unreadable"
SNAPSHOT_BAD_VERSION = "bad_version"
SNAPSHOT_TRAILING_BYTES = "trailing_bytes"
SNAPSHOT_CRC_MISMATCH = "crc_mismatch"

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"
TXN_INDEX_SUFFIX = "txnindex"
SNAPSHOT_SUFFIX = "snapshot"
OFFSET_INDEX_SUFFIX = "index"
TIME_INDEX_SUFFIX = "timeindex"
_SEGMENT_SUFFIXES = ("log", OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX)
_SEGMENT_FAMILY = re.compile(rf"^(?P<offset>\d{{20}})\.(?P<suffix>{'|'.join(_SEGMENT_SUFFIXES)})$")
_LEFTOVER = re.compile(rf"^\d+\.(?:{'|'.join(_SEGMENT_SUFFIXES)})\.(?P<suffix>deleted|cleaned|swap)$")
_LEFTOVER_MEANING = {
    "deleted": "renamed for asynchronous deletion and not removed yet",
    "cleaned": "output of a log-cleaner pass that did not finish; the broker deletes it at startup",
    "swap": "a segment replacement (compaction or split) that did not finish; the broker completes it at startup",
}
_OFFSET_NAMED = re.compile(r"^\d+\.")
_LOG_DIR_FILES = {META_PROPERTIES, ".kafka_cleanshutdown", "bootstrap.checkpoint", *CHECKPOINT_KINDS}
_INT64_MAX = 2**63 - 1
FILES_PER_TASK = 64  # these files are small: a Spark task costs more than reading one
# Checkpoints and partition.metadata hold a line per epoch or partition: a few KiB, a few MiB for a log dir of
# 100,000 partitions. A larger file is no such file, and reading it whole could exhaust a worker's memory.
TEXT_FILE_MAX_BYTES = 64 * 1024 * 1024
# The binary files are fixed-size entries, read and decoded this many at a time: a foreign file of any size costs
# one chunk and one record batch besides the rows already handed to Spark.
ROWS_PER_BATCH = 16 * 1024
LOOKUP_CHUNKS = 16  # chunks of a `.index` kept to look up a `.timeindex`'s entries: 2 MiB of their columns

TXN_INDEX_ENTRY = struct.Struct(">hqqqq")  # version, producerId, firstOffset, lastOffset, lastStableOffset
SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, CRC-32C of bytes [6, EOF), entry count
SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
SNAPSHOT_VERSION = 1
SNAPSHOT_CRC_START = 6
NO_OPEN_TRANSACTION = -1
OFFSET_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, position in the .log
TIME_INDEX_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
_VERSION = struct.Struct(">h")
_VERSION_AND_CRC = struct.Struct(">hI")
_OFFSET_AND_SIZE = struct.Struct(">qi")
_V2_LAST_DELTA_AND_MAX_TIMESTAMP = struct.Struct(">i8xq")  # at byte 23: lastOffsetDelta, firstTimestamp, max
_V2_LAST_DELTA_AT = 23
_V1_TIMESTAMP = struct.Struct(">q")
_V1_TIMESTAMP_AT = 18

_SNAPSHOT_ENTRY_FIELDS = (
    "producer_id",
    "producer_epoch",
    "last_sequence",
    "last_offset",
    "offset_delta",
    "timestamp",
    "coordinator_epoch",
    "current_txn_first_offset",
)
_TXN_INDEX_ENTRY_FIELDS = ("version", "producer_id", "first_offset", "last_offset", "last_stable_offset")
_TXN_INDEX_DTYPE = np.dtype(list(zip(_TXN_INDEX_ENTRY_FIELDS, (">i2", ">i8", ">i8", ">i8", ">i8"), strict=True)))
_SNAPSHOT_DTYPE = np.dtype(
    list(zip(_SNAPSHOT_ENTRY_FIELDS, (">i8", ">i2", ">i4", ">i8", ">i4", ">i8", ">i4", ">i8"), strict=True))
)
_TXN_INDEX_ENTRY_SCHEMA = pa.schema(
    [to_arrow_schema(TXN_INDEX).field(name) for name in (*_TXN_INDEX_ENTRY_FIELDS, "entry_status", "position")]
)
_SNAPSHOT_ENTRY_SCHEMA = pa.schema(
    [
        to_arrow_schema(PRODUCER_SNAPSHOTS).field(name)
        for name in (*_SNAPSHOT_ENTRY_FIELDS, "version", "crc_valid", "file_status", "file_note")
    ]
)

FILE_DESCRIPTOR = T.StructType(
    [
        T.StructField("location", T.StringType(), False),
        T.StructField("kind", T.StringType(), False),
        T.StructField("topic", T.StringType(), True),
        T.StructField("partition", T.IntegerType(), True),
        T.StructField("broker_id", T.IntegerType(), True),
        T.StructField("base_offset", T.LongType(), True),
        T.StructField("size", T.LongType(), False),
        T.StructField("log_location", T.StringType(), True),
        T.StructField("offset_index_location", T.StringType(), True),
    ]
)


@dataclass(frozen=True)
class FileDescriptor:
    """One file to decode on an executor; locations are local paths or URIs opened as they are."""

    location: str
    kind: str  # a segment-family suffix, or the name of a text file
    topic: str | None  # None for a log-dir checkpoint, whose entries name their partitions
    partition: int | None
    broker_id: int | None
    base_offset: int | None  # from a `<20 digits>.<suffix>` name
    size: int
    log_location: str | None = None  # `.index`/`.timeindex`: the segment they index, if it exists
    offset_index_location: str | None = None  # `.timeindex`: the segment's `.index`, to start lookups from


@dataclass(frozen=True)
class PartitionFileDiscovery:
    files: list[FileDescriptor]
    naming_problems: list[dict[str, Any]]  # FILE_PROBLEMS rows (SEG-001)


@dataclass(frozen=True)
class PartitionFiles:
    """The tables read from the files beside the segments; each DataFrame is lazy."""

    txn_index: DataFrame
    producer_snapshots: DataFrame
    leader_epochs: DataFrame
    checkpoints: DataFrame
    partition_metadata: DataFrame
    file_problems: DataFrame


class FormatProblem(NamedTuple):
    """What the broker would reject in a text file; `line` is 1-based, None for the file as a whole."""

    line: int | None
    message: str


class IndexProblem(NamedTuple):
    """An SEG-004/SEG-005 finding at byte `position` of the index file."""

    position: int
    message: str


ByteReader = Callable[[int, int], bytes]
"""(position, length) -> up to `length` bytes of a file from `position`; fewer at its end."""
LogReader = ByteReader

_Decoder = Callable[[FileDescriptor, pa.Schema], Iterator[pa.RecordBatch]]


# --- binary decoders ---------------------------------------------------------------------------------


def decode_txn_index(data: bytes) -> list[dict[str, Any]]:
    """Rows (TXN_INDEX names, without provenance) of a `.txnindex` held in memory; see `_txn_index_batches`."""
    return [row for batch in _txn_index_batches(partial(_slice, data), len(data)) for row in batch.to_pylist()]


def decode_producer_snapshot(data: bytes) -> list[dict[str, Any]]:
    """Rows (PRODUCER_SNAPSHOTS names, without provenance) of a snapshot held in memory; see `_snapshot_batches`."""
    return [row for batch in _snapshot_batches(partial(_slice, data), len(data)) for row in batch.to_pylist()]


def _txn_index_batches(read_at: ByteReader, size: int) -> Iterator[pa.RecordBatch]:
    """Record batches of at most ROWS_PER_BATCH rows of a `.txnindex`: one per 34-byte entry, in file order.

    Bytes after the last whole entry give one 'truncated' row. `version` is the int16 as written (0 in every
    entry a broker writes), although the broker reads back only its first byte.
    """
    whole = size - size % TXN_INDEX_ENTRY.size
    for position, chunk in _chunks(read_at, 0, whole, TXN_INDEX_ENTRY.size):
        entries = np.frombuffer(chunk, _TXN_INDEX_DTYPE)
        columns = {name: pa.array(_native(entries[name])) for name in entries.dtype.names}
        columns["entry_status"] = pa.repeat(pa.scalar(STATUS_OK), len(entries))
        columns["position"] = pa.array(np.arange(len(entries), dtype=np.int64) * TXN_INDEX_ENTRY.size + position)
        yield _entry_batch(columns, _TXN_INDEX_ENTRY_SCHEMA)
    if whole < size:
        row = {**dict.fromkeys(_TXN_INDEX_ENTRY_FIELDS), "entry_status": STATUS_TRUNCATED, "position": whole}
        yield pa.RecordBatch.from_pylist([row], schema=_TXN_INDEX_ENTRY_SCHEMA)


def _snapshot_batches(read_at: ByteReader, size: int) -> Iterator[pa.RecordBatch]:
    """Record batches of at most ROWS_PER_BATCH rows of a producer-state snapshot.

    One 'ok' row per entry, or one row with null producer fields for a snapshot without entries or a file
    the broker would reject (the status conventions are in schemas/producer_snapshots.py). Checks follow
    the broker's order (version, entry array, CRC); trailing bytes, which the broker only notices through the
    CRC, come before it, so a structural fault names the status even when the CRC fails too. The CRC covers
    the whole file: a first pass computes it a chunk at a time, a second decodes the entries.
    """
    header = read_at(0, SNAPSHOT_HEADER.size)
    version = _VERSION.unpack_from(header)[0] if size >= _VERSION.size else None
    crc_valid = stored_crc = computed_crc = None
    if size >= SNAPSHOT_CRC_START:
        stored_crc = _VERSION_AND_CRC.unpack_from(header)[1]
        computed_crc = 0
        for _, chunk in _chunks(read_at, SNAPSHOT_CRC_START, size, SNAPSHOT_ENTRY.size):
            computed_crc = crc32c(chunk, computed_crc)
        crc_valid = stored_crc == computed_crc

    def file_row(status: str, note: str | None) -> pa.RecordBatch:
        row = dict.fromkeys(_SNAPSHOT_ENTRY_FIELDS)
        row.update(version=version, crc_valid=crc_valid, file_status=status, file_note=note)
        return pa.RecordBatch.from_pylist([row], schema=_SNAPSHOT_ENTRY_SCHEMA)

    if version is not None and version != SNAPSHOT_VERSION:
        yield file_row(SNAPSHOT_BAD_VERSION, f"version {version}; only version {SNAPSHOT_VERSION} exists")
        return
    if size < SNAPSHOT_HEADER.size:
        yield file_row(STATUS_TRUNCATED, f"{size} bytes, shorter than the {SNAPSHOT_HEADER.size}-byte header")
        return
    count = SNAPSHOT_HEADER.unpack_from(header)[2]
    if count < 0:
        yield file_row(STATUS_TRUNCATED, f"negative entry count {count}")
        return
    end = SNAPSHOT_HEADER.size + count * SNAPSHOT_ENTRY.size
    if size < end:
        yield file_row(STATUS_TRUNCATED, f"{count} entries need {end} bytes, the file has {size}")
        return
    if size > end:
        yield file_row(SNAPSHOT_TRAILING_BYTES, f"{size - end} bytes after the {count} entries")
        return
    if not crc_valid:
        note = f"stored CRC-32C {stored_crc:#010x}, computed {computed_crc:#010x} over bytes [6, {size})"
        yield file_row(SNAPSHOT_CRC_MISMATCH, note)
        return
    if count == 0:
        yield file_row(STATUS_OK, None)
        return
    for _, chunk in _chunks(read_at, SNAPSHOT_HEADER.size, end, SNAPSHOT_ENTRY.size):
        entries = np.frombuffer(chunk, _SNAPSHOT_DTYPE)
        columns = {name: pa.array(_native(entries[name])) for name in entries.dtype.names}
        open_txn = _native(entries["current_txn_first_offset"])
        columns["current_txn_first_offset"] = pa.array(open_txn, mask=open_txn == NO_OPEN_TRANSACTION)
        columns["version"] = pa.repeat(pa.scalar(version, pa.int32()), len(entries))
        columns["crc_valid"] = pa.repeat(pa.scalar(True), len(entries))
        columns["file_status"] = pa.repeat(pa.scalar(STATUS_OK), len(entries))
        columns["file_note"] = pa.nulls(len(entries), pa.string())
        yield _entry_batch(columns, _SNAPSHOT_ENTRY_SCHEMA)


def _chunks(read_at: ByteReader, start: int, end: int, entry_size: int) -> Iterator[tuple[int, bytes]]:
    """(position, bytes) of [start, end) in reads of ROWS_PER_BATCH entries; a file that shrinks while it is
    read is an I/O error."""
    step = ROWS_PER_BATCH * entry_size
    for position in range(start, end, step):
        chunk = read_at(position, min(step, end - position))
        if len(chunk) < min(step, end - position):
            raise OSError(f"the file ends at byte {position + len(chunk)}, before byte {end}: it shrank while read")
        yield position, chunk


def _native(column: np.ndarray) -> np.ndarray:
    """A big-endian column in the machine's byte order, which Arrow requires."""
    return column.astype(column.dtype.newbyteorder("="))


def _entry_batch(columns: dict[str, pa.Array], schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [columns[name].cast(schema.field(name).type) for name in schema.names], schema=schema
    )


def _slice(data: bytes, position: int, length: int) -> bytes:
    return data[position : position + length]


# --- index sanity (SEG-004, SEG-005) -----------------------------------------------------------------


class _NoBatch(ValueError):
    """No batch header can be read where an index points; the message says why."""


class _BatchHeader(NamedTuple):
    last_offset: int
    max_timestamp: int | None  # None for magic 0, which has no timestamps
    next_position: int


def check_offset_index(data: bytes, base_offset: int, read_log: LogReader | None) -> list[IndexProblem]:
    """SEG-004 problems of a `.index` held in memory; see `_offset_index_problems`."""
    return list(_offset_index_problems(partial(_slice, data), len(data), base_offset, read_log))


def check_time_index(
    data: bytes, base_offset: int, offset_index: bytes, read_log: LogReader | None
) -> list[IndexProblem]:
    """SEG-005 problems of a `.timeindex` and its `.index` held in memory; see `_time_index_problems`."""
    lookup = _OffsetLookup(partial(_slice, offset_index), len(offset_index))
    return list(_time_index_problems(partial(_slice, data), len(data), base_offset, lookup, read_log))


def _offset_index_problems(
    read_index: ByteReader, size: int, base_offset: int, read_log: LogReader | None
) -> Iterator[IndexProblem]:
    """SEG-004 problems of a `.index`: its size, its order, and whether each entry's position starts a batch
    whose last offset is the entry's offset (one header read per entry)."""
    yield from _size_problems(size, OFFSET_INDEX_ENTRY.size)
    previous = None
    for file_position, (relative, position) in _index_entries(read_index, size, OFFSET_INDEX_ENTRY, relative_field=0):
        if file_position == 0 and read_log is None:
            yield IndexProblem(0, "no .log segment beside it to check its entries against")
        if previous is not None and relative <= previous:
            yield IndexProblem(file_position, f"relative offset {relative} does not follow {previous}")
        previous = relative
        if read_log is None:
            continue
        offset = base_offset + relative
        try:
            header = _batch_at(read_log, position)
        except _NoBatch as exc:
            yield IndexProblem(file_position, f"entry for offset {offset}: {exc}")
            continue
        if header.last_offset != offset:
            yield IndexProblem(
                file_position,
                f"entry for offset {offset} points at byte {position}, "
                f"where the batch ends at offset {header.last_offset}",
            )


def _time_index_problems(
    read_index: ByteReader, size: int, base_offset: int, lookup: _OffsetLookup, read_log: LogReader | None
) -> Iterator[IndexProblem]:
    """SEG-005 problems of a `.timeindex`: its size, its order, and whether a batch ends at each entry's
    offset with the entry's timestamp as its max timestamp (magic 1 and 2; magic 0 has none).

    The batch is found like DumpLogSegments does: from the `.index` position at or below the offset, walking
    batch headers forward; a walk resumes where the previous entry's ended, so each header is read about once.
    """
    yield from _size_problems(size, TIME_INDEX_ENTRY.size)
    previous: tuple[int, int] | None = None
    resume: tuple[int, int] | None = None  # (position, last offset) of the batch the previous entry found
    for file_position, (timestamp, relative) in _index_entries(read_index, size, TIME_INDEX_ENTRY, relative_field=1):
        if file_position == 0 and read_log is None:
            yield IndexProblem(0, "no .log segment beside it to check its entries against")
        if previous is not None:
            if timestamp <= previous[0]:
                yield IndexProblem(file_position, f"timestamp {timestamp} does not follow {previous[0]}")
            if relative < previous[1]:
                yield IndexProblem(file_position, f"relative offset {relative} is below {previous[1]}")
        previous = (timestamp, relative)
        if read_log is None:
            continue
        offset = base_offset + relative
        start = lookup.start_for(relative)
        if resume is not None and resume[0] >= start and resume[1] <= offset:
            start = resume[0]
        try:
            position, header = _find_batch(read_log, start, offset)
        except _NoBatch as exc:
            yield IndexProblem(file_position, f"entry for offset {offset}: {exc}")
            continue
        resume = (position, header.last_offset)
        if header.last_offset != offset:
            yield IndexProblem(
                file_position,
                f"entry for offset {offset}: no batch ends there (the batch at byte {position} "
                f"ends at offset {header.last_offset})",
            )
        elif header.max_timestamp is not None and header.max_timestamp != timestamp:
            yield IndexProblem(
                file_position,
                f"entry for offset {offset}: timestamp {timestamp}, "
                f"but the batch's max timestamp is {header.max_timestamp}",
            )


class _OffsetLookup:
    """The in-use entries of a `.index`, read a chunk at a time to find where a `.timeindex` entry's walk starts:
    a check holds LOOKUP_CHUNKS chunks and the first offset of each, whatever the file's size."""

    def __init__(self, read_at: ByteReader, size: int) -> None:
        self._read_at = read_at
        self._length = 0
        self._chunk_firsts: list[int] = []
        self._ascending = True
        previous = None
        for _, (relative, _) in _index_entries(read_at, size, OFFSET_INDEX_ENTRY, relative_field=0):
            if self._length % ROWS_PER_BATCH == 0:
                self._chunk_firsts.append(relative)
            self._ascending = self._ascending and (previous is None or relative >= previous)
            previous = relative
            self._length += 1
        self._chunk = lru_cache(maxsize=LOOKUP_CHUNKS)(self._read_chunk)

    def start_for(self, relative: int) -> int:
        """The position of the last entry at or below `relative` by bisection, 0 if there is none.

        An ascending index is bisected on its chunks' first offsets, then within one chunk. An index out of
        order gives the result of bisecting the whole list entry by entry, which depends on where it probes.
        """
        if self._ascending:
            chunk = max(bisect.bisect_right(self._chunk_firsts, relative) - 1, 0)
            offsets, positions = self._chunk(chunk)
            slot = bisect.bisect_right(offsets, relative) - 1
            return positions[slot] if slot >= 0 else 0
        slot = bisect.bisect_right(self, relative, key=itemgetter(0)) - 1
        return self[slot][1] if slot >= 0 else 0

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, number: int) -> tuple[int, int]:
        offsets, positions = self._chunk(number // ROWS_PER_BATCH)
        return offsets[number % ROWS_PER_BATCH], positions[number % ROWS_PER_BATCH]

    def _read_chunk(self, chunk: int) -> tuple[array, array]:
        """(relative offsets, positions) of the in-use entries of one chunk."""
        first = chunk * ROWS_PER_BATCH
        count = min(ROWS_PER_BATCH, self._length - first)
        start, end = first * OFFSET_INDEX_ENTRY.size, (first + count) * OFFSET_INDEX_ENTRY.size
        entries = array("i", b"".join(data for _, data in _chunks(self._read_at, start, end, OFFSET_INDEX_ENTRY.size)))
        if sys.byteorder == "little":
            entries.byteswap()
        return entries[0::2], entries[1::2]


def _size_problems(size: int, entry_size: int) -> list[IndexProblem]:
    extra = size % entry_size
    if not extra:
        return []
    whole = size - extra
    return [IndexProblem(whole, f"size {size} is not a multiple of {entry_size}: {extra} bytes after the entries")]


def _index_entries(
    read_at: ByteReader, size: int, entry: struct.Struct, relative_field: int
) -> Iterator[tuple[int, tuple[int, ...]]]:
    """(byte position, fields) of the entries in use, read a chunk at a time: a preallocated index ends at its
    first zero entry after entry 0, one whose relative offset is 0 (DumpLogSegments stops there too)."""
    whole = size - size % entry.size
    for chunk_position, chunk in _chunks(read_at, 0, whole, entry.size):
        for number, fields in enumerate(entry.iter_unpack(chunk)):
            position = chunk_position + number * entry.size
            if position > 0 and fields[relative_field] == 0:
                return
            yield position, fields


def _batch_at(read_log: LogReader, position: int) -> _BatchHeader:
    """The header fields of the log entry at `position`, from one read of at most 61 bytes."""
    if position < 0:
        raise _NoBatch(f"negative position {position}")
    header = read_log(position, RECORD_BATCH_OVERHEAD)
    if len(header) < HEADER_SIZE_UP_TO_MAGIC:
        raise _NoBatch(f"the log has no entry header at byte {position}")
    base_offset, size = _OFFSET_AND_SIZE.unpack_from(header)
    if size < RECORD_OVERHEAD_V0:
        raise _NoBatch(f"the entry at byte {position} has size {size}, below the minimum {RECORD_OVERHEAD_V0}")
    next_position = position + LOG_OVERHEAD + size
    magic = header[HEADER_SIZE_UP_TO_MAGIC - 1]
    if magic == 2:
        if len(header) < _V2_LAST_DELTA_AT + _V2_LAST_DELTA_AND_MAX_TIMESTAMP.size:
            raise _NoBatch(f"the batch header at byte {position} is cut off by the end of the log")
        last_offset_delta, max_timestamp = _V2_LAST_DELTA_AND_MAX_TIMESTAMP.unpack_from(header, _V2_LAST_DELTA_AT)
        return _BatchHeader(base_offset + last_offset_delta, max_timestamp, next_position)
    if magic == 1:
        if len(header) < _V1_TIMESTAMP_AT + _V1_TIMESTAMP.size:
            raise _NoBatch(f"the message header at byte {position} is cut off by the end of the log")
        return _BatchHeader(base_offset, _V1_TIMESTAMP.unpack_from(header, _V1_TIMESTAMP_AT)[0], next_position)
    if magic == 0:
        return _BatchHeader(base_offset, None, next_position)
    raise _NoBatch(f"the entry at byte {position} has magic {magic}")


def _find_batch(read_log: LogReader, start: int, offset: int) -> tuple[int, _BatchHeader]:
    """The first batch from `start` on whose last offset reaches `offset`; positions only move forward."""
    position = start
    while True:
        header = _batch_at(read_log, position)
        if header.last_offset >= offset:
            return position, header
        position = header.next_position


# --- text files ----------------------------------------------------------------------------------------

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_JAVA_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_MAX_INT64_DIGITS = len(str(2**63))
_BASE64_UUID = re.compile(r"[A-Za-z0-9_-]{22}(?:==)?")
_ZERO_UUID = bytes(16)


def decode_leader_epoch_checkpoint(text: str) -> tuple[list[dict[str, Any]], list[FormatProblem]]:
    """Entries (`epoch`, `start_offset`, `line`) of a `leader-epoch-checkpoint`, and its LEP-001 problems.

    The file is read as the broker's CheckpointReadBuffer reads it: version `0`, entry count, then one
    `<leader epoch> <start offset>` line per entry. An empty file has no entries and no problem.
    """
    return _decode_checkpoint(text, _epoch_entry, "<leader epoch> <start offset>")


def decode_offset_checkpoint(text: str) -> tuple[list[dict[str, Any]], list[FormatProblem]]:
    """Entries (`topic`, `partition`, `offset`, `line`) of a log-dir offset checkpoint, and its problems.

    Same layout as `decode_leader_epoch_checkpoint`, with `<topic> <partition> <offset>` lines.
    """
    return _decode_checkpoint(text, _offset_entry, "<topic> <partition> <offset>")


def decode_partition_metadata(text: str) -> tuple[dict[str, Any], list[FormatProblem]]:
    """`version` and `topic_id` of a `partition.metadata`, as far as they can be read, and its SEG-006 problem.

    Read as PartitionMetadataReadBuffer does (`version: 0`, then `topic_id: <base64 UUID>`, not the zero
    UUID); unlike the broker, the two key names are checked too. The broker stops at the first problem, so
    there is at most one.
    """
    row: dict[str, Any] = {"version": None, "topic_id": None}
    lines = _lines(text)
    if not lines:
        return row, [FormatProblem(None, "the file is empty")]
    fields = _fields(lines[0])
    version = _parse_int(fields[1], 32) if len(fields) == 2 and fields[0] == "version:" else None
    if version is None:
        return row, [FormatProblem(1, f"line 1: {lines[0]!r} is not 'version: <number>'")]
    row["version"] = version
    if version != 0:
        return row, [FormatProblem(1, f"line 1: version {version}, expected 0")]
    if len(lines) < 2:
        return row, [FormatProblem(2, "line 2: missing, expected 'topic_id: <uuid>'")]
    fields = _fields(lines[1])
    if len(fields) != 2 or fields[0] != "topic_id:":
        return row, [FormatProblem(2, f"line 2: {lines[1]!r} is not 'topic_id: <uuid>'")]
    if not _BASE64_UUID.fullmatch(fields[1]):
        return row, [FormatProblem(2, f"line 2: {fields[1]!r} is not a URL-safe base64 UUID")]
    row["topic_id"] = fields[1]
    if base64.urlsafe_b64decode(fields[1][:22] + "==") == _ZERO_UUID:
        return row, [FormatProblem(2, "line 2: the zero UUID is not a valid topic id")]
    return row, []


def _decode_checkpoint(
    text: str, entry_of: Callable[[list[str]], dict[str, Any] | None], entry_format: str
) -> tuple[list[dict[str, Any]], list[FormatProblem]]:
    rows: list[dict[str, Any]] = []
    problems: list[FormatProblem] = []
    lines = _lines(text)
    if lines and _parse_int(lines[0], 32) != 0:
        problems.append(FormatProblem(1, f"line 1: version {lines[0]!r}, expected 0"))
    if len(lines) < 2:
        return rows, problems  # the broker reads no entries from a file that ends before its count
    count = _parse_int(lines[1], 32)
    if count is None or count < 0:
        problems.append(FormatProblem(2, f"line 2: entry count {lines[1]!r} is not a non-negative integer"))
    for number, line in enumerate(lines[2:], start=3):
        entry = entry_of(_fields(line))
        if entry is None:
            problems.append(FormatProblem(number, f"line {number}: {line!r} is not '{entry_format}'"))
        else:
            rows.append({**entry, "line": number})
    if count is not None and count >= 0 and count != len(lines) - 2:
        problems.append(FormatProblem(2, f"line 2: the count says {count} entries, {len(lines) - 2} lines follow"))
    return rows, problems


def _epoch_entry(fields: list[str]) -> dict[str, Any] | None:
    if len(fields) != 2:
        return None
    epoch, start_offset = _parse_int(fields[0], 32), _parse_int(fields[1], 64)
    if epoch is None or start_offset is None:
        return None
    return {"epoch": epoch, "start_offset": start_offset}


def _offset_entry(fields: list[str]) -> dict[str, Any] | None:
    if len(fields) != 3:
        return None
    partition, offset = _parse_int(fields[1], 32), _parse_int(fields[2], 64)
    if partition is None or offset is None:
        return None
    return {"topic": fields[0], "partition": partition, "offset": offset}


def _lines(text: str) -> list[str]:
    """Lines as Java's BufferedReader.readLine returns them: a final line break does not open another line."""
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def _fields(line: str) -> list[str]:
    """Java's `line.split("\\\\s+")`: a leading empty field is kept (and makes the line malformed)."""
    fields = _JAVA_WHITESPACE.split(line)
    while fields and fields[-1] == "":
        fields.pop()
    return fields


def _parse_int(text: str, bits: int) -> int | None:
    """Java's Integer/Long.parseInt: optional sign, ASCII digits, in range; None where Java would throw.

    Leading zeros are dropped first: Java accepts any number of them, and Python's int() refuses more than
    4300 digits, so a long run of digits is out of range before it is converted.
    """
    if not _JAVA_INT.fullmatch(text):
        return None
    digits = text.lstrip("+-").lstrip("0")
    if len(digits) > _MAX_INT64_DIGITS:
        return None
    value = int(digits or "0") * (-1 if text.startswith("-") else 1)
    limit = 1 << (bits - 1)
    return value if -limit <= value < limit else None


# --- discovery (driver) --------------------------------------------------------------------------------


def naming_problem(name: str) -> str | None:
    """Why a file name in a partition dir breaks SEG-001, or None. Only names that look like segment, index
    or snapshot files are judged; other files (`.gitkeep`, KRaft `quorum-state`, ...) are not the log's."""
    leftover = _LEFTOVER.match(name)
    if leftover:
        return f"leftover .{leftover['suffix']} file: {_LEFTOVER_MEANING[leftover['suffix']]}"
    family = _SEGMENT_FAMILY.match(name)
    if family:
        return None if int(family["offset"]) <= _INT64_MAX else "the offset in the name exceeds the int64 range"
    if _OFFSET_NAMED.match(name) or name.endswith(tuple(f".{suffix}" for suffix in _SEGMENT_SUFFIXES)):
        return f"not a 20-digit zero-padded offset with one of the suffixes .{', .'.join(_SEGMENT_SUFFIXES)}"
    return None


def discover_partition_files(roots: list[str], ingest: IngestSettings) -> PartitionFileDiscovery:
    """The files to decode under each root, and SEG-001 naming problems, on the driver without reading files.

    Roots are what `read_segments` takes. A directory named `<topic>-<partition>` is a partition dir unless it
    holds a log-dir file (`meta.properties`, an offset checkpoint, ...). Offset checkpoints are taken from
    every other directory, and from the root's parent when the root is a partition dir.
    """
    files: dict[str, FileDescriptor] = {}  # by location: partition-dir roots of one log dir share its checkpoints
    problems: dict[str, dict[str, Any]] = {}
    for root in roots:
        listing = list_root(root, ingest.skip_dir_suffixes, skipped=[])  # read_segments reports skipped dirs
        for file in _root_files(listing, problems):
            files.setdefault(file.location, file)
    return PartitionFileDiscovery(list(files.values()), list(problems.values()))


def _root_files(listing: RootListing, problems: dict[str, dict[str, Any]]) -> Iterator[FileDescriptor]:
    directories: dict[str, dict[str, int]] = {}
    for relative, size in listing.files.items():
        directory, _, name = relative.rpartition("/")
        directories.setdefault(directory, {})[name] = size
    broker_ids: dict[str, int | None] = {}

    def broker_id(log_dir: str) -> int | None:
        if log_dir not in broker_ids:
            broker_ids[log_dir] = listing.broker_id(log_dir)
        return broker_ids[log_dir]

    root_is_partition_dir = False
    for directory, names in directories.items():
        prefix = f"{directory}/" if directory else ""
        partition = PARTITION_DIR.match(directory.rpartition("/")[2] if directory else listing.base.rpartition("/")[2])
        if partition is None or not _LOG_DIR_FILES.isdisjoint(names):
            for kind in CHECKPOINT_KINDS:
                if kind in names:
                    location = listing.location_of(prefix + kind)
                    yield FileDescriptor(location, kind, None, None, broker_id(directory), None, names[kind])
            continue
        root_is_partition_dir = root_is_partition_dir or not directory
        log_dir = directory.rpartition("/")[0] if directory else ".."
        yield from _partition_dir_files(
            listing, prefix, names, partition["topic"], int(partition["partition"]), broker_id(log_dir), problems
        )
    if root_is_partition_dir:
        yield from _parent_checkpoints(listing, broker_id(".."))


def _partition_dir_files(
    listing: RootListing,
    prefix: str,
    names: dict[str, int],
    topic: str,
    partition: int,
    broker_id: int | None,
    problems: dict[str, dict[str, Any]],
) -> Iterator[FileDescriptor]:
    for name, size in names.items():
        location = listing.location_of(prefix + name)
        problem = naming_problem(name)
        if problem is not None:
            problems[location] = _problem_row(
                PROBLEM_FILE_NAME, topic, partition, location, None, f"{name}: {problem}", broker_id
            )
            continue
        if name in (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA_FILE):
            yield FileDescriptor(location, name, topic, partition, broker_id, None, size)
            continue
        family = _SEGMENT_FAMILY.match(name)
        if family is None or family["suffix"] == "log":
            continue
        offset, suffix = family["offset"], family["suffix"]
        log_name, offset_index_name = f"{offset}.log", f"{offset}.{OFFSET_INDEX_SUFFIX}"
        yield FileDescriptor(
            location,
            suffix,
            topic,
            partition,
            broker_id,
            int(offset),
            size,
            log_location=listing.location_of(prefix + log_name) if log_name in names else None,
            offset_index_location=(
                listing.location_of(prefix + offset_index_name)
                if suffix == TIME_INDEX_SUFFIX and offset_index_name in names
                else None
            ),
        )


def _parent_checkpoints(listing: RootListing, broker_id: int | None) -> Iterator[FileDescriptor]:
    """The offset checkpoints of the log dir above a partition-dir root, which the listing does not reach."""
    parent_path = listing.base.rpartition("/")[0]
    parent_location = listing.location.rstrip("/").rpartition("/")[0]
    infos = listing.filesystem.get_file_info([f"{parent_path}/{kind}" for kind in CHECKPOINT_KINDS])
    for kind, info in zip(CHECKPOINT_KINDS, infos, strict=True):
        if info.type == pafs.FileType.File:
            yield FileDescriptor(f"{parent_location}/{kind}", kind, None, None, broker_id, None, info.size)


# --- Spark reader --------------------------------------------------------------------------------------


def read_partition_files(spark: SparkSession, roots: list[str], settings: Settings) -> PartitionFiles:
    """Every `.txnindex`, `.snapshot`, `.index`/`.timeindex`, leader-epoch checkpoint, `partition.metadata` and
    log-dir offset checkpoint under `roots`, decoded on the executors into their tables.

    `file_problems` gathers what the reader saw, by kind: file names (from the listing), index entries that do
    not fit their segment, and the malformed leader-epoch checkpoints and `partition.metadata` files of the other
    tables. A missing file just contributes no rows.
    """
    discovery = discover_partition_files(roots, settings.ingest)
    by_kind: dict[str, list[FileDescriptor]] = {}
    for file in discovery.files:
        by_kind.setdefault(file.kind, []).append(file)
    log.info(
        "decoding %d files (%d bytes) beside the segments",
        len(discovery.files),
        sum(file.size for file in discovery.files),
    )

    def decoded(kinds: tuple[str, ...], decode: _Decoder, schema: T.StructType) -> DataFrame:
        files = [file for kind in kinds for file in by_kind.get(kind, [])]
        if not files:
            return spark.createDataFrame([], schema)
        # createDataFrame spreads the descriptors over the default parallelism. The files are small, so a task
        # costs more than reading one: fewer tasks for fewer files, merged without a shuffle.
        descriptors = spark.createDataFrame([astuple(file) for file in files], FILE_DESCRIPTOR)
        descriptors = descriptors.coalesce(math.ceil(len(files) / FILES_PER_TASK))
        return descriptors.mapInArrow(shipped(spark, partial(_decode_files, decode, to_arrow_schema(schema))), schema)

    leader_epochs = decoded((LEADER_EPOCH_CHECKPOINT,), partial(_all_at_once, _leader_epoch_rows), LEADER_EPOCHS)
    partition_metadata = decoded(
        (PARTITION_METADATA_FILE,), partial(_all_at_once, _partition_metadata_rows), PARTITION_METADATA
    )
    producer_snapshots = decoded((SNAPSHOT_SUFFIX,), _snapshot_batches_of, PRODUCER_SNAPSHOTS)
    naming = spark.createDataFrame(
        [tuple(row[name] for name in FILE_PROBLEMS.fieldNames()) for row in discovery.naming_problems], FILE_PROBLEMS
    )
    file_problems = reduce(
        DataFrame.unionByName,
        [
            naming,
            decoded((OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX), _index_problem_batches, FILE_PROBLEMS),
            _table_problems(
                leader_epochs.where(F.col("problem").isNotNull()),
                PROBLEM_LEADER_EPOCH_CHECKPOINT,
                F.format_string(f"{LEADER_EPOCH_CHECKPOINT}: %s", "problem"),
            ),
            _table_problems(
                partition_metadata.where(F.col("problem").isNotNull()),
                PROBLEM_PARTITION_METADATA,
                F.format_string(f"{PARTITION_METADATA_FILE}: %s", "problem"),
            ),
        ],
    )
    return PartitionFiles(
        txn_index=decoded((TXN_INDEX_SUFFIX,), _txn_index_batches_of, TXN_INDEX),
        producer_snapshots=producer_snapshots,
        leader_epochs=leader_epochs,
        checkpoints=decoded(CHECKPOINT_KINDS, partial(_all_at_once, _checkpoint_rows), CHECKPOINTS),
        partition_metadata=partition_metadata,
        file_problems=file_problems,
    )


def _table_problems(problem_rows: DataFrame, kind: str, message: Column) -> DataFrame:
    """FILE_PROBLEMS rows for problem rows of another table (format_string types `message` non-nullable)."""
    return problem_rows.select(
        F.lit(kind).alias("kind"),
        "topic",
        "partition",
        "source_file",
        F.lit(None).cast(T.LongType()).alias("position"),
        message.alias("message"),
        "broker_id",
    )


def _decode_files(
    decode: _Decoder, arrow_schema: pa.Schema, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Executor side: file descriptors in, the record batches `decode` makes of each file out."""
    for batch in batches:
        for descriptor in batch.to_pylist():
            yield from decode(FileDescriptor(**descriptor), arrow_schema)


def _all_at_once(
    rows_of: Callable[[FileDescriptor], list[dict[str, Any]]], file: FileDescriptor, arrow_schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The rows of a text file, bounded by TEXT_FILE_MAX_BYTES, in one record batch."""
    rows = rows_of(file)
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=arrow_schema)


class FileTooLarge(OSError):
    """A file larger than any of its kind: reported as unreadable instead of read."""


def _opened(location: str) -> pa.NativeFile:
    filesystem, path = resolve(location)
    return filesystem.open_input_file(path)


def _read(location: str, max_bytes: int) -> bytes:
    with _opened(location) as source:
        size = source.size()
        if size > max_bytes:
            raise FileTooLarge(f"it holds {size} bytes, more than the {max_bytes} this kind of file can need")
        return source.read()


def _read_text(location: str) -> str:
    """Kafka writes these files in UTF-8; other bytes become replacement characters in malformed lines."""
    return _read(location, TEXT_FILE_MAX_BYTES).decode("utf-8", errors="replace")


def _unreadable(location: str, exc: OSError) -> str:
    log.warning("cannot read %s: %s", location, exc)
    return f"cannot read the file: {exc}"


def _read_at(source: pa.NativeFile, position: int, length: int) -> bytes:
    return source.read_at(length, position)


def _with_provenance(batch: pa.RecordBatch, provenance: dict[str, Any], arrow_schema: pa.Schema) -> pa.RecordBatch:
    """`batch` with the file's provenance as constant columns, in the order of `arrow_schema`."""
    columns = [
        batch[field.name]
        if field.name in batch.schema.names
        else pa.repeat(pa.scalar(provenance[field.name], field.type), batch.num_rows)
        for field in arrow_schema
    ]
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema)


def _txn_index_batches_of(file: FileDescriptor, arrow_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """TXN_INDEX record batches of one `.txnindex`, read a chunk at a time; an I/O error ends the file with an
    'unreadable' row at the byte where reading stopped."""
    provenance = {
        "topic": file.topic,
        "partition": file.partition,
        "segment_base_offset": file.base_offset,
        "source_file": file.location,
        "source_format": SEGMENT_FORMAT,
        "broker_id": file.broker_id,
    }
    decoded = 0
    try:
        with _opened(file.location) as source:
            for batch in _txn_index_batches(partial(_read_at, source), source.size()):
                decoded = batch["position"][-1].as_py() + TXN_INDEX_ENTRY.size
                yield _with_provenance(batch, provenance, arrow_schema)
    except OSError as exc:
        _unreadable(file.location, exc)
        row = {**dict.fromkeys(_TXN_INDEX_ENTRY_FIELDS), "entry_status": STATUS_UNREADABLE, "position": decoded}
        yield pa.RecordBatch.from_pylist([{**row, **provenance}], schema=arrow_schema)


def _snapshot_batches_of(file: FileDescriptor, arrow_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """PRODUCER_SNAPSHOTS record batches of one snapshot, read a chunk at a time."""
    provenance = {
        "topic": file.topic,
        "partition": file.partition,
        "snapshot_offset": file.base_offset,
        "source_file": file.location,
        "source_format": SEGMENT_FORMAT,
        "broker_id": file.broker_id,
    }
    try:
        with _opened(file.location) as source:
            for batch in _snapshot_batches(partial(_read_at, source), source.size()):
                yield _with_provenance(batch, provenance, arrow_schema)
    except OSError as exc:
        row = {
            **dict.fromkeys(_SNAPSHOT_ENTRY_FIELDS),
            "version": None,
            "crc_valid": None,
            "file_status": STATUS_UNREADABLE,
            "file_note": _unreadable(file.location, exc),
        }
        yield pa.RecordBatch.from_pylist([{**row, **provenance}], schema=arrow_schema)


def _leader_epoch_rows(file: FileDescriptor) -> list[dict[str, Any]]:
    try:
        entries, problems = decode_leader_epoch_checkpoint(_read_text(file.location))
    except OSError as exc:
        entries, problems = [], [FormatProblem(None, _unreadable(file.location, exc))]
    rows = [{**entry, "problem": None} for entry in entries]
    rows += [{"epoch": None, "start_offset": None, "line": line, "problem": message} for line, message in problems]
    provenance = {"topic": file.topic, "partition": file.partition, "source_file": file.location}
    return [{**row, **provenance, "broker_id": file.broker_id} for row in rows]


def _partition_metadata_rows(file: FileDescriptor) -> list[dict[str, Any]]:
    try:
        row, problems = decode_partition_metadata(_read_text(file.location))
    except OSError as exc:
        row, problems = {"version": None, "topic_id": None}, [FormatProblem(None, _unreadable(file.location, exc))]
    return [
        {
            **row,
            "topic": file.topic,
            "partition": file.partition,
            "problem": problems[0].message if problems else None,
            "source_file": file.location,
            "broker_id": file.broker_id,
        }
    ]


def _checkpoint_rows(file: FileDescriptor) -> list[dict[str, Any]]:
    try:
        entries, problems = decode_offset_checkpoint(_read_text(file.location))
    except OSError as exc:
        entries, problems = [], [FormatProblem(None, _unreadable(file.location, exc))]
    rows = [{**entry, "problem": None} for entry in entries]
    rows += [{"topic": None, "partition": None, "offset": None, "problem": message} for _, message in problems]
    return [{**row, "kind": file.kind, "source_file": file.location, "broker_id": file.broker_id} for row in rows]


def _index_problem_batches(file: FileDescriptor, arrow_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """SEG-004/SEG-005 rows of one index file, ROWS_PER_BATCH at a time; the index is read a chunk at a time and
    its `.log` is opened once and read at the indexed positions."""
    kind = PROBLEM_OFFSET_INDEX if file.kind == OFFSET_INDEX_SUFFIX else PROBLEM_TIME_INDEX
    name = file.location.rpartition("/")[2]

    def batches(problems: Iterable[IndexProblem]) -> Iterator[pa.RecordBatch]:
        problems = iter(problems)
        while piece := list(islice(problems, ROWS_PER_BATCH)):
            yield pa.RecordBatch.from_pylist(
                [
                    _problem_row(
                        kind, file.topic, file.partition, file.location, at, f"{name}: {message}", file.broker_id
                    )
                    for at, message in piece
                ],
                schema=arrow_schema,
            )

    try:
        with ExitStack() as stack:
            read_log: LogReader | None = None
            if file.log_location is not None:
                read_log = partial(_read_at, stack.enter_context(_opened(file.log_location)))
            index = stack.enter_context(_opened(file.location))
            if file.kind == OFFSET_INDEX_SUFFIX:
                problems = _offset_index_problems(partial(_read_at, index), index.size(), file.base_offset, read_log)
            else:
                lookup = _OffsetLookup(partial(_slice, b""), 0)
                if file.offset_index_location is not None:
                    offset_index = stack.enter_context(_opened(file.offset_index_location))
                    lookup = _OffsetLookup(partial(_read_at, offset_index), offset_index.size())
                problems = _time_index_problems(
                    partial(_read_at, index), index.size(), file.base_offset, lookup, read_log
                )
            yield from batches(problems)
    except OSError as exc:
        log.warning("cannot check %s: %s", file.location, exc)
        yield from batches([IndexProblem(0, f"cannot read the index or its segment: {exc}")])


def _problem_row(
    kind: str,
    topic: str,
    partition: int,
    source_file: str,
    position: int | None,
    message: str,
    broker_id: int | None,
) -> dict[str, Any]:
    return {
        "kind": kind,
        "topic": topic,
        "partition": partition,
        "source_file": source_file,
        "position": position,
        "message": message,
        "broker_id": broker_id,
    }


# --- dump-text forms -----------------------------------------------------------------------------------


def txn_index_from_dumplog(entries: DataFrame) -> DataFrame:
    """TXN_INDEX rows of dumped `.txnindex` entries (dumplog's TXN_INDEX_ENTRIES), source_format 'dumplog'.

    A dump that does not name its file gets segment_base_offset -1, as dumplog does for batches.
    """
    return entries.mapInArrow(partial(_convert_rows, _txn_index_row_from_dump, to_arrow_schema(TXN_INDEX)), TXN_INDEX)


def snapshots_from_dumplog(entries: DataFrame) -> DataFrame:
    """PRODUCER_SNAPSHOTS rows of dumped snapshot entries (dumplog's SNAPSHOT_ENTRIES), source_format 'dumplog'.

    The values become the ones the file holds: the tool prints only snapshots that passed the broker's
    version and CRC checks (version 1, crc_valid true); an entry printed without a cached batch had
    last_sequence -1, last_offset -1 and offset_delta 0 in the file; the file's timestamp is the producer's
    last timestamp where the dump prints one, else the cached batch's (the same field when the file is
    read). A dump that does not name its file gets snapshot_offset -1.
    """
    schema = PRODUCER_SNAPSHOTS
    return entries.mapInArrow(partial(_convert_rows, _snapshot_row_from_dump, to_arrow_schema(schema)), schema)


def _convert_rows(
    convert: Callable[[dict[str, Any]], dict[str, Any]], arrow_schema: pa.Schema, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield pa.RecordBatch.from_pylist([convert(row) for row in batch.to_pylist()], schema=arrow_schema)


def _txn_index_row_from_dump(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        **entry,
        "segment_base_offset": _coalesce(entry["segment_base_offset"], -1),
        "entry_status": STATUS_OK,
        "source_format": DUMPLOG_FORMAT,
        "broker_id": None,
    }


def _snapshot_row_from_dump(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        **entry,
        "snapshot_offset": _coalesce(entry["snapshot_offset"], -1),
        "last_sequence": _coalesce(entry["last_sequence"], -1),
        "last_offset": _coalesce(entry["last_offset"], -1),
        "offset_delta": _coalesce(entry["offset_delta"], 0),
        "timestamp": _coalesce(entry["last_timestamp"], entry["timestamp"]),
        "version": SNAPSHOT_VERSION,
        "crc_valid": True,
        "file_status": STATUS_OK,
        "file_note": None,
        "source_format": DUMPLOG_FORMAT,
        "broker_id": None,
    }


def _coalesce(value: Any, default: Any) -> Any:
    return default if value is None else value
