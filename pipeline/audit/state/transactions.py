"""The `transactions` and `producer_state` tables: aggregates of the producer rows in parts that merge (spec §6.4), one
row per transaction and one per producer, and the COMMIT/ABORT markers the cross-checks read."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core import expr as E
from pipeline.audit.core.columns import accepted_data, cleared_after, epoch_bumping_marker
from pipeline.audit.core.expr import Expr
from pipeline.audit.core.mergeable import Mergeable, Part
from schemas.batches import CONTROL_COMMIT
from schemas.keys import TP_PID
from schemas.transactions import OUTCOME_ABORTED, OUTCOME_COMMITTED, OUTCOME_EMPTY, OUTCOME_OPEN


def transaction_parts() -> Mergeable:
    """The transactions' aggregate of the producer rows, by (topic, partition, producer id, group): the
    transactional data of a marker group plus the marker that closes it (at most one per group)."""
    txn_data = E.col("is_data") & E.col("is_transactional")
    marker = E.col("is_marker")

    def data(column: str) -> Expr:
        return E.when(txn_data, E.col(column))

    def at_marker(name: str, column: str) -> Part:
        return Part(name, "max", E.when(marker, E.col(column)))

    # The version is one per producer (the replay's conclusion over its rows), so grouping by it is taking it; a
    # first() of this text would make Spark sort every row to aggregate them instead of hashing them.
    return Mergeable(
        "transactions",
        (*TP_PID, "txn_group", "transaction_version"),
        (
            Part("data_epoch", "first", data("producer_epoch"), data("base_offset")),
            Part("first_offset", "min", data("base_offset")),
            Part("last_offset", "max", data("last_offset")),
            at_marker("marker_offset", "base_offset"),
            at_marker("marker_epoch", "producer_epoch"),
            at_marker("coordinator_epoch", "coordinator_epoch"),
            at_marker("control_type", "control_type"),
            at_marker("marker_timestamp", "max_timestamp"),
            at_marker("marker_segment_base_offset", "segment_base_offset"),
            Part("batch_count", "count", data("base_offset")),
            Part("record_count", "sum", data("record_count")),
            Part("start_timestamp", "first", data("max_timestamp"), data("base_offset")),
            Part("last_data_timestamp", "max", data("max_timestamp")),
            Part("broker_id", "any", E.col("broker_id")),
        ),
        rows=E.col("is_producer_row") & (txn_data | marker),
    )


def transactions_of(parts: DataFrame) -> DataFrame:
    """One row per transaction from its parts (`transaction_parts`).

    Groups with a marker but no transactional data are EMPTY (spec §6.0a.7); groups with data and no
    marker are OPEN. The marker's control type and segment ride along for the `.txnindex` comparison.
    """
    outcome = (
        F.when(F.col("marker_offset").isNull(), F.lit(OUTCOME_OPEN))
        .when(F.col("batch_count") == 0, F.lit(OUTCOME_EMPTY))
        .when(F.col("control_type") == CONTROL_COMMIT, F.lit(OUTCOME_COMMITTED))
        .otherwise(F.lit(OUTCOME_ABORTED))
    )
    end_timestamp = F.coalesce(F.col("marker_timestamp"), F.col("last_data_timestamp"))
    return parts.select(
        *TP_PID,
        F.coalesce("data_epoch", "marker_epoch").alias("producer_epoch"),
        "first_offset",
        "last_offset",
        "marker_offset",
        "marker_epoch",
        "coordinator_epoch",
        outcome.alias("outcome"),
        "batch_count",
        F.coalesce("record_count", F.lit(0)).cast("long").alias("record_count"),
        "start_timestamp",
        end_timestamp.alias("end_timestamp"),
        (end_timestamp - F.col("start_timestamp")).alias("duration_ms"),
        "transaction_version",
        "broker_id",
        "control_type",
        "marker_segment_base_offset",
    )


def markers_of(parts: DataFrame) -> DataFrame:
    """Every COMMIT/ABORT marker of the producer rows, a row each with the columns `batches` names them by, from the
    transactions' parts (`transaction_parts`): a group ends at its one marker. Read here instead of from the replay,
    whose every row a scan for the markers reads; an empty control batch, which the cleaner leaves and the broker
    ignores, is not a producer row and so not among them."""
    return parts.where(F.col("marker_offset").isNotNull()).select(
        *TP_PID,
        F.col("marker_epoch").alias("producer_epoch"),
        F.col("marker_offset").alias("base_offset"),
        "control_type",
        "coordinator_epoch",
        F.col("marker_timestamp").alias("max_timestamp"),
    )


def build_transactions(replayed: DataFrame) -> DataFrame:
    """One row per transaction of the replay `replayed` (`transactions_of`); aggregated by (topic,
    partition, producer id, group): no exchange beyond the replay's."""
    return transactions_of(transaction_parts().of(replayed))


def producer_state_parts() -> Mergeable:
    """The producer state's aggregate of the producer rows, by (topic, partition, producer id)."""
    order = E.col("base_offset")
    accepted = accepted_data()
    group_open = E.when(E.col("is_marker"), E.lit(None)).otherwise(
        E.coalesce(E.col("txn_first_offset"), E.when(E.col("is_data") & E.col("is_transactional"), order))
    )
    # By the version, one per producer, as the transactions: aggregated by hash, not by sorting the rows.
    return Mergeable(
        "producer_state",
        (*TP_PID, "transaction_version"),
        (
            Part("producer_epoch", "max", E.col("producer_epoch")),
            Part("first_offset", "min", order),
            Part("accepted_sequence", "last", E.when(accepted, E.col("last_sequence")), E.when(accepted, order)),
            Part("last_bump", "max", E.when(epoch_bumping_marker(), order)),
            Part("last_offset", "max", E.when(E.col("is_data"), E.col("last_offset"))),
            Part("last_timestamp", "last", E.col("max_timestamp"), order),
            Part("coordinator_epoch", "max", E.when(E.col("is_marker"), E.col("coordinator_epoch"))),
            Part("current_txn_start_offset", "last", group_open, order),
            Part("batch_count", "count", E.lit(1)),
            Part("is_transactional", "max", E.col("is_transactional")),
            Part("broker_id", "any", E.col("broker_id")),
        ),
        rows=E.col("is_producer_row"),
    )


def producer_state_of(parts: DataFrame) -> DataFrame:
    """State per (cluster, topic, partition, producer id) after the last batch, as describe-producers reports it,
    from its parts (`producer_state_parts`): the last sequence is -1 once a marker that changed the epoch cleared the
    batch window (pipeline.audit.core.columns.window_cleared); the last accepted data batch is where the sequence is.
    `first_offset`, the producer's first batch, is not in the `producer_state` table."""
    cleared = cleared_after(F.col("accepted_sequence_at"), F.col("last_bump"))
    return parts.select(
        *TP_PID,
        "transaction_version",
        "producer_epoch",
        "first_offset",
        F.when(cleared, F.lit(-1)).otherwise(F.col("accepted_sequence")).alias("last_sequence"),
        "last_offset",
        "last_timestamp",
        "coordinator_epoch",
        "current_txn_start_offset",
        "batch_count",
        "is_transactional",
        "broker_id",
    )


def build_producer_state(replayed: DataFrame) -> DataFrame:
    """The producer state (`producer_state_of`) of the replay `replayed`."""
    return producer_state_of(producer_state_parts().of(replayed))
