"""Idempotence rules SEQ-001..SEQ-009 (spec §6.2): sequence continuity, duplicates, wraparound.

Checked on client-topic data batches at the epoch of their run (`seq_row`); coordinator-written topics
write constant sequence 0 and are never sequence-checked by the broker (§2.1), so they are skipped.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline.audit.columns import INT32_MAX, finding, next_sequence
from pipeline.audit.registry import rule
from pipeline.config import AuditSettings

OUT_OF_ORDER = rule(
    "SEQ-001",
    "OUT_OF_ORDER",
    "ERROR",
    "6.2",
    "Known producer, same epoch, non-empty window, not a duplicate, and the base sequence does not follow "
    "the last sequence written (int32 wraparound allowed). Batches after a forward gap are judged against "
    "the gap's end. When the producer was silent for the producer-id expiry interval this is SEQ-007.",
)
NOT_ZERO_AFTER_EMPTY_WINDOW = rule(
    "SEQ-002",
    "NOT_ZERO_AFTER_EMPTY_WINDOW",
    "ERROR",
    "6.2",
    "Known producer, same epoch, but its window was cleared inside the audited range (a marker bumped the "
    "epoch) and the next data batch does not start at sequence 0. When the run began with the producer's "
    "first retained entry this is SEQ-006 instead (§6.0a.4); on TV2 producers it is SEQ-009.",
)
NOT_ZERO_ON_NEW_EPOCH = rule(
    "SEQ-003",
    "NOT_ZERO_ON_NEW_EPOCH",
    "ERROR",
    "6.2",
    "Known producer writes data at a higher epoch that does not start at sequence 0.",
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
)
FIRST_SEEN_NONZERO = rule(
    "SEQ-006",
    "FIRST_SEEN_NONZERO",
    "INFO",
    "6.2",
    "First batch of a producer in the audited range (history deleted or compacted before it) does not start "
    "at sequence 0; brokers since 2.5 accept any sequence from an unknown producer.",
)
RESUME_AFTER_EXPIRY = rule(
    "SEQ-007",
    "RESUME_AFTER_EXPIRY",
    "WARN",
    "6.2",
    "Producer reappears after a silence of at least producer.id.expiration.ms with a sequence that is "
    "neither the next one nor 0: its state may have expired, so retried duplicates cannot be excluded.",
)
SEQUENCE_WRAP = rule(
    "SEQ-008",
    "SEQUENCE_WRAP",
    "INFO",
    "6.2",
    "Sequence wraps from 2147483647 to 0, inside a batch or between two batches (legal).",
)
TV2_TXN_FIRST_SEQ = rule(
    "SEQ-009",
    "TV2_TXN_FIRST_SEQ",
    "ERROR",
    "6.2",
    "Transactions V2 producer (configured or inferred): the first data batch of a transaction does not "
    "start at sequence 0, although every TV2 transaction runs at a fresh epoch.",
)


def _evidence(**extra: Column) -> dict[str, Column]:
    return {
        "base_sequence": F.col("base_sequence"),
        "last_sequence": F.col("last_sequence"),
        "state_epoch": F.col("state_epoch"),
        **extra,
    }


def row_checks(settings: AuditSettings) -> list[Column]:
    seq_row = F.col("seq_row")
    known = F.col("state_epoch").isNotNull()
    expired = F.col("state_expired")
    first_of_run = F.col("run_pos") == 1
    starts_nonzero = F.col("base_sequence") != 0
    previous = F.element_at("window_ranges", 1)
    exact = F.exists(
        "window_ranges", lambda r: (r["base"] == F.col("base_sequence")) & (r["last"] == F.col("last_sequence"))
    )
    overlaps_window = F.exists(
        "window_ranges", lambda r: (r["u_base"] <= F.col("u_last")) & (F.col("u_base") <= r["u_last"])
    )
    behind = F.col("u_base") <= F.col("position_before")
    expected = next_sequence(F.col("position_before") % F.lit(INT32_MAX + 1))
    first_txn_batch = F.col("is_transactional") & ~F.col("txn_open")

    in_run = seq_row & ~first_of_run
    duplicate = in_run & exact
    overlap = in_run & ~exact & behind & (overlaps_window | (F.col("u_base") >= F.col("min_base_before")))
    gap = in_run & ~exact & ~behind & (F.col("u_base") != F.col("position_before") + 1)
    backwards = in_run & ~exact & behind & ~overlaps_window & (F.col("u_base") < F.col("min_base_before"))
    window_cleared = seq_row & first_of_run & known & (F.col("producer_epoch") == F.col("state_epoch"))
    new_epoch = seq_row & first_of_run & known & (F.col("producer_epoch") > F.col("state_epoch"))
    tv2_first = F.col("is_tv2") & first_txn_batch

    gap_message = F.format_string(
        "sequence %d follows %d (expected %d) for producer %d epoch %d",
        F.col("base_sequence"),
        previous["last"],
        expected,
        F.col("producer_id"),
        F.col("producer_epoch"),
    )
    return [
        finding(
            OUT_OF_ORDER,
            (gap | backwards) & ~expired,
            gap_message,
            _evidence(expected_sequence=expected, previous_offset=previous["offset"], previous_last=previous["last"]),
        ),
        finding(
            RESUME_AFTER_EXPIRY,
            seq_row & expired & starts_nonzero & (gap | backwards | first_of_run),
            F.format_string(
                "producer %d resumed after %d ms of silence at sequence %d",
                F.col("producer_id"),
                F.col("max_timestamp") - F.col("prev_timestamp"),
                F.col("base_sequence"),
            ),
            _evidence(silence_ms=F.col("max_timestamp") - F.col("prev_timestamp")),
        ),
        finding(
            NOT_ZERO_AFTER_EMPTY_WINDOW,
            window_cleared & starts_nonzero & ~expired & (F.col("run_first_pid_row") > 1) & ~tv2_first,
            F.format_string(
                "first batch at epoch %d after the window was cleared starts at sequence %d, not 0",
                F.col("producer_epoch"),
                F.col("base_sequence"),
            ),
            _evidence(),
        ),
        finding(
            NOT_ZERO_ON_NEW_EPOCH,
            new_epoch & starts_nonzero & ~expired & ~tv2_first,
            F.format_string(
                "epoch %d -> %d but the new epoch starts at sequence %d, not 0",
                F.col("state_epoch"),
                F.col("producer_epoch"),
                F.col("base_sequence"),
            ),
            _evidence(),
        ),
        finding(
            TV2_TXN_FIRST_SEQ,
            seq_row & first_of_run & known & tv2_first & starts_nonzero & ~expired,
            F.format_string(
                "TV2 transaction at epoch %d starts at sequence %d, not 0",
                F.col("producer_epoch"),
                F.col("base_sequence"),
            ),
            _evidence(transaction_version=F.col("transaction_version")),
        ),
        finding(
            DUPLICATE_BATCH,
            duplicate,
            F.format_string(
                "sequences %d..%d of producer %d epoch %d already written at offset %d",
                F.col("base_sequence"),
                F.col("last_sequence"),
                F.col("producer_id"),
                F.col("producer_epoch"),
                F.filter("window_ranges", lambda r: r["base"] == F.col("base_sequence"))[0]["offset"],
            ),
            _evidence(
                original_offset=F.filter("window_ranges", lambda r: r["base"] == F.col("base_sequence"))[0]["offset"]
            ),
            severity=F.when(expired, F.lit("WARN")).otherwise(F.lit(DUPLICATE_BATCH.severity)),
        ),
        finding(
            OVERLAPPING_RANGE,
            overlap,
            F.format_string(
                "sequences %d..%d overlap sequences already written for producer %d epoch %d",
                F.col("base_sequence"),
                F.col("last_sequence"),
                F.col("producer_id"),
                F.col("producer_epoch"),
            ),
            _evidence(highest_sequence_written=F.col("position_before") % F.lit(INT32_MAX + 1)),
            severity=F.when(overlaps_window, F.lit("CRITICAL")).otherwise(F.lit("ERROR")),
        ),
        finding(
            FIRST_SEEN_NONZERO,
            seq_row & first_of_run & starts_nonzero & (~known | (F.col("run_first_pid_row") == 1)) & ~expired,
            F.format_string(
                "first retained batch of producer %d starts at sequence %d",
                F.col("producer_id"),
                F.col("base_sequence"),
            ),
            _evidence(),
        ),
        finding(
            SEQUENCE_WRAP,
            seq_row
            & (
                (F.col("wrap_inside") == 1)
                | ((F.col("base_sequence") == 0) & (F.col("prev_last_sequence") == F.lit(INT32_MAX)))
            ),
            F.format_string(
                "sequence of producer %d wraps past 2147483647 at offset %d", F.col("producer_id"), F.col("base_offset")
            ),
            _evidence(),
        ),
    ]
