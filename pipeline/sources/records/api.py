"""`iter_records`: the records of one batch for callers outside Spark (tests, the payload hashes), and
`window_records`: those of every batch of a window, for the coordinator-record readers."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import NamedTuple

import numpy as np

from pipeline.sources.records.decompression import Undecodable, decompress_section
from pipeline.sources.records.layout import (
    ATTRIBUTES_LOW_BYTE_AT,
    BATCH_LENGTH,
    CODEC_MASK,
    CODECS,
    LAST_OFFSET_DELTA_AT,
    MAX_RECORDS_BYTES,
    RECORD_BATCH_OVERHEAD,
    RECORD_COUNT_AT,
)
from pipeline.sources.records.walk import (
    EXTRA,
    HEADER_COLUMNS,
    HEADER_TOTAL,
    NO_FILL,
    OK,
    PROBLEM,
    RECORD_COLUMNS,
    RESULT_COLUMNS,
    describe,
    position_wording,
    read_only_view,
    walk_records,
    walk_window_records,
)


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
    declared = 12 + BATCH_LENGTH.unpack_from(view, 8)[0]
    if declared != size:
        raise RecordError(8, f"batch length declares a {declared}-byte entry but it has {size} bytes")
    count = BATCH_LENGTH.unpack_from(view, RECORD_COUNT_AT)[0]
    last_offset_delta = BATCH_LENGTH.unpack_from(view, LAST_OFFSET_DELTA_AT)[0]
    codec = view[ATTRIBUTES_LOW_BYTE_AT] & CODEC_MASK
    if count < 0:
        raise RecordError(RECORD_COUNT_AT, f"record count {count} is negative")
    if codec >= CODECS:
        raise RecordError(21, f"compression codec {codec} is unknown")
    if codec == 0:
        buffer, start = read_only_view(np.frombuffer(view, dtype=np.uint8)), RECORD_BATCH_OVERHEAD
    else:
        try:
            buffer, start = decompress_section(view[RECORD_BATCH_OVERHEAD:], codec, max_records_bytes), 0
        except Undecodable as exc:
            raise RecordError(RECORD_BATCH_OVERHEAD + exc.position, exc.reason) from None
    end = len(buffer)
    result = np.zeros(RESULT_COLUMNS, dtype=np.int64)
    walk_records(buffer, start, end, count, last_offset_delta, *NO_FILL, result)
    if result[PROBLEM] != OK:
        problem, field, position, index, detail, extra = result[PROBLEM : EXTRA + 1].tolist()
        reason = describe(problem, field, position, index, detail, extra, count, position_wording(codec))
        raise RecordError(position if codec == 0 else RECORD_BATCH_OVERHEAD, reason)
    records = np.empty((count, RECORD_COLUMNS), dtype=np.int64)  # the walk found them all in the bytes
    headers = np.empty((int(result[HEADER_TOTAL]), HEADER_COLUMNS), dtype=np.int64)
    walk_records(buffer, start, end, count, last_offset_delta, records, headers, result)
    return _records(memoryview(buffer), records.tolist(), headers.tolist())


def window_records(view: memoryview, starts: list[int], ends: list[int]) -> Iterator[list[Record] | RecordError]:
    """The records of the whole v2 batch entries at [starts, ends) of `view`, per entry what `iter_records` gives
    (or the RecordError it raises).

    A window of small uncompressed batches (the coordinator topics write one record a batch) is walked in one
    compiled call rather than two per batch; the entries that walk leaves out go through `iter_records`.
    """
    raw = read_only_view(np.frombuffer(view, dtype=np.uint8))
    walked, first, records, headers = walk_window_records(
        raw, np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    )
    decoded = _records(view, records.tolist(), headers.tolist())
    first_rows = first.tolist()
    for start, end, walked_here, low, high in zip(
        starts, ends, walked.tolist(), first_rows[:-1], first_rows[1:], strict=True
    ):
        if walked_here:
            yield list(islice(decoded, high - low))
            continue
        try:
            yield list(iter_records(view[start:end]))
        except RecordError as exc:
            yield exc


def _records(data: memoryview, records: list[list[int]], headers: list[list[int]]) -> Iterator[Record]:
    def cut(start: int, length: int) -> bytes | None:
        return None if length < 0 else bytes(data[start : start + length])

    def header(name_start: int, name_length: int, start: int, length: int) -> tuple[str, bytes | None]:
        return bytes(data[name_start : name_start + name_length]).decode("utf-8", errors="replace"), cut(start, length)

    for offset_delta, timestamp_delta, key_start, key_length, value_start, value_length, first, count in records:
        # Most records have no headers: no generator for them.
        record_headers = tuple(header(*row) for row in headers[first : first + count]) if count else ()
        yield Record(
            offset_delta, timestamp_delta, cut(key_start, key_length), cut(value_start, value_length), record_headers
        )
