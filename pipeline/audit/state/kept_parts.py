"""Aggregates of the replay kept beside it in parts that merge, so that a run that went on from a kept replay
aggregates only the rows it replayed.

An aggregate whose every column is a sum, count, minimum or maximum, or the value at the first or last row in an
order, can be taken over some of its rows and the results merged: the merge of the parts of the kept rows with the
parts of the added ones is the aggregate of all of them. A replay that goes on (pipeline.audit.replay.kept) gives
every kept row what a whole replay gives it, and its tasks aggregate only the rows they walk, not the kept last rows
they write again with their next entry (which no part reads); so the parts a run keeps beside its replay, for the
partitions that went on, merged with the parts its tasks took, are the parts of the whole replay. The key of an
aggregate must hold what a partition replayed whole may change (the transaction version: a partition where a
producer's changes is replayed whole), and a "first"/"last" order must be the rows' offsets, which the appended
rows continue.
"""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core.mergeable import Mergeable
from pipeline.audit.core.scratch import Scratch
from pipeline.audit.replay.files import Keeping, ReplayOutcome
from pipeline.audit.replay.task_outputs import parts_table

log = logging.getLogger(__name__)

PARTITION = ["topic", "partition"]


def kept_parts(aggregate: Mergeable, scratch: Scratch, keeping: Keeping | None) -> DataFrame | None:
    """When the replay went on from a kept one that holds `aggregate`'s parts: the parts the replay's tasks took of
    the rows they replayed (pipeline.audit.replay.task_outputs) merged with the kept parts of the partitions that went
    on, to write as its parts table. None otherwise: the tasks' parts are the aggregate's, every partition's rows
    replayed in one task."""
    outcome = keeping.outcome if keeping is not None else None
    table = parts_table(aggregate)
    if not _kept_for(outcome, table):
        return None
    log.debug(
        "aggregate %s: over the replayed rows, merged with the kept parts of %d partition(s)",
        aggregate.name,
        len(outcome.went_on),
    )
    spark = scratch.spark
    went_on = F.broadcast(spark.createDataFrame(outcome.went_on, "topic string, partition int"))
    earlier = spark.read.parquet(outcome.earlier.tables[table]).join(went_on, PARTITION, "left_semi")
    return aggregate.merged(scratch.read(table).unionByName(earlier))


def keep_tables(keeping: Keeping | None, scratch: Scratch, names: list[str]) -> None:
    """Move the tables `names` the run made (those it wrote) beside its replay and name them in its manifest
    (written after this)."""
    if keeping is None or keeping.outcome is None:
        return
    for name in names:
        if scratch.has(name):
            target = f"{keeping.folder}/{keeping.run_id}/{name.replace('/', '-')}"
            scratch.move(name, target)
            keeping.outcome.kept.tables[name] = target


def _kept_for(outcome: ReplayOutcome | None, table: str) -> bool:
    return (
        outcome is not None
        and outcome.earlier is not None
        and bool(outcome.went_on)
        and table in outcome.earlier.tables
    )
