"""The findings of row frames kept with the replay, so that a run that went on from a kept replay checks only the
rows it replayed.

A row-local frame's findings (pipeline.audit.core.registry.Frame.row_local) depend on their replay row alone, and a
replay that goes on leaves every kept row as a whole replay would (pipeline.audit.replay.kept). So the earlier
findings of the partitions that went on stay right, except those of the kept last rows, which the replay writes
again with their new next entry and which are checked again with the added rows. The findings each run leaves are
kept beside its replay for the next one.
"""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipeline.audit.core.scratch import Scratch
from pipeline.audit.replay.files import Keeping, ReplayOutcome
from pipeline.audit.replay.kept import write_kept
from schemas.keys import REPLICA

log = logging.getLogger(__name__)

# where a finding of a row frame is: the row's (pipeline.audit.core.columns.LOCATION)
ROW = [*REPLICA, "segment", "position"]


def kept_for(outcome: ReplayOutcome | None, frame: str) -> bool:
    """Whether some partition went on from a kept replay that holds the frame's findings: else the frame's findings
    are those of the rows the tasks replayed."""
    return (
        outcome is not None
        and outcome.earlier is not None
        and bool(outcome.went_on)
        and frame in outcome.earlier.row_findings
    )


def earlier_findings(outcome: ReplayOutcome, frame: str, schema: T.StructType) -> DataFrame:
    """The frame's findings of the rows the run kept (every row it did not replay), from the kept replay."""
    log.debug(
        "frame %s: checked on the replayed rows, the findings of %d kept partition(s) kept", frame, len(outcome.went_on)
    )
    spark = outcome.replayed.sparkSession
    earlier = spark.read.schema(schema).parquet(outcome.earlier.row_findings[frame])
    went_on = spark.createDataFrame(outcome.went_on, "topic string, partition int")
    rewritten = (
        spark.read.parquet(*outcome.earlier.tails).select(
            "cluster_id", "topic", "partition", "broker_id", F.col("source_file").alias("segment"), "position"
        )
        if outcome.earlier.tails
        else None
    )
    kept = earlier.join(F.broadcast(went_on), ["topic", "partition"], "left_semi")
    if rewritten is not None:
        kept = kept.join(F.broadcast(rewritten), ROW, "left_anti")
    return kept.select(*schema.fieldNames())


def keep(keeping: Keeping | None, scratch: Scratch, frames: list[str]) -> None:
    """Write the manifest of the run's replay, with the findings of its row- and coordinator-local `frames` copied
    beside it."""
    if keeping is None or keeping.outcome is None:
        return
    kept = keeping.outcome.kept
    for frame in frames:
        name = f"findings/frame={frame}"
        if scratch.has(name):
            target = f"{keeping.folder}/{keeping.run_id}/findings-{frame}"
            scratch.read(name).write.mode("overwrite").parquet(target)
            kept.row_findings[frame] = target
    write_kept(keeping.folder, kept)
