"""The first retained batch of each leader epoch, as parts the replay's tasks take, which the leader-epoch frames join
with the checkpoints."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core import expr as E
from pipeline.audit.core.mergeable import Mergeable, Part
from pipeline.audit.replay.plan import LOG_START
from schemas.batches import STATUS_OK
from schemas.keys import TP


def epoch_start_parts() -> Mergeable:
    """Per audited replica and leader epoch, its first retained v2 batch, in parts the replay's tasks take of the rows
    they replay (pipeline.audit.replay.task_outputs): no plan scans the replay for it. Retained: at or above the log
    start, which is the log's first batch or, when higher, the checkpointed log start (DeleteRecords moves it inside
    a segment), which every replayed row carries."""
    retained = E.col(LOG_START).isNull() | (E.col("last_offset") >= E.col(LOG_START))
    v2 = (E.col("entry_status") == STATUS_OK) & (E.col("magic") == 2) & (E.col("partition_leader_epoch") >= 0)
    at = E.col("base_offset")
    return Mergeable(
        "epoch_starts",
        (*TP, "broker_id", "partition_leader_epoch"),
        (
            Part("base_offset", "min", at),
            *[Part(name, "first", E.col(name), order=at) for name in ("last_offset", "source_file", "position")],
        ),
        rows=v2 & retained,
    )


def epoch_starts(parts: DataFrame, partitions: DataFrame) -> DataFrame:
    """The first retained batch (`first`) of every leader epoch of every audited replica, with the partition's log
    start: what both leader-epoch frames read, a join of the tasks' parts with a row per partition."""
    return parts.join(partitions.select(*TP, "log_start_offset"), on=TP, how="inner").select(
        *TP,
        "broker_id",
        F.col("partition_leader_epoch").alias("epoch"),
        "log_start_offset",
        F.struct("base_offset", "last_offset", "source_file", "position").alias("first"),
    )
