"""The commands' steps: ingest, audit, report, compare, vacuum and run, each under one run id and one `runs` row.

Orchestration only: the ingest step lives in pipeline.ingest, the audit step in pipeline.audit_step, the report
step in pipeline.report_step and the `runs` row in pipeline.run_record; the data logic in pipeline.sources,
pipeline.audit and pipeline.reports. Every table is written with overwrite_partitions by (cluster, topic) pair, so
repeating a step on the same input replaces exactly the rows the previous attempt wrote and leaves other topics,
and other clusters' rows of the same topics, alone.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from functools import partial
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import schemas
from pipeline.audit_step import audit_batches, findings_by_severity
from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.ingest import ingest_inputs
from pipeline.parallel import side_by_side
from pipeline.report_step import audited_run_section, run_section, write_report
from pipeline.reports.golden import (
    COMPARED_TABLES,
    TableDiff,
    compare_tables,
    golden_file,
    portable_paths,
    read_golden,
    write_golden,
)
from pipeline.run_record import StepResult, recorded
from pipeline.small_inputs import sized_for
from pipeline.tables.publication import (
    AUDIT_COMMANDS,
    PUBLISHED_TABLES,
    RUNS_TABLE,
    PublishedRun,
    last_published,
    published_as_of,
    published_run,
    read_published,
    recent_published,
)
from pipeline.tables.store import TableStore

log = logging.getLogger(__name__)


def ingest(spark: SparkSession, store: TableStore, settings: Settings, run_id: str, inputs: list[str]) -> StepResult:
    """Load the log roots into `batches`, replacing the rows of the (cluster, topic) pairs they contain."""
    with recorded(spark, store, settings, "ingest", run_id, inputs=inputs) as (_, result):
        result.counts.update(ingest_inputs(spark, store, settings, run_id, inputs))
    return result


def audit(
    spark: SparkSession, store: TableStore, settings: Settings, run_id: str, reference_time_ms: int | None
) -> StepResult:
    """Audit every topic of `batches` and replace its rows in the four audit tables."""
    recording = recorded(spark, store, settings, "audit", run_id, reference_time_ms=reference_time_ms)
    with recording as (_, result), _sized(store, settings) as small:
        result.counts["plan.interpreted"] = int(small)
        audit_batches(store, settings, run_id, reference_time_ms, result, deep=store.exists("payloads"))
        result.findings_by_severity = findings_by_severity(store, run_id)
        _log_severities(result)
    return result


def report(
    spark: SparkSession,
    store: TableStore,
    settings: Settings,
    run_id: str,
    audited_run_id: str | None = None,
    as_of: tuple[int | None, int | None] | None = None,
) -> StepResult:
    """Summarise a published audit run (the latest, or the latest as of `as_of`: a findings version or an epoch-ms
    time), as it published its tables, into WH/reports/RUN_ID/."""
    with recorded(spark, store, settings, "report", run_id) as (_, result):
        audited = published_as_of(store, *as_of) if as_of is not None else _audited_run(store, audited_run_id)
        _require_audit_rows(store, audited.run_id, audited.versions)
        with _sized(store, settings):
            write_report(store, settings, audited_run_section(store, audited.run_id), result, audited.versions)
    return result


def compare(
    store: TableStore,
    golden: Path | None,
    audited_run_id: str | None,
    update: bool,
    examples: int = 10,
    baseline_run_id: str | None = None,
) -> list[TableDiff]:
    """A published audit run's result tables against the golden folder (or written into it with `update`), or
    against the rows the published audit run `baseline_run_id` of the same warehouse left.

    Read-only on the warehouse: it takes no lock and records no run. A golden table missing from the folder is
    an input error naming it, so a forgotten --update-golden never passes as "equal".
    """
    rows = _compared_rows(store, _audited_run(store, audited_run_id))
    if update:
        for table, frame in rows.items():
            log.debug("golden %s written to %s", table, write_golden(frame, table, golden))
        return []
    if baseline_run_id is not None:
        baseline = published_run(store, baseline_run_id)
        reference, expected = f"baseline {baseline.run_id}", _compared_rows(store, baseline)
    else:
        for table in COMPARED_TABLES:
            if not golden_file(golden, table).is_file():
                raise InputError(
                    str(golden_file(golden, table)), "no golden output here; run compare with --update-golden"
                )
        reference, expected = "golden", {t: read_golden(store.spark, t, golden) for t in COMPARED_TABLES}
    diffs = side_by_side(
        {t: partial(compare_tables, rows[t], expected[t], t, examples, reference) for t in COMPARED_TABLES}
    )
    return [diffs[t] for t in COMPARED_TABLES]


def _compared_rows(store: TableStore, audited: PublishedRun) -> dict[str, DataFrame]:
    """A run's rows of the compared tables, read at the versions it published, its input roots as `{inputN}`."""
    _require_audit_rows(store, audited.run_id, audited.versions)
    roots = [root if "://" in root else str(Path(root).resolve()) for root in _run_inputs(store, audited.run_id)]
    return {
        table: portable_paths(
            read_published(store, table, schema=schemas.SCHEMAS[table], run=audited).where(
                F.col("run_id") == audited.run_id
            ),
            table,
            roots,
        )
        for table in COMPARED_TABLES
    }


def vacuum(
    spark: SparkSession, store: TableStore, settings: Settings, run_id: str, retention_hours: int, keep_runs: int
) -> StepResult:
    """Delete the files that no kept table version reads (the latest, and those of the last `keep_runs` runs)."""
    with recorded(spark, store, settings, "vacuum", run_id) as (_, result):
        kept = recent_published(store, keep_runs)
        for table in (*PUBLISHED_TABLES, RUNS_TABLE):
            if not store.exists(table):
                continue
            versions = sorted(
                {store.version(table)} | {run.versions[table] for run in kept if table in (run.versions or {})}
            )
            removed = store.vacuum(table, retention_hours, versions)
            if removed is not None:
                result.counts[f"vacuum.{table}"] = removed
        log.info(
            "vacuum: %s",
            ", ".join(f"{k.split('.', 1)[1]} {v}" for k, v in result.counts.items() if k.startswith("vacuum."))
            or "done",
        )
    return result


def run(
    spark: SparkSession,
    store: TableStore,
    settings: Settings,
    run_id: str,
    inputs: list[str],
    reference_time_ms: int | None,
) -> StepResult:
    """Ingest, audit and report under one run id and one `runs` row."""
    recording = recorded(spark, store, settings, "run", run_id, inputs=inputs, reference_time_ms=reference_time_ms)
    with recording as (record, result):
        result.counts.update(ingest_inputs(spark, store, settings, run_id, inputs))
        with _sized(store, settings) as small:
            result.counts["plan.interpreted"] = int(small)
            audit_batches(store, settings, run_id, reference_time_ms, result, deep=settings.ingest.deep)
            write_report(store, settings, run_section(record, store, result.counts), result)
        _log_severities(result)  # the report's counts: no job of their own
    return result


def _sized(store: TableStore, settings: Settings) -> AbstractContextManager[bool]:
    """The Spark settings for the size of the warehouse's `batches` (pipeline.small_inputs), counted from the
    Delta log's statistics."""
    return sized_for(store.spark, store.count("batches"), settings.spark.small_input_batches)


def _log_severities(result: StepResult) -> None:
    """At INFO: with the exit code's line, the result someone reading the log acts on."""
    log.info(
        "findings by severity: %s",
        ", ".join(f"{severity} {count}" for severity, count in result.findings_by_severity.items()),
    )


def _audited_run(store: TableStore, audited_run_id: str | None) -> PublishedRun:
    if audited_run_id is not None:
        return published_run(store, audited_run_id)
    latest = last_published(store, AUDIT_COMMANDS)
    if latest is None:
        raise InputError(store.path("runs"), "no published audit run; run `produce-audit audit` first")
    return latest


def _run_inputs(store: TableStore, run_id: str) -> list[str]:
    """The input roots a run was given, as given (relative ones resolve against the current directory)."""
    return list(audited_run_section(store, run_id).get("inputs") or [])


def _require_audit_rows(store: TableStore, audited_run_id: str, versions: dict[str, int] | None) -> None:
    """A run's rows disappear when a vacuum removes its versions; say so instead of an empty report."""
    version = (versions or {}).get("partition_summary")
    summaries = store.read("partition_summary", schema=schemas.PARTITION_SUMMARY, version=version)
    if summaries.where(F.col("run_id") == audited_run_id).limit(1).count() == 0:
        raise InputError(store.path("partition_summary"), f"no rows of run {audited_run_id} in its published version")
