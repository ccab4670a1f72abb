"""Native backend: delta-spark writes, reads and commits inside the JVM (the jars `produce-audit prepare`
installs, spark-submit --packages, Databricks).

delta-spark's own errors are raised as the table store's (rows outside a partition overwrite, data that does
not fit the table, a concurrent commit), so callers handle one set whichever backend wrote.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from delta.exceptions import DeltaConcurrentModificationException
from delta.tables import DeltaTable
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, DataFrameWriter, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from pipeline.tables.backend import (
    CommitConflictError,
    PartitionOverwriteError,
    TableSchemaError,
    TableStoreError,
    replace_where_predicate,
    spark_uri,
)
from pipeline.tables.vacuum import vacuum

# The commit a write just made is nearly always the latest; a few more cover commits of other writers since.
RECENT_COMMITS = 10


class NativeBackend:
    """Plain `format("delta")` reads and writes, so delta-spark enforces everything Delta defines."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark

    def exists(self, location: str) -> bool:
        return DeltaTable.isDeltaTable(self._spark, spark_uri(location))

    def append(self, df: DataFrame, location: str, partition_by: list[str] | None) -> int:
        return self._save(df.write.mode("append").option("mergeSchema", "true"), location, partition_by)

    def overwrite(self, df: DataFrame, location: str, partition_by: list[str] | None) -> int:
        return self._save(df.write.mode("overwrite").option("overwriteSchema", "true"), location, partition_by)

    def overwrite_partitions(
        self, df: DataFrame, location: str, partition_by: list[str], values: dict[str, list]
    ) -> int:
        # delta-spark fails the write, committing nothing, when a row does not match the predicate.
        writer = df.write.mode("overwrite").option("replaceWhere", replace_where_predicate(values))
        writer = writer.option("mergeSchema", "true")  # columns a newer release writes are added
        return self._save(writer, location, partition_by)

    def read(self, location: str, schema: StructType | None, version: int | None) -> DataFrame:
        reader = self._spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(spark_uri(location))

    def history(self, location: str, limit: int | None = None) -> list[dict[str, Any]]:
        table = self._table(location)
        rows = (
            (table.history() if limit is None else table.history(limit))
            .select("version", F.unix_millis("timestamp").alias("millis"), "operation", "operationParameters")
            .collect()
        )
        return [
            {
                "version": row.version,
                "timestamp": datetime.fromtimestamp(row.millis / 1000, tz=UTC),
                "operation": row.operation,
                "parameters": dict(row.operationParameters or {}),
            }
            for row in rows
        ]

    def version(self, location: str) -> int:
        return self._table(location).history(1).select("version").head().version

    def restore(self, location: str, version: int) -> int:
        self._table(location).restoreToVersion(version)
        return self.version(location)

    def vacuum(self, location: str, retention_hours: int, keep_versions: list[int]) -> int:
        return vacuum(location, retention_hours, keep_versions)

    def _table(self, location: str) -> DeltaTable:
        return DeltaTable.forPath(self._spark, spark_uri(location))

    def _save(self, writer: DataFrameWriter, location: str, partition_by: list[str] | None) -> int:
        """Write, then find the commit by the write id it carries in commitInfo.userMetadata.

        Asking for the latest version instead would be wrong as soon as another job commits in between.
        """
        write_id = uuid.uuid4().hex
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        with _as_store_errors(location):
            writer.format("delta").option("userMetadata", write_id).save(spark_uri(location))
        table = self._table(location)
        for history in (table.history(RECENT_COMMITS), table.history()):
            commit = history.where(F.col("userMetadata") == write_id).select("version").head()
            if commit is not None:
                return commit.version
        raise TableStoreError(f"{location}: the commit of write {write_id} is missing from the Delta log")


@contextmanager
def _as_store_errors(location: str) -> Iterator[None]:
    """delta-spark's refusals as the table store's errors; nothing was committed in any of these cases."""
    try:
        yield
    except DeltaConcurrentModificationException as exc:
        raise CommitConflictError(
            f"{location}: a concurrent commit conflicts with this write ({exc}); "
            "nothing was committed and the write can be rerun"
        ) from exc
    except AnalysisException as exc:
        condition = exc.getCondition() or ""
        if condition == "DELTA_REPLACE_WHERE_MISMATCH":
            raise PartitionOverwriteError(f"{location}: {exc}; nothing was committed") from exc
        if condition.startswith(_SCHEMA_CONDITIONS):
            raise TableSchemaError(f"{location}: {exc}") from exc
        raise


# Error conditions (prefixes) of data whose columns or partitioning do not fit the table.
_SCHEMA_CONDITIONS = (
    "DELTA_FAILED_TO_MERGE_FIELDS",
    "DELTA_MERGE_INCOMPATIBLE_DATATYPE",
    "DELTA_PARTITION_COLUMN_CAST_FAILED",
    "DELTA_UNEXPECTED_PARTITION_COLUMN",
    "DELTA_SCHEMA_CHANGE",
    "DELTA_METADATA_MISMATCH",
)
