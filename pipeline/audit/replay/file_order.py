"""What an entry's neighbours in its replica's files were: the state the §6.1 order checks compare.

The first walk of a replay task (pipeline.audit.replay.task): the rows arrive sorted by replica and file order
(segment base offset, position), a record batch at a time, and leave with FILE_ORDER_COLUMNS added. Lags,
running maxima and sums restart at every replica; what a replica's rows so far leave for the next batch is a
`FileOrderCarry` of a few numbers, and the next entry's segment is read from the following batch, so memory
holds two record batches whatever the replica's size. The window-function definition it must match is kept as
the test reference (tests/reference_replay.py, `with_file_order_state`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.audit.replay.arrow_columns import NONE, group_starts, int64_values, key_at
from schemas.batches import STATUS_LEGACY, STATUS_OK, STATUS_TRUNCATED
from schemas.keys import REPLICA
from schemas.replay import FILE_ORDER_COLUMNS

_TYPES = {field.name: field.type for field in to_arrow_schema(FILE_ORDER_COLUMNS)}


@dataclass
class FileOrderCarry:
    """The last row seen and its replica's running values up to and including it."""

    replica: tuple | None = None
    readable_last_offset: int = NONE
    max_last_offset: int = NONE
    max_leader_epoch: int = NONE
    readable_bytes: int = 0
    segment: int = NONE
    truncated: int = 0  # truncated tails up to and including the row

    def kept(self) -> list[int]:
        return [
            self.readable_last_offset,
            self.max_last_offset,
            self.max_leader_epoch,
            self.readable_bytes,
            self.segment,
            self.truncated,
        ]

    @classmethod
    def of(cls, replica: tuple, kept: list[int]) -> FileOrderCarry:
        return cls(replica, *kept)


def with_file_order(
    batches: Iterator[pa.RecordBatch],
    earlier: dict[tuple, FileOrderCarry] | None = None,
    ends: dict[tuple, FileOrderCarry] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Every row once, in the order received, with FILE_ORDER_COLUMNS added.

    A replica in `earlier` goes on from its carry there, as if its earlier rows had come first; every replica's
    carry at its last row goes into `ends`.
    """
    carry = FileOrderCarry()
    waiting = None  # a batch whose last row's next entry may be the next batch's first
    for batch in batches:
        if batch.num_rows == 0:
            continue
        if waiting is not None:
            yield _with_columns(waiting, carry, batch, earlier or {}, ends)
        waiting = batch
    if waiting is not None:
        yield _with_columns(waiting, carry, None, earlier or {}, ends)


def _with_columns(
    batch: pa.RecordBatch,
    carry: FileOrderCarry,
    following: pa.RecordBatch | None,
    earlier: dict[tuple, FileOrderCarry],
    ends: dict[tuple, FileOrderCarry] | None,
) -> pa.RecordBatch:
    rows = pa.Table.from_batches([batch])
    starts = group_starts(rows, REPLICA, carry.replica)
    status = rows.column("entry_status")
    readable = pc.is_in(status, pa.array([STATUS_OK, STATUS_LEGACY])).to_numpy(zero_copy_only=False)
    v2 = pc.and_(pc.equal(status, STATUS_OK), pc.equal(rows.column("magic"), 2))
    v2 = pc.fill_null(v2, False).to_numpy(zero_copy_only=False)
    readable_last = np.where(readable, int64_values(rows, "last_offset"), NONE)
    v2_epoch = np.where(v2, int64_values(rows, "partition_leader_epoch"), NONE)
    segment = int64_values(rows, "segment_base_offset")
    size = int64_values(rows, "size_bytes")
    readable_size = np.where(readable & (size != NONE), size, 0)
    truncated = pc.fill_null(pc.equal(status, STATUS_TRUNCATED), False).to_numpy(zero_copy_only=False).astype(np.int64)
    bounds = [0, *(np.flatnonzero(starts[1:]) + 1), len(segment)]
    columns = {
        "previous_readable_last_offset": _earlier(readable_last, starts),
        "max_last_offset_before": _earlier(_running_max(readable_last, bounds), starts),
        "max_leader_epoch_before": _earlier(_running_max(v2_epoch, bounds), starts),
        "readable_bytes_before": _sum_before(readable_size, bounds),
        "_truncated_before": _sum_before(truncated, bounds),
        "is_segment_first": starts.copy(),
        "next_entry_segment_base_offset": _later(segment, starts),
    }
    columns["is_segment_first"][1:] |= segment[1:] != segment[:-1]
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        before = carry if start == 0 and not starts[0] else earlier.get(key_at(rows, start, REPLICA))
        if before is None:
            continue
        continued = slice(start, end)
        columns["previous_readable_last_offset"][start] = before.readable_last_offset
        for name, value in (
            ("max_last_offset_before", before.max_last_offset),
            ("max_leader_epoch_before", before.max_leader_epoch),
        ):
            np.maximum(columns[name][continued], value, out=columns[name][continued])
        columns["readable_bytes_before"][continued] += before.readable_bytes
        columns["_truncated_before"][continued] += before.truncated
        columns["is_segment_first"][start] = segment[start] != before.segment
    last = len(segment) - 1
    if following is not None and key_at(following, 0, REPLICA) == key_at(rows, last, REPLICA):
        columns["next_entry_segment_base_offset"][last] = following.column("segment_base_offset")[0].as_py()

    def carry_at(row: int, into: FileOrderCarry) -> FileOrderCarry:
        """`into` as the replica of `row` leaves it after that row."""
        into.replica = key_at(rows, row, REPLICA)
        into.readable_last_offset = int(readable_last[row])
        into.max_last_offset = int(max(columns["max_last_offset_before"][row], readable_last[row]))
        into.max_leader_epoch = int(max(columns["max_leader_epoch_before"][row], v2_epoch[row]))
        into.readable_bytes = int(columns["readable_bytes_before"][row] + readable_size[row])
        into.segment = int(segment[row])
        into.truncated = int(columns["_truncated_before"][row] + truncated[row])
        return into

    if ends is not None:
        for end in bounds[1:]:
            ended = carry_at(end - 1, FileOrderCarry())
            ends[ended.replica] = ended
    carry_at(last, carry)
    del columns["_truncated_before"]
    for name, values in columns.items():
        mask = values == NONE if values.dtype == np.int64 else None
        rows = rows.append_column(name, pa.array(values, mask=mask).cast(_TYPES[name]))
    return rows.combine_chunks().to_batches()[0]


def _running_max(values: np.ndarray, bounds: list[int]) -> np.ndarray:
    """The maximum so far, restarting at every replica."""
    out = np.empty_like(values)
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        np.maximum.accumulate(values[start:end], out=out[start:end])
    return out


def _sum_before(values: np.ndarray, bounds: list[int]) -> np.ndarray:
    """The sum of the rows before each row, restarting at every replica (0 on a replica's first row)."""
    out = np.empty_like(values)
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        np.cumsum(values[start:end], out=out[start:end])
        out[start:end] -= values[start:end]
    return out


def _earlier(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The previous row's value in the same replica (NONE on a replica's first row)."""
    out = np.full_like(values, NONE)
    out[1:] = values[:-1]
    out[starts] = NONE
    return out


def _later(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The next row's value in the same replica (NONE on a replica's last row)."""
    out = np.full_like(values, NONE)
    out[:-1] = values[1:]
    out[:-1][starts[1:]] = NONE
    return out
