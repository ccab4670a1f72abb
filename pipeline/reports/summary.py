"""The summary of an audit run: counts by severity and rule, top findings, transactions and open partitions.

Everything is aggregated by Spark; only aggregate rows and the top-N lists reach the driver, so the report
costs the same for a thousand findings as for a billion. summary.json is meant to be diffed between runs:
keys are sorted, lists have a total order, and wall-clock times appear only in the `run` section.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core.registry import RULES
from pipeline.reports.formatting import cluster_name, run_notes
from pipeline.reports.gather import Query, Rows, Section, top
from pipeline.reports.run_rows import RunRows
from pipeline.tables.files import filesystem
from schemas.findings import SEVERITIES
from schemas.transactions import OUTCOME_ABORTED, OUTCOME_COMMITTED, OUTCOME_EMPTY, OUTCOME_OPEN

# Raised whenever a key is added, renamed or removed; 2: format_version became schema_version; 3: the cluster of
# top findings and open partitions, and the number of clusters (`partitions.clusters`); 4: the rules that had nothing
# to read (`run.rules_without_input`).
SCHEMA_VERSION = 4
OUTCOMES = (OUTCOME_COMMITTED, OUTCOME_ABORTED, OUTCOME_OPEN, OUTCOME_EMPTY)
SUMMARY_SECTIONS = ("findings", "transactions", "partitions")

TOP_FINDING_FIELDS = (
    "severity",
    "rule_code",
    "rule_name",
    "topic",
    "partition",
    "base_offset",
    "last_offset",
    "producer_id",
    "producer_epoch",
    "broker_id",
    "cluster_id",
    "segment",
    "position",
    "message",
    "evidence",
)
OPEN_PARTITION_FIELDS = (
    "topic",
    "partition",
    "broker_id",
    "cluster_id",
    "open_transactions",
    "hanging_transactions",
    "first_unstable_offset",
    "last_stable_offset",
    "log_end_offset",
)

_MESSAGE_WIDTH = 100


def summary_sections(rows: RunRows, top_n: int) -> dict[str, Section]:
    """The sections of summary.json, from the run's rows of findings, transactions and partition_summary."""
    return {
        "findings": _findings_section(rows.findings, top_n),
        "transactions": _transactions_section(rows.transactions),
        "partitions": _partitions_section(rows.partitions, top_n),
    }


def summary_of(run: dict[str, Any], sections: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """summary.json: the run and its gathered summary sections."""
    return {"schema_version": SCHEMA_VERSION, "run": run, **{name: sections[name] for name in SUMMARY_SECTIONS}}


def _severity_rank(column: str) -> Column:
    """1 for INFO up to 4 for CRITICAL (0 for anything else), so sorting by it descending puts the worst first."""
    return F.array_position(F.array(*[F.lit(severity) for severity in SEVERITIES]), F.col(column))


def _findings_section(findings: DataFrame, top_n: int) -> Section:
    def shape(rows: Mapping[str, Rows]) -> dict[str, Any]:
        by_severity = dict.fromkeys(SEVERITIES, 0)
        by_rule: dict[str, dict[str, Any]] = {}
        for row in rows["counts"]:
            by_severity[row["severity"]] = by_severity.get(row["severity"], 0) + row["count"]
            registered = RULES.get(row["rule_code"])
            entry = by_rule.setdefault(
                row["rule_code"],
                {"name": registered.name if registered else row["rule_name"], "count": 0, "by_severity": {}},
            )
            entry["count"] += row["count"]
            entry["by_severity"][row["severity"]] = entry["by_severity"].get(row["severity"], 0) + row["count"]
        return {
            "total": sum(by_severity.values()),
            "by_severity": by_severity,
            "by_rule": by_rule,
            "top": rows["top"],
        }

    worst_first = (
        _severity_rank("severity").desc(),
        F.col("topic").asc(),
        F.col("partition").asc_nulls_last(),
        F.col("base_offset").asc_nulls_last(),
        F.col("position").asc_nulls_last(),
        F.col("rule_code").asc(),
        F.col("producer_id").asc_nulls_last(),
        F.col("message").asc(),
        F.col("cluster_id").asc_nulls_last(),
    )
    return Section(
        {
            "counts": Query(findings.groupBy("rule_code", "rule_name", "severity").count()),
            "top": top(findings.select(*TOP_FINDING_FIELDS), worst_first, top_n),
        },
        shape,
    )


def _transactions_section(transactions: DataFrame) -> Section:
    def shape(rows: Mapping[str, Rows]) -> dict[str, Any]:
        by_outcome = dict.fromkeys(OUTCOMES, 0)
        for row in rows["counts"]:
            by_outcome[row["outcome"]] = row["count"]
        return {"total": sum(by_outcome.values()), "by_outcome": by_outcome}

    return Section({"counts": Query(transactions.groupBy("outcome").count())}, shape)


def _partitions_section(partitions: DataFrame, top_n: int) -> Section:
    def shape(rows: Mapping[str, Rows]) -> dict[str, Any]:
        (totals,) = rows["totals"]
        return {**{name: int(value) for name, value in totals.items()}, "open": rows["open"]}

    is_open = (F.col("open_transactions") > 0) | (F.col("hanging_transactions") > 0)
    totals = partitions.agg(
        F.count(F.lit(1)).alias("partitions"),
        F.count_distinct("cluster_id").alias("clusters"),
        F.coalesce(F.sum("batch_count"), F.lit(0)).alias("batches"),
        F.coalesce(F.sum("record_count"), F.lit(0)).alias("records"),
        F.coalesce(F.sum("aborted_records"), F.lit(0)).alias("aborted_records"),
        F.count_if(is_open).alias("with_open_transactions"),
        F.count_if(F.col("hanging_transactions") > 0).alias("with_hanging_transactions"),
    )
    most_open_first = (
        F.col("hanging_transactions").desc(),
        F.col("open_transactions").desc(),
        F.col("topic").asc(),
        F.col("partition").asc(),
        F.col("broker_id").asc_nulls_last(),
        F.col("cluster_id").asc_nulls_last(),
    )
    listed = partitions.where(is_open).select(*OPEN_PARTITION_FIELDS)
    return Section({"totals": Query(totals), "open": top(listed, most_open_first, top_n)}, shape)


def to_json(summary: dict[str, Any]) -> str:
    """Sorted keys at every level, evidence maps included, so that two summaries diff line by line."""
    return json.dumps(summary, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_summary(summary: dict[str, Any], warehouse: str) -> str:
    """Write WH/reports/<run id>/summary.json; return where."""
    return write_report_file(warehouse, summary["run"]["id"], "summary.json", to_json(summary))


def write_report_file(warehouse: str, run_id: str, name: str, text: str) -> str:
    """Write WH/reports/<run id>/<name> on a local path or, for URIs, through pyarrow.fs; return where."""
    relative = f"reports/{run_id}/{name}"
    files, root = filesystem(warehouse)
    target = f"{root}/{relative}"
    files.create_dir(target.rsplit("/", 1)[0], recursive=True)
    with files.open_output_stream(target) as out:
        out.write(text.encode("utf-8"))
    return f"{warehouse.rstrip('/')}/{relative}"


def render_text(summary: dict[str, Any]) -> str:
    """The summary as plain-text tables for a terminal."""
    run = summary["run"]
    findings = summary["findings"]
    partitions = summary["partitions"]
    lines = [
        f"produce-audit run {run['id']}",
        f"reference time: {_reference_time(run.get('reference_time_ms'))}",
        f"partitions: {partitions['partitions']:,}  batches: {partitions['batches']:,}  "
        f"records: {partitions['records']:,}  aborted records: {partitions['aborted_records']:,}",
        *run_notes(run),
        "",
        f"Findings by severity ({findings['total']:,} in all)",
        *_table(("SEVERITY", "COUNT"), [(s, findings["by_severity"][s]) for s in reversed(SEVERITIES)]),
    ]
    if findings["by_rule"]:
        rule_rows = [
            (code, entry["name"], _severity_list(entry["by_severity"]), entry["count"])
            for code, entry in sorted(findings["by_rule"].items())
        ]
        lines += ["", "Findings by rule", *_table(("RULE", "NAME", "SEVERITIES", "COUNT"), rule_rows)]
    # The cluster is shown when the run audited several: in one cluster it says nothing.
    cluster = (lambda row: (_cluster(row),)) if partitions["clusters"] > 1 else (lambda row: ())
    cluster_header = ("CLUSTER",) if partitions["clusters"] > 1 else ()
    if findings["top"]:
        top_rows = [
            (
                f["severity"],
                f["rule_code"],
                *cluster(f),
                f["topic"],
                f["partition"],
                _offsets(f["base_offset"], f["last_offset"]),
                _producer(f["producer_id"], f["producer_epoch"]),
                _shorten(f["message"]),
            )
            for f in findings["top"]
        ]
        lines += [
            "",
            f"Top findings ({len(findings['top'])} of {findings['total']:,})",
            *_table(
                ("SEVERITY", "RULE", *cluster_header, "TOPIC", "PARTITION", "OFFSETS", "PRODUCER:EPOCH", "MESSAGE"),
                top_rows,
            ),
        ]
    transactions = summary["transactions"]
    lines += [
        "",
        f"Transactions by outcome ({transactions['total']:,} in all)",
        *_table(("OUTCOME", "COUNT"), list(transactions["by_outcome"].items())),
        "",
        f"Partitions with open transactions: {partitions['with_open_transactions']:,} "
        f"(hanging: {partitions['with_hanging_transactions']:,})",
    ]
    if partitions["open"]:
        open_rows = [
            (
                *cluster(p),
                p["topic"],
                p["partition"],
                p["open_transactions"],
                p["hanging_transactions"],
                p["first_unstable_offset"],
                p["last_stable_offset"],
            )
            for p in partitions["open"]
        ]
        headers = (*cluster_header, "TOPIC", "PARTITION", "OPEN", "HANGING", "FIRST UNSTABLE", "LAST STABLE")
        lines += _table(headers, open_rows)
    return "\n".join(lines)


def _cluster(row: Mapping[str, Any]) -> str:
    return cluster_name(row.get("cluster_id"))


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """Columns padded to their widest cell; numbers right-aligned, text left-aligned."""
    cells = [[_cell(value) for value in row] for row in rows]
    numeric = [bool(rows) and all(isinstance(row[i], int | None) for row in rows) for i in range(len(headers))]
    widths = [max([len(header), *(len(row[i]) for row in cells)]) for i, header in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        padded = (v.rjust(w) if right else v.ljust(w) for v, w, right in zip(values, widths, numeric, strict=True))
        return "  ".join(padded).rstrip()

    return [line(headers), *(line(row) for row in cells)]


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _reference_time(epoch_ms: int | None) -> str:
    if epoch_ms is None:
        return "latest batch timestamp of each partition"
    moment = datetime.fromtimestamp(epoch_ms / 1000, UTC)
    return f"{moment.isoformat(timespec='milliseconds').replace('+00:00', 'Z')} ({epoch_ms} ms)"


def _severity_list(by_severity: dict[str, int]) -> str:
    return ",".join(s for s in reversed(SEVERITIES) if by_severity.get(s))


def _offsets(base: int | None, last: int | None) -> str | None:
    if base is None:
        return None
    return str(base) if last is None or last == base else f"{base}-{last}"


def _producer(producer_id: int | None, epoch: int | None) -> str | None:
    if producer_id is None:
        return None
    return f"{producer_id}:{epoch if epoch is not None else '-'}"


def _shorten(message: str) -> str:
    return message if len(message) <= _MESSAGE_WIDTH else message[: _MESSAGE_WIDTH - 3] + "..."
