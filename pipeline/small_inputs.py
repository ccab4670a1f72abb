"""Spark settings for small runs: expressions interpreted, plans not re-optimised while they run.

On a small input a run's cost is the JVM's work per plan, not per row (docs/engine.md): generating and
compiling Java code for every stage of some fifty small plans, and adaptive execution planning each stage again
once the one before it ran. Up to `spark.small_input_batches` batches (50,000 by default, 0 turns it off) the
ingest, the audit and the report run with expressions interpreted and without adaptive execution, with one
shuffle partition per core; above it Spark's own settings stay, where compiled code pays for itself
(BENCHMARKS.md measures both). The ingest is sized before anything is decoded, by an upper bound from the input
listing (`InputPlan.most_entries`); the audit and report by the rows of `batches`. The settings are set on the
session for those steps only and put back after, so a session a notebook, spark-submit or a test suite brings
keeps its own for everything else.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

log = logging.getLogger(__name__)

INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
    # Every broadcast is a Spark job of its own (collect the small side, build it, send it), and without adaptive
    # execution each runs before its plan: a sample run's 80 jobs were 48 with joins by shuffle instead, at the
    # same wall time (BENCHMARKS.md). A join the code asks to broadcast (F.broadcast) still does, but those that ask
    # through `broadcast_unless_small`. With every hint off, the dump text's parity test once found offsets missing:
    # the replay joined the coordinator's transaction versions after its exchange by partition, and a shuffle join
    # spread a partition's rows over tasks by producer id. That join now comes before the exchange
    # (pipeline.audit.replay.plan); the other hints were not turned off.
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    # Interpreted, a scan can evaluate its dynamic pruning filter before the subquery that fills it has finished
    # ("IN dynamicpruning#... has not finished"); on a small input there is nothing to prune anyway.
    "spark.sql.optimizer.dynamicPartitionPruning.enabled": "false",
}
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
SMALL_INPUT = "spark.produceaudit.smallInput"  # set on the session while a small input's steps run


def broadcast_unless_small(side: DataFrame) -> DataFrame:
    """`side` hinted for a broadcast join, unless the session runs a small input, whose joins go by shuffle: there
    the broadcast would be a job of its own and spares no exchange of anything large. For the small sides Spark
    cannot size when it plans, where the other side is large (a row per partition against the batches)."""
    if side.sparkSession.conf.get(SMALL_INPUT, None) == "true":
        return side
    return F.broadcast(side)


def small_input_conf(spark: SparkSession) -> dict[str, str]:
    """The settings of a small audit in this session: interpreted, one shuffle partition per core."""
    return {**INTERPRETED, SHUFFLE_PARTITIONS: str(spark.sparkContext.defaultParallelism), SMALL_INPUT: "true"}


@contextmanager
def sized_for(spark: SparkSession, batches: int | None, small_input_batches: int) -> Iterator[bool]:
    """Run the block with the small-input settings when `batches` is at most `small_input_batches` (yields whether
    it does; None, a size not known, does not), and restore the session's own values after it."""
    small = batches is not None and small_input_batches > 0 and batches <= small_input_batches
    if not small:
        yield False
        return
    conf = small_input_conf(spark)
    previous = {key: spark.conf.get(key, None) for key in conf}
    log.debug("small input (at most %d batches): expressions interpreted, no adaptive execution", batches)
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield True
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
