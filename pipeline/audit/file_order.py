"""What an entry's neighbours in its replica's files were: the state the §6.1 order checks compare.

Computed with numpy over one replica's rows in file order (segment base offset, position), inside the same
`mapInArrow` pass as the producer state (pipeline.audit.producer_arrow), so the replay needs no window and
no sort of its own for it. The window-function definition it must match is kept as the test reference
(tests/reference_replay.py, `with_file_order_state`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.audit.arrow_columns import NONE, int64_values
from schemas.batches import STATUS_LEGACY, STATUS_OK
from schemas.replay import FILE_ORDER_COLUMNS

_TYPES = {field.name: field.type for field in to_arrow_schema(FILE_ORDER_COLUMNS)}


def file_order_columns(rows: pa.Table, starts: np.ndarray) -> dict[str, pa.Array]:
    """The FILE_ORDER_COLUMNS of rows that hold whole replicas in file order; `starts` marks each one's first row."""
    status = rows.column("entry_status")
    readable = pc.is_in(status, pa.array([STATUS_OK, STATUS_LEGACY])).to_numpy(zero_copy_only=False)
    v2 = pc.and_(pc.equal(status, STATUS_OK), pc.equal(rows.column("magic"), 2))
    v2 = pc.fill_null(v2, False).to_numpy(zero_copy_only=False)
    readable_last = np.where(readable, int64_values(rows, "last_offset"), NONE)
    v2_epoch = np.where(v2, int64_values(rows, "partition_leader_epoch"), NONE)
    segment = int64_values(rows, "segment_base_offset")
    size = int64_values(rows, "size_bytes")
    bounds = [*np.flatnonzero(starts), len(segment)]
    first = starts.copy()
    first[1:] |= segment[1:] != segment[:-1]
    columns = {
        "previous_readable_last_offset": _earlier(readable_last, starts),
        "max_last_offset_before": _earlier(_running_max(readable_last, bounds), starts),
        "max_leader_epoch_before": _earlier(_running_max(v2_epoch, bounds), starts),
        "readable_bytes_before": _sum_before(np.where(readable & (size != NONE), size, 0), bounds),
        "is_segment_first": first,
        "next_entry_segment_base_offset": _later(segment, starts),
    }
    return {
        name: pa.array(values, mask=values == NONE if values.dtype == np.int64 else None).cast(_TYPES[name])
        for name, values in columns.items()
    }


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
