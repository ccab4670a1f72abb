"""Producer-state snapshot rules SNP-001..SNP-005 (spec §6.6): the broker's `<X>.snapshot` files against
the state the replay reaches at offset X.

A snapshot named X holds each producer's state after every batch below X (spec §1.4). The replay state at X
is a running value over the producer's batches in offset order, read where X falls among them: one exchange and
sort of the producer rows of the producers the snapshots name, whatever the number of snapshots per partition.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pipeline.audit.columns import window_cleared
from pipeline.audit.context import AuditContext, AuditInputs
from pipeline.audit.registry import Fires, check, frame, rule
from pipeline.audit.replay import TP, topic_matches

SNAPSHOT_OK = "ok"

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
    "compared.",
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
)

_COMPARED = ("producer_epoch", "last_sequence", "last_offset", "offset_delta", "coordinator_epoch")
_STATE = (*_COMPARED, "current_txn_first_offset")


def audited_snapshots(snapshots: DataFrame, replicas: DataFrame) -> DataFrame:
    """Snapshot rows of the audited replica of each partition, KRaft logs excluded by the replica list."""
    return snapshots.withColumn("broker_id", F.coalesce("broker_id", F.lit(-1))).join(
        replicas.select(*TP, "broker_id"), on=[*TP, "broker_id"], how="inner"
    )


def _audited(inputs: AuditInputs, ctx: AuditContext) -> DataFrame:
    """The snapshots of the audited replicas read from log directories, KRaft logs left out."""
    replicas = inputs.replicas.where(~topic_matches(ctx.settings.kraft_topics))
    return audited_snapshots(inputs.producer_snapshots, replicas)


@frame("snapshots.files", rows_of="producer_snapshots")
def SNAPSHOT_FILES(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """One row per snapshot file, with the partition's segment base offsets, log start and log end."""
    if inputs.producer_snapshots is None:
        return None
    bases = inputs.batches.groupBy(*TP).agg(
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


def _replay_state_at_snapshot(entries: DataFrame, replayed: DataFrame) -> DataFrame:
    """Per snapshot entry, the replay's state of its producer from the batches below the snapshot offset.

    An as-of lookup: the producer's rows and its snapshot offsets are sorted together by offset, and each offset
    takes the running values of the rows before it. Joining every row with every snapshot of its partition would
    grow with the number of segments times the number of batches.
    """
    keys = entries.select(*TP, "producer_id", "snapshot_offset", "current_txn_first_offset").distinct()
    rows = replayed.join(
        F.broadcast(keys.select(*TP, "producer_id").distinct()), on=[*TP, "producer_id"], how="left_semi"
    )
    txn_starts = (
        rows.where(F.col("is_data") & F.col("is_transactional"))
        .select(*TP, "producer_id", F.col("base_offset").alias("current_txn_first_offset"))
        .distinct()
        .withColumn("txn_starts_at_f", F.lit(True))
    )
    is_row = F.col("snapshot_offset").isNull()
    open_after_row = (
        F.when(F.col("is_marker"), F.lit(None).cast("long"))
        .when(F.col("is_data") & F.col("is_transactional"), F.coalesce(F.col("txn_first_offset"), F.col("base_offset")))
        .otherwise(F.col("txn_first_offset"))
    )
    accepted_data = F.col("is_data") & (F.col("producer_epoch") == F.col("epoch_run"))
    data = F.struct(
        "base_offset", "last_sequence", "last_offset", (F.col("last_offset") - F.col("base_offset")).alias("delta")
    )
    producer = Window.partitionBy(*TP, "producer_id")
    # Snapshot offsets sort before the rows at the same offset: the state at X is that of the rows below X.
    below = producer.orderBy("base_offset", is_row, "segment_base_offset", "position").rowsBetween(
        Window.unboundedPreceding, Window.currentRow
    )

    def last(value: Column) -> Column:
        return F.last(value, ignorenulls=True).over(below)

    combined = rows.select(
        *TP,
        "producer_id",
        "base_offset",
        "segment_base_offset",
        "position",
        F.lit(None).cast("long").alias("snapshot_offset"),
        F.lit(None).cast("long").alias("current_txn_first_offset"),
        "producer_epoch",
        "epoch_run",
        "state_epoch",
        "is_data",
        "is_marker",
        F.when(accepted_data, data).alias("data"),
        F.when(F.col("is_marker"), F.struct("coordinator_epoch")).alias("marker"),
        F.when(F.col("is_marker"), F.col("base_offset")).alias("marker_offset"),
        F.struct(open_after_row.alias("value")).alias("open_after"),
    ).unionByName(
        keys.select(
            *TP,
            "producer_id",
            F.col("snapshot_offset").alias("base_offset"),
            "snapshot_offset",
            "current_txn_first_offset",
        ),
        allowMissingColumns=True,
    )
    at_x = combined.select(
        *TP,
        "producer_id",
        "snapshot_offset",
        "current_txn_first_offset",
        F.max(is_row).over(producer).alias("has_rows"),
        F.count(F.when(is_row, 1)).over(below).alias("replayed_batches"),
        F.max("producer_epoch").over(below).alias("replay_producer_epoch"),
        last(F.col("data")).alias("last_data"),
        window_cleared(over=below).alias("cleared"),
        last(F.col("marker")).alias("last_marker"),
        F.max("marker_offset").over(below).alias("last_marker_offset"),
        F.max("marker_offset").over(producer).alias("max_marker_offset"),
        last(F.col("open_after")).alias("last_open_after"),
    ).where(~is_row)
    cleared = F.col("cleared")

    def last_batch(field: str, none: int) -> Column:
        """The last accepted data batch's value, or the file's "none" when a marker cleared the window after it."""
        return F.when(cleared, F.lit(none)).otherwise(F.coalesce(F.col(f"last_data.{field}"), F.lit(none)))

    txn_start = F.col("current_txn_first_offset")
    state = {
        "replayed_batches": F.col("replayed_batches"),
        "replay_producer_epoch": F.col("replay_producer_epoch"),
        # the snapshot file's "none" values: no data batch -1 / -1 / 0, no marker -1
        "replay_last_sequence": last_batch("last_sequence", -1),
        "replay_last_offset": last_batch("last_offset", -1),
        "replay_offset_delta": last_batch("delta", 0).cast("int"),
        "replay_coordinator_epoch": F.coalesce(F.col("last_marker.coordinator_epoch"), F.lit(-1)),
        "replay_current_txn_first_offset": F.col("last_open_after.value"),
        "txn_starts_at_f": F.coalesce(F.col("txn_starts_at_f"), F.lit(False)),
        "marker_between_f_and_x": F.coalesce(F.col("last_marker_offset") >= txn_start, F.lit(False)),
        "marker_after_x": F.coalesce(F.col("max_marker_offset") >= F.col("snapshot_offset"), F.lit(False)),
    }
    # A producer without rows in the partition has no replay state at all (nulls), as a left join leaves it.
    per_entry = at_x.join(txn_starts, on=[*TP, "producer_id", "current_txn_first_offset"], how="left").select(
        *TP,
        "producer_id",
        "snapshot_offset",
        *[F.when(F.col("has_rows"), value).alias(name) for name, value in state.items()],
    )
    return per_entry.groupBy(*TP, "producer_id", "snapshot_offset").agg(
        *[F.first(name).alias(name) for name in state if name not in _PER_TRANSACTION_START],
        *[F.max(name).alias(name) for name in _PER_TRANSACTION_START],
    )


# Columns that depend on the entry's open transaction: a (snapshot, producer) with several entries has any of them.
_PER_TRANSACTION_START = ("txn_starts_at_f", "marker_between_f_and_x")


@frame("snapshots.producers", rows_of="producer_snapshots")
def SNAPSHOT_PRODUCERS(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """One row per (snapshot, producer) over both the snapshot's and the replay's producers, with both states.

    `snap_*` columns are the snapshot entry's, `replay_*` the replay's state from the batches below the
    snapshot offset; `in_snapshot` says whether the snapshot has the producer.
    """
    if inputs.producer_snapshots is None:
        return None
    replayed = inputs.producer_batches
    entries = _audited(inputs, ctx).where((F.col("file_status") == SNAPSHOT_OK) & F.col("producer_id").isNotNull())
    replay_at_x = _replay_state_at_snapshot(entries, replayed)
    # The producers with a batch below each snapshot offset: those whose first batch is below it (one row per
    # producer and snapshot, not per batch and snapshot).
    pids_before = (
        replayed.groupBy(*TP, "producer_id")
        .agg(F.min("base_offset").alias("first_offset"))
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
        .join(inputs.partitions.select(*TP, "log_start_offset"), on=TP, how="inner")
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
                "snapshot %d has producer %d, the log below it has none of its batches",
                F.col("snapshot_offset"),
                F.col("producer_id"),
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
        severity=F.when(~in_snapshot, F.lit("INFO"))
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
