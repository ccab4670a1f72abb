"""Arrow columns as numpy arrays for the compiled replay: nulls become a sentinel the kernels can compare."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

NONE = np.iinfo(np.int64).min  # "no value" in int64 inputs, state and outputs; becomes null in the table


def int64_values(rows: pa.Table, name: str) -> np.ndarray:
    """The column as int64, NONE where it is null."""
    column = rows.column(name).combine_chunks().cast(pa.int64())
    return pc.fill_null(column, NONE).to_numpy(zero_copy_only=False)


def flag_values(rows: pa.Table, name: str) -> np.ndarray:
    """A boolean column as int64 0/1, null as 0."""
    return pc.fill_null(rows.column(name).combine_chunks(), False).to_numpy(zero_copy_only=False).astype(np.int64)


def key_at(rows: pa.Table | pa.RecordBatch, row: int, key: list[str]) -> tuple:
    """The values of the `key` columns at `row`."""
    return tuple(rows.column(name)[row].as_py() for name in key)


def group_starts(rows: pa.Table | pa.RecordBatch, key: list[str], previous: tuple | None) -> np.ndarray:
    """Whether each row (of rows sorted by `key`) begins a group of equal `key`; the first row does when its key
    differs from `previous`, the key of the row before it (None when there was none)."""
    starts = np.zeros(rows.num_rows, dtype=np.bool_)
    if rows.num_rows == 0:
        return starts
    starts[0] = previous is None or key_at(rows, 0, key) != previous
    for name in key:
        column = rows.column(name)
        column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            changed = pc.not_equal(column.slice(0, len(column) - 1), column.slice(1))  # compared, not encoded
            starts[1:] |= pc.fill_null(changed, True).to_numpy(zero_copy_only=False)  # a null begins a group
            continue
        if pa.types.is_boolean(column.type):
            values = pc.fill_null(column, False).to_numpy(zero_copy_only=False)
        else:
            values = pc.fill_null(column.cast(pa.int64()), NONE).to_numpy(zero_copy_only=False)
        starts[1:] |= values[1:] != values[:-1]
    return starts
