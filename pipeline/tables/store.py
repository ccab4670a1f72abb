"""Delta table I/O for the warehouse, behind one interface with two interchangeable backends.

`native` writes through delta-spark when its JVM classes are on the session's classpath (spark-submit
--packages, Databricks). `embedded` needs no jars: Spark writes the Parquet files and delta-rs commits
them, so the same pipeline runs anywhere `pip install` works. Both produce ordinary Delta tables.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from pipeline import jar_bundles
from pipeline.delta_jars import BUNDLE, CATALOG, EXTENSION
from pipeline.progress import timed
from pipeline.tables import delta_log
from pipeline.tables.backend import (
    Backend,
    BackendUnavailableError,
    TableNotFoundError,
    check_replaced_partitions,
    column,
    normalize_location,
    replace_where_predicate,
)
from pipeline.tables.files import filesystem, remove_tree
from pipeline.tables.files_per_partition import FileGroup, files_per_partition
from pipeline.tables.staged_write import OVERWRITE_PARTITIONS, staged_write
from pipeline.tables.stats import logged_pairs, logged_row_count

log = logging.getLogger(__name__)

BACKENDS = ("auto", "native", "embedded")
UNKNOWN_CLUSTER = ""  # the cluster of rows whose input names none (`ingest.cluster_id` unset)
DELTA_LOG_CLASS = "org.apache.spark.sql.delta.DeltaLog"


class TableStore:
    """Reads and writes the warehouse's Delta tables with the backend this Spark session supports."""

    def __init__(self, spark: SparkSession, warehouse: str, backend: str = "auto") -> None:
        self.spark = spark
        self.warehouse = normalize_location(warehouse)
        self.backend_name = resolve_backend(spark, backend)
        self._backend = _open_backend(self.backend_name, spark)
        log.debug("Delta tables under %s use the %s backend", self.warehouse, self.backend_name)

    def path(self, table: str) -> str:
        return f"{self.warehouse}/{table}"

    def exists(self, table: str) -> bool:
        return self._backend.exists(self.path(table))

    def append(self, df: DataFrame, table: str, partition_by: list[str] | None = None) -> int:
        """Add the rows of `df`; `partition_by` None follows the existing table. Returns the committed version."""
        with timed(log, f"appending to {table}") as step:
            version = self._backend.append(df, self.path(table), partition_by)
            step.detail = f"version {version}"
        return version

    def overwrite(self, df: DataFrame, table: str, partition_by: list[str] | None = None) -> int:
        """Replace the whole table: rows, schema and partitioning. Returns the committed version."""
        with timed(log, f"writing {table}") as step:
            version = self._backend.overwrite(df, self.path(table), partition_by)
            step.count, step.detail = logged_row_count(self.path(table)), f"version {version}"
        return version

    def overwrite_partitions(self, df: DataFrame, table: str, partition_by: list[str], values: dict[str, list]) -> int:
        """Atomically replace the partitions listed in `values` with the rows of `df`: column by column, the i-th
        values of all columns naming the i-th partition (`check_replaced_partitions`), so pairs of a cluster and a
        topic replace those pairs only.

        A rerun with the same arguments leaves the same rows, which is what makes reprocessing a topic
        safe. Every row of `df` must lie inside the replaced partitions; otherwise nothing is committed.
        Creates the table when it is missing. Returns the committed version.
        """
        check_replaced_partitions(partition_by, values)
        with timed(log, f"writing {table}") as step:
            version = self._backend.overwrite_partitions(df, self.path(table), list(partition_by), values)
            # The rows of the replaced partitions are the rows written, by the log's statistics: no Spark job.
            step.count, step.detail = logged_row_count(self.path(table), values), f"version {version}"
        return version

    @contextmanager
    def staged_partitions(
        self,
        table: str,
        schema: StructType,
        partition_by: list[str],
        values: dict[str, list],
        kept: frozenset[str] = frozenset(),
    ) -> Iterator[str]:
        """Replace partitions as `overwrite_partitions` does, with the Parquet files written into the folder this
        yields (pipeline.tables.parquet_sink): committed together when the block ends without an error, and
        removed, committing nothing, when it raises. The `kept` files of those partitions (as the Delta log names
        them) stay in the table beside the new ones, untouched.

        Both backends commit these files with delta-rs (pipeline.tables.staged_write): the files are written
        before any Delta writer sees them, so delta-spark has nothing left to do but commit, and its commit of
        files it did not write is not public API.
        """
        check_replaced_partitions(partition_by, values)
        with timed(log, f"writing {table}") as step:
            with staged_write(
                self.path(table), schema, OVERWRITE_PARTITIONS, list(partition_by), values, kept
            ) as write:
                yield write.folder
                version = write.commit()
            step.count, step.detail = logged_row_count(self.path(table), values), f"version {version}"

    def read(self, table: str, schema: StructType | None = None, version: int | None = None) -> DataFrame:
        """The latest snapshot, or `version`; with `schema`, its columns in its order.

        An absent table reads as an empty DataFrame when a schema is given, so a first run needs no
        special case.
        """
        location = self.path(table)
        if not self._backend.exists(location):
            if schema is None:
                raise TableNotFoundError(f"{location}: no Delta table here, and no schema to read it as empty")
            return self.spark.createDataFrame([], schema)
        df = self._backend.read(location, schema, version)
        if schema is not None and df.columns != schema.fieldNames():  # a snapshot read as files is in order already
            df = df.select(*[column(name) for name in schema.fieldNames()])
        return known_cluster(df)

    def files_per_partition(self, table: str) -> list[FileGroup] | None:
        """The files of the latest snapshot by Kafka partition, when the log says which each holds."""
        return files_per_partition(self.path(table))

    def count(self, table: str, partition_values: dict[str, list] | None = None) -> int:
        """Rows of the latest snapshot in the listed partitions (as `overwrite_partitions` lists them; all without),
        from the log's file statistics.

        A count by Spark only when the statistics are missing; 0 for an absent table.
        """
        location = self.path(table)
        if not self._backend.exists(location):
            return 0
        logged = logged_row_count(location, partition_values)
        if logged is not None:
            return logged
        rows = self._backend.read(location, None, None)
        if partition_values:
            rows = rows.where(F.expr(replace_where_predicate(partition_values)))
        return rows.count()

    def pairs(self, table: str) -> set[tuple[str, str]]:
        """The (cluster_id, topic) partitions of the latest snapshot, from its Delta log; none for an absent table."""
        return logged_pairs(self.path(table)) if self.exists(table) else set()

    def partition_columns(self, table: str) -> list[str]:
        """The columns the latest snapshot is partitioned by, from its Delta log."""
        return delta_log.partition_columns(self.path(table))

    def history(self, table: str, limit: int | None = None) -> list[dict[str, Any]]:
        """Commits newest first (the last `limit`): version, timestamp (UTC datetime), operation, parameters."""
        return self._backend.history(self.path(table), limit)

    def version(self, table: str) -> int:
        """The table's latest version."""
        return self._backend.version(self.path(table))

    def restore(self, table: str, version: int) -> int:
        """Make the table read as it did at `version` by a new commit (Delta RESTORE); returns that commit's version."""
        return self._backend.restore(self.path(table), version)

    def vacuum(self, table: str, retention_hours: int, keep_versions: list[int]) -> int | None:
        """Delete files unread by the kept versions and older than the retention; the count when the backend says."""
        return self._backend.vacuum(self.path(table), retention_hours, keep_versions)

    def remove(self, table: str) -> bool:
        """Delete the table's folder, history and all; False when there was none."""
        files, path = filesystem(self.path(table))
        return remove_tree(files, path)


def cluster_topics(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """(cluster_id, topic) pairs as the partitions `overwrite_partitions` replaces: what a run audited, and
    nothing of another cluster or topic."""
    ordered = sorted(set(pairs))
    return {"cluster_id": [cluster for cluster, _ in ordered], "topic": [topic for _, topic in ordered]}


def of_pairs(pairs: Iterable[tuple[str, str]]) -> Column:
    """The rows of the (cluster_id, topic) pairs; false for none."""
    values = cluster_topics(pairs)
    return F.expr(replace_where_predicate(values)) if values["topic"] else F.lit(False)


def known_cluster(df: DataFrame) -> DataFrame:
    """`cluster_id` null as the unknown cluster "": Spark stores an empty partition value as null, and rows written
    before the column existed read it as null."""
    if "cluster_id" not in df.columns:
        return df
    cluster = column("cluster_id")  # stays nullable, as in the table schemas (a coalesce would make it not)
    return df.withColumn("cluster_id", F.when(cluster.isNull(), F.lit(UNKNOWN_CLUSTER)).otherwise(cluster))


def delta_spark_available(spark: SparkSession) -> bool:
    """Whether delta-spark's JVM classes load in this session (its Python package alone is not enough)."""
    try:
        jvm = spark._jvm
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(DELTA_LOG_CLASS, False, loader)
    except Exception:  # class not found, no JVM gateway (Spark Connect), or a stopped session
        return False
    return True


def resolve_backend(spark: SparkSession, requested: str) -> str:
    """`native` or `embedded`: `auto` prefers delta-spark when the session has it."""
    if requested not in BACKENDS:
        raise ValueError(f"unknown Delta backend {requested!r}; expected one of {', '.join(BACKENDS)}")
    if requested == "embedded":
        return "embedded"
    if delta_spark_available(spark):
        return "native"
    if requested == "native":
        packages = ",".join(jar_bundles.coordinates(BUNDLE))
        raise BackendUnavailableError(
            f"the native Delta backend needs delta-spark on the Spark classpath, and {DELTA_LOG_CLASS} "
            "does not load in this session. Run `produce-audit prepare` (it installs the pinned delta-spark jars "
            f"with Maven, and later sessions load them), start Spark with --packages {packages} and "
            f"spark.sql.extensions={EXTENSION}, spark.sql.catalog.spark_catalog={CATALOG}, run on Databricks, or "
            "choose the embedded backend."
        )
    return "embedded"


def _open_backend(name: str, spark: SparkSession) -> Backend:
    # Imported here so that each backend's libraries load only when that backend is used.
    if name == "native":
        from pipeline.tables.native import NativeBackend

        return NativeBackend(spark)
    from pipeline.tables.embedded import EmbeddedBackend

    return EmbeddedBackend(spark)
