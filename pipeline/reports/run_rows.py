"""The rows a report reads: the run's rows of its result tables, and `batches`, at the versions the run published.

Read once for every section of the page (each read resolves the table's files from its Delta log).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import schemas
from pipeline.tables.store import TableStore
from schemas.batches import STATUS_OK


class RunRows(NamedTuple):
    findings: DataFrame
    transactions: DataFrame
    partitions: DataFrame  # partition_summary
    batches: DataFrame  # the well-formed entries, of every run


def run_rows(store: TableStore, run_id: str, versions: Mapping[str, int] | None = None) -> RunRows:
    """`versions` are the table versions the run published (pipeline.tables.publication); without them the latest."""
    versions = versions or {}

    def of_run(table: str, schema: Any) -> DataFrame:
        return store.read(table, schema=schema, version=versions.get(table)).where(F.col("run_id") == run_id)

    batches = store.read("batches", schema=schemas.BATCHES, version=versions.get("batches"))
    return RunRows(
        findings=of_run("findings", schemas.FINDINGS),
        transactions=of_run("transactions", schemas.TRANSACTIONS),
        partitions=of_run("partition_summary", schemas.PARTITION_SUMMARY),
        batches=batches.where(F.col("entry_status") == STATUS_OK),
    )
