"""Delta table I/O for the warehouse, behind one interface with two interchangeable backends.

`native` writes through delta-spark when its JVM classes are on the session's classpath (spark-submit
--packages, Databricks). `embedded` needs no jars: Spark writes the Parquet files and delta-rs commits
them, so the same pipeline runs anywhere `pip install` works. Both produce ordinary Delta tables.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from importlib import metadata
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

BACKENDS = ("auto", "native", "embedded")
DELTA_LOG_CLASS = "org.apache.spark.sql.delta.DeltaLog"


class TableStoreError(Exception):
    """A Delta table could not be read or written as asked; a failed write commits nothing."""


class BackendUnavailableError(TableStoreError):
    """The requested backend cannot run in this Spark session."""


class TableNotFoundError(TableStoreError):
    """No Delta table at the path, and nothing to read it as."""


class TableSchemaError(TableStoreError):
    """The data does not fit the existing table: unknown columns, other types or other partitioning."""


class PartitionOverwriteError(TableStoreError):
    """A partition overwrite held rows outside the partitions it was asked to replace."""


class CommitConflictError(TableStoreError):
    """A concurrent commit conflicted with this write; nothing was committed and rerunning it is safe."""


class Backend(Protocol):
    """What a backend does for one table location; TableStore resolves names and checks arguments."""

    def exists(self, location: str) -> bool: ...

    def append(self, df: DataFrame, location: str, partition_by: list[str] | None) -> int: ...

    def overwrite(self, df: DataFrame, location: str, partition_by: list[str] | None) -> int: ...

    def overwrite_partitions(
        self, df: DataFrame, location: str, partition_by: list[str], values: dict[str, list]
    ) -> int: ...

    def read(self, location: str, schema: StructType | None, version: int | None) -> DataFrame: ...

    def history(self, location: str) -> list[dict[str, Any]]: ...


class TableStore:
    """Reads and writes the warehouse's Delta tables with the backend this Spark session supports."""

    def __init__(self, spark: SparkSession, warehouse: str, backend: str = "auto") -> None:
        self.spark = spark
        self.warehouse = normalize_location(warehouse)
        self.backend_name = resolve_backend(spark, backend)
        self._backend = _open_backend(self.backend_name, spark)
        log.info("Delta tables under %s use the %s backend", self.warehouse, self.backend_name)

    def path(self, table: str) -> str:
        return f"{self.warehouse}/{table}"

    def exists(self, table: str) -> bool:
        return self._backend.exists(self.path(table))

    def append(self, df: DataFrame, table: str, partition_by: list[str] | None = None) -> int:
        """Add the rows of `df`; `partition_by` None follows the existing table. Returns the committed version."""
        return self._backend.append(df, self.path(table), partition_by)

    def overwrite(self, df: DataFrame, table: str, partition_by: list[str] | None = None) -> int:
        """Replace the whole table: rows, schema and partitioning. Returns the committed version."""
        return self._backend.overwrite(df, self.path(table), partition_by)

    def overwrite_partitions(self, df: DataFrame, table: str, partition_by: list[str], values: dict[str, list]) -> int:
        """Atomically replace the partitions whose values are listed in `values` with the rows of `df`.

        A rerun with the same arguments leaves the same rows, which is what makes reprocessing a topic
        safe. Every row of `df` must lie inside the replaced partitions; otherwise nothing is committed.
        Creates the table when it is missing. Returns the committed version.
        """
        check_replaced_partitions(partition_by, values)
        return self._backend.overwrite_partitions(df, self.path(table), list(partition_by), values)

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
        return df if schema is None else df.select(*[column(name) for name in schema.fieldNames()])

    def history(self, table: str) -> list[dict[str, Any]]:
        """Commits newest first: version, timestamp (UTC datetime), operation, parameters (str to str)."""
        return self._backend.history(self.path(table))


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
        raise BackendUnavailableError(
            f"the native Delta backend needs delta-spark on the Spark classpath, and {DELTA_LOG_CLASS} "
            f"does not load in this session. Start Spark with --packages io.delta:delta-spark_2.13:"
            f"{_delta_spark_version()} and spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension, "
            "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog "
            "(delta.configure_spark_with_delta_pip does this for a local session), run on Databricks, "
            "or choose the embedded backend."
        )
    return "embedded"


def _delta_spark_version() -> str:
    try:
        return metadata.version("delta-spark")
    except metadata.PackageNotFoundError:
        return "<version matching your Spark>"


def _open_backend(name: str, spark: SparkSession) -> Backend:
    # Imported here so that each backend's libraries load only when that backend is used.
    if name == "native":
        from pipeline.tables.native import NativeBackend

        return NativeBackend(spark)
    from pipeline.tables.embedded import EmbeddedBackend

    return EmbeddedBackend(spark)


def normalize_location(location: str) -> str:
    """Absolute local path for local locations (`file:` URIs included), the URI otherwise."""
    parsed = urlparse(location)
    if parsed.scheme == "file":
        return os.path.abspath(unquote(parsed.path))
    if parsed.scheme:
        return location.rstrip("/")
    return os.path.abspath(os.path.expanduser(location))


def spark_uri(location: str) -> str:
    """The location as Spark should see it: local paths pinned to `file:` whatever the default filesystem.

    The path is not percent-encoded: Hadoop treats the text after `file://` as the literal path, which is
    how Spark's escaped partition folders such as `topic=a%3Ab` stay intact.
    """
    return location if urlparse(location).scheme else f"file://{location}"


def column(name: str) -> Column:
    """A top-level column by its exact name, dots and backticks included."""
    return F.col(_sql_identifier(name))


def check_replaced_partitions(partition_by: Sequence[str], values: Mapping[str, Sequence]) -> None:
    """Reject partition selections that are empty, name other columns or hold values Delta cannot match."""
    if not values:
        raise ValueError("values must name at least one partition column; use overwrite() to replace everything")
    for name, column_values in values.items():
        if name not in partition_by:
            raise ValueError(f"{name!r} is not a partition column ({', '.join(partition_by)})")
        if not column_values:
            raise ValueError(f"no values given for partition column {name!r}")
        for value in column_values:
            partition_value(value)


def partition_value(value: Any) -> str:
    """Delta's string form of a partition value (protocol, "Partition Value Serialization")."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    if isinstance(value, date) and not isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(
        f"cannot select partition value {value!r}: use str, int, bool or date (null partitions cannot be selected)"
    )


def replace_where_predicate(values: Mapping[str, Sequence]) -> str:
    """SQL predicate selecting the partitions in `values`, as delta-spark's replaceWhere option expects."""
    return " AND ".join(
        f"{_sql_identifier(name)} IN ({', '.join(_sql_literal(value) for value in column_values)})"
        for name, column_values in values.items()
    )


def _sql_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _sql_literal(value: Any) -> str:
    text = partition_value(value)
    if isinstance(value, str):
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, date):
        return f"DATE '{text}'"
    return text
