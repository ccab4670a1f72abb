"""The coordinator's records of a run, and the `__transaction_state` partitions whose findings it takes over from the
kept replay.

A partition's coordinator records (pipeline.audit.replay.coordinator_records) are made from the rows of its audited
replica and its cleaner offset alone, and so are the findings of the frames that look at one partition's records only
(pipeline.audit.core.registry.Frame.coordinator_local); the settings and the audit's code, which they also depend on,
are in the kept replay's fingerprint. Deriving a partition's records is one task's pass over its files, so every run
derives them all; what a run keeps beside its replay is a digest of what each partition's were made from
(`coordinator_records.sources`, in the manifest) and those frames' findings. The next run takes the findings of every
partition whose digest it finds again, and checks the others.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from pyspark.sql import DataFrame

from pipeline.arrow_pass import ArrowPass
from pipeline.audit.core.scratch import Scratch
from pipeline.audit.replay.coordinator_records import audited_rows, exchanged_pass, records_pass, sources
from pipeline.audit.replay.files import Keeping
from pipeline.audit.replay.kept import CoordinatorOutcome
from pipeline.tables.files_per_partition import FileGroup
from schemas.keys import TP

log = logging.getLogger(__name__)

FACTS = "replica_facts"  # the scratch table of the audited replicas, when the replay's tasks read their files


def coordinator_records(
    transaction_log: DataFrame,
    audited: DataFrame,
    checkpoints: DataFrame | None,
    scratch: Scratch,
    keeping: Keeping | None,
    files: Sequence[FileGroup] | None,
) -> ArrowPass:
    """The pass that makes the audited coordinator records: its tasks read the `transaction_log` files of whole
    partitions (`files`) when the replay's tasks read theirs (the audited replicas are then `replica_facts`), else the
    rows are exchanged by partition. When the run keeps its replay, the partitions whose records are made from what
    the kept replay's were are noted in `keeping.coordinator`."""
    if not files or not scratch.has(FACTS):
        return exchanged_pass(audited_rows(transaction_log, audited, checkpoints))
    replicas = {
        (row["cluster_id"], row["topic"], row["partition"]): (row["broker_id"], row["cleaner_offset"])
        for row in scratch.small_rows(FACTS, ["cluster_id", "topic", "partition", "broker_id", "cleaner_offset"])
    }
    if keeping is not None and keeping.outcome is not None:
        _take_over(keeping, sources(files, replicas))
    return records_pass(transaction_log.sparkSession, files, replicas)


def _take_over(keeping: Keeping, made_from: dict[str, str]) -> None:
    """Keep the digests in the run's manifest, and note the partitions whose digest the kept replay holds too (none
    when it was made under other settings or code: `outcome.earlier` is None then)."""
    keeping.outcome.kept.coordinator_sources = made_from
    earlier = keeping.outcome.earlier
    if earlier is None or not earlier.coordinator_sources:
        return
    unchanged = [
        tuple(json.loads(key)) for key, digest in made_from.items() if earlier.coordinator_sources.get(key) == digest
    ]
    keeping.coordinator = CoordinatorOutcome(sorted(unchanged), earlier)
    log.debug("coordinator findings: %d partition(s) taken from the kept replay, the others checked", len(unchanged))


def changed_records(records: DataFrame, outcome: CoordinatorOutcome) -> DataFrame:
    """The records of the partitions whose findings are not taken over."""
    return records.join(outcome.partitions(records.sparkSession), on=TP, how="left_anti")


def has_findings(outcome: CoordinatorOutcome | None, frame: str) -> bool:
    """Whether partitions are taken over from a kept replay that holds the frame's findings."""
    return outcome is not None and frame in outcome.earlier.row_findings


def with_kept_findings(outcome: CoordinatorOutcome, frame: str, found: DataFrame) -> DataFrame:
    """`found`, the frame's findings of the partitions checked again, with those of the partitions taken from the
    kept replay, as it kept them."""
    spark = found.sparkSession
    earlier = spark.read.schema(found.schema).parquet(outcome.earlier.row_findings[frame])
    kept = earlier.join(outcome.partitions(spark), on=TP, how="left_semi")
    return found.unionByName(kept.select(*found.schema.fieldNames()))
