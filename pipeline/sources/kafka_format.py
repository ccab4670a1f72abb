"""Kafka log segment format: decode segment bytes into `batches` columns, and encode v2 batches.

Decoding walks a segment exactly like the broker's `FileLogInputStream.nextBatch` (spec §1.1.6, §6.0 step 1) and
keeps one row per entry, including the entry the broker would stop at, so integrity rules are plain filters.
It is pure Python and numpy because executors run it inside `mapInArrow` and tests run it without Spark. The
per-entry Python work is kept to the boundary walk, and numpy takes over runs of small v2 batches; header fields
are gathered with numpy, and the CRCs of a window are checked with one `crc32c` call when they all match.

The encoder writes what a broker writes (valid CRC-32C, varint-framed records, 78-byte transaction markers) so
tests and the bundled samples can build logs byte for byte.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from crc32c import crc32c

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
        pa.field("entry_status", pa.string(), nullable=False),
        pa.field("entry_note", pa.string()),
        pa.field("position", pa.int64(), nullable=False),
        pa.field("size_bytes", pa.int64()),
    ]
)
"""The `batches` columns that come from segment bytes, in `BATCHES` order; the caller adds provenance columns."""

_NULL_ROW = dict.fromkeys(DECODED_SCHEMA.names)
_EMPTY_REGISTER = 0xFFFFFFFF  # `crc32c(data, value)` with this value starts from, and returns it for, a zero register
_CRC_RESTART = bytes.fromhex("54641f64")  # takes an all-zero register to all ones: crc32c(it, 0xFFFFFFFF) == 0
_SHARED_CRC_CHECK_BYTES = 1024  # up to this mean batch size, one call for all CRCs beats one call per batch
_SAMPLE_BYTES = 4096  # walked entry by entry to see whether entries are small
_SMALL_ENTRY_BYTES = 128  # up to this mean size, numpy finds runs of v2 batches faster than the Python loop
_RUN_BYTES = 1 << 20  # numpy finds runs in steps of this many bytes, and falls back when entries grow
_PRUNING_ROUNDS = 8  # look-alike headers chained to each other; more than this and the Python loop takes over
_SYNC_BLOCK_BYTES = 256 * 1024  # read size of `next_entry_start`: many small entries, or one large entry's header
_STRADDLE_READ_BYTES = 64 * 1024  # least read past the end of a byte range, to finish its last entry

_V2_HEADER = np.dtype(
    {
        "names": [
            "base_offset",
            "batch_length",
            "partition_leader_epoch",
            "magic",
            "crc",
            "attributes",
            "last_offset_delta",
            "base_timestamp",
            "max_timestamp",
            "producer_id",
            "producer_epoch",
            "base_sequence",
            "record_count",
        ],
        "formats": [">i8", ">i4", ">i4", "i1", ">u4", ">u2", ">i4", ">i8", ">i8", ">i8", ">i2", ">i4", ">i4"],
        "offsets": [0, 8, 12, 16, 17, 21, 23, 27, 35, 43, 51, 53, 57],
        "itemsize": RECORD_BATCH_OVERHEAD,
    }
)
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
_MARKER_RECORD = np.dtype(  # the record of a marker; varints are single bytes, zig-zag encoded
    {
        "names": [
            "length",
            "timestamp_delta",
            "offset_delta",
            "key_length",
            "key_version",
            "type",
            "value_length",
            "value_version",
            "coordinator_epoch",
        ],
        "formats": ["u1", "u1", "u1", "u1", ">i2", ">i2", "u1", ">i2", ">i4"],
        "offsets": [0, 2, 3, 4, 5, 7, 9, 10, 12],
        "itemsize": _MARKER_BYTES - RECORD_BATCH_OVERHEAD,
    }
)
_MARKER_RECORD_LENGTH = 2 * (_MARKER_BYTES - RECORD_BATCH_OVERHEAD - 1)
_MARKER_KEY_LENGTH = 2 * _CONTROL_KEY.size
_MARKER_VALUE_LENGTH = 2 * _MARKER_VALUE.size


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


def decode_segment(data: bytes | bytearray | memoryview) -> pa.Table:
    """Decode a whole segment held in memory: one row per entry, columns of `DECODED_SCHEMA`."""
    return decode_window(data).table


def decode_window(
    data: bytes | bytearray | memoryview, *, file_position: int = 0, file_size: int | None = None
) -> DecodedWindow:
    """Decode the entries that start in `data`, which holds the file bytes from `file_position` on.

    `file_size` (default: the end of `data`) says how long the file is, so an entry that runs past the end of
    `data` is either the segment's truncated tail or simply continues in the next window. Lengths read from the
    file are only compared with what is there; nothing is allocated from them.
    """
    view = memoryview(data).cast("B")
    available = len(view)
    if file_size is None:
        file_size = file_position + available
    walk = _walk_entries(view)
    stop = walk.stop
    if stop is None and walk.end < available:
        stop = _truncated_entry(view, walk.end, file_size - file_position)
    table = _build_table(view, walk, stop, file_position, file_size)
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
        decoded = decode_window(pending, file_position=position, file_size=file_size)
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
    `decode_window` does, so it is exact, but it costs one Python step per entry before `position`.
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


def _walk_entries(view) -> _Walk:
    """Follow the entry chain through the window, like `FileLogInputStream.nextBatch`.

    Small entries make the per-entry Python step the largest cost of decoding, so after a short sample, runs of
    small v2 batches are found with numpy (`_v2_run`); everything else is followed one entry at a time, reading
    only the size. The magic byte and the v2 minimum size are checked for all entries at once afterwards, and
    the walk is cut at the first entry that fails them. `_stop_at` classifies the entry the walk stopped at.
    """
    available = len(view)
    last_peek = available - HEADER_SIZE_UP_TO_MAGIC
    sample: list[int] = []
    position = _follow_sizes(view, 0, min(last_peek, _SAMPLE_BYTES), sample)
    found = [np.array(sample, dtype=np.int64)]
    if len(sample) and position > _SAMPLE_BYTES and position <= len(sample) * _SMALL_ENTRY_BYTES:
        raw = np.frombuffer(view, dtype=np.uint8)
        while position <= last_peek:
            run, run_end = _v2_run(raw, position, min(position + _RUN_BYTES, available))
            if not len(run):
                break
            found.append(run)
            position, run_bytes = run_end, run_end - position
            if run_bytes > len(run) * _SMALL_ENTRY_BYTES:
                break
    rest: list[int] = []
    position = _follow_sizes(view, position, last_peek, rest)
    found.append(np.array(rest, dtype=np.int64))
    start = np.concatenate(found)
    if position > available:  # the last entry continues past the window
        position, start = int(start[-1]), start[:-1]
    if len(start):
        magic = np.frombuffer(view, dtype=np.uint8)[start + 16]
        size = np.diff(start, append=position) - LOG_OVERHEAD
        not_iterable = (magic > 2) | ((magic == 2) & (size < _V2_MIN_SIZE))
        if not_iterable.any():
            first = int(not_iterable.argmax())
            position = int(start[first])
            start = start[:first]
    return _Walk(start, position, _stop_at(view, position) if position <= last_peek else None)


def _follow_sizes(view, position: int, last_start: int, starts: list[int]) -> int:
    """Append the starts of the entries chained from `position` that start at or before `last_start`.

    Returns where it stopped: past `last_start`, or at an entry whose size is below any entry's minimum. This loop
    is the one per-entry Python step of decoding, so it reads only the size.
    """
    append = starts.append
    read_size = _INT32.unpack_from
    while position <= last_start:
        (size,) = read_size(view, position + 8)
        if size < RECORD_OVERHEAD_V0:
            break
        append(position)
        position += LOG_OVERHEAD + size
    return position


def _v2_run(raw: np.ndarray, position: int, limit: int) -> tuple[np.ndarray, int]:
    """Starts of the chain of complete v2 batches from `position` (an entry start) within raw[position:limit].

    Every byte position whose byte 16 is 2 is a candidate, whose successor is at `candidate + 12 + size`.
    Candidates that no chain from `position` reaches (batch bytes that happen to look like a header) are pruned by
    repeatedly dropping those without a predecessor; that leaves exactly the chain. Also returns where the chain
    ends. The cost is numpy work per byte, so this is only worth it for small entries.
    """
    window = raw[position:limit]
    candidates = np.flatnonzero(window[16:] == 2)
    sizes = np.lib.stride_tricks.sliding_window_view(window, 4)[candidates + 8]
    sizes = np.ascontiguousarray(sizes).view(">i4")[:, 0].astype(np.int64)
    successors = candidates + LOG_OVERHEAD + sizes
    complete = (sizes >= _V2_MIN_SIZE) & (successors <= len(window))
    candidates, successors = candidates[complete], successors[complete]
    if not len(candidates) or candidates[0] != 0:
        return candidates[:0], position
    if not np.array_equal(candidates[1:], successors[:-1]):
        successor = np.searchsorted(candidates, successors)
        successor[successor == len(candidates)] = 0
        successor[candidates[successor] != successors] = 0  # 0: no successor, as nothing chains back to the start
        reachable = np.ones(len(candidates), dtype=bool)
        for _ in range(_PRUNING_ROUNDS):
            has_predecessor = np.bincount(successor[reachable], minlength=len(candidates)) > 0
            has_predecessor[0] = True
            if has_predecessor[reachable].all():
                break
            reachable &= has_predecessor
        else:
            return candidates[:0], position
        candidates, successors = candidates[reachable], successors[reachable]
    return candidates + position, position + int(successors[-1])


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


def _build_table(view, walk: _Walk, stop: _Stop | None, file_position: int, file_size: int) -> pa.Table:
    """Rows in file order: v2 batches column by column, legacy messages and the stop entry row by row."""
    starts = walk.starts
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:]
    ends[-1:] = walk.end
    is_v2 = np.frombuffer(view, dtype=np.uint8)[starts + 16] == 2
    tables = []
    if is_v2.all():
        if len(starts):
            tables.append(_v2_table(view, starts, ends, file_position))
        rows = []
    else:
        if is_v2.any():
            tables.append(_v2_table(view, starts[is_v2], ends[is_v2], file_position))
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
    if is_v2.any() and not is_v2.all():  # legacy rows go back between the v2 rows
        table = table.sort_by("position")
    return table.combine_chunks()


def _v2_table(view, starts, ends, file_position: int) -> pa.Table:
    """v2 batches: header fields gathered in one numpy pass, then CRC-32C and the control records."""
    raw = np.frombuffer(view, dtype=np.uint8)
    header = np.ascontiguousarray(np.lib.stride_tricks.sliding_window_view(raw, RECORD_BATCH_OVERHEAD)[starts])
    header = header.view(_V2_HEADER)[:, 0]
    attributes = header["attributes"].astype(np.int32)
    base_offset = header["base_offset"].astype(np.int64)
    last_offset_delta = header["last_offset_delta"].astype(np.int32)
    base_sequence = header["base_sequence"].astype(np.int32)
    record_count = header["record_count"].astype(np.int32)
    compression = attributes & ATTR_COMPRESSION_MASK
    is_control = (attributes & ATTR_CONTROL) != 0
    stored_crc = header["crc"].astype(np.int64)
    control_type, coordinator_epoch, notes = _control_columns(view, starts, ends, is_control, compression, record_count)
    columns = {
        "producer_id": header["producer_id"].astype(np.int64),
        "base_offset": base_offset,
        "last_offset": base_offset + last_offset_delta,
        "producer_epoch": header["producer_epoch"].astype(np.int32),
        "base_sequence": base_sequence,
        "last_sequence": last_sequence(base_sequence, last_offset_delta),
        "is_transactional": (attributes & ATTR_TRANSACTIONAL) != 0,
        "is_control": is_control,
        "control_type": control_type,
        "coordinator_epoch": coordinator_epoch,
        "record_count": record_count,
        "base_timestamp": header["base_timestamp"].astype(np.int64),
        "max_timestamp": header["max_timestamp"].astype(np.int64),
        "partition_leader_epoch": header["partition_leader_epoch"].astype(np.int32),
        "magic": header["magic"].astype(np.int32),
        "attributes": attributes,
        "compression": compression,
        "timestamp_type": (attributes & ATTR_TIMESTAMP_TYPE) >> 3,
        "has_delete_horizon": (attributes & ATTR_DELETE_HORIZON) != 0,
        "last_offset_delta": last_offset_delta,
        "batch_length": header["batch_length"].astype(np.int32),
        "crc": stored_crc,
        "crc_valid": _crc_matches(view, starts, ends, stored_crc),
        "entry_status": pa.repeat(pa.scalar(STATUS_OK, pa.string()), len(starts)),
        "entry_note": notes,
        "position": starts + file_position,
        "size_bytes": ends - starts,
    }
    arrays = [
        column if isinstance(column, pa.Array) else pa.array(column, field.type)
        for field, column in zip(DECODED_SCHEMA, (columns[name] for name in DECODED_SCHEMA.names), strict=True)
    ]
    return pa.Table.from_arrays(arrays, schema=DECODED_SCHEMA)


def _crc_matches(view, starts, ends, stored_crc) -> np.ndarray:
    """Whether the CRC-32C of each batch, attributes to end, equals its stored CRC.

    A `crc32c` call costs more than hashing a small batch, so contiguous small batches are first checked together
    with one call; only a window where that check fails is checked batch by batch. Large batches are checked one
    by one, since the shared check copies the bytes.
    """
    contiguous = np.array_equal(starts[1:], ends[:-1])
    small = int(ends[-1] - starts[0]) <= len(starts) * _SHARED_CRC_CHECK_BYTES
    if contiguous and small and _all_crcs_match(view, starts, ends, stored_crc):
        return np.ones(len(starts), dtype=bool)
    ranges = map(slice, (starts + CRC_START).tolist(), ends.tolist())
    computed = np.fromiter(map(crc32c, map(view.__getitem__, ranges)), dtype=np.int64, count=len(starts))
    return computed == stored_crc


def _all_crcs_match(view, starts, ends, stored_crc) -> bool:
    """One CRC-32C over a copy of the contiguous batches, rewritten so it ends at a known value iff all CRCs match.

    The first 21 bytes of each batch, which its CRC does not cover, become: the complement of the previous
    batch's stored CRC, which empties the register if that CRC is right; 13 zero bytes, which keep it empty; and
    `_CRC_RESTART`, which sets it to the initial value for the next batch. A single wrong CRC always changes the
    result. Several wrong CRCs in one window pass only if their errors cancel out, which for random corruption is
    as likely (2^-32) as one corrupted batch keeping a matching CRC.
    """
    first = int(starts[0])
    chained = np.frombuffer(view, dtype=np.uint8)[first : int(ends[-1])].copy()
    prefixes = np.zeros((len(starts), CRC_START), dtype=np.uint8)
    prefixes[1:, :4] = (stored_crc[:-1] ^ 0xFFFFFFFF).astype("<u4").view(np.uint8).reshape(-1, 4)
    prefixes[:, -len(_CRC_RESTART) :] = np.frombuffer(_CRC_RESTART, dtype=np.uint8)
    np.lib.stride_tricks.sliding_window_view(chained, CRC_START, writeable=True)[starts - first] = prefixes
    last_complement = (int(stored_crc[-1]) ^ 0xFFFFFFFF).to_bytes(4, "little")
    return crc32c(last_complement, crc32c(chained, _EMPTY_REGISTER)) == _EMPTY_REGISTER


def _control_columns(view, starts, ends, is_control, compression, record_count):
    """control_type, coordinator_epoch and entry_note of v2 batches, from the control record of control batches.

    Transaction markers are the common control batches and all look alike, so the record of a 78-byte marker
    with version-0 key and value is read in one numpy pass; any other control batch goes through the parser.
    """
    rows = len(starts)
    control_rows = np.flatnonzero(is_control)
    if not len(control_rows):
        return pa.nulls(rows, pa.int32()), pa.nulls(rows, pa.int32()), pa.nulls(rows, pa.string())
    control_type = np.zeros(rows, dtype=np.int32)
    coordinator_epoch = np.zeros(rows, dtype=np.int32)
    has_type = np.zeros(rows, dtype=bool)
    has_epoch = np.zeros(rows, dtype=bool)

    sized = control_rows[
        (ends[control_rows] - starts[control_rows] == _MARKER_BYTES)
        & (compression[control_rows] == COMPRESSION_NONE)
        & (record_count[control_rows] > 0)
    ]
    records = np.lib.stride_tricks.sliding_window_view(np.frombuffer(view, dtype=np.uint8), _MARKER_RECORD.itemsize)
    record = np.ascontiguousarray(records[starts[sized] + RECORD_BATCH_OVERHEAD]).view(_MARKER_RECORD)[:, 0]
    standard = (
        (record["length"] == _MARKER_RECORD_LENGTH)
        & (record["timestamp_delta"] < 0x80)
        & (record["offset_delta"] < 0x80)
        & (record["key_length"] == _MARKER_KEY_LENGTH)
        & (record["key_version"] == 0)
        & ((record["type"] == CONTROL_ABORT) | (record["type"] == CONTROL_COMMIT))
        & (record["value_length"] == _MARKER_VALUE_LENGTH)
        & (record["value_version"] == 0)
    )
    markers = sized[standard]
    control_type[markers], has_type[markers] = record["type"][standard], True
    coordinator_epoch[markers], has_epoch[markers] = record["coordinator_epoch"][standard], True

    notes: dict[int, str] = {}
    for row in np.setdiff1d(control_rows, markers).tolist():
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


def last_sequence(base_sequence, last_offset_delta):
    """`DefaultRecordBatch.lastSequence` in int32 arithmetic: wraps past 2147483647, NO_SEQUENCE stays -1.

    Works on numpy int32 arrays and on plain ints.
    """
    base = np.asarray(base_sequence, dtype=np.int32)
    delta = np.asarray(last_offset_delta, dtype=np.int32)
    with np.errstate(over="ignore"):
        wraps = base > np.int32(MAX_SEQUENCE) - delta
        wrapped = delta - (np.int32(MAX_SEQUENCE) - base) - np.int32(1)
        result = np.where(base == NO_SEQUENCE, np.int32(NO_SEQUENCE), np.where(wraps, wrapped, base + delta))
    result = result.astype(np.int32)
    return int(result) if result.ndim == 0 else result


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
    for shift in range(0, bits + 6, 7):
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
    `count - 1`; pass a larger one to mimic a batch the cleaner has compacted. Compression: none or gzip.
    """
    values = [b"value-%d" % index for index in range(records)] if isinstance(records, int) else list(records)
    keys = [None] * len(values) if keys is None else list(keys)
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys for {len(values)} records")
    if compression not in (COMPRESSION_NONE, COMPRESSION_GZIP):
        raise ValueError(f"compression {compression} is not supported by the encoder (none or gzip)")
    if max_timestamp is None:
        max_timestamp = base_timestamp
    body = b"".join(
        _encode_record(
            index, max_timestamp - base_timestamp if index == len(values) - 1 else 0, keys[index], values[index]
        )
        for index in range(len(values))
    )
    if compression == COMPRESSION_GZIP:
        body = gzip.compress(body, mtime=0)
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
