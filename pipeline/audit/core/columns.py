"""Small column helpers shared by the rule modules: sequence arithmetic and finding structs."""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.window import WindowSpec

from pipeline.audit.core import expr as E
from pipeline.audit.core.expr import Expr
from pipeline.audit.core.registry import Fires, Rule
from schemas.findings import FINDING_FIELDS

INT32_MAX = 2_147_483_647
SEQ_SPAN = INT32_MAX + 1  # sequences wrap from Integer.MAX_VALUE to 0


def next_sequence(last_sequence: Expr) -> Expr:
    """DefaultRecordBatch.incrementSequence(last, 1): the sequence that must follow `last`."""
    return E.when(last_sequence == E.lit(INT32_MAX), E.lit(0)).otherwise(last_sequence + 1)


def as_text(column: Column) -> Column:
    return F.coalesce(column.cast("string"), F.lit("null"))


# The finding columns every frame row carries itself, by the row column they come from. They stay beside the
# findings array instead of inside each check's struct, so a frame's plan holds them once, not once per check.
LOCATION = {
    "topic": "topic",
    "partition": "partition",
    "producer_id": "producer_id",
    "base_offset": "base_offset",
    "last_offset": "last_offset",
    "segment": "source_file",
    "position": "position",
    "broker_id": "broker_id",
    "cluster_id": "cluster_id",
}


def _finding_column(rule: Rule, fires: Fires, row_epoch: Column) -> Column:
    """The check's part of a finding when it fires, else null: rule, severity, epoch, message and evidence."""
    evidence_map = F.create_map(
        *[item for key, value in fires.evidence.items() for item in (F.lit(key), as_text(value))]
    ).cast("map<string,string>")  # an empty map is map<void,void> otherwise
    struct = F.struct(
        F.lit(rule.code).alias("rule_code"),
        F.lit(rule.name).alias("rule_name"),
        (fires.severity if fires.severity is not None else F.lit(rule.severity)).alias("severity"),
        (fires.producer_epoch if fires.producer_epoch is not None else row_epoch).alias("producer_epoch"),
        fires.message.alias("message"),
        evidence_map.alias("evidence"),
    )
    return F.when(fires.when, struct)


def spark_fires(fires: Fires) -> Fires:
    """A check's `Fires` as Spark columns: those written as row expressions (pipeline.audit.core.expr) converted."""

    def column(part: Column | Expr | None) -> Column | None:
        return part.column() if isinstance(part, Expr) else part

    return Fires(
        column(fires.when),
        column(fires.message),
        {key: column(value) for key, value in fires.evidence.items()},
        column(fires.severity),
        column(fires.producer_epoch),
    )


def explode_findings(df, checks: list[tuple[Rule, Fires]]):
    """One pass over `df`: keep the rows some check fires on, then build and explode their findings.

    The rows are filtered first on the plain conditions, which Spark compiles into the scan's code; the findings
    array is built with a higher-order function, which Spark interprets, so it is only built for the few rows that
    fire. Empty arrays are dropped after the explode, never by a filter on the array's size before it: the optimizer
    would push that filter down into the conditions' filter, and a filter holding an interpreted expression leaves
    whole-stage code, so every row of the frame would be copied out of the scan's columns and tested row by row
    (twice the CPU of the `batches` frame at 10 M batches). The outer explode keeps the optimizer from adding one
    more filter holding a copy of the whole array expression (InferFiltersFromGenerate).
    """
    if not checks:
        raise ValueError("no checks given")
    checks = [(rule, spark_fires(fires)) for rule, fires in checks]
    fires_any = reduce(lambda a, b: a | b, [F.coalesce(fires.when, F.lit(False)) for _, fires in checks])
    row_epoch = F.col("producer_epoch")
    findings = [_finding_column(rule, fires, row_epoch) for rule, fires in checks]
    fired = F.filter(F.array(*findings), lambda item: item.isNotNull())
    located = [F.col(source).alias(name) for name, source in LOCATION.items()]
    return (
        df.where(fires_any)
        .select(*located, F.explode_outer(fired).alias("finding"))
        .where(F.col("finding").isNotNull())
        .select(*[name if name in LOCATION else F.col(f"finding.{name}").alias(name) for name in FINDING_FIELDS])
    )


def window_cleared(counted: Column | None = None, over: WindowSpec | None = None) -> Column:
    """An aggregate over a producer's replayed rows (those where `counted` holds; with `over`, a running value over
    that window's rows): whether its duplicate window is empty after them because the last row that touched it
    was a marker that changed the producer's epoch.

    `ProducerAppendInfo.appendEndTxnMarker` calls `maybeUpdateProducerEpoch`, which clears the batch window when
    the epoch changes (spec §2.7, §6.0 step 3): after a fence or timeout abort (V1) and after every V2 marker the
    broker's entry, its snapshot and DescribeProducers hold no last batch (sequence -1, offset -1, delta 0).
    """
    counted = F.lit(True) if counted is None else counted
    last_data = F.max(F.when(counted & accepted_data().column(), F.col("base_offset")))
    last_bump = F.max(F.when(counted & epoch_bumping_marker().column(), F.col("base_offset")))
    if over is not None:
        last_data, last_bump = last_data.over(over), last_bump.over(over)
    return cleared_after(last_data, last_bump)


def accepted_data() -> Expr:
    """A data batch the broker appended at the producer's current epoch: it enters the duplicate window."""
    return E.col("is_data") & (E.col("producer_epoch") == E.col("epoch_run"))


def epoch_bumping_marker() -> Expr:
    """A marker that changed the producer's epoch: it clears the duplicate window (`window_cleared`)."""
    return E.col("is_marker") & (E.col("state_epoch").isNull() | (E.col("producer_epoch") > E.col("state_epoch")))


def cleared_after(last_data: Column, last_bump: Column) -> Column:
    """Whether the window is empty after the rows whose last accepted data batch and last epoch-bumping marker are
    at these offsets."""
    return last_bump.isNotNull() & (last_data.isNull() | (last_bump > last_data))
