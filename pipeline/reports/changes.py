"""What changed since the previous published audit run: new, resolved and persisting findings.

The previous run's findings are read with Delta time travel, at the `findings` version that run published
(pipeline.tables.publication), so a later run that replaced its rows does not hide them. A finding is the
same in both runs when its rule, severity, place (cluster, topic, partition, broker, offsets) and producer are; the
message and the segment path are left out, since a log root moved elsewhere must not make every finding new.
The diff is a Spark join; only counts per rule and the first examples reach the driver.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

import schemas
from pipeline.reports.gather import Query, Rows, Section, gather
from pipeline.tables.publication import AUDIT_COMMANDS, RUNS_TABLE, STATUS_SUCCEEDED, PublishedRun
from pipeline.tables.store import TableStore
from schemas.findings import SEVERITIES

log = logging.getLogger(__name__)

IDENTITY = (
    "rule_code",
    "severity",
    "topic",
    "partition",
    "broker_id",
    "cluster_id",
    "producer_id",
    "producer_epoch",
    "base_offset",
    "last_offset",
)
STATUSES = ("new", "resolved", "persisting")
EXAMPLE_FIELDS = (*IDENTITY, "message")


def previous_audit_run(store: TableStore, run_id: str) -> PublishedRun | None:
    """The latest published audit run that finished before `run_id` started (before now while it runs)."""
    if not store.exists(RUNS_TABLE):
        return None
    runs = store.read(RUNS_TABLE, schema=schemas.RUNS)
    started = runs.where(F.col("run_id") == run_id).agg(F.min("started_at").alias("current_started_at"))
    row = (
        runs.crossJoin(started)
        .where(
            F.col("command").isin(*AUDIT_COMMANDS)
            & (F.col("status") == STATUS_SUCCEEDED)
            & (F.col("run_id") != run_id)
            & (F.col("current_started_at").isNull() | (F.col("finished_at") <= F.col("current_started_at")))
        )
        .orderBy(F.col("finished_at").desc(), F.col("run_id").desc())
        .select("run_id", "command", "table_versions")
        .first()
    )
    if row is None:
        return None
    versions = None if row.table_versions is None else {name: int(v) for name, v in row.table_versions.items()}
    return PublishedRun(row.run_id, row.command, versions)


def build_changes(store: TableStore, run_id: str, top_n: int, versions: dict[str, int] | None = None) -> dict[str, Any]:
    """The diff of run `run_id`'s findings against the previous published audit run's, or why there is none."""
    previous = previous_audit_run(store, run_id)
    if previous is None:
        return {"previous_run": None, "reason": "no earlier published audit run in this warehouse"}
    if previous.versions is None or "findings" not in previous.versions:
        return {"previous_run": previous.run_id, "reason": "the previous run recorded no table versions"}
    current = store.read("findings", schema=schemas.FINDINGS, version=(versions or {}).get("findings"))
    try:
        earlier = store.read("findings", schema=schemas.FINDINGS, version=previous.versions["findings"])
        diff = compare_findings(
            current.where(F.col("run_id") == run_id), earlier.where(F.col("run_id") == previous.run_id), top_n
        )
    except Exception as exc:  # a vacuum may have removed the old version's files: the page says so, the run goes on
        log.warning("findings of the previous run %s could not be read: %s", previous.run_id, exc)
        return {"previous_run": previous.run_id, "reason": f"its findings could not be read ({type(exc).__name__})"}
    return {"previous_run": previous.run_id, "reason": None, **diff}


def compare_findings(current: DataFrame, previous: DataFrame, top_n: int) -> dict[str, Any]:
    """Counts of new, resolved and persisting findings per rule and severity, and the worst new and resolved."""
    now = _identified(current).withColumnRenamed("message", "message_now")
    before = _identified(previous).select(
        F.col("identity").alias("identity_before"), F.col("message").alias("message_before")
    )
    joined = now.join(before, F.col("identity") == F.col("identity_before"), "full_outer")
    # A resolved finding's columns come from the previous run's identity struct.
    statused = joined.select(
        F.when(F.col("identity_before").isNull(), F.lit("new"))
        .when(F.col("identity").isNull(), F.lit("resolved"))
        .otherwise(F.lit("persisting"))
        .alias("status"),
        F.coalesce(F.col("identity"), F.col("identity_before")).alias("identity"),
        F.coalesce(F.col("message_now"), F.col("message_before")).alias("message"),
    ).select("status", "identity.*", "message")

    worst_first = Window.partitionBy("status").orderBy(
        _severity_rank().desc(), *[F.col(c).asc_nulls_last() for c in IDENTITY]
    )
    listed = (
        statused.where(F.col("status").isin("new", "resolved"))
        .withColumn("rank", F.row_number().over(worst_first))
        .where(F.col("rank") <= top_n)
        .select("status", "rank", *EXAMPLE_FIELDS)
    )
    counts = statused.groupBy("status", "rule_code", "severity").count()
    section = Section({"counts": Query(counts), "listed": Query(listed)}, _diff)
    return gather({"diff": section})["diff"]


def _diff(rows: Mapping[str, Rows]) -> dict[str, Any]:
    counts = {status: dict.fromkeys(SEVERITIES, 0) for status in STATUSES}
    by_rule: dict[str, dict[str, int]] = {}
    for row in rows["counts"]:
        counts[row["status"]][row["severity"]] = counts[row["status"]].get(row["severity"], 0) + row["count"]
        entry = by_rule.setdefault(row["rule_code"], dict.fromkeys(STATUSES, 0))
        entry[row["status"]] += row["count"]
    examples: dict[str, list[dict[str, Any]]] = {"new": [], "resolved": []}
    for row in sorted(rows["listed"], key=lambda row: row["rank"]):
        examples[row["status"]].append({field: row[field] for field in EXAMPLE_FIELDS})
    return {
        "totals": {status: sum(counts[status].values()) for status in STATUSES},
        "by_severity": counts,
        "by_rule": dict(sorted(by_rule.items())),
        "examples": examples,
    }


def _identified(findings: DataFrame) -> DataFrame:
    """One row per distinct finding identity (a struct, compared null-safely as a whole), with one message."""
    return findings.groupBy(F.struct(*IDENTITY).alias("identity")).agg(F.min("message").alias("message"))


def _severity_rank() -> Column:
    return F.array_position(F.array(*[F.lit(s) for s in SEVERITIES]), F.col("severity"))
