"""Kafka log segment format: decode segment bytes into `batches` columns, and encode v2 batches.

Decoding walks a segment exactly like the broker's `FileLogInputStream.nextBatch` (spec §1.1.6, §6.0 step 1) and
keeps one row per entry, including the entry the broker would stop at, so integrity rules are plain filters.
It is pure Python and numpy because executors run it inside `mapInArrow` and tests run it without Spark: the
only per-entry Python work is the boundary walk and the CRC call; header fields are gathered with numpy.

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

_STATUSES = (STATUS_OK, STATUS_LEGACY, STATUS_TRUNCATED, STATUS_TOO_SMALL, STATUS_BAD_MAGIC)
_STATUS_CODE = {status: code for code, status in enumerate(_STATUSES)}
_STATUS_VALUES = pa.array(_STATUSES, pa.string())

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
    starts, next_position, stop = _walk_entries(view)
    if stop is None and next_position < available:
        stop = _truncated_entry(view, next_position, file_size - file_position)
    table = _build_table(view, starts, next_position, stop, file_position, file_size)
    if stop is not None or file_position + available >= file_size:
        return DecodedWindow(table, None)
    return DecodedWindow(table, file_position + next_position)


def iter_decoded(
    read: Callable[[int], bytes], file_size: int, *, window_bytes: int = DEFAULT_WINDOW_BYTES
) -> Iterator[pa.Table]:
    """Decode a segment of `file_size` bytes read sequentially through `read(n)`, one table per window.

    Memory stays bounded by the window (or by the largest entry, which is at most the bytes actually in the
    file). A short read means the file shrank while being read; the bytes read so far are then the file.
    """
    pending = b""
    position = 0
    read_total = 0
    request = window_bytes
    while True:
        wanted = min(request, file_size - read_total)
        chunk = read(wanted) if wanted > 0 else b""
        read_total += len(chunk)
        if len(chunk) < wanted:
            file_size = read_total
        pending = pending + chunk if pending else chunk
        decoded = decode_window(pending, file_position=position, file_size=file_size)
        if decoded.table.num_rows:
            yield decoded.table
        if decoded.resume_at is None:
            return
        consumed = decoded.resume_at - position
        request = window_bytes if consumed else request * 2
        pending = pending[consumed:]
        position = decoded.resume_at


def _walk_entries(view) -> tuple[list[int], int, _Stop | None]:
    """Starts of the complete entries the broker can iterate, where the walk ended, and the entry it stopped at.

    The loop is the one per-entry Python step of decoding, so it tests the common case only and leaves the
    classification of the entry it stops at to `_stop_at`.
    """
    starts: list[int] = []
    append = starts.append
    read_size_and_magic = _SIZE_AND_MAGIC.unpack_from
    available = len(view)
    last_peek = available - HEADER_SIZE_UP_TO_MAGIC
    position = 0
    while position <= last_peek:
        size, magic = read_size_and_magic(view, position + 8)
        end = position + LOG_OVERHEAD + size
        if end > available or magic > 2 or size < _V2_MIN_SIZE and (size < RECORD_OVERHEAD_V0 or magic == 2):
            return starts, position, _stop_at(view, position)
        append(position)
        position = end
    return starts, position, None


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


class _Column:
    """A column under construction: values plus validity, filled by row groups."""

    __slots__ = ("values", "valid")

    def __init__(self, rows: int, dtype) -> None:
        self.values = np.zeros(rows, dtype=dtype)
        self.valid = np.zeros(rows, dtype=bool)

    def put(self, rows, values) -> None:
        self.values[rows] = values
        self.valid[rows] = True

    def to_arrow(self, arrow_type: pa.DataType) -> pa.Array:
        if self.valid.all():
            return pa.array(self.values, arrow_type)
        return pa.array(self.values, arrow_type, mask=~self.valid)


_NUMPY_TYPES = {pa.int64(): np.int64, pa.int32(): np.int32, pa.bool_(): np.bool_}


def _build_table(view, starts: list[int], walk_end: int, stop: _Stop | None, file_position: int, file_size: int):
    entries = len(starts)
    rows = entries + (stop is not None)
    columns = {
        field.name: _Column(rows, _NUMPY_TYPES[field.type]) for field in DECODED_SCHEMA if field.type in _NUMPY_TYPES
    }
    status = np.zeros(rows, dtype=np.int8)
    notes: dict[int, str] = {}

    if entries:
        start = np.asarray(starts, dtype=np.int64)
        end = np.empty_like(start)
        end[:-1] = start[1:]
        end[-1] = walk_end
        columns["position"].put(slice(0, entries), start + file_position)
        columns["size_bytes"].put(slice(0, entries), end - start)
        raw = np.frombuffer(view, dtype=np.uint8)
        is_v2 = raw[start + 16] == 2
        if is_v2.all():
            _fill_v2(columns, notes, view, raw, slice(0, entries), start, end)
        else:
            v2_rows = np.flatnonzero(is_v2)
            if len(v2_rows):
                _fill_v2(columns, notes, view, raw, v2_rows, start[v2_rows], end[v2_rows])
            for row in np.flatnonzero(~is_v2).tolist():
                status[row] = _STATUS_CODE[STATUS_LEGACY]
                _fill_legacy(columns, notes, view, row, starts[row], int(end[row]))

    if stop is not None:
        _fill_stop(columns, view, entries, stop, file_position, file_size)
        status[entries] = _STATUS_CODE[stop.status]
        notes[entries] = stop.note

    arrays = []
    for field in DECODED_SCHEMA:
        if field.name == "entry_status":
            arrays.append(pc.take(_STATUS_VALUES, pa.array(status)))
        elif field.name == "entry_note":
            arrays.append(_notes_array(notes, rows))
        else:
            arrays.append(columns[field.name].to_arrow(field.type))
    return pa.Table.from_arrays(arrays, schema=DECODED_SCHEMA)


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


def _fill_v2(columns, notes, view, raw, rows, start, end) -> None:
    """Header fields of v2 batches gathered in one numpy pass; CRC-32C and control records per batch."""
    header = np.ascontiguousarray(np.lib.stride_tricks.sliding_window_view(raw, RECORD_BATCH_OVERHEAD)[start])
    header = header.view(_V2_HEADER)[:, 0]
    attributes = header["attributes"].astype(np.int32)
    base_offset = header["base_offset"].astype(np.int64)
    last_offset_delta = header["last_offset_delta"].astype(np.int32)
    base_sequence = header["base_sequence"].astype(np.int32)
    compression = attributes & ATTR_COMPRESSION_MASK
    is_control = (attributes & ATTR_CONTROL) != 0
    record_count = header["record_count"].astype(np.int32)

    def put(name: str, values) -> None:
        columns[name].put(rows, values)

    put("producer_id", header["producer_id"])
    put("base_offset", base_offset)
    put("last_offset", base_offset + last_offset_delta)
    put("producer_epoch", header["producer_epoch"])
    put("base_sequence", base_sequence)
    put("last_sequence", last_sequence(base_sequence, last_offset_delta))
    put("is_transactional", (attributes & ATTR_TRANSACTIONAL) != 0)
    put("is_control", is_control)
    put("record_count", record_count)
    put("base_timestamp", header["base_timestamp"])
    put("max_timestamp", header["max_timestamp"])
    put("partition_leader_epoch", header["partition_leader_epoch"])
    put("magic", header["magic"])
    put("attributes", attributes)
    put("compression", compression)
    put("timestamp_type", (attributes & ATTR_TIMESTAMP_TYPE) >> 3)
    put("has_delete_horizon", (attributes & ATTR_DELETE_HORIZON) != 0)
    put("last_offset_delta", last_offset_delta)
    put("batch_length", header["batch_length"])
    stored_crc = header["crc"].astype(np.int64)
    put("crc", stored_crc)

    crc_ranges = zip((start + CRC_START).tolist(), end.tolist(), strict=True)
    computed = [crc32c(view[first:last]) for first, last in crc_ranges]
    put("crc_valid", np.array(computed, dtype=np.int64) == stored_crc)

    row_numbers = np.arange(len(start)) if isinstance(rows, slice) else rows
    for index in np.flatnonzero(is_control).tolist():
        control_type, coordinator_epoch, note = _parse_control_record(
            view, int(start[index]) + RECORD_BATCH_OVERHEAD, int(end[index]), compression[index], record_count[index]
        )
        row = int(row_numbers[index])
        if control_type is not None:
            columns["control_type"].put(row, control_type)
        if coordinator_epoch is not None:
            columns["coordinator_epoch"].put(row, coordinator_epoch)
        if note is not None:
            notes[row] = note


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


def _fill_legacy(columns, notes, view, row: int, start: int, end: int) -> None:
    """A magic 0/1 message: kept for integrity checks, never for producer state (spec §1.1.6)."""
    offset, size, stored_crc, magic, attributes = _LEGACY_PREFIX.unpack_from(view, start)
    attributes &= 0xFF
    compression = attributes & ATTR_COMPRESSION_MASK

    def put(name: str, value) -> None:
        columns[name].put(row, value)

    put("last_offset", offset)
    put("magic", magic)
    put("attributes", attributes)
    put("compression", compression)
    put("batch_length", size)
    put("crc", stored_crc)
    put("crc_valid", zlib.crc32(view[start + 16 : end]) == stored_crc)
    put("is_transactional", False)
    put("is_control", False)
    row_notes = []
    if compression == COMPRESSION_NONE:
        put("base_offset", offset)
        put("record_count", 1)
    else:
        row_notes.append("compressed legacy wrapper: its offset is the last inner offset")
    if magic == 1:
        put("timestamp_type", (attributes & ATTR_TIMESTAMP_TYPE) >> 3)
        if size >= RECORD_OVERHEAD_V1:
            timestamp = _INT64.unpack_from(view, start + 18)[0]
            put("max_timestamp", timestamp)
            if compression == COMPRESSION_NONE:
                put("base_timestamp", timestamp)
        else:
            row_notes.append(f"v1 message of {size} bytes is below the {RECORD_OVERHEAD_V1}-byte message overhead")
    if row_notes:
        notes[row] = "; ".join(row_notes)


def _fill_stop(columns, view, row: int, stop: _Stop, file_position: int, file_size: int) -> None:
    """The entry the broker's iterator stops at; `size_bytes` spans everything from it to the end of the file."""
    available = len(view) - stop.position
    columns["position"].put(row, file_position + stop.position)
    columns["size_bytes"].put(row, file_size - file_position - stop.position)
    if available >= 8:
        columns["base_offset"].put(row, _INT64.unpack_from(view, stop.position)[0])
    if available >= LOG_OVERHEAD:
        columns["batch_length"].put(row, _INT32.unpack_from(view, stop.position + 8)[0])
    if available >= HEADER_SIZE_UP_TO_MAGIC:
        columns["magic"].put(row, struct.unpack_from(">b", view, stop.position + 16)[0])


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
