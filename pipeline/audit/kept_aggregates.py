"""Aggregates over the replay kept in parts that merge, so that a run that went on from a kept replay aggregates only
the rows it replayed.

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
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.audit.replay_files import Keeping, ReplayOutcome
from pipeline.audit.scratch import Scratch

log = logging.getLogger(__name__)

# where a replay row is, as the kept tails say it
LOCATION = ["cluster_id", "topic", "partition", "broker_id", "source_file", "position"]
PARTITION = ["topic", "partition"]


@dataclass(frozen=True)
class Part:
    """One column of an aggregate: `how` is sum, count, min, max, any (one value shared by all the rows), or
    first / last, the value at the row with the lowest / highest `order` (rows whose order is null are skipped)."""

    name: str
    how: str
    value: Column
    order: Column | None = None


@dataclass(frozen=True)
class Mergeable:
    """An aggregate of the replay's rows where `rows` holds, by `keys`, in parts that merge."""

    name: str
    keys: tuple[str, ...]
    parts: tuple[Part, ...]
    rows: Column | None = None  # all of them

    def of(self, replay: DataFrame) -> DataFrame:
        """The parts over `replay`'s rows: a first or last value carries its order as `<name>_at`."""
        columns = []
        for part in self.parts:
            if part.how in ("first", "last"):
                pick, extreme = (F.min_by, F.min) if part.how == "first" else (F.max_by, F.max)
                columns += [pick(part.value, part.order).alias(part.name), extreme(part.order).alias(f"{part.name}_at")]
            else:
                columns.append(_OVER_ROWS[part.how](part.value).alias(part.name))
        rows = replay if self.rows is None else replay.where(self.rows)
        return rows.groupBy(*self.keys).agg(*columns)

    def merged(self, parts: DataFrame) -> DataFrame:
        """Parts of the same keys merged into one row each."""
        columns = []
        for part in self.parts:
            if part.how in ("first", "last"):
                pick, extreme = (F.min_by, F.min) if part.how == "first" else (F.max_by, F.max)
                at = f"{part.name}_at"
                columns += [pick(part.name, at).alias(part.name), extreme(at).alias(at)]
            else:
                columns.append(_OVER_PARTS[part.how](part.name).alias(part.name))
        return parts.groupBy(*self.keys).agg(*columns)


_OVER_ROWS = {"sum": F.sum, "count": F.count, "min": F.min, "max": F.max, "any": F.first}
_OVER_PARTS = {"sum": F.sum, "count": F.sum, "min": F.min, "max": F.max, "any": F.first}


def kept_parts(aggregate: Mergeable, replay: DataFrame, scratch: Scratch, keeping: Keeping | None) -> DataFrame:
    """The parts of `aggregate` over every row of `replay`, written to the scratch table `parts/<name>` (which the
    run keeps: `keep_parts`). When the replay went on from a kept one that holds them, only the rows it replayed
    are aggregated, and merged with the kept parts of the partitions that went on."""
    outcome = keeping.outcome if keeping is not None else None
    name = f"parts/{aggregate.name}"
    if not _kept_for(outcome, aggregate.name):
        return scratch.materialise(aggregate.of(replay), name)
    log.info(
        "aggregate %s: over the replayed rows, merged with the kept parts of %d partition(s)",
        aggregate.name,
        len(outcome.went_on),
    )
    spark = replay.sparkSession
    went_on = F.broadcast(spark.createDataFrame(outcome.went_on, "topic string, partition int"))
    earlier = spark.read.parquet(outcome.earlier.aggregates[aggregate.name]).join(went_on, PARTITION, "left_semi")
    added = aggregate.of(_added_rows(outcome, went_on))
    return scratch.materialise(aggregate.merged(added.unionByName(earlier)), name)


def keep_parts(keeping: Keeping | None, scratch: Scratch) -> None:
    """Move the parts the run aggregated beside its replay and name them in its manifest (written after this)."""
    if keeping is None or keeping.outcome is None:
        return
    for name in scratch.names("parts/"):
        aggregate = name.removeprefix("parts/")
        target = f"{keeping.folder}/{keeping.run_id}/parts-{aggregate}"
        scratch.move(name, target)
        keeping.outcome.kept.aggregates[aggregate] = target


def _kept_for(outcome: ReplayOutcome | None, aggregate: str) -> bool:
    return outcome is not None and outcome.earlier is not None and aggregate in outcome.earlier.aggregates


def _added_rows(outcome: ReplayOutcome, went_on: DataFrame) -> DataFrame:
    """The rows the replay wrote but the kept last rows of the partitions that went on, which it wrote again."""
    if not outcome.earlier.tails:
        return outcome.replayed
    spark = outcome.replayed.sparkSession
    again = spark.read.parquet(*outcome.earlier.tails).select(*LOCATION).join(went_on, PARTITION, "left_semi")
    return outcome.replayed.join(F.broadcast(again), LOCATION, "left_anti")
