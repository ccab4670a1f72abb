"""What each partition's rows add up to (spec §6.5): its offsets, log end, LSO and the producers whose transactions are
open at the end of the log; the `open_transactions` state and the command that aborts one."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core import expr as E
from pipeline.audit.core.mergeable import Mergeable, Part
from pipeline.audit.replay.plan import COMPACTION, LOG_START
from pipeline.audit.state.segments import partition_facts
from pipeline.config import AuditSettings
from pipeline.small_inputs import broadcast_unless_small
from schemas.batches import STATUS_LEGACY, STATUS_OK
from schemas.keys import TP
from schemas.transactions import OUTCOME_ABORTED, OUTCOME_COMMITTED, OUTCOME_OPEN


def open_transactions(
    transactions: DataFrame,
    segments: DataFrame,
    settings: AuditSettings,
    reference_time_ms: int | None,
) -> DataFrame:
    """Open transactions with their reference time, whether they hang, and the checkpointed log start; the
    partition's newest timestamp, compaction and checkpointed log start come from its `segments`
    (pipeline.audit.state.segments)."""
    facts = partition_facts(segments)
    limit = settings.transaction_max_timeout_ms + LATE_TRANSACTION_BUFFER_MS
    return (
        transactions.where(F.col("outcome") == OUTCOME_OPEN)
        .join(facts, on=TP, how="inner")
        .withColumn("reference_time_ms", _reference_time(reference_time_ms))
        .withColumn("silent_ms", F.col("reference_time_ms") - F.col("end_timestamp"))
        .withColumn("is_hanging", F.col("silent_ms") > F.lit(limit))
    )


def abort_command(topic: Column, partition: Column, start_offset: Column) -> Column:
    """KIP-664's admin abort of an open transaction by its start offset; the broker address is left to fill."""
    return F.format_string(
        "kafka-transactions.sh --bootstrap-server <broker:port> abort --topic %s --partition %d --start-offset %d",
        topic,
        partition,
        start_offset,
    )


def checkpointed_offsets(checkpoints: DataFrame, replicas: DataFrame, kind: str, name: str) -> DataFrame:
    """Per partition, the offset the audited replica's checkpoint file `kind` holds for it, as column `name`."""
    return (
        checkpoints.where((F.col("kind") == kind) & F.col("offset").isNotNull())
        .withColumn("broker_id", F.coalesce("broker_id", F.lit(-1)))
        .join(replicas.select(*TP, "broker_id"), on=[*TP, "broker_id"], how="inner")
        .groupBy(*TP)
        .agg(F.max("offset").alias(name))
    )


def partition_producer_parts() -> Mergeable:
    """Per (partition, producer id) of the replay: its retained offsets, batches, data records and transactional
    batches."""
    readable = E.col("entry_status").isin(STATUS_OK, STATUS_LEGACY)
    data = readable & ~E.coalesce(E.col("is_control"), E.lit(False))
    return Mergeable(
        "partition_producers",
        (*TP, "producer_id"),
        (
            Part("first_retained_offset", "min", E.when(readable, E.col("base_offset"))),
            Part("last_offset", "max", E.when(readable, E.col("last_offset"))),
            Part("batch_count", "count", E.when(readable, E.lit(1))),
            Part("record_count", "sum", E.when(data, E.col("record_count"))),
            Part("transactional_batches", "count", E.when(E.col("is_transactional"), E.lit(1))),
            Part("broker_id", "any", E.col("broker_id")),
        ),
    )


def partition_offsets(
    prepared: DataFrame,
    producers: DataFrame,
    segments: DataFrame,
    transactions: DataFrame,
    open_txns: DataFrame,
) -> DataFrame:
    """Per partition: log start/end, first unstable offset, LSO, transaction counts and compaction; `producers` and
    `segments` are the replay's `partition_producer_parts` and `segment_parts`.

    The log start is the first retained offset, or the checkpointed one when it is higher (DeleteRecords
    moves it inside a segment): `segments` carry it, as every replayed row does (pipeline.audit.replay.plan.LOG_START).
    """
    readable = F.col("entry_status").isin(STATUS_OK, STATUS_LEGACY)
    data = readable & ~F.coalesce(F.col("is_control"), F.lit(False))
    # Per producer id first, then per partition: a distinct count in one aggregate makes Spark expand every row.
    logs = producers.groupBy(*TP).agg(
        F.min("first_retained_offset").alias("first_retained_offset"),
        (F.max("last_offset") + 1).alias("log_end_offset"),
        F.sum("batch_count").alias("batch_count"),
        F.coalesce(F.sum("record_count"), F.lit(0)).cast("long").alias("record_count"),
        F.count(F.when(F.col("producer_id") >= 0, F.lit(1))).alias("producer_count"),
        F.first("broker_id").alias("broker_id"),
    )
    outcomes = transactions.groupBy(*TP).agg(
        F.count(F.when(F.col("outcome") == OUTCOME_COMMITTED, 1)).alias("committed_transactions"),
        F.count(F.when(F.col("outcome") == OUTCOME_ABORTED, 1)).alias("aborted_transactions"),
        F.sum(F.when(F.col("outcome") == OUTCOME_ABORTED, F.col("record_count"))).alias("aborted_records"),
    )
    facts = partition_facts(segments)
    logs = logs.join(facts.select(*TP, LOG_START), on=TP, how="left").withColumn(
        "log_start_offset", F.greatest(F.col("first_retained_offset"), F.col("checkpoint_log_start"))
    )
    unstable = open_txns.groupBy(*TP).agg(
        F.count(F.lit(1)).alias("open_transactions"),
        F.count(F.when(F.col("is_hanging"), 1)).alias("hanging_transactions"),
        F.min("first_offset").alias("open_first_offset"),
    )
    # greatest() skips nulls: without an open transaction there is no first unstable offset at all
    first_unstable = F.when(
        F.col("open_first_offset").isNotNull(), F.greatest(F.col("open_first_offset"), F.col("log_start_offset"))
    )
    counts = ("open_transactions", "hanging_transactions", "committed_transactions", "aborted_transactions")
    # One row per partition, broadcast: Spark cannot size it when it plans, and would otherwise shuffle and sort
    # every data batch for the join.
    stable = broadcast_unless_small(
        logs.join(unstable, on=TP, how="left").select(
            *TP, F.coalesce(first_unstable, F.col("log_end_offset")).alias("lso")
        )
    )
    committed_view = (
        prepared.where(data)
        .join(stable, on=TP, how="inner")
        .where(F.col("last_offset") < F.col("lso"))
        .groupBy(*TP)
        .agg(F.sum("record_count").alias("records_below_lso"))
    )
    aborted_below = (
        transactions.where(F.col("outcome") == OUTCOME_ABORTED)
        .join(stable, on=TP, how="inner")
        .where(F.col("first_offset") < F.col("lso"))
        .groupBy(*TP)
        .agg(F.sum("record_count").alias("aborted_below_lso"))
    )
    compaction = facts.select(*TP, *COMPACTION)
    return (
        logs.join(outcomes, on=TP, how="left")
        .join(compaction, on=TP, how="left")
        .join(unstable, on=TP, how="left")
        .join(committed_view, on=TP, how="left")
        .join(aborted_below, on=TP, how="left")
        .select(
            *TP,
            "log_start_offset",
            "log_end_offset",
            first_unstable.alias("first_unstable_offset"),
            F.coalesce(first_unstable, F.col("log_end_offset")).alias("last_stable_offset"),
            "batch_count",
            "record_count",
            "producer_count",
            *[F.coalesce(F.col(name), F.lit(0)).cast("long").alias(name) for name in counts],
            F.coalesce(F.col("aborted_records"), F.lit(0)).cast("long").alias("aborted_records"),
            F.col("record_count").alias("read_uncommitted_records"),
            (F.coalesce(F.col("records_below_lso"), F.lit(0)) - F.coalesce(F.col("aborted_below_lso"), F.lit(0)))
            .cast("long")
            .alias("read_committed_records"),
            "broker_id",
            *COMPACTION,
        )
    )


LATE_TRANSACTION_BUFFER_MS = 5 * 60 * 1000  # ProducerStateManager.LATE_TRANSACTION_BUFFER_MS


def _reference_time(reference_time_ms: int | None) -> Column:
    """Spec §6.0 step 6: the given audit time, else the newest timestamp in the partition."""
    if reference_time_ms is not None:
        return F.lit(reference_time_ms).cast("long")
    return F.col("partition_max_timestamp")
