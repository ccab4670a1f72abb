"""Physical format and file integrity rules of spec §6.1 that the batch table can answer.

These look at every entry the decoder found, including the ones the broker's iterator rejects
(`entry_status` != ok), along one replica's log in file order.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core import expr as E
from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.core.expr import Expr
from pipeline.audit.core.frames import BATCHES
from pipeline.audit.core.registry import Fires, check, frame, rule
from pipeline.audit.replay.plan import audited_broker
from schemas.batches import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    STATUS_BAD_MAGIC,
    STATUS_LEGACY,
    STATUS_OK,
    STATUS_TOO_SMALL,
    STATUS_TRUNCATED,
)
from schemas.keys import TP

MAX_CODEC_ID = 4  # zstd
UNUSED_ATTRIBUTE_BITS = 0xFF80

TRUNCATED_TAIL = rule(
    "FMT-001",
    "TRUNCATED_TAIL",
    "ERROR",
    "6.1",
    "Bytes at the end of a .log that do not form a complete entry. WARN on the partition's last (active) "
    "segment, where an unflushed tail is normal and recovery truncates it, unless the tail holds more bytes "
    "than every entry of the partition that could be read before it (nothing, or only a small part, of the "
    "partition decodes).",
    also=("WARN",),
    impact=(
        "The bytes after the last complete entry are not records: a broker that recovers this segment (after "
        "an unclean shutdown) truncates it there and deletes the segments after it, and on an older segment "
        "those held acknowledged records."
    ),
    action=(
        "On the active segment after a crash this is expected; confirm the broker recovered (its log says the "
        "segment was truncated). On an older segment compare the replica with another broker's copy and "
        "`kafka-dump-log.sh --files SEGMENT.log`, which ends with `Found N invalid bytes at the end`; check the copy "
        "was not taken mid-write."
    ),
)
ENTRY_TOO_SMALL = rule(
    "FMT-002",
    "ENTRY_TOO_SMALL",
    "ERROR",
    "6.1",
    "Entry size below the 14-byte legacy minimum, or a v2 batch shorter than its 61-byte header: the rest of "
    "the segment cannot be read.",
    impact=(
        "The broker cannot read past this entry: everything after it in the segment is unreadable and recovery "
        "truncates it, losing those records on this replica."
    ),
    action=(
        "Check whether the file was copied while the broker wrote it or damaged on disk; compare with another "
        "replica. If only this replica is damaged, let it be rebuilt from the leader (delete the partition directory "
        "on the stopped broker so it fetches it again)."
    ),
)
BAD_MAGIC = rule(
    "FMT-003",
    "BAD_MAGIC",
    "ERROR",
    "6.1",
    "Entry whose magic byte is not 0, 1 or 2.",
    impact=(
        "An entry that is not a Kafka batch cannot be iterated; the rest of the segment is unreadable to the broker "
        "and to consumers reading from this replica."
    ),
    action=(
        "Treat as file corruption: run `kafka-dump-log.sh --files SEGMENT.log` to see where it stops, compare with "
        "another replica, and rebuild this replica from the leader if the others are intact."
    ),
)
CRC_MISMATCH = rule(
    "FMT-004",
    "CRC_MISMATCH",
    "ERROR",
    "6.1",
    "Stored CRC differs from the CRC-32C of attributes..end (CRC-32 for legacy entries). The header is still "
    "replayed (spec §6.0a.2). Checked on every ingested copy of a partition, not only the audited replica: a "
    "corrupt follower becomes a corrupt leader at its next election.",
    impact=(
        "A batch whose bytes changed after the leader wrote them; recovery truncates the segment at it, and "
        "consumers that check CRCs (`check.crcs`, on by default) fail on it."
    ),
    action=(
        "Compare the batch with the same offsets on another replica (`kafka-dump-log.sh --files SEGMENT.log` shows "
        "`isvalid: false`). Look for disk or filesystem errors on the broker; rebuild the replica from a healthy "
        "one."
    ),
)
ATTRIBUTE_INVALID = rule(
    "FMT-005",
    "ATTRIBUTE_INVALID",
    "ERROR",
    "6.1",
    "Compression codec id above 4 (ERROR); unused attribute bits 7-15 set, or the delete-horizon bit on a "
    "topic not configured as compacted (WARN).",
    also=("WARN",),
    impact=(
        "An unknown codec makes the batch undecodable for every consumer; stray attribute bits mean the batch was "
        "not written by a Kafka broker as it stands, or a compacted topic was not configured as one for the audit."
    ),
    action=(
        "For WARN on the delete-horizon bit, check the topic's `cleanup.policy` (`kafka-configs.sh --describe "
        "--entity-type topics --entity-name TOPIC`) and add it to `audit.compacted_topics`. Otherwise treat as "
        "corruption and compare with another replica."
    ),
)
RECORD_STRUCTURE = rule(
    "FMT-006",
    "RECORD_STRUCTURE",
    "ERROR",
    "6.1",
    "The records of a v2 batch do not parse as Kafka's reader parses them: a records section that does not "
    "decompress, a malformed varint, a length that overruns its record or the records, a key or value length "
    "below -1, a negative header count, bytes left after recordsCount records or fewer records than that, or "
    "offset deltas that do not increase or exceed lastOffsetDelta. Not raised for a batch whose CRC already "
    "fails (FMT-004), nor when ingest ran with verify_records off.",
    impact=(
        'Consumers fail to deserialize this batch (`CorruptRecordException`, "Incorrect declared batch size") and '
        "stop on the partition until they skip the offset."
    ),
    action=(
        "Dump the batch with `kafka-dump-log.sh --files SEGMENT.log --deep-iteration` and compare with another "
        "replica; if the leader copy is also broken, the producer client (or a proxy) wrote a bad batch: identify it "
        "by producer id and upgrade or fix it."
    ),
)
COUNT_INCONSISTENT = rule(
    "FMT-007",
    "COUNT_INCONSISTENT",
    "ERROR",
    "6.1",
    "Record count negative, different from lastOffsetDelta + 1 on a non-compacted topic, or above it on a "
    "compacted one (ERROR); zero records on a non-compacted topic (WARN).",
    also=("WARN",),
    impact=(
        "The record count disagrees with the offset range the batch claims, so offsets and record iteration diverge: "
        "consumers may see missing or phantom records; a leader rejects such batches from clients."
    ),
    action=(
        "If the topic is compacted, add it to `audit.compacted_topics` (count below the range is legal there). "
        "Otherwise dump the batch with `--deep-iteration` and compare replicas."
    ),
)
MAX_TIMESTAMP = rule(
    "FMT-008",
    "MAX_TIMESTAMP",
    "WARN",
    "6.1",
    "A non-empty CreateTime batch whose maxTimestamp is not the largest timestamp of its records (the leader "
    "and the cleaner always set it to that). Needs record verification at ingest and readable records.",
    impact=(
        "Time-based lookups (`offsetsForTimes`, the `.timeindex`) and time-based retention use maxTimestamp; a wrong "
        "value makes them find the wrong offset or keep or delete the segment at the wrong time."
    ),
    action=(
        "Check the producer client that wrote it (by producer id) and whether a proxy rewrites batches; the broker "
        "itself always sets it."
    ),
)
PRODUCER_FIELDS = rule(
    "FMT-009",
    "PRODUCER_FIELDS",
    "ERROR",
    "6.1",
    "Producer fields the broker never writes together: transactional without a producer id, a producer id "
    "with a negative epoch, client data with a producer id and no sequence (ERROR); no producer id but an "
    "epoch or a sequence (WARN).",
    also=("WARN",),
    impact=(
        "Producer fields the broker never writes together break producer-state replay: the broker cannot reload this "
        "log consistently, and idempotence or transaction guarantees do not hold for these batches."
    ),
    action=(
        "Identify the writer (producer id, client version) and the broker version that accepted it; compare with "
        "another replica to rule out corruption."
    ),
)
CONTROL_BATCH_SHAPE = rule(
    "FMT-010",
    "CONTROL_BATCH_SHAPE",
    "ERROR",
    "6.1",
    "Control batch not shaped like a broker-written marker: not transactional, with a sequence, compressed, "
    "more than one record, lastOffsetDelta not 0, no producer id, an unreadable control record, or a KRaft "
    "type on a topic partition. A control batch with zero records alone is INFO on compacted topics and "
    "WARN otherwise.",
    also=("WARN", "INFO"),
    impact=(
        "A control batch that does not look like a broker-written marker may not close the transaction it should, or "
        "close one it should not; consumers skip control batches, so they never see the problem themselves. An empty "
        "control batch on a non-compacted topic means a marker's record was removed."
    ),
    action=(
        "For a zero-record control batch, check whether the topic is compacted (add it to `audit.compacted_topics`). "
        "Otherwise dump the batch with `kafka-dump-log.sh --deep-iteration` and compare replicas; a KRaft control "
        "type on a topic partition points at a misrouted or corrupted file."
    ),
    per_producer=True,
)


# Conditions on one row of BATCHES; the neighbour state (`max_last_offset_before`, ...) comes from the replay.
def readable() -> Expr:
    return E.col("entry_status").isin(STATUS_OK, STATUS_LEGACY)


def v2() -> Expr:
    return (E.col("entry_status") == STATUS_OK) & (E.col("magic") == 2)


def client_topic() -> Expr:
    return ~E.col("is_coordinator_topic") & ~E.col("is_kraft_topic")


def _crc_not_failed() -> Expr:
    return E.coalesce(E.col("crc_valid"), E.lit(True))


def _location() -> dict[str, Expr]:
    return {"position": E.col("position"), "size_bytes": E.col("size_bytes"), "note": E.col("entry_note")}


def _control_shape_broken() -> Expr:
    kraft_type_on_topic = ~E.col("is_kraft_topic") & ~E.col("control_type").isin(CONTROL_ABORT, CONTROL_COMMIT)
    return (
        ~E.col("is_transactional")
        | (E.col("base_sequence") != -1)
        | (E.col("compression") != 0)
        | (E.col("record_count") > 1)
        | (E.col("last_offset_delta") != 0)
        | (E.col("producer_id") < 0)
        | ((E.col("record_count") == 1) & (E.col("control_type").isNull() | kraft_type_on_topic))
    ) & ~E.col("is_kraft_topic")


@check(TRUNCATED_TAIL, on=BATCHES)
def truncated_tail(ctx: AuditContext) -> Fires:
    """Deviation from §6.1: the active segment's tail is an ERROR when it holds more bytes than the readable
    entries of the partition before it (a corrupt length at the start of the only segment, say, or after its
    first batch). The spec's WARN presumes the rest of the log was read; a partition of which nothing, or only
    a small part, could be read would otherwise pass every gate mostly unaudited. An unflushed tail is at most
    the batches written since the last flush, small beside the log before it."""
    unflushed_tail = E.col("in_last_segment") & (E.col("size_bytes") <= E.col("readable_bytes_before"))
    return Fires(
        E.col("entry_status") == STATUS_TRUNCATED,
        E.format_string(
            "%d trailing bytes at position %d do not form an entry", E.col("size_bytes"), E.col("position")
        ),
        _location(),
        severity=E.when(unflushed_tail, E.lit("WARN")).otherwise(E.lit("ERROR")),
    )


@check(ENTRY_TOO_SMALL, on=BATCHES)
def entry_too_small(ctx: AuditContext) -> Fires:
    return Fires(
        E.col("entry_status") == STATUS_TOO_SMALL,
        E.format_string("entry at position %d is too small to be a batch", E.col("position")),
        _location(),
    )


@check(BAD_MAGIC, on=BATCHES)
def bad_magic(ctx: AuditContext) -> Fires:
    return Fires(
        E.col("entry_status") == STATUS_BAD_MAGIC,
        E.format_string("magic byte %d at position %d", E.col("magic"), E.col("position")),
        {**_location(), "magic": E.col("magic")},
    )


@check(CRC_MISMATCH, on=BATCHES)
def crc_mismatch(ctx: AuditContext) -> Fires:
    return Fires(
        readable() & (E.col("crc_valid") == E.lit(False)),
        E.format_string("stored CRC %d does not match the batch bytes", E.col("crc")),
        {**_location(), "stored_crc": E.col("crc")},
    )


@frame("batches.other_copies", of_copies=True)
def OTHER_COPIES(inputs: AuditInputs, ctx: AuditContext) -> DataFrame:  # noqa: N802
    """The readable entries of the copies the replay did not audit whose stored CRC does not match their bytes."""
    audited = inputs.segments.select(*TP, "broker_id").distinct()
    return (
        audited_broker(inputs.all_batches)
        .where((readable() & (E.col("crc_valid") == E.lit(False))).column())
        .join(F.broadcast(audited), on=[*TP, "broker_id"], how="left_anti")
    )


@check(CRC_MISMATCH, on=OTHER_COPIES)
def crc_mismatch_in_another_copy(ctx: AuditContext) -> Fires:
    return Fires(
        E.lit(True),
        E.format_string(
            "stored CRC %d does not match the batch bytes in broker %d's copy (not the audited replica)",
            E.col("crc"),
            E.col("broker_id"),
        ),
        {**_location(), "stored_crc": E.col("crc")},
    )


@check(ATTRIBUTE_INVALID, on=BATCHES)
def attribute_invalid(ctx: AuditContext) -> Fires:
    return Fires(
        v2()
        & (
            (E.col("compression") > MAX_CODEC_ID)
            | ((E.col("attributes").bitwiseAND(UNUSED_ATTRIBUTE_BITS)) != 0)
            | (E.col("has_delete_horizon") & ~E.col("is_compacted"))
        ),
        E.format_string("attributes 0x%04x", E.col("attributes")),
        {"attributes": E.col("attributes"), "compression": E.col("compression")},
        severity=E.when(E.col("compression") > MAX_CODEC_ID, E.lit("ERROR")).otherwise(E.lit("WARN")),
    )


@check(RECORD_STRUCTURE, on=BATCHES)
def record_structure(ctx: AuditContext) -> Fires:
    return Fires(
        v2() & _crc_not_failed() & E.col("record_problem").isNotNull(),
        E.format_string("records do not parse: %s", E.col("record_problem")),
        {**_location(), "compression": E.col("compression"), "record_count": E.col("record_count")},
    )


@check(COUNT_INCONSISTENT, on=BATCHES)
def count_inconsistent(ctx: AuditContext) -> Fires:
    expected_count = E.col("last_offset_delta") + 1
    return Fires(
        v2()
        & ~E.col("is_control")
        & (
            (E.col("record_count") < 0)
            | (~E.col("is_compacted") & (E.col("record_count") != expected_count))
            | (E.col("is_compacted") & (E.col("record_count") > expected_count))
        ),
        E.format_string(
            "record count %d for offsets %d..%d", E.col("record_count"), E.col("base_offset"), E.col("last_offset")
        ),
        {"record_count": E.col("record_count"), "last_offset_delta": E.col("last_offset_delta")},
        severity=E.when(E.col("record_count") == 0, E.lit("WARN")).otherwise(E.lit("ERROR")),
    )


@check(MAX_TIMESTAMP, on=BATCHES)
def max_timestamp(ctx: AuditContext) -> Fires:
    return Fires(
        v2()
        & _crc_not_failed()
        & (E.col("timestamp_type") == 0)
        & (E.col("record_count") > 0)
        & (E.col("max_timestamp") != E.col("max_record_timestamp")),
        E.format_string(
            "maxTimestamp %d but the largest record timestamp is %d",
            E.col("max_timestamp"),
            E.col("max_record_timestamp"),
        ),
        {"max_timestamp": E.col("max_timestamp"), "max_record_timestamp": E.col("max_record_timestamp")},
    )


@check(PRODUCER_FIELDS, on=BATCHES)
def producer_fields(ctx: AuditContext) -> Fires:
    return Fires(
        v2()
        & (
            (E.col("is_transactional") & (E.col("producer_id") < 0))
            | ((E.col("producer_id") >= 0) & (E.col("producer_epoch") < 0))
            | (~E.col("is_control") & client_topic() & (E.col("producer_id") >= 0) & (E.col("base_sequence") < 0))
            | (
                (E.col("producer_id") < 0)
                & ((E.col("producer_epoch") != -1) | (client_topic() & (E.col("base_sequence") != -1)))
            )
        ),
        E.format_string(
            "producer id %d, epoch %d, base sequence %d",
            E.col("producer_id"),
            E.col("producer_epoch"),
            E.col("base_sequence"),
        ),
        {"is_transactional": E.col("is_transactional")},
        severity=E.when((E.col("producer_id") < 0) & ~E.col("is_transactional"), E.lit("WARN")).otherwise(
            E.lit("ERROR")
        ),
    )


@check(CONTROL_BATCH_SHAPE, on=BATCHES)
def control_batch_shape(ctx: AuditContext) -> Fires:
    control = v2() & E.col("is_control")
    empty_control = control & (E.col("record_count") == 0)
    return Fires(
        control & (_control_shape_broken() | empty_control),
        E.format_string(
            "control batch: transactional=%s sequence=%d codec=%d records=%d control type=%s",
            E.col("is_transactional"),
            E.col("base_sequence"),
            E.col("compression"),
            E.col("record_count"),
            E.coalesce(E.col("control_type").cast("string"), E.lit("unreadable")),
        ),
        {"note": E.col("entry_note"), "control_type": E.col("control_type")},
        severity=E.when(_control_shape_broken(), E.lit("ERROR"))
        .when(E.col("is_compacted"), E.lit("INFO"))
        .otherwise(E.lit("WARN")),
    )
