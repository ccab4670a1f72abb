"""Audit entry point: batches in, findings / transactions / producer_state / partition_summary out.

Shuffle budget (fixed, whatever the data size): one hash exchange of the batches on (topic, partition)
in `prepare_batches`; every per-batch window and aggregation after it is keyed by (topic, partition, ...),
so it runs inside that partitioning with sorts only. The `.txnindex` comparison adds a few exchanges of
transaction-level rows (ABORTs and index entries), never of batches. The prepared and replayed batches
are persisted because every output table reads them, and so are the transactions, the partition offsets and
each family of findings: small tables many plans read, which keeps every plan the driver optimises small.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.audit import epochs, files, integrity, sequences, snapshots, transactions, txnindex, visibility
from pipeline.audit.columns import explode_findings
from pipeline.audit.cross_checks import cross_check_findings
from pipeline.audit.leader_epochs import leader_epoch_findings
from pipeline.audit.replay import TP, prepare_batches, producer_rows, with_producer_state
from pipeline.audit.transaction_log import audited_records, transaction_log_findings
from pipeline.config import AuditSettings
from schemas.findings import FINDINGS
from schemas.partition_summary import PARTITION_SUMMARY
from schemas.producer_state import PRODUCER_STATE
from schemas.transactions import TRANSACTIONS


@dataclass(frozen=True)
class AuditResult:
    findings: DataFrame
    transactions: DataFrame
    producer_state: DataFrame
    partition_summary: DataFrame
    _cached: tuple[DataFrame, ...] = ()

    def release(self) -> None:
        """Drop the persisted intermediate data once the outputs are written."""
        for frame in self._cached:
            frame.unpersist()


def _with_run(df: DataFrame, run_id: str, schema) -> DataFrame:
    """Stamp the run id and enforce the table's column order and types (the schema contract)."""
    df = df.withColumn("run_id", F.lit(run_id))
    return df.select(*[F.col(field.name).cast(field.dataType).alias(field.name) for field in schema.fields])


def _partition_locations(offsets: DataFrame) -> DataFrame:
    return offsets.select(
        "*",
        F.lit(None).cast("long").alias("producer_id"),
        F.lit(None).cast("int").alias("producer_epoch"),
        F.col("first_unstable_offset").alias("base_offset"),
        F.col("log_end_offset").alias("last_offset"),
        F.lit(None).cast("string").alias("source_file"),
        F.lit(None).cast("long").alias("position"),
    )


def _txn_index_findings(
    txn_index: DataFrame, prepared: DataFrame, txns: DataFrame, offsets: DataFrame, settings: AuditSettings
) -> DataFrame:
    """IDX rules: the written .txnindex against the entries the ABORT markers imply."""
    replicas = txnindex.audited_replicas(prepared)
    entries = txnindex.audited_entries(txn_index, replicas)
    located, file_checks = txnindex.file_checks(entries, txnindex.segment_ranges(prepared))
    partitions = offsets.select(*TP, "log_start_offset").join(replicas.drop("broker_id"), on=TP, how="inner")
    compared, comparison_checks = txnindex.comparison_checks(
        txnindex.expected_entries(txns), entries, txns, partitions, settings.broker_older_than("2.8")
    )
    return explode_findings(located, file_checks).unionByName(explode_findings(compared, comparison_checks))


def _snapshot_findings(
    producer_snapshots: DataFrame, prepared: DataFrame, replayed: DataFrame, offsets: DataFrame
) -> DataFrame:
    """SNP rules: the broker's producer-state snapshots against the replay."""
    replicas = txnindex.audited_replicas(prepared.where(~F.col("is_kraft_topic")))
    audited = snapshots.audited_snapshots(producer_snapshots, replicas)
    files, file_checks = snapshots.file_checks(audited, prepared, offsets)
    compared, state_checks = snapshots.state_checks(audited, replayed, offsets)
    return explode_findings(files, file_checks).unionByName(explode_findings(compared, state_checks))


def run_audit(
    batches: DataFrame,
    settings: AuditSettings,
    run_id: str,
    reference_time_ms: int | None = None,
    txn_index: DataFrame | None = None,
    producer_snapshots: DataFrame | None = None,
    file_problems: DataFrame | None = None,
    checkpoints: DataFrame | None = None,
    leader_epochs: DataFrame | None = None,
    transaction_log: DataFrame | None = None,
    offset_commits: DataFrame | None = None,
) -> AuditResult:
    """Audit `batches`. The `.txnindex` entries, producer-state snapshots, file problems, offset
    checkpoints and leader-epoch checkpoints of the same log dirs, when given, are checked against the replay
    too (IDX, SNP, SEG, LEP rules and LSO-003); the decoded `__transaction_state` records against the
    coordinator's state machine and, with the transactional offset commits, against the markers and
    transactions of the log (TSL and XTX rules)."""
    prepared = prepare_batches(batches, settings).persist(StorageLevel.MEMORY_AND_DISK)
    replayed = with_producer_state(producer_rows(prepared), settings).persist(StorageLevel.MEMORY_AND_DISK)

    row_checks = [*sequences.row_checks(settings), *epochs.row_checks(settings), *transactions.row_checks(settings)]
    txns = transactions.build_transactions(replayed).persist(StorageLevel.MEMORY_AND_DISK)
    log_starts = (
        None
        if checkpoints is None
        else visibility.checkpoint_log_starts(checkpoints, txnindex.audited_replicas(prepared))
    )
    open_txns = visibility.open_transactions(txns, prepared, settings, reference_time_ms, log_starts)
    offsets = visibility.partition_offsets(prepared, txns, open_txns, log_starts).persist(StorageLevel.MEMORY_AND_DISK)

    parts = [
        explode_findings(replayed, row_checks),
        explode_findings(prepared, integrity.row_checks(settings)),
        explode_findings(visibility.as_finding_rows(open_txns), visibility.transaction_findings(open_txns, settings)),
        explode_findings(_partition_locations(offsets), visibility.summary_checks()),
    ]
    if txn_index is not None:
        parts.append(_txn_index_findings(txn_index, prepared, txns, offsets, settings))
    if producer_snapshots is not None:
        parts.append(_snapshot_findings(producer_snapshots, prepared, replayed, offsets))
    if file_problems is not None:
        parts.append(files.file_problem_findings(file_problems, txnindex.audited_replicas(prepared)))
    if leader_epochs is not None:
        parts.append(leader_epoch_findings(leader_epochs, prepared, offsets))
    if transaction_log is not None:
        records = audited_records(transaction_log, prepared, checkpoints)
        parts.append(transaction_log_findings(records, settings, reference_time_ms))
        parts.append(cross_check_findings(prepared, txns, records, offset_commits))
    # Each part is planned on its own when persisted, so the driver never optimises one plan holding every
    # rule (hundreds of thousands of plan nodes with all rule families); the findings are written first and
    # counted again for the summary, and read from these caches both times.
    parts = [part.persist(StorageLevel.MEMORY_AND_DISK) for part in parts]
    findings = reduce(DataFrame.unionByName, parts)
    summary = visibility.with_finding_counts(offsets, findings)
    return AuditResult(
        findings=_with_run(findings, run_id, FINDINGS),
        transactions=_with_run(txns, run_id, TRANSACTIONS),
        producer_state=_with_run(transactions.build_producer_state(replayed), run_id, PRODUCER_STATE),
        partition_summary=_with_run(summary, run_id, PARTITION_SUMMARY),
        _cached=(prepared, replayed, txns, offsets, *parts),
    )
