"""What the report page shows beyond summary.json: LSO lag, open transactions, durations, producers, a timeline.

Like the summary, every section is a Spark aggregate or a top-N list, so the driver holds a few hundred rows
whatever the size of the warehouse. The sections are plain dicts of numbers and strings for the renderers.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

import schemas
from pipeline.audit.registry import SEVERITIES
from pipeline.audit.visibility import abort_command
from pipeline.parallel import side_by_side
from pipeline.tables.store import TableStore
from schemas.batches import STATUS_OK
from schemas.transactions import OUTCOME_OPEN

HANGING_RULE = "LSO-002"  # its findings name the open transactions a healthy coordinator would have aborted
# Decade buckets of transaction durations: bucket i holds [10^(i-1), 10^i) ms, bucket 0 holds 0 ms.
DURATION_BUCKETS = ("0 ms", "1-9 ms", "10-99 ms", "0.1-1 s", "1-10 s", "10-100 s", "100-1000 s", ">= 1000 s")
TIMELINE_BINS = 40
TP = ["cluster_id", "topic", "partition", "broker_id"]


def build_details(
    store: TableStore, run_id: str, top_n: int, versions: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """The page's sections for the rows of `run_id`, read at the table versions the run published."""
    versions = versions or {}

    def rows_of_run(table: str, schema: Any) -> DataFrame:
        return store.read(table, schema=schema, version=versions.get(table)).where(F.col("run_id") == run_id)

    findings = rows_of_run("findings", schemas.FINDINGS)
    transactions = rows_of_run("transactions", schemas.TRANSACTIONS)
    partitions = rows_of_run("partition_summary", schemas.PARTITION_SUMMARY)
    batches = store.read("batches", schema=schemas.BATCHES, version=versions.get("batches")).where(
        F.col("entry_status") == STATUS_OK
    )
    return side_by_side(
        {
            "lso": partial(lso_section, partitions, top_n),
            "open_transactions": partial(open_transactions_section, transactions, findings, top_n),
            "durations": partial(durations_section, transactions),
            "producers": partial(producers_section, partitions, top_n),
            "timeline": partial(timeline_section, batches, findings),
        }
    )


def lso_section(partitions: DataFrame, top_n: int) -> dict[str, Any]:
    """Partitions whose last stable offset trails the log end: how far read_committed consumers lag behind."""
    lagging = partitions.withColumn(
        "lso_lag", F.coalesce(F.col("log_end_offset") - F.col("last_stable_offset"), F.lit(0))
    ).where(F.col("lso_lag") > 0)
    totals = lagging.agg(
        F.count(F.lit(1)).alias("lagging_partitions"), F.coalesce(F.max("lso_lag"), F.lit(0)).alias("max_lag")
    ).first()
    worst = (
        lagging.orderBy(F.col("lso_lag").desc(), *[F.col(c).asc_nulls_last() for c in TP])
        .select(
            *TP,
            "log_end_offset",
            "last_stable_offset",
            "lso_lag",
            "open_transactions",
            "hanging_transactions",
        )
        .limit(top_n)
        .collect()
    )
    return {**{k: int(v) for k, v in totals.asDict().items()}, "worst": [row.asDict() for row in worst]}


def open_transactions_section(transactions: DataFrame, findings: DataFrame, top_n: int) -> dict[str, Any]:
    """Open transactions, hanging ones (an LSO-002 finding at their start offset) first, with why they have no
    marker (`cause`) and the abort command."""
    hanging = (
        findings.where(F.col("rule_code") == HANGING_RULE)
        .select(*TP, "producer_id", F.col("base_offset").alias("first_offset"), F.lit(True).alias("hanging"))
        .distinct()
    )
    keys = [*TP, "producer_id", "first_offset"]
    open_rows = (
        transactions.where(F.col("outcome") == OUTCOME_OPEN)
        .join(hanging, on=_null_safe(transactions, hanging, keys), how="left")
        .select(*[transactions[c] for c in keys], "producer_epoch", "last_offset", "end_timestamp", "cause", "hanging")
        .withColumn("hanging", F.coalesce(F.col("hanging"), F.lit(False)))
        .withColumn("abort_command", abort_command(F.col("topic"), F.col("partition"), F.col("first_offset")))
    )
    totals = open_rows.agg(F.count(F.lit(1)).alias("open"), F.count_if(F.col("hanging")).alias("hanging")).first()
    listed = (
        open_rows.orderBy(
            F.col("hanging").desc(),
            F.col("end_timestamp").asc_nulls_first(),
            *[F.col(c).asc_nulls_last() for c in keys],
        )
        .limit(top_n)
        .collect()
    )
    return {"open": int(totals["open"]), "hanging": int(totals["hanging"]), "listed": [r.asDict() for r in listed]}


def durations_section(transactions: DataFrame) -> dict[str, Any]:
    """Transactions per outcome and decade of duration (first batch to marker, or to the last batch when open)."""
    bucket = F.when(F.col("duration_ms") <= 0, F.lit(0)).otherwise(
        F.least(F.floor(F.log10(F.col("duration_ms"))).cast("int") + 1, F.lit(len(DURATION_BUCKETS) - 1))
    )
    counts = (
        transactions.where(F.col("duration_ms").isNotNull())
        .groupBy(bucket.alias("bucket"), "outcome")
        .count()
        .collect()
    )
    by_outcome: dict[str, list[int]] = {}
    for row in counts:
        by_outcome.setdefault(row.outcome, [0] * len(DURATION_BUCKETS))[row.bucket] += row["count"]
    return {"buckets": list(DURATION_BUCKETS), "by_outcome": dict(sorted(by_outcome.items()))}


def producers_section(partitions: DataFrame, top_n: int) -> dict[str, Any]:
    """How many partitions have how many producers (power-of-two buckets), and the busiest partitions."""
    bucket = F.when(F.col("producer_count") <= 0, F.lit(0)).otherwise(
        F.floor(F.log2(F.col("producer_count"))).cast("int") + 1
    )
    counts = {row.bucket: row["count"] for row in partitions.groupBy(bucket.alias("bucket")).count().collect()}
    busiest = (
        partitions.orderBy(F.col("producer_count").desc(), *[F.col(c).asc_nulls_last() for c in TP])
        .select(*TP, "producer_count", "batch_count")
        .limit(top_n)
        .collect()
    )
    return {
        "distribution": [  # empty buckets included, so that the bars read as a histogram
            {"producers": _power_bucket(b), "partitions": counts.get(b, 0)} for b in range(max(counts, default=-1) + 1)
        ],
        "busiest": [row.asDict() for row in busiest],
    }


def timeline_section(batches: DataFrame, findings: DataFrame, bins: int = TIMELINE_BINS) -> dict[str, Any]:
    """Epoch bumps and findings per time bin, placed by the max timestamp of the batch they concern.

    A bump is the first batch of a producer id in a partition with an epoch above the lowest it wrote there.
    Findings without an offset, or whose batch has no timestamp, are counted apart as `untimed`.
    """
    timed = batches.where(F.col("max_timestamp") >= 0)
    span = timed.agg(F.min("max_timestamp").alias("start"), F.max("max_timestamp").alias("end")).first()
    if span["start"] is None:
        return {"start_ms": None, "end_ms": None, "bins": 0, "bumps": [], "findings": {}, "untimed": 0}
    start, end = int(span["start"]), int(span["end"])
    width = max((end - start + 1) / bins, 1.0)

    def bin_of(timestamp: Column) -> Column:
        return F.least(F.floor((timestamp - F.lit(start)) / F.lit(width)).cast("int"), F.lit(bins - 1))

    first_of_epoch = (
        timed.where(F.col("producer_id") >= 0)
        .groupBy("cluster_id", "topic", "partition", "producer_id", "producer_epoch")
        .agg(F.min("max_timestamp").alias("seen_at"))
    )
    lowest_first = Window.partitionBy("cluster_id", "topic", "partition", "producer_id").orderBy("producer_epoch")
    bumps = (
        first_of_epoch.withColumn("nth", F.row_number().over(lowest_first))
        .where(F.col("nth") > 1)
        .groupBy(bin_of(F.col("seen_at")).alias("bin"))
        .count()
        .collect()
    )
    batch = ["cluster_id", "topic", "partition", "base_offset"]
    # Only the batches the findings name are grouped (a semi join with their keys, which Spark broadcasts when
    # small): a group per batch of the whole table took most of a 10 M run's report.
    named = timed.join(findings.select(*batch).distinct(), on=batch, how="left_semi")
    batch_times = named.groupBy(*batch).agg(F.min("max_timestamp").alias("at"))
    placed = (
        findings.join(batch_times, on=batch, how="left")
        .groupBy(F.when(F.col("at").isNotNull(), bin_of(F.col("at"))).alias("bin"), "severity")
        .count()
        .collect()
    )
    bump_counts = [0] * bins
    for row in bumps:
        bump_counts[row.bin] = row["count"]
    finding_counts: dict[str, list[int]] = {}
    untimed = 0
    for row in placed:
        if row.bin is None:
            untimed += row["count"]
        else:
            finding_counts.setdefault(row.severity, [0] * bins)[row.bin] += row["count"]
    ordered = {s: finding_counts[s] for s in reversed(SEVERITIES) if s in finding_counts}
    return {
        "start_ms": start,
        "end_ms": end,
        "bins": bins,
        "bumps": bump_counts,
        "findings": ordered,
        "untimed": untimed,
    }


def _power_bucket(bucket: int) -> str:
    if bucket == 0:
        return "0"
    low, high = 2 ** (bucket - 1), 2**bucket - 1
    return str(low) if low == high else f"{low}-{high}"


def _null_safe(left: DataFrame, right: DataFrame, keys: list[str]) -> Column:
    condition = F.lit(True)
    for key in keys:
        condition = condition & left[key].eqNullSafe(right[key])
    return condition
