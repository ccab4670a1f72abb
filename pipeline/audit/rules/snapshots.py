"""Producer-state snapshot rules SNP-001..SNP-005 (spec §6.6): the broker's `<X>.snapshot` files against
the state the replay reaches at offset X.

A snapshot named X holds each producer's state after every batch below X (spec §1.4). The replay state at X
is a running value over the producer's batches in offset order, read where X falls among them: one exchange and
sort of the producer rows of the producers the snapshots name, whatever the number of snapshots per partition.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.core.registry import Fires, check, frame, rule
from pipeline.audit.replay.plan import COMPACTION
from pipeline.audit.replay.snapshot_states import by_snapshot
from pipeline.audit.state.snapshots import SNAPSHOT_OK, audited_non_kraft, producer_entries
from schemas.keys import TP

SNAPSHOT_CORRUPT = rule(
    "SNP-001",
    "SNAPSHOT_CORRUPT",
    "WARN",
    "6.6",
    "Snapshot file with a version other than 1, a CRC-32C mismatch, a truncated entry array or trailing bytes: "
    "the broker deletes it and falls back to an older snapshot or a full rebuild.",
    impact=(
        "The broker deletes a corrupt snapshot and falls back to an older one or a full rebuild: slower start, and "
        "producer state may be rebuilt from less history."
    ),
    action="Check the copy was complete; no action on the broker, which discards it.",
)
SNAPSHOT_STRAY = rule(
    "SNP-002",
    "SNAPSHOT_STRAY",
    "INFO",
    "6.6",
    "Snapshot whose offset matches no segment base offset and is not above every one of them, or lies below "
    "the log start (INFO); or lies above the log end (WARN). The broker removes such files at load. The log "
    "start here is the first retained offset, so a snapshot exactly at it is not reported.",
    also=("WARN",),
    impact="Stray snapshots are removed by the broker at load; one above the log end points at a truncated log.",
    action=(
        "For WARN, check whether the log was truncated after the snapshot (unclean leader election, a partial copy)."
    ),
)
SNAPSHOT_DIVERGES = rule(
    "SNP-003",
    "SNAPSHOT_DIVERGES",
    "ERROR",
    "6.6",
    "Replaying the log to the snapshot's offset gives a producer state different from the snapshot's: ERROR "
    "for the epoch or the open transaction, WARN for last sequence, last offset, offset delta or coordinator "
    "epoch. The replayed last batch is the broker's: none (-1, -1, 0) once a marker that changed the "
    "producer's epoch (a fence or timeout abort, every TV2 marker) cleared its batch window. A producer the "
    "snapshot lacks may have expired (INFO); one the snapshot has whose data lies below the log start is not "
    "compared, and one whose batches a compacted partition's cleaner removed below its checkpoint is INFO. Each "
    "snapshot is compared with the log of the replica it was read from.",
    also=("WARN", "INFO"),
    impact=(
        "A broker that loads this snapshot starts from producer state the log does not support: wrong epoch or open "
        "transaction leads to fenced producers or a stuck LSO after restart."
    ),
    action=(
        "Compare with `kafka-dump-log.sh --files OFFSET.snapshot`; if the snapshot is wrong, stop the broker "
        "and delete the partition's `.snapshot` files: after a clean shutdown it then starts with empty "
        "producer state, losing only duplicate detection for retries in flight."
    ),
    per_producer=True,
)
PHANTOM_OPEN_TXN = rule(
    "SNP-004",
    "PHANTOM_OPEN_TXN",
    "ERROR",
    "6.6",
    "Snapshot entry with an open transaction starting at F (at or above the log start) while the log has no "
    "transactional batch of that producer at F, or has its marker between F and the snapshot offset: the "
    "broker would load a transaction that never closes and the LSO would stick.",
    impact=(
        "The broker would load a transaction that no marker closes: the LSO sticks after restart and read_committed "
        "consumers stop."
    ),
    action=(
        "Stop the broker, delete the partition's `.snapshot` files and restart it (the known remedy: after a "
        "clean shutdown it starts with empty producer state), or abort the phantom transaction with "
        "`kafka-transactions.sh abort --start-offset F`."
    ),
)
SNAPSHOT_OPEN_TXN_CLOSED_LATER = rule(
    "SNP-005",
    "SNAPSHOT_OPEN_TXN_CLOSED_LATER",
    "INFO",
    "6.6",
    "Snapshot with an open transaction that the log closes with a marker after the snapshot offset (normal).",
    impact="Nothing: the snapshot was taken while the transaction was open and the log closes it later.",
    action="No action.",
    per_producer=True,
)

_COMPARED = ("producer_epoch", "last_sequence", "last_offset", "offset_delta", "coordinator_epoch")
_STATE = (*_COMPARED, "current_txn_first_offset")


def _audited(inputs: AuditInputs, ctx: AuditContext) -> DataFrame:
    """The snapshots of the audited replicas read from log directories, KRaft logs left out."""
    return audited_non_kraft(inputs.producer_snapshots, inputs.replicas, ctx.settings)


@frame("snapshots.files", rows_of="producer_snapshots")
def SNAPSHOT_FILES(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """One row per snapshot file, with the partition's segment base offsets, log start and log end."""
    if inputs.producer_snapshots is None:
        return None
    bases = inputs.segments.groupBy(*TP).agg(
        F.collect_set("segment_base_offset").alias("segment_bases"),
        F.max("segment_base_offset").alias("last_segment_base"),
    )
    return (
        _audited(inputs, ctx)
        .groupBy(*TP, "broker_id", "source_file", "snapshot_offset")
        .agg(
            F.min_by("file_status", F.col("file_status") == SNAPSHOT_OK).alias("file_status"),
            F.first("file_note", ignorenulls=True).alias("file_note"),
        )
        .join(bases, on=TP, how="inner")
        .join(inputs.partitions.select(*TP, "log_start_offset", "log_end_offset"), on=TP, how="inner")
        .withColumns(
            {
                "producer_id": F.lit(None).cast("long"),
                "producer_epoch": F.lit(None).cast("int"),
                "base_offset": F.col("snapshot_offset"),
                "last_offset": F.col("snapshot_offset"),
                "position": F.lit(None).cast("long"),
            }
        )
    )


def _beyond_end() -> Column:
    return F.col("snapshot_offset") > F.col("log_end_offset")


@check(SNAPSHOT_CORRUPT, on=SNAPSHOT_FILES)
def snapshot_corrupt(ctx: AuditContext) -> Fires:
    return Fires(
        F.col("file_status") != SNAPSHOT_OK,
        F.format_string("snapshot %d is %s", F.col("snapshot_offset"), F.col("file_status")),
        {"file_status": F.col("file_status"), "note": F.col("file_note")},
    )


@check(SNAPSHOT_STRAY, on=SNAPSHOT_FILES)
def snapshot_stray(ctx: AuditContext) -> Fires:
    below_bases = ~F.array_contains("segment_bases", F.col("snapshot_offset")) & (
        F.col("snapshot_offset") <= F.col("last_segment_base")
    )
    return Fires(
        below_bases | (F.col("snapshot_offset") < F.col("log_start_offset")) | _beyond_end(),
        F.format_string(
            "snapshot %d outside the log (start %d, end %d, last segment base %d)",
            F.col("snapshot_offset"),
            F.col("log_start_offset"),
            F.col("log_end_offset"),
            F.col("last_segment_base"),
        ),
        {"log_start_offset": F.col("log_start_offset"), "log_end_offset": F.col("log_end_offset")},
        severity=F.when(_beyond_end(), F.lit("WARN")).otherwise(F.lit("INFO")),
    )


@frame("snapshots.producers", rows_of="producer_snapshots")
def SNAPSHOT_PRODUCERS(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """One row per (snapshot, producer) over both the snapshot's and the replay's producers, with both states.

    `snap_*` columns are the snapshot entry's, `replay_*` the replay's state from the batches below the
    snapshot offset; `in_snapshot` says whether the snapshot has the producer.
    """
    if inputs.producer_snapshots is None or inputs.snapshot_states is None:
        return None
    entries = producer_entries(_audited(inputs, ctx))
    replay_at_x = by_snapshot(inputs.snapshot_states)
    # The producers with a batch below each snapshot offset: those whose first batch is below it (one row per
    # producer and snapshot, not per batch and snapshot).
    pids_before = (
        inputs.producer_state.select(*TP, "producer_id", "first_offset")
        .join(F.broadcast(entries.select(*TP, "snapshot_offset").distinct()), on=TP, how="inner")
        .where(F.col("first_offset") < F.col("snapshot_offset"))
        .select(*TP, "snapshot_offset", "producer_id")
    )
    snapshot_side = entries.select(
        *TP,
        "snapshot_offset",
        "producer_id",
        "source_file",
        "broker_id",
        *[F.col(c).alias(f"snap_{c}") for c in _STATE],
        F.lit(True).alias("in_snapshot"),
    )
    files = entries.select(
        *TP, "snapshot_offset", F.col("source_file").alias("file"), F.col("broker_id").alias("file_broker")
    ).distinct()
    return (
        snapshot_side.join(replay_at_x, on=[*TP, "snapshot_offset", "producer_id"], how="left")
        .unionByName(
            pids_before.join(
                snapshot_side.select(*TP, "snapshot_offset", "producer_id"),
                on=[*TP, "snapshot_offset", "producer_id"],
                how="left_anti",
            )
            .join(files, on=[*TP, "snapshot_offset"], how="inner")
            .select(
                *TP,
                "snapshot_offset",
                "producer_id",
                F.col("file").alias("source_file"),
                F.col("file_broker").alias("broker_id"),
            ),
            allowMissingColumns=True,
        )
        .join(inputs.partitions.select(*TP, "log_start_offset", *COMPACTION), on=TP, how="inner")
        .withColumns(
            {
                "producer_epoch": F.coalesce("snap_producer_epoch", "replay_producer_epoch"),
                "base_offset": F.col("snapshot_offset"),
                "last_offset": F.col("snapshot_offset"),
                "position": F.lit(None).cast("long"),
                "in_snapshot": F.coalesce("in_snapshot", F.lit(False)),
            }
        )
    )


# Conditions on one row of SNAPSHOT_PRODUCERS.
def _in_replay() -> Column:
    return F.coalesce(F.col("replayed_batches"), F.lit(0)) > 0


def _differs(name: str) -> Column:
    return ~F.col(f"snap_{name}").eqNullSafe(F.col(f"replay_{name}"))


def _open_txn() -> Column:
    return F.col("snap_current_txn_first_offset")


def _state_evidence() -> dict[str, Column]:
    return {f"snapshot_{c}": F.col(f"snap_{c}") for c in _STATE} | {f"replay_{c}": F.col(f"replay_{c}") for c in _STATE}


@check(SNAPSHOT_DIVERGES, on=SNAPSHOT_PRODUCERS)
def snapshot_diverges(ctx: AuditContext) -> Fires:
    in_snapshot, in_replay = F.col("in_snapshot"), _in_replay()
    serious = _differs("producer_epoch") | _differs("current_txn_first_offset")
    any_difference = serious
    for name in _COMPARED:
        any_difference = any_difference | _differs(name)
    deleted_history = F.col("snap_last_offset") < F.col("log_start_offset")
    # the cleaner removed the producer's batches below the offset after the snapshot was written
    cleaned_away = F.col("compacted_by").isNotNull() & F.coalesce(
        F.col("snap_last_offset") < F.col("cleaner_offset"), F.lit(True)
    )
    differing = F.concat_ws(", ", *[F.when(_differs(c), F.lit(c)) for c in _STATE])
    return Fires(
        (in_snapshot & in_replay & any_difference)
        | (~in_snapshot & in_replay)
        | (in_snapshot & ~in_replay & ~deleted_history),
        F.when(
            ~in_snapshot,
            F.format_string("producer %d is missing from snapshot %d", F.col("producer_id"), F.col("snapshot_offset")),
        )
        .when(
            ~in_replay,
            F.format_string(
                "snapshot %d has producer %d, the log below it has none of its batches%s",
                F.col("snapshot_offset"),
                F.col("producer_id"),
                F.when(cleaned_away, F.lit(" (the cleaner removed them)")).otherwise(F.lit("")),
            ),
        )
        .otherwise(
            F.format_string(
                "snapshot %d differs from the replay for producer %d in %s",
                F.col("snapshot_offset"),
                F.col("producer_id"),
                differing,
            )
        ),
        _state_evidence(),
        severity=F.when(~in_snapshot | (~in_replay & cleaned_away), F.lit("INFO"))
        .when(in_replay & ~serious, F.lit("WARN"))
        .otherwise(F.lit("ERROR")),
    )


@check(PHANTOM_OPEN_TXN, on=SNAPSHOT_PRODUCERS)
def phantom_open_txn(ctx: AuditContext) -> Fires:
    open_txn = _open_txn()
    return Fires(
        F.col("in_snapshot")
        & open_txn.isNotNull()
        & (open_txn >= F.col("log_start_offset"))
        & (
            ~F.coalesce(F.col("txn_starts_at_f"), F.lit(False))
            | F.coalesce(F.col("marker_between_f_and_x"), F.lit(False))
        ),
        F.format_string(
            "snapshot %d holds an open transaction of producer %d from offset %d that the log does not",
            F.col("snapshot_offset"),
            F.col("producer_id"),
            open_txn,
        ),
        _state_evidence(),
    )


@check(SNAPSHOT_OPEN_TXN_CLOSED_LATER, on=SNAPSHOT_PRODUCERS)
def snapshot_open_txn_closed_later(ctx: AuditContext) -> Fires:
    return Fires(
        F.col("in_snapshot") & _open_txn().isNotNull() & F.coalesce(F.col("marker_after_x"), F.lit(False)),
        F.format_string(
            "transaction of producer %d open at snapshot %d is closed later",
            F.col("producer_id"),
            F.col("snapshot_offset"),
        ),
        _state_evidence(),
    )
