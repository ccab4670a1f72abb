"""Producer epochs across the coordinator and the partitions (spec §6.8): XTX-008, XTX-010, and EPO-004's
coordinator half.

Under Transactions V2 every Prepare* bumps the epoch and the markers carry the bumped one, so a V2 marker at the
data's epoch is a V1 marker or a late one of the transaction before (XTX-008). A timeout abort bumps the epoch
of an Ongoing transaction once in every version (twice only from a 4.0.0 coordinator on V2, KAFKA-19367)
(XTX-010). The coordinator-only halves of both rules are TSL-007's: a Prepare* at the wrong step from its Ongoing
record is reported there, and a data epoch the coordinator never handed out is XTX-004 (no Ongoing record at
that epoch lists the partition). Since a V2 fence or timeout abort looks like the client's on the partition, the
coordinator's records are what shows it when the producer's next data there does not (EPO-004).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core import expr as E
from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.core.registry import Fires, check, frame, rule
from pipeline.audit.rules.epochs import (
    FENCE_ABORT,
    closing_abort,
    fence_evidence,
    fence_message,
    tv2_fenced_by_next_data,
)
from pipeline.audit.rules.transaction_log.transitions import COORDINATOR_TRANSITIONS
from pipeline.audit.state.coordinator import tp_name, tv2_transaction_epochs
from schemas.keys import CLUSTER_PRODUCER
from schemas.transaction_log import EMPTY, ONGOING, PREPARE_ABORT

TV2_EPOCH_CHAIN = rule(
    "XTX-008",
    "TV2_EPOCH_CHAIN",
    "ERROR",
    "6.8",
    "A marker closes transactional data written under an Ongoing record that says ClientTransactionVersion 2 at an "
    "epoch not above the data's: a V2 marker carries the epoch its Prepare* bumped. The spec's other two "
    "conditions are reported by TSL-007 (Prepare* not one above its Ongoing record on any end, client, timeout "
    "or fence; two tolerated from a 4.0.0 coordinator) and XTX-004 (data at an epoch no Ongoing record lists: the "
    "next transaction's Ongoing records are at the epoch of the Complete* or Empty before them, two above the "
    "aborted data after a fence), so that one cause gives one finding.",
    impact=(
        "A TV2 transaction closed by a marker at the data's epoch cannot be told apart from a late marker of the "
        "previous transaction (the KIP-890 hazard)."
    ),
    action="Upgrade brokers to 4.2+ (KIP-1228 enforces the bump on the leader) and check the client is 4.0+.",
)
TIMEOUT_ABORT_SHAPE = rule(
    "XTX-010",
    "TIMEOUT_ABORT_SHAPE",
    "INFO",
    "6.8",
    "Ongoing (p, e) followed by PrepareAbort (p, e + 1) (every version; (p, e + 2) only from a 4.0.0 coordinator "
    "on TV2) after the transaction's start plus its timeout, by the PrepareAbort batch's timestamp: the "
    "coordinator aborted a timed-out transaction. Data of (p, e) after the ABORT marker on a partition is "
    "EPO-001; data at e + 1 after a TV2 timeout is the same producer going on, legal.",
    impact=(
        "The coordinator aborted the transaction because it ran past its timeout; its records are hidden from "
        "read_committed consumers."
    ),
    action=(
        "If frequent, raise the producer's `transaction.timeout.ms` or find why it stalls; EPO-001 findings on the "
        "same producer show late writes after the abort."
    ),
    per_producer=True,
)


@frame("cross_checks.tv2_transactions")
def TV2_TRANSACTIONS(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """Transactions with data closed by a marker, written under an Ongoing record of the producer on TV2.

    The transaction's version, not the producer id's (`tv2_transaction_epochs`). Located at the marker.
    """
    records = inputs.coordinator_records
    if records is None:
        return None
    return (
        inputs.transactions.where(F.col("first_offset").isNotNull() & F.col("marker_offset").isNotNull())
        .join(tv2_transaction_epochs(records), on=[*CLUSTER_PRODUCER, "producer_epoch"], how="inner")
        .select(
            "*",
            tp_name().alias("tp_name"),
            F.col("marker_offset").alias("base_offset"),
            F.lit(None).cast("string").alias("source_file"),
            F.lit(None).cast("long").alias("position"),
        )
        .drop("last_offset")
        .withColumn("last_offset", F.col("marker_offset"))
    )


@check(TV2_EPOCH_CHAIN, on=TV2_TRANSACTIONS)
def tv2_epoch_chain(ctx: AuditContext) -> Fires:
    return Fires(
        F.col("marker_epoch") <= F.col("producer_epoch"),
        F.format_string(
            "TV2 marker of producer %d at epoch %d closes data of epoch %d on %s",
            "producer_id",
            "marker_epoch",
            "producer_epoch",
            "tp_name",
        ),
        {"data_epoch": F.col("producer_epoch"), "first_offset": F.col("first_offset")},
        producer_epoch=F.col("marker_epoch"),
    )


def _timeout_abort() -> Column:
    """A row of COORDINATOR_TRANSITIONS that is a timeout abort: Ongoing, then PrepareAbort one epoch above (two
    from a 4.0.0 coordinator on TV2) past the transaction's start plus its timeout."""
    step = F.col("producer_epoch") - F.col("prev.producer_epoch")
    deadline = F.col("start_timestamp_ms") + F.col("transaction_timeout_ms")
    return (
        ~F.col("is_tombstone")
        & ~F.col("prev.is_tombstone")
        & (F.col("prev.state") == ONGOING)
        & (F.col("state") == PREPARE_ABORT)
        & (F.col("producer_id") == F.col("prev.producer_id"))
        & ((step == 1) | (F.col("is_tv2") & (step == 2)))
        & (deadline < F.col("batch_timestamp"))
    )


@frame("cross_checks.coordinator_aborts")
def COORDINATOR_ABORTS(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """TV2 ABORT markers one above their data that the coordinator's records show as its own fence or timeout.

    Only those the partition does not show as a fence (tv2_fenced_by_next_data). `timed_out`: the PrepareAbort at
    the marker's epoch timed out; `fenced`: an Empty record one above it, a new instance's InitProducerId.
    """
    records = inputs.coordinator_records
    if records is None:
        return None
    transitions = COORDINATOR_TRANSITIONS.build(inputs, ctx)
    timed_out = transitions.where(_timeout_abort()).select(
        *CLUSTER_PRODUCER, "producer_epoch", F.lit(True).alias("timed_out"), F.lit(False).alias("fenced")
    )
    fenced = records.where(~F.col("is_tombstone") & (F.col("state") == EMPTY) & (F.col("producer_id") >= 0)).select(
        *CLUSTER_PRODUCER,
        (F.col("producer_epoch") - 1).alias("producer_epoch"),
        F.lit(False).alias("timed_out"),
        F.lit(True).alias("fenced"),
    )
    aborts = (
        timed_out.unionByName(fenced)
        .groupBy(*CLUSTER_PRODUCER, "producer_epoch")
        .agg(F.max("timed_out").alias("timed_out"), F.max("fenced").alias("fenced"))
    )
    markers = inputs.producer_batches.where(
        (
            closing_abort()
            & E.col("is_tv2")
            & (E.col("producer_epoch") == E.col("txn_max_epoch") + 1)
            & ~tv2_fenced_by_next_data()
        ).column()
    )
    return markers.join(F.broadcast(aborts), on=[*CLUSTER_PRODUCER, "producer_epoch"], how="inner")


@check(FENCE_ABORT, on=COORDINATOR_ABORTS)
def coordinator_fence_abort(ctx: AuditContext) -> Fires:
    return Fires(
        E.lit(True),
        fence_message(
            E.when(E.col("timed_out"), E.lit("timed out, as the coordinator's records show")).otherwise(
                E.lit("fenced: the coordinator's Empty record is one epoch above the marker")
            )
        ),
        fence_evidence(),
    )


@check(TIMEOUT_ABORT_SHAPE, on=COORDINATOR_TRANSITIONS)
def timeout_abort_shape(ctx: AuditContext) -> Fires:
    return Fires(
        _timeout_abort(),
        F.format_string(
            "%s timed out: aborted at epoch %d at %d, started %d with timeout %d ms",
            "transactional_id",
            "producer_epoch",
            "batch_timestamp",
            "start_timestamp_ms",
            "transaction_timeout_ms",
        ),
        {"transactional_id": F.col("transactional_id"), "ongoing_epoch": F.col("prev.producer_epoch")},
    )
