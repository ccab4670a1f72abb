"""The replicas an audit reads: the one of each partition whose files are audited, and what the side files of those
replicas hold (the `.txnindex` entries the IDX rules compare with the log)."""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.small_inputs import broadcast_unless_small
from schemas.keys import TP

SEGMENT_FORMAT, DUMPLOG_FORMAT = "segment", "dumplog"  # `source_format` of log-dir and dump-text rows


def audited_replicas(segments: DataFrame, *side_files: DataFrame | None) -> DataFrame:
    """Replicas the audit reads that came from log directories, where .txnindex files sit beside segments, and
    the partitions read from dump text whose dump also printed such files: `side_files` (the txn_index and
    producer_snapshots tables, None when absent) say which, by their dump-text rows. `segments`: the replay's
    (pipeline.audit.state.segments)."""
    replicas = segments.where(F.col("source_format") == SEGMENT_FORMAT)
    printed = [
        files.where(F.col("source_format") == DUMPLOG_FORMAT).select(*TP) for files in side_files if files is not None
    ]
    if printed:
        dumped = reduce(DataFrame.union, printed).distinct()
        from_text = segments.where(F.col("source_format") == DUMPLOG_FORMAT)
        replicas = replicas.unionByName(from_text.join(broadcast_unless_small(dumped), on=TP, how="left_semi"))
    return (
        replicas.groupBy(*TP, "broker_id")
        .agg(F.max("is_compacted").alias("is_compacted"))
        .withColumn("has_index_files", F.lit(True))
    )


def audited_entries(txn_index: DataFrame, replicas: DataFrame) -> DataFrame:
    """Index entries of the audited replica of each partition."""
    return txn_index.withColumn("broker_id", F.coalesce("broker_id", F.lit(-1))).join(
        replicas.select(*TP, "broker_id"), on=[*TP, "broker_id"], how="inner"
    )
