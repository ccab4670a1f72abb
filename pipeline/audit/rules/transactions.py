"""Transaction structure rules TXN-001..TXN-007 (spec §6.4) and per-partition transaction reconstruction."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core import expr as E
from pipeline.audit.core.columns import accepted_data, cleared_after, epoch_bumping_marker
from pipeline.audit.core.context import AuditContext
from pipeline.audit.core.expr import Expr
from pipeline.audit.core.frames import PRODUCER_BATCHES
from pipeline.audit.core.mergeable import Mergeable, Part
from pipeline.audit.core.registry import Fires, check, rule
from schemas.batches import CONTROL_ABORT, CONTROL_COMMIT
from schemas.keys import TP_PID
from schemas.transactions import OUTCOME_ABORTED, OUTCOME_COMMITTED, OUTCOME_EMPTY, OUTCOME_OPEN

COORDINATOR_CLEANUP_INTERVAL_MS = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms

NON_TXN_IN_OPEN_TXN = rule(
    "TXN-001",
    "NON_TXN_IN_OPEN_TXN",
    "ERROR",
    "6.4",
    "A producer with an open transaction writes a non-transactional data batch; broker recovery of this log "
    "fails on it (the check throws for every append origin).",
    impact=(
        "Non-transactional data inside an open transaction is visible to read_committed consumers before the "
        "decision, and the broker fails to reload this log (the check throws during recovery too)."
    ),
    action=(
        "Find the client (by producer id) mixing transactional and plain sends on one producer; a broker that cannot "
        "start on this log needs the replica rebuilt from a healthy one."
    ),
)
TRANSACTIONS_MERGED = rule(
    "TXN-002",
    "TRANSACTIONS_MERGED",
    "CRITICAL",
    "6.4",
    "A producer's open transaction receives transactional data at a higher epoch before any marker: two "
    "transactions share one marker (the KIP-890 hazard).",
    impact=(
        "Two transactions share one marker: data of an aborted (or undecided) transaction is committed with the next "
        "one, or committed data is aborted with it (the KIP-890 hazard)."
    ),
    action=(
        "Upgrade brokers to 3.6+ with `transaction.partition.verification.enable=true` (KIP-890 part 1) and clients "
        "to 4.0+ on TV2; check consumers of the affected offsets for records of an aborted transaction."
    ),
)
EMPTY_TRANSACTION_MARKER = rule(
    "TXN-003",
    "EMPTY_TRANSACTION_MARKER",
    "INFO",
    "6.4",
    "Marker for a producer with no open transaction on this partition (nothing written after the partition "
    "was added, a re-sent marker, a TV2 retry or an admin abort). Listed in `transactions` as EMPTY.",
    impact=(
        "Usually nothing: a partition was added but not written, a marker was re-sent, a TV2 retry (KAFKA-19999) or "
        "an admin abort. It still takes an offset, which lag counters see."
    ),
    action="No action.",
    per_producer=True,
)
COORDINATOR_EPOCH_REGRESSION = rule(
    "TXN-004",
    "COORDINATOR_EPOCH_REGRESSION",
    "ERROR",
    "6.4",
    "Marker whose coordinator epoch is lower than that of an earlier marker of the producer on this "
    "partition: a zombie coordinator's marker.",
    impact=(
        "A marker from an older coordinator (a zombie after failover) was written after a newer one's: the older "
        "decision may contradict the newer one."
    ),
    action=(
        "Check the `__transaction_state` partition's leadership history around the marker and the broker version: "
        "KAFKA-9144 (fixed in 2.5) let producer state expire early so coordinator epochs regressed and transactions "
        "hung."
    ),
)
LONG_TRANSACTION = rule(
    "TXN-005",
    "LONG_TRANSACTION",
    "WARN",
    "6.4",
    "Committed transaction whose data spans (first data batch timestamp to marker timestamp) longer than "
    "transaction.max.timeout.ms plus the 10 s abort check interval: the coordinator should have aborted it.",
    impact=(
        "A transaction committed after it should have timed out: the LSO was held back that long, and read_committed "
        "consumers waited for it."
    ),
    action=(
        "Check broker and client clocks (CreateTime is client time) or whether the topic uses LogAppendTime; compare "
        "with the producer's `transaction.timeout.ms` and `transaction.max.timeout.ms`."
    ),
)
PID_MIXED_MODES = rule(
    "TXN-006",
    "PID_MIXED_MODES",
    "WARN",
    "6.4",
    "The same producer id writes both non-transactional and transactional batches; reported once, at the "
    "first batch whose mode differs from the producer's earlier batches.",
    impact=(
        "A producer id is allocated per producer session; one id writing both plain and transactional data suggests "
        "id reuse or corruption, which breaks fencing and duplicate detection."
    ),
    action=(
        "Find the clients behind the producer id; check for a client that reuses producer ids, or compare with "
        "another replica."
    ),
)
COMMIT_THEN_ABORT_SAME_EPOCH = rule(
    "TXN-007",
    "COMMIT_THEN_ABORT_SAME_EPOCH",
    "WARN",
    "6.4",
    "TV2 producer with two markers of different types at the same epoch and no data between them.",
    impact=(
        "Under TV2 a second marker at the same epoch can only be a retry of the same decision; one of a different "
        "type means the transaction's outcome on this partition is ambiguous."
    ),
    action=(
        "Compare with the Prepare* record of the producer in `__transaction_state` and with other partitions of the "
        "transaction."
    ),
)


def _marker_type(column: str = "control_type") -> Expr:
    return E.when(E.col(column) == CONTROL_COMMIT, E.lit("COMMIT")).when(E.col(column) == CONTROL_ABORT, E.lit("ABORT"))


def _txn_data() -> Expr:
    return E.col("is_data") & E.col("is_transactional")


def _plain_data() -> Expr:
    return E.col("is_data") & ~E.col("is_transactional")


def _open_evidence() -> dict[str, Expr]:
    return {"transaction_first_offset": E.col("txn_first_offset"), "transaction_epoch": E.col("txn_max_epoch")}


@check(NON_TXN_IN_OPEN_TXN, on=PRODUCER_BATCHES)
def non_txn_in_open_txn(ctx: AuditContext) -> Fires:
    return Fires(
        _plain_data() & E.col("txn_open"),
        E.format_string(
            "non-transactional batch of producer %d inside its transaction open since offset %d",
            E.col("producer_id"),
            E.col("txn_first_offset"),
        ),
        _open_evidence(),
    )


@check(TRANSACTIONS_MERGED, on=PRODUCER_BATCHES)
def transactions_merged(ctx: AuditContext) -> Fires:
    return Fires(
        _txn_data() & E.col("txn_open") & (E.col("producer_epoch") > E.col("txn_max_epoch")),
        E.format_string(
            "epoch %d data joins the transaction open since offset %d at epoch %d",
            E.col("producer_epoch"),
            E.col("txn_first_offset"),
            E.col("txn_max_epoch"),
        ),
        _open_evidence(),
    )


@check(EMPTY_TRANSACTION_MARKER, on=PRODUCER_BATCHES)
def empty_transaction_marker(ctx: AuditContext) -> Fires:
    return Fires(
        E.col("is_marker") & ~E.col("txn_open"),
        E.format_string("%s marker of producer %d closes no open transaction", _marker_type(), E.col("producer_id")),
        {"marker": _marker_type(), "coordinator_epoch": E.col("coordinator_epoch")},
    )


@check(COORDINATOR_EPOCH_REGRESSION, on=PRODUCER_BATCHES)
def coordinator_epoch_regression(ctx: AuditContext) -> Fires:
    return Fires(
        E.col("is_marker") & (E.col("coordinator_epoch") < E.col("state_coordinator_epoch")),
        E.format_string(
            "marker coordinator epoch %d after %d", E.col("coordinator_epoch"), E.col("state_coordinator_epoch")
        ),
        {
            "coordinator_epoch": E.col("coordinator_epoch"),
            "previous_coordinator_epoch": E.col("state_coordinator_epoch"),
        },
    )


@check(LONG_TRANSACTION, on=PRODUCER_BATCHES)
def long_transaction(ctx: AuditContext) -> Fires:
    limit = ctx.settings.transaction_max_timeout_ms + COORDINATOR_CLEANUP_INTERVAL_MS
    duration = E.col("max_timestamp") - E.col("txn_start_timestamp")
    return Fires(
        E.col("is_marker") & E.col("txn_open") & (E.col("control_type") == CONTROL_COMMIT) & (duration > limit),
        E.format_string(
            "transaction from offset %d committed after %d ms (limit %d ms)",
            E.col("txn_first_offset"),
            duration,
            E.lit(limit),
        ),
        {**_open_evidence(), "duration_ms": duration},
    )


@check(PID_MIXED_MODES, on=PRODUCER_BATCHES)
def pid_mixed_modes(ctx: AuditContext) -> Fires:
    seen_txn = E.coalesce(E.col("seen_txn_data"), E.lit(False))
    seen_plain = E.coalesce(E.col("seen_plain_data"), E.lit(False))
    return Fires(
        (_txn_data() & ~seen_txn & seen_plain) | (_plain_data() & ~seen_plain & seen_txn),
        E.format_string(
            "producer %d writes %s batches after %s ones",
            E.col("producer_id"),
            E.when(E.col("is_transactional"), E.lit("transactional")).otherwise(E.lit("non-transactional")),
            E.when(E.col("is_transactional"), E.lit("non-transactional")).otherwise(E.lit("transactional")),
        ),
        {"is_transactional": E.col("is_transactional")},
    )


@check(COMMIT_THEN_ABORT_SAME_EPOCH, on=PRODUCER_BATCHES)
def commit_then_abort_same_epoch(ctx: AuditContext) -> Fires:
    return Fires(
        E.col("is_tv2")
        & E.col("is_marker")
        & E.coalesce(E.col("prev_is_marker"), E.lit(False))
        & (E.col("prev_epoch") == E.col("producer_epoch"))
        & (E.col("prev_control_type") != E.col("control_type")),
        E.format_string(
            "%s after %s at the same epoch %d",
            _marker_type(),
            _marker_type("prev_control_type"),
            E.col("producer_epoch"),
        ),
        {"marker": _marker_type(), "previous_marker": _marker_type("prev_control_type")},
    )


def transaction_parts() -> Mergeable:
    """The transactions' aggregate of the producer rows, by (topic, partition, producer id, group): the
    transactional data of a marker group plus the marker that closes it (at most one per group)."""
    txn_data = E.col("is_data") & E.col("is_transactional")
    marker = E.col("is_marker")

    def data(column: str) -> Expr:
        return E.when(txn_data, E.col(column))

    def at_marker(name: str, column: str) -> Part:
        return Part(name, "max", E.when(marker, E.col(column)))

    # The version is one per producer (the replay's conclusion over its rows), so grouping by it is taking it; a
    # first() of this text would make Spark sort every row to aggregate them instead of hashing them.
    return Mergeable(
        "transactions",
        (*TP_PID, "txn_group", "transaction_version"),
        (
            Part("data_epoch", "first", data("producer_epoch"), data("base_offset")),
            Part("first_offset", "min", data("base_offset")),
            Part("last_offset", "max", data("last_offset")),
            at_marker("marker_offset", "base_offset"),
            at_marker("marker_epoch", "producer_epoch"),
            at_marker("coordinator_epoch", "coordinator_epoch"),
            at_marker("control_type", "control_type"),
            at_marker("marker_timestamp", "max_timestamp"),
            at_marker("marker_segment_base_offset", "segment_base_offset"),
            Part("batch_count", "count", data("base_offset")),
            Part("record_count", "sum", data("record_count")),
            Part("start_timestamp", "first", data("max_timestamp"), data("base_offset")),
            Part("last_data_timestamp", "max", data("max_timestamp")),
            Part("broker_id", "any", E.col("broker_id")),
        ),
        rows=E.col("is_producer_row") & (txn_data | marker),
    )


def transactions_of(parts: DataFrame) -> DataFrame:
    """One row per transaction from its parts (`transaction_parts`).

    Groups with a marker but no transactional data are EMPTY (spec §6.0a.7); groups with data and no
    marker are OPEN. The marker's control type and segment ride along for the `.txnindex` comparison.
    """
    outcome = (
        F.when(F.col("marker_offset").isNull(), F.lit(OUTCOME_OPEN))
        .when(F.col("batch_count") == 0, F.lit(OUTCOME_EMPTY))
        .when(F.col("control_type") == CONTROL_COMMIT, F.lit(OUTCOME_COMMITTED))
        .otherwise(F.lit(OUTCOME_ABORTED))
    )
    end_timestamp = F.coalesce(F.col("marker_timestamp"), F.col("last_data_timestamp"))
    return parts.select(
        *TP_PID,
        F.coalesce("data_epoch", "marker_epoch").alias("producer_epoch"),
        "first_offset",
        "last_offset",
        "marker_offset",
        "marker_epoch",
        "coordinator_epoch",
        outcome.alias("outcome"),
        "batch_count",
        F.coalesce("record_count", F.lit(0)).cast("long").alias("record_count"),
        "start_timestamp",
        end_timestamp.alias("end_timestamp"),
        (end_timestamp - F.col("start_timestamp")).alias("duration_ms"),
        "transaction_version",
        "broker_id",
        "control_type",
        "marker_segment_base_offset",
    )


def markers_of(parts: DataFrame) -> DataFrame:
    """Every COMMIT/ABORT marker of the producer rows, a row each with the columns `batches` names them by, from the
    transactions' parts (`transaction_parts`): a group ends at its one marker. Read here instead of from the replay,
    whose every row a scan for the markers reads; an empty control batch, which the cleaner leaves and the broker
    ignores, is not a producer row and so not among them."""
    return parts.where(F.col("marker_offset").isNotNull()).select(
        *TP_PID,
        F.col("marker_epoch").alias("producer_epoch"),
        F.col("marker_offset").alias("base_offset"),
        "control_type",
        "coordinator_epoch",
        F.col("marker_timestamp").alias("max_timestamp"),
    )


def build_transactions(replayed: DataFrame) -> DataFrame:
    """One row per transaction of the replay `replayed` (`transactions_of`); aggregated by (topic,
    partition, producer id, group): no exchange beyond the replay's."""
    return transactions_of(transaction_parts().of(replayed))


def producer_state_parts() -> Mergeable:
    """The producer state's aggregate of the producer rows, by (topic, partition, producer id)."""
    order = E.col("base_offset")
    accepted = accepted_data()
    group_open = E.when(E.col("is_marker"), E.lit(None)).otherwise(
        E.coalesce(E.col("txn_first_offset"), E.when(E.col("is_data") & E.col("is_transactional"), order))
    )
    # By the version, one per producer, as the transactions: aggregated by hash, not by sorting the rows.
    return Mergeable(
        "producer_state",
        (*TP_PID, "transaction_version"),
        (
            Part("producer_epoch", "max", E.col("producer_epoch")),
            Part("first_offset", "min", order),
            Part("accepted_sequence", "last", E.when(accepted, E.col("last_sequence")), E.when(accepted, order)),
            Part("last_bump", "max", E.when(epoch_bumping_marker(), order)),
            Part("last_offset", "max", E.when(E.col("is_data"), E.col("last_offset"))),
            Part("last_timestamp", "last", E.col("max_timestamp"), order),
            Part("coordinator_epoch", "max", E.when(E.col("is_marker"), E.col("coordinator_epoch"))),
            Part("current_txn_start_offset", "last", group_open, order),
            Part("batch_count", "count", E.lit(1)),
            Part("is_transactional", "max", E.col("is_transactional")),
            Part("broker_id", "any", E.col("broker_id")),
        ),
        rows=E.col("is_producer_row"),
    )


def producer_state_of(parts: DataFrame) -> DataFrame:
    """State per (cluster, topic, partition, producer id) after the last batch, as describe-producers reports it,
    from its parts (`producer_state_parts`): the last sequence is -1 once a marker that changed the epoch cleared the
    batch window (pipeline.audit.core.columns.window_cleared); the last accepted data batch is where the sequence is.
    `first_offset`, the producer's first batch, is not in the `producer_state` table."""
    cleared = cleared_after(F.col("accepted_sequence_at"), F.col("last_bump"))
    return parts.select(
        *TP_PID,
        "transaction_version",
        "producer_epoch",
        "first_offset",
        F.when(cleared, F.lit(-1)).otherwise(F.col("accepted_sequence")).alias("last_sequence"),
        "last_offset",
        "last_timestamp",
        "coordinator_epoch",
        "current_txn_start_offset",
        "batch_count",
        "is_transactional",
        "broker_id",
    )


def build_producer_state(replayed: DataFrame) -> DataFrame:
    """The producer state (`producer_state_of`) of the replay `replayed`."""
    return producer_state_of(producer_state_parts().of(replayed))
