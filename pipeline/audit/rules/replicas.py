"""Replicas against each other: the copies of one partition from several brokers' log dirs, batch by batch.

A follower appends the leader's batches byte for byte, leader epoch included, so over the offsets every copy holds
the copies must agree on each batch's offsets, producer fields and CRC. Where they first part, either one copy kept
batches a later leader overwrote (written under a lower leader epoch: on rejoining, the broker truncates there,
KIP-101/KIP-279, and what it held from there on was never the partition's), or a copy is corrupt or was written by
a broker bug. Compacted and coordinator topics are cleaned by each broker on its own schedule, so a batch may be
gone from one copy and its CRC changed in another: there only batches every copy holds are compared, without CRC.

Spec §6 has no replica rules (it audits one replica, §6.0); these codes extend its catalog in its style, as §6.10.
The audited replica is chosen as before (`audit.replica_choice`); these rules read every ingested copy.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.core.registry import Fires, check, frame, rule
from pipeline.audit.replay.plan import topic_matches
from pipeline.audit.replay.replica_copies import copies_by_exchange
from schemas.batches import STATUS_OK
from schemas.keys import TP

SECTION = "6.10"

REPLICA_DIVERGENCE = rule(
    "REP-001",
    "REPLICA_DIVERGENCE",
    "ERROR",
    SECTION,
    "Over the offsets both copies hold, a replica's batch at some base offset differs from the reference copy's "
    "(the copy with the highest leader epoch there, then the lowest broker id) in its last offset, producer id, "
    "epoch, base sequence, control flag or CRC (CRC not compared on compacted topics), or is missing there (not "
    "on compacted topics), while not written under a lower leader epoch than the reference (that is REP-002). "
    "Where a log holds two batches at one base offset (FMT-011), each is compared with the reference copy's batches "
    "there: a batch departs when the reference holds none like it. Reported once per replica, at the first such "
    "offset.",
    impact=(
        "Copies of one partition hold different data at the same offsets: consumers read different records "
        "depending on which broker leads, and committed data may have been lost or altered by corruption or a "
        "broker bug."
    ),
    action=(
        "Compare the two copies from that offset with `kafka-dump-log.sh --files <segment> --deep-iteration` on "
        "both brokers, check the brokers' logs for unclean leader elections and disk errors, and do not let the "
        "departing copy become leader until the partition is reassigned or the copy rebuilt from the reference."
    ),
)
TRUNCATION_POINT = rule(
    "REP-002",
    "TRUNCATION_POINT",
    "WARN",
    SECTION,
    "A replica's batch at the first offset where it departs from the reference copy was written under a lower "
    "leader epoch than the reference's batch there: a later leader overwrote this replica's tail, and the replica "
    "truncates to this offset when it rejoins (KIP-101/KIP-279). Its batches from here on were never replicated.",
    impact=(
        "The records this replica holds from the truncation point on were acknowledged by an earlier leader (acks=1, "
        "or an unclean leader election) but are not part of the partition: producers that did not retry lost them."
    ),
    action=(
        "Find which producers wrote the truncated batches (producer ids in the evidence and `kafka-dump-log.sh` of "
        "the segment), check for an unclean leader election in the controller's log, and make sure those producers "
        "use acks=all with `unclean.leader.election.enable=false`; re-send the lost records from the source if "
        "they matter."
    ),
)
REPLICA_AHEAD = rule(
    "REP-003",
    "REPLICA_AHEAD",
    "INFO",
    SECTION,
    "A replica agrees with the others over the offsets they all hold and holds batches past the end of every "
    "other copy: a follower had not caught up (or was out of sync) when the copies were taken.",
    impact=(
        "The copies were not taken at one moment, or followers lag: offsets past the others' end are checked "
        "against one copy only."
    ),
    action=(
        "Nothing, when the copies were taken from running brokers at different times; otherwise check the "
        "partition's in-sync replicas (`kafka-topics.sh --describe --under-replicated-partitions`)."
    ),
)


def _readable(inputs: AuditInputs, ctx: AuditContext) -> DataFrame:
    """Every readable copy's entries; compacted as the audited replica's partition is (its cleaner checkpoint or
    delete-horizon batches), or as a coordinator topic is: each broker's cleaner compacts its copy on its own."""
    settings = ctx.settings
    compacted = F.broadcast(inputs.partitions.select(*TP, F.col("compacted_by").isNotNull().alias("_compacted")))
    return (
        inputs.all_batches.where(F.col("entry_status") == STATUS_OK)
        .withColumn("broker_id", F.coalesce("broker_id", F.lit(-1)))
        .join(compacted, on=TP, how="left")
        .withColumn(
            "is_compacted",
            topic_matches(settings.coordinator_topics) | F.coalesce("_compacted", F.lit(False)),
        )
        .drop("_compacted")
    )


@frame("replica_divergence.copies", of_copies=True)
def COPIES(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """Each copy of a partition that two or more brokers hold, with where it first departs from the reference copy.

    `departure`: the first base offset in the range every copy holds where this copy's batch differs from the
    reference copy's or is missing, with both batches (`copy` null when missing); null when the copy agrees
    throughout. `copy_last`, `others_last`: the last offsets this copy and the other copies hold. Located at the
    departure, else at the offsets past the other copies' end. Compared where the copies' rows are, by the replay's
    tasks or by a task per partition (pipeline.audit.replay.replica_copies): no batch is exchanged by offset.
    """
    copies = inputs.copies if inputs.copies is not None else copies_by_exchange(_readable(inputs, ctx))
    departing = F.col("departure").isNotNull()
    return copies.select(
        "*",
        F.when(departing, F.col("departure.base_offset")).otherwise(F.col("others_last") + 1).alias("base_offset"),
        F.when(departing, F.coalesce("departure.copy.last_offset", "departure.reference.last_offset"))
        .otherwise(F.col("copy_last"))
        .alias("last_offset"),
        F.coalesce("departure.copy.producer_id", "departure.reference.producer_id").alias("producer_id"),
        F.coalesce("departure.copy.producer_epoch", "departure.reference.producer_epoch").alias("producer_epoch"),
        F.col("departure.copy.source_file").alias("source_file"),
        F.col("departure.copy.position").alias("position"),
    )


def _lower_leader_epoch() -> Column:
    return F.col("departure.copy.partition_leader_epoch") < F.col("departure.reference.partition_leader_epoch")


def _copy_text(side: str) -> Column:
    batch = f"departure.{side}"
    return F.when(F.col(batch).isNull(), F.lit("no batch")).otherwise(
        F.format_string(
            "broker %d leader epoch %d: last offset %d, producer %d epoch %d, sequence %s, crc %s",
            f"{batch}.broker_id",
            f"{batch}.partition_leader_epoch",
            f"{batch}.last_offset",
            f"{batch}.producer_id",
            f"{batch}.producer_epoch",
            F.coalesce(F.col(f"{batch}.signature.base_sequence").cast("string"), F.lit("-")),
            F.coalesce(F.col(f"{batch}.signature.crc").cast("string"), F.lit("-")),
        )
    )


def _departure_evidence() -> dict[str, Column]:
    return {
        "reference_broker": F.col("departure.reference.broker_id"),
        "reference": _copy_text("reference"),
        "copy": _copy_text("copy"),
        "common_range": F.format_string("%d-%d", "common_first", "common_last"),
    }


@check(REPLICA_DIVERGENCE, on=COPIES)
def replica_divergence(ctx: AuditContext) -> Fires:
    return Fires(
        F.col("departure").isNotNull() & ~F.coalesce(_lower_leader_epoch(), F.lit(False)),
        F.format_string(
            "broker %d's copy departs at offset %d from broker %d's",
            "broker_id",
            "base_offset",
            "departure.reference.broker_id",
        ),
        _departure_evidence(),
    )


@check(TRUNCATION_POINT, on=COPIES)
def truncation_point(ctx: AuditContext) -> Fires:
    return Fires(
        F.col("departure").isNotNull() & F.coalesce(_lower_leader_epoch(), F.lit(False)),
        F.format_string(
            "broker %d's copy was overwritten from offset %d by leader epoch %d (its batch: leader epoch %d)",
            "broker_id",
            "base_offset",
            "departure.reference.partition_leader_epoch",
            "departure.copy.partition_leader_epoch",
        ),
        _departure_evidence(),
    )


@check(REPLICA_AHEAD, on=COPIES)
def replica_ahead(ctx: AuditContext) -> Fires:
    return Fires(
        F.col("departure").isNull() & (F.col("copy_last") > F.col("others_last")),
        F.format_string(
            "broker %d holds offsets up to %d, the other copies up to %d",
            "broker_id",
            "copy_last",
            "others_last",
        ),
        {"copies": F.col("copies")},
    )
