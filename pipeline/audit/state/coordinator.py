"""The coordinator's records (`__transaction_state`, spec §5) as the cross-checks and the derived tables read them:
per producer id, the ids, epochs, partitions and decisions the coordinator recorded."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pipeline.audit.state.partition_sets import partition_set
from schemas.checkpoints import CLEANER_OFFSET
from schemas.keys import CLUSTER_PRODUCER, TP
from schemas.transaction_log import (
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
)

# The fields of an id's previous record that the transition rules compare with (pipeline.audit.rules.transaction_log).
PREVIOUS_FIELDS = (
    "is_tombstone",
    "state",
    "state_name",
    "producer_id",
    "producer_epoch",
    "next_producer_id",
    "transaction_timeout_ms",
    "partition_set",
    "last_update_timestamp_ms",
    "record_offset",
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


def audited_records(transaction_log: DataFrame, audited: DataFrame, checkpoints: DataFrame | None) -> DataFrame:
    """Records of the audited replica of each partition (the replicas of `audited`: the replay's rows, or a row per
    replica), with their location and uncleaned flag; `followed`: a later record of its transactional id follows it
    in the partition, `previous_timeout_ms`: the timeout of the id's record before it (one window here, which the
    frames and tables that need them read)."""
    return records_of(audited_rows(transaction_log, audited, checkpoints))


def audited_rows(transaction_log: DataFrame, audited: DataFrame, checkpoints: DataFrame | None) -> DataFrame:
    """The `transaction_log` rows of the audited replicas, with their replica's `cleaner-offset-checkpoint` value
    (`cleaner_offset`, null when there is none): all a partition's `records_of` are made from."""
    # One row per audited partition, broadcast: otherwise Spark sorts the wide records once more for a merge join.
    replicas = F.broadcast(audited.select(*TP, "broker_id").distinct())
    records = transaction_log.withColumn("broker_id", F.coalesce("broker_id", F.lit(-1))).join(
        replicas, on=[*TP, "broker_id"], how="inner"
    )
    if checkpoints is None:
        return records.withColumn("cleaner_offset", F.lit(None).cast("long"))
    cleaner = (
        checkpoints.where((F.col("kind") == CLEANER_OFFSET) & F.col("offset").isNotNull())
        .withColumn("broker_id", F.coalesce("broker_id", F.lit(-1)))
        .groupBy(*TP, "broker_id")
        .agg(F.max("offset").cast("long").alias("cleaner_offset"))
    )
    return records.join(F.broadcast(cleaner), on=[*TP, "broker_id"], how="left")


def records_of(rows: DataFrame) -> DataFrame:
    """`audited_records` of `audited_rows`; each partition's from its own rows alone. `prev`: the record of the same
    id before it when both are uncleaned (compaction keeps a partition's records from its last gap on whole), the
    transitions that spec §5.3 allows are checked on."""
    # The last gap of each partition from its offsets alone: only the window by transactional id below sorts the
    # wide records.
    in_partition = Window.partitionBy(*TP).orderBy("record_offset")
    gap_end = F.when(F.col("record_offset") > F.lag("record_offset").over(in_partition) + 1, F.col("record_offset"))
    last_gaps = rows.select(*TP, gap_end.alias("gap_end")).groupBy(*TP).agg(F.max("gap_end").alias("uncleaned_from"))
    records = rows.join(F.broadcast(last_gaps), on=TP, how="left").withColumn(
        "uncleaned_from", F.greatest("uncleaned_from", "cleaner_offset")
    )
    located = records.select(
        *[column for column in records.columns if column not in ("is_tombstone", "cleaner_offset")],
        F.coalesce("is_tombstone", F.lit(False)).alias("is_tombstone"),
        (F.col("record_offset") >= F.coalesce("uncleaned_from", F.lit(0))).alias("is_uncleaned"),
        F.col("record_offset").alias("base_offset"),
        F.col("record_offset").alias("last_offset"),
        partition_set(F.col("partitions")).alias("partition_set"),
        (F.coalesce("client_transaction_version", F.lit(0)) == 2).alias("is_tv2"),
    )
    # Everything that looks at an id's record before or after it, from the one sort of the records by id.
    of_id = Window.partitionBy(*TP, "transactional_id").orderBy("record_offset")
    return located.select(
        "*",
        F.lead("record_offset").over(of_id).isNotNull().alias("followed"),
        F.lag("transaction_timeout_ms").over(of_id).alias("previous_timeout_ms"),
        F.when(F.lag("is_uncleaned").over(of_id), F.lag(F.struct(*PREVIOUS_FIELDS)).over(of_id)).alias("prev"),
    )
