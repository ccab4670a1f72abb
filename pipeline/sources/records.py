"""Record-level decoding of v2 batches: decompression, the record walk, and the `iter_records` API.

Kafka's reader (`DefaultRecordBatch.iterator` / `RecordIterator`, `DefaultRecord.readFrom`, spec §1.1.4) decodes
`recordsCount` records from the records section, decompressed by the codec of the attributes (§1.1.1), and fails
on a malformed varint, a length that overruns the record or the records, a negative header count, or bytes left
over. The walk here checks the same things plus what the log validator expects of offset deltas (strictly
increasing, at most lastOffsetDelta) and keys and values (length -1 or more), and keeps the largest record
timestamp: the FMT-006 and FMT-008 inputs. It is one numba-compiled function: `record_columns` runs it over every
uncompressed batch of a decode window in one compiled loop (and per batch, after decompression, for compressed
ones), and `iter_records` runs it once to validate a batch and once more to fill the key/value/header offsets
the records are cut from.

Codecs are read the way Kafka's own streams read them: gzip members like `GZIPInputStream`, snappy in xerial
framing like `SnappyInputStream` (or raw snappy, which that stream also accepts), lz4 frames like
`Lz4BlockInputStream` (independent blocks, descriptor checksum, block checksums; bytes after the end mark are
never read), and zstd frames. Decompressed output is bounded (`MAX_RECORDS_BYTES`): a batch that would inflate
beyond it is a record problem, not an out-of-memory error. Lengths read from the data only ever bound reads of
bytes that are there; nothing is allocated from them.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Iterator
from typing import NamedTuple

import cramjam
import numba
import numpy as np
import pyarrow as pa

from pipeline.sources.jit import CACHE_KERNELS

MAX_RECORDS_BYTES = 256 * 1024 * 1024
"""Largest decompressed records section accepted; far above what a producer puts in one batch (its batch.size and
max.request.size are a few MiB at most), far below what would exhaust an executor."""

RECORD_BATCH_OVERHEAD = 61  # the records section starts here
_BATCH_LENGTH = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23
_RECORD_COUNT_AT = 57
_ATTRIBUTES_LOW_BYTE_AT = 22  # attributes are an int16 at 21; only the low byte is used
_BASE_TIMESTAMP_AT = 27
_MAX_TIMESTAMP_AT = 35
_CODEC_MASK = 0x07
_LOG_APPEND_TIME = 0x08
CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
_CODECS = len(CODEC_NAMES)

# --- the walk ------------------------------------------------------------------------------------------

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
_COMPRESSED = -2  # left to the per-batch Python step

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
_PROBLEM, _FIELD, _POSITION, _INDEX, _DETAIL, _EXTRA, _MAX_DELTA, _HEADER_TOTAL = range(8)
_RESULT_COLUMNS = 8
_COUNT, _ATTRIBUTES_BYTE, _LAST_OFFSET_DELTA, _BASE_TIMESTAMP, _MAX_TIMESTAMP = range(8, 13)
_BATCH_COLUMNS = 13

# Where each record's and each header's fields are, filled by a second walk.
_R_OFFSET_DELTA, _R_TIMESTAMP_DELTA, _R_KEY_START, _R_KEY_LENGTH, _R_VALUE_START, _R_VALUE_LENGTH = range(6)
_R_FIRST_HEADER, _R_HEADER_COUNT = 6, 7
_RECORD_COLUMNS = 8
_H_KEY_START, _H_KEY_LENGTH, _H_VALUE_START, _H_VALUE_LENGTH = range(4)
_HEADER_COLUMNS = 4
_NO_FILL = (np.empty((0, _RECORD_COLUMNS), dtype=np.int64), np.empty((0, _HEADER_COLUMNS), dtype=np.int64))

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
    result[_PROBLEM] = problem
    result[_FIELD] = field
    result[_POSITION] = position
    result[_INDEX] = index
    result[_DETAIL] = detail
    result[_EXTRA] = extra


@numba.njit(_FAIL_VARINT, nogil=True, cache=CACHE_KERNELS)
def _fail_varint(result, status, field, position, index):
    if status == _VARINT_LONG:
        _fail(result, VARINT_TOO_LONG, field, position, index, 0, 0)
    else:
        _fail(result, PAST_RECORD_END, field, position, index, -1, 0)


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def _walk(buf, start, end, count, last_offset_delta, records, headers, result):
    """Walk `count` records in buf[start:end] like `DefaultRecord.readFrom`, stopping at the first problem.

    Writes `result` (see _RESULT_COLUMNS; positions are indices into `buf`; the largest timestamp delta and the
    header count only when the records parse). When `records` has rows (`count` of
    them), it and `headers` (one row per header) receive where each record's fields are; a first walk with
    empty arrays gives their sizes.
    """
    fill = records.shape[0] > 0
    result[_PROBLEM] = OK
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
    result[_MAX_DELTA] = max_delta
    result[_HEADER_TOTAL] = header_total
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
def _walk_batches(raw, starts, ends, out):
    """The header fields of every batch into its row of `out`, and the walk of every uncompressed one.

    Positions become relative to the batch start. Compressed batches are marked `_COMPRESSED` for the caller;
    batches with a negative record count or an unknown codec `_NOT_CHECKED`.
    """
    no_records = np.empty((0, _RECORD_COLUMNS), dtype=np.int64)
    no_headers = np.empty((0, _HEADER_COLUMNS), dtype=np.int64)
    for row in range(starts.shape[0]):
        start = starts[row]
        batch = out[row]
        batch[_COUNT] = _int_at(raw, start + _RECORD_COUNT_AT, 4)
        batch[_ATTRIBUTES_BYTE] = raw[start + _ATTRIBUTES_LOW_BYTE_AT]
        batch[_LAST_OFFSET_DELTA] = _int_at(raw, start + _LAST_OFFSET_DELTA_AT, 4)
        batch[_BASE_TIMESTAMP] = _int_at(raw, start + _BASE_TIMESTAMP_AT, 8)
        batch[_MAX_TIMESTAMP] = _int_at(raw, start + _MAX_TIMESTAMP_AT, 8)
        codec = batch[_ATTRIBUTES_BYTE] & _CODEC_MASK
        if batch[_COUNT] < 0 or codec >= _CODECS:
            batch[_PROBLEM] = _NOT_CHECKED
        elif codec != 0:
            batch[_PROBLEM] = _COMPRESSED
        else:
            first = start + RECORD_BATCH_OVERHEAD
            _walk(raw, first, ends[row], batch[_COUNT], batch[_LAST_OFFSET_DELTA], no_records, no_headers, batch)
            batch[_POSITION] -= start


def _readonly(array: np.ndarray) -> np.ndarray:
    """A read-only view, so the compiled functions see one array type whatever the buffer's origin."""
    if array.flags.writeable:
        array = array.view()
        array.flags.writeable = False
    return array


def _describe(problem: int, field: int, position: int, index: int, detail: int, extra: int, count: int, where: str):
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


def _where(codec: int) -> str:
    return "byte {}" if codec == 0 else f"byte {{}} of the {CODEC_NAMES[codec]}-decompressed records"


# --- decompression ---------------------------------------------------------------------------------------


_SECTION = RECORD_BATCH_OVERHEAD  # where the records section starts: messages give batch byte positions


class _Undecodable(Exception):
    """The records section does not decompress; `position` is relative to the section."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(reason)
        self.position = position
        self.reason = reason


def _too_large(codec: int, limit: int) -> _Undecodable:
    return _Undecodable(0, f"{CODEC_NAMES[codec]} records decompress to more than {limit} bytes")


_GZIP_MEMBER_START = b"\x1f\x8b\x08"


def _gunzip(section, limit: int) -> bytes:
    """gzip members like `GZIPInputStream`: CRC and size checked, bytes after a member that start no member ignored."""
    pieces: list[bytes] = []
    total = 0
    remaining = section
    while True:
        member = zlib.decompressobj(wbits=31)
        try:
            piece = member.decompress(remaining, limit - total + 1)
        except zlib.error as exc:
            raise _Undecodable(len(section) - len(remaining), f"gzip records do not decompress: {exc}") from None
        total += len(piece)
        if total > limit:
            raise _too_large(1, limit)
        pieces.append(piece)
        if not member.eof:
            raise _Undecodable(len(section), "gzip records end inside the compressed stream")
        remaining = member.unused_data
        if remaining[: len(_GZIP_MEMBER_START)] != _GZIP_MEMBER_START:
            return b"".join(pieces)


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version, compatible version
_XERIAL_MAGIC_HEAD = struct.unpack(">i", _XERIAL_MAGIC[:4])[0]  # a chunk size equal to it starts another stream
_XERIAL_CHUNK = 32 * 1024  # SnappyOutputStream's default block size


def _unsnappy(section, limit: int) -> bytes:
    """xerial `SnappyInputStream`: framed chunks after a magic header, or one raw snappy block without it."""
    size = len(section)
    if not size:
        raise _Undecodable(0, "snappy records are empty")
    if size < _XERIAL_HEADER.size or bytes(section[: len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC:
        return _raw_snappy(section, 0, limit)
    pieces: list[bytes] = []
    total = 0
    position = 0
    while size - position >= 4:
        chunk_size = _BATCH_LENGTH.unpack_from(section, position)[0]
        if chunk_size == _XERIAL_MAGIC_HEAD:  # a concatenated stream: its header, then its chunks
            if size - position < _XERIAL_HEADER.size:
                raise _Undecodable(position, f"snappy records end inside a stream header at byte {_SECTION + position}")
            magic, version, _ = _XERIAL_HEADER.unpack_from(section, position)
            if magic != _XERIAL_MAGIC:
                break
            if version < 1:
                raise _Undecodable(
                    position, f"snappy stream header at byte {_SECTION + position} has version {version}"
                )
            position += _XERIAL_HEADER.size
            continue
        if chunk_size < 0 or chunk_size > size - position - 4:
            raise _Undecodable(
                position,
                f"snappy chunk at byte {_SECTION + position} declares {chunk_size} bytes, {size - position - 4} follow",
            )
        piece = _raw_snappy(section[position + 4 : position + 4 + chunk_size], position + 4, limit - total)
        total += len(piece)
        pieces.append(piece)
        position += 4 + chunk_size
    return b"".join(pieces)  # fewer than 4 bytes after the last chunk are not read, as by SnappyInputStream


def _raw_snappy(block, position: int, limit: int) -> bytes:
    """One raw snappy block; its declared length is checked against `limit` before anything is decompressed."""
    try:
        length = cramjam.snappy.decompress_raw_len(block)
    except cramjam.DecompressionError as exc:
        raise _Undecodable(position, f"snappy block at byte {_SECTION + position} has no valid length: {exc}") from None
    if length > limit:
        raise _too_large(2, limit)
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as exc:
        raise _Undecodable(position, f"snappy block at byte {_SECTION + position} does not decompress: {exc}") from None


_XXH_PRIMES = (2654435761, 2246822519, 3266489917, 668265263, 374761393)
_UINT32_MASK = 0xFFFFFFFF


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def _rotl32(value, bits):
    return ((value << np.uint64(bits)) | (value >> np.uint64(32 - bits))) & np.uint64(_UINT32_MASK)


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def _word32(buf, position):
    word = np.uint64(0)
    for index in range(4):
        word |= np.uint64(buf[position + index]) << np.uint64(8 * index)
    return word


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def _xxh32(buf, start, end):
    """XXH32 with seed 0 of buf[start:end], as lz4 frames use it for descriptor and block checksums.

    32-bit arithmetic in uint64 with explicit masks: numba widens uint32 products.
    """
    mask = np.uint64(_UINT32_MASK)
    prime1, prime2, prime3 = np.uint64(_XXH_PRIMES[0]), np.uint64(_XXH_PRIMES[1]), np.uint64(_XXH_PRIMES[2])
    prime4, prime5 = np.uint64(_XXH_PRIMES[3]), np.uint64(_XXH_PRIMES[4])
    position = start
    if end - start >= 16:
        lanes = np.empty(4, dtype=np.uint64)
        lanes[0] = (prime1 + prime2) & mask
        lanes[1] = prime2
        lanes[2] = np.uint64(0)
        lanes[3] = (np.uint64(1 << 32) - prime1) & mask
        while end - position >= 16:
            for lane in range(4):
                accumulator = (lanes[lane] + _word32(buf, position) * prime2) & mask
                lanes[lane] = (_rotl32(accumulator, 13) * prime1) & mask
                position += 4
        hash_value = (
            _rotl32(lanes[0], 1) + _rotl32(lanes[1], 7) + _rotl32(lanes[2], 12) + _rotl32(lanes[3], 18)
        ) & mask
    else:
        hash_value = prime5
    hash_value = (hash_value + np.uint64(end - start)) & mask
    while end - position >= 4:
        hash_value = (hash_value + _word32(buf, position) * prime3) & mask
        hash_value = (_rotl32(hash_value, 17) * prime4) & mask
        position += 4
    while position < end:
        hash_value = (hash_value + np.uint64(buf[position]) * prime5) & mask
        hash_value = (_rotl32(hash_value, 11) * prime1) & mask
        position += 1
    hash_value ^= hash_value >> np.uint64(15)
    hash_value = (hash_value * prime2) & mask
    hash_value ^= hash_value >> np.uint64(13)
    hash_value = (hash_value * prime3) & mask
    hash_value ^= hash_value >> np.uint64(16)
    return hash_value


def xxh32(data) -> int:
    """XXH32 (seed 0) of a bytes-like object."""
    return int(_xxh32(_readonly(np.frombuffer(data, dtype=np.uint8)), 0, len(data)))


_LZ4_MAGIC = 0x184D2204
_LZ4_UNCOMPRESSED_BLOCK = 0x80000000
_UINT32_LE = struct.Struct("<I")


def _unlz4(section, limit: int) -> bytes:
    """One lz4 frame like Kafka's `Lz4BlockInputStream`: version 1, independent blocks, checksummed descriptor."""
    size = len(section)
    if size < 7:
        raise _Undecodable(0, f"lz4 records of {size} bytes end inside the frame header")
    magic = _UINT32_LE.unpack_from(section, 0)[0]
    if magic != _LZ4_MAGIC:
        raise _Undecodable(0, f"lz4 frame magic 0x{magic:08X} is not 0x{_LZ4_MAGIC:08X}")
    flags, block_descriptor = section[4], section[5]
    if flags & 0x03 or (flags >> 6) != 1 or not flags & 0x20 or block_descriptor & 0x8F:
        raise _Undecodable(4, f"lz4 frame descriptor 0x{flags:02X} 0x{block_descriptor:02X} is not supported")
    block_size_code = block_descriptor >> 4
    if block_size_code < 4:
        raise _Undecodable(5, f"lz4 block size code {block_size_code} is below 4")
    max_block = 1 << (2 * block_size_code + 8)
    position = 6 + (8 if flags & 0x08 else 0)
    if position >= size:
        raise _Undecodable(0, "lz4 records end inside the frame header")
    raw = _readonly(np.frombuffer(section, dtype=np.uint8))
    if section[position] != (int(_xxh32(raw, 4, position)) >> 8) & 0xFF:
        raise _Undecodable(position, "lz4 frame descriptor checksum does not match")
    position += 1
    scratch = np.empty(max_block, dtype=np.uint8)
    pieces: list[bytes] = []
    total = 0
    while True:
        if size - position < 4:
            raise _Undecodable(position, f"lz4 records end at byte {_SECTION + size} before the frame's end mark")
        word = _UINT32_LE.unpack_from(section, position)[0]
        block_size = word & ~_LZ4_UNCOMPRESSED_BLOCK
        if block_size == 0:
            return b"".join(pieces)  # the end mark; Kafka's stream reads nothing after it
        if block_size > max_block:
            raise _Undecodable(
                position, f"lz4 block at byte {_SECTION + position} of {block_size} bytes exceeds {max_block}"
            )
        block_start = position + 4
        block_end = block_start + block_size
        if block_end > size:
            raise _Undecodable(position, f"lz4 block at byte {_SECTION + position} runs past the end of the records")
        block = section[block_start:block_end]
        if word & _LZ4_UNCOMPRESSED_BLOCK:
            piece = bytes(block)
        else:
            try:
                piece = scratch[: cramjam.lz4.decompress_block_into(block, scratch)].tobytes()
            except cramjam.DecompressionError as exc:
                raise _Undecodable(
                    position, f"lz4 block at byte {_SECTION + position} does not decompress: {exc}"
                ) from None
        position = block_end
        if flags & 0x10:
            if size - position < 4:
                raise _Undecodable(
                    position, f"lz4 records end inside the checksum of the block at byte {_SECTION + block_start - 4}"
                )
            if _UINT32_LE.unpack_from(section, position)[0] != int(_xxh32(raw, block_start, block_end)):
                raise _Undecodable(
                    block_start - 4, f"lz4 block at byte {_SECTION + block_start - 4} fails its checksum"
                )
            position += 4
        total += len(piece)
        if total > limit:
            raise _too_large(3, limit)
        pieces.append(piece)


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MASK = 0xFFFFFFF0
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50
_ZSTD_BLOCK_MAX = 128 * 1024
_ZSTD_DICTIONARY_ID_BYTES = (0, 1, 2, 4)
_ZSTD_CONTENT_SIZE_BYTES = (0, 2, 4, 8)


def _zstd_bound(section) -> int:
    """An upper bound of what the zstd frames of `section` decompress to, from their block headers (RFC 8878)."""
    size = len(section)
    position = bound = 0
    while position < size:
        if size - position < 5:
            raise _Undecodable(position, f"zstd records end inside a frame header at byte {_SECTION + position}")
        magic = _UINT32_LE.unpack_from(section, position)[0]
        if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE_MAGIC:
            if size - position < 8:
                raise _Undecodable(position, f"zstd records end inside a frame header at byte {_SECTION + position}")
            position += 8 + _UINT32_LE.unpack_from(section, position + 4)[0]
            continue
        if magic != _ZSTD_MAGIC:
            raise _Undecodable(position, f"zstd frame magic 0x{magic:08X} at byte {_SECTION + position} is unknown")
        descriptor = section[position + 4]
        single_segment = descriptor & 0x20
        content_size_bytes = _ZSTD_CONTENT_SIZE_BYTES[descriptor >> 6] or (1 if single_segment else 0)
        position += 5 + (0 if single_segment else 1) + _ZSTD_DICTIONARY_ID_BYTES[descriptor & 0x03] + content_size_bytes
        while True:
            if size - position < 3:
                raise _Undecodable(position, f"zstd records end inside a block header at byte {_SECTION + position}")
            header = int.from_bytes(section[position : position + 3], "little")
            block_type, block_size = (header >> 1) & 0x03, header >> 3
            if block_type == 3:
                raise _Undecodable(position, f"zstd block at byte {_SECTION + position} has the reserved block type")
            position += 3 + (1 if block_type == 1 else block_size)
            bound += _ZSTD_BLOCK_MAX if block_type == 2 else block_size
            if header & 0x01:
                break
        position += 4 if descriptor & 0x04 else 0
    if position > size:
        raise _Undecodable(size, "zstd records end inside a frame")
    return bound


def _unzstd(section, limit: int) -> np.ndarray:
    """zstd frames (skippable frames skipped) like zstd-jni's stream, into a buffer no larger than needed."""
    bound = _zstd_bound(section)
    output = np.empty(min(bound, limit + 1), dtype=np.uint8)
    try:
        written = cramjam.zstd.decompress_into(section, output)
    except cramjam.DecompressionError as exc:
        if bound > limit:
            raise _Undecodable(0, f"zstd records do not decompress within {limit} bytes: {exc}") from None
        raise _Undecodable(0, f"zstd records do not decompress: {exc}") from None
    if written > limit:
        raise _too_large(4, limit)
    output.flags.writeable = False
    return output[:written]


def _decompress(section, codec: int, limit: int) -> np.ndarray:
    """The decompressed records section as a read-only uint8 array, or _Undecodable."""
    if codec == 1:
        data = _gunzip(section, limit)
    elif codec == 2:
        data = _unsnappy(section, limit)
    elif codec == 3:
        data = _unlz4(section, limit)
    else:
        return _unzstd(section, limit)
    return np.frombuffer(data, dtype=np.uint8)  # read-only, as bytes are


def compress_records(records: bytes, codec: int) -> bytes:
    """The records section as a Kafka producer writes it with `codec` (0 none .. 4 zstd); used by the encoder.

    gzip without a timestamp; snappy in xerial framing of 32 KiB chunks; lz4 as `Lz4BlockOutputStream` writes it
    (64 KiB independent blocks, no checksums but the descriptor's); zstd as one frame.
    """
    if codec == 0:
        return records
    if codec == 1:
        return gzip.compress(records, mtime=0)
    if codec == 2:
        chunks = [
            bytes(cramjam.snappy.compress_raw(records[start : start + _XERIAL_CHUNK]))
            for start in range(0, len(records), _XERIAL_CHUNK)
        ]
        return _XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1) + b"".join(
            _BATCH_LENGTH.pack(len(chunk)) + chunk for chunk in chunks
        )
    if codec == 3:
        descriptor = bytes([0x60, 0x40])  # version 1, independent blocks; 64 KiB blocks
        frame = [_UINT32_LE.pack(_LZ4_MAGIC), descriptor, bytes([(xxh32(descriptor) >> 8) & 0xFF])]
        for start in range(0, len(records), 64 * 1024):
            block = records[start : start + 64 * 1024]
            compressed = bytes(cramjam.lz4.compress_block(block, store_size=False))
            if len(compressed) < len(block):
                frame += [_UINT32_LE.pack(len(compressed)), compressed]
            else:
                frame += [_UINT32_LE.pack(len(block) | _LZ4_UNCOMPRESSED_BLOCK), block]
        return b"".join([*frame, _UINT32_LE.pack(0)])
    if codec == 4:
        return bytes(cramjam.zstd.compress(records))
    raise ValueError(f"compression codec {codec} is not one of 0 (none) .. 4 (zstd)")


# --- per-batch columns of a decode window -------------------------------------------------------------------


def record_columns(view, starts: np.ndarray, ends: np.ndarray, verify: bool) -> dict[str, pa.Array]:
    """`record_problem` and `max_record_timestamp` of the v2 batches at [starts, ends) of the window `view`.

    The problem is null when the records parse (or were not checked: verification off, a negative record count,
    an unknown codec); the timestamp is null when there are no records or they do not parse. For LogAppendTime
    batches it is the batch's maxTimestamp, as Kafka gives every record that timestamp.
    """
    rows = len(starts)
    if not verify:
        return {"record_problem": pa.nulls(rows, pa.string()), "max_record_timestamp": pa.nulls(rows, pa.int64())}
    raw = _readonly(np.frombuffer(view, dtype=np.uint8))
    out = np.zeros((rows, _BATCH_COLUMNS), dtype=np.int64)
    _walk_batches(raw, np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64), out)
    undecodable: dict[int, str] = {}
    for row in np.flatnonzero(out[:, _PROBLEM] == _COMPRESSED).tolist():
        batch = out[row]
        section = view[int(starts[row]) + RECORD_BATCH_OVERHEAD : int(ends[row])]
        try:
            buffer = _decompress(section, int(batch[_ATTRIBUTES_BYTE]) & _CODEC_MASK, MAX_RECORDS_BYTES)
        except _Undecodable as exc:
            batch[_PROBLEM] = UNDECODABLE
            undecodable[row] = exc.reason
            continue
        _walk(buffer, 0, len(buffer), batch[_COUNT], batch[_LAST_OFFSET_DELTA], *_NO_FILL, batch)
    problem = out[:, _PROBLEM]
    texts = {row: undecodable.get(row) or _describe_row(out[row]) for row in np.flatnonzero(problem > OK).tolist()}
    has_timestamp = (problem == OK) & (out[:, _COUNT] > 0)
    log_append_time = (out[:, _ATTRIBUTES_BYTE] & _LOG_APPEND_TIME) != 0
    max_record_timestamp = np.where(
        log_append_time, out[:, _MAX_TIMESTAMP], out[:, _BASE_TIMESTAMP] + out[:, _MAX_DELTA]
    )
    return {
        "record_problem": _text_column(texts, rows),
        "max_record_timestamp": pa.array(max_record_timestamp, pa.int64(), mask=~has_timestamp),
    }


def _describe_row(batch: np.ndarray) -> str:
    problem, field, position, index, detail, extra = batch[_PROBLEM : _EXTRA + 1].tolist()
    codec = int(batch[_ATTRIBUTES_BYTE]) & _CODEC_MASK
    return _describe(problem, field, position, index, detail, extra, int(batch[_COUNT]), _where(codec))


def _text_column(texts: dict[int, str], rows: int) -> pa.Array:
    if not texts:
        return pa.nulls(rows, pa.string())
    values: list[str | None] = [None] * rows
    for row, text in texts.items():
        values[row] = text
    return pa.array(values, pa.string())


# --- the record API -------------------------------------------------------------------------------------


class Record(NamedTuple):
    """One record of a v2 batch; offset = baseOffset + offset_delta, timestamp = baseTimestamp + timestamp_delta
    (for LogAppendTime batches Kafka reports the batch's maxTimestamp instead)."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class RecordError(ValueError):
    """A batch whose records Kafka's reader would reject; `position` is the byte within the batch entry.

    For a compressed batch, problems inside the decompressed records are located at the start of the records
    section (61), and `reason` gives the position within the decompressed bytes.
    """

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"{reason} (batch byte {position})")
        self.position = position
        self.reason = reason


def iter_records(entry: bytes | memoryview, *, max_records_bytes: int = MAX_RECORDS_BYTES) -> Iterator[Record]:
    """The records of one whole v2 batch entry as stored in a segment (from its baseOffset field on).

    The batch is decompressed by its attributes and checked completely before the first record is returned:
    a malformed batch raises RecordError here, never halfway through the iteration.
    """
    view = memoryview(entry).cast("B")
    size = len(view)
    if size < RECORD_BATCH_OVERHEAD:
        raise RecordError(0, f"entry of {size} bytes is shorter than the {RECORD_BATCH_OVERHEAD}-byte batch header")
    if view[16] != 2:
        raise RecordError(16, f"magic {view[16]} is not 2")
    declared = 12 + _BATCH_LENGTH.unpack_from(view, 8)[0]
    if declared != size:
        raise RecordError(8, f"batch length declares a {declared}-byte entry but it has {size} bytes")
    count = _BATCH_LENGTH.unpack_from(view, _RECORD_COUNT_AT)[0]
    last_offset_delta = _BATCH_LENGTH.unpack_from(view, _LAST_OFFSET_DELTA_AT)[0]
    codec = view[_ATTRIBUTES_LOW_BYTE_AT] & _CODEC_MASK
    if count < 0:
        raise RecordError(_RECORD_COUNT_AT, f"record count {count} is negative")
    if codec >= _CODECS:
        raise RecordError(21, f"compression codec {codec} is unknown")
    if codec == 0:
        buffer, start = _readonly(np.frombuffer(view, dtype=np.uint8)), RECORD_BATCH_OVERHEAD
    else:
        try:
            buffer, start = _decompress(view[RECORD_BATCH_OVERHEAD:], codec, max_records_bytes), 0
        except _Undecodable as exc:
            raise RecordError(RECORD_BATCH_OVERHEAD + exc.position, exc.reason) from None
    end = len(buffer)
    result = np.zeros(_RESULT_COLUMNS, dtype=np.int64)
    _walk(buffer, start, end, count, last_offset_delta, *_NO_FILL, result)
    if result[_PROBLEM] != OK:
        problem, field, position, index, detail, extra = result[_PROBLEM : _EXTRA + 1].tolist()
        reason = _describe(problem, field, position, index, detail, extra, count, _where(codec))
        raise RecordError(position if codec == 0 else RECORD_BATCH_OVERHEAD, reason)
    records = np.empty((count, _RECORD_COLUMNS), dtype=np.int64)  # the walk found them all in the bytes
    headers = np.empty((int(result[_HEADER_TOTAL]), _HEADER_COLUMNS), dtype=np.int64)
    _walk(buffer, start, end, count, last_offset_delta, records, headers, result)
    return _records(memoryview(buffer), records.tolist(), headers.tolist())


def _records(data: memoryview, records: list[list[int]], headers: list[list[int]]) -> Iterator[Record]:
    def cut(start: int, length: int) -> bytes | None:
        return None if length < 0 else bytes(data[start : start + length])

    for offset_delta, timestamp_delta, key_start, key_length, value_start, value_length, first, count in records:
        record_headers = tuple(
            (bytes(data[name_start : name_start + name_length]).decode("utf-8", errors="replace"), cut(start, length))
            for name_start, name_length, start, length in headers[first : first + count]
        )
        yield Record(
            offset_delta, timestamp_delta, cut(key_start, key_length), cut(value_start, value_length), record_headers
        )
