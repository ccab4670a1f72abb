"""Segments against `__transaction_state` (spec §6.8): transactional data and producer ids against the coordinator.

The data rules are here (XTX-004, -005, -009, -011); markers against decisions are in
pipeline.audit.rules.cross_checks.markers, epoch chains in pipeline.audit.rules.cross_checks.epochs. Partitions are
matched by name: a `__transaction_state` record lists `topic-partition`, which must be a (topic, partition) of the
audited batches of the same cluster. The coordinator records come from pipeline.audit.replay.coordinator_records,
the markers and transactions from the replay.

Only part of a cluster's `__transaction_state` partitions may be in the input, so a producer id that no record
mentions (as producer id, previous or next producer id) is left alone: its coordinator history is not here.
That is why "no transactional id maps to p" (XTX-005) is not reported; LSO-002 still finds such a transaction
hanging by its age. Whether the input holds every partition cannot be told from it: the topic's partition count
is cluster metadata, not in the log dirs, and the ids' partitions (abs(hashCode) % count) do not settle it, since
the ids of partitions 0-24 of 50 also fit a topic of 25.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.core.registry import Fires, check, frame, rule
from pipeline.audit.state.coordinator import known_producers, latest_per_id, ongoing_partitions, tp_name
from schemas.keys import CLUSTER_PRODUCER, TP
from schemas.transaction_log import COMPLETE_STATES, EMPTY, ONGOING, PREPARE_ABORT, PREPARE_COMMIT
from schemas.transactions import OUTCOME_OPEN

HANGING_CONFIRMED = rule(
    "XTX-005",
    "HANGING_CONFIRMED",
    "ERROR",
    "6.8",
    "A transaction open at the end of the log whose producer's transactional id has moved on: its latest "
    "record is a tombstone, Empty, Complete*, another producer id, Ongoing at a newer epoch, or Ongoing/Prepare* "
    "without the partition. The spec's third case, no transactional id mapping to p at all, is not reported: the "
    "input may hold only some __transaction_state partitions (LSO-002 still reports such a transaction by age).",
    impact=(
        "The transactional id has moved on, so nothing will ever close this transaction: the LSO is stuck until it "
        "is aborted by hand."
    ),
    action=(
        "Abort it with `kafka-transactions.sh abort --topic T --partition N --start-offset F` (confirm with "
        "`kafka-transactions.sh find-hanging`)."
    ),
)
DATA_NOT_IN_TRANSACTION = rule(
    "XTX-004",
    "DATA_NOT_IN_TRANSACTION",
    "ERROR",
    "6.8",
    "Transactional data (p, e) on a partition that no Ongoing record of p at epoch e lists: the hanging-transaction "
    "root cause KIP-890 closes. ERROR when none of the producer's coordinator records was cleaned away, else WARN "
    "(the Ongoing record may have been compacted).",
    also=("WARN",),
    impact=(
        "Transactional data on a partition the coordinator never added: no marker will ever be sent there, so the "
        "transaction hangs (the classic pre-KIP-890 cause)."
    ),
    action=(
        "Abort the open transaction (LSO-002's command) and upgrade brokers to 3.6+ with "
        "`transaction.partition.verification.enable=true`."
    ),
)
OFFSETS_PARTITION_NOT_ADDED = rule(
    "XTX-009",
    "OFFSETS_PARTITION_NOT_ADDED",
    "ERROR",
    "6.8",
    "A transactional offset commit of p on __consumer_offsets-N while no Ongoing record of p lists "
    "__consumer_offsets-N (AddOffsetsToTxn adds it before TxnOffsetCommit).",
    impact=(
        "A transactional offset commit on a `__consumer_offsets` partition the transaction never added: the group's "
        "offsets may commit without the transaction's outcome, or hang."
    ),
    action=(
        "Upgrade brokers to 3.7+ (TxnOffsetCommit verification, KAFKA-15449) and check the client sends "
        "AddOffsetsToTxn."
    ),
)
PID_TO_MANY_IDS = rule(
    "XTX-011",
    "PID_TO_MANY_IDS",
    "CRITICAL",
    "6.8",
    "A producer id that writes transactional data maps to more than one transactional id over the coordinator "
    "records (a rotation through previous/next producer id stays within one id).",
    impact=(
        "One producer id serving several transactional ids defeats fencing: the ids can fence or close each other's "
        "transactions."
    ),
    action=(
        "As for TSL-014: stop the producers of those ids and check producer-id allocation; report with the broker "
        "version."
    ),
)


# A producer as the coordinator records know it: producer ids are allocated per cluster, and a coordinator's
# records name the partitions of its own cluster, so every join of them with the batches is within one cluster.


def _fully_uncleaned(records: DataFrame) -> DataFrame:
    """Per producer id, whether all of its coordinator records are uncleaned."""
    return (
        records.where(F.col("producer_id") >= 0)
        .groupBy(*CLUSTER_PRODUCER)
        .agg(F.min(F.col("is_uncleaned").cast("int")).cast("boolean").alias("history_uncleaned"))
    )


@frame("cross_checks.transaction_data")
def TRANSACTION_DATA(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """Transactions with data of producers the coordinator records know, located at their first offset.

    `is_listed`: an Ongoing record of the producer at the transaction's epoch lists its partition;
    `history_uncleaned`: none of the producer's coordinator records was cleaned away.
    """
    records = inputs.coordinator_records
    if records is None:
        return None
    return (
        inputs.transactions.where(F.col("first_offset").isNotNull())
        .withColumn("tp_name", tp_name())
        .join(known_producers(records), on=CLUSTER_PRODUCER, how="inner")
        .join(ongoing_partitions(records), on=[*CLUSTER_PRODUCER, "producer_epoch", "tp_name"], how="left")
        .join(_fully_uncleaned(records), on=CLUSTER_PRODUCER, how="left")
        .select(
            "*",
            F.col("first_offset").alias("base_offset"),
            F.lit(None).cast("string").alias("source_file"),
            F.lit(None).cast("long").alias("position"),
        )
    )


@check(DATA_NOT_IN_TRANSACTION, on=TRANSACTION_DATA)
def data_not_in_transaction(ctx: AuditContext) -> Fires:
    return Fires(
        F.col("is_listed").isNull(),
        F.format_string(
            "transactional data of producer %d epoch %d from offset %d; no Ongoing record lists %s",
            "producer_id",
            "producer_epoch",
            "first_offset",
            "tp_name",
        ),
        {"outcome": F.col("outcome")},
        severity=F.when(F.col("history_uncleaned"), F.lit("ERROR")).otherwise(F.lit("WARN")),
    )


@frame("cross_checks.offset_commits")
def OFFSET_COMMITS(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """Transactional offset commits of the audited replicas by producers the coordinator records know.

    `is_listed`: an Ongoing record of the producer, at any epoch, lists the commit's __consumer_offsets partition.
    """
    records = inputs.coordinator_records
    if records is None or inputs.offset_commits is None:
        return None
    replicas = inputs.segments.select(*TP, "broker_id").distinct()
    return (
        inputs.offset_commits.where(F.col("decode_error").isNull())
        .withColumn("broker_id", F.coalesce("broker_id", F.lit(-1)))
        .join(replicas, on=[*TP, "broker_id"], how="inner")
        .withColumn("tp_name", tp_name())
        .join(known_producers(records), on=CLUSTER_PRODUCER, how="inner")
        .join(
            ongoing_partitions(records).drop("producer_epoch").distinct(),
            on=[*CLUSTER_PRODUCER, "tp_name"],
            how="left",
        )
        .select(
            "*",
            F.col("record_offset").alias("base_offset"),
            F.col("record_offset").alias("last_offset"),
        )
    )


@check(OFFSETS_PARTITION_NOT_ADDED, on=OFFSET_COMMITS)
def offsets_partition_not_added(ctx: AuditContext) -> Fires:
    return Fires(
        F.col("is_listed").isNull(),
        F.format_string(
            "offset commit of group %s by producer %d on %s, which no Ongoing record of it lists",
            "group",
            "producer_id",
            "tp_name",
        ),
        {"group": F.col("group"), "committed_topic": F.col("committed_topic")},
    )


@frame("cross_checks.open_transaction_ids")
def OPEN_TRANSACTION_IDS(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """Each open transaction with each transactional id its producer id had, and that id's latest record (`latest`).

    Located at the transaction's first offset.
    """
    records = inputs.coordinator_records
    if records is None:
        return None
    ids_of_producer = (
        records.where(F.col("producer_id") >= 0)
        .select(*CLUSTER_PRODUCER, F.col("topic").alias("coordinator_topic"), "transactional_id")
        .distinct()
    )
    return (
        inputs.transactions.where(F.col("outcome") == OUTCOME_OPEN)
        .join(ids_of_producer, on=CLUSTER_PRODUCER, how="inner")
        .join(latest_per_id(records), on=["cluster_id", "coordinator_topic", "transactional_id"], how="inner")
        .withColumn("tp_name", tp_name())
        .select(
            "*",
            F.col("first_offset").alias("base_offset"),
            F.lit(None).cast("string").alias("source_file"),
            F.lit(None).cast("long").alias("position"),
        )
    )


@check(HANGING_CONFIRMED, on=OPEN_TRANSACTION_IDS)
def hanging_confirmed(ctx: AuditContext) -> Fires:
    latest_state = F.col("latest.state")
    in_latest = F.coalesce(F.array_contains("latest.partition_set", F.col("tp_name")), F.lit(False))
    return Fires(
        F.col("latest.is_tombstone")
        | latest_state.isin(EMPTY, *COMPLETE_STATES)
        | (F.col("latest.producer_id") != F.col("producer_id"))
        | ((latest_state == ONGOING) & (F.col("latest.producer_epoch") > F.col("producer_epoch")))
        | (latest_state.isin(ONGOING, PREPARE_COMMIT, PREPARE_ABORT) & ~in_latest),
        F.format_string(
            "transaction of producer %d open from offset %d, but %s is %s (producer %d epoch %d)",
            "producer_id",
            "first_offset",
            "transactional_id",
            F.coalesce("latest.state_name", F.lit("deleted")),
            F.coalesce("latest.producer_id", F.lit(-1)),
            F.coalesce("latest.producer_epoch", F.lit(-1)),
        ),
        {"transactional_id": F.col("transactional_id"), "latest_record_offset": F.col("latest.record_offset")},
    )


@frame("cross_checks.transactional_producers")
def TRANSACTIONAL_PRODUCERS(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """One row per producer id that writes transactional data, with the transactional ids mapped to it (`ids`).

    Only producer ids the coordinator records name; located at the first record naming it.
    """
    records = inputs.coordinator_records
    if records is None:
        return None
    writers = (
        inputs.partition_producers.where((F.col("transactional_batches") > 0) & (F.col("producer_id") >= 0))
        .select(*CLUSTER_PRODUCER)
        .distinct()
    )
    first = F.min(F.struct("record_offset", *TP, "source_file", "position", "broker_id", "producer_epoch"))
    return (
        records.where(F.col("transactional_id").isNotNull() & (F.col("producer_id") >= 0))
        .join(writers, on=CLUSTER_PRODUCER, how="inner")
        .groupBy(*CLUSTER_PRODUCER)
        .agg(F.sort_array(F.collect_set("transactional_id")).alias("ids"), first.alias("first"))
        .select("producer_id", "ids", "first.*")
        .withColumns({"base_offset": F.col("record_offset"), "last_offset": F.col("record_offset")})
    )


@check(PID_TO_MANY_IDS, on=TRANSACTIONAL_PRODUCERS)
def pid_to_many_ids(ctx: AuditContext) -> Fires:
    return Fires(
        F.size("ids") > 1,
        F.format_string("producer %d is used by transactional ids %s", "producer_id", F.array_join("ids", ", ")),
        {"transactional_ids": F.array_join("ids", ",")},
    )
