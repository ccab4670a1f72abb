"""Decoding a segment a window at a time, as the broker's `FileLogInputStream.nextBatch` walks it (spec §1.1.6, §6.0
step 1): one row per entry, the entry the broker would stop at included, so integrity rules are plain filters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from pipeline.sources.kafka_format.entry_walk import truncated_entry, walk_entries
from pipeline.sources.kafka_format.layout import HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, SIZE_AND_MAGIC
from pipeline.sources.kafka_format.v2_columns import build_table

DEFAULT_WINDOW_BYTES = 8 * 1024 * 1024
_SYNC_BLOCK_BYTES = 256 * 1024  # read size of `next_entry_start`: many small entries, or one large entry's header
_STRADDLE_READ_BYTES = 64 * 1024  # least read past the end of a byte range, to finish its last entry


class DecodedWindow(NamedTuple):
    """Rows of the entries that start in a window of a segment, and where decoding continues.

    `resume_at` is the file position of the first entry not yet decoded (the window ended inside it), or None
    when the segment is finished: its end was reached or an entry the broker cannot iterate past was found.
    """

    table: pa.Table
    resume_at: int | None


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
    walk = walk_entries(view)
    stop = walk.stop
    if stop is None and walk.end < available:
        stop = truncated_entry(view, walk.end, file_size - file_position)
    table = build_table(view, walk, stop, file_position, file_size, verify_records)
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
        walk = walk_entries(memoryview(block))
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
            size, magic = SIZE_AND_MAGIC.unpack_from(block, 8)
            advance = LOG_OVERHEAD + size
            if position + advance > file_size or magic > 2:
                return None
        position += advance
    return position
