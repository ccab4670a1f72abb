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
