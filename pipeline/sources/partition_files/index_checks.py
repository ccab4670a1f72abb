"""Sanity of `.index` and `.timeindex` against their segment (spec §1.2): sizes, ordering, and positions that must
land on a batch of the `.log`. What breaks is recorded as an index problem kind; the audit maps it to a rule.
"""

from __future__ import annotations

import bisect
import struct
import sys
from array import array
from collections.abc import Iterator
from functools import lru_cache, partial
from operator import itemgetter
from typing import NamedTuple

from pipeline.sources.kafka_format.entry_walk import RECORD_OVERHEAD_V0
from pipeline.sources.kafka_format.layout import HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD
from pipeline.sources.partition_files.binary_files import byte_range, entry_chunks
from pipeline.sources.partition_files.entries import ROWS_PER_BATCH, ByteReader, IndexProblem, LogReader

LOOKUP_CHUNKS = 16  # chunks of a `.index` kept to look up a `.timeindex`'s entries: 2 MiB of their columns
OFFSET_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, position in the .log
TIME_INDEX_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
_OFFSET_AND_SIZE = struct.Struct(">qi")
_V2_LAST_DELTA_AND_MAX_TIMESTAMP = struct.Struct(">i8xq")  # at byte 23: lastOffsetDelta, firstTimestamp, max
_V2_LAST_DELTA_AT = 23
_V1_TIMESTAMP = struct.Struct(">q")
_V1_TIMESTAMP_AT = 18


class _NoBatch(ValueError):
    """No batch header can be read where an index points; the message says why."""


class _BatchHeader(NamedTuple):
    last_offset: int
    max_timestamp: int | None  # None for magic 0, which has no timestamps
    next_position: int


def check_offset_index(data: bytes, base_offset: int, read_log: LogReader | None) -> list[IndexProblem]:
    """SEG-004 problems of a `.index` held in memory; see `offset_index_problems`."""
    return list(offset_index_problems(partial(byte_range, data), len(data), base_offset, read_log))


def check_time_index(
    data: bytes, base_offset: int, offset_index: bytes, read_log: LogReader | None
) -> list[IndexProblem]:
    """SEG-005 problems of a `.timeindex` and its `.index` held in memory; see `time_index_problems`."""
    lookup = OffsetLookup(partial(byte_range, offset_index), len(offset_index))
    return list(time_index_problems(partial(byte_range, data), len(data), base_offset, lookup, read_log))


def offset_index_problems(
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


def time_index_problems(
    read_index: ByteReader, size: int, base_offset: int, lookup: OffsetLookup, read_log: LogReader | None
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


class OffsetLookup:
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
        entries = array(
            "i", b"".join(data for _, data in entry_chunks(self._read_at, start, end, OFFSET_INDEX_ENTRY.size))
        )
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
    first zero entry after entry 0, one whose relative offset is 0 (DumpLogSegments stops there too), or at entry
    0 when it is all zeros. The broker never writes that one: it adds an entry only once more than
    index.interval.bytes were appended since the last (LogSegment.append), so never for the log's first batch, and
    the active segment's preallocated index is all zeros until then (a copy of a running broker shows it)."""
    whole = size - size % entry.size
    for chunk_position, chunk in entry_chunks(read_at, 0, whole, entry.size):
        for number, fields in enumerate(entry.iter_unpack(chunk)):
            position = chunk_position + number * entry.size
            if fields[relative_field] == 0 and (position > 0 or not any(fields)):
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
