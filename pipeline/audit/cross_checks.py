"""Segments against `__transaction_state` (spec §6.8): what the partitions hold against what the coordinator decided.

Partitions are matched by name: a `__transaction_state` record lists `topic-partition`, which must be a
(topic, partition) of the audited batches of the same cluster. The coordinator records come from
`transaction_log.audited_records`, the markers and transactions from the replay.

Only part of a cluster's `__transaction_state` partitions may be in the input, so a producer id that no record
mentions (as producer id, previous or next producer id) is left alone: its coordinator history is not here.
That is why "no transactional id maps to p" (XTX-005) is not reported; LSO-002 still finds such a transaction
hanging by its age.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pipeline.audit.context import AuditContext, AuditInputs
from pipeline.audit.registry import Fires, check, frame, rule
from pipeline.audit.replay import TP
from pipeline.audit.transaction_log import COMPLETE_STATES, EMPTY, ONGOING, PREPARE_ABORT, PREPARE_COMMIT
from schemas.batches import STATUS_OK
from schemas.transactions import OUTCOME_OPEN

CONTROL_ABORT, CONTROL_COMMIT = 0, 1

MARKER_CONTRADICTS_DECISION = rule(
    "XTX-001",
    "MARKER_CONTRADICTS_DECISION",
    "CRITICAL",
    "6.8",
    "A marker (p, e, type) on a partition that the Prepare* records of (p, e) list only with the other outcome. "
    "Under TV0/1 one epoch may hold several transactions, so a marker agreeing with any of them is fine.",
)
MARKER_WITHOUT_DECISION = rule(
    "XTX-003",
    "MARKER_WITHOUT_DECISION",
    "WARN",
    "6.8",
    "A marker (p, e) on a partition no Prepare* record of (p, e) lists, for a producer id the coordinator records "
    "do mention (kafka-transactions.sh abort, or the record was compacted away).",
)
HANGING_CONFIRMED = rule(
    "XTX-005",
    "HANGING_CONFIRMED",
    "ERROR",
    "6.8",
    "A transaction open at the end of the log whose producer's transactional id has moved on: its latest "
    "record is a tombstone, Empty, Complete*, another producer id, Ongoing at a newer epoch, or Ongoing/Prepare* "
    "without the partition. The spec's third case, no transactional id mapping to p at all, is not reported: the "
    "input may hold only some __transaction_state partitions (LSO-002 still reports such a transaction by age).",
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
)
MARKER_COORDINATOR_EPOCH = rule(
    "XTX-007",
    "MARKER_COORDINATOR_EPOCH",
    "ERROR",
    "6.8",
    "A marker whose coordinator epoch is below the leader epoch of the __transaction_state batch holding its "
    "Prepare* record (ERROR); above it is INFO: markers re-sent by a newer coordinator after a failover.",
    also=("INFO",),
)
OFFSETS_PARTITION_NOT_ADDED = rule(
    "XTX-009",
    "OFFSETS_PARTITION_NOT_ADDED",
    "ERROR",
    "6.8",
    "A transactional offset commit of p on __consumer_offsets-N while no Ongoing record of p lists "
    "__consumer_offsets-N (AddOffsetsToTxn adds it before TxnOffsetCommit).",
)
PID_TO_MANY_IDS = rule(
    "XTX-011",
    "PID_TO_MANY_IDS",
    "CRITICAL",
    "6.8",
    "A producer id that writes transactional data maps to more than one transactional id over the coordinator "
    "records (a rotation through previous/next producer id stays within one id).",
)


def _tp_name() -> Column:
    return F.concat_ws("-", F.col("topic"), F.col("partition").cast("string"))


def _known_producers(records: DataFrame) -> DataFrame:
    ids = F.explode(F.array("producer_id", "previous_producer_id", "next_producer_id")).alias("producer_id")
    return records.select(ids).where(F.col("producer_id") >= 0).distinct().withColumn("is_known", F.lit(True))


def _decisions_by_marker(records: DataFrame) -> DataFrame:
    """Per (producer id, epoch, partition name): which outcomes Prepare* records decided, and their leader epochs."""
    prepares = records.where(~F.col("is_tombstone") & F.col("state").isin(PREPARE_COMMIT, PREPARE_ABORT))
    return (
        prepares.select(
            "producer_id",
            "producer_epoch",
            F.explode("partition_set").alias("tp_name"),
            F.when(F.col("state") == PREPARE_COMMIT, CONTROL_COMMIT).otherwise(CONTROL_ABORT).alias("decided"),
            F.col("partition_leader_epoch").alias("decision_leader_epoch"),
        )
        .groupBy("producer_id", "producer_epoch", "tp_name")
        .agg(
            F.collect_set("decided").alias("decided"),
            F.min("decision_leader_epoch").alias("min_decision_leader_epoch"),
            F.max("decision_leader_epoch").alias("max_decision_leader_epoch"),
        )
    )


@frame("cross_checks.markers")
def MARKERS(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """COMMIT/ABORT markers of producers the coordinator records know, with what the Prepare* records decided.

    `decided`: the outcomes the Prepare* records of the marker's (producer id, epoch) decided for its partition,
    null when none lists it; `min_/max_decision_leader_epoch`: the leader epochs of those records' batches.
    """
    records = inputs.coordinator_records
    if records is None:
        return None
    return (
        inputs.batches.where(
            (F.col("entry_status") == STATUS_OK)
            & F.col("is_control")
            & F.col("control_type").isin(CONTROL_ABORT, CONTROL_COMMIT)
        )
        .withColumn("tp_name", _tp_name())
        .join(_known_producers(records), on="producer_id", how="inner")
        .join(_decisions_by_marker(records), on=["producer_id", "producer_epoch", "tp_name"], how="left")
    )


def _agrees() -> Column:
    return F.array_contains("decided", F.col("control_type"))


def _outcome() -> Column:
    return F.when(F.col("control_type") == CONTROL_COMMIT, F.lit("COMMIT")).otherwise(F.lit("ABORT"))


@check(MARKER_CONTRADICTS_DECISION, on=MARKERS)
def marker_contradicts_decision(ctx: AuditContext) -> Fires:
    return Fires(
        F.col("decided").isNotNull() & ~_agrees(),
        F.format_string(
            "%s marker of producer %d epoch %d, but the coordinator prepared the other outcome",
            _outcome(),
            "producer_id",
            "producer_epoch",
        ),
        {"decided": F.array_join(F.col("decided").cast("array<string>"), ",")},
    )


@check(MARKER_WITHOUT_DECISION, on=MARKERS)
def marker_without_decision(ctx: AuditContext) -> Fires:
    return Fires(
        F.col("decided").isNull(),
        F.format_string(
            "%s marker of producer %d epoch %d without a Prepare record listing %s",
            _outcome(),
            "producer_id",
            "producer_epoch",
            "tp_name",
        ),
        {},
    )


@check(MARKER_COORDINATOR_EPOCH, on=MARKERS)
def marker_coordinator_epoch(ctx: AuditContext) -> Fires:
    coordinator_epoch = F.col("coordinator_epoch")
    return Fires(
        _agrees()
        & (
            (coordinator_epoch < F.col("min_decision_leader_epoch"))
            | (coordinator_epoch > F.col("max_decision_leader_epoch"))
        ),
        F.format_string(
            "marker coordinator epoch %d; the Prepare record's batch has leader epoch %d",
            "coordinator_epoch",
            "min_decision_leader_epoch",
        ),
        {"decision_leader_epochs": F.format_string("%d-%d", "min_decision_leader_epoch", "max_decision_leader_epoch")},
        severity=F.when(coordinator_epoch < F.col("min_decision_leader_epoch"), F.lit("ERROR")).otherwise(
            F.lit("INFO")
        ),
    )


def _ongoing_partitions(records: DataFrame) -> DataFrame:
    """(producer id, epoch, partition name) of every Ongoing record."""
    return (
        records.where(~F.col("is_tombstone") & (F.col("state") == ONGOING))
        .select("producer_id", "producer_epoch", F.explode("partition_set").alias("tp_name"))
        .distinct()
        .withColumn("is_listed", F.lit(True))
    )


def _fully_uncleaned(records: DataFrame) -> DataFrame:
    """Per producer id, whether all of its coordinator records are uncleaned."""
    return (
        records.where(F.col("producer_id") >= 0)
        .groupBy("producer_id")
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
        .withColumn("tp_name", _tp_name())
        .join(_known_producers(records), on="producer_id", how="inner")
        .join(_ongoing_partitions(records), on=["producer_id", "producer_epoch", "tp_name"], how="left")
        .join(_fully_uncleaned(records), on="producer_id", how="left")
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
    replicas = inputs.batches.select(*TP, "broker_id").distinct()
    return (
        inputs.offset_commits.where(F.col("decode_error").isNull())
        .withColumn("broker_id", F.coalesce("broker_id", F.lit(-1)))
        .join(replicas, on=[*TP, "broker_id"], how="inner")
        .withColumn("tp_name", _tp_name())
        .join(_known_producers(records), on="producer_id", how="inner")
        .join(_ongoing_partitions(records).drop("producer_epoch").distinct(), on=["producer_id", "tp_name"], how="left")
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


def _latest_per_id(records: DataFrame) -> DataFrame:
    newest_first = Window.partitionBy(*TP, "transactional_id").orderBy(F.col("record_offset").desc())
    return (
        records.where(F.col("transactional_id").isNotNull())
        .withColumn("_rank", F.row_number().over(newest_first))
        .where(F.col("_rank") == 1)
        .select(
            F.col("topic").alias("coordinator_topic"),
            "transactional_id",
            F.struct(
                "is_tombstone", "state", "state_name", "producer_id", "producer_epoch", "partition_set", "record_offset"
            ).alias("latest"),
        )
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
        .select("producer_id", F.col("topic").alias("coordinator_topic"), "transactional_id")
        .distinct()
    )
    return (
        inputs.transactions.where(F.col("outcome") == OUTCOME_OPEN)
        .join(ids_of_producer, on="producer_id", how="inner")
        .join(_latest_per_id(records), on=["coordinator_topic", "transactional_id"], how="inner")
        .withColumn("tp_name", _tp_name())
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
        inputs.batches.where(F.col("is_transactional") & (F.col("producer_id") >= 0)).select("producer_id").distinct()
    )
    first = F.min(F.struct("record_offset", *TP, "source_file", "position", "broker_id", "producer_epoch"))
    return (
        records.where(F.col("transactional_id").isNotNull() & (F.col("producer_id") >= 0))
        .join(writers, on="producer_id", how="inner")
        .groupBy("producer_id")
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
