"""Arrow rows written as Hive-partitioned Parquet files into a staging folder by the tasks themselves (pyarrow).

Spark's own Parquet writer turns every Arrow batch a Python task hands back into JVM rows and writes those value by
value, and delta-spark computes each file's statistics with one more expression per column: for `batches`, 36
columns, that takes more than ten times what pyarrow takes to write the same rows (BENCHMARKS.md, "Rows written
where they are made").
Tasks that already hold Arrow data (the segment decode) therefore write their files here, and the files are
committed like any staged write (pipeline.tables.staged_write): the folder layout and the names are Spark's, so
the commit cannot tell who wrote them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import date
from functools import partial
from typing import Any, NamedTuple, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.arrow_pass import ArrowFunction, ArrowPass
from pipeline.sources.filesystems import resolve, shipped

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
ROW_GROUP_ROWS = 131_072  # rows buffered into one row group: small Arrow batches would make tiny ones
COMPRESSION = "snappy"  # Spark's default, so files read the same whoever wrote them

WRITTEN_FILES = T.StructType([T.StructField("path", T.StringType(), False), T.StructField("rows", T.LongType(), False)])


class FileFacts(Protocol):
    """What a pass learns of each file's rows while it writes them (the ingest manifest's facts of a segment's
    rows), handed back with the file instead of read again by another job."""

    def add(self, table: pa.Table) -> None: ...

    def values(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Described:
    """The facts a pass gathers per written file: their columns, and a new accumulator for each file."""

    schema: T.StructType
    new: Callable[[], FileFacts]


class WrittenFile(NamedTuple):
    path: str
    rows: int
    facts: dict[str, Any] | None = None


# Spark's ExternalCatalogUtils.escapePathName: these characters and the control characters become %XX.
_ESCAPED = frozenset("\"#%'*/:=?\\\x7f{[]^") | frozenset(chr(code) for code in range(0x20))


def escape_path_name(text: str) -> str:
    """A partition value or column name as Spark writes it into a folder name."""
    return "".join(f"%{ord(char):02X}" if char in _ESCAPED else char for char in text)


def partition_folder(names: list[str], values: Iterable[Any]) -> str:
    """`name=value/...` as Spark lays out the partitions of `names` (a null or empty value is Hive's default
    partition)."""
    return "/".join(
        f"{escape_path_name(name)}={HIVE_NULL if value in (None, '') else escape_path_name(_folder_text(value))}"
        for name, value in zip(names, values, strict=True)
    )


def _folder_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


class PartitionedParquetSink:
    """Tables of `schema` into the staging `folder`, one open file per partition value; `close` ends them all.

    With `file_by`, a file also holds one value of that column only (`batches`: one segment file's rows), so that
    a later write can keep or drop it whole; rows are expected grouped by it, as a task reads one segment after
    another, and a new value closes the files open. The partition columns are left out of the files (their
    folders hold them), as Spark leaves them out. Files get fresh names, so a retried task never overwrites what
    another attempt wrote; a failed job discards the whole folder.
    """

    def __init__(
        self,
        folder: str,
        schema: pa.Schema,
        partition_by: list[str],
        file_by: str | None = None,
        described: Described | None = None,
    ) -> None:
        self._files, self._folder = resolve(folder)
        self._described = described
        self._partition_by = partition_by
        self._keys = [*partition_by, file_by] if file_by else list(partition_by)
        self._file_by = file_by
        self._file_schema = pa.schema([column for column in schema if column.name not in partition_by])
        self._open: dict[tuple, ParquetFile] = {}
        self._current: Any = None
        self.written: list[WrittenFile] = []  # every file closed

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        for values, rows in _split_by(table, self._keys):
            if self._file_by and values[-1] != self._current:
                self.close()
                self._current = values[-1]
            target = self._open.get(values)
            if target is None:
                folder = partition_folder(self._partition_by, values[: len(self._partition_by)])
                path = f"{self._folder}/{folder}/part-{uuid.uuid4().hex}.{COMPRESSION}.parquet"
                facts = self._described.new() if self._described else None
                target = self._open[values] = ParquetFile(self._files, path, self._file_schema, facts)
            target.add(rows.select(self._file_schema.names))
            if target.facts is not None:
                target.facts.add(rows)

    def close(self) -> list[WrittenFile]:
        for target in self._open.values():
            self.written.append(target.close())
        self._open.clear()
        return self.written

    def __enter__(self) -> PartitionedParquetSink:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class ParquetFile:
    """One Parquet file, its rows buffered into row groups of about `ROW_GROUP_ROWS`; nothing is written until
    rows come."""

    def __init__(self, files, path: str, schema: pa.Schema, facts: FileFacts | None = None) -> None:
        self.path = path
        self.facts = facts
        self._files = files
        self._schema = schema
        self._writer: pq.ParquetWriter | None = None
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self.rows = 0

    def add(self, table: pa.Table) -> None:
        self._pending.append(table)
        self._pending_rows += table.num_rows
        if self._pending_rows >= ROW_GROUP_ROWS:
            self._flush()

    def close(self) -> WrittenFile:
        self._flush()
        if self._writer is not None:
            self._writer.close()
        return WrittenFile(self.path, self.rows, None if self.facts is None else self.facts.values())

    def _flush(self) -> None:
        if not self._pending:
            return
        if self._writer is None:
            self._files.create_dir(self.path.rpartition("/")[0], recursive=True)
            self._writer = pq.ParquetWriter(
                self._files.open_output_stream(self.path),
                self._schema,
                compression=COMPRESSION,
                use_dictionary=dictionary_columns(self._schema),
            )
        self._writer.write_table(pa.concat_tables(self._pending), row_group_size=self._pending_rows)  # one group
        self.rows += self._pending_rows
        self._pending, self._pending_rows = [], 0


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """The columns written with a dictionary: the text ones (topic, file, status: a few values per file).

    pyarrow gives every column a dictionary by default, and a row group's dictionary takes up to 1 MiB: all of its
    131,072 offsets, positions or timestamps, which are unique. Spark then decodes that dictionary for every column
    chunk and looks every value up in it; plain numbers it copies in bulk (BENCHMARKS.md, "Plain numbers and the
    parallel collector").
    """
    return [field.name for field in schema if pa.types.is_string(field.type) or pa.types.is_large_string(field.type)]


def _split_by(table: pa.Table, names: list[str]) -> Iterator[tuple[tuple, pa.Table]]:
    """The rows of each combination of values of the `names` columns (the whole table when there are none)."""
    if not names:
        yield (), table
        return
    firsts = tuple(table.column(name)[0].as_py() for name in names)
    uniform = (
        table.column(name).null_count == 0 and pc.all(pc.equal(table.column(name), first)).as_py()
        for name, first in zip(names, firsts, strict=True)
    )
    if all(uniform):
        yield firsts, table  # the usual case: a decoded window is one segment's rows
        return
    keys = table.select(names).group_by(names, use_threads=False).aggregate([])
    for values in keys.to_pylist():
        mask = None
        for name in names:
            value = values[name]
            matches = pc.is_null(table.column(name)) if value is None else pc.equal(table.column(name), value)
            mask = matches if mask is None else pc.and_(mask, matches)
        yield tuple(values[name] for name in names), table.filter(pc.fill_null(mask, False))


def stage_pass(
    arrow_pass: ArrowPass,
    folder: str,
    partition_by: list[str],
    file_by: str | None = None,
    described: Described | None = None,
) -> list[WrittenFile]:
    """Write the table of a pass into the staging `folder` from the tasks that compute it; returns each file's
    path and rows, and with `described` the facts its accumulator gathered of them. A pass with a function runs it
    on the executors and writes what it returns there, so its rows never go back to the JVM (the segment decode
    turns descriptors into `batches` rows).

    With `file_by`, a file holds one value of that column (PartitionedParquetSink).
    """
    df = arrow_pass.rows
    # Spark hands timestamps to Arrow in the session's time zone (the instant is the same in any zone).
    timezone = df.sparkSession.conf.get("spark.sql.session.timeZone")
    write = partial(
        _write_files,
        folder,
        to_arrow_schema(arrow_pass.schema, timezone=timezone),
        partition_by,
        file_by,
        described,
        arrow_pass.function,
    )
    schema = _written_schema(described)
    return [
        WrittenFile(row.path, row.rows, row.facts.asDict() if described else None)
        for row in df.mapInArrow(shipped(df.sparkSession, write), schema).collect()
    ]


def _written_schema(described: Described | None) -> T.StructType:
    if described is None:
        return WRITTEN_FILES
    return T.StructType([*WRITTEN_FILES.fields, T.StructField("facts", described.schema, True)])


def stage_tables(
    rows: DataFrame,
    function: Callable[[Iterator[pa.RecordBatch]], Iterator[tuple[str, pa.RecordBatch]]],
    tables: dict[str, StagedTable],
) -> list[tuple[str, int]]:
    """Write the rows of several tables into their staging folders from one pass over `rows`: `function` runs on
    the executors and names the table of each record batch it makes. One Spark job instead of one per table, for
    inputs that decode into several small tables (the files beside the segments). Returns each file's path and rows.
    """
    timezone = rows.sparkSession.conf.get("spark.sql.session.timeZone")
    sinks = {
        name: (table.folder, to_arrow_schema(table.schema, timezone=timezone), table.partition_by)
        for name, table in tables.items()
    }
    write = shipped(rows.sparkSession, partial(_write_tables, sinks, function))
    return [(row.path, row.rows) for row in rows.mapInArrow(write, WRITTEN_FILES).collect()]


@dataclass(frozen=True)
class StagedTable:
    """Where `stage_tables` writes one table's rows: its staging folder, schema and partition columns."""

    folder: str
    schema: T.StructType
    partition_by: list[str]


def _write_tables(
    sinks: dict[str, tuple[str, pa.Schema, list[str]]],
    function: Callable[[Iterator[pa.RecordBatch]], Iterator[tuple[str, pa.RecordBatch]]],
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """Executor side of `stage_tables`: one task's rows into the files of their tables, then a `WRITTEN_FILES` row
    per file."""
    with ExitStack() as stack:
        opened = {
            name: (stack.enter_context(PartitionedParquetSink(folder, schema, partition_by)), schema)
            for name, (folder, schema, partition_by) in sinks.items()
        }
        for name, batch in function(batches):
            sink, schema = opened[name]
            sink.write(pa.Table.from_arrays(batch.columns, schema=schema))
    written = [file for sink, _ in opened.values() for file in sink.written]
    yield pa.RecordBatch.from_pydict(
        {"path": [file.path for file in written], "rows": [file.rows for file in written]},
        schema=to_arrow_schema(WRITTEN_FILES),
    )


def _write_files(
    folder: str,
    schema: pa.Schema,
    partition_by: list[str],
    file_by: str | None,
    described: Described | None,
    function: ArrowFunction | None,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """Executor side of `stage_pass`: one task's rows into files, then one written-file row per file."""
    with PartitionedParquetSink(folder, schema, partition_by, file_by, described) as sink:
        for batch in batches if function is None else function(batches):
            # As Spark does with what mapInArrow returns, the declared schema's names and nullability apply.
            sink.write(pa.Table.from_arrays(batch.columns, schema=schema))
    columns = {"path": [file.path for file in sink.written], "rows": [file.rows for file in sink.written]}
    if described is not None:
        columns["facts"] = [file.facts for file in sink.written]
    yield pa.RecordBatch.from_pydict(columns, schema=to_arrow_schema(_written_schema(described)))
