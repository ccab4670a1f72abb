"""The `batches` columns of a window's v2 entries, gathered by numba kernels into arrays that become Arrow columns
without a copy; CRC-32C checked once per run of small batches when they all match.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from crc32c import crc32c

from pipeline.sources.jit import CACHE_KERNELS
from pipeline.sources.kafka_format.entry_rows import legacy_row, parse_control_record, stop_row
from pipeline.sources.kafka_format.entry_walk import Walk, int32_at, int64_at, uint16_at, uint32_at, window_byte_array
from pipeline.sources.kafka_format.layout import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    COMPRESSION_NONE,
    CONTROL_KEY,
    CRC_START,
    DECODED_SCHEMA,
    MARKER_BYTES,
    MARKER_VALUE,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
    Stop,
    njit_kernel,
)
from pipeline.sources.records.columns import record_columns
from schemas.batches import CONTROL_ABORT, CONTROL_COMMIT, STATUS_OK

MAX_SEQUENCE = 0x7FFFFFFF
ATTR_DELETE_HORIZON = 0x40
_EMPTY_REGISTER = 0xFFFFFFFF  # `crc32c(data, value)` with this value starts from, and returns it for, a zero register
_CRC_RESTART = np.frombuffer(bytes.fromhex("54641f64"), dtype=np.uint8)  # zero register to all ones
_SHARED_CRC_CHECK_BYTES = 1024  # up to this batch size, copying it for a shared check beats a call of its own
_SHARED_CRC_RUN_BYTES = 256 * 1024  # bytes checked by one shared call: the copy is still in the L2 cache
_MARKER_RECORD_LENGTH = 2 * (MARKER_BYTES - RECORD_BATCH_OVERHEAD - 1)
_MARKER_KEY_LENGTH = 2 * CONTROL_KEY.size
_MARKER_VALUE_LENGTH = 2 * MARKER_VALUE.size


def build_table(
    view, walk: Walk, stop: Stop | None, file_position: int, file_size: int, verify_records: bool
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
            legacy_row(view, start, end, file_position)
            for start, end in zip(starts[legacy].tolist(), ends[legacy].tolist(), strict=True)
        ]
    if stop is not None:
        rows.append(stop_row(view, stop, file_position, file_size))
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
    raw = window_byte_array(view)
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


@njit_kernel
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
        base_offset[row] = int64_at(raw, start)
        batch_length[row] = int32_at(raw, start + 8)
        partition_leader_epoch[row] = int32_at(raw, start + 12)
        magic[row] = raw[start + 16]
        crc[row] = uint32_at(raw, start + 17)
        flags = uint16_at(raw, start + 21)
        attributes[row] = flags
        compression[row] = flags & ATTR_COMPRESSION_MASK
        timestamp_type[row] = (flags & ATTR_TIMESTAMP_TYPE) >> 3
        is_transactional[row] = (flags & ATTR_TRANSACTIONAL) != 0
        is_control[row] = (flags & ATTR_CONTROL) != 0
        has_delete_horizon[row] = (flags & ATTR_DELETE_HORIZON) != 0
        last_offset_delta[row] = int32_at(raw, start + 23)
        last_offset[row] = base_offset[row] + last_offset_delta[row]
        base_timestamp[row] = int64_at(raw, start + 27)
        max_timestamp[row] = int64_at(raw, start + 35)
        producer_id[row] = int64_at(raw, start + 43)
        producer_epoch[row] = np.int16(uint16_at(raw, start + 51))
        base_sequence[row] = int32_at(raw, start + 53)
        last_sequences[row] = last_sequence(base_sequence[row], last_offset_delta[row])
        record_count[row] = int32_at(raw, start + 57)
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


@njit_kernel
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


@njit_kernel
def _write_crc_separators(chained, offsets, stored_crc):
    """The bytes `_all_crcs_match` puts before each batch's CRC coverage, and after the last one."""
    complement = np.int64(0)  # the register starts empty
    for row in range(offsets.size):
        at = np.uint64(offsets[row])  # unsigned, like `uint16_at`, so the byte stores merge
        _put_uint32_le(chained, at, complement)
        for index in range(4, CRC_START - 4):
            chained[at + np.uint64(index)] = 0
        for index in range(4):
            chained[at + np.uint64(CRC_START - 4 + index)] = _CRC_RESTART[index]
        complement = stored_crc[row] ^ 0xFFFFFFFF
    _put_uint32_le(chained, np.uint64(chained.size - 4), complement)


@njit_kernel
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
        window_byte_array(view), starts, ends, is_control, compression, record_count
    )
    has_type, has_epoch = is_marker.copy(), is_marker.copy()
    notes: dict[int, str] = {}
    for row in np.flatnonzero(is_control & ~is_marker).tolist():
        parsed_type, parsed_epoch, note = parse_control_record(
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


@njit_kernel
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
        if not is_control[row] or ends[row] - starts[row] != MARKER_BYTES:
            continue
        record = starts[row] + RECORD_BATCH_OVERHEAD
        marker_type = uint16_at(raw, record + 7)
        if (
            compression[row] == COMPRESSION_NONE
            and record_count[row] > 0
            and raw[record] == _MARKER_RECORD_LENGTH
            and raw[record + 2] < 0x80
            and raw[record + 3] < 0x80
            and raw[record + 4] == _MARKER_KEY_LENGTH
            and uint16_at(raw, record + 5) == 0
            and marker_type in (CONTROL_ABORT, CONTROL_COMMIT)
            and raw[record + 9] == _MARKER_VALUE_LENGTH
            and uint16_at(raw, record + 10) == 0
        ):
            control_type[row], coordinator_epoch[row] = marker_type, int32_at(raw, record + 12)
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
