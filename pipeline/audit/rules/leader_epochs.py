"""The leader-epoch checkpoint against itself and against the log (spec §6.1 LEP-002, LEP-003).

The broker keeps `leader-epoch-checkpoint` in step with the log: `LeaderEpochFileCache.assign` drops every entry
whose epoch or start offset is not below the new one, so the entries it writes increase strictly in both, and
`UnifiedLog.maybeAssignEpochStartOffset` records an epoch at the base offset of the first batch written with it.
LEP-001 (a file the broker cannot read) is found while decoding the file (`pipeline.audit.rules.files`).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.core.registry import Fires, check, frame, rule
from pipeline.audit.replay.plan import COMPACTION
from schemas.keys import TP

EPOCH_CHECKPOINT_ORDER = rule(
    "LEP-002",
    "EPOCH_CHECKPOINT_ORDER",
    "ERROR",
    "6.1",
    "leader-epoch-checkpoint entries whose epochs or start offsets do not increase strictly from line to line.",
    impact=(
        "Out-of-order epoch entries make leader-epoch lookups (OffsetsForLeaderEpoch) answer wrongly, so followers "
        "may truncate committed records or keep divergent ones."
    ),
    action=(
        "Compare with the other replicas' checkpoints and look for an unclean leader election; if only this "
        "replica's file is wrong, rebuild the replica from the leader."
    ),
)
EPOCH_CHECKPOINT_VS_LOG = rule(
    "LEP-003",
    "EPOCH_CHECKPOINT_VS_LOG",
    "WARN",
    "6.1",
    "For a checkpoint entry (e, s) with s at or above the log start offset, the first batch written in leader "
    "epoch e does not start at s; or the retained log holds batches of an epoch the checkpoint does not list. "
    "WARN: the file is flushed asynchronously and truncation rewrites it. An epoch with no batch at all is "
    "fine (a leader that wrote nothing), and so is an entry moved up to the log start by retention, which "
    "may fall inside a batch. INFO on a compacted partition when the entry lies below the cleaner checkpoint "
    "and the cleaner removed the epoch's first batches.",
    also=("INFO",),
    impact=(
        "A checkpoint that disagrees with the log gives followers a wrong truncation point after a leader change; it "
        "is often only a checkpoint that was not flushed yet."
    ),
    action=(
        "Re-check after the broker has flushed (a later copy); if it persists, compare the replicas' logs at the "
        "epoch's start offset."
    ),
)


def _entries(inputs: AuditInputs) -> DataFrame:
    """Well-formed checkpoint entries of the audited replicas (each partition's, as `partitions` names it: a
    row per partition, not a scan of the replay)."""
    return (
        inputs.leader_epochs.where(F.col("problem").isNull())
        .withColumn("broker_id", F.coalesce("broker_id", F.lit(-1)))
        .join(inputs.partitions.select(*TP, "broker_id"), on=[*TP, "broker_id"], how="inner")
    )


def _located(
    df: DataFrame, base_offset: Column, last_offset: Column, source_file: Column, position: Column
) -> DataFrame:
    """Give rows the location columns every finding carries (replacing any `source_file`/`position`)."""
    return df.select(
        *[column for column in df.columns if column not in ("source_file", "position")],
        F.lit(None).cast("long").alias("producer_id"),
        F.lit(None).cast("int").alias("producer_epoch"),
        base_offset.cast("long").alias("base_offset"),
        last_offset.cast("long").alias("last_offset"),
        source_file.alias("source_file"),
        position.cast("long").alias("position"),
    )


def _at_first_batch(rows: DataFrame) -> DataFrame:
    """Rows located at the `first` batch struct of `epoch_starts`."""
    first = F.col("first")
    return _located(rows, first["base_offset"], first["last_offset"], first["source_file"], first["position"])


@frame("leader_epochs.lines", rows_of="leader_epochs")
def EPOCH_CHECKPOINT_LINES(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """Each checkpoint entry after the first of its file, with the entry on the line before it.

    Located at the entry's start offset in the checkpoint file.
    """
    if inputs.leader_epochs is None:
        return None
    in_file = Window.partitionBy(*TP, "broker_id", "source_file").orderBy("line")
    rows = (
        _entries(inputs)
        .select(
            *TP,
            "broker_id",
            "source_file",
            "line",
            "epoch",
            "start_offset",
            F.lag("epoch").over(in_file).alias("previous_epoch"),
            F.lag("start_offset").over(in_file).alias("previous_start_offset"),
        )
        .where(F.col("previous_epoch").isNotNull())
    )
    return _located(rows, F.col("start_offset"), F.lit(None), F.col("source_file"), F.lit(None))


@check(EPOCH_CHECKPOINT_ORDER, on=EPOCH_CHECKPOINT_LINES)
def epoch_checkpoint_order(ctx: AuditContext) -> Fires:
    return Fires(
        (F.col("epoch") <= F.col("previous_epoch")) | (F.col("start_offset") <= F.col("previous_start_offset")),
        F.format_string(
            "leader-epoch-checkpoint line %d: epoch %d at offset %d follows epoch %d at offset %d",
            "line",
            "epoch",
            "start_offset",
            "previous_epoch",
            "previous_start_offset",
        ),
        {"line": F.col("line"), "previous_epoch": F.col("previous_epoch")},
    )


@frame("leader_epochs.entries", rows_of="leader_epochs")
def EPOCH_CHECKPOINT_ENTRIES(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """Checkpoint entries at or above the log start with the first retained batch of their epoch.

    Located at that batch; the checkpoint file is in `checkpoint`.
    """
    if inputs.epoch_starts is None:  # no leader-epoch checkpoints
        return None
    rows = (
        _entries(inputs)
        .select(*TP, "broker_id", "epoch", "start_offset", "line", F.col("source_file").alias("checkpoint"))
        .join(inputs.epoch_starts, on=[*TP, "broker_id", "epoch"], how="inner")
        .where(F.col("start_offset") >= F.col("log_start_offset"))
        .join(inputs.partitions.select(*TP, *COMPACTION), on=TP, how="left")
    )
    return _at_first_batch(rows)


@check(EPOCH_CHECKPOINT_VS_LOG, on=EPOCH_CHECKPOINT_ENTRIES)
def epoch_checkpoint_vs_log(ctx: AuditContext) -> Fires:
    moved_to_log_start = (F.col("start_offset") == F.col("log_start_offset")) & F.col("start_offset").between(
        F.col("first.base_offset"), F.col("first.last_offset")
    )
    # the cleaner removed the epoch's first batches: they lay below its checkpoint on a compacted partition
    cleaned_away = (
        F.col("compacted_by").isNotNull()
        & (F.col("start_offset") < F.col("first.base_offset"))
        & (F.col("start_offset") < F.col("cleaner_offset"))
    )
    return Fires(
        (F.col("start_offset") != F.col("first.base_offset")) & ~moved_to_log_start,
        F.format_string(
            "leader-epoch-checkpoint says epoch %d starts at offset %d; its first batch starts at %d%s",
            "epoch",
            "start_offset",
            "first.base_offset",
            F.when(cleaned_away, F.lit(" (the cleaner removed the batches before it)")).otherwise(F.lit("")),
        ),
        {"checkpoint": F.col("checkpoint"), "line": F.col("line"), "checkpoint_start_offset": F.col("start_offset")},
        severity=F.when(F.coalesce(cleaned_away, F.lit(False)), F.lit("INFO")).otherwise(F.lit("WARN")),
    )


@frame("leader_epochs.log_epochs", rows_of="leader_epochs")
def LOG_EPOCHS(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """The leader epochs of the retained batches of each replica with a checkpoint, at their first batch.

    `listed`: the checkpoint lists the epoch; `listed_epochs` are the epochs it lists.
    """
    if inputs.epoch_starts is None:  # no leader-epoch checkpoints
        return None
    entries = _entries(inputs)
    listed = entries.select(*TP, "broker_id", "epoch").distinct().withColumn("listed", F.lit(True))
    checkpointed = entries.groupBy(*TP, "broker_id").agg(
        F.first("source_file").alias("checkpoint"), F.sort_array(F.collect_set("epoch")).alias("listed_epochs")
    )
    rows = (
        inputs.epoch_starts.join(checkpointed, on=[*TP, "broker_id"], how="inner")
        .join(listed, on=[*TP, "broker_id", "epoch"], how="left")
        .withColumn("listed", F.coalesce("listed", F.lit(False)))
    )
    return _at_first_batch(rows)


@check(EPOCH_CHECKPOINT_VS_LOG, on=LOG_EPOCHS)
def epoch_not_in_checkpoint(ctx: AuditContext) -> Fires:
    return Fires(
        ~F.col("listed"),
        F.format_string(
            "batches of leader epoch %d from offset %d, which leader-epoch-checkpoint does not list",
            "epoch",
            "first.base_offset",
        ),
        {
            "checkpoint": F.col("checkpoint"),
            "listed_epochs": F.array_join(F.col("listed_epochs").cast("array<string>"), ","),
        },
    )
