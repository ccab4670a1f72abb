"""What a replay task makes of the rows it writes, besides the replay: the findings of the row-local frames and the
parts of the replay's aggregates.

The task holds whole partitions, so both are complete for them when it ends: the findings of each row
(pipeline.audit.core.row_checks), and each aggregate's parts merged over the partition's rows
(pipeline.audit.core.mergeable), which no Spark plan then aggregates from the replay again. Files get fresh names
and only those the driver hears of from a task that succeeded are read, as with the replay's own files.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.arrow_pass import ArrowPass
from pipeline.audit.core.expr import Rows
from pipeline.audit.core.mergeable import Mergeable
from pipeline.audit.core.row_checks import FrameChecks, findings_of, row_local_frames
from pipeline.sources.filesystems import resolve
from pipeline.tables.parquet_sink import COMPRESSION, ROW_GROUP_ROWS, ParquetFile

HELD_PARTS = 200_000  # part rows a partition's aggregate holds before it merges them


@dataclass(frozen=True)
class Aggregate:
    """An aggregate the tasks take over the rows they replay, and the schema of its parts (Spark's, for `of`)."""

    mergeable: Mergeable
    schema: pa.Schema

    @property
    def table(self) -> str:
        return parts_table(self.mergeable)


def parts_table(aggregate: Mergeable) -> str:
    """The scratch table of an aggregate's parts."""
    return f"parts/{aggregate.name}"


def findings_table(frame: str) -> str:
    """The scratch table of the findings a row-local frame's checks make in the replay's tasks."""
    return f"row_findings/{frame}"


@dataclass(frozen=True)
class TaskOutputs:
    """The row-local frames a task checks its rows on, the aggregates it takes of them, and the scratch folder
    whose `<table>/` folders its files go into."""

    frames: tuple[FrameChecks, ...]
    aggregates: tuple[Aggregate, ...]
    folder: str

    def schemas(self) -> dict[str, pa.Schema]:
        """Every table the tasks write, by name."""
        return {
            **{findings_table(frame.frame): frame.schema for frame in self.frames},
            **{aggregate.table: aggregate.schema for aggregate in self.aggregates},
        }

    def files(self) -> TableFiles:
        return TableFiles(self.folder, self.schemas())

    def parts(self) -> PartitionParts:
        return PartitionParts(self.aggregates)

    def check(self, rows: Rows, files: TableFiles) -> None:
        """The findings of `rows` into `files`."""
        for frame, found in findings_of(self.frames, rows):
            files.add(findings_table(frame), found)


def task_outputs(ctx, replay_schema: T.StructType, spark: SparkSession, folder: str, aggregates) -> TaskOutputs:
    """The outputs of the replay's tasks: every row-local frame's checks and the `aggregates` (Mergeable), the
    aggregates' schemas from Spark's analysis on the driver (no job)."""
    empty = spark.createDataFrame([], replay_schema)
    timezone = spark.conf.get("spark.sql.session.timeZone")
    return TaskOutputs(
        row_local_frames(ctx, replay_schema),
        tuple(Aggregate(a, to_arrow_schema(a.of(empty).schema, timezone=timezone)) for a in aggregates),
        folder.rstrip("/"),
    )


class TableFiles:
    """Rows of several tables streamed into one new file per table, under `<folder>/<table>/`: memory holds a row
    group of each whatever their number."""

    def __init__(self, folder: str, schemas: dict[str, pa.Schema]) -> None:
        self._handle, local = resolve(folder)
        self._folder, self._local = folder.rstrip("/"), local.rstrip("/")
        self._schemas = schemas
        self._files: dict[str, tuple[str, ParquetFile]] = {}

    def add(self, table: str, rows: pa.Table) -> None:
        if rows.num_rows == 0:
            return
        if table not in self._files:
            name = f"{table}/part-{uuid.uuid4().hex}.{COMPRESSION}.parquet"
            file = ParquetFile(self._handle, f"{self._local}/{name}", self._schemas[table])
            self._files[table] = (f"{self._folder}/{name}", file)
        self._files[table][1].add(rows)

    def close(self) -> list[tuple[str, str, int]]:
        """(table, path, rows) of each file written: a table without rows has none."""
        written = []
        for table, (path, file) in self._files.items():
            rows = file.close().rows
            written.append((table, path, rows))
        self._files.clear()
        return written


class HeldTables:
    """Rows of several tables held in memory until it is known they are to be written (`into`): the findings of a
    partition's replay that goes on from a kept one, which falls back to a whole replay when it cannot."""

    def __init__(self) -> None:
        self._rows: list[tuple[str, pa.Table]] = []

    def add(self, table: str, rows: pa.Table) -> None:
        if rows.num_rows:
            self._rows.append((table, rows))

    def into(self, files: TableFiles) -> None:
        for table, rows in self._rows:
            files.add(table, rows)


class PartitionParts:
    """The parts of each aggregate over the rows added, merged whenever they hold HELD_PARTS rows: a part row per
    group of the rows seen, a transaction- or producer-sized table, never a batch-sized one.

    The rows added are aggregated a row group at a time (ROW_GROUP_ROWS, what a task's Parquet file holds before it
    writes them), only the columns the aggregates read kept until then: an aggregate costs mostly per call, and the
    walks hand out small record batches."""

    def __init__(self, aggregates: tuple[Aggregate, ...]) -> None:
        self._aggregates = aggregates
        self._pieces: dict[str, list[pa.Table]] = {a.table: [] for a in aggregates}
        self._held = dict.fromkeys(self._pieces, 0)
        self._columns = list(dict.fromkeys(name for a in aggregates for name in a.mergeable.columns))
        self._rows: list[pa.Table] = []
        self._row_count = 0

    def add(self, rows: Rows) -> None:
        if rows.num_rows == 0:
            return
        table = rows if isinstance(rows, pa.Table) else pa.Table.from_batches([rows])
        self._rows.append(table.select(self._columns))
        self._row_count += table.num_rows
        if self._row_count >= ROW_GROUP_ROWS:
            self._aggregate()

    def _aggregate(self) -> None:
        if not self._rows:
            return
        table = pa.concat_tables(self._rows)
        self._rows, self._row_count = [], 0
        for aggregate in self._aggregates:
            piece = aggregate.mergeable.of_rows(table, aggregate.schema)
            self._pieces[aggregate.table].append(piece)
            self._held[aggregate.table] += piece.num_rows
            if self._held[aggregate.table] >= HELD_PARTS and len(self._pieces[aggregate.table]) > 1:
                merged = self._merged(aggregate)
                self._pieces[aggregate.table], self._held[aggregate.table] = [merged], merged.num_rows

    def tables(self) -> Iterator[tuple[str, pa.Table]]:
        """Each aggregate's parts over every row added, one row per group."""
        self._aggregate()
        for aggregate in self._aggregates:
            if self._pieces[aggregate.table]:
                yield aggregate.table, self._merged(aggregate)

    def _merged(self, aggregate: Aggregate) -> pa.Table:
        pieces = self._pieces[aggregate.table]
        if len(pieces) == 1:
            return pieces[0]
        return aggregate.mergeable.merged_rows(pa.concat_tables(pieces), aggregate.schema)


def remove_files(written: list[tuple[str, str, int]]) -> None:
    """Delete files of rows whose replay was given up (a whole replay follows)."""
    for _, path, _ in written:
        handle, local = resolve(path)
        handle.delete_file(local)


def checked_pass(replay: ArrowPass, outputs: TaskOutputs) -> ArrowPass:
    """The replay pass whose tasks also check the rows they hand out and aggregate them: its function names the
    table of each record batch (`replay`, the findings and parts tables), for Scratch.materialise_tables. Each task
    holds whole partitions (the exchange clusters them), so its parts are complete."""
    return ArrowPass(replay.rows, partial(_checked, replay.function, outputs), replay.schema)


def _checked(
    function: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
    outputs: TaskOutputs,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[tuple[str, pa.RecordBatch]]:
    parts = outputs.parts()
    for batch in function(batches):
        yield "replay", batch
        for frame, found in findings_of(outputs.frames, batch):
            for piece in found.to_batches():
                yield findings_table(frame), piece
        parts.add(batch)
    for table, rows in parts.tables():
        for piece in rows.to_batches():
            yield table, piece
