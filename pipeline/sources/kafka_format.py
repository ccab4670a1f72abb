"""Kafka log segment format: decode segment bytes into `batches` columns, and encode v2 batches.

Decoding walks a segment exactly like the broker's `FileLogInputStream.nextBatch` (spec §1.1.6, §6.0 step 1) and
keeps one row per entry, including the entry the broker would stop at, so integrity rules are plain filters.
Executors run it inside `mapInArrow` and tests run it without Spark, so it needs only numpy, numba and pyarrow.
No Python code runs per entry: the boundary walk and the header gather are numba kernels over the window bytes,
whose output arrays become Arrow columns without a copy, and the CRCs of runs of small batches are checked
with one hardware `crc32c` call per run when they all match.

The encoder writes what a broker writes (valid CRC-32C, varint-framed records, 78-byte transaction markers) so
tests and the bundled samples can build logs byte for byte.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from crc32c import crc32c

from pipeline.sources.jit import CACHE_KERNELS
from pipeline.sources.records import compress_records, record_columns
from schemas.batches import STATUS_BAD_MAGIC, STATUS_LEGACY, STATUS_OK, STATUS_TOO_SMALL, STATUS_TRUNCATED

LOG_OVERHEAD = 12  # offset:int64 + size:int32 in front of every entry
HEADER_SIZE_UP_TO_MAGIC = 17
RECORD_OVERHEAD_V0 = 14  # smallest legal `size` of any entry
RECORD_OVERHEAD_V1 = 22
RECORD_BATCH_OVERHEAD = 61  # v2 batch header; the first record starts here
CRC_START = 21  # v2 CRC-32C covers attributes .. end of batch
NO_SEQUENCE = -1
MAX_SEQUENCE = 0x7FFFFFFF

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

DEFAULT_TIMESTAMP = 1767225600000  # 2026-01-01T00:00:00Z
DEFAULT_WINDOW_BYTES = 8 * 1024 * 1024

DECODED_SCHEMA = pa.schema(
    [
        pa.field("producer_id", pa.int64()),
        pa.field("base_offset", pa.int64()),
        pa.field("last_offset", pa.int64()),
        pa.field("producer_epoch", pa.int32()),
        pa.field("base_sequence", pa.int32()),
        pa.field("last_sequence", pa.int32()),
        pa.field("is_transactional", pa.bool_()),
        pa.field("is_control", pa.bool_()),
        pa.field("control_type", pa.int32()),
        pa.field("coordinator_epoch", pa.int32()),
        pa.field("record_count", pa.int32()),
        pa.field("base_timestamp", pa.int64()),
        pa.field("max_timestamp", pa.int64()),
        pa.field("max_record_timestamp", pa.int64()),
        pa.field("partition_leader_epoch", pa.int32()),
        pa.field("magic", pa.int32()),
        pa.field("attributes", pa.int32()),
        pa.field("compression", pa.int32()),
        pa.field("timestamp_type", pa.int32()),
        pa.field("has_delete_horizon", pa.bool_()),
        pa.field("last_offset_delta", pa.int32()),
        pa.field("batch_length", pa.int32()),
        pa.field("crc", pa.int64()),
        pa.field("crc_valid", pa.bool_()),
        pa.field("record_problem", pa.string()),
        pa.field("entry_status", pa.string(), nullable=False),
        pa.field("entry_note", pa.string()),
        pa.field("position", pa.int64(), nullable=False),
        pa.field("size_bytes", pa.int64()),
    ]
)
"""The `batches` columns that come from segment bytes, in `BATCHES` order; the caller adds provenance columns."""

_NULL_ROW = dict.fromkeys(DECODED_SCHEMA.names)
_EMPTY_REGISTER = 0xFFFFFFFF  # `crc32c(data, value)` with this value starts from, and returns it for, a zero register
_CRC_RESTART = np.frombuffer(bytes.fromhex("54641f64"), dtype=np.uint8)  # zero register to all ones
_SHARED_CRC_CHECK_BYTES = 1024  # up to this batch size, copying it for a shared check beats a call of its own
_SHARED_CRC_RUN_BYTES = 256 * 1024  # bytes checked by one shared call: the copy is still in the L2 cache
_SYNC_BLOCK_BYTES = 256 * 1024  # read size of `next_entry_start`: many small entries, or one large entry's header
_STRADDLE_READ_BYTES = 64 * 1024  # least read past the end of a byte range, to finish its last entry

_V2_HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
_INT32 = struct.Struct(">i")
_SIZE_AND_MAGIC = struct.Struct(">i4xB")
_V2_MIN_SIZE = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
_INT64 = struct.Struct(">q")
_LEGACY_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_CONTROL_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")
_TXN_INDEX_ENTRY = struct.Struct(">hqqqq")
_MARKER_BYTES = 78
_MARKER_RECORD_LENGTH = 2 * (_MARKER_BYTES - RECORD_BATCH_OVERHEAD - 1)
_MARKER_KEY_LENGTH = 2 * _CONTROL_KEY.size
_MARKER_VALUE_LENGTH = 2 * _MARKER_VALUE.size

# Kernels compile on first use, once per Python process unless cached on disk (pipeline.sources.jit).
_jit = numba.njit(nogil=True, cache=CACHE_KERNELS)


class DecodedWindow(NamedTuple):
    """Rows of the entries that start in a window of a segment, and where decoding continues.

    `resume_at` is the file position of the first entry not yet decoded (the window ended inside it), or None
    when the segment is finished: its end was reached or an entry the broker cannot iterate past was found.
    """

    table: pa.Table
    resume_at: int | None


class _Stop(NamedTuple):
    status: str
    position: int  # in the window
    note: str


class _Malformed(ValueError):
    """A control record that cannot be parsed; the message becomes the entry note."""


def decode_segment(data: bytes | bytearray | memoryview, *, verify_records: bool = True) -> pa.Table:
    """Decode a whole segment held in memory: one row per entry, columns of `DECODED_SCHEMA`."""
    return decode_window(data, verify_records=verify_records).table


def decode_window(
    data: bytes | bytearray | memoryview,
    *,
    file_position: int = 0,
    file_size: int | None = None,
    verify_records: bool = True,
) -> DecodedWindow:
    """Decode the entries that start in `data`, which holds the file bytes from `file_position` on.

    `file_size` (default: the end of `data`) says how long the file is, so an entry that runs past the end of
    `data` is either the segment's truncated tail or simply continues in the next window. Lengths read from the
    file are only compared with what is there; nothing is allocated from them. `verify_records` walks the records
    of every v2 batch for `record_problem` and `max_record_timestamp` (`records.record_columns`); without it they
    stay null and decoding is faster.
    """
    view = memoryview(data).cast("B")
    available = len(view)
    if file_size is None:
        file_size = file_position + available
    walk = _walk_entries(view)
    stop = walk.stop
    if stop is None and walk.end < available:
        stop = _truncated_entry(view, walk.end, file_size - file_position)
    table = _build_table(view, walk, stop, file_position, file_size, verify_records)
    if stop is not None or file_position + available >= file_size:
        return DecodedWindow(table, None)
    return DecodedWindow(table, file_position + walk.end)


def iter_decoded(
    read: Callable[[int], bytes],
    file_size: int,
    *,
    window_bytes: int = DEFAULT_WINDOW_BYTES,
    start: int = 0,
    end: int | None = None,
    verify_records: bool = True,
) -> Iterator[pa.Table]:
    """Decode the entries of a segment of `file_size` bytes that start in [start, end), one table per window.

    `read(n)` reads the file sequentially from `start`, which must be an entry start: 0, or a position from
    `next_entry_start`. `end` defaults to the end of the file; past it, reads only grow the entry that straddles
    it, so a byte range costs little more than its own bytes. Memory stays bounded by the window (or by the
    largest entry, which is at most the bytes actually in the file). A short read means the file shrank while
    being read; the bytes read so far are then the file.
    """
    if end is None:
        end = file_size
    pending = b""
    position = read_total = start
    request = window_bytes
    while position < end:
        wanted = min(request, end - read_total) if read_total < end else max(len(pending), _STRADDLE_READ_BYTES)
        wanted = min(wanted, file_size - read_total)
        chunk = read(wanted) if wanted > 0 else b""
        read_total += len(chunk)
        if len(chunk) < wanted:
            file_size = read_total
        pending = pending + chunk if pending else chunk
        decoded = decode_window(pending, file_position=position, file_size=file_size, verify_records=verify_records)
        table = decoded.table
        if read_total > end:
            table = table.slice(0, int(np.searchsorted(table["position"].to_numpy(), end)))
        if table.num_rows:
            yield table
        if decoded.resume_at is None:
            return
        consumed = decoded.resume_at - position
        request = window_bytes if consumed else request * 2
        pending = pending[consumed:]
        position = decoded.resume_at


def next_entry_start(read_at: Callable[[int, int], bytes], file_size: int, position: int) -> int | None:
    """The first entry start at or after `position` on the entry chain from the file start, or None.

    A decoder of the byte range that begins at `position` starts there. None means the broker's iterator stops
    at an entry that starts before `position`: that entry's row belongs to an earlier range and nothing after it
    is decoded. `read_at(n, offset)` reads file bytes (pyarrow's `RandomAccessFile.read_at`); only blocks that
    hold entry headers are read, so the payload of a batch larger than a block is skipped. The walk is the one
    `decode_window` does, so it is exact, but it steps through every entry before `position` (in compiled code).
    """
    target, position = position, 0
    while position < target:
        block = read_at(min(_SYNC_BLOCK_BYTES, file_size - position), position)
        walk = _walk_entries(memoryview(block))
        ahead = int(np.searchsorted(walk.starts, target - position))
        if ahead < len(walk.starts):
            return position + int(walk.starts[ahead])
        if walk.stop is not None:
            stop_position = position + walk.stop.position
            return stop_position if stop_position >= target else None
        advance = walk.end
        if not advance:  # the block ends inside the entry at `position`
            if len(block) < HEADER_SIZE_UP_TO_MAGIC:
                return None
            size, magic = _SIZE_AND_MAGIC.unpack_from(block, 8)
            advance = LOG_OVERHEAD + size
            if position + advance > file_size or magic > 2:
                return None
        position += advance
    return position


class _Walk(NamedTuple):
    starts: np.ndarray  # int64 positions in the window of the complete entries the broker can iterate
    end: int  # where the walk ended: the end of the last of them
    stop: _Stop | None  # the entry the broker stops at, if it is in the window
    legacy: int  # how many of the entries are magic 0 or 1 messages


def _walk_entries(view) -> _Walk:
    """Follow the entry chain through the window, like `FileLogInputStream.nextBatch`; `_stop_at` says why it ended."""
    starts, end, legacy = _entry_chain(_window_bytes(view))
    stop = _stop_at(view, end) if end <= len(view) - HEADER_SIZE_UP_TO_MAGIC else None
    return _Walk(starts, end, stop, legacy)


def _window_bytes(view) -> np.ndarray:
    """The window as a read-only uint8 array, so each kernel compiles once whatever buffer type the bytes came in."""
    raw = np.frombuffer(view, dtype=np.uint8)
    raw.flags.writeable = False
    return raw


_ONE, _TWO, _THREE = np.uint64(1), np.uint64(2), np.uint64(3)


@_jit
def _uint16_at(raw, position):
    """Big-endian. Unsigned indices spare numba's negative-index fix-up, so LLVM merges the loads into one."""
    at = np.uint64(position)
    return (np.int64(raw[at]) << 8) | np.int64(raw[at + _ONE])


@_jit
def _uint32_at(raw, position):
    at = np.uint64(position)
    return (
        (np.int64(raw[at]) << 24)
        | (np.int64(raw[at + _ONE]) << 16)
        | (np.int64(raw[at + _TWO]) << 8)
        | np.int64(raw[at + _THREE])
    )


@_jit
def _int32_at(raw, position):
    return np.int32(_uint32_at(raw, position))


@_jit
def _int64_at(raw, position):
    return (_uint32_at(raw, position) << 32) | _uint32_at(raw, position + 4)


@_jit
def _entry_chain(raw):
    """Starts of the complete entries the broker iterates from position 0, where that ends, and how many are legacy.

    It ends at the first entry whose size is below any entry's minimum, that runs past the window, whose magic is
    not 0, 1 or 2, or that is a v2 batch shorter than its header; or where fewer than 17 bytes remain. The starts
    array is sized for v2 batches (61 bytes at least) and grows only for smaller legacy messages.
    """
    starts = np.empty(raw.size // RECORD_BATCH_OVERHEAD + 1, dtype=np.int64)
    count = legacy = 0
    position = np.int64(0)  # typed, not a literal 0, so `_follow_entries` compiles once
    while True:
        more, position, more_legacy = _follow_entries(raw, position, starts[count:])
        count, legacy = count + more, legacy + more_legacy
        if count < starts.size:
            return starts[:count], position, legacy
        grown = np.empty(2 * starts.size, dtype=np.int64)
        for index in range(count):  # a loop: numba takes seconds to compile a slice assignment
            grown[index] = starts[index]
        starts = grown


@_jit
def _follow_entries(raw, position, starts):
    """`_entry_chain` until `starts` is full: how many starts it wrote, where it is, and how many are legacy."""
    count = legacy = 0
    while count < starts.size and position <= raw.size - HEADER_SIZE_UP_TO_MAGIC:
        size = _int32_at(raw, position + 8)
        if size < RECORD_OVERHEAD_V0:
            break
        end = position + LOG_OVERHEAD + size
        magic = raw[position + 16]
        if end > raw.size or magic > 2 or (magic == 2 and size < _V2_MIN_SIZE):
            break
        starts[count] = position
        count += 1
        legacy += magic < 2
        position = end
    return count, position, legacy


def _stop_at(view, position: int) -> _Stop | None:
    """Why the walk stopped at `position`, in `FileLogInputStream.nextBatch` order; None if the entry is partial."""
    size, magic = _SIZE_AND_MAGIC.unpack_from(view, position + 8)
    if size < RECORD_OVERHEAD_V0:
        return _Stop(STATUS_TOO_SMALL, position, f"entry size {size} is below the {RECORD_OVERHEAD_V0}-byte minimum")
    if position + LOG_OVERHEAD + size > len(view):
        return None
    if magic > 2:
        signed_magic = magic - 256 if magic > 127 else magic
        return _Stop(STATUS_BAD_MAGIC, position, f"magic byte {signed_magic} is not 0, 1 or 2")
    return _Stop(
        STATUS_TOO_SMALL,
        position,
        f"v2 batch of {LOG_OVERHEAD + size} bytes is below the {RECORD_BATCH_OVERHEAD}-byte batch header",
    )


def _truncated_entry(view, position: int, bytes_to_eof: int) -> _Stop | None:
    """The partial trailing entry at `position`, or None when the rest of it is still to be read."""
    remaining = bytes_to_eof - position
    in_window = len(view) - position
    if in_window < HEADER_SIZE_UP_TO_MAGIC:
        if in_window < remaining:
            return None
        return _Stop(
            STATUS_TRUNCATED, position, f"{remaining} trailing bytes do not hold a {HEADER_SIZE_UP_TO_MAGIC}-byte entry"
        )
    declared = LOG_OVERHEAD + _INT32.unpack_from(view, position + 8)[0]
    if declared <= remaining:
        return None
    return _Stop(
        STATUS_TRUNCATED,
        position,
        f"entry declares {declared} bytes but the file ends {remaining} bytes after its start",
    )


def _build_table(
    view, walk: _Walk, stop: _Stop | None, file_position: int, file_size: int, verify_records: bool
) -> pa.Table:
    """Rows in file order: v2 batches column by column, legacy messages and the stop entry row by row."""
    starts = walk.starts
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:]
    ends[-1:] = walk.end
    tables = []
    if not walk.legacy:
        if len(starts):
            tables.append(_v2_table(view, starts, ends, file_position, verify_records))
        rows = []
    else:
        is_v2 = np.frombuffer(view, dtype=np.uint8)[starts + 16] == 2
        if is_v2.any():
            tables.append(_v2_table(view, starts[is_v2], ends[is_v2], file_position, verify_records))
        legacy = ~is_v2
        rows = [
            _legacy_row(view, start, end, file_position)
            for start, end in zip(starts[legacy].tolist(), ends[legacy].tolist(), strict=True)
        ]
    if stop is not None:
        rows.append(_stop_row(view, stop, file_position, file_size))
    if rows:
        tables.append(pa.Table.from_pylist(rows, schema=DECODED_SCHEMA))
    if not tables:
        return DECODED_SCHEMA.empty_table()
    if len(tables) == 1:
        return tables[0]
    table = pa.concat_tables(tables)
    if 0 < walk.legacy < len(starts):  # legacy rows go back between the v2 rows
        table = table.sort_by("position")
    return table.combine_chunks()


def _v2_table(view, starts, ends, file_position: int, verify_records: bool) -> pa.Table:
    """v2 batches: header fields gathered by one kernel pass, then CRC-32C and the control records."""
    raw = _window_bytes(view)
    header = _gather_v2_headers(raw, starts, ends, file_position)
    control_type, coordinator_epoch, notes = _control_columns(
        view, starts, ends, header.is_control, header.compression, header.record_count
    )
    columns = {
        **header._asdict(),
        "control_type": control_type,
        "coordinator_epoch": coordinator_epoch,
        "crc_valid": _crc_matches(view, raw, starts, ends, header.crc),
        "entry_status": pa.repeat(pa.scalar(STATUS_OK, pa.string()), len(starts)),
        "entry_note": notes,
        **record_columns(view, starts, ends, verify_records),
    }
    arrays = [
        column if isinstance(column, pa.Array) else pa.array(column, field.type)
        for field, column in zip(DECODED_SCHEMA, (columns[name] for name in DECODED_SCHEMA.names), strict=True)
    ]
    return pa.Table.from_arrays(arrays, schema=DECODED_SCHEMA)


class _V2Headers(NamedTuple):
    """The `DECODED_SCHEMA` columns of v2 batches that their 61-byte header and their place in the file give."""

    producer_id: np.ndarray
    base_offset: np.ndarray
    last_offset: np.ndarray
    producer_epoch: np.ndarray
    base_sequence: np.ndarray
    last_sequence: np.ndarray
    is_transactional: np.ndarray
    is_control: np.ndarray
    record_count: np.ndarray
    base_timestamp: np.ndarray
    max_timestamp: np.ndarray
    partition_leader_epoch: np.ndarray
    magic: np.ndarray
    attributes: np.ndarray
    compression: np.ndarray
    timestamp_type: np.ndarray
    has_delete_horizon: np.ndarray
    last_offset_delta: np.ndarray
    batch_length: np.ndarray
    crc: np.ndarray
    position: np.ndarray
    size_bytes: np.ndarray


@_jit
def _gather_v2_headers(raw, starts, ends, file_position):
    """The header fields of the v2 batches at `starts` (ending at `ends`), in arrays of their Arrow types."""
    rows = starts.size
    producer_id = np.empty(rows, np.int64)
    base_offset = np.empty(rows, np.int64)
    last_offset = np.empty(rows, np.int64)
    base_timestamp = np.empty(rows, np.int64)
    max_timestamp = np.empty(rows, np.int64)
    crc = np.empty(rows, np.int64)
    position = np.empty(rows, np.int64)
    size_bytes = np.empty(rows, np.int64)
    producer_epoch = np.empty(rows, np.int32)
    base_sequence = np.empty(rows, np.int32)
    last_sequences = np.empty(rows, np.int32)
    record_count = np.empty(rows, np.int32)
    partition_leader_epoch = np.empty(rows, np.int32)
    magic = np.empty(rows, np.int32)
    attributes = np.empty(rows, np.int32)
    compression = np.empty(rows, np.int32)
    timestamp_type = np.empty(rows, np.int32)
    last_offset_delta = np.empty(rows, np.int32)
    batch_length = np.empty(rows, np.int32)
    is_transactional = np.empty(rows, np.bool_)
    is_control = np.empty(rows, np.bool_)
    has_delete_horizon = np.empty(rows, np.bool_)
    for row in range(rows):
        start = starts[row]
        base_offset[row] = _int64_at(raw, start)
        batch_length[row] = _int32_at(raw, start + 8)
        partition_leader_epoch[row] = _int32_at(raw, start + 12)
        magic[row] = raw[start + 16]
        crc[row] = _uint32_at(raw, start + 17)
        flags = _uint16_at(raw, start + 21)
        attributes[row] = flags
        compression[row] = flags & ATTR_COMPRESSION_MASK
        timestamp_type[row] = (flags & ATTR_TIMESTAMP_TYPE) >> 3
        is_transactional[row] = (flags & ATTR_TRANSACTIONAL) != 0
        is_control[row] = (flags & ATTR_CONTROL) != 0
        has_delete_horizon[row] = (flags & ATTR_DELETE_HORIZON) != 0
        last_offset_delta[row] = _int32_at(raw, start + 23)
        last_offset[row] = base_offset[row] + last_offset_delta[row]
        base_timestamp[row] = _int64_at(raw, start + 27)
        max_timestamp[row] = _int64_at(raw, start + 35)
        producer_id[row] = _int64_at(raw, start + 43)
        producer_epoch[row] = np.int16(_uint16_at(raw, start + 51))
        base_sequence[row] = _int32_at(raw, start + 53)
        last_sequences[row] = last_sequence(base_sequence[row], last_offset_delta[row])
        record_count[row] = _int32_at(raw, start + 57)
        position[row] = file_position + start
        size_bytes[row] = ends[row] - start
    return _V2Headers(
        producer_id=producer_id,
        base_offset=base_offset,
        last_offset=last_offset,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        last_sequence=last_sequences,
        is_transactional=is_transactional,
        is_control=is_control,
        record_count=record_count,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        partition_leader_epoch=partition_leader_epoch,
        magic=magic,
        attributes=attributes,
        compression=compression,
        timestamp_type=timestamp_type,
        has_delete_horizon=has_delete_horizon,
        last_offset_delta=last_offset_delta,
        batch_length=batch_length,
        crc=crc,
        position=position,
        size_bytes=size_bytes,
    )


def _crc_matches(view, raw, starts, ends, stored_crc) -> np.ndarray:
    """Whether the CRC-32C of each batch, attributes to end, equals its stored CRC.

    A `crc32c` call costs more than hashing a small batch, so runs of small batches that follow each other are
    checked with one call per run (`_all_crcs_match`); only a run where that check fails is checked batch by batch.
    Larger batches get a call each, which costs less than copying them for a shared check.
    """
    valid = np.zeros(len(starts), dtype=bool)
    checked = np.zeros(len(starts), dtype=bool)
    runs = _shared_crc_runs(starts, ends)
    if len(runs):
        chained = np.empty(min(int(ends[-1] - starts[0]), _SHARED_CRC_RUN_BYTES) + 4, dtype=np.uint8)
        for first, end in runs.tolist():
            if _all_crcs_match(raw, starts[first:end], ends[end - 1], stored_crc[first:end], chained):
                valid[first:end] = checked[first:end] = True
    rows = np.flatnonzero(~checked)
    ranges = map(slice, (starts[rows] + CRC_START).tolist(), ends[rows].tolist())
    computed = np.fromiter(map(crc32c, map(view.__getitem__, ranges)), dtype=np.int64, count=len(rows))
    valid[rows] = computed == stored_crc[rows]
    return valid


@_jit
def _shared_crc_runs(starts, ends):
    """[first, end) rows for `_all_crcs_match`: two or more adjacent small batches, one L2-sized copy at most."""
    runs = np.empty((starts.size // 2, 2), dtype=np.int64)
    count = row = 0
    while row < starts.size:
        end = row
        while (
            end < starts.size
            and ends[end] - starts[end] <= _SHARED_CRC_CHECK_BYTES
            and ends[end] - starts[row] <= _SHARED_CRC_RUN_BYTES
            and (end == row or starts[end] == ends[end - 1])
        ):
            end += 1
        if end - row > 1:
            runs[count, 0], runs[count, 1] = row, end
            count += 1
        row = max(end, row + 1)
    return runs[:count]


def _all_crcs_match(raw, starts, end: int, stored_crc, buffer) -> bool:
    """One CRC-32C over a copy of adjacent batches, rewritten so it ends at a known value iff all CRCs match.

    The first 21 bytes of each batch, which its CRC does not cover, become: the complement of the previous
    batch's stored CRC, which empties the register if that CRC is right; 13 zero bytes, which keep it empty; and
    `_CRC_RESTART`, which sets it to the initial value for the next batch. The complement of the last CRC follows
    the copy. A single wrong CRC always changes the result. Several wrong CRCs in one run pass only if their
    errors cancel out, which for random corruption is as likely (2^-32) as one corrupted batch keeping a matching
    CRC. The copy goes to the head of `buffer`.
    """
    first = int(starts[0])
    chained = buffer[: end - first + 4]
    chained[:-4] = raw[first:end]
    _write_crc_separators(chained, starts - first, stored_crc)
    return crc32c(chained, _EMPTY_REGISTER) == _EMPTY_REGISTER


@_jit
def _write_crc_separators(chained, offsets, stored_crc):
    """The bytes `_all_crcs_match` puts before each batch's CRC coverage, and after the last one."""
    complement = np.int64(0)  # the register starts empty
    for row in range(offsets.size):
        at = np.uint64(offsets[row])  # unsigned, like `_uint16_at`, so the byte stores merge
        _put_uint32_le(chained, at, complement)
        for index in range(4, CRC_START - 4):
            chained[at + np.uint64(index)] = 0
        for index in range(4):
            chained[at + np.uint64(CRC_START - 4 + index)] = _CRC_RESTART[index]
        complement = stored_crc[row] ^ 0xFFFFFFFF
    _put_uint32_le(chained, np.uint64(chained.size - 4), complement)


@_jit
def _put_uint32_le(buffer, at, value):
    for index in range(4):
        buffer[at + np.uint64(index)] = (value >> (8 * index)) & 0xFF


def _control_columns(view, starts, ends, is_control, compression, record_count):
    """control_type, coordinator_epoch and entry_note of v2 batches, from the control record of control batches.

    Transaction markers are the common control batches and all look alike, so a kernel reads those
    (`_marker_fields`); any other control batch goes through the parser.
    """
    rows = len(starts)
    if not is_control.any():
        return pa.nulls(rows, pa.int32()), pa.nulls(rows, pa.int32()), pa.nulls(rows, pa.string())
    control_type, coordinator_epoch, is_marker = _marker_fields(
        _window_bytes(view), starts, ends, is_control, compression, record_count
    )
    has_type, has_epoch = is_marker.copy(), is_marker.copy()
    notes: dict[int, str] = {}
    for row in np.flatnonzero(is_control & ~is_marker).tolist():
        parsed_type, parsed_epoch, note = _parse_control_record(
            view, int(starts[row]) + RECORD_BATCH_OVERHEAD, int(ends[row]), compression[row], record_count[row]
        )
        if parsed_type is not None:
            control_type[row], has_type[row] = parsed_type, True
        if parsed_epoch is not None:
            coordinator_epoch[row], has_epoch[row] = parsed_epoch, True
        if note is not None:
            notes[row] = note
    return (
        pa.array(control_type, pa.int32(), mask=~has_type),
        pa.array(coordinator_epoch, pa.int32(), mask=~has_epoch),
        _notes_array(notes, rows),
    )


@_jit
def _marker_fields(raw, starts, ends, is_control, compression, record_count):
    """Control type and coordinator epoch of the v2 batches that are plain transaction markers, and which those are.

    A plain marker is a 78-byte uncompressed control batch whose one record has single-byte varints (length,
    attributes, timestamp and offset delta, key length), a version-0 ABORT or COMMIT key (int16 version, int16
    type), a value length and a version-0 value (int16 version, int32 coordinator epoch).
    """
    control_type = np.zeros(starts.size, dtype=np.int32)
    coordinator_epoch = np.zeros(starts.size, dtype=np.int32)
    is_marker = np.zeros(starts.size, dtype=np.bool_)
    for row in range(starts.size):
        if not is_control[row] or ends[row] - starts[row] != _MARKER_BYTES:
            continue
        record = starts[row] + RECORD_BATCH_OVERHEAD
        marker_type = _uint16_at(raw, record + 7)
        if (
            compression[row] == COMPRESSION_NONE
            and record_count[row] > 0
            and raw[record] == _MARKER_RECORD_LENGTH
            and raw[record + 2] < 0x80
            and raw[record + 3] < 0x80
            and raw[record + 4] == _MARKER_KEY_LENGTH
            and _uint16_at(raw, record + 5) == 0
            and marker_type in (CONTROL_ABORT, CONTROL_COMMIT)
            and raw[record + 9] == _MARKER_VALUE_LENGTH
            and _uint16_at(raw, record + 10) == 0
        ):
            control_type[row], coordinator_epoch[row] = marker_type, _int32_at(raw, record + 12)
            is_marker[row] = True
    return control_type, coordinator_epoch, is_marker


def _notes_array(notes: dict[int, str], rows: int) -> pa.Array:
    if not notes:
        return pa.nulls(rows, pa.string())
    texts = sorted(set(notes.values()))
    code_of = {text: code for code, text in enumerate(texts)}
    codes = np.zeros(rows, dtype=np.int32)
    has_note = np.zeros(rows, dtype=bool)
    for row, text in notes.items():
        codes[row] = code_of[text]
        has_note[row] = True
    return pc.take(pa.array(texts, pa.string()), pa.array(codes, mask=~has_note))


@numba.vectorize(nopython=True, cache=CACHE_KERNELS)
def last_sequence(base_sequence, last_offset_delta):
    """`DefaultRecordBatch.lastSequence` in int32 arithmetic: wraps past 2147483647, NO_SEQUENCE stays -1.

    A ufunc: works on numpy arrays and on plain ints, and inside the header kernel. Every step wraps like Java's
    int, so deltas the broker never writes (negative ones) give what the broker's code would.
    """
    base, delta = np.int32(base_sequence), np.int32(last_offset_delta)
    if base == NO_SEQUENCE:
        return np.int32(NO_SEQUENCE)
    if base > np.int32(MAX_SEQUENCE - delta):
        return np.int32(np.int32(delta - np.int32(MAX_SEQUENCE - base)) - 1)
    return np.int32(base + delta)


def _legacy_row(view, start: int, end: int, file_position: int) -> dict:
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


def _stop_row(view, stop: _Stop, file_position: int, file_size: int) -> dict:
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
        row["batch_length"] = _INT32.unpack_from(view, stop.position + 8)[0]
    if available >= HEADER_SIZE_UP_TO_MAGIC:
        row["magic"] = struct.unpack_from(">b", view, stop.position + 16)[0]
    return row


def _parse_control_record(view, start: int, end: int, compression: int, record_count: int):
    """(control type, coordinator epoch, note) of the single record of an uncompressed control batch (§1.1.5)."""
    if compression != COMPRESSION_NONE:
        return None, None, "compressed control batch: control record not decoded"
    if record_count <= 0 or start >= end:
        return None, None, "control batch holds no record"
    try:
        length, position = _read_varint(view, start, end, 32)
        if length < 0 or position + length > end:
            raise _Malformed("control record length runs past the batch")
        record_end = position + length
        position += 1  # attributes
        _, position = _read_varint(view, position, record_end, 64)  # timestamp delta
        _, position = _read_varint(view, position, record_end, 32)  # offset delta
        key_length, position = _read_varint(view, position, record_end, 32)
        if key_length < _CONTROL_KEY.size or position + key_length > record_end:
            raise _Malformed(f"control record key of {key_length} bytes is not a 4-byte version + type")
        key_version, control_type = _CONTROL_KEY.unpack_from(view, position)
        if key_version < 0:
            raise _Malformed(f"control record key version {key_version} is negative")
        position += key_length
        notes = [f"control key version {key_version} read as version 0"] if key_version > 0 else []
        if control_type not in (CONTROL_ABORT, CONTROL_COMMIT):
            return control_type, None, "; ".join(notes) or None
        value_length, position = _read_varint(view, position, record_end, 32)
        if value_length < _MARKER_VALUE.size or position + value_length > record_end:
            notes.append(f"marker value of {value_length} bytes is not a 6-byte version + coordinator epoch")
            return control_type, None, "; ".join(notes)
        value_version, coordinator_epoch = _MARKER_VALUE.unpack_from(view, position)
        if value_version < 0:
            notes.append(f"marker value version {value_version} is negative")
            return control_type, None, "; ".join(notes)
        if value_version > 0:
            notes.append(f"marker value version {value_version} read as version 0")
        return control_type, coordinator_epoch, "; ".join(notes) or None
    except _Malformed as exc:
        return None, None, str(exc)


def _read_varint(view, position: int, end: int, bits: int) -> tuple[int, int]:
    """Zig-zag LEB128 like `ByteUtils.readVarint` (32 bits, 5 bytes at most) / `readVarlong` (64, 10), bounded."""
    raw = 0
    for shift in range(0, 7 * ((bits + 6) // 7), 7):
        if position >= end:
            raise _Malformed("control record ends inside a varint")
        byte = view[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            raw &= (1 << bits) - 1
            return (raw >> 1) ^ -(raw & 1), position
    raise _Malformed(f"varint longer than {(bits + 6) // 7} bytes")


# --- encoding ---------------------------------------------------------------------------------------------


def _zigzag(value: int) -> bytes:
    unsigned = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while unsigned >= 0x80:
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    out.append(unsigned)
    return bytes(out)


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
        _V2_HEADER_STRUCT.pack(
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
        [_MARKER_VALUE.pack(0, coordinator_epoch)],
        producer_id,
        producer_epoch,
        NO_SEQUENCE,
        True,
        partition_leader_epoch,
        timestamp,
        timestamp,
        is_control=True,
        keys=[_CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)],
    )


def encode_txnindex_entry(producer_id: int, first_offset: int, last_offset: int, last_stable_offset: int) -> bytes:
    """One 34-byte `.txnindex` entry, version 0 (spec §1.3)."""
    return _TXN_INDEX_ENTRY.pack(0, producer_id, first_offset, last_offset, last_stable_offset)


def segment_file_name(base_offset: int, suffix: str = ".log") -> str:
    """`LogFileUtils.filenamePrefixFromOffset`: the base offset zero-padded to 20 digits, plus the suffix."""
    if base_offset < 0:
        raise ValueError(f"negative base offset {base_offset}")
    return f"{base_offset:020d}{suffix}"
