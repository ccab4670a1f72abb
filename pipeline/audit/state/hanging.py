"""Why a transaction hangs: the cause of every open transaction (data without a marker), its evidence, and the
`kafka-transactions.sh abort` command that ends it.

The causes (schemas.transactions.CAUSES) are decided in this order, the first that holds winning:

1. LATE_DATA: the data came after a marker had closed its epoch's transaction: the producer's last marker on the
   partition has a higher epoch than the data (a fence, a timeout abort, a V2 marker), or the coordinator's latest
   decision listing the partition was written before the data started and no Ongoing record added the partition
   again (a late batch of a V1 epoch);
2. MARKER_MISSING: that decision (a Prepare* record of the producer at the data's epoch or above listing the
   partition, with no Ongoing record listing it after) was written after the data started, yet no marker came,
   as after an unclean leader election; `completed` says a later record (Complete*) followed it;
3. TRANSACTIONAL_ID_EXPIRED: a transactional id of the producer has a tombstone (or a persisted Dead) as its
   latest record: the coordinator forgot the transaction;
4. NO_TRANSACTIONAL_ID: no coordinator record names the producer id (as producer, previous or next producer id)
   although the records reach past the transaction's start. An input holding only some `__transaction_state`
   partitions looks the same (pipeline.audit.rules.cross_checks.producers says why that cannot be told), so the evidence
   gives the number of partitions read;
5. PARTITION_NOT_ADDED: the coordinator knows the producer, but no Ongoing record of it at the data's epoch lists
   the partition (the pre-KIP-890 root cause, XTX-004);
6. COORDINATOR_ONGOING: an Ongoing record at the data's epoch lists the partition and no decision followed: the
   transaction is in progress as far as the records go;
7. UNKNOWN: none of these, for instance without `__transaction_state` in the input.

Clock skew between clients and the coordinator can move a transaction between 1 and 2 (data timestamps are the
client's create time unless the topic uses LogAppendTime). Every step joins per-transaction or per-producer rows.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.audit.state.coordinator import latest_decisions, latest_per_id, ongoing_partitions, tp_name
from pipeline.audit.state.partitions import abort_command
from schemas.keys import CLUSTER_PRODUCER, TP, TP_PID
from schemas.transaction_log import DEAD
from schemas.transactions import (
    CAUSE_ID_EXPIRED,
    CAUSE_LATE_DATA,
    CAUSE_MARKER_MISSING,
    CAUSE_NO_TRANSACTIONAL_ID,
    CAUSE_ONGOING,
    CAUSE_PARTITION_NOT_ADDED,
    CAUSE_UNKNOWN,
)

CAUSE_COLUMNS = ("cause", "cause_evidence", "abort_command")
DECISION_TYPE = (  # cross_markers.latest_decisions' `decision`, for an input without coordinator records
    "struct<batch_timestamp:bigint,record_offset:bigint,transactional_id:string,epoch:int,state_name:string,"
    "completed:boolean>"
)


def transaction_causes(open_txns: DataFrame, transactions: DataFrame, records: DataFrame | None) -> DataFrame:
    """Per open transaction (topic, partition, producer id, first offset): `cause`, `cause_evidence` and
    `abort_command`. `records` are the audited coordinator records, None when the input has none."""
    rows = open_txns.select(*TP_PID, "first_offset", "producer_epoch", "start_timestamp").join(
        _last_markers(transactions), on=TP_PID, how="left"
    )
    if records is None:
        rows = rows.select(
            "*",
            F.lit(None).cast(DECISION_TYPE).alias("decision"),
            F.lit(False).alias("reopened"),
            F.lit(None).cast("string").alias("transactional_ids"),
            F.lit(None).cast("boolean").alias("is_listed"),
            F.lit(None).cast("struct<transactional_id:string,record_offset:bigint>").alias("expired"),
            F.lit(0).cast("long").alias("coordinator_partitions"),
            F.lit(None).cast("long").alias("coordinator_until"),
        )
    else:
        rows = (
            rows.withColumn("tp_name", tp_name())
            .join(latest_decisions(records), on=[*CLUSTER_PRODUCER, "tp_name"], how="left")
            .join(_transactional_ids(records), on=CLUSTER_PRODUCER, how="left")
            .join(ongoing_partitions(records), on=[*CLUSTER_PRODUCER, "producer_epoch", "tp_name"], how="left")
            .join(_expired_ids(records), on=CLUSTER_PRODUCER, how="left")
            .join(_coverage(records), on="cluster_id", how="left")
            .fillna(0, subset=["coordinator_partitions"])
        )
    cause = _cause()
    return rows.select(
        *TP_PID,
        "first_offset",
        cause.alias("cause"),
        _evidence(cause).alias("cause_evidence"),
        abort_command(F.col("topic"), F.col("partition"), F.col("first_offset")).alias("abort_command"),
    )


def _last_markers(transactions: DataFrame) -> DataFrame:
    """Per partition and producer, its last marker (`last_marker`: offset and epoch); an open transaction is the
    producer's last on the partition, so this marker precedes all of its data."""
    return (
        transactions.where(F.col("marker_offset").isNotNull())
        .groupBy(*TP_PID)
        .agg(
            F.max(F.struct(F.col("marker_offset").alias("offset"), F.col("marker_epoch").alias("epoch"))).alias(
                "last_marker"
            )
        )
    )


def _transactional_ids(records: DataFrame) -> DataFrame:
    """Per producer id the coordinator records name, its transactional ids (comma separated)."""
    ids = F.explode(F.array("producer_id", "previous_producer_id", "next_producer_id")).alias("producer_id")
    return (
        records.where(F.col("transactional_id").isNotNull())
        .select("cluster_id", ids, "transactional_id")
        .where(F.col("producer_id") >= 0)
        .groupBy(*CLUSTER_PRODUCER)
        .agg(F.array_join(F.sort_array(F.collect_set("transactional_id")), ",").alias("transactional_ids"))
    )


def _expired_ids(records: DataFrame) -> DataFrame:
    """Per producer id, a transactional id of it whose latest record is a tombstone or Dead (`expired`)."""
    ids_of_producer = (
        records.where((F.col("producer_id") >= 0) & F.col("transactional_id").isNotNull())
        .select(*CLUSTER_PRODUCER, F.col("topic").alias("coordinator_topic"), "transactional_id")
        .distinct()
    )
    gone = F.col("latest.is_tombstone") | (F.col("latest.state") == DEAD)
    return (
        ids_of_producer.join(
            latest_per_id(records), on=["cluster_id", "coordinator_topic", "transactional_id"], how="inner"
        )
        .where(gone)
        .groupBy(*CLUSTER_PRODUCER)
        .agg(F.min(F.struct("transactional_id", F.col("latest.record_offset").alias("record_offset"))).alias("expired"))
    )


def _coverage(records: DataFrame) -> DataFrame:
    """Per cluster: how many `__transaction_state` partitions were read, and the time of their newest batch."""
    return records.groupBy("cluster_id").agg(
        F.count_distinct(*TP).alias("coordinator_partitions"), F.max("batch_timestamp").alias("coordinator_until")
    )


def _decided() -> Column:
    """The latest Prepare* record listing the partition is at the data's epoch or above and nothing re-added it."""
    return F.col("decision").isNotNull() & ~F.col("reopened") & (F.col("producer_epoch") <= F.col("decision.epoch"))


def _late_by_epoch() -> Column:
    return F.coalesce(F.col("last_marker.epoch") > F.col("producer_epoch"), F.lit(False))


def _cause() -> Column:
    known = F.col("transactional_ids").isNotNull()
    late_by_decision = _decided() & (F.col("start_timestamp") > F.col("decision.batch_timestamp"))
    return (
        F.when(_late_by_epoch() | late_by_decision, F.lit(CAUSE_LATE_DATA))
        .when(_decided(), F.lit(CAUSE_MARKER_MISSING))
        .when(F.col("expired").isNotNull(), F.lit(CAUSE_ID_EXPIRED))
        .when(~known & (F.col("coordinator_until") >= F.col("start_timestamp")), F.lit(CAUSE_NO_TRANSACTIONAL_ID))
        .when(known & F.col("is_listed").isNull(), F.lit(CAUSE_PARTITION_NOT_ADDED))
        .when(known, F.lit(CAUSE_ONGOING))
        .otherwise(F.lit(CAUSE_UNKNOWN))
    )


def _evidence(cause: Column) -> Column:
    """What each cause rests on, as a map of text values (null entries left out)."""
    decision = {
        "transactional_id": F.col("decision.transactional_id"),
        "decision": F.col("decision.state_name"),
        "decision_offset": F.col("decision.record_offset"),
        "decision_epoch": F.col("decision.epoch"),
    }
    by_cause = {
        CAUSE_LATE_DATA: {
            "data_epoch": F.col("producer_epoch"),
            "last_marker_offset": F.col("last_marker.offset"),
            "last_marker_epoch": F.col("last_marker.epoch"),
            **{name: F.when(~_late_by_epoch(), value) for name, value in decision.items()},
        },
        CAUSE_MARKER_MISSING: {**decision, "completed": F.col("decision.completed")},
        CAUSE_ID_EXPIRED: {
            "transactional_id": F.col("expired.transactional_id"),
            "latest_record_offset": F.col("expired.record_offset"),
        },
        CAUSE_NO_TRANSACTIONAL_ID: {
            "coordinator_partitions": F.col("coordinator_partitions"),
            "coordinator_until": F.col("coordinator_until"),
        },
        CAUSE_PARTITION_NOT_ADDED: {
            "transactional_ids": F.col("transactional_ids"),
            "data_epoch": F.col("producer_epoch"),
        },
        CAUSE_ONGOING: {"transactional_ids": F.col("transactional_ids")},
        CAUSE_UNKNOWN: {
            "coordinator_partitions": F.col("coordinator_partitions"),
            "coordinator_until": F.col("coordinator_until"),
        },
    }
    evidence = F.lit(None).cast("map<string,string>")
    for name, values in by_cause.items():
        entries = F.create_map(*[item for key, value in values.items() for item in (F.lit(key), value.cast("string"))])
        evidence = F.when(cause == name, F.map_filter(entries, lambda _, value: value.isNotNull())).otherwise(evidence)
    return evidence
