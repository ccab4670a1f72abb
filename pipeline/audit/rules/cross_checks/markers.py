"""Markers against the coordinator's decisions (spec §6.8): XTX-001, -002, -003, -006 and -007.

A Prepare* record of (p, e) decides the outcome of the transaction on every partition it lists, and the markers
the coordinator then writes carry (p, e), that outcome and its coordinator epoch. The rules here compare each
marker with the Prepare* records of its producer (XTX-001, -003, -006, -007) and each producer's latest decision
for a partition with what that partition holds at its end (XTX-002). Producers no coordinator record names are
left alone (pipeline.audit.rules.cross_checks.producers says why).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.core.registry import Fires, check, frame, rule
from pipeline.audit.state.coordinator import known_producers, latest_decisions, tp_name, tv2_transaction_epochs
from schemas.batches import CONTROL_ABORT, CONTROL_COMMIT, STATUS_OK
from schemas.keys import CLUSTER_PRODUCER, TP
from schemas.transaction_log import PREPARE_ABORT, PREPARE_COMMIT
from schemas.transactions import OUTCOME_OPEN

MARKER_CONTRADICTS_DECISION = rule(
    "XTX-001",
    "MARKER_CONTRADICTS_DECISION",
    "CRITICAL",
    "6.8",
    "A marker (p, e, type) on a partition that the Prepare* records of (p, e) list only with the other outcome. "
    "Under TV0/1 one epoch may hold several transactions, so a marker agreeing with any of them is fine.",
    impact=(
        "A partition's marker contradicts the coordinator's decision: the transaction is torn, committed on some "
        "partitions and aborted on others."
    ),
    action=(
        "List the transaction's partitions (`global_transactions` with `is_torn`) and repair downstream by hand; "
        "check for admin aborts (`kafka-transactions.sh abort`) or a coordinator failover around it."
    ),
)
MISSING_MARKER = rule(
    "XTX-002",
    "MISSING_MARKER",
    "ERROR",
    "6.8",
    "The latest Prepare* record (p, e) listing a partition, with no Ongoing record listing it after, while the "
    "last transaction of p there has data at an epoch <= e and no marker after it. ERROR when a later record of "
    "the transactional id follows the Prepare* (Complete*: the coordinator believed every marker written), WARN "
    "without one (markers pending). A marker of another epoch closing it is XTX-006, or XTX-003 when no Prepare* "
    "explains it (an admin abort).",
    also=("WARN",),
    impact=(
        "The coordinator believed every marker written, but this partition has none: the transaction stays open "
        "there, the LSO is stuck and its records are neither committed nor aborted."
    ),
    action=(
        "Abort it with `kafka-transactions.sh abort --topic T --partition N --start-offset F` (WARN: markers may "
        "still be pending, or a log dir copied file by file while the broker ran took the partition before the "
        "marker and `__transaction_state` after the Prepare* record; re-check first, on a consistent copy)."
    ),
)
MARKER_WITHOUT_DECISION = rule(
    "XTX-003",
    "MARKER_WITHOUT_DECISION",
    "WARN",
    "6.8",
    "A marker (p, e) on a partition no Prepare* record of (p, e) lists, for a producer id the coordinator records "
    "do mention (kafka-transactions.sh abort, or the record was compacted away). A marker whose transaction a "
    "Prepare* record at another epoch decided is XTX-006 instead.",
    impact=(
        "A marker no coordinator decision explains: usually an admin abort (`kafka-transactions.sh abort`), or the "
        "Prepare* record was compacted away."
    ),
    action="Confirm with the operators that an abort was run; no action otherwise.",
)
MARKER_EPOCH_VS_PREPARE = rule(
    "XTX-006",
    "MARKER_EPOCH_VS_PREPARE",
    "ERROR",
    "6.8",
    "A marker closing transactional data of epoch d whose epoch differs from that of the Prepare* record listing "
    "its partition that decided the transaction: at d or d + 1 (a fence or timeout abort) under TV0/1, at d + 1 "
    "(or d + 2 from a 4.0.0 coordinator's fence or timeout, KAFKA-19367) under TV2, with no Prepare* at the "
    "marker's own epoch listing it. A TV2 marker at or below the data epoch is XTX-008.",
    impact=(
        "The marker's epoch does not match the decision that closed the transaction: a stale or foreign decision may "
        "have closed it."
    ),
    action=(
        "Compare the producer's `__transaction_state` records (`kafka-dump-log.sh --transaction-log-decoder`) with "
        "the marker and check for a coordinator failover."
    ),
)
MARKER_COORDINATOR_EPOCH = rule(
    "XTX-007",
    "MARKER_COORDINATOR_EPOCH",
    "ERROR",
    "6.8",
    "A marker whose coordinator epoch is below the leader epoch of the __transaction_state batch holding its "
    "Prepare* record (ERROR); above it is INFO: markers re-sent by a newer coordinator after a failover.",
    also=("INFO",),
    impact=(
        "A coordinator epoch below the coordinator that wrote the decision means a zombie coordinator wrote the "
        "marker (ERROR); above it, a newer coordinator re-sent markers after a failover (INFO)."
    ),
    action="For ERROR, check the `__transaction_state` partition's leadership history and the broker versions.",
)

# The epochs of the Prepare* record that can decide a transaction with data of epoch d: d + step, where the
# step is 0 at a TV0/1 client's EndTxn and 1 at a TV0/1 fence or timeout abort and at every TV2 end; 2 only at a
# 4.0.0 coordinator's TV2 fence or timeout abort (spec §3.4, §3.9; KAFKA-19367).
DECISION_STEPS = ((0, False), (1, None), (2, True))  # (step, TV2 required: yes, no, either)


def prepares(records: DataFrame) -> DataFrame:
    """Prepare* records, one row per partition they list (`tp_name`), with the outcome they decided."""
    return records.where(~F.col("is_tombstone") & F.col("state").isin(PREPARE_COMMIT, PREPARE_ABORT)).select(
        "*",
        F.explode("partition_set").alias("tp_name"),
        F.when(F.col("state") == PREPARE_COMMIT, CONTROL_COMMIT).otherwise(CONTROL_ABORT).alias("decided"),
    )


def _decisions_by_marker(records: DataFrame) -> DataFrame:
    """Per (producer id, epoch, partition name): which outcomes Prepare* records decided, and their leader epochs."""
    return (
        prepares(records)
        .groupBy(*CLUSTER_PRODUCER, "producer_epoch", "tp_name")
        .agg(
            F.collect_set("decided").alias("decided"),
            F.min("partition_leader_epoch").alias("min_decision_leader_epoch"),
            F.max("partition_leader_epoch").alias("max_decision_leader_epoch"),
        )
    )


def _with_deciding_prepares(markers: DataFrame, records: DataFrame) -> DataFrame:
    """`deciding_epochs`: the epochs of the Prepare* records listing the marker's partition that can have decided
    the transaction it closes (empty for a marker that closed none)."""
    listed = (
        prepares(records).groupBy(*CLUSTER_PRODUCER, "producer_epoch", "tp_name").agg(F.max("is_tv2").alias("is_tv2"))
    )
    epochs = []
    for step, tv2 in DECISION_STEPS:
        allowed = F.lit(True) if tv2 is None else F.col("is_tv2") == tv2
        found = listed.select(
            *CLUSTER_PRODUCER,
            "tp_name",
            (F.col("producer_epoch") - step).alias("closed_data_epoch"),
            allowed.alias(f"_step{step}"),
        )
        markers = markers.join(found, on=[*CLUSTER_PRODUCER, "tp_name", "closed_data_epoch"], how="left")
        epochs.append(F.when(F.col(f"_step{step}"), F.col("closed_data_epoch") + step))
    return markers.withColumn("deciding_epochs", F.filter(F.array(*epochs), lambda e: e.isNotNull())).drop(
        *[f"_step{step}" for step, _ in DECISION_STEPS]
    )


@frame("cross_checks.markers")
def MARKERS(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """COMMIT/ABORT markers of producers the coordinator records know, with what the Prepare* records decided.

    `decided`: the outcomes the Prepare* records of the marker's (producer id, epoch) decided for its partition,
    null when none lists it; `min_/max_decision_leader_epoch`: the leader epochs of those records' batches;
    `closed_data_epoch`: the data epoch of the transaction the marker closes; `deciding_epochs`: the epochs of the
    Prepare* records listing the partition that can have decided that transaction; `is_tv2_transaction`: that
    transaction was written under an Ongoing record that says ClientTransactionVersion 2.
    """
    records = inputs.coordinator_records
    if records is None:
        return None
    closed = inputs.transactions.where(F.col("first_offset").isNotNull() & F.col("marker_offset").isNotNull()).select(
        *TP,
        "producer_id",
        F.col("marker_offset").alias("base_offset"),
        F.col("producer_epoch").alias("closed_data_epoch"),
    )
    markers = (
        inputs.batches.where(
            (F.col("entry_status") == STATUS_OK)
            & F.col("is_control")
            & F.col("control_type").isin(CONTROL_ABORT, CONTROL_COMMIT)
        )
        .withColumn("tp_name", tp_name())
        .join(known_producers(records), on=CLUSTER_PRODUCER, how="inner")
        .join(_decisions_by_marker(records), on=[*CLUSTER_PRODUCER, "producer_epoch", "tp_name"], how="left")
        .join(closed, on=[*TP, "producer_id", "base_offset"], how="left")
        .join(
            tv2_transaction_epochs(records)
            .withColumnRenamed("producer_epoch", "closed_data_epoch")
            .withColumn("is_tv2_transaction", F.lit(True)),
            on=[*CLUSTER_PRODUCER, "closed_data_epoch"],
            how="left",
        )
    )
    return _with_deciding_prepares(markers, records)


def _agrees() -> Column:
    return F.array_contains("decided", F.col("control_type"))


def _outcome() -> Column:
    return F.when(F.col("control_type") == CONTROL_COMMIT, F.lit("COMMIT")).otherwise(F.lit("ABORT"))


def _decided_elsewhere() -> Column:
    """No Prepare* at the marker's epoch lists its partition, but one at another epoch decided its transaction."""
    return F.col("decided").isNull() & (F.size("deciding_epochs") > 0)


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
        F.col("decided").isNull() & ~_decided_elsewhere(),
        F.format_string(
            "%s marker of producer %d epoch %d without a Prepare record listing %s",
            _outcome(),
            "producer_id",
            "producer_epoch",
            "tp_name",
        ),
        {},
    )


@check(MARKER_EPOCH_VS_PREPARE, on=MARKERS)
def marker_epoch_vs_prepare(ctx: AuditContext) -> Fires:
    tv2_at_data_epoch = F.coalesce("is_tv2_transaction", F.lit(False)) & (
        F.col("producer_epoch") <= F.col("closed_data_epoch")
    )
    deciding = F.array_join(F.col("deciding_epochs").cast("array<string>"), ",")
    return Fires(
        _decided_elsewhere() & ~tv2_at_data_epoch,
        F.format_string(
            "%s marker of producer %d at epoch %d closes data of epoch %d, which the Prepare record at epoch %s "
            "decided",
            _outcome(),
            "producer_id",
            "producer_epoch",
            "closed_data_epoch",
            deciding,
        ),
        {"data_epoch": F.col("closed_data_epoch"), "prepare_epochs": deciding},
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


def _last_data_transactions(transactions: DataFrame) -> DataFrame:
    """Per partition and producer, its last transaction with data (`last`)."""
    last = F.struct("first_offset", "producer_epoch", "outcome", "last_offset")
    return (
        transactions.where(F.col("first_offset").isNotNull())
        .groupBy(*TP, "broker_id", "producer_id")
        .agg(F.max(last).alias("last"))
    )


@frame("cross_checks.decisions")
def DECISIONS(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """Each producer's latest Prepare* record listing an audited partition, with its last transaction there.

    `decision`: that Prepare* record, and whether a later record of its id follows it; `reopened`: an Ongoing
    record listing the partition came after it; `last`: the producer's last transaction with data on the partition,
    where the row is located (its first offset).
    """
    records = inputs.coordinator_records
    if records is None:
        return None
    return (
        _last_data_transactions(inputs.transactions)
        .withColumn("tp_name", tp_name())
        .join(latest_decisions(records), on=[*CLUSTER_PRODUCER, "tp_name"], how="inner")
        .select(
            "*",
            F.col("last.producer_epoch").alias("producer_epoch"),
            F.col("last.first_offset").alias("base_offset"),
            F.col("last.last_offset").alias("last_offset"),
            F.lit(None).cast("string").alias("source_file"),
            F.lit(None).cast("long").alias("position"),
        )
    )


@check(MISSING_MARKER, on=DECISIONS)
def missing_marker(ctx: AuditContext) -> Fires:
    epoch = F.col("decision.epoch")
    return Fires(
        ~F.col("reopened") & (F.col("last.producer_epoch") <= epoch) & (F.col("last.outcome") == OUTCOME_OPEN),
        F.format_string(
            "%s of producer %d epoch %d lists %s, but its transaction from offset %d there has no marker",
            "decision.state_name",
            "producer_id",
            epoch,
            "tp_name",
            "last.first_offset",
        ),
        {
            "transactional_id": F.col("decision.transactional_id"),
            "prepare_offset": F.col("decision.record_offset"),
        },
        severity=F.when(F.col("decision.completed"), F.lit("ERROR")).otherwise(F.lit("WARN")),
    )
