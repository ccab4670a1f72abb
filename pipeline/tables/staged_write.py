"""A write in four steps, readers seeing nothing before the last: whoever writes the data (Spark's Parquet writer,
or the ingest's decode tasks with pyarrow) puts Hive-partitioned Parquet files into the table's
`_staging/<write id>/` folder; then the driver reads each file's footer (never its rows) for row count and column
statistics, moves each file into its partition folder under a fresh name, and delta-rs commits them all as add
actions in one transaction.

A failure removes the staged and moved files, so a failed write leaves neither a version nor files. The one
exception is a commit that may have landed before the error: its files stay, as deleting them could corrupt the
table. The staging folder's name starts with an underscore, so Delta readers ignore it.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from typing import Any, cast
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake import Field as DeltaField
from deltalake import Schema as DeltaSchema
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.fs import DeltaStorageHandler
from deltalake.transaction import AddAction, CommitProperties, RemoveAction, create_table_with_add_actions
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from pipeline.tables import delta_log
from pipeline.tables.backend import (
    CommitConflictError,
    PartitionOverwriteError,
    TableSchemaError,
    TableStoreError,
    replace_where_predicate,
    replaced_partitions,
    spark_uri,
)
from pipeline.tables.snapshot_files import spark_schema

log = logging.getLogger(__name__)

STAGING_DIR = "_staging"
PLAIN_WRITER_VERSION = 2  # appendOnly, which delta-rs's commit enforces; invariants, which a table here has none of
# Delta stores timestamps as INT64 microseconds; Spark still defaults to the deprecated INT96. Set for the session,
# not per write, because writes of different tables run concurrently (pipeline.parallel).
PARQUET_TIMESTAMPS = ("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
APPEND, OVERWRITE, OVERWRITE_PARTITIONS = "append", "overwrite", "overwrite_partitions"

# Types whose partition folder text is already Delta's partition value serialization.
PARTITION_TYPES = (T.StringType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.BooleanType, T.DateType)
# Types whose Parquet min/max are exact Delta stats (timestamps would need millisecond truncation).
BOUNDED_TYPES = (T.StringType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DateType)
NESTED_TYPES = (T.StructType, T.ArrayType, T.MapType)


@dataclass(frozen=True)
class Layout:
    """The table's schema and partitioning once the write commits."""

    schema: T.StructType
    partition_by: list[str]
    repartitions: bool  # a whole-table overwrite that changes the partition columns


@dataclass(frozen=True)
class _DataFile:
    staged_path: str  # relative to the table root, as the storage names it
    partition_dir: str  # as Spark escapes it, e.g. "topic=orders.v1"; "" when unpartitioned
    partition_values: dict[str, str | None]
    size: int
    stats: str

    def target_path(self, index: int, write_id: str) -> str:
        """A fresh name in the partition folder, keeping the codec suffix the writer chose."""
        suffix = posixpath.basename(self.staged_path).split(".", 1)[1]
        return posixpath.join(self.partition_dir, f"part-{index:05d}-{write_id}.{suffix}")


@dataclass
class StagedWrite:
    """One write's staging folder: fill it (`uri` for Spark, `folder` for pyarrow), then `commit`."""

    location: str
    df_schema: T.StructType  # the written rows' schema, partition columns included
    mode: str
    layout: Layout
    values: dict[str, list] | None = None
    kept: frozenset[str] = frozenset()  # files of the replaced partitions that stay, as the add actions name them
    write_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def staging(self) -> str:
        return f"{STAGING_DIR}/{self.write_id}"

    @property
    def uri(self) -> str:
        return f"{spark_uri(self.location)}/{self.staging}"

    @property
    def folder(self) -> str:
        return f"{self.location}/{self.staging}"

    def commit(self) -> int:
        """Move the staged files into the table and commit them as one version; returns that version."""
        files = _table_files(self.location)
        moved: list[str] = []
        base_version: int | None = None  # the snapshot the commit was attempted on (delta_log.NO_TABLE: none)
        try:
            staged = _staged_files(files, self.staging, self.layout)
            if self.values is not None:
                _check_inside(self.location, staged, self.values)
            added_at = int(time.time() * 1000)
            adds = []
            for index, data_file in enumerate(staged):
                target = data_file.target_path(index, self.write_id)
                if data_file.partition_dir:
                    files.create_dir(data_file.partition_dir)
                files.move(data_file.staged_path, target)
                moved.append(target)
                adds.append(
                    AddAction(target, data_file.size, data_file.partition_values, added_at, True, data_file.stats)
                )
            table = _open(self.location)
            base_version = table.version() if table is not None else delta_log.NO_TABLE
            _commit(self.location, table, self, adds)
            version = delta_log.find_commit(self.location, self.write_id, base_version)
            if version is None:
                raise TableStoreError(
                    f"{self.location}: the commit of write {self.write_id} is missing from the Delta log"
                )
            return version
        except BaseException:
            if base_version is None or not _commit_landed(self.location, self.write_id, base_version):
                _remove(files, moved)
            raise


@contextmanager
def staged_write(
    location: str,
    df_schema: T.StructType,
    mode: str,
    partition_by: list[str] | None,
    values: dict[str, list] | None = None,
    kept: frozenset[str] = frozenset(),
) -> Iterator[StagedWrite]:
    """A staging folder for one write to the table at `location`, removed on the way out whatever happened, so
    files of a failed or abandoned write never stay behind. `kept` files of the replaced partitions stay in them."""
    layout = plan_layout(location, _open(location), df_schema, mode, partition_by)
    write = StagedWrite(location, df_schema, mode, layout, values, kept)
    files = _table_files(location)
    try:
        yield write
    finally:
        _remove(files, [write.staging])
        _remove_if_empty(files, STAGING_DIR)


def write_dataframe(
    df: DataFrame, location: str, mode: str, partition_by: list[str] | None, values: dict[str, list] | None = None
) -> int:
    """Write `df` to the table at `location` in one staged write: Spark's Parquet writer fills the staging folder
    and delta-rs commits the files. Returns the committed version."""
    with staged_write(location, df.schema, mode, partition_by, values) as write:
        df.write.mode("errorifexists").partitionBy(*write.layout.partition_by).parquet(write.uri)
        return write.commit()


def writable_plainly(location: str) -> bool:
    """Whether a staged write may commit to the table: it is absent, or its protocol has no feature beyond the
    first reader and the second writer version, and no column invariants (every table produce-audit creates). A
    staged commit adds and removes files without looking at their rows, so a table whose columns have invariants
    is left to delta-spark, which checks them; delta-rs's commit refuses to remove files of an append-only table
    itself."""
    table = _open(location)
    if table is None:
        return True
    protocol = table.protocol()
    return (
        protocol.min_reader_version <= 1
        and protocol.min_writer_version <= PLAIN_WRITER_VERSION
        and not protocol.writer_features
        and not protocol.reader_features
        and "delta.invariants" not in table.schema().to_json()
    )


def _open(location: str) -> DeltaTable | None:
    return DeltaTable(location) if DeltaTable.is_deltatable(location) else None


def plan_layout(
    location: str, table: DeltaTable | None, df_schema: T.StructType, mode: str, partition_by: list[str] | None
) -> Layout:
    """Schema and partitioning after the write. Appends and partition overwrites must fit the table as it is."""
    current = table.metadata().partition_columns if table is not None else None
    if table is None or mode == OVERWRITE:
        wanted = list(partition_by or [])
        # Like delta-spark, a DataFrame write stores every column nullable: NOT NULL is a constraint
        # a table gets by DDL, not a property its first batch of data happened to have.
        layout = Layout(cast(T.StructType, _as_nullable(df_schema)), wanted, current is not None and wanted != current)
    else:
        if partition_by is not None and list(partition_by) != current:
            raise TableSchemaError(f"{location}: the table is partitioned by {current}, not {list(partition_by)}")
        table_schema = spark_schema(table)
        _check_fits(location, df_schema, table_schema)
        added = [field for field in df_schema.fields if field.name not in table_schema.fieldNames()]
        layout = Layout(T.StructType(table_schema.fields + _as_nullable(T.StructType(added)).fields), current, False)
    _check_partition_columns(location, layout)
    return layout


def _as_nullable(data_type: T.DataType) -> T.DataType:
    if isinstance(data_type, T.StructType):
        return T.StructType(
            [T.StructField(f.name, _as_nullable(f.dataType), True, f.metadata) for f in data_type.fields]
        )
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(_as_nullable(data_type.elementType), True)
    if isinstance(data_type, T.MapType):
        return T.MapType(_as_nullable(data_type.keyType), _as_nullable(data_type.valueType), True)
    return data_type


def _check_fits(location: str, df_schema: T.StructType, table_schema: T.StructType) -> None:
    """Columns the table has must keep their type; missing columns read as null, new ones are added."""
    table_types = {field.name: field.dataType.simpleString() for field in table_schema.fields}
    misfits = [
        f"{field.name} {field.dataType.simpleString()}"
        for field in df_schema.fields
        if table_types.get(field.name, field.dataType.simpleString()) != field.dataType.simpleString()
    ]
    if misfits:
        raise TableSchemaError(
            f"{location}: columns {', '.join(misfits)} do not fit the table schema {table_schema.simpleString()}"
        )


def _check_partition_columns(location: str, layout: Layout) -> None:
    types = {field.name: field.dataType for field in layout.schema.fields}
    for name in layout.partition_by:
        if name not in types:
            raise TableSchemaError(f"{location}: partition column {name!r} is not in the data")
        if not isinstance(types[name], PARTITION_TYPES):
            raise TableSchemaError(
                f"{location}: cannot partition by {name} of type {types[name].simpleString()}; "
                "the embedded backend partitions by string, integral, boolean and date columns"
            )


def _table_files(location: str) -> pafs.FileSystem:
    """The table folder as a pyarrow filesystem: local disk directly, object stores through delta-rs,
    which then reaches them with the same storage configuration as its commits."""
    if urlparse(location).scheme:
        return pafs.PyFileSystem(DeltaStorageHandler(location))
    return pafs.SubTreeFileSystem(location, pafs.LocalFileSystem())


def _staged_files(files: pafs.FileSystem, staging: str, layout: Layout) -> list[_DataFile]:
    """The staged Parquet files, with partition values and stats; empty files are left behind."""
    staged = []
    # No folder: nothing was staged (an incremental ingest that decoded nothing still commits its removals).
    for info in files.get_file_info(pafs.FileSelector(staging, recursive=True, allow_not_found=True)):
        name = posixpath.basename(info.path)
        if info.type != pafs.FileType.File or not name.endswith(".parquet") or name.startswith(("_", ".")):
            continue
        metadata = pq.read_metadata(info.path, filesystem=files)
        if metadata.num_rows == 0:
            continue
        partition_dir = posixpath.dirname(posixpath.relpath(info.path, staging))
        staged.append(
            _DataFile(
                staged_path=info.path,
                partition_dir=partition_dir,
                partition_values=partition_values(partition_dir),
                size=info.size,
                stats=_stats(metadata, layout),
            )
        )
    return sorted(staged, key=lambda data_file: data_file.staged_path)


def partition_values(partition_dir: str) -> dict[str, str | None]:
    """Real values from Spark's `name=value` folders (Hive's default folder: null): Delta keeps them apart from
    the escaped path."""
    values: dict[str, str | None] = {}
    for segment in partition_dir.split("/") if partition_dir else []:
        name, _, escaped = segment.partition("=")
        value = _unescape_path_name(escaped)
        values[_unescape_path_name(name)] = None if value == HIVE_NULL else value
    return values


def _unescape_path_name(text: str) -> str:
    """Inverse of Spark's ExternalCatalogUtils.escapePathName, which %XX-escapes only ASCII characters."""
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda match: chr(int(match.group(1), 16)), text)


def _stats(metadata: pq.FileMetaData, layout: Layout) -> str:
    """Delta file stats from the footer: numRecords, and nullCount/minValues/maxValues where exact."""
    types = {
        field.name: field.dataType
        for field in layout.schema.fields
        if field.name not in layout.partition_by and not isinstance(field.dataType, NESTED_TYPES)
    }
    chunks: dict[str, list[tuple[Any, int]]] = defaultdict(list)
    for group_index in range(metadata.num_row_groups):
        row_group = metadata.row_group(group_index)
        for column_index in range(row_group.num_columns):
            chunk = row_group.column(column_index)
            if chunk.path_in_schema in types:
                chunks[chunk.path_in_schema].append((chunk.statistics, row_group.num_rows))
    null_count: dict[str, int] = {}
    min_values: dict[str, Any] = {}
    max_values: dict[str, Any] = {}
    for name, entries in chunks.items():
        if any(statistics is None or not statistics.has_null_count for statistics, _ in entries):
            continue
        null_count[name] = sum(statistics.null_count for statistics, _ in entries)
        with_values = [statistics for statistics, rows in entries if statistics.null_count < rows]
        if isinstance(types[name], BOUNDED_TYPES) and with_values and all(s.has_min_max for s in with_values):
            min_values[name] = _stat_value(min(s.min for s in with_values))
            max_values[name] = _stat_value(max(s.max for s in with_values))
    return json.dumps(
        {"numRecords": metadata.num_rows, "minValues": min_values, "maxValues": max_values, "nullCount": null_count}
    )


def _stat_value(value: Any) -> Any:
    return value.isoformat() if isinstance(value, date) else value


def _check_inside(location: str, staged: list[_DataFile], values: dict[str, list]) -> None:
    """Refuse files outside the replaced partitions: committing them would leave rows the next rerun
    of the same overwrite would not replace."""
    allowed = replaced_partitions(values)
    outside = sorted(
        {
            data_file.partition_dir
            for data_file in staged
            if tuple(data_file.partition_values.get(name) for name in values) not in allowed
        }
    )
    if outside:
        raise PartitionOverwriteError(
            f"{location}: rows in {', '.join(outside)} lie outside the replaced partitions "
            f"({replace_where_predicate(values)}); nothing was committed"
        )


def _commit(location: str, table: DeltaTable | None, write: StagedWrite, adds: list[AddAction]) -> None:
    """Commit the moved files on `table`, the latest snapshot (None: no table yet), in one transaction."""
    # The files are laid out by the planned partitioning; a table changed meanwhile must still fit it.
    layout = plan_layout(location, table, write.df_schema, write.mode, write.layout.partition_by)
    schema = DeltaSchema.from_json(layout.schema.json())
    values = write.values
    # As with delta-spark's userMetadata option, the write id finds this commit among concurrent ones.
    commit_info: dict[str, Any] = {"userMetadata": write.write_id}
    if values is not None:
        commit_info["operationParameters"] = {"predicate": replace_where_predicate(values)}
    properties = CommitProperties(custom_metadata=commit_info)
    try:
        if write.kept and (table is None or layout.repartitions or values is None):
            raise CommitConflictError(
                f"{location}: the files to keep are no longer in the table; nothing was committed"
            )
        if table is None or layout.repartitions:
            create_table_with_add_actions(
                location,
                schema,
                adds,
                mode="error" if table is None else "overwrite",
                partition_by=layout.partition_by,
                commit_properties=properties,
            )
        elif values is not None:
            # The replaced partitions lose every file but the kept ones, in the same transaction as the adds: named
            # file by file, since delta-rs's partition filters are a conjunction and cannot select pairs of values.
            _add_columns(table, layout.schema)
            actions = [*adds, *_removes_except(location, table, values, write.kept)]
            table.create_write_transaction(actions, APPEND, schema, layout.partition_by, commit_properties=properties)
        else:
            _add_columns(table, layout.schema)
            table.create_write_transaction(adds, write.mode, schema, layout.partition_by, commit_properties=properties)
    except DeltaError as exc:
        if isinstance(exc, CommitFailedError) or (table is None and DeltaTable.is_deltatable(location)):
            raise CommitConflictError(
                f"{location}: a concurrent commit conflicts with this write ({exc}); "
                "nothing was committed and the write can be rerun"
            ) from exc
        raise


def _removes_except(
    location: str, table: DeltaTable, values: dict[str, list], kept: frozenset[str]
) -> list[RemoveAction]:
    """Remove actions for the files of the partitions named in `values`, except `kept`, which must all be there."""
    actions = pa.table(table.get_add_actions(flatten=True))
    wanted = replaced_partitions(values)
    removes, present = [], set()
    removed_at = int(time.time() * 1000)
    columns = [actions.column(f"partition.{name}").cast(pa.string()).to_pylist() for name in values]
    for path, size, *partition in zip(
        actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist(), *columns, strict=True
    ):
        if tuple(partition) not in wanted:
            continue
        if path in kept:
            present.add(path)
        else:
            removes.append(RemoveAction(path, True, removed_at, size, dict(zip(values, partition, strict=True))))
    if present != kept:
        raise CommitConflictError(
            f"{location}: {len(kept - present)} of the files to keep are no longer in the replaced partitions; "
            "nothing was committed and the write can be rerun"
        )
    return removes


def _add_columns(table: DeltaTable, schema: T.StructType) -> None:
    """Add the columns a newer release writes, as delta-spark's mergeSchema does.

    A metadata-only commit of nullable columns: rows written before read them as null, so it is harmless on its
    own should the data commit that follows fail.
    """
    existing = set(spark_schema(table).fieldNames())
    added = [field for field in schema.fields if field.name not in existing]
    if added:
        table.alter.add_columns([DeltaField.from_json(json.dumps(field.jsonValue())) for field in added])


def _commit_landed(location: str, write_id: str, base_version: int) -> bool:
    """Whether a commit that raised is in the log anyway (a post-commit step may fail after it).

    When the log cannot be read the answer is yes: deleting the files of a commit that landed would
    corrupt the table, while files no commit references are merely invisible until VACUUM.
    """
    try:
        return delta_log.find_commit(location, write_id, base_version) is not None
    except Exception:
        log.warning("could not check whether write %s committed to %s; keeping its files", write_id, location)
        return True


def _remove_if_empty(files: pafs.FileSystem, folder: str) -> None:
    """Drop the staging folder once no write uses it, so a table holds only Delta's own files."""
    try:
        if not files.get_file_info(pafs.FileSelector(folder, allow_not_found=True)):
            _remove(files, [folder])
    except OSError as exc:
        log.warning("could not remove %s: %s", folder, exc)


def _remove(files: pafs.FileSystem, paths: list[str]) -> None:
    """Best effort: a leftover is invisible to readers, so failing to remove it must not hide the real error."""
    for info in files.get_file_info(paths):
        try:
            if info.type == pafs.FileType.Directory:
                files.delete_dir(info.path)
            elif info.type == pafs.FileType.File:
                files.delete_file(info.path)
        except (OSError, DeltaError) as exc:
            log.warning("could not remove %s (it is not part of any snapshot): %s", info.path, exc)
