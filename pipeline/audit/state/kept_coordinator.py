"""The coordinator's records kept beside the replay, so that a run derives again only the `__transaction_state`
partitions whose records changed.

A partition's coordinator records (pipeline.audit.rules.transaction_log.records.records_of) are made from the records of
its audited replicas and their cleaner offsets alone (`audited_rows`), and so are the findings of the frames that look
at one partition's records only (pipeline.audit.core.registry.Frame.coordinator_local); the settings and the audit's
code, which they also depend on, are in the kept replay's fingerprint. A run keeps the records, a digest of what
each partition's were made from (`sources`), and those frames' findings beside its replay; the next run takes the
records and findings of every partition whose digest it finds again, and derives and checks the others.
"""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core.scratch import Scratch
from pipeline.audit.replay.files import Keeping
from pipeline.audit.replay.kept import CoordinatorOutcome
from pipeline.audit.state.coordinator import audited_rows, records_of
from schemas.keys import TP

log = logging.getLogger(__name__)

RECORDS = "coordinator_records"
SOURCES = "coordinator_sources"
KEPT_TABLES = (RECORDS, SOURCES)  # the scratch tables a run keeps beside its replay


def sources(rows: DataFrame) -> DataFrame:
    """Per partition, a digest of the rows its records are made from: their count and the XOR of their hashes (every
    column: the record, its location, its replica and the replica's cleaner offset)."""
    return rows.groupBy(*TP).agg(F.count(F.lit(1)).alias("rows"), F.bit_xor(F.xxhash64(*rows.columns)).alias("digest"))


def coordinator_records(
    transaction_log: DataFrame,
    audited: DataFrame,
    checkpoints: DataFrame | None,
    scratch: Scratch,
    keeping: Keeping | None,
) -> DataFrame:
    """The audited coordinator records, to write as scratch table `RECORDS` (their `sources` are written here): when
    the run keeps its replay, those of the partitions the kept replay holds unchanged are taken from it
    (`keeping.coordinator` says which), the others derived."""
    rows = audited_rows(transaction_log, audited, checkpoints)
    if keeping is None or keeping.outcome is None:  # the run keeps no replay
        return records_of(rows)
    now = scratch.materialise(sources(rows), SOURCES)
    earlier = keeping.outcome.earlier  # None when the kept replay was made under other settings or code
    if earlier is None or not all(name in earlier.tables for name in KEPT_TABLES):
        return records_of(rows)
    spark = transaction_log.sparkSession
    before = spark.read.parquet(earlier.tables[SOURCES])
    same = now.join(before, on=[*TP, "rows", "digest"], how="left_semi").select(*TP)
    keeping.coordinator = CoordinatorOutcome([tuple(row) for row in same.collect()], earlier)  # a row per partition
    log.debug(
        "coordinator records: %d partition(s) taken from the kept replay, the others derived again",
        len(keeping.coordinator.unchanged),
    )
    unchanged = keeping.coordinator.partitions(spark)
    kept = spark.read.parquet(earlier.tables[RECORDS]).join(unchanged, on=TP, how="left_semi")
    return records_of(rows.join(unchanged, on=TP, how="left_anti")).unionByName(kept)


def changed_records(records: DataFrame, outcome: CoordinatorOutcome) -> DataFrame:
    """The records of the partitions that were derived again."""
    return records.join(outcome.partitions(records.sparkSession), on=TP, how="left_anti")


def has_findings(outcome: CoordinatorOutcome | None, frame: str) -> bool:
    """Whether records were taken over from a kept replay that holds the frame's findings."""
    return outcome is not None and frame in outcome.earlier.row_findings


def with_kept_findings(outcome: CoordinatorOutcome, frame: str, found: DataFrame) -> DataFrame:
    """`found`, the frame's findings of the partitions derived again, with those of the partitions taken from the
    kept replay, as it kept them."""
    spark = found.sparkSession
    earlier = spark.read.schema(found.schema).parquet(outcome.earlier.row_findings[frame])
    kept = earlier.join(outcome.partitions(spark), on=TP, how="left_semi")
    return found.unionByName(kept.select(*found.schema.fieldNames()))
