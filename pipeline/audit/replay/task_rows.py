"""The rows one task received, kept so that the task can sort them itself: in memory up to a bound, beyond it in a
local Arrow file that is memory-mapped, so the rows are paged in as a sort's chunks take them.

Spark's sort of a wide row costs more than the work done on it (the replay's two sorts and two Arrow round trips
were most of its time, BENCHMARKS.md). Sorting in the task needs only the key columns and a permutation; the rows
themselves are taken a chunk at a time in the order asked for.
"""

from __future__ import annotations

import os
import random
import tempfile
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

HELD_ROWS = 200_000  # rows kept in memory; a task with more writes them all to a local file
CHUNK_ROWS = 16_384  # rows taken at a time in a sorted order


class TaskRows:
    """Record batches added in any order; `table()` is all of them.

    Past HELD_ROWS the rows go to the file in pieces of HELD_ROWS rows, each one record batch: a take from a
    table of few large chunks costs about what it costs in memory, one of many small chunks several times more.
    """

    def __init__(self) -> None:
        self._held: list[pa.RecordBatch] = []
        self._held_rows = 0
        self._path: str | None = None
        self._writer: pa.ipc.RecordBatchFileWriter | None = None

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        self._held.append(batch)
        self._held_rows += batch.num_rows
        if self._held_rows >= HELD_ROWS:
            self._write_held()

    def table(self) -> pa.Table | None:
        """Every row added (None when there was none); a file's rows are mapped, not read."""
        if self._writer is None:
            return pa.Table.from_batches(self._held).combine_chunks() if self._held else None
        self._write_held()
        self._writer.close()
        self._writer = None
        with pa.memory_map(self._path) as source:
            return pa.ipc.open_file(source).read_all()

    def _write_held(self) -> None:
        if not self._held:
            return
        if self._writer is None:
            self._path = spill_file("produce-audit-task-", ".arrow")
            self._writer = pa.ipc.new_file(self._path, self._held[0].schema)
        self._writer.write_table(pa.Table.from_batches(self._held).combine_chunks())
        self._held, self._held_rows = [], 0

    def close(self) -> None:
        self._held = []
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._path is not None:
            os.unlink(self._path)  # a mapped table stays readable until it is released
            self._path = None

    def __enter__(self) -> TaskRows:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def spill_file(prefix: str, suffix: str) -> str:
    """A new empty local file for rows that do not stay in memory: in one of the executor's local directories
    (`spark.local.dir`, which Spark hands its Python workers as SPARK_LOCAL_DIRS), where a cluster keeps its
    spill space; the system's temporary folder otherwise."""
    folders = [folder for folder in os.environ.get("SPARK_LOCAL_DIRS", "").split(",") if folder]
    handle, path = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=random.choice(folders) if folders else None)
    os.close(handle)
    return path


def sort_order(table: pa.Table, keys: list[str]) -> np.ndarray:
    """The row indices of `table` sorted by `keys` ascending, nulls first (as Spark sorts), ties kept in order.

    A key of one value on every row (the replica's, mostly: a task replays a partition at a time) orders nothing
    and is left out, which halves the cost of the sort."""
    keys = [key for key in keys if not _uniform(table[key])]
    if not keys:
        return np.arange(table.num_rows, dtype=np.int64)
    sort_keys = [(key, "ascending", "at_start") for key in keys]
    ranked = pa.table({key: _ranked(table[key]) for key in keys}).combine_chunks()
    return pc.sort_indices(ranked, sort_keys=sort_keys).to_numpy().astype(np.int64)


def _uniform(column: pa.ChunkedArray) -> bool:
    """Whether every value of the column is the same one (or null)."""
    nulls = column.null_count
    return nulls == len(column) or (nulls == 0 and pc.all(pc.equal(column, column[0])).as_py())


def _ranked(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A text column as each value's rank among its distinct values (null stays null): the same order, in four bytes
    a row, so that sorting by a file path does not copy every row's path into memory."""
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return column
    distinct = pc.unique(column).drop_null()
    return pc.index_in(column, value_set=distinct.take(pc.sort_indices(distinct)))


def in_order(table: pa.Table, order: np.ndarray) -> Iterator[pa.RecordBatch]:
    """The rows of `table` as record batches, in `order`, CHUNK_ROWS at a time.

    Each chunk is taken piece by piece from the record batches that hold its rows, then put in order: Arrow's
    take from a chunked table resolves the chunk of every index of every column on its own, several times slower.
    """
    pieces = table.to_batches()
    piece_starts = np.cumsum([0, *(piece.num_rows for piece in pieces)])
    for start in range(0, len(order), CHUNK_ROWS):
        wanted = order[start : start + CHUNK_ROWS]
        if len(pieces) == 1:
            yield pieces[0].take(wanted)
            continue
        piece_of = np.searchsorted(piece_starts, wanted, side="right") - 1
        by_piece = np.argsort(piece_of, kind="stable")
        taken = [
            pieces[piece].take(wanted[by_piece[begin:end]] - piece_starts[piece])
            for piece, begin, end in _runs(piece_of[by_piece])
        ]
        back = np.empty_like(by_piece)
        back[by_piece] = np.arange(len(by_piece))
        yield pa.Table.from_batches(taken).combine_chunks().take(back).to_batches()[0]


def _runs(values: np.ndarray) -> Iterator[tuple[int, int, int]]:
    """(value, begin, end) of each run of equal values of a sorted array."""
    bounds = [0, *(np.flatnonzero(values[1:] != values[:-1]) + 1), len(values)]
    for begin, end in zip(bounds[:-1], bounds[1:], strict=True):
        yield int(values[begin]), begin, end
