"""The audit step: `batches` and the side tables through the audit engine into the six result tables, each
written with overwrite_partitions by (cluster, topic) pair, and the replay kept for the next run to go on from.
"""

from __future__ import annotations

import logging
import time
from functools import partial

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import schemas
from pipeline.audit.core.registry import FRAMES
from pipeline.audit.core.scratch import Scratch
from pipeline.audit.engine.kept_findings import keep
from pipeline.audit.engine.run import SIDE_TABLES, run_audit
from pipeline.audit.replay.files import Keeping
from pipeline.audit.replay.kept import KEPT_FOLDER, read_kept
from pipeline.audit.state.kept_parts import keep_tables
from pipeline.class_archive import JAVA_OPTIONS
from pipeline.compilers import runs_optimising
from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.ingest import distinct_pairs
from pipeline.parallel import side_by_side
from pipeline.plan_stats import PlanStats
from pipeline.reports.formatting import WITHOUT_INPUT, families
from pipeline.run_record import StepResult
from pipeline.tables.publication import AUDIT_COMMANDS, LEFTOVER_FOLDERS, last_published
from pipeline.tables.stats import logged_partitions
from pipeline.tables.store import TableStore, cluster_topics, of_pairs
from schemas.findings import SEVERITIES

log = logging.getLogger(__name__)

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


def audit_batches(
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
            log_files=store.files_per_partition("transaction_log") if "transaction_log" in side_files else None,
            **side_files,
        )
        log.info(
            "audit: %d topic(s) checked in %.1f s%s",
            topics,
            time.perf_counter() - started,
            "" if deep else " (payload rules PAY-* skipped: ingest with --deep to run them)",
        )
        if audited.rules_without_input:
            log.info(
                "%d rule(s) had nothing to read in these inputs: %s",
                len(audited.rules_without_input),
                families(audited.rules_without_input),
            )
        result.counts.update({f"{WITHOUT_INPUT}{code}": 1 for code in audited.rules_without_input})
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
        keep_tables(keeping, scratch, scratch.names("parts/"))
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


def findings_by_severity(store: TableStore, run_id: str) -> dict[str, int]:
    """The run's findings counted by severity, every severity there: an `audit` has no report that counts them."""
    counts = dict.fromkeys(SEVERITIES, 0)
    rows = store.read("findings", schema=schemas.FINDINGS).where(F.col("run_id") == run_id).groupBy("severity").count()
    for row in rows.collect():
        counts[row["severity"]] = row["count"]
    return counts
