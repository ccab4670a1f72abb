"""Payload duplicates: the same record payload (key, value and headers, by hash) written twice to one partition in
ways the broker's duplicate detection cannot see. Deep mode only: the rows come from the `payloads` table a deep
ingest (`--deep`) writes; without it the frames are skipped.

The broker deduplicates a retry by (producer id, epoch, sequence) (spec §2): a batch re-sent under a new epoch,
or by another producer id, or without sequences at all, is appended again. Spec §6 audits headers only (§6.0);
these codes extend its catalog in its style, as §6.11. Records of aborted transactions are left out: an aborted
copy was never visible to read_committed consumers, and re-sending its payload after the abort is what a
transactional producer is meant to do. Compacted topics (the cleaner keeps some copies and not others, and equal
values under one key are normal there), the `__`-internal topics and records with no key, no value and no headers
(nothing to compare) are left out too.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.core.registry import Fires, check, frame, rule
from pipeline.audit.replay.plan import topic_matches
from schemas.batches import STATUS_OK
from schemas.keys import TP, TP_PID
from schemas.transactions import OUTCOME_ABORTED

SECTION = "6.11"

PAYLOAD_RESENT_ACROSS_EPOCHS = rule(
    "PAY-001",
    "PAYLOAD_RESENT_ACROSS_EPOCHS",
    "WARN",
    SECTION,
    "The same payload (hash of key, value and headers) is written to one partition by one producer id under two "
    "epochs: a retry after an epoch bump (a producer that resets its epoch after a timeout, KIP-360, or an "
    "application re-sending after a fence), which the broker cannot detect because sequences restart with the "
    "epoch. Records of aborted transactions, compacted and `__`-internal topics and empty records are left out. "
    "Reported once per (partition, producer id, payload), at the first record written under another epoch than "
    "the payload's first copy, so a partition full of one payload yields one finding per producer id. Needs "
    "deep mode (`--deep`); skipped otherwise.",
    impact=(
        "Consumers read the record twice although the producer is idempotent: the exactly-once guarantee does not "
        "cover a re-send under a new epoch. WARN rather than ERROR: an application may also send equal payloads "
        "on purpose, which the log cannot tell from a retry."
    ),
    action=(
        "Compare the two records (`kafka-console-consumer.sh --partition N --offset O --max-messages 1` at both "
        "offsets in the evidence); if they are one message, find why the producer's epoch changed between them "
        "(producer logs around the second offset: timeouts, `InvalidProducerEpoch`, restarts) and make the "
        "application's retry after that error idempotent (a transactional producer, or a key consumers dedupe on)."
    ),
)
PAYLOAD_DUPLICATE_UNLINKED = rule(
    "PAY-002",
    "PAYLOAD_DUPLICATE_UNLINKED",
    "INFO",
    SECTION,
    "The same payload (hash of key, value and headers) is in two batches of one partition that the sequence rules "
    "cannot link: written by two producer ids, or by batches without producer id or sequences (non-idempotent "
    "producers). Copies by one idempotent producer id are the sequence rules' (and PAY-001's) concern. Records of "
    "aborted transactions, compacted and `__`-internal topics and empty records are left out. Reported once per "
    "(partition, payload), at the first copy in a batch the first copy's producer cannot account for. Needs "
    "deep mode (`--deep`); skipped otherwise.",
    impact=(
        "Possibly a message delivered twice: a producer restarted under a new producer id and re-sent its "
        "unacknowledged records, or a non-idempotent producer retried. INFO: equal payloads from different "
        "producers are often legitimate (the same event emitted by two services, constant values)."
    ),
    action=(
        "Look at both records (offsets in the evidence); when they are one message, enable idempotence "
        "(`enable.idempotence=true`, the default since Kafka 3.0) or transactions on the producer, or have "
        "consumers deduplicate on a key."
    ),
)

COPY = ("offset", "base_offset", "producer_id", "producer_epoch", "sequence", "source_file", "position", "broker_id")


def _records(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:
    """The payloads of the audited replicas that are compared: not aborted, not empty, not compacted or internal."""
    if inputs.payloads is None:
        return None
    settings = ctx.settings
    audited = inputs.batches.where(F.col("entry_status") == STATUS_OK).select(*TP, "source_file", "position")
    aborted = inputs.transactions.where(F.col("outcome") == OUTCOME_ABORTED).select(
        *TP_PID, "first_offset", "last_offset"
    )
    excluded = topic_matches([*settings.compacted_topics, *settings.coordinator_topics]) | F.col("topic").startswith(
        "__"
    )
    payloads = inputs.payloads.where(F.col("payload_hash").isNotNull() & ~excluded).join(
        audited, on=[*TP, "source_file", "position"], how="left_semi"
    )
    in_aborted = payloads.alias("p").join(
        aborted.alias("a"),
        on=[F.col(f"p.{name}") == F.col(f"a.{name}") for name in TP_PID]
        + [F.col("p.is_transactional"), F.col("p.offset").between(F.col("a.first_offset"), F.col("a.last_offset"))],
        how="left_anti",
    )
    return in_aborted


def _first_two(rows: DataFrame, group: list[str], writer: list[str]) -> DataFrame:
    """Per `group`, the earliest copy of each writer, then the first two writers by offset: the first copy and
    the first re-send. Two rows per group at most reach the aggregate, however many copies there are."""
    earliest = rows.groupBy(*group, *writer).agg(F.min(F.struct(*COPY)).alias("copy"))
    ranked = earliest.withColumn(
        "rank", F.row_number().over(Window.partitionBy(*group).orderBy(F.col("copy.offset")))
    ).where(F.col("rank") <= 2)
    return (
        ranked.groupBy(*group)
        .agg(F.min("copy").alias("first"), F.max("copy").alias("resend"), F.count("*").alias("writers"))
        .where(F.col("writers") == 2)
    )


def _located(pairs: DataFrame) -> DataFrame:
    """Rows located at the re-send, as findings are."""
    return pairs.select(
        *TP,
        "payload_hash",
        "first",
        "resend",
        F.col("resend.producer_id").alias("producer_id"),
        F.col("resend.producer_epoch").alias("producer_epoch"),
        F.col("resend.base_offset").alias("base_offset"),
        F.lit(None).cast("long").alias("last_offset"),
        F.col("resend.source_file").alias("source_file"),
        F.col("resend.position").alias("position"),
        F.col("resend.broker_id").alias("broker_id"),
    )


@frame("payloads.epoch_resends")
def EPOCH_RESENDS(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """Each payload a producer id wrote to a partition under two or more epochs (deep mode only).

    `first`: the payload's first copy; `resend`: its first copy under another epoch, where the row is located.
    """
    records = _records(inputs, ctx)
    if records is None:
        return None
    idempotent = records.where(F.col("producer_id") >= 0)
    return _located(
        _first_two(idempotent, [*TP, "producer_id", "payload_hash"], ["producer_epoch"]).drop("producer_id")
    )


@frame("payloads.unlinked_copies")
def UNLINKED_COPIES(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """Each payload in two batches of a partition that the sequence rules cannot link (deep mode only).

    `first`: the payload's first copy; `resend`: its first copy by another producer id or in another batch
    without sequences, where the row is located.
    """
    records = _records(inputs, ctx)
    if records is None:
        return None
    unlinked = (F.col("producer_id") < 0) | (F.col("sequence") < 0)
    writers = records.withColumn("batch", F.when(unlinked, F.col("base_offset")))
    return _located(_first_two(writers, [*TP, "payload_hash"], ["producer_id", "batch"]))


def _evidence() -> dict[str, Column]:
    return {
        "payload_hash": F.hex("payload_hash"),
        "first_offset": F.col("first.offset"),
        "first_producer": F.format_string("%d epoch %d", "first.producer_id", "first.producer_epoch"),
        "resend_offset": F.col("resend.offset"),
        "resend_producer": F.format_string("%d epoch %d", "resend.producer_id", "resend.producer_epoch"),
    }


@check(PAYLOAD_RESENT_ACROSS_EPOCHS, on=EPOCH_RESENDS)
def payload_resent_across_epochs(ctx: AuditContext) -> Fires:
    return Fires(
        F.lit(True),
        F.format_string(
            "producer %d wrote the payload at offset %d under epoch %d again at offset %d under epoch %d",
            "resend.producer_id",
            "first.offset",
            "first.producer_epoch",
            "resend.offset",
            "resend.producer_epoch",
        ),
        _evidence(),
    )


@check(PAYLOAD_DUPLICATE_UNLINKED, on=UNLINKED_COPIES)
def payload_duplicate_unlinked(ctx: AuditContext) -> Fires:
    return Fires(
        F.lit(True),
        F.format_string(
            "the payload at offset %d (producer %d) is written again at offset %d (producer %d)",
            "first.offset",
            "first.producer_id",
            "resend.offset",
            "resend.producer_id",
        ),
        _evidence(),
    )
