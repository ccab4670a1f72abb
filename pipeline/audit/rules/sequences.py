"""Idempotence rules SEQ-001..SEQ-009 (spec §6.2): sequence continuity, duplicates, wraparound.

Checked on client-topic data batches at the epoch of their run (`seq_row`); coordinator-written topics
write constant sequence 0 and are never sequence-checked by the broker (§2.1), so they are skipped.
"""

from __future__ import annotations

from pipeline.audit.core import expr as E
from pipeline.audit.core.columns import INT32_MAX, next_sequence
from pipeline.audit.core.context import AuditContext
from pipeline.audit.core.expr import Expr
from pipeline.audit.core.frames import PRODUCER_BATCHES
from pipeline.audit.core.registry import Fires, check, rule

OUT_OF_ORDER = rule(
    "SEQ-001",
    "OUT_OF_ORDER",
    "ERROR",
    "6.2",
    "Known producer, same epoch, non-empty window, not a duplicate, and the base sequence does not follow "
    "the last sequence written (int32 wraparound allowed). Batches after a forward gap are judged against "
    "the gap's end. When the producer was silent for the producer-id expiry interval this is SEQ-007. INFO for "
    "a forward gap on a compacted partition at or below its cleaner checkpoint: the cleaner removes whole "
    "batches whose records are all superseded, so the gap is its normal trace.",
    also=("INFO",),
    impact=(
        "A sequence gap means batches the producer sent are not on this replica (lost records), or the broker "
        "accepted an out-of-order write it should have rejected with OUT_OF_ORDER_SEQUENCE_NUMBER."
    ),
    action=(
        "Find the producer by id (`kafka-transactions.sh describe-producers --topic T --partition N`) and check its "
        "client logs for OutOfOrderSequence errors around the offset; check producer config `enable.idempotence`, "
        "`max.in.flight.requests.per.connection` (at most 5) and `acks=all`, and compare with other replicas."
    ),
    per_producer=True,
)
NOT_ZERO_AFTER_EMPTY_WINDOW = rule(
    "SEQ-002",
    "NOT_ZERO_AFTER_EMPTY_WINDOW",
    "ERROR",
    "6.2",
    "Known producer, same epoch, but its window was cleared inside the audited range (a marker bumped the "
    "epoch) and the next data batch does not start at sequence 0. When the run began with the producer's "
    "first retained entry this is SEQ-006 instead (§6.0a.4); on TV2 producers it is SEQ-009.",
    impact=(
        "After an epoch bump the producer must restart at sequence 0; a non-zero start means records at the lower "
        "sequences are missing or the broker skipped its sequence check."
    ),
    action=(
        "Check the producer client version and its logs around the epoch bump; compare with other replicas for "
        "missing batches."
    ),
)
NOT_ZERO_ON_NEW_EPOCH = rule(
    "SEQ-003",
    "NOT_ZERO_ON_NEW_EPOCH",
    "ERROR",
    "6.2",
    "Known producer writes data at a higher epoch that does not start at sequence 0.",
    impact=(
        "A new epoch that does not start at sequence 0 means the first batches of the new producer session are "
        "missing, or the broker accepted a write it should have rejected."
    ),
    action=(
        "Look up the producer (`kafka-transactions.sh describe-producers`) and its client logs around the bump; "
        "compare replicas for missing batches."
    ),
)
DUPLICATE_BATCH = rule(
    "SEQ-004",
    "DUPLICATE_BATCH",
    "CRITICAL",
    "6.2",
    "Data batch whose (producer id, epoch, base sequence, last sequence) equals one of the last five data "
    "batches of its epoch on this partition: the broker would have answered with the cached offsets, so the "
    "records are on disk twice. WARN when the producer was silent for the expiry interval before it.",
    also=("WARN",),
    impact=(
        "The same records are on disk twice: every consumer, including read_committed ones, receives them twice. "
        "Idempotence did not hold (WARN: the producer's state may have expired, which allows it)."
    ),
    action=(
        "Check the producer config: `enable.idempotence=true`, `max.in.flight.requests.per.connection` at most 5 "
        "(the broker caches 5 batches; a hard error from client 4.0, KAFKA-17927) and the broker version; for WARN "
        "compare the silence with `producer.id.expiration.ms`. Downstream, deduplicate the batch's offsets."
    ),
)
OVERLAPPING_RANGE = rule(
    "SEQ-005",
    "OVERLAPPING_RANGE",
    "CRITICAL",
    "6.2",
    "Same producer and epoch, the sequence range intersects a range already written but is not identical "
    "(a re-batched retry written twice). ERROR when the range it repeats lies outside the 5-batch window. "
    "The position compared against is the highest sequence already on disk for the epoch; after an "
    "overlap the broker would have kept its older position, so a batch that continues the overlapping one "
    "is reported as overlapping too: its records are duplicated on disk all the same.",
    also=("ERROR",),
    impact="Part of a retried batch was written twice: the overlapping records are duplicated for every consumer.",
    action=(
        "Find the client (by producer id) and check whether it re-batches on retry (an old or third-party client); "
        "keep `max.in.flight.requests.per.connection` at most 5. Downstream, deduplicate the overlapping offsets."
    ),
)
FIRST_SEEN_NONZERO = rule(
    "SEQ-006",
    "FIRST_SEEN_NONZERO",
    "INFO",
    "6.2",
    "First batch of a producer in the audited range (history deleted or compacted before it) does not start "
    "at sequence 0; brokers since 2.5 accept any sequence from an unknown producer.",
    impact=(
        "Usually nothing: the producer's earlier batches were deleted by retention, compaction or DeleteRecords "
        "before the audited range, and brokers since 2.5 accept any sequence from an unknown producer."
    ),
    action=(
        "No action unless the producer's history should still be in the log; then check retention and log start "
        "offset of the partition."
    ),
)
RESUME_AFTER_EXPIRY = rule(
    "SEQ-007",
    "RESUME_AFTER_EXPIRY",
    "WARN",
    "6.2",
    "Producer reappears after a silence of at least producer.id.expiration.ms with a sequence that is "
    "neither the next one nor 0: its state may have expired, so retried duplicates cannot be excluded.",
    impact=(
        "The producer's state may have expired on the broker during its silence, after which any sequence is "
        "accepted: retried duplicates cannot be ruled out."
    ),
    action=(
        "Compare the silence with `producer.id.expiration.ms` (`audit.producer_id_expiration_ms`); for low-traffic "
        "producers raise the expiry or use transactions, and check consumers for duplicates around the offset."
    ),
)
SEQUENCE_WRAP = rule(
    "SEQ-008",
    "SEQUENCE_WRAP",
    "INFO",
    "6.2",
    "Sequence wraps from 2147483647 to 0, inside a batch or between two batches (legal).",
    impact="Nothing: the sequence wrapped from 2147483647 to 0 as Kafka allows.",
    action="No action.",
    per_producer=True,
)
TV2_TXN_FIRST_SEQ = rule(
    "SEQ-009",
    "TV2_TXN_FIRST_SEQ",
    "ERROR",
    "6.2",
    "Transactions V2 producer (configured, recorded by the coordinator in `__transaction_state`, or inferred "
    "from a commit that bumped the epoch): the first data batch of a transaction does not start at sequence 0, "
    "although every TV2 transaction runs at a fresh epoch.",
    impact=(
        "Under Transactions V2 every transaction starts at a fresh epoch and sequence 0; a non-zero start means the "
        "transaction's first batches are missing or a wrong client/broker pairing wrote them."
    ),
    action=(
        "Check the producer client version (4.0+ for TV2) and the cluster's `transaction.version` feature "
        "(`kafka-features.sh describe`); the finding's `transaction_version` says where the version came from: "
        "set `audit.transaction_version` if it is wrong."
    ),
)


def _evidence(**extra: Expr) -> dict[str, Expr]:
    return {
        "base_sequence": E.col("base_sequence"),
        "last_sequence": E.col("last_sequence"),
        "state_epoch": E.col("state_epoch"),
        **extra,
    }


# The conditions below describe one row of PRODUCER_BATCHES against the state before it (pipeline.audit.replay.plan).
def _known() -> Expr:
    return E.col("state_epoch").isNotNull()


def _first_of_run() -> Expr:
    return E.col("run_pos") == 1


def _starts_nonzero() -> Expr:
    return E.col("base_sequence") != 0


def _exact() -> Expr:
    """The same (base, last) sequence range as one of the last five batches of the run."""
    return E.col("exact_in_window")


def _overlaps_window() -> Expr:
    return E.col("overlaps_window")


def _behind() -> Expr:
    return E.col("u_base") <= E.col("position_before")


def _in_run() -> Expr:
    return E.col("seq_row") & ~_first_of_run()


def _gap() -> Expr:
    return _in_run() & ~_exact() & ~_behind() & (E.col("u_base") != E.col("position_before") + 1)


def _backwards() -> Expr:
    return _in_run() & ~_exact() & _behind() & ~_overlaps_window() & (E.col("u_base") < E.col("min_base_before"))


def _tv2_first() -> Expr:
    """The first batch of a transaction of a TV2 producer."""
    return E.col("is_tv2") & E.col("is_transactional") & ~E.col("txn_open")


def _expected() -> Expr:
    return next_sequence(E.col("position_before") % E.lit(INT32_MAX + 1))


def _original_offset() -> Expr:
    return E.col("original_offset")


def _cleaned_away() -> Expr:
    """A forward gap the cleaner made: the batch lies at or below its compacted partition's cleaner checkpoint, so
    every batch missing before it was in the cleaned part of the log."""
    return _gap() & E.col("is_compacted") & (E.col("base_offset") <= E.col("cleaner_offset"))


@check(OUT_OF_ORDER, on=PRODUCER_BATCHES)
def out_of_order(ctx: AuditContext) -> Fires:
    return Fires(
        (_gap() | _backwards()) & ~E.col("state_expired"),
        E.format_string(
            "sequence %d follows %d (expected %d) for producer %d epoch %d",
            E.col("base_sequence"),
            E.col("prev_last_sequence"),
            _expected(),
            E.col("producer_id"),
            E.col("producer_epoch"),
        ),
        _evidence(
            expected_sequence=_expected(),
            previous_offset=E.col("prev_run_offset"),
            previous_last=E.col("prev_last_sequence"),
        ),
        severity=E.when(E.coalesce(_cleaned_away(), E.lit(False)), E.lit("INFO")).otherwise(E.lit("ERROR")),
    )


@check(RESUME_AFTER_EXPIRY, on=PRODUCER_BATCHES)
def resume_after_expiry(ctx: AuditContext) -> Fires:
    silence = E.col("max_timestamp") - E.col("prev_timestamp")
    return Fires(
        E.col("seq_row") & E.col("state_expired") & _starts_nonzero() & (_gap() | _backwards() | _first_of_run()),
        E.format_string(
            "producer %d resumed after %d ms of silence at sequence %d",
            E.col("producer_id"),
            silence,
            E.col("base_sequence"),
        ),
        _evidence(silence_ms=silence),
    )


@check(NOT_ZERO_AFTER_EMPTY_WINDOW, on=PRODUCER_BATCHES)
def not_zero_after_empty_window(ctx: AuditContext) -> Fires:
    window_cleared = E.col("seq_row") & _first_of_run() & _known() & (E.col("producer_epoch") == E.col("state_epoch"))
    return Fires(
        window_cleared & _starts_nonzero() & ~E.col("state_expired") & (E.col("run_first_pid_row") > 1) & ~_tv2_first(),
        E.format_string(
            "first batch at epoch %d after the window was cleared starts at sequence %d, not 0",
            E.col("producer_epoch"),
            E.col("base_sequence"),
        ),
        _evidence(),
    )


@check(NOT_ZERO_ON_NEW_EPOCH, on=PRODUCER_BATCHES)
def not_zero_on_new_epoch(ctx: AuditContext) -> Fires:
    new_epoch = E.col("seq_row") & _first_of_run() & _known() & (E.col("producer_epoch") > E.col("state_epoch"))
    return Fires(
        new_epoch & _starts_nonzero() & ~E.col("state_expired") & ~_tv2_first(),
        E.format_string(
            "epoch %d -> %d but the new epoch starts at sequence %d, not 0",
            E.col("state_epoch"),
            E.col("producer_epoch"),
            E.col("base_sequence"),
        ),
        _evidence(),
    )


@check(TV2_TXN_FIRST_SEQ, on=PRODUCER_BATCHES)
def tv2_txn_first_seq(ctx: AuditContext) -> Fires:
    return Fires(
        E.col("seq_row") & _first_of_run() & _known() & _tv2_first() & _starts_nonzero() & ~E.col("state_expired"),
        E.format_string(
            "TV2 transaction at epoch %d starts at sequence %d, not 0",
            E.col("producer_epoch"),
            E.col("base_sequence"),
        ),
        _evidence(transaction_version=E.col("transaction_version")),
    )


@check(DUPLICATE_BATCH, on=PRODUCER_BATCHES)
def duplicate_batch(ctx: AuditContext) -> Fires:
    return Fires(
        _in_run() & _exact(),
        E.format_string(
            "sequences %d..%d of producer %d epoch %d already written at offset %d",
            E.col("base_sequence"),
            E.col("last_sequence"),
            E.col("producer_id"),
            E.col("producer_epoch"),
            _original_offset(),
        ),
        _evidence(original_offset=_original_offset()),
        severity=E.when(E.col("state_expired"), E.lit("WARN")).otherwise(E.lit(DUPLICATE_BATCH.severity)),
    )


@check(OVERLAPPING_RANGE, on=PRODUCER_BATCHES)
def overlapping_range(ctx: AuditContext) -> Fires:
    return Fires(
        _in_run() & ~_exact() & _behind() & (_overlaps_window() | (E.col("u_base") >= E.col("min_base_before"))),
        E.format_string(
            "sequences %d..%d overlap sequences already written for producer %d epoch %d",
            E.col("base_sequence"),
            E.col("last_sequence"),
            E.col("producer_id"),
            E.col("producer_epoch"),
        ),
        _evidence(highest_sequence_written=E.col("position_before") % E.lit(INT32_MAX + 1)),
        severity=E.when(_overlaps_window(), E.lit("CRITICAL")).otherwise(E.lit("ERROR")),
    )


@check(FIRST_SEEN_NONZERO, on=PRODUCER_BATCHES)
def first_seen_nonzero(ctx: AuditContext) -> Fires:
    return Fires(
        E.col("seq_row")
        & _first_of_run()
        & _starts_nonzero()
        & (~_known() | (E.col("run_first_pid_row") == 1))
        & ~E.col("state_expired"),
        E.format_string(
            "first retained batch of producer %d starts at sequence %d",
            E.col("producer_id"),
            E.col("base_sequence"),
        ),
        _evidence(),
    )


@check(SEQUENCE_WRAP, on=PRODUCER_BATCHES)
def sequence_wrap(ctx: AuditContext) -> Fires:
    return Fires(
        E.col("seq_row")
        & (
            (E.col("wrap_inside") == 1)
            | ((E.col("base_sequence") == 0) & (E.col("prev_last_sequence") == E.lit(INT32_MAX)))
        ),
        E.format_string(
            "sequence of producer %d wraps past 2147483647 at offset %d", E.col("producer_id"), E.col("base_offset")
        ),
        _evidence(),
    )
