"""Audit entry point: batches in, findings / transactions / producer_state / partition_summary /
global_transactions / read_committed out.

The engine iterates the registry (pipeline.audit.core.registry); no rule family is wired here by hand. A run is a
fixed sequence of small plans, each starting from scans of what the step before it wrote to the scratch
folder (pipeline.audit.core.scratch), so no plan grows with the number of rules, frames or inputs:

1. state (pipeline.audit.state.materialised): the replay of every batch, with the run's one exchange of the batches on
   (cluster, topic, partition), then transactions, replicas, open transactions, partitions and coordinator records;
2. one plan per frame: the frame's rows, every check registered on it evaluated in one projection, the
   findings that fired appended to the scratch `findings`;
3. the output tables, each a projection or aggregate of scratch tables.

docs/engine.md describes the plans and their shuffles.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import pipeline.audit.rules  # noqa: F401  (registers every rule, frame and check)
from pipeline.audit.core.columns import explode_findings
from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.core.registry import CHECKS, FRAMES, Frame
from pipeline.audit.core.scratch import Scratch
from pipeline.audit.engine.kept_findings import earlier_findings, kept_for
from pipeline.audit.engine.repeats import once_per_producer
from pipeline.audit.replay.files import Keeping, ReplayOutcome
from pipeline.audit.replay.kept import CoordinatorOutcome
from pipeline.audit.replay.task_outputs import findings_table
from pipeline.audit.state.global_transactions import build_global_transactions
from pipeline.audit.state.hanging import CAUSE_COLUMNS
from pipeline.audit.state.kept_coordinator import changed_records, has_findings, with_kept_findings
from pipeline.audit.state.materialised import build_state
from pipeline.audit.state.read_committed import build_read_committed
from pipeline.config import AuditSettings
from pipeline.tables.files_per_partition import FileGroup
from schemas.findings import FINDINGS
from schemas.global_transactions import GLOBAL_TRANSACTIONS
from schemas.keys import TP, TP_PID
from schemas.partition_summary import PARTITION_SUMMARY
from schemas.producer_state import PRODUCER_STATE
from schemas.read_committed import READ_COMMITTED
from schemas.transactions import TRANSACTIONS

SIDE_TABLES = (
    "txn_index",
    "producer_snapshots",
    "file_problems",
    "checkpoints",
    "leader_epochs",
    "transaction_log",
    "offset_commits",
    "payloads",
    "live_producers",
)


@dataclass(frozen=True)
class AuditResult:
    findings: DataFrame
    transactions: DataFrame
    producer_state: DataFrame
    partition_summary: DataFrame
    global_transactions: DataFrame
    read_committed: DataFrame
    scratch: Scratch
    # Rules whose every frame lacked its input (no side table of its kind, no `kafka://` input, no deep ingest)
    rules_without_input: tuple[str, ...] = ()

    def release(self) -> None:
        """Remove the run's scratch tables once the outputs are written."""
        self.scratch.remove()


def _with_run(df: DataFrame, run_id: str, schema) -> DataFrame:
    """Stamp the run id and enforce the table's column order and types (the schema contract)."""
    df = df.withColumn("run_id", F.lit(run_id))
    return df.select(*[F.col(field.name).cast(field.dataType).alias(field.name) for field in schema.fields])


def evaluate_frames(
    inputs: AuditInputs,
    ctx: AuditContext,
    scratch: Scratch,
    empty_tables: frozenset[str] = frozenset(),
    outcome: ReplayOutcome | None = None,
    coordinator: CoordinatorOutcome | None = None,
    one_copy_each: bool = False,
) -> tuple[DataFrame, frozenset[str]]:
    """Every registered check on its frame: the row-local frames' findings as the replay's tasks wrote them
    (`row_local_findings`), every other frame's by one plan each (`frame_findings`). Frames whose inputs are absent
    are skipped, and so are those that can have no rows (`without_rows`). Returns the findings and the frames whose
    input is absent (a side table the inputs had no kind of: an empty one may be a clean log's, as `file_problems`)."""
    planned = [
        name
        for name, checks in CHECKS.items()
        if checks
        and not FRAMES[name].row_local
        and not without_rows(FRAMES[name], scratch, empty_tables, one_copy_each)
    ]
    builders = {f"findings/frame={name}": partial(frame_findings, name, inputs, ctx, coordinator) for name in planned}
    made = scratch.materialise_all({**builders, **row_local_findings(scratch, outcome)})
    absent = frozenset(name.removeprefix("findings/frame=") for name, rows in made.items() if rows is None)
    return scratch.read_parts("findings"), absent


def without_input(frames: frozenset[str]) -> tuple[str, ...]:
    """The rules all of whose checks are on `frames`."""
    on: dict[str, set[str]] = {}
    for name, checks in CHECKS.items():
        for registered in checks:
            on.setdefault(registered.rule.code, set()).add(name)
    return tuple(sorted(code for code, names in on.items() if names <= frames))


def without_rows(frame: Frame, scratch: Scratch, empty_tables: frozenset[str], one_copy_each: bool) -> bool:
    """Whether the run knows, without a plan, that `frame` has no rows: its rows come from a side table in
    `empty_tables` or from state whose files hold none (Frame.rows_of), or from copies of partitions that each
    have one replica (Frame.of_copies, `one_copy_each`)."""
    if frame.of_copies and one_copy_each:
        return True
    if frame.rows_of is None:
        return False
    return frame.rows_of in empty_tables or (scratch.has(frame.rows_of) and scratch.is_empty(frame.rows_of))


def row_local_findings(scratch: Scratch, outcome: ReplayOutcome | None) -> dict[str, Callable[[], DataFrame]]:
    """The findings of each row-local frame, which the replay's tasks wrote (`findings_table`): taken as
    they are, or, when the replay went on from a kept one, with the earlier findings of the rows it kept
    (pipeline.audit.engine.kept_findings), which takes a plan."""
    builders = {}
    for name in (name for name, checks in CHECKS.items() if checks and FRAMES[name].row_local):
        fresh = scratch.read(findings_table(name))
        if kept_for(outcome, name):
            builders[f"findings/frame={name}"] = partial(
                lambda fresh, name: fresh.unionByName(earlier_findings(outcome, name, fresh.schema)), fresh, name
            )
        else:
            scratch.register(f"findings/frame={name}", fresh.schema, scratch.files(findings_table(name)))
    return builders


def frame_findings(
    name: str,
    inputs: AuditInputs,
    ctx: AuditContext,
    coordinator: CoordinatorOutcome | None = None,
) -> DataFrame | None:
    """The findings of the checks on frame `name`; None when its inputs are absent. With the `coordinator`
    partitions whose records were taken over from a kept replay, a coordinator-local frame is checked on the other
    partitions' records and keeps their findings (pipeline.audit.state.kept_coordinator)."""
    frame = FRAMES[name]
    takes_over = frame.coordinator_local and has_findings(coordinator, name)
    frame_inputs = inputs
    if takes_over:
        frame_inputs = replace(inputs, coordinator_records=changed_records(inputs.coordinator_records, coordinator))
    rows = frame.build(frame_inputs, ctx)
    if rows is None:
        return None
    found = explode_findings(rows, [(c.rule, c.function(ctx)) for c in CHECKS[name]])
    return with_kept_findings(coordinator, name, found) if takes_over else found


def run_audit(
    batches: DataFrame,
    settings: AuditSettings,
    run_id: str,
    scratch: Scratch,
    reference_time_ms: int | None = None,
    empty_tables: frozenset[str] = frozenset(),
    batch_files: Sequence[FileGroup] | None = None,
    keeping: Keeping | None = None,
    log_files: Sequence[FileGroup] | None = None,
    **side_tables: DataFrame | None,
) -> AuditResult:
    """Audit `batches`, writing intermediate state under `scratch`.

    `side_tables` are the other tables of the same log dirs, by name (SIDE_TABLES): the `.txnindex` entries,
    producer-state snapshots, file problems, checkpoints, leader-epoch checkpoints, decoded `__transaction_state`
    records, transactional offset commits and the record payloads of a deep ingest. Each one given is checked
    against the replay. `empty_tables` names those of them the caller knows hold no rows (from the Delta log),
    whose frames need no plan. `batch_files` are the files holding `batches` by partition, when known
    (pipeline.tables.files_per_partition): the replay's tasks then read them instead of Spark exchanging the rows,
    and with `keeping` keep the replay in the warehouse and go on from the one an earlier run kept; `log_files` are
    those of `transaction_log`, whose partitions' records the coordinator pass's tasks then read themselves.
    """
    unknown = set(side_tables) - set(SIDE_TABLES)
    if unknown:
        raise TypeError(f"unknown side tables: {', '.join(sorted(unknown))}")
    ctx = AuditContext(settings, reference_time_ms)
    batches = _in_known_cluster(batches)
    side_tables = {name: None if table is None else _in_known_cluster(table) for name, table in side_tables.items()}
    inputs = build_state(batches, side_tables, ctx, scratch, batch_files, empty_tables, keeping, log_files)
    one_copy_each = batch_files is not None and all(group.copies == 1 for group in batch_files)
    found, frames_without_input = evaluate_frames(
        inputs,
        ctx,
        scratch,
        empty_tables,
        keeping and keeping.outcome,
        keeping and keeping.coordinator,
        one_copy_each,
    )
    findings = once_per_producer(found)
    summary = _with_finding_counts(inputs.partitions, findings)
    return AuditResult(
        findings=_with_run(findings, run_id, FINDINGS),
        transactions=_with_run(_with_causes(inputs), run_id, TRANSACTIONS),
        producer_state=_with_run(inputs.producer_state, run_id, PRODUCER_STATE),
        partition_summary=_with_run(summary, run_id, PARTITION_SUMMARY),
        global_transactions=_with_run(_global_transactions(inputs, batches), run_id, GLOBAL_TRANSACTIONS),
        read_committed=_with_run(
            build_read_committed(inputs.transactions, inputs.partitions, inputs.checkpoints, inputs.replicas),
            run_id,
            READ_COMMITTED,
        ),
        scratch=scratch,
        rules_without_input=without_input(frames_without_input),
    )


def _in_known_cluster(rows: DataFrame) -> DataFrame:
    """Rows with a null `cluster_id` (written before the column existed) in the unknown cluster "", so that they
    join as the partitions of one cluster."""
    return rows.withColumn("cluster_id", F.coalesce(F.col("cluster_id"), F.lit("")))


def _with_causes(inputs: AuditInputs) -> DataFrame:
    """The transactions with the cause, evidence and abort command of the open ones (null for the others)."""
    causes = inputs.transaction_causes.select(*TP_PID, "first_offset", *CAUSE_COLUMNS)
    return inputs.transactions.join(causes, on=[*TP_PID, "first_offset"], how="left")


def _global_transactions(inputs: AuditInputs, batches: DataFrame) -> DataFrame:
    """The coordinator decisions with their markers; no rows when no `__transaction_state` was ingested."""
    if inputs.coordinator_records is None:
        return batches.sparkSession.createDataFrame([], GLOBAL_TRANSACTIONS)
    return build_global_transactions(
        inputs.coordinator_records, inputs.markers, inputs.partitions, inputs.open_transactions
    )


def _with_finding_counts(partitions: DataFrame, findings: DataFrame) -> DataFrame:
    """Attach the partition's finding counts by severity and by rule, each map in the order of its keys: the order
    the counts are collected in depends on the tasks, and two runs of the same logs must write the same rows."""
    by_severity = (
        findings.groupBy(*TP, "severity")
        .count()
        .groupBy(*TP)
        .agg(
            F.map_from_entries(F.array_sort(F.collect_list(F.struct("severity", "count")))).alias(
                "findings_by_severity"
            )
        )
    )
    by_rule = (
        findings.groupBy(*TP, "rule_code")
        .count()
        .groupBy(*TP)
        .agg(F.map_from_entries(F.array_sort(F.collect_list(F.struct("rule_code", "count")))).alias("findings_by_rule"))
    )
    return partitions.join(by_severity, on=TP, how="left").join(by_rule, on=TP, how="left")
