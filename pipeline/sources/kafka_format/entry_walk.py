"""The numba kernel that walks entry boundaries over a window's bytes, and the stop an entry the broker would not
read becomes: the walk never allocates from a length it reads.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pipeline.sources.kafka_format.layout import (
    HEADER_SIZE_UP_TO_MAGIC,
    INT32,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    SIZE_AND_MAGIC,
    Stop,
    njit_kernel,
)
from schemas.batches import STATUS_BAD_MAGIC, STATUS_TOO_SMALL, STATUS_TRUNCATED

RECORD_OVERHEAD_V0 = 14  # smallest legal `size` of any entry
_V2_MIN_SIZE = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD


class Walk(NamedTuple):
    starts: np.ndarray  # int64 positions in the window of the complete entries the broker can iterate
    end: int  # where the walk ended: the end of the last of them
    stop: Stop | None  # the entry the broker stops at, if it is in the window
    legacy: int  # how many of the entries are magic 0 or 1 messages


def walk_entries(view) -> Walk:
    """Follow the entry chain through the window, like `FileLogInputStream.nextBatch`; `_stop_at` says why it ended."""
    starts, end, legacy = _entry_chain(window_byte_array(view))
    stop = _stop_at(view, end) if end <= len(view) - HEADER_SIZE_UP_TO_MAGIC else None
    return Walk(starts, end, stop, legacy)


def window_byte_array(view) -> np.ndarray:
    """The window as a read-only uint8 array, so each kernel compiles once whatever buffer type the bytes came in."""
    raw = np.frombuffer(view, dtype=np.uint8)
    raw.flags.writeable = False
    return raw


_ONE, _TWO, _THREE = np.uint64(1), np.uint64(2), np.uint64(3)


@njit_kernel
def uint16_at(raw, position):
    """Big-endian. Unsigned indices spare numba's negative-index fix-up, so LLVM merges the loads into one."""
    at = np.uint64(position)
    return (np.int64(raw[at]) << 8) | np.int64(raw[at + _ONE])


@njit_kernel
def uint32_at(raw, position):
    at = np.uint64(position)
    return (
        (np.int64(raw[at]) << 24)
        | (np.int64(raw[at + _ONE]) << 16)
        | (np.int64(raw[at + _TWO]) << 8)
        | np.int64(raw[at + _THREE])
    )


@njit_kernel
def int32_at(raw, position):
    return np.int32(uint32_at(raw, position))


@njit_kernel
def int64_at(raw, position):
    return (uint32_at(raw, position) << 32) | uint32_at(raw, position + 4)


@njit_kernel
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


@njit_kernel
def _follow_entries(raw, position, starts):
    """`_entry_chain` until `starts` is full: how many starts it wrote, where it is, and how many are legacy."""
    count = legacy = 0
    while count < starts.size and position <= raw.size - HEADER_SIZE_UP_TO_MAGIC:
        size = int32_at(raw, position + 8)
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


def _stop_at(view, position: int) -> Stop | None:
    """Why the walk stopped at `position`, in `FileLogInputStream.nextBatch` order; None if the entry is partial."""
    size, magic = SIZE_AND_MAGIC.unpack_from(view, position + 8)
    if size < RECORD_OVERHEAD_V0:
        return Stop(STATUS_TOO_SMALL, position, f"entry size {size} is below the {RECORD_OVERHEAD_V0}-byte minimum")
    if position + LOG_OVERHEAD + size > len(view):
        return None
    if magic > 2:
        signed_magic = magic - 256 if magic > 127 else magic
        return Stop(STATUS_BAD_MAGIC, position, f"magic byte {signed_magic} is not 0, 1 or 2")
    return Stop(
        STATUS_TOO_SMALL,
        position,
        f"v2 batch of {LOG_OVERHEAD + size} bytes is below the {RECORD_BATCH_OVERHEAD}-byte batch header",
    )


def truncated_entry(view, position: int, bytes_to_eof: int) -> Stop | None:
    """The partial trailing entry at `position`, or None when the rest of it is still to be read."""
    remaining = bytes_to_eof - position
    in_window = len(view) - position
    if in_window < HEADER_SIZE_UP_TO_MAGIC:
        if in_window < remaining:
            return None
        return Stop(
            STATUS_TRUNCATED, position, f"{remaining} trailing bytes do not hold a {HEADER_SIZE_UP_TO_MAGIC}-byte entry"
        )
    declared = LOG_OVERHEAD + INT32.unpack_from(view, position + 8)[0]
    if declared <= remaining:
        return None
    return Stop(
        STATUS_TRUNCATED,
        position,
        f"entry declares {declared} bytes but the file ends {remaining} bytes after its start",
    )
