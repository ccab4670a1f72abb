"""The ingest, audit and report steps, and the `runs` row that records each command.

Orchestration only: the data logic lives in pipeline.sources, pipeline.audit and pipeline.reports, and the
ingest step in pipeline.ingest. Every table is written with overwrite_partitions by (cluster, topic) pair, so
repeating a step on the same input replaces exactly the rows the previous attempt wrote and leaves other topics,
and other clusters' rows of the same topics, alone.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import schemas
from pipeline import __version__
from pipeline.audit.engine import SIDE_TABLES, run_audit
from pipeline.audit.kept_coordinator import KEPT_TABLES
from pipeline.audit.kept_findings import keep
from pipeline.audit.kept_replay import KEPT_FOLDER, read_kept, sweep
from pipeline.audit.kept_tables import keep_tables
from pipeline.audit.registry import FRAMES, SEVERITIES
from pipeline.audit.replay_files import Keeping
from pipeline.audit.scratch import Scratch
from pipeline.class_archive import JAVA_OPTIONS
from pipeline.compilers import runs_optimising
from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.ingest import distinct_pairs, ingest_inputs
from pipeline.parallel import side_by_side
from pipeline.plan_stats import PlanStats
from pipeline.reports.changes import build_changes
from pipeline.reports.details import detail_sections
from pipeline.reports.findings_export import write_findings_jsonl
from pipeline.reports.gather import gather
from pipeline.reports.golden import (
    COMPARED_TABLES,
    TableDiff,
    compare_tables,
    golden_file,
    portable_paths,
    read_golden,
    write_golden,
)
from pipeline.reports.html import render_html
from pipeline.reports.markdown import render_markdown
from pipeline.reports.run_rows import run_rows
from pipeline.reports.summary import (
    SUMMARY_SECTIONS,
    summary_of,
    summary_sections,
    write_report_file,
    write_summary,
)
from pipeline.small_inputs import sized_for
from pipeline.sources.dumplog.grammar import UNKNOWN
from pipeline.tables.publication import (
    AUDIT_COMMANDS,
    LEFTOVER_FOLDERS,
    PUBLISHED_TABLES,
    RUNS_TABLE,
    STATUS_FAILED,
    STATUS_SUCCEEDED,
    UPGRADE_COMMAND,
    WRITER_COMMANDS,
    PublishedRun,
    last_published,
    published_as_of,
    published_run,
    read_published,
    recent_published,
    roll_back_unpublished,
    table_versions,
)
from pipeline.tables.stats import logged_partitions
from pipeline.tables.store import TableStore, cluster_topics, of_pairs
from pipeline.tables.upgrade import LAYOUT_VERSION, outdated_tables, upgrade_tables

log = logging.getLogger(__name__)

UNKNOWN_DUMP_LINES = f"dumplog.lines.{UNKNOWN}"  # the `runs.counts` entry the report shows
KEPT_FRAMES = [name for name, frame in FRAMES.items() if frame.row_local or frame.coordinator_local]
SCRATCH_DIR = LEFTOVER_FOLDERS[0]  # intermediate tables of running audits, under the warehouse
AUDIT_TABLES = {  # name (also the AuditResult attribute): partition columns
    "findings": schemas.FINDINGS_PARTITION_BY,
    "transactions": schemas.TRANSACTIONS_PARTITION_BY,
    "producer_state": schemas.PRODUCER_STATE_PARTITION_BY,
    "partition_summary": schemas.PARTITION_SUMMARY_PARTITION_BY,
    "global_transactions": schemas.GLOBAL_TRANSACTIONS_PARTITION_BY,
    "read_committed": schemas.READ_COMMITTED_PARTITION_BY,
}

# the side tables run_audit checks, with their schemas
AUDITED_FILE_TABLES = {table: schemas.SCHEMAS[table] for table in SIDE_TABLES}


@dataclass
class StepResult:
    """What a command produced: rows written per table, findings per severity, and the summary if one was built."""

    counts: dict[str, int] = field(default_factory=dict)
    findings_by_severity: dict[str, int] = field(default_factory=dict)
    summary: dict[str, Any] | None = None


@dataclass
class _RunRecord:
    run_id: str
    command: str
    started_at: datetime
    inputs: list[str] | None
    reference_time_ms: int | None


def ingest(spark: SparkSession, store: TableStore, settings: Settings, run_id: str, inputs: list[str]) -> StepResult:
    """Load the log roots into `batches`, replacing the rows of the (cluster, topic) pairs they contain."""
    with _recorded(spark, store, settings, "ingest", run_id, inputs=inputs) as (_, result):
        result.counts.update(ingest_inputs(spark, store, settings, run_id, inputs))
    return result


def audit(
    spark: SparkSession, store: TableStore, settings: Settings, run_id: str, reference_time_ms: int | None
) -> StepResult:
    """Audit every topic of `batches` and replace its rows in the four audit tables."""
    recording = _recorded(spark, store, settings, "audit", run_id, reference_time_ms=reference_time_ms)
    with recording as (_, result), _sized(store, settings) as small:
        result.counts["plan.interpreted"] = int(small)
        _audit(store, settings, run_id, reference_time_ms, result, deep=store.exists("payloads"))
        result.findings_by_severity = _findings_by_severity(store, run_id)
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
    with _recorded(spark, store, settings, "report", run_id) as (_, result):
        audited = published_as_of(store, *as_of) if as_of is not None else _audited_run(store, audited_run_id)
        _require_audit_rows(store, audited.run_id, audited.versions)
        with _sized(store, settings):
            _report(store, settings, _audited_run_section(store, audited.run_id), result, audited.versions)
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
    with _recorded(spark, store, settings, "vacuum", run_id) as (_, result):
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
    recording = _recorded(spark, store, settings, "run", run_id, inputs=inputs, reference_time_ms=reference_time_ms)
    with recording as (record, result):
        result.counts.update(ingest_inputs(spark, store, settings, run_id, inputs))
        with _sized(store, settings) as small:
            result.counts["plan.interpreted"] = int(small)
            _audit(store, settings, run_id, reference_time_ms, result, deep=settings.ingest.deep)
            _report(store, settings, _run_section(record, store, result.counts), result)
        _log_severities(result)  # the report's counts: no job of their own
    return result


def _audit(
    store: TableStore,
    settings: Settings,
    run_id: str,
    reference_time_ms: int | None,
    result: StepResult,
    *,
    deep: bool,
) -> None:
    """Audit `batches` with the side tables; the payload rules run only in deep mode (`deep`: the run ingested
    with --deep, or an audit of a warehouse a deep ingest wrote)."""
    if not store.exists("batches"):
        raise InputError(store.path("batches"), "table not found; run `produce-audit ingest` first")
    batches = store.read("batches", schema=schemas.BATCHES)
    pairs = _audited_pairs(store, batches)
    if not pairs:
        raise InputError(store.path("batches"), "table is empty; nothing to audit")
    audited_pairs = cluster_topics(pairs)
    side_files = {
        table: store.read(table, schema=schema).where(of_pairs(pairs))
        for table, schema in AUDITED_FILE_TABLES.items()
        if store.exists(table) and (deep or table != "payloads")
    }
    # Rows counted from the Delta log: a side table without any for the pairs needs no frame plan of its own.
    empty_tables = frozenset(table for table in side_files if store.count(table, audited_pairs) == 0)
    result.counts["deep"] = int(deep)
    java_options = store.spark.sparkContext.getConf().get(JAVA_OPTIONS, "")
    result.counts["plan.optimising_compiler"] = int(runs_optimising(java_options))
    stats = PlanStats()
    scratch = Scratch(store.spark, f"{store.warehouse}/{SCRATCH_DIR}/{run_id}", stats)
    batch_files = store.files_per_partition("batches")
    result.counts["plan.replay_read_files"] = int(bool(batch_files))
    if batch_files:
        log.debug("replay: its tasks read the %d partitions' files themselves", len(batch_files))
    else:
        log.debug("replay: the batches are exchanged by partition (a file of `batches` holds several, or is unnamed)")
    kept_folder = f"{store.warehouse}/{KEPT_FOLDER}"
    audited_before = last_published(store, AUDIT_COMMANDS)
    keeping = Keeping(kept_folder, run_id, read_kept(kept_folder, audited_before and audited_before.run_id))
    topics = len({topic for _, topic in pairs})
    started = time.perf_counter()
    try:
        audited = run_audit(
            batches,
            settings.audit,
            run_id,
            scratch,
            reference_time_ms,
            empty_tables=empty_tables,
            batch_files=batch_files,
            keeping=keeping,
            **side_files,
        )
        log.info(
            "audit: %d topic(s) checked in %.1f s%s",
            topics,
            time.perf_counter() - started,
            "" if deep else " (payload rules PAY-* skipped: ingest with --deep to run them)",
        )
        started = time.perf_counter()

        def write_output(table: str, partition_by: list[str]) -> int:
            output = getattr(audited, table)
            stats.measure(output, table)
            # The audit is of the whole of `batches`: a pair the table holds and `batches` no longer does goes too.
            replaced = cluster_topics({*pairs, *store.pairs(table)})
            store.overwrite_partitions(output, table, partition_by, replaced)
            return store.count(table, replaced)  # the pairs' rows are this run's after the write

        result.counts.update(
            side_by_side(
                {table: partial(write_output, table, partition_by) for table, partition_by in AUDIT_TABLES.items()}
            )
        )
        keep_tables(keeping, scratch, [*scratch.names("parts/"), *KEPT_TABLES])
        keep(keeping, scratch, KEPT_FRAMES)
        log.info(
            "audit tables written in %.1f s: %d finding(s) in %d topic(s)",
            time.perf_counter() - started,
            result.counts["findings"],
            topics,
        )
    finally:
        scratch.remove()
    log.debug("audit plans: %s", stats.describe())
    result.counts.update(stats.counts())


def _audited_pairs(store: TableStore, batches: DataFrame) -> list[tuple[str, str]]:
    """The (cluster, topic) pairs of `batches`, the unknown cluster as "": the table is partitioned by them, so its
    log names those that hold rows; a Spark job only when the log does not say."""
    logged = logged_partitions(store.path("batches"), schemas.BATCHES_PARTITION_BY)
    if logged is None:
        return distinct_pairs(batches)
    return sorted((cluster or "", topic) for cluster, topic in logged)


def _report(
    store: TableStore,
    settings: Settings,
    run_section: dict[str, Any],
    result: StepResult,
    versions: dict[str, int] | None = None,
) -> None:
    run_id, top_n = run_section["id"], settings.report.top_findings
    started = time.perf_counter()
    # The sections' small queries are one job; the export and the diff with the last run run beside it.
    rows = run_rows(store, run_id, versions)
    sections = {**summary_sections(rows, top_n), **detail_sections(rows, top_n)}
    parts = side_by_side(
        {
            "sections": partial(gather, sections),
            "findings": partial(_export_findings, store, run_id, versions),
            "changes": partial(build_changes, store, run_id, top_n, versions),
        }
    )
    summary = summary_of(run_section, parts["sections"])
    details = {name: parts["sections"][name] for name in sections if name not in SUMMARY_SECTIONS}
    changes = parts["changes"]
    write_summary(summary, store.warehouse)
    html = write_report_file(store.warehouse, run_id, "report.html", render_html(summary, details, changes))
    write_report_file(store.warehouse, run_id, "report.md", render_markdown(summary, details, changes))
    log.info(
        "report of run %s: %d finding(s), written in %.1f s to %s (with report.md, summary.json, findings.jsonl)",
        run_id,
        summary["findings"]["total"],
        time.perf_counter() - started,
        html,
    )
    result.summary = summary
    result.findings_by_severity = dict(summary["findings"]["by_severity"])


def _export_findings(store: TableStore, run_id: str, versions: Mapping[str, int] | None) -> str:
    findings = store.read("findings", schema=schemas.FINDINGS, version=(versions or {}).get("findings"))
    exported = write_findings_jsonl(findings.where(F.col("run_id") == run_id), store.warehouse, run_id)
    log.debug("findings of run %s written to %s", run_id, exported)
    return exported


def _sized(store: TableStore, settings: Settings) -> AbstractContextManager[bool]:
    """The Spark settings for the size of the warehouse's `batches` (pipeline.small_inputs), counted from the
    Delta log's statistics."""
    return sized_for(store.spark, store.count("batches"), settings.spark.small_input_batches)


def _log_severities(result: StepResult) -> None:
    log.info(
        "findings by severity: %s",
        ", ".join(f"{severity} {count}" for severity, count in result.findings_by_severity.items()),
    )


def _findings_by_severity(store: TableStore, run_id: str) -> dict[str, int]:
    counts = dict.fromkeys(SEVERITIES, 0)
    rows = store.read("findings", schema=schemas.FINDINGS).where(F.col("run_id") == run_id).groupBy("severity").count()
    for row in rows.collect():
        counts[row["severity"]] = row["count"]
    return counts


def _audited_run(store: TableStore, audited_run_id: str | None) -> PublishedRun:
    if audited_run_id is not None:
        return published_run(store, audited_run_id)
    latest = last_published(store, AUDIT_COMMANDS)
    if latest is None:
        raise InputError(store.path("runs"), "no published audit run; run `produce-audit audit` first")
    return latest


def _run_inputs(store: TableStore, run_id: str) -> list[str]:
    """The input roots a run was given, as given (relative ones resolve against the current directory)."""
    return list(_audited_run_section(store, run_id).get("inputs") or [])


def _require_audit_rows(store: TableStore, audited_run_id: str, versions: dict[str, int] | None) -> None:
    """A run's rows disappear when a vacuum removes its versions; say so instead of an empty report."""
    version = (versions or {}).get("partition_summary")
    summaries = store.read("partition_summary", schema=schemas.PARTITION_SUMMARY, version=version)
    if summaries.where(F.col("run_id") == audited_run_id).limit(1).count() == 0:
        raise InputError(store.path("partition_summary"), f"no rows of run {audited_run_id} in its published version")


def _audited_run_section(store: TableStore, audited_run_id: str) -> dict[str, Any]:
    """The `run` section of a report on an earlier run, from that run's row in `runs` when it has one."""
    section: dict[str, Any] = {"id": audited_run_id}
    if store.exists("runs"):
        row = (
            store.read("runs", schema=schemas.RUNS)
            .where((F.col("run_id") == audited_run_id) & F.col("command").isin(*AUDIT_COMMANDS))
            .first()
        )
        if row is not None:
            section.update(
                command=row.command,
                started_at=_iso(row.started_at),
                inputs=list(row.inputs or []),
                reference_time_ms=row.reference_time_ms,
                delta_backend=row.delta_backend,
                tool_version=row.tool_version,
                **_unknown_dump_lines(row.counts or {}),
            )
    section["reported_at"] = _iso(datetime.now(UTC))
    return section


def _run_section(record: _RunRecord, store: TableStore, counts: Mapping[str, int]) -> dict[str, Any]:
    return {
        **_unknown_dump_lines(counts),
        "id": record.run_id,
        "command": record.command,
        "started_at": _iso(record.started_at),
        "inputs": list(record.inputs or []),
        "reference_time_ms": record.reference_time_ms,
        "delta_backend": store.backend_name,
        "tool_version": __version__,
        "reported_at": _iso(datetime.now(UTC)),
    }


def _unknown_dump_lines(counts: Mapping[str, int]) -> dict[str, int | None]:
    """The report's count of dump-text lines that fit no layout: 0 for a run that read no dump text, null when the
    run ingested nothing (an `audit`), so the key is always there."""
    return {"unknown_dump_lines": counts.get(UNKNOWN_DUMP_LINES, 0 if "batches" in counts else None)}


@contextmanager
def _recorded(
    spark: SparkSession,
    store: TableStore,
    settings: Settings,
    command: str,
    run_id: str,
    inputs: list[str] | None = None,
    reference_time_ms: int | None = None,
) -> Iterator[tuple[_RunRecord, StepResult]]:
    """Append the command's `runs` row when it ends, last: for a writer that row publishes the run.

    A writer (which holds the warehouse lock) first rolls back what unfinished runs left, and rolls back its
    own commits when it fails, before recording the failure (without hiding the error).
    """
    record = _RunRecord(run_id, command, datetime.now(UTC), inputs, reference_time_ms)
    result = StepResult()
    writes = command in WRITER_COMMANDS
    if writes:
        rolled_back = roll_back_unpublished(store) + _sweep_kept_replay(store)
        if rolled_back:
            result.counts["rolled_back"] = len(rolled_back)
        _upgrade(spark, store, settings, run_id)
    try:
        yield record, result
    except BaseException as error:
        try:
            if writes:
                roll_back_unpublished(store)
                _sweep_kept_replay(store)
            # An input error in a new warehouse changed nothing worth a `runs` table.
            if not (isinstance(error, InputError) and not store.exists("runs")):
                _append_run(spark, store, settings, record, STATUS_FAILED, result.counts)
        except Exception as exc:  # the step's own error is the one worth reporting
            log.warning("could not record failed run %s in %s: %s", run_id, store.path("runs"), exc)
        raise
    counts = dict(result.counts)
    counts.update({f"findings.{severity}": count for severity, count in result.findings_by_severity.items()})
    versions = table_versions(store) if writes else None
    _append_run(spark, store, settings, record, STATUS_SUCCEEDED, counts, versions)
    if writes:
        _sweep_kept_replay(store)


def _upgrade(spark: SparkSession, store: TableStore, settings: Settings, run_id: str) -> None:
    """Upgrade a warehouse an older release wrote (pipeline.tables.upgrade), published as a run of its own."""
    outdated = outdated_tables(store, list(PUBLISHED_TABLES))
    if not outdated:
        return
    record = _RunRecord(f"{run_id}-upgrade", UPGRADE_COMMAND, datetime.now(UTC), None, None)
    actions = upgrade_tables(store, outdated)
    counts = {"upgraded_tables": len(actions), "layout_version": LAYOUT_VERSION}
    _append_run(spark, store, settings, record, STATUS_SUCCEEDED, counts, table_versions(store))


def _sweep_kept_replay(store: TableStore) -> list[str]:
    """Remove the kept replays no published audit goes on from (pipeline.audit.kept_replay)."""
    audited = last_published(store, AUDIT_COMMANDS)
    removed = sweep(f"{store.warehouse}/{KEPT_FOLDER}", audited and audited.run_id)
    return [f"swept kept replay {name}" for name in removed]


def _append_run(
    spark: SparkSession,
    store: TableStore,
    settings: Settings,
    record: _RunRecord,
    status: str,
    counts: Mapping[str, int],
    versions: Mapping[str, int] | None = None,
) -> None:
    row = (
        record.run_id,
        record.command,
        record.started_at,
        datetime.now(UTC),
        status,
        record.inputs,
        record.reference_time_ms,
        store.backend_name,
        dict(counts),
        json.dumps(settings.model_dump(mode="json"), sort_keys=True),
        __version__,
        None if versions is None else dict(versions),
        None if versions is None else LAYOUT_VERSION,
    )
    store.append(spark.createDataFrame([row], schemas.RUNS), "runs")


def _iso(moment: datetime) -> str:
    """UTC ISO-8601 with a Z; PySpark collects timestamps as naive local time, which astimezone understands."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
