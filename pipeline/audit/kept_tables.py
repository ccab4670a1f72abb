"""Aggregates of the replay kept beside it in parts that merge, so that a run that went on from a kept replay
aggregates only the rows it replayed.

An aggregate whose every column is a sum, count, minimum or maximum, or the value at the first or last row in an
order, can be taken over some of its rows and the results merged: the merge of the parts of the kept rows with the
parts of the added ones is the aggregate of all of them. A replay that goes on (pipeline.audit.kept_replay) gives
every kept row what a whole replay gives it, and writes again only the kept last rows of the replicas (with their
next entry, which no part reads); so the parts a run keeps beside its replay, for the partitions that went on,
merged with the parts of the rows it replayed but those, are the parts of the whole replay. The key of an
aggregate must hold what a partition replayed whole may change (the transaction version: a partition where a
producer's changes is replayed whole), and a "first"/"last" order must be the rows' offsets, which the appended
rows continue.
"""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core.mergeable import Mergeable
from pipeline.audit.replay_files import Keeping, ReplayOutcome
from pipeline.audit.scratch import Scratch

log = logging.getLogger(__name__)

# where a replay row is, as the kept tails say it
LOCATION = ["cluster_id", "topic", "partition", "broker_id", "source_file", "position"]
PARTITION = ["topic", "partition"]


def parts_table(aggregate: Mergeable) -> str:
    """The scratch table a run writes `aggregate`'s parts to, and keeps (`keep_tables`)."""
    return f"parts/{aggregate.name}"


def kept_parts(aggregate: Mergeable, replay: DataFrame, keeping: Keeping | None) -> DataFrame:
    """The parts of `aggregate` over every row of `replay`, to write as `parts_table`. When the replay went on
    from a kept one that holds them, only the rows it replayed are aggregated, and merged with the kept parts of
    the partitions that went on."""
    outcome = keeping.outcome if keeping is not None else None
    table = parts_table(aggregate)
    if not _kept_for(outcome, table):
        return aggregate.of(replay)
    log.info(
        "aggregate %s: over the replayed rows, merged with the kept parts of %d partition(s)",
        aggregate.name,
        len(outcome.went_on),
    )
    went_on = _went_on(outcome)
    earlier = replay.sparkSession.read.parquet(outcome.earlier.tables[table]).join(went_on, PARTITION, "left_semi")
    return aggregate.merged(aggregate.of(_added_rows(outcome, went_on)).unionByName(earlier))


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
    return outcome is not None and outcome.earlier is not None and table in outcome.earlier.tables


def _went_on(outcome: ReplayOutcome) -> DataFrame:
    spark = outcome.replayed.sparkSession
    return F.broadcast(spark.createDataFrame(outcome.went_on, "topic string, partition int"))


def _added_rows(outcome: ReplayOutcome, went_on: DataFrame) -> DataFrame:
    """The rows the replay wrote but the kept last rows of the partitions that went on, which it wrote again."""
    if not outcome.earlier.tails:
        return outcome.replayed
    tails = outcome.replayed.sparkSession.read.parquet(*outcome.earlier.tails)
    again = tails.select(*LOCATION).join(went_on, PARTITION, "left_semi")
    return outcome.replayed.join(F.broadcast(again), LOCATION, "left_anti")
