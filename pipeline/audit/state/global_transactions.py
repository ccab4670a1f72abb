"""The `global_transactions` table: every coordinator decision with the marker each listed partition holds.

A Prepare* record of (p, e) lists the partitions of one transaction; each should get a marker (p, e) of the
decided type. Under TV0/1 one epoch may hold several transactions, so the markers of (p, e) on a partition are
assigned to the Prepare* records of (p, e) listing it by time: a marker belongs to the latest of them written
at or before its timestamp (the earliest when all are later, as clock skew between brokers can make them),
and a decision takes the first marker assigned to it. Under TV2 each epoch holds one transaction and the
assignment is exact. A coordinator's records name partitions of its own cluster: they are looked up there only.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pipeline.audit.state.coordinator import tp_name
from schemas.batches import CONTROL_ABORT, CONTROL_COMMIT
from schemas.global_transactions import DECISION_ABORT, DECISION_COMMIT
from schemas.transaction_log import PREPARE_ABORT, PREPARE_COMMIT

DECISION_KEY = ["cluster_id", "coordinator_topic", "coordinator_partition", "prepare_offset"]
# The markers of one producer epoch on one partition, and the decisions of that epoch that list the partition.
PRODUCER_PARTITION = ["cluster_id", "producer_id", "producer_epoch", "tp_name"]


def _count(condition: Column) -> Column:
    return F.coalesce(F.sum(condition.cast("int")), F.lit(0)).cast("int")


def _decisions(records: DataFrame) -> DataFrame:
    """One row per (Prepare* record, partition it lists), with whether a later record of its id follows it."""
    return (
        records.withColumn("completed", F.col("followed"))
        .where(~F.col("is_tombstone") & F.col("state").isin(PREPARE_COMMIT, PREPARE_ABORT))
        .select(
            "cluster_id",
            F.col("topic").alias("coordinator_topic"),
            F.col("partition").alias("coordinator_partition"),
            F.col("record_offset").alias("prepare_offset"),
            F.col("batch_timestamp").alias("prepare_timestamp"),
            F.col("broker_id").alias("coordinator_broker_id"),
            "transactional_id",
            "producer_id",
            "producer_epoch",
            F.when(F.col("state") == PREPARE_COMMIT, CONTROL_COMMIT).otherwise(CONTROL_ABORT).alias("decided"),
            "completed",
            F.col("client_transaction_version").alias("transaction_version"),
            F.explode("partition_set").alias("tp_name"),
        )
    )


def _assigned_markers(decisions: DataFrame, markers: DataFrame) -> DataFrame:
    """The first marker each (decision, partition) was assigned, keyed by DECISION_KEY and `tp_name`.

    An as-of lookup, not a join: the markers and the decisions of one (producer id, epoch, partition) are sorted by
    time together, and each marker takes the latest decision before it from a running value. A join would pair
    every marker with every decision of the key, and under TV0/1 one producer's epoch can hold thousands of
    transactions on a partition. `markers`: a row per COMMIT/ABORT marker, named as in `batches`
    (pipeline.audit.rules.transactions.markers_of).
    """
    decision = F.struct("prepare_timestamp", *DECISION_KEY)
    markers = markers.select(
        *PRODUCER_PARTITION[:3],
        tp_name().alias("tp_name"),
        F.col("base_offset").alias("marker_offset"),
        "control_type",
        "coordinator_epoch",
        F.col("max_timestamp").alias("at"),
        F.lit(True).alias("is_marker"),
    )
    candidates = decisions.select(
        *PRODUCER_PARTITION,
        F.col("prepare_timestamp").alias("at"),
        F.lit(False).alias("is_marker"),
        decision.alias("decision"),
    )
    key = Window.partitionBy(*PRODUCER_PARTITION)
    so_far = key.orderBy("at", "is_marker", "decision").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    timed = F.when(F.col("decision.prepare_timestamp").isNotNull(), F.col("decision"))
    assigned = (
        markers.unionByName(candidates, allowMissingColumns=True)
        .select(
            "*",
            F.when(F.col("at").isNotNull(), F.last(timed, ignorenulls=True).over(so_far)).alias("_before"),
            F.min("decision").over(key).alias("_first"),
        )
        .where(F.col("is_marker"))
        .groupBy("cluster_id", "tp_name", "marker_offset", "control_type", "coordinator_epoch")
        .agg(F.max("_before").alias("_before"), F.min("_first").alias("_first"))
        .select("*", F.coalesce("_before", "_first").alias("_decision"))
        .where(F.col("_decision").isNotNull())
    )
    return (
        assigned.select(
            "tp_name",
            *[F.col(f"_decision.{name}").alias(name) for name in DECISION_KEY],
            "marker_offset",
            "control_type",
            "coordinator_epoch",
        )
        .groupBy(*DECISION_KEY, "tp_name")
        .agg(F.min(F.struct("marker_offset", "control_type", "coordinator_epoch")).alias("marker"))
    )


def build_global_transactions(
    records: DataFrame, markers: DataFrame, partitions: DataFrame, open_transactions: DataFrame
) -> DataFrame:
    """`global_transactions` rows (without the run id) from the audited coordinator records, the markers of the
    audited replicas, their partitions, a row each, and their open transactions (`coordinator_records.audited_records`,
    `transactions.markers_of`, `partitions`, `open_transactions`).

    The cleaner of a compacted partition removes a marker once the transaction's data is gone
    (`delete.retention.ms` later): a marker absent there is not missing unless the producer's data is still open on
    the partition."""
    decisions = _decisions(records)
    audited = partitions.select(
        "cluster_id",
        tp_name().alias("tp_name"),
        F.lit(True).alias("in_input"),
        F.col("compacted_by").isNotNull().alias("compacted"),
    )
    still_open = (
        open_transactions.select("cluster_id", tp_name().alias("tp_name"), "producer_id")
        .distinct()
        .withColumn("open_here", F.lit(True))
    )
    name = F.split("tp_name", "-")
    listed = (
        decisions.join(_assigned_markers(decisions, markers), on=[*DECISION_KEY, "tp_name"], how="left")
        .join(audited, on=["cluster_id", "tp_name"], how="left")
        .join(still_open, on=["cluster_id", "tp_name", "producer_id"], how="left")
        .withColumn(
            "may_be_cleaned",
            F.coalesce("compacted", F.lit(False)) & ~F.coalesce("open_here", F.lit(False)),
        )
        .select(
            "*",
            F.struct(
                F.regexp_extract("tp_name", r"^(.*)-\d+$", 1).alias("topic"),
                F.element_at(name, -1).cast("int").alias("partition"),
                F.coalesce("in_input", F.lit(False)).alias("in_input"),
                F.col("marker.marker_offset").alias("marker_offset"),
                F.col("marker.control_type").alias("control_type"),
                F.col("marker.coordinator_epoch").alias("coordinator_epoch"),
            ).alias("listed"),
        )
    )
    found = F.col("listed.control_type")
    in_input = F.col("listed.in_input")
    return (
        listed.groupBy(
            *DECISION_KEY,
            "prepare_timestamp",
            "coordinator_broker_id",
            "transactional_id",
            "producer_id",
            "producer_epoch",
            "decided",
            "completed",
            "transaction_version",
        )
        .agg(
            F.array_sort(F.collect_list("listed")).alias("partitions"),
            _count(found == F.col("decided")).alias("markers_agreeing"),
            _count(found != F.col("decided")).alias("markers_contradicting"),
            _count(in_input & found.isNull() & ~F.col("may_be_cleaned")).alias("markers_missing"),
        )
        .select(
            F.col("coordinator_topic").alias("topic"),
            F.col("coordinator_partition").alias("partition"),
            "transactional_id",
            "producer_id",
            "producer_epoch",
            F.when(F.col("decided") == CONTROL_COMMIT, DECISION_COMMIT).otherwise(DECISION_ABORT).alias("decision"),
            "prepare_offset",
            "prepare_timestamp",
            "completed",
            "transaction_version",
            "partitions",
            "markers_agreeing",
            "markers_contradicting",
            "markers_missing",
            ((F.col("markers_contradicting") > 0) | (F.col("completed") & (F.col("markers_missing") > 0))).alias(
                "is_torn"
            ),
            F.col("coordinator_broker_id").alias("broker_id"),
            "cluster_id",
        )
    )
