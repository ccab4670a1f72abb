"""The audit's state, materialised once per run: what every frame and output table reads.

`replay` (every entry with file-order and producer state, pipeline.audit.replay.plan) is computed with one exchange
of the batches; `transactions`, `producer_state` and `epoch_starts` (aggregated from parts the replay's tasks
take, merged with those a run keeps beside a kept replay: pipeline.audit.state.kept_parts), `replicas`,
`open_transactions`, `partitions` and `transaction_causes` are aggregates and joins of it, each a small plan over
scans (`epoch_starts` a join built into the plans that read it); `snapshot_states` is read from the replay's files by
a pass of its own (pipeline.audit.replay.snapshot_states), and `coordinator_records` from the `transaction_log` files
by another (pipeline.audit.replay.coordinator_records).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.core.mergeable import Mergeable
from pipeline.audit.core.scratch import Scratch
from pipeline.audit.replay.files import Keeping, replay_kept
from pipeline.audit.replay.plan import replay_pass
from pipeline.audit.replay.replica_copies import COPIES_TABLE
from pipeline.audit.replay.snapshot_states import ReplayUnit, snapshot_keys, snapshot_states_pass
from pipeline.audit.replay.task_outputs import checked_pass, parts_table, task_outputs
from pipeline.audit.state.hanging import transaction_causes
from pipeline.audit.state.kept_coordinator import coordinator_records
from pipeline.audit.state.kept_parts import kept_parts
from pipeline.audit.state.leader_epochs import epoch_start_parts, epoch_starts
from pipeline.audit.state.partitions import open_transactions, partition_offsets, partition_producer_parts
from pipeline.audit.state.replicas import audited_replicas
from pipeline.audit.state.segments import segment_parts
from pipeline.audit.state.snapshots import audited_non_kraft, producer_entries
from pipeline.audit.state.transactions import (
    markers_of,
    producer_state_of,
    producer_state_parts,
    transaction_parts,
    transactions_of,
)
from pipeline.tables.files_per_partition import FileGroup


def replay_aggregates() -> tuple[Mergeable, ...]:
    """The aggregates of the replay the replay's tasks take of the rows they replay."""
    return (
        transaction_parts(),
        producer_state_parts(),
        segment_parts(),
        partition_producer_parts(),
        epoch_start_parts(),
    )


def build_state(
    batches: DataFrame,
    side: dict[str, DataFrame | None],
    ctx: AuditContext,
    scratch: Scratch,
    batch_files: Sequence[FileGroup] | None = None,
    empty_tables: frozenset[str] = frozenset(),
    keeping: Keeping | None = None,
    log_files: Sequence[FileGroup] | None = None,
) -> AuditInputs:
    """Materialise the state in dependency order, independent tables side by side.

    `side` holds the side tables (absent ones None). `batch_files`, the files of `batches` by partition, with
    `keeping`, where the run keeps its replay, lets the replay's tasks read them themselves and go on from the
    replay an earlier run kept (pipeline.audit.replay.files) instead of exchanging the rows; `log_files`, those of
    `transaction_log`, let the coordinator records' tasks read theirs. State that only the frames of a side table read
    is not built when `empty_tables` names it.
    """
    settings = ctx.settings
    checkpoints = side.get("checkpoints")
    transaction_log = side.get("transaction_log")
    exchanged = replay_pass(batches, settings, transaction_log, checkpoints)
    aggregates = replay_aggregates()
    outputs = task_outputs(ctx, exchanged.schema, batches.sparkSession, scratch.path("task"), aggregates)
    if batch_files and keeping is not None:
        replayed, units = replay_kept(
            batches, batch_files, settings, transaction_log, checkpoints, scratch, keeping, outputs
        )
        audited = scratch.read("replica_facts")  # a row per audited replica, which the replay's tasks read
        copies = scratch.read(COPIES_TABLE)  # the tasks held every copy of their partitions
    else:
        schemas = {"replay": exchanged.schema, **{t: from_arrow_schema(s) for t, s in outputs.schemas().items()}}
        scratch.materialise_tables(checked_pass(exchanged, outputs), schemas)
        replayed = scratch.read("replay")
        units = [ReplayUnit((path,)) for path in scratch.files("replay")]
        audited = replayed
        copies = None
    producer_batches = replayed.where(F.col("is_producer_row"))
    first = scratch.materialise_all(
        {
            **{parts_table(aggregate): partial(kept_parts, aggregate, scratch, keeping) for aggregate in aggregates},
            "coordinator_records": lambda: (
                None
                if transaction_log is None
                else coordinator_records(transaction_log, audited, checkpoints, scratch, keeping, log_files)
            ),
        }
    )
    for name in map(parts_table, aggregates):  # the tasks' parts stand unless a partition went on from kept ones
        if first[name] is None:
            first[name] = scratch.read(name)
    transactions = transactions_of(first["parts/transactions"])
    segments, records = first["parts/segments"], first["coordinator_records"]
    replicas = scratch.materialise(
        audited_replicas(segments, side.get("txn_index"), side.get("producer_snapshots")), "replicas"
    )
    open_txns = scratch.materialise(
        open_transactions(transactions, segments, settings, ctx.reference_time_ms), "open_transactions"
    )
    causes = transaction_causes(open_txns, transactions, records)
    builders = {
        "partitions": lambda: partition_offsets(
            replayed, first["parts/partition_producers"], segments, transactions, open_txns
        )
    }
    if scratch.is_empty("open_transactions"):  # no transaction to find the cause of: no plan
        scratch.register("transaction_causes", causes.schema, [])
    else:
        builders["transaction_causes"] = lambda: causes
    last = scratch.materialise_all(builders)
    leader_epochs = side.get("leader_epochs")
    starts = None
    if leader_epochs is not None and "leader_epochs" not in empty_tables:
        starts = epoch_starts(first["parts/epoch_starts"], last["partitions"])
    snapshots = side.get("producer_snapshots")
    states = None
    if snapshots is not None and "producer_snapshots" not in empty_tables:
        entries = producer_entries(audited_non_kraft(snapshots, replicas, settings))
        scratch.materialise(snapshot_keys(entries), "snapshot_keys")
        states_pass = snapshot_states_pass(batches.sparkSession, units, scratch.path("snapshot_keys"))
        states = scratch.materialise_pass(states_pass, "snapshot_states")
    return AuditInputs(
        batches=replayed,
        producer_batches=producer_batches,
        transactions=transactions,
        producer_state=producer_state_of(first["parts/producer_state"]),
        segments=segments,
        partition_producers=first["parts/partition_producers"],
        replicas=replicas,
        open_transactions=open_txns,
        partitions=last["partitions"],
        all_batches=batches,
        transaction_causes=scratch.read("transaction_causes"),
        coordinator_records=records,
        epoch_starts=starts,
        snapshot_states=states,
        markers=markers_of(first["parts/transactions"]),
        copies=copies,
        txn_index=side.get("txn_index"),
        producer_snapshots=side.get("producer_snapshots"),
        file_problems=side.get("file_problems"),
        checkpoints=checkpoints,
        leader_epochs=leader_epochs,
        offset_commits=side.get("offset_commits"),
        payloads=side.get("payloads"),
        live_producers=side.get("live_producers"),
    )
