"""The `read_committed` table: per partition, the offsets a read_committed consumer stops at and the aborted
ranges it skips (schemas.read_committed describes the rows), for testing clients and lag exporters against.

Built from the per-transaction and per-partition state of the run; the high watermark comes from the audited
replica's replication-offset-checkpoint when the log dir's checkpoints were ingested.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.audit.state.partitions import checkpointed_offsets
from schemas.checkpoints import REPLICATION_OFFSET
from schemas.keys import TP
from schemas.read_committed import HW_FROM_CHECKPOINT, HW_FROM_LOG_END, KIND_ABORTED, KIND_PARTITION
from schemas.transactions import OUTCOME_ABORTED

PARTITION_COLUMNS = (
    "log_start_offset",
    "log_end_offset",
    "high_watermark",
    "high_watermark_source",
    "first_unstable_offset",
    "last_stable_offset",
)
PARTITION_TYPES = {"high_watermark_source": "string"}  # the others are offsets
RANGE_COLUMNS = ("producer_id", "first_offset", "last_offset", "abort_marker_offset", "aborted_records")


def build_read_committed(
    transactions: DataFrame,
    partitions: DataFrame,
    checkpoints: DataFrame | None = None,
    replicas: DataFrame | None = None,
) -> DataFrame:
    """`read_committed` rows (without the run id): one PARTITION row per partition, one ABORTED row per aborted
    transaction with data."""
    if checkpoints is not None and replicas is not None:
        partitions = partitions.join(
            checkpointed_offsets(checkpoints, replicas, REPLICATION_OFFSET, "checkpoint_high_watermark"),
            on=TP,
            how="left",
        )
    else:
        partitions = partitions.withColumn("checkpoint_high_watermark", F.lit(None).cast("long"))
    high_watermark = F.coalesce("checkpoint_high_watermark", "log_end_offset")
    unstable = F.col("first_unstable_offset")
    offsets = partitions.select(
        *TP,
        "broker_id",
        F.lit(KIND_PARTITION).alias("kind"),
        *[F.lit(None).cast("long").alias(name) for name in RANGE_COLUMNS],
        "log_start_offset",
        "log_end_offset",
        high_watermark.alias("high_watermark"),
        F.when(F.col("checkpoint_high_watermark").isNotNull(), F.lit(HW_FROM_CHECKPOINT))
        .otherwise(F.lit(HW_FROM_LOG_END))
        .alias("high_watermark_source"),
        unstable.alias("first_unstable_offset"),
        F.when(unstable < high_watermark, unstable).otherwise(high_watermark).alias("last_stable_offset"),
    )
    aborted = transactions.where((F.col("outcome") == OUTCOME_ABORTED) & F.col("first_offset").isNotNull()).select(
        *TP,
        "broker_id",
        F.lit(KIND_ABORTED).alias("kind"),
        "producer_id",
        "first_offset",
        "last_offset",
        F.col("marker_offset").alias("abort_marker_offset"),
        F.col("record_count").alias("aborted_records"),
        *[F.lit(None).cast(PARTITION_TYPES.get(name, "long")).alias(name) for name in PARTITION_COLUMNS],
    )
    return offsets.unionByName(aborted)
