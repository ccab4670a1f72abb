"""The coordinator's records (`__transaction_state`, spec §5) as the cross-checks and the derived tables read them:
per producer id, the ids, epochs, partitions and decisions the coordinator recorded."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from schemas.keys import CLUSTER_PRODUCER
from schemas.transaction_log import (
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
)


def tp_name() -> Column:
    """The partition as coordinator records name it (`topic-partition`); it is within their cluster."""
    return F.concat_ws("-", F.col("topic"), F.col("partition").cast("string"))


def known_producers(records: DataFrame) -> DataFrame:
    ids = F.explode(F.array("producer_id", "previous_producer_id", "next_producer_id")).alias("producer_id")
    known = records.select("cluster_id", ids).where(F.col("producer_id") >= 0).distinct()
    return known.withColumn("is_known", F.lit(True))


def tv2_transaction_epochs(records: DataFrame) -> DataFrame:
    """(producer id, epoch) of every Ongoing record that says ClientTransactionVersion 2: the transactions written
    the V2 way. The version is the transaction's, not the producer id's: a coordinator that speaks TV2 writes its
    own records (a fence's abort, the Empty after it) as TV2 while the client that goes on under the bumped epoch
    is V1, and a V2 instance of a transactional id takes over the producer id of a V1 one."""
    return (
        records.where(F.col("is_tv2") & (F.col("state") == ONGOING) & (F.col("producer_id") >= 0))
        .select(*CLUSTER_PRODUCER, "producer_epoch")
        .distinct()
    )


def ongoing_partitions(records: DataFrame) -> DataFrame:
    """(cluster, producer id, epoch, partition name) of every Ongoing record."""
    return (
        records.where(~F.col("is_tombstone") & (F.col("state") == ONGOING))
        .select(*CLUSTER_PRODUCER, "producer_epoch", F.explode("partition_set").alias("tp_name"))
        .distinct()
        .withColumn("is_listed", F.lit(True))
    )


def latest_per_id(records: DataFrame) -> DataFrame:
    """Each transactional id's latest record in its partition (`latest`): the one no later record follows."""
    return records.where(F.col("transactional_id").isNotNull() & ~F.col("followed")).select(
        "cluster_id",
        F.col("topic").alias("coordinator_topic"),
        "transactional_id",
        F.struct(
            "is_tombstone", "state", "state_name", "producer_id", "producer_epoch", "partition_set", "record_offset"
        ).alias("latest"),
    )


def latest_decisions(records: DataFrame) -> DataFrame:
    """Per (cluster, producer id, partition name), the latest Prepare* record listing it (`decision`), with whether
    a later record of its transactional id follows it (`decision.completed`) and whether an Ongoing record listing
    the partition came after it (`reopened`: a new transaction added the partition again)."""
    listing = (
        records.withColumn("completed", F.col("followed"))
        .where(~F.col("is_tombstone") & F.col("state").isin(ONGOING, PREPARE_COMMIT, PREPARE_ABORT))
        .withColumn("tp_name", F.explode("partition_set"))
    )
    decision = F.struct(
        "batch_timestamp",
        "record_offset",
        "transactional_id",
        F.col("producer_epoch").alias("epoch"),
        "state_name",
        "completed",
    )
    is_ongoing = F.col("state") == ONGOING
    return (
        listing.groupBy(*CLUSTER_PRODUCER, "tp_name")
        .agg(
            F.max(F.when(~is_ongoing, decision)).alias("decision"),
            F.max(F.when(is_ongoing, F.struct("batch_timestamp", "record_offset"))).alias("_ongoing"),
        )
        .where(F.col("decision").isNotNull())
        .select(
            *CLUSTER_PRODUCER,
            "tp_name",
            "decision",
            F.coalesce(
                F.col("_ongoing") > F.struct("decision.batch_timestamp", "decision.record_offset"), F.lit(False)
            ).alias("reopened"),
        )
    )
