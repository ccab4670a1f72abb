"""Rules about a partition's other files (spec §6.1): naming, offset and time indexes, partition.metadata
and the leader-epoch checkpoint. The reader of those files (`pipeline.sources.partition_files`, table
`file_problems`) records what it saw, by kind; this module registers the rules, and each rule's check fires on
the problems of its kind.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.core.registry import Fires, check, frame, rule
from schemas.file_problems import (
    PROBLEM_FILE_NAME,
    PROBLEM_LEADER_EPOCH_CHECKPOINT,
    PROBLEM_LEFTOVER_FILES,
    PROBLEM_OFFSET_INDEX,
    PROBLEM_PARTITION_METADATA,
    PROBLEM_TIME_INDEX,
)
from schemas.keys import TP

FILE_NAMING = rule(
    "SEG-001",
    "FILE_NAMING",
    "WARN",
    "6.1",
    "A segment, index or snapshot file whose name is not a 20-digit zero-padded offset with a known suffix "
    "(WARN); a partition dir's leftover .deleted/.cleaned/.swap files, one finding for all of them (INFO): "
    "segments are renamed .deleted and removed later, asynchronously, so a clean stop or a live copy leaves them, "
    "and the broker's next start clears them.",
    also=("INFO",),
    impact=(
        "Files the broker does not recognise are ignored or deleted at load. Leftover .deleted/.cleaned/.swap files "
        "are normal state the next start clears: nothing is lost."
    ),
    action=(
        "For WARN, check that the copy did not rename files. Leftovers need no action; only many of them at every "
        "copy, growing, need a look at the broker log (deletes or cleaner swaps failing)."
    ),
)
OFFSET_INDEX = rule(
    "SEG-004",
    "OFFSET_INDEX",
    "WARN",
    "6.1",
    ".index size not a multiple of 8, relative offsets not increasing, or an entry whose position does not "
    "start a batch whose last offset is the entry's offset (the broker rebuilds indexes, so WARN).",
    impact=(
        "A wrong offset index makes fetches start at the wrong position (slow scans or errors); the broker rebuilds "
        "it after an unclean shutdown, so the data itself is intact."
    ),
    action=(
        "Run `kafka-dump-log.sh --files SEGMENT.index --index-sanity-check`; if it persists, delete the `.index` "
        "while the broker is stopped: at start it recovers the segment and rebuilds its indexes."
    ),
)
TIME_INDEX = rule(
    "SEG-005",
    "TIME_INDEX",
    "WARN",
    "6.1",
    ".timeindex size not a multiple of 12, timestamps not increasing, or an entry matching no batch.",
    impact=(
        "A wrong time index makes `offsetsForTimes` and time-based retention pick the wrong offsets; the data itself "
        "is intact."
    ),
    action=(
        "Run `kafka-dump-log.sh --files SEGMENT.timeindex --verify-index-only`; to repair, delete the `.timeindex` "
        "and `.index` while the broker is stopped: at start it recovers the segment and rebuilds both."
    ),
)
PARTITION_METADATA = rule(
    "SEG-006",
    "PARTITION_METADATA",
    "WARN",
    "6.1",
    "partition.metadata not of the form `version: 0` / `topic_id: <uuid>`, or a zero topic id.",
    impact=(
        "A malformed file leaves the broker without the partition's topic id, which it checks against the "
        "controller's to tell a live partition from a leftover of a deleted topic with the same name."
    ),
    action=(
        "Compare the topic id with `kafka-topics.sh --describe --topic TOPIC`; a directory left from a deleted topic "
        "should be removed."
    ),
)
EPOCH_CHECKPOINT_FORMAT = rule(
    "LEP-001",
    "EPOCH_CHECKPOINT_FORMAT",
    "ERROR",
    "6.1",
    "leader-epoch-checkpoint with a version other than 0, a count that differs from its lines, or a malformed line.",
    impact=(
        "The broker cannot read this leader-epoch-checkpoint and rebuilds or truncates using wrong epochs, which can "
        "truncate a follower wrongly after a leader change."
    ),
    action=(
        "Check whether the file was copied while the broker rewrote it (copy it again); otherwise compare "
        "with the other replicas' checkpoints and report it with the broker version."
    ),
)


@frame("file_problems", rows_of="file_problems")
def FILE_PROBLEMS(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """Problems the partition-file reader found in the audited replicas' files, by kind.

    The row's `message` is the finding's; it is located at the file and byte position.
    """
    if inputs.file_problems is None:
        return None
    return (
        inputs.file_problems.withColumn("broker_id", F.coalesce("broker_id", F.lit(-1)))
        .join(inputs.replicas.select(*TP, "broker_id"), on=[*TP, "broker_id"], how="inner")
        .select(
            "kind",
            *TP,
            F.lit(None).cast("long").alias("producer_id"),
            F.lit(None).cast("int").alias("producer_epoch"),
            F.lit(None).cast("long").alias("base_offset"),
            F.lit(None).cast("long").alias("last_offset"),
            "source_file",
            "position",
            "message",
            "broker_id",
        )
    )


def _seen(kind: str) -> Fires:
    """The file problems of `kind`, as the reader worded them."""
    return Fires(F.col("kind") == F.lit(kind), F.col("message"), {})


@check(FILE_NAMING, on=FILE_PROBLEMS)
def file_naming(ctx: AuditContext) -> Fires:
    leftovers = F.col("kind") == F.lit(PROBLEM_LEFTOVER_FILES)
    return Fires(
        (F.col("kind") == F.lit(PROBLEM_FILE_NAME)) | leftovers,
        F.col("message"),
        {},
        severity=F.when(leftovers, F.lit("INFO")).otherwise(F.lit("WARN")),
    )


@check(OFFSET_INDEX, on=FILE_PROBLEMS)
def offset_index(ctx: AuditContext) -> Fires:
    return _seen(PROBLEM_OFFSET_INDEX)


@check(TIME_INDEX, on=FILE_PROBLEMS)
def time_index(ctx: AuditContext) -> Fires:
    return _seen(PROBLEM_TIME_INDEX)


@check(PARTITION_METADATA, on=FILE_PROBLEMS)
def partition_metadata(ctx: AuditContext) -> Fires:
    return _seen(PROBLEM_PARTITION_METADATA)


@check(EPOCH_CHECKPOINT_FORMAT, on=FILE_PROBLEMS)
def epoch_checkpoint_format(ctx: AuditContext) -> Fires:
    return _seen(PROBLEM_LEADER_EPOCH_CHECKPOINT)
