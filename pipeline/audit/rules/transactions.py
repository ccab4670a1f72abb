"""Transaction structure rules TXN-001..TXN-007 (spec §6.4) and per-partition transaction reconstruction."""

from __future__ import annotations

from pipeline.audit.core import expr as E
from pipeline.audit.core.context import AuditContext
from pipeline.audit.core.expr import Expr
from pipeline.audit.core.frames import PRODUCER_BATCHES
from pipeline.audit.core.registry import Fires, check, rule
from schemas.batches import CONTROL_ABORT, CONTROL_COMMIT

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
