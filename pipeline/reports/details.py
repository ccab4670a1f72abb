"""What the report page shows beyond summary.json: LSO lag, open transactions, durations, producers, a timeline.

Like the summary, every section is a Spark aggregate or a top-N list, so the driver holds a few hundred rows
whatever the size of the warehouse. The sections are plain dicts of numbers and strings for the renderers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pipeline.audit.state.partitions import abort_command
from pipeline.reports.gather import Query, Rows, Section, top
from pipeline.reports.run_rows import RunRows
from schemas.findings import SEVERITIES
from schemas.keys import REPLICA
from schemas.transactions import OUTCOME_OPEN

HANGING_RULE = "LSO-002"  # its findings name the open transactions a healthy coordinator would have aborted
# Decade buckets of transaction durations: bucket i holds [10^(i-1), 10^i) ms, bucket 0 holds 0 ms.
DURATION_BUCKETS = ("0 ms", "1-9 ms", "10-99 ms", "0.1-1 s", "1-10 s", "10-100 s", "100-1000 s", ">= 1000 s")
TIMELINE_BINS = 40


def detail_sections(rows: RunRows, top_n: int) -> dict[str, Section]:
    """The page's sections beyond summary.json."""
    return {
        "lso": lso_section(rows.partitions, top_n),
        "open_transactions": open_transactions_section(rows.transactions, rows.findings, top_n),
        "durations": durations_section(rows.transactions),
        "producers": producers_section(rows.partitions, top_n),
        "timeline": timeline_section(rows.batches, rows.findings),
    }


def lso_section(partitions: DataFrame, top_n: int) -> Section:
    """Partitions whose last stable offset trails the log end: how far read_committed consumers lag behind."""

    def shape(rows: Mapping[str, Rows]) -> dict[str, Any]:
        (totals,) = rows["totals"]
        return {**{k: int(v) for k, v in totals.items()}, "worst": rows["worst"]}

    lagging = partitions.withColumn(
        "lso_lag", F.coalesce(F.col("log_end_offset") - F.col("last_stable_offset"), F.lit(0))
    ).where(F.col("lso_lag") > 0)
    totals = lagging.agg(
        F.count(F.lit(1)).alias("lagging_partitions"), F.coalesce(F.max("lso_lag"), F.lit(0)).alias("max_lag")
    )
    listed = lagging.select(
        *REPLICA, "log_end_offset", "last_stable_offset", "lso_lag", "open_transactions", "hanging_transactions"
    )
    worst_first = (F.col("lso_lag").desc(), *[F.col(c).asc_nulls_last() for c in REPLICA])
    return Section({"totals": Query(totals), "worst": top(listed, worst_first, top_n)}, shape)


def open_transactions_section(transactions: DataFrame, findings: DataFrame, top_n: int) -> Section:
    """Open transactions, hanging ones (an LSO-002 finding at their start offset) first, with why they have no
    marker (`cause`) and the abort command."""

    def shape(rows: Mapping[str, Rows]) -> dict[str, Any]:
        (totals,) = rows["totals"]
        return {"open": int(totals["open"]), "hanging": int(totals["hanging"]), "listed": rows["listed"]}

    hanging = (
        findings.where(F.col("rule_code") == HANGING_RULE)
        .select(*REPLICA, "producer_id", F.col("base_offset").alias("first_offset"), F.lit(True).alias("hanging"))
        .distinct()
    )
    keys = [*REPLICA, "producer_id", "first_offset"]
    open_rows = (
        transactions.where(F.col("outcome") == OUTCOME_OPEN)
        .join(hanging, on=_null_safe(transactions, hanging, keys), how="left")
        .select(*[transactions[c] for c in keys], "producer_epoch", "last_offset", "end_timestamp", "cause", "hanging")
        .withColumn("hanging", F.coalesce(F.col("hanging"), F.lit(False)))
        .withColumn("abort_command", abort_command(F.col("topic"), F.col("partition"), F.col("first_offset")))
    )
    totals = open_rows.agg(F.count(F.lit(1)).alias("open"), F.count_if(F.col("hanging")).alias("hanging"))
    hanging_first = (
        F.col("hanging").desc(),
        F.col("end_timestamp").asc_nulls_first(),
        *[F.col(c).asc_nulls_last() for c in keys],
    )
    return Section({"totals": Query(totals), "listed": top(open_rows, hanging_first, top_n)}, shape)


def durations_section(transactions: DataFrame) -> Section:
    """Transactions per outcome and decade of duration (first batch to marker, or to the last batch when open)."""

    def shape(rows: Mapping[str, Rows]) -> dict[str, Any]:
        by_outcome: dict[str, list[int]] = {}
        for row in rows["counts"]:
            by_outcome.setdefault(row["outcome"], [0] * len(DURATION_BUCKETS))[row["bucket"]] += row["count"]
        return {"buckets": list(DURATION_BUCKETS), "by_outcome": dict(sorted(by_outcome.items()))}

    bucket = F.when(F.col("duration_ms") <= 0, F.lit(0)).otherwise(
        F.least(F.floor(F.log10(F.col("duration_ms"))).cast("int") + 1, F.lit(len(DURATION_BUCKETS) - 1))
    )
    counts = transactions.where(F.col("duration_ms").isNotNull()).groupBy(bucket.alias("bucket"), "outcome").count()
    return Section({"counts": Query(counts)}, shape)


def producers_section(partitions: DataFrame, top_n: int) -> Section:
    """How many partitions have how many producers (power-of-two buckets), and the busiest partitions."""

    def shape(rows: Mapping[str, Rows]) -> dict[str, Any]:
        counts = {row["bucket"]: row["count"] for row in rows["counts"]}
        return {
            "distribution": [  # empty buckets included, so that the bars read as a histogram
                {"producers": _power_bucket(b), "partitions": counts.get(b, 0)}
                for b in range(max(counts, default=-1) + 1)
            ],
            "busiest": rows["busiest"],
        }

    bucket = F.when(F.col("producer_count") <= 0, F.lit(0)).otherwise(
        F.floor(F.log2(F.col("producer_count"))).cast("int") + 1
    )
    busiest_first = (F.col("producer_count").desc(), *[F.col(c).asc_nulls_last() for c in REPLICA])
    return Section(
        {
            "counts": Query(partitions.groupBy(bucket.alias("bucket")).count()),
            "busiest": top(partitions.select(*REPLICA, "producer_count", "batch_count"), busiest_first, top_n),
        },
        shape,
    )


def timeline_section(batches: DataFrame, findings: DataFrame, bins: int = TIMELINE_BINS) -> Section:
    """Epoch bumps and findings per time bin, placed by the max timestamp of the batch they concern.

    A bump is the first batch of a producer id in a partition with an epoch above the lowest it wrote there.
    Findings without an offset, or whose batch has no timestamp, are counted apart as `untimed`. The bins are
    cut from the span in the same job (a join with its one row), not from a span collected first.
    """

    def shape(rows: Mapping[str, Rows]) -> dict[str, Any]:
        (span,) = rows["span"]
        if span["start"] is None:
            return {"start_ms": None, "end_ms": None, "bins": 0, "bumps": [], "findings": {}, "untimed": 0}
        bump_counts = [0] * bins
        for row in rows["bumps"]:
            bump_counts[row["bin"]] = row["count"]
        finding_counts: dict[str, list[int]] = {}
        untimed = 0
        for row in rows["findings"]:
            if row["bin"] is None:
                untimed += row["count"]
            else:
                finding_counts.setdefault(row["severity"], [0] * bins)[row["bin"]] += row["count"]
        return {
            "start_ms": int(span["start"]),
            "end_ms": int(span["end"]),
            "bins": bins,
            "bumps": bump_counts,
            "findings": {s: finding_counts[s] for s in reversed(SEVERITIES) if s in finding_counts},
            "untimed": untimed,
        }

    timed = batches.where(F.col("max_timestamp") >= 0)
    span = timed.agg(F.min("max_timestamp").alias("start"), F.max("max_timestamp").alias("end"))
    cut = span.select(
        F.col("start").alias("_start"),
        F.greatest((F.col("end") - F.col("start") + F.lit(1)) / F.lit(bins), F.lit(1.0)).alias("_width"),
    )

    def bin_of(timestamp: Column) -> Column:
        return F.least(F.floor((timestamp - F.col("_start")) / F.col("_width")).cast("int"), F.lit(bins - 1))

    first_of_epoch = (
        timed.where(F.col("producer_id") >= 0)
        .groupBy("cluster_id", "topic", "partition", "producer_id", "producer_epoch")
        .agg(F.min("max_timestamp").alias("seen_at"))
    )
    lowest_first = Window.partitionBy("cluster_id", "topic", "partition", "producer_id").orderBy("producer_epoch")
    bumps = (
        first_of_epoch.withColumn("nth", F.row_number().over(lowest_first))
        .where(F.col("nth") > 1)
        .crossJoin(cut)
        .groupBy(bin_of(F.col("seen_at")).alias("bin"))
        .count()
    )
    batch = ["cluster_id", "topic", "partition", "base_offset"]
    # Only the batches the findings name are grouped (a semi join with their keys, which Spark broadcasts when
    # small): a group per batch of the whole table took most of a 10 M run's report.
    named = timed.join(findings.select(*batch).distinct(), on=batch, how="left_semi")
    batch_times = named.groupBy(*batch).agg(F.min("max_timestamp").alias("at"))
    placed = (
        findings.join(batch_times, on=batch, how="left")
        .crossJoin(cut)
        .groupBy(F.when(F.col("at").isNotNull(), bin_of(F.col("at"))).alias("bin"), "severity")
        .count()
    )
    return Section({"span": Query(span), "bumps": Query(bumps), "findings": Query(placed)}, shape)


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
