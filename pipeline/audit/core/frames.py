"""The frames most checks run on: rows of the materialised audit state, with the location every finding carries.

Frames that need one family's joins (the `.txnindex` comparison, snapshots, coordinator records) are
registered in that family's module.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.core.registry import frame
from schemas.keys import TP


@frame("batches", row_local=True)
def BATCHES(inputs: AuditInputs, ctx: AuditContext) -> DataFrame:  # noqa: N802  (a frame is a constant)
    """Every entry of the audited replicas, readable or not, with its file-order state."""
    return inputs.batches


@frame("producer_batches", row_local=True)
def PRODUCER_BATCHES(inputs: AuditInputs, ctx: AuditContext) -> DataFrame:  # noqa: N802
    """Batches that carry producer state, with the state the broker held before appending each."""
    return inputs.producer_batches


@frame("open_transactions", rows_of="open_transactions")
def OPEN_TRANSACTIONS(inputs: AuditInputs, ctx: AuditContext) -> DataFrame:  # noqa: N802
    """Transactions without a marker, with their reference time and whether they hang."""
    return inputs.open_transactions.select(
        "*",
        F.col("first_offset").alias("base_offset"),
        F.lit(None).cast("string").alias("source_file"),
        F.lit(None).cast("long").alias("position"),
    ).drop("first_offset")


@frame("partitions", rows_of="open_transactions")
def PARTITIONS(inputs: AuditInputs, ctx: AuditContext) -> DataFrame:  # noqa: N802
    """One row per partition with an open transaction: log start and end, first unstable offset, LSO, counts.

    The partitions without one have no first unstable offset to report.
    """
    unstable = F.broadcast(inputs.open_transactions.select(*TP).distinct())
    return inputs.partitions.join(unstable, on=TP, how="left_semi").select(
        "*",
        F.lit(None).cast("long").alias("producer_id"),
        F.lit(None).cast("int").alias("producer_epoch"),
        F.col("first_unstable_offset").alias("base_offset"),
        F.col("log_end_offset").alias("last_offset"),
        F.lit(None).cast("string").alias("source_file"),
        F.lit(None).cast("long").alias("position"),
    )
