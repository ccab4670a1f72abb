"""Epoch and fencing rules EPO-001..EPO-007 (spec §6.3).

EPO-003/004/005 judge a marker by the transaction version of the transaction it closes (`is_tv2` of the
replay): configured, recorded by the coordinator, or inferred (pipeline.audit.replay.producer_kernel). Every abort
bumps a TV2 transaction's epoch once, the coordinator's (fence, timeout) as the client's (spec §3.4, KAFKA-19367),
so on the partition a TV2 fence by a new instance shows only in the producer's next data, at two above the
aborted data (`next_data_epoch`); a timeout, which the same producer goes on from, shows only in the
coordinator's records (pipeline.audit.rules.cross_checks.epochs).
"""

from __future__ import annotations

from pipeline.audit.core import expr as E
from pipeline.audit.core.context import AuditContext
from pipeline.audit.core.expr import Expr
from pipeline.audit.core.frames import PRODUCER_BATCHES
from pipeline.audit.core.registry import Fires, check, rule
from schemas.batches import CONTROL_ABORT

EPOCH_MAX = 32767

DATA_EPOCH_REGRESSION = rule(
    "EPO-001",
    "DATA_EPOCH_REGRESSION",
    "ERROR",
    "6.3",
    "Data batch at an epoch lower than one the producer already used on this partition: a zombie write the "
    "leader should have fenced. WARN when the producer was silent for the expiry interval before it.",
    also=("WARN",),
    impact=(
        "A zombie producer wrote after it was fenced: its records are on disk although a newer instance owns the "
        "producer id, so exactly-once does not hold (duplicates or records outside any decided transaction)."
    ),
    action=(
        "Find the old instance (producer id and epoch) and stop it; check the broker version accepted the write and "
        "whether the producer state had expired (WARN). Compare with `__transaction_state` history "
        "(`kafka-dump-log.sh --transaction-log-decoder`)."
    ),
)
MARKER_EPOCH_REGRESSION = rule(
    "EPO-002",
    "MARKER_EPOCH_REGRESSION",
    "ERROR",
    "6.3",
    "Transaction marker at an epoch lower than the producer's current epoch on this partition.",
    impact=(
        "A marker from an older epoch than the producer's current one may close the wrong transaction: records of "
        "the current transaction may be committed or aborted by a stale decision."
    ),
    action=(
        "Check for a coordinator failover around the marker (the `__transaction_state` partition's leader) and "
        "compare replicas; report with the broker version."
    ),
)
TV2_MARKER_EPOCH_NOT_GREATER = rule(
    "EPO-003",
    "TV2_MARKER_EPOCH_NOT_GREATER",
    "ERROR",
    "6.3",
    "Transactions V2 producer whose marker carries the data epoch of the transaction it closes (TV2 markers "
    "must bump it); the version is the configured one, else the one the coordinator recorded for the "
    "transaction in `__transaction_state`, else inferred from earlier bumping commits. ERROR for brokers "
    "from 4.2 (KIP-1228 enforces it), WARN when audit.broker_version is older than 4.2.",
    also=("WARN",),
    impact=(
        "A TV2 marker at the data epoch cannot be told apart from a late marker of the previous transaction: exactly "
        "the hazard KIP-890 closes, where a delayed decision lands in the next transaction."
    ),
    action=(
        "Check `audit.broker_version`: brokers before 4.2 do not enforce it (KIP-1228). Upgrade brokers to 4.2+ and "
        "check the producer client is 4.0+."
    ),
)
FENCE_ABORT = rule(
    "EPO-004",
    "FENCE_ABORT",
    "INFO",
    "6.3",
    "ABORT closing an open transaction one epoch above its data: a timeout abort or a new producer instance "
    "fenced the old one. Under TV2 every abort is one above, so a TV2 one is a fence only when the producer's "
    "next data on the partition, or its Empty record in __transaction_state, is two above the aborted data, or "
    "the coordinator's records show a timeout abort (XTX-010's shape); a TV2 ABORT two above its data is the "
    "4.0.0 coordinator's double bump (KAFKA-19367), reported here with that reason.",
    impact=(
        "The transaction was aborted by the coordinator, not by the producer: it timed out or a new instance with "
        "the same transactional id fenced the old one. Its records are hidden from read_committed consumers."
    ),
    action=(
        "If unexpected, raise the producer's `transaction.timeout.ms` or find the restart that fenced it; check the "
        "application retried the aborted work."
    ),
    per_producer=True,
)
MARKER_EPOCH_JUMP = rule(
    "EPO-005",
    "MARKER_EPOCH_JUMP",
    "WARN",
    "6.3",
    "Marker epoch more than one above the transaction's data epoch, which the coordinator bumps once per "
    "transaction end (TV2) or fence (TV0/1), except two above on a TV2 ABORT (the 4.0.0 double bump, EPO-004).",
    impact=(
        "A marker epoch further ahead of the data than any coordinator bump suggests a marker written for another "
        "transaction or a lost coordinator history."
    ),
    action=(
        "Compare with the transactional id's `__transaction_state` records (`kafka-dump-log.sh "
        "--transaction-log-decoder`) and check for admin aborts (`kafka-transactions.sh abort`)."
    ),
)
EPOCH_SKIP = rule(
    "EPO-006",
    "EPOCH_SKIP",
    "INFO",
    "6.3",
    "A producer's epoch increases by more than one between consecutive entries on this partition "
    "(InitProducerId or fence bumps, or epochs used on other partitions only). Not for a TV2 producer, whose "
    "epoch counts its transactions: a skip only means transactions that did not touch this partition.",
    impact=("Usually nothing: producer restarts, fence bumps, or epochs used only on other partitions."),
    action="No action unless it comes with sequence or marker findings for the same producer.",
    per_producer=True,
)
TXN_EPOCH_MAX = rule(
    "EPO-007",
    "TXN_EPOCH_MAX",
    "WARN",
    "6.3",
    "Transactional data at epoch 32767: the coordinator rotates the producer id before that, so clients never "
    "get it for transactional data (idempotent producers may legally reach it).",
    impact=(
        "The coordinator rotates the producer id before epoch 32767, so transactional data there was not "
        "written by a normal transactional session, and the epoch cannot be bumped again to fence it."
    ),
    action=(
        "Check the client library and whether a tool wrote the batches; compare with `__transaction_state` for the "
        "producer id."
    ),
)


def _known() -> Expr:
    return E.col("state_epoch").isNotNull()


def _closing() -> Expr:
    """A marker that closes an open transaction."""
    return E.col("is_marker") & E.col("txn_open")


def _bump() -> Expr:
    """How far the marker's epoch is above the data epoch of the transaction it closes."""
    return E.col("producer_epoch") - E.col("txn_max_epoch")


def closing_abort() -> Expr:
    return _closing() & (E.col("control_type") == CONTROL_ABORT)


def _double_bump() -> Expr:
    """A TV2 ABORT two above its data: a 4.0.0 coordinator's fence or timeout abort (KAFKA-19367)."""
    return closing_abort() & E.col("is_tv2") & (_bump() == 2)


def tv2_fenced_by_next_data() -> Expr:
    """A TV2 ABORT one above its data whose producer's next data here is one further: a new instance's (its
    InitProducerId wrote Empty there)."""
    return (
        closing_abort()
        & E.col("is_tv2")
        & (_bump() == 1)
        & E.col("next_data_epoch").eqNullSafe(E.col("txn_max_epoch") + 2)
    )


def _fence_abort() -> Expr:
    return (closing_abort() & ~E.col("is_tv2") & (_bump() == 1)) | _double_bump() | tv2_fenced_by_next_data()


def _evidence() -> dict[str, Expr]:
    return {"state_epoch": E.col("state_epoch"), "epoch": E.col("producer_epoch")}


def _marker_evidence() -> dict[str, Expr]:
    return {
        "transaction_epoch": E.col("txn_max_epoch"),
        "marker_epoch": E.col("producer_epoch"),
        "transaction_first_offset": E.col("txn_first_offset"),
        "transaction_version": E.col("transaction_version"),
    }


def fence_message(reason: Expr) -> Expr:
    return E.format_string(
        "transaction from offset %d aborted at epoch %d over data epoch %d (%s)",
        E.col("txn_first_offset"),
        E.col("producer_epoch"),
        E.col("txn_max_epoch"),
        reason,
    )


def fence_evidence() -> dict[str, Expr]:
    return {**_marker_evidence(), "next_data_epoch": E.col("next_data_epoch")}


@check(DATA_EPOCH_REGRESSION, on=PRODUCER_BATCHES)
def data_epoch_regression(ctx: AuditContext) -> Fires:
    return Fires(
        E.col("is_data") & _known() & (E.col("producer_epoch") < E.col("state_epoch")),
        E.format_string(
            "producer %d writes data at epoch %d after epoch %d",
            E.col("producer_id"),
            E.col("producer_epoch"),
            E.col("state_epoch"),
        ),
        _evidence(),
        severity=E.when(E.col("state_expired"), E.lit("WARN")).otherwise(E.lit("ERROR")),
    )


@check(MARKER_EPOCH_REGRESSION, on=PRODUCER_BATCHES)
def marker_epoch_regression(ctx: AuditContext) -> Fires:
    return Fires(
        E.col("is_marker") & _known() & (E.col("producer_epoch") < E.col("state_epoch")),
        E.format_string(
            "marker of producer %d at epoch %d after epoch %d",
            E.col("producer_id"),
            E.col("producer_epoch"),
            E.col("state_epoch"),
        ),
        _evidence(),
    )


@check(TV2_MARKER_EPOCH_NOT_GREATER, on=PRODUCER_BATCHES)
def tv2_marker_epoch_not_greater(ctx: AuditContext) -> Fires:
    return Fires(
        _closing() & E.col("is_tv2") & (_bump() == 0),
        E.format_string(
            "TV2 marker at the transaction's own epoch %d (expected %d)",
            E.col("producer_epoch"),
            E.col("producer_epoch") + 1,
        ),
        _marker_evidence(),
        severity=E.lit("WARN" if ctx.settings.broker_older_than("4.2") else "ERROR"),
    )


@check(FENCE_ABORT, on=PRODUCER_BATCHES)
def fence_abort(ctx: AuditContext) -> Fires:
    return Fires(
        _fence_abort(),
        fence_message(
            E.when(_double_bump(), E.lit("fenced or timed out by a 4.0.0 coordinator, which bumps twice: KAFKA-19367"))
            .when(E.col("is_tv2"), E.format_string("fenced: the next data is at epoch %d", "next_data_epoch"))
            .otherwise(E.lit("fenced or timed out"))
        ),
        fence_evidence(),
    )


@check(MARKER_EPOCH_JUMP, on=PRODUCER_BATCHES)
def marker_epoch_jump(ctx: AuditContext) -> Fires:
    return Fires(
        _closing() & (_bump() > 1) & ~_double_bump(),
        E.format_string(
            "marker epoch %d is %d above the transaction's data epoch %d",
            E.col("producer_epoch"),
            _bump(),
            E.col("txn_max_epoch"),
        ),
        _marker_evidence(),
    )


@check(EPOCH_SKIP, on=PRODUCER_BATCHES)
def epoch_skip(ctx: AuditContext) -> Fires:
    return Fires(
        _known()
        & ((E.col("producer_epoch") - E.col("state_epoch")) > 1)
        & ~E.coalesce(E.col("transaction_version").startswith("2"), E.lit(False)),
        E.format_string(
            "producer %d epoch %d -> %d", E.col("producer_id"), E.col("state_epoch"), E.col("producer_epoch")
        ),
        _evidence(),
    )


@check(TXN_EPOCH_MAX, on=PRODUCER_BATCHES)
def txn_epoch_max(ctx: AuditContext) -> Fires:
    return Fires(
        E.col("is_data") & E.col("is_transactional") & (E.col("producer_epoch") == EPOCH_MAX),
        E.format_string("transactional data of producer %d at epoch 32767", E.col("producer_id")),
        _evidence(),
    )
