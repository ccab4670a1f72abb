"""Embedded backend: Spark writes the Parquet files and delta-rs commits them, so no Delta jars are needed.

Spark writes the DataFrame as Hive-partitioned Parquet into the write's staging folder, and the files are
committed from there in one transaction (pipeline.tables.staged_write), so readers see nothing before the commit
and a failed write leaves neither a version nor files.
"""

from __future__ import annotations

from typing import Any

from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pipeline.tables import delta_log
from pipeline.tables.snapshot_files import read_snapshot
from pipeline.tables.staged_write import APPEND, OVERWRITE, OVERWRITE_PARTITIONS, PARQUET_TIMESTAMPS, write_dataframe
from pipeline.tables.vacuum import vacuum


class EmbeddedBackend:
    """Spark for the data, delta-rs for the Delta log."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        spark.conf.set(*PARQUET_TIMESTAMPS)

    def exists(self, location: str) -> bool:
        return delta_log.exists(location)

    def append(self, df: DataFrame, location: str, partition_by: list[str] | None) -> int:
        return write_dataframe(df, location, APPEND, partition_by)

    def overwrite(self, df: DataFrame, location: str, partition_by: list[str] | None) -> int:
        return write_dataframe(df, location, OVERWRITE, partition_by or [])

    def overwrite_partitions(
        self, df: DataFrame, location: str, partition_by: list[str], values: dict[str, list]
    ) -> int:
        return write_dataframe(df, location, OVERWRITE_PARTITIONS, partition_by, values)

    def read(self, location: str, schema: T.StructType | None, version: int | None) -> DataFrame:
        return read_snapshot(self._spark, location, DeltaTable(location, version=version), schema)

    def history(self, location: str, limit: int | None = None) -> list[dict[str, Any]]:
        return delta_log.history(location, limit)

    def version(self, location: str) -> int:
        return delta_log.version(location)

    def restore(self, location: str, version: int) -> int:
        return delta_log.restore(location, version)

    def vacuum(self, location: str, retention_hours: int, keep_versions: list[int]) -> int:
        return vacuum(location, retention_hours, keep_versions)
