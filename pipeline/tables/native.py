"""Native backend: delta-spark writes, reads and commits inside the JVM (spark-submit --packages, Databricks)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, DataFrameWriter, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from pipeline.tables.backend import replace_where_predicate, spark_uri


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

    def vacuum(self, location: str, retention_hours: int, keep_versions: list[int]) -> int | None:
        """delta-spark keeps every snapshot younger than the retention (`keep_versions` is delta-rs only) and does
        not say how many files it removed."""
        self._spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
        self._table(location).vacuum(float(retention_hours))
        return None

    def _table(self, location: str) -> DeltaTable:
        return DeltaTable.forPath(self._spark, spark_uri(location))

    def _save(self, writer: DataFrameWriter, location: str, partition_by: list[str] | None) -> int:
        """Write, then find the commit by the write id it carries in commitInfo.userMetadata.

        Asking for the latest version instead would be wrong as soon as another job commits in between.
        """
        write_id = uuid.uuid4().hex
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        writer.format("delta").option("userMetadata", write_id).save(spark_uri(location))
        commit = self._table(location).history().where(F.col("userMetadata") == write_id).select("version").head()
        return commit.version
