"""Intermediate tables of one audit run: written once as Parquet, then read by every later plan.

Writing a stage out cuts its lineage: the plans that read it start from a file scan, so no plan the driver
optimises holds another stage's windows and joins, and its size stays the same whatever the number of rules.
The folder (by default `<warehouse>/_scratch/<run id>`) is removed when the run's tables are written.
"""

from __future__ import annotations

import logging
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pipeline.plan_stats import PlanStats

log = logging.getLogger(__name__)


class Scratch:
    def __init__(self, spark: SparkSession, root: str, stats: PlanStats | None = None) -> None:
        self.spark = spark
        self.root = root.rstrip("/")
        self.stats = stats if stats is not None else PlanStats()
        self._schemas: dict[str, T.StructType] = {}

    def materialise(self, df: DataFrame, name: str) -> DataFrame:
        """Write `df` as `name` (replacing an earlier write of this run) and return a scan of it."""
        self._write(df, name, "overwrite")
        return self.read(name)

    def append(self, df: DataFrame, name: str) -> None:
        """Add the rows of `df` to `name`; every append must have the same column names and types."""
        known = self._schemas.get(name)
        if known is not None and known.simpleString() != df.schema.simpleString():
            raise ValueError(f"scratch table {name}: {df.schema.simpleString()} differs from {known.simpleString()}")
        self._write(df, name, "append")

    def read(self, name: str) -> DataFrame:
        return self.spark.read.schema(self._schemas[name]).parquet(self.path(name))

    def path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def remove(self) -> None:
        """Delete the folder and everything in it (any filesystem Hadoop reaches)."""
        jvm = self.spark._jvm
        path = jvm.org.apache.hadoop.fs.Path(self.root)
        path.getFileSystem(self.spark._jsc.hadoopConfiguration()).delete(path, True)

    def _write(self, df: DataFrame, name: str, mode: str) -> None:
        self.stats.measure(df, name)
        started = time.perf_counter()
        df.write.mode(mode).parquet(self.path(name))
        self._schemas[name] = df.schema
        log.debug("wrote scratch table %s in %.2f s", name, time.perf_counter() - started)
