"""What frames and checks are given: the run's settings, and the audit's materialised state and side inputs."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame

from pipeline.config import AuditSettings


@dataclass(frozen=True)
class AuditContext:
    settings: AuditSettings
    reference_time_ms: int | None = None


@dataclass(frozen=True)
class AuditInputs:
    """Every DataFrame here is a scan of a table the engine materialised, or a side table as ingested.

    `batches`: every entry of the audited replicas with flags, file-order state and producer state (`replay`);
    `producer_batches`: its rows that carry producer state; `transactions`, `producer_state`, `segments`,
    `partition_producers`, `replicas`, `open_transactions`, `partitions`, `transaction_causes` (why each open
    transaction has no marker) and `coordinator_records`: derived state (pipeline.audit.state.materialised);
    `epoch_starts`: the first batch of each leader epoch, when there are leader-epoch checkpoints to check;
    `snapshot_states`: the replay's state of each snapshot entry's producer at its offset, when there are snapshots;
    `markers`: every COMMIT/ABORT marker of the producer rows, a row each
    (pipeline.audit.rules.transactions.markers_of); `all_batches`: every entry of every replica as ingested, for the
    rules that compare replicas; `copies`: each copy of a partition two or more brokers hold against the others, as the
    replay's tasks compared them (pipeline.audit.replay.replica_copies), None when they did not hold the copies. Side
    tables are None when the input had none; `payloads` is None unless the run is in deep mode; `live_producers`
    (what the leaders reported of their producers) only comes with a `kafka://` input.
    """

    batches: DataFrame
    producer_batches: DataFrame
    transactions: DataFrame
    producer_state: DataFrame
    segments: DataFrame
    partition_producers: DataFrame
    replicas: DataFrame
    open_transactions: DataFrame
    partitions: DataFrame
    all_batches: DataFrame
    transaction_causes: DataFrame
    coordinator_records: DataFrame | None = None
    epoch_starts: DataFrame | None = None
    snapshot_states: DataFrame | None = None
    markers: DataFrame | None = None
    copies: DataFrame | None = None
    txn_index: DataFrame | None = None
    producer_snapshots: DataFrame | None = None
    file_problems: DataFrame | None = None
    checkpoints: DataFrame | None = None
    leader_epochs: DataFrame | None = None
    offset_commits: DataFrame | None = None
    payloads: DataFrame | None = None
    live_producers: DataFrame | None = None
