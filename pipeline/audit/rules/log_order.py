"""The order of one replica's log in its files (spec §6.1): offsets that only grow, without gaps outside compaction,
leader epochs that never go back, and segments that start at their base offset and end before the next one."""

from __future__ import annotations

from pipeline.audit.core import expr as E
from pipeline.audit.core.context import AuditContext
from pipeline.audit.core.frames import BATCHES
from pipeline.audit.core.registry import Fires, check, rule
from pipeline.audit.rules.format import client_topic, readable, v2

OFFSETS_NOT_INCREASING = rule(
    "FMT-011",
    "OFFSETS_NOT_INCREASING",
    "ERROR",
    "6.1",
    "A batch starts at or below the last offset of the batch before it (within or across segments).",
    impact=(
        "Offsets that go backwards make two records share an offset: consumers can skip or reread records, and "
        "followers fail with `OffsetsOutOfOrderException` and drop out of the ISR (KAFKA-19407)."
    ),
    action=(
        "Compare the leader's and followers' segments for the partition; check for an unclean leader election or a "
        "copied-in segment. Report the broker version if the leader itself wrote it."
    ),
)


OFFSET_GAP = rule(
    "FMT-012",
    "OFFSET_GAP",
    "WARN",
    "6.1",
    "A batch starts more than one offset after the previous batch ends, on a topic not configured as "
    "compacted (legal after compaction).",
    impact=(
        "Missing offsets on a non-compacted topic mean batches were removed from the middle of the log (lost "
        "records), unless the topic is in fact compacted."
    ),
    action=(
        "Check `cleanup.policy` of the topic and add it to `audit.compacted_topics` if it is compacted; otherwise "
        "compare with another replica to find the missing batches."
    ),
)


LEADER_EPOCH_REGRESSION = rule(
    "FMT-013",
    "LEADER_EPOCH_REGRESSION",
    "ERROR",
    "6.1",
    "partitionLeaderEpoch decreases along the log (ERROR), or is -1 on a client topic (WARN).",
    also=("WARN",),
    impact=(
        "Leader epochs drive follower truncation after a leader change; a regression means a stale leader wrote "
        "after a newer one, and replicas may have diverged (records lost or different on different brokers)."
    ),
    action=(
        "Check the controller and broker logs around the offsets for an unclean leader election "
        "(`unclean.leader.election.enable`) and compare all replicas of the partition; -1 on a client topic points "
        "at a pre-0.11 writer or a rewritten file."
    ),
)


SEGMENT_BASE = rule(
    "SEG-002",
    "SEGMENT_BASE",
    "ERROR",
    "6.1",
    "A segment's first batch ends below the segment's base offset (ERROR), or starts above it on a "
    "non-compacted topic for a segment other than the first (WARN).",
    also=("WARN",),
    impact=(
        "A segment whose first batch lies outside its name's offset breaks offset lookups: fetches for those offsets "
        "go to the wrong segment or fail."
    ),
    action=(
        "Dump the segment (`kafka-dump-log.sh --files SEGMENT.log`) and compare its first batch with the file name "
        "and the previous segment; check the topic's `cleanup.policy` for the WARN case."
    ),
)


SEGMENT_OVERLAP = rule(
    "SEG-003",
    "SEGMENT_OVERLAP",
    "ERROR",
    "6.1",
    "The last batch of a segment reaches the base offset of the next segment.",
    impact=(
        "Overlapping segments hold the same offsets twice: fetches may return either copy, and the broker's recovery "
        "treats the log as corrupt."
    ),
    action="Compare with another replica and look for segments copied in by hand or an interrupted log-cleaner swap.",
)


@check(OFFSETS_NOT_INCREASING, on=BATCHES)
def offsets_not_increasing(ctx: AuditContext) -> Fires:
    previous_last = E.col("max_last_offset_before")
    return Fires(
        readable() & (E.col("base_offset") <= previous_last),
        E.format_string("batch starts at %d after offset %d", E.col("base_offset"), previous_last),
        {"previous_last_offset": previous_last},
    )


@check(OFFSET_GAP, on=BATCHES)
def offset_gap(ctx: AuditContext) -> Fires:
    previous_last = E.col("previous_readable_last_offset")
    return Fires(
        readable() & ~E.col("is_compacted") & (E.col("base_offset") > previous_last + 1),
        E.format_string("offsets %d..%d are missing", previous_last + 1, E.col("base_offset") - 1),
        {"previous_last_offset": previous_last},
    )


@check(LEADER_EPOCH_REGRESSION, on=BATCHES)
def leader_epoch_regression(ctx: AuditContext) -> Fires:
    before = E.col("max_leader_epoch_before")
    return Fires(
        v2()
        & ((E.col("partition_leader_epoch") < before) | (client_topic() & (E.col("partition_leader_epoch") == -1))),
        E.format_string("partition leader epoch %d after %d", E.col("partition_leader_epoch"), before),
        {"previous_max_leader_epoch": before},
        severity=E.when(E.col("partition_leader_epoch") == -1, E.lit("WARN")).otherwise(E.lit("ERROR")),
    )


@check(SEGMENT_BASE, on=BATCHES)
def segment_base(ctx: AuditContext) -> Fires:
    return Fires(
        readable()
        & E.col("is_segment_first")
        & (
            (E.col("last_offset") < E.col("segment_base_offset"))
            | (
                ~E.col("is_compacted")
                & ~E.col("in_first_segment")
                & (E.col("base_offset") > E.col("segment_base_offset"))
            )
        ),
        E.format_string(
            "segment %d starts with offsets %d..%d",
            E.col("segment_base_offset"),
            E.col("base_offset"),
            E.col("last_offset"),
        ),
        {"segment_base_offset": E.col("segment_base_offset")},
        severity=E.when(E.col("last_offset") < E.col("segment_base_offset"), E.lit("ERROR")).otherwise(E.lit("WARN")),
    )


@check(SEGMENT_OVERLAP, on=BATCHES)
def segment_overlap(ctx: AuditContext) -> Fires:
    following = E.col("next_entry_segment_base_offset")
    return Fires(
        readable() & (following > E.col("segment_base_offset")) & (E.col("last_offset") >= following),
        E.format_string("last offset %d reaches into the next segment starting at %d", E.col("last_offset"), following),
        {"next_segment_base_offset": following},
    )
