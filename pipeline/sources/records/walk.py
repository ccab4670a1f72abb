"""The record walk of v2 batches, one numba-compiled function: what Kafka's `DefaultRecord.readFrom` rejects, plus
the offset-delta and length expectations of the log validator (the FMT-006 and FMT-008 inputs).
"""

from __future__ import annotations

import numba
import numpy as np

from pipeline.sources.jit import CACHE_KERNELS
from pipeline.sources.records.layout import (
    ATTRIBUTES_LOW_BYTE_AT,
    CODEC_MASK,
    CODEC_NAMES,
    CODECS,
    LAST_OFFSET_DELTA_AT,
    RECORD_BATCH_OVERHEAD,
    RECORD_COUNT_AT,
)

_BASE_TIMESTAMP_AT = 27
_MAX_TIMESTAMP_AT = 35
# What the walk found (the first problem in byte order).
OK = 0
VARINT_TOO_LONG = 1
PAST_RECORD_END = 2  # a field runs past the end of its record
NEGATIVE_RECORD_LENGTH = 3
PAST_RECORDS_END = 4  # a record's declared length runs past the end of the records
RECORDS_END_IN_LENGTH = 5  # the records end inside a record's length varint
BAD_LENGTH = 6  # key/value/header value length below -1, header key length or header count negative
HEADERS_DO_NOT_FIT = 7
LENGTH_MISMATCH = 8  # the record's fields end before its declared length
OFFSET_NOT_INCREASING = 9
OFFSET_ABOVE_LAST = 10
TRAILING_BYTES = 11  # bytes left after recordsCount records
MISSING_RECORDS = 12  # the records end before recordsCount records
UNDECODABLE = 13  # the records section does not decompress (found in Python, never by the walk)
_NOT_CHECKED = -1  # negative record count (FMT-007) or unknown codec (FMT-005): no walk
COMPRESSED = -2  # left to the per-batch Python step
# Which field a problem is in.
FIELD_NAMES = (
    "length",
    "attributes",
    "timestamp delta",
    "offset delta",
    "key length",
    "key",
    "value length",
    "value",
    "header count",
    "header key length",
    "header key",
    "header value length",
    "header value",
)
(
    _LENGTH,
    _ATTRIBUTES,
    _TIMESTAMP_DELTA,
    _OFFSET_DELTA,
    _KEY_LENGTH,
    _KEY,
    _VALUE_LENGTH,
    _VALUE,
    _HEADER_COUNT,
    _HEADER_KEY_LENGTH,
    _HEADER_KEY,
    _HEADER_VALUE_LENGTH,
    _HEADER_VALUE,
) = range(len(FIELD_NAMES))
# The walk's result: the first problem (detail and extra are the numbers its description quotes), the largest
# timestamp delta of the records walked, and how many headers they have. A window's per-batch rows add the
# header fields the result is interpreted with.
PROBLEM, _FIELD, _POSITION, _INDEX, _DETAIL, EXTRA, MAX_DELTA, HEADER_TOTAL = range(8)
RESULT_COLUMNS = 8
COUNT, ATTRIBUTES_BYTE, LAST_OFFSET_DELTA, BASE_TIMESTAMP, MAX_TIMESTAMP = range(8, 13)
BATCH_COLUMNS = 13
# Where each record's and each header's fields are, filled by a second walk.
_R_OFFSET_DELTA, _R_TIMESTAMP_DELTA, _R_KEY_START, _R_KEY_LENGTH, _R_VALUE_START, _R_VALUE_LENGTH = range(6)
_R_FIRST_HEADER, _R_HEADER_COUNT = 6, 7
RECORD_COLUMNS = 8
_H_KEY_START, _H_KEY_LENGTH, _H_VALUE_START, _H_VALUE_LENGTH = range(4)
HEADER_COLUMNS = 4
NO_FILL = (np.empty((0, RECORD_COLUMNS), dtype=np.int64), np.empty((0, HEADER_COLUMNS), dtype=np.int64))
_VARINT_CUT = 1
_VARINT_LONG = 2
_INT64_MIN = -(2**63)
# The helpers the walk calls with constant arguments get one explicit signature, compiled at import: numba would
# otherwise compile them once per distinct combination of constants (dozens of compilations, seconds of CPU).
_BYTES = numba.types.Array(numba.types.uint8, 1, "C", readonly=True)
_I64 = numba.types.int64
_RESULT = numba.types.Array(_I64, 1, "C")
_FAIL = numba.types.void(_RESULT, _I64, _I64, _I64, _I64, _I64, _I64)
_FAIL_VARINT = numba.types.void(_RESULT, _I64, _I64, _I64, _I64)
_VARINT = numba.types.Tuple((numba.types.uint64, _I64, _I64))(_BYTES, _I64, _I64, _I64)


@numba.njit(_VARINT, nogil=True, cache=CACHE_KERNELS)
def _varint(buf, position, end, max_bytes):
    """Unsigned LEB128 like `ByteUtils.readUnsignedVarint(Long)`: (raw value, next position, _VARINT_* or 0)."""
    raw = np.uint64(0)
    for index in range(max_bytes):
        if position >= end:
            return raw, position, _VARINT_CUT
        byte = np.uint64(buf[position])
        position += 1
        raw |= (byte & np.uint64(0x7F)) << np.uint64(7 * index)
        if byte < np.uint64(0x80):
            return raw, position, 0
    return raw, position, _VARINT_LONG


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def _zigzag32(raw):
    """`ByteUtils.readVarint`: the low 32 bits, zig-zag decoded."""
    unsigned = np.int64(raw & np.uint64(0xFFFFFFFF))
    return (unsigned >> 1) ^ -(unsigned & 1)


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def _zigzag64(raw):
    """`ByteUtils.readVarlong`: 64 bits, zig-zag decoded."""
    return np.int64(raw >> np.uint64(1)) ^ -np.int64(raw & np.uint64(1))


@numba.njit(_FAIL, nogil=True, cache=CACHE_KERNELS)
def _fail(result, problem, field, position, index, detail, extra):
    result[PROBLEM] = problem
    result[_FIELD] = field
    result[_POSITION] = position
    result[_INDEX] = index
    result[_DETAIL] = detail
    result[EXTRA] = extra


@numba.njit(_FAIL_VARINT, nogil=True, cache=CACHE_KERNELS)
def _fail_varint(result, status, field, position, index):
    if status == _VARINT_LONG:
        _fail(result, VARINT_TOO_LONG, field, position, index, 0, 0)
    else:
        _fail(result, PAST_RECORD_END, field, position, index, -1, 0)


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def walk_records(buf, start, end, count, last_offset_delta, records, headers, result):
    """Walk `count` records in buf[start:end] like `DefaultRecord.readFrom`, stopping at the first problem.

    Writes `result` (see RESULT_COLUMNS; positions are indices into `buf`; the largest timestamp delta and the
    header count only when the records parse). When `records` has rows (`count` of
    them), it and `headers` (one row per header) receive where each record's fields are; a first walk with
    empty arrays gives their sizes.
    """
    fill = records.shape[0] > 0
    result[PROBLEM] = OK
    max_delta = _INT64_MIN
    header_total = 0
    position = start
    previous = -1
    for index in range(count):
        record_start = position
        if position >= end:
            return _fail(result, MISSING_RECORDS, _LENGTH, position, index, 0, 0)
        raw, position, status = _varint(buf, position, end, 5)
        if status:
            problem = VARINT_TOO_LONG if status == _VARINT_LONG else RECORDS_END_IN_LENGTH
            return _fail(result, problem, _LENGTH, record_start, index, 0, 0)
        length = _zigzag32(raw)
        if length < 0:
            return _fail(result, NEGATIVE_RECORD_LENGTH, _LENGTH, record_start, index, length, 0)
        if length > end - position:
            return _fail(result, PAST_RECORDS_END, _LENGTH, record_start, index, length, end - position)
        body_start = position
        body_end = position + length
        if position >= body_end:
            return _fail(result, PAST_RECORD_END, _ATTRIBUTES, position, index, -1, 0)
        position += 1  # attributes, unused

        field_start = position
        raw, position, status = _varint(buf, position, body_end, 10)
        if status:
            return _fail_varint(result, status, _TIMESTAMP_DELTA, field_start, index)
        timestamp_delta = _zigzag64(raw)

        field_start = position
        raw, position, status = _varint(buf, position, body_end, 5)
        if status:
            return _fail_varint(result, status, _OFFSET_DELTA, field_start, index)
        offset_delta = _zigzag32(raw)
        if offset_delta <= previous:
            return _fail(result, OFFSET_NOT_INCREASING, _OFFSET_DELTA, field_start, index, offset_delta, previous)
        if offset_delta > last_offset_delta:
            return _fail(result, OFFSET_ABOVE_LAST, _OFFSET_DELTA, field_start, index, offset_delta, last_offset_delta)
        previous = offset_delta

        field_start = position
        raw, position, status = _varint(buf, position, body_end, 5)
        if status:
            return _fail_varint(result, status, _KEY_LENGTH, field_start, index)
        key_length = _zigzag32(raw)
        if key_length < -1:
            return _fail(result, BAD_LENGTH, _KEY_LENGTH, field_start, index, key_length, 0)
        key_start = position
        if key_length > body_end - position:
            return _fail(result, PAST_RECORD_END, _KEY, position, index, key_length, body_end - position)
        position += max(key_length, 0)

        field_start = position
        raw, position, status = _varint(buf, position, body_end, 5)
        if status:
            return _fail_varint(result, status, _VALUE_LENGTH, field_start, index)
        value_length = _zigzag32(raw)
        if value_length < -1:
            return _fail(result, BAD_LENGTH, _VALUE_LENGTH, field_start, index, value_length, 0)
        value_start = position
        if value_length > body_end - position:
            return _fail(result, PAST_RECORD_END, _VALUE, position, index, value_length, body_end - position)
        position += max(value_length, 0)

        field_start = position
        raw, position, status = _varint(buf, position, body_end, 5)
        if status:
            return _fail_varint(result, status, _HEADER_COUNT, field_start, index)
        header_count = _zigzag32(raw)
        if header_count < 0:
            return _fail(result, BAD_LENGTH, _HEADER_COUNT, field_start, index, header_count, 0)
        if header_count > body_end - position:
            return _fail(
                result, HEADERS_DO_NOT_FIT, _HEADER_COUNT, field_start, index, header_count, body_end - position
            )
        first_header = header_total
        for _ in range(header_count):
            field_start = position
            raw, position, status = _varint(buf, position, body_end, 5)
            if status:
                return _fail_varint(result, status, _HEADER_KEY_LENGTH, field_start, index)
            name_length = _zigzag32(raw)
            if name_length < 0:
                return _fail(result, BAD_LENGTH, _HEADER_KEY_LENGTH, field_start, index, name_length, 0)
            name_start = position
            if name_length > body_end - position:
                return _fail(result, PAST_RECORD_END, _HEADER_KEY, position, index, name_length, body_end - position)
            position += name_length
            field_start = position
            raw, position, status = _varint(buf, position, body_end, 5)
            if status:
                return _fail_varint(result, status, _HEADER_VALUE_LENGTH, field_start, index)
            header_length = _zigzag32(raw)
            if header_length < -1:
                return _fail(result, BAD_LENGTH, _HEADER_VALUE_LENGTH, field_start, index, header_length, 0)
            header_start = position
            if header_length > body_end - position:
                return _fail(
                    result, PAST_RECORD_END, _HEADER_VALUE, position, index, header_length, body_end - position
                )
            position += max(header_length, 0)
            if fill:
                headers[header_total, _H_KEY_START] = name_start
                headers[header_total, _H_KEY_LENGTH] = name_length
                headers[header_total, _H_VALUE_START] = header_start
                headers[header_total, _H_VALUE_LENGTH] = header_length
            header_total += 1

        if position != body_end:
            return _fail(result, LENGTH_MISMATCH, _LENGTH, record_start, index, length, position - body_start)
        max_delta = max(max_delta, timestamp_delta)
        if fill:
            records[index, _R_OFFSET_DELTA] = offset_delta
            records[index, _R_TIMESTAMP_DELTA] = timestamp_delta
            records[index, _R_KEY_START] = key_start
            records[index, _R_KEY_LENGTH] = key_length
            records[index, _R_VALUE_START] = value_start
            records[index, _R_VALUE_LENGTH] = value_length
            records[index, _R_FIRST_HEADER] = first_header
            records[index, _R_HEADER_COUNT] = header_count
    if position != end:
        return _fail(result, TRAILING_BYTES, _LENGTH, position, count, end - position, 0)
    result[MAX_DELTA] = max_delta
    result[HEADER_TOTAL] = header_total
    return None


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def _int_at(buf, position, size):
    """The signed big-endian integer of `size` bytes at `position`."""
    value = np.int64(0)
    for index in range(size):
        value = (value << 8) | np.int64(buf[position + index])
    if size < 8 and value >= np.int64(1) << (8 * size - 1):
        value -= np.int64(1) << (8 * size)
    return value


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def walk_batches(raw, starts, ends, out):
    """The header fields of every batch into its row of `out`, and the walk of every uncompressed one.

    Positions become relative to the batch start. Compressed batches are marked `COMPRESSED` for the caller;
    batches with a negative record count or an unknown codec `_NOT_CHECKED`.
    """
    no_records = np.empty((0, RECORD_COLUMNS), dtype=np.int64)
    no_headers = np.empty((0, HEADER_COLUMNS), dtype=np.int64)
    for row in range(starts.shape[0]):
        start = starts[row]
        batch = out[row]
        batch[COUNT] = _int_at(raw, start + RECORD_COUNT_AT, 4)
        batch[ATTRIBUTES_BYTE] = raw[start + ATTRIBUTES_LOW_BYTE_AT]
        batch[LAST_OFFSET_DELTA] = _int_at(raw, start + LAST_OFFSET_DELTA_AT, 4)
        batch[BASE_TIMESTAMP] = _int_at(raw, start + _BASE_TIMESTAMP_AT, 8)
        batch[MAX_TIMESTAMP] = _int_at(raw, start + _MAX_TIMESTAMP_AT, 8)
        codec = batch[ATTRIBUTES_BYTE] & CODEC_MASK
        if batch[COUNT] < 0 or codec >= CODECS:
            batch[PROBLEM] = _NOT_CHECKED
        elif codec != 0:
            batch[PROBLEM] = COMPRESSED
        else:
            first = start + RECORD_BATCH_OVERHEAD
            walk_records(raw, first, ends[row], batch[COUNT], batch[LAST_OFFSET_DELTA], no_records, no_headers, batch)
            batch[_POSITION] -= start


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def walk_window_records(raw, starts, ends):
    """Where the records of the whole v2 entries at [starts, ends) of `raw` are, for the entries `iter_records`
    would walk uncompressed without a problem: (walked per entry, first record row per entry and one past the
    last, record rows, header rows). Record rows point at header rows of the whole window.

    A first walk checks the entries and counts their records and headers, a second fills the rows; the other
    entries (compressed, or not readable) are left to `iter_records`.
    """
    rows = starts.shape[0]
    walked = np.zeros(rows, dtype=np.bool_)
    first_record = np.zeros(rows + 1, dtype=np.int64)
    first_header = np.zeros(rows + 1, dtype=np.int64)
    result = np.zeros(RESULT_COLUMNS, dtype=np.int64)
    no_records = np.empty((0, RECORD_COLUMNS), dtype=np.int64)
    no_headers = np.empty((0, HEADER_COLUMNS), dtype=np.int64)
    for row in range(rows):
        start, end = starts[row], ends[row]
        first_record[row + 1] = first_record[row]
        first_header[row + 1] = first_header[row]
        if (
            end - start < RECORD_BATCH_OVERHEAD
            or raw[start + 16] != 2
            or 12 + _int_at(raw, start + 8, 4) != end - start
        ):
            continue
        count = _int_at(raw, start + RECORD_COUNT_AT, 4)
        if count < 0 or raw[start + ATTRIBUTES_LOW_BYTE_AT] & CODEC_MASK != 0:
            continue
        last_offset_delta = _int_at(raw, start + LAST_OFFSET_DELTA_AT, 4)
        walk_records(raw, start + RECORD_BATCH_OVERHEAD, end, count, last_offset_delta, no_records, no_headers, result)
        if result[PROBLEM] == OK:
            walked[row] = True
            first_record[row + 1] += count
            first_header[row + 1] += result[HEADER_TOTAL]
    records = np.empty((first_record[rows], RECORD_COLUMNS), dtype=np.int64)
    headers = np.empty((first_header[rows], HEADER_COLUMNS), dtype=np.int64)
    for row in range(rows):
        low, high = first_record[row], first_record[row + 1]
        if high > low:
            start = starts[row]
            count = high - low
            last_offset_delta = _int_at(raw, start + LAST_OFFSET_DELTA_AT, 4)
            batch_headers = headers[first_header[row] : first_header[row + 1]]
            walk_records(
                raw,
                start + RECORD_BATCH_OVERHEAD,
                ends[row],
                count,
                last_offset_delta,
                records[low:high],
                batch_headers,
                result,
            )
            records[low:high, _R_FIRST_HEADER] += first_header[row]
    return walked, first_record, records, headers


def read_only_view(array: np.ndarray) -> np.ndarray:
    """A read-only view, so the compiled functions see one array type whatever the buffer's origin."""
    if array.flags.writeable:
        array = array.view()
        array.flags.writeable = False
    return array


def describe(problem: int, field: int, position: int, index: int, detail: int, extra: int, count: int, where: str):
    """The FMT-006 text of a walk result; `where` renders a position ("byte 97")."""
    name = FIELD_NAMES[field]
    at = where.format(position)
    if problem == VARINT_TOO_LONG:
        return (
            f"record {index}: the {name} varint at {at} is longer than {10 if field == _TIMESTAMP_DELTA else 5} bytes"
        )
    if problem == PAST_RECORD_END:
        if detail >= 0:
            return (
                f"record {index}: the {name} of {detail} bytes at {at} runs past the end of the record ({extra} left)"
            )
        return f"record {index}: the {name} at {at} runs past the end of the record"
    if problem == NEGATIVE_RECORD_LENGTH:
        return f"record {index} at {at} declares a negative length {detail}"
    if problem == PAST_RECORDS_END:
        return f"record {index} at {at} declares {detail} bytes but only {extra} bytes of records are left"
    if problem == RECORDS_END_IN_LENGTH:
        return f"record {index}: the records end inside its length varint at {at}"
    if problem == BAD_LENGTH:
        bound = "negative" if field in (_HEADER_COUNT, _HEADER_KEY_LENGTH) else "below -1"
        return f"record {index}: {name} {detail} at {at} is {bound}"
    if problem == HEADERS_DO_NOT_FIT:
        return f"record {index}: header count {detail} at {at} exceeds the {extra} bytes left in the record"
    if problem == LENGTH_MISMATCH:
        return f"record {index} at {at} declares {detail} bytes but its fields end after {extra}"
    if problem == OFFSET_NOT_INCREASING:
        if index == 0:
            return f"record 0: offset delta {detail} at {at} is negative"
        return f"record {index}: offset delta {detail} at {at} is not above the previous record's {extra}"
    if problem == OFFSET_ABOVE_LAST:
        return f"record {index}: offset delta {detail} at {at} is above the batch's lastOffsetDelta {extra}"
    if problem == TRAILING_BYTES:
        return f"{detail} bytes left after the {count} records, from {at}"
    if problem == MISSING_RECORDS:
        return f"the records end at {at} after {index} of {count} records"
    raise ValueError(f"no description for walk result {problem}")


def position_wording(codec: int) -> str:
    return "byte {}" if codec == 0 else f"byte {{}} of the {CODEC_NAMES[codec]}-decompressed records"
