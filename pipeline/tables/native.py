"""Native backend: delta-spark writes, reads and commits inside the JVM (the jars `produce-audit prepare`
installs, spark-submit --packages, Databricks) the tables whose protocol has features.

The tables whose files the tasks write themselves (`batches`, `transaction_log`: TableStore.staged_partitions)
are committed by delta-rs whichever backend runs, since delta-spark has no public API to commit files it did not
write. So is every other write to a table of the plain protocol (every table produce-audit creates:
staged_write.writable_plainly): Spark's Parquet writer stages the files and delta-rs commits them, as the embedded
backend does. A delta-spark write plans and runs Spark jobs of its own (the snapshot, the files a partition
overwrite replaces, each file's statistics): the six result tables of a sample run took 4.0-4.6 s each that way,
0.5-1.6 s staged (BENCHMARKS.md, "Result tables committed by delta-rs").

delta-spark's own errors are raised as the table store's (rows outside a partition overwrite, data that does
not fit the table, a concurrent commit), so callers handle one set whichever backend wrote. Versions, history, a
write's commit and RESTORE go through delta-rs on the same Delta log (pipeline.tables.delta_log): delta-spark
would load a table snapshot and run Spark jobs for each. For the same reason a table whose protocol needs no
reader feature is read as the files its snapshot lists (pipeline.tables.snapshot_files); delta-spark reads the
others.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from delta.exceptions import DeltaConcurrentModificationException
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, DataFrameWriter, SparkSession
from pyspark.sql.types import StructType

from pipeline.tables import delta_log
from pipeline.tables.backend import (
    CommitConflictError,
    PartitionOverwriteError,
    TableSchemaError,
    TableStoreError,
    replace_where_predicate,
    spark_uri,
)
from pipeline.tables.snapshot_files import plain_snapshot, read_snapshot
from pipeline.tables.staged_write import (
    APPEND,
    OVERWRITE,
    OVERWRITE_PARTITIONS,
    PARQUET_TIMESTAMPS,
    writable_plainly,
    write_dataframe,
)
from pipeline.tables.vacuum import vacuum

SKIP_EMPTY_COMMITS = "spark.databricks.delta.skipRecordingEmptyCommits"


class NativeBackend:
    """Plain `format("delta")` reads and writes, so delta-spark enforces everything Delta defines."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        # delta-spark records no commit for a write without rows to add or remove (an empty append or partition
        # overwrite) unless told to, so a run's empty write to an existing table found no commit carrying its id.
        # Recorded, as delta-rs records them, every write has its commit and version.
        spark.conf.set(SKIP_EMPTY_COMMITS, "false")
        spark.conf.set(*PARQUET_TIMESTAMPS)

    def exists(self, location: str) -> bool:
        return delta_log.exists(location)

    def append(self, df: DataFrame, location: str, partition_by: list[str] | None) -> int:
        if writable_plainly(location):
            return write_dataframe(df, location, APPEND, partition_by)
        return self._save(df.write.mode("append").option("mergeSchema", "true"), location, partition_by)

    def overwrite(self, df: DataFrame, location: str, partition_by: list[str] | None) -> int:
        if writable_plainly(location):
            return write_dataframe(df, location, OVERWRITE, partition_by or [])
        return self._save(df.write.mode("overwrite").option("overwriteSchema", "true"), location, partition_by)

    def overwrite_partitions(
        self, df: DataFrame, location: str, partition_by: list[str], values: dict[str, list]
    ) -> int:
        if writable_plainly(location):
            return write_dataframe(df, location, OVERWRITE_PARTITIONS, partition_by, values)
        # delta-spark fails the write, committing nothing, when a row does not match the predicate.
        writer = df.write.mode("overwrite").option("replaceWhere", replace_where_predicate(values))
        writer = writer.option("mergeSchema", "true")  # columns a newer release writes are added
        return self._save(writer, location, partition_by)

    def read(self, location: str, schema: StructType | None, version: int | None) -> DataFrame:
        table = plain_snapshot(location, version)
        if table is not None:
            return read_snapshot(self._spark, location, table, schema)
        reader = self._spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(spark_uri(location))

    def history(self, location: str, limit: int | None = None) -> list[dict[str, Any]]:
        return delta_log.history(location, limit)

    def version(self, location: str) -> int:
        return delta_log.version(location)

    def restore(self, location: str, version: int) -> int:
        return delta_log.restore(location, version)

    def vacuum(self, location: str, retention_hours: int, keep_versions: list[int]) -> int:
        return vacuum(location, retention_hours, keep_versions)

    def _save(self, writer: DataFrameWriter, location: str, partition_by: list[str] | None) -> int:
        """Write, then find the commit by the write id it carries in commitInfo.userMetadata.

        Asking for the latest version instead would be wrong as soon as another job commits in between.
        """
        write_id = uuid.uuid4().hex
        base_version = delta_log.version(location)
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        with _as_store_errors(location):
            writer.format("delta").option("userMetadata", write_id).save(spark_uri(location))
        version = delta_log.find_commit(location, write_id, base_version)
        if version is None:
            raise TableStoreError(f"{location}: the commit of write {write_id} is missing from the Delta log")
        return version


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
