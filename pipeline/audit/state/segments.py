"""The segments of each audited replica as the replay holds them: what the frames and state that need a replica's
segments, source or newest timestamp read, instead of aggregating every replayed row again.

Kept in parts beside the replay (pipeline.audit.state.kept_parts): a run that went on from a kept replay
aggregates only the rows it replayed.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from pipeline.audit.core import expr as E
from pipeline.audit.core.mergeable import Mergeable, Part
from pipeline.audit.replay.plan import COMPACTION, LOG_START
from schemas.keys import TP

NEVER = (1 << 63) - 1  # an offset past every other: the next segment of the last one, a transaction never closed


def segment_parts() -> Mergeable:
    """Per (replica, segment, source format): its rows, their newest timestamp, the replica's compaction and its
    checkpointed log start (every replayed row carries both)."""
    return Mergeable(
        "segments",
        (*TP, "broker_id", "segment_base_offset", "source_format"),
        (
            Part("entry_count", "count", E.lit(1)),
            Part("max_timestamp", "max", E.col("max_timestamp")),
            Part("is_compacted", "max", E.col("is_compacted")),
            *[Part(name, "max", E.col(name)) for name in (*COMPACTION, LOG_START)],
        ),
    )


def segment_ranges(segments: DataFrame) -> DataFrame:
    """Segments of each audited replica with the base offset of the segment after them."""
    following = Window.partitionBy(*TP, "broker_id").orderBy("segment_base_offset")
    return (
        segments.select(*TP, "broker_id", "segment_base_offset")
        .distinct()
        .select(
            *TP,
            "broker_id",
            "segment_base_offset",
            F.coalesce(F.lead("segment_base_offset").over(following), F.lit(NEVER)).alias("next_segment_base"),
        )
    )


def partition_facts(segments: DataFrame) -> DataFrame:
    """Per partition: the newest timestamp of its batches, whether it is compacted, how that is known, its cleaner
    checkpoint (pipeline.audit.replay.plan.COMPACTION) and its checkpointed log start (`LOG_START`)."""
    return segments.groupBy(*TP).agg(
        F.max("max_timestamp").alias("partition_max_timestamp"),
        F.max("is_compacted").alias("is_compacted"),
        *[F.max(name).alias(name) for name in (*COMPACTION, LOG_START)],
    )
