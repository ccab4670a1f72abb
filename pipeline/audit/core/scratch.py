"""Intermediate tables of one audit run: written once as Parquet, then read by every later plan.

Writing a stage out cuts its lineage: the plans that read it start from a file scan, so no plan the driver
optimises holds another stage's windows and joins, and its size stays the same whatever the number of rules.
Tables that do not depend on each other are written by concurrent Spark jobs (`materialise_all`). The folder
(by default `<warehouse>/_scratch/<run id>`) is removed when the run's tables are written.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from functools import partial

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pipeline.arrow_pass import ArrowPass
from pipeline.parallel import side_by_side
from pipeline.plan_stats import PlanStats
from pipeline.sources.filesystems import resolve
from pipeline.tables.parquet_sink import StagedTable, stage_pass, stage_tables

log = logging.getLogger(__name__)


class Scratch:
    def __init__(self, spark: SparkSession, root: str, stats: PlanStats | None = None) -> None:
        self.spark = spark
        self.root = root.rstrip("/")
        self.stats = stats if stats is not None else PlanStats()
        self._schemas: dict[str, T.StructType] = {}
        self._files: dict[str, list[str]] = {}  # the files of tables written by their tasks (`materialise_pass`)

    def materialise(self, df: DataFrame, name: str) -> DataFrame:
        """Write `df` as `name` (replacing an earlier write of this run) and return a scan of it."""
        self._write(df, self.path(name), name)
        self._schemas[name] = df.schema
        self._files.pop(name, None)
        return self.read(name)

    def materialise_pass(self, arrow_pass: ArrowPass, name: str) -> DataFrame:
        """Materialise the table an Arrow pass makes, its files written by the pass's own tasks
        (pipeline.tables.parquet_sink): the rows never go back to the JVM, and only the files of the task attempts
        that succeeded are read."""
        frame = arrow_pass.frame()
        self.stats.measure(frame, name)
        started = time.perf_counter()
        written = stage_pass(arrow_pass, self.path(name), [])
        log.debug("audit stage %s written in %.1f s", name, time.perf_counter() - started)
        self._schemas[name] = arrow_pass.schema
        self._files[name] = [file.path for file in written]
        return self.read(name)

    def materialise_tables(self, arrow_pass: ArrowPass, schemas: Mapping[str, T.StructType]) -> None:
        """Materialise several tables from one pass whose function names the table of each record batch it makes
        (pipeline.tables.parquet_sink.stage_tables); `arrow_pass.schema` is the first table's."""
        name = next(iter(schemas))
        self.stats.measure(arrow_pass.rows.mapInArrow(arrow_pass.function, arrow_pass.schema), name)
        started = time.perf_counter()
        tables = {table: StagedTable(self.path(table), schema, []) for table, schema in schemas.items()}
        written = stage_tables(arrow_pass.rows, arrow_pass.function, tables)
        log.debug("audit stage %s written in %.1f s", " and ".join(schemas), time.perf_counter() - started)
        for table, schema in schemas.items():
            self.register(table, schema, [path for path, _ in written if f"/{table}/" in path])

    def register(self, name: str, schema: T.StructType, paths: list[str]) -> DataFrame:
        """Make the Parquet files `paths`, written elsewhere, table `name`; a scan of it."""
        self._schemas[name] = schema
        self._files[name] = list(paths)
        return self.read(name)

    def materialise_all(
        self, builders: Mapping[str, Callable[[], DataFrame | ArrowPass | None]]
    ) -> dict[str, DataFrame | None]:
        """Build and materialise independent tables side by side; a builder returning None writes nothing, one
        returning an Arrow pass has its tasks write the table (`materialise_pass`)."""

        def build_and_write(name: str, build: Callable[[], DataFrame | ArrowPass | None]) -> DataFrame | None:
            made = build()
            if made is None:
                return None
            return self.materialise_pass(made, name) if isinstance(made, ArrowPass) else self.materialise(made, name)

        return side_by_side({name: partial(build_and_write, name, build) for name, build in builders.items()})

    def read(self, name: str) -> DataFrame:
        """A scan of table `name` (of all its parts), with the columns it was written with."""
        schema = self._schemas[name]
        paths = self._files.get(name, [self.path(name)])
        if not paths:
            return self.spark.createDataFrame([], schema)
        # The files hold exactly the schema's columns: Spark reads them in its order, no projection needed.
        return self.spark.read.schema(schema).parquet(*paths)

    def read_parts(self, name: str) -> DataFrame:
        """A scan of every table written as `<name>/<part>` (for instance by concurrent jobs), as one table.

        The parts must have the same column names and types.
        """
        parts = [key for key in self._schemas if key.startswith(f"{name}/")]
        schemas = {self._schemas[key].simpleString(): self._schemas[key] for key in parts}
        if len(schemas) != 1:
            raise ValueError(f"scratch table {name}: parts with {len(schemas)} different schemas: {sorted(schemas)}")
        (schema,) = schemas.values()
        paths = [path for key in parts for path in self._files.get(key, [self.path(key)])]
        if not paths:
            return self.spark.createDataFrame([], schema)
        return self.spark.read.schema(schema).parquet(*paths).select(*schema.fieldNames())

    def is_empty(self, name: str) -> bool:
        """Whether table `name` of this run holds no rows, read from its files' Parquet footers: no Spark job."""
        return all(_footer_rows(path) == 0 for path in self._parquet_files(name))

    def small_rows(self, name: str, columns: list[str]) -> list[dict]:
        """The rows of table `name`, one per partition or replica, read on the driver with pyarrow: no Spark job."""
        rows = []
        for path in self._parquet_files(name):
            handle, local = resolve(path)
            rows += pq.read_table(local, columns=columns, filesystem=handle).to_pylist()
        return rows

    def _parquet_files(self, name: str) -> list[str]:
        paths = self._files.get(name)
        if paths is None:  # written by Spark: the Parquet files of its folder
            handle, folder = resolve(self.path(name))
            listed = handle.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
            paths = [self.path(f"{name}/{info.base_name}") for info in listed if info.base_name.endswith(".parquet")]
        return paths

    def has(self, name: str) -> bool:
        """Whether table `name` was written in this run."""
        return name in self._schemas

    def names(self, prefix: str) -> list[str]:
        """The tables of this run whose names start with `prefix`."""
        return [name for name in self._schemas if name.startswith(prefix)]

    def path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def files(self, name: str) -> list[str]:
        """The files of a table its pass's tasks wrote (`materialise_pass`), one per task that wrote rows."""
        return list(self._files[name])

    def move(self, name: str, target: str) -> None:
        """Move table `name` to the folder `target`, for a later run to read; it is no longer this run's. A table its
        pass's tasks wrote moves file by file: only the files of the attempts that succeeded are its."""
        jvm = self.spark._jvm
        destination = jvm.org.apache.hadoop.fs.Path(target)
        files = destination.getFileSystem(self.spark._jsc.hadoopConfiguration())
        moves = [(self.path(name), target)]
        if name in self._files:
            files.mkdirs(destination)
            moves = [(path, f"{target}/{path.rpartition('/')[2]}") for path in self._files.pop(name)]
        else:
            files.mkdirs(destination.getParent())
        for source, moved in moves:
            if not files.rename(jvm.org.apache.hadoop.fs.Path(source), jvm.org.apache.hadoop.fs.Path(moved)):
                raise OSError(f"could not move {source} to {moved}")
        del self._schemas[name]

    def remove(self) -> None:
        """Delete the folder and everything in it, and its parent when that is left empty (any Hadoop filesystem).

        Runs keep their folders side by side under one parent (`<warehouse>/_scratch`); the last one out removes
        it, so a finished run leaves no trace.
        """
        jvm = self.spark._jvm
        path = jvm.org.apache.hadoop.fs.Path(self.root)
        files = path.getFileSystem(self.spark._jsc.hadoopConfiguration())
        files.delete(path, True)
        parent = path.getParent()
        if parent is not None and files.exists(parent) and len(files.listStatus(parent)) == 0:
            with suppress(Exception):  # another run's folder appeared meanwhile: the parent stays
                files.delete(parent, False)

    def _write(self, df: DataFrame, path: str, label: str) -> None:
        self.stats.measure(df, label)
        started = time.perf_counter()
        df.write.mode("overwrite").parquet(path)
        log.debug("audit stage %s written in %.1f s", label, time.perf_counter() - started)


def _footer_rows(path: str) -> int:
    """The rows of a Parquet file, from its footer."""
    handle, local = resolve(path)
    return pq.read_metadata(local, filesystem=handle).num_rows
