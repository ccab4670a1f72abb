"""Aborted-transaction index rules IDX-001..IDX-008 (spec §6.5): the `.txnindex` the broker wrote,
compared with the one the markers imply.

The txnindex is the only thing that hides aborted data from read_committed consumers (spec §2.9), so
every ABORT that closed a transaction must have an entry `(pid, first offset, marker offset, lso)` in the
index of the segment holding the marker. `lso(m)` is the closed form of
`ProducerStateManager.lastStableOffset` (spec §6.0 step 4): the first offset of the earliest transaction
of another producer still open at `m`, else `m + 1`.

Computing it without a self-join: order a partition's transactions by first offset and take the running
max of their end (marker offset; open transactions never end). The first transaction whose running max
passes `m` is the earliest one still open at `m`; the transaction that `m` closes ends exactly at `m`, so
it never qualifies. An as-of lookup over one sorted stream of transactions and ABORT markers finds it.

Checked only for partitions read from log directories (`source_format = segment`) and for those read from dump
text that also printed their `.txnindex` or `.snapshot` files: other dump text and columnar exports do not carry
the index files.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.core.registry import Fires, check, frame, rule
from pipeline.audit.state.replicas import audited_entries
from pipeline.audit.state.segments import NEVER, segment_ranges
from schemas.batches import CONTROL_ABORT, CONTROL_COMMIT
from schemas.keys import TP
from schemas.transactions import OUTCOME_ABORTED, OUTCOME_EMPTY

ENTRY_OK = "ok"

MISSING_ABORT_ENTRY = rule(
    "IDX-001",
    "MISSING_ABORT_ENTRY",
    "CRITICAL",
    "6.5",
    "ABORT marker closing a transaction with retained data, and no entry with its producer id and marker "
    "offset in the .txnindex of the segment holding the marker: read_committed consumers see the aborted "
    "records.",
    impact=(
        "The .txnindex is the only thing that hides aborted data: without the entry, read_committed consumers "
        "receive the aborted records."
    ),
    action=(
        "Compare with `kafka-dump-log.sh --files SEGMENT.txnindex` and check consumers of the offsets for aborted "
        "records; to repair, stop the broker, delete the segment's `.index` and `.txnindex` and start it: a missing "
        "offset index makes it recover the segment, which rebuilds its indexes (or rebuild the replica from a "
        "healthy one)."
    ),
)
WRONG_FIRST_OFFSET = rule(
    "IDX-002",
    "WRONG_FIRST_OFFSET",
    "CRITICAL",
    "6.5",
    "Entry for the ABORT marker whose first offset differs from the aborted transaction's first offset "
    "(higher: leading aborted batches are visible; lower: committed batches of the producer may be hidden). "
    "Not raised when the entry's first offset lies below the log start (the beginning was deleted).",
    impact=(
        "With a first offset too high, the leading aborted batches are visible to read_committed consumers; too low, "
        "committed batches of the producer before it are hidden."
    ),
    action=(
        "Compare `kafka-dump-log.sh --files SEGMENT.txnindex` with the transaction; to repair, as for IDX-001, stop "
        "the broker, delete the segment's `.index` and `.txnindex` and start it: a missing offset index makes it "
        "recover the segment, which rebuilds its indexes (or rebuild the replica from a healthy one)."
    ),
)
ORPHAN_ENTRY = rule(
    "IDX-003",
    "ORPHAN_ENTRY",
    "ERROR",
    "6.5",
    "Entry whose last offset is not an ABORT marker of the same producer that closed a transaction. "
    "CRITICAL when it points at a COMMIT marker (committed data hidden from read_committed consumers). Not "
    "for an entry of an ABORT whose data the cleaner removed on a compacted partition (IDX-008): the pass that "
    "removes the data keeps the marker and its entry, a later one both.",
    also=("CRITICAL",),
    impact=(
        "An entry that matches no abort hides records of that producer from read_committed consumers; pointing at a "
        "COMMIT marker it hides committed data."
    ),
    action=(
        "Dump the index (`kafka-dump-log.sh --files SEGMENT.txnindex`) and the marker at its last offset; to repair, "
        "stop the broker, delete the segment's `.index` and `.txnindex` and start it: a missing offset index makes "
        "it recover the segment, which rebuilds its indexes (or rebuild the replica from a healthy one)."
    ),
)
WRONG_LSO = rule(
    "IDX-004",
    "WRONG_LSO",
    "WARN",
    "6.5",
    "Entry whose last stable offset differs from lso(m). INFO when it equals the first offset of a "
    "transaction that started after the marker (a follower replaying a fetched chunk records that).",
    also=("INFO",),
    impact=(
        "The stored LSO only tells the fetch path where to stop searching for aborted transactions; a wrong value "
        "can make it stop too early. INFO values are what followers record."
    ),
    action="No action for INFO; for WARN compare the replicas' indexes and rebuild the index if only one differs.",
    per_producer=True,
)
LEGACY_EMPTY_ENTRY = rule(
    "IDX-005",
    "LEGACY_EMPTY_ENTRY",
    "WARN",
    "6.5",
    "Entry with first offset = last offset = an ABORT marker that closed no transaction: brokers before 2.8 "
    "wrote these (INFO when audit.broker_version is below 2.8).",
    also=("INFO",),
    impact=(
        "Harmless for consumers: brokers before 2.8 wrote an index entry for an abort of an empty transaction "
        "(KAFKA-10702 stopped it)."
    ),
    action="Set `audit.broker_version` to the version that wrote the segment; no action on the data.",
)
INDEX_FILE_CORRUPT = rule(
    "IDX-006",
    "INDEX_FILE_CORRUPT",
    "ERROR",
    "6.5",
    "A .txnindex whose size is not a multiple of 34, or an entry with version not 0, a last offset not "
    "above the previous entry's, a last offset below the segment base, or first offset above last offset.",
    impact=(
        "A corrupt .txnindex makes the broker fail to load the segment's aborted transactions "
        "(CorruptIndexException), and read_committed consumers may see aborted data."
    ),
    action=(
        "Check the copy was complete; to repair, stop the broker, delete the segment's `.index` and `.txnindex` and "
        "start it: a missing offset index makes it recover the segment, which rebuilds its indexes (or rebuild the "
        "replica from a healthy one)."
    ),
)
ENTRY_IN_WRONG_SEGMENT = rule(
    "IDX-007",
    "ENTRY_IN_WRONG_SEGMENT",
    "ERROR",
    "6.5",
    "Entry whose marker offset lies outside the offset range of the segment owning the .txnindex; the "
    "fetch path may never search that file for it.",
    impact=(
        "The fetch path searches the index of the fetched segment and the ones after it; an entry in the wrong file "
        "may never be found, exposing aborted records to read_committed consumers."
    ),
    action=(
        "Compare with other replicas; to repair, stop the broker, delete the segment's `.index` and `.txnindex` and "
        "start it: a missing offset index makes it recover the segment, which rebuilds its indexes (or rebuild the "
        "replica from a healthy one)."
    ),
)
ABORT_DATA_CLEANED = rule(
    "IDX-008",
    "ABORT_DATA_CLEANED",
    "INFO",
    "6.5",
    "Compacted topic: an ABORT marker whose data the cleaner removed, with no entry, or with its entry still "
    "in the index (both legal: the cleaner pass that removes an aborted transaction's data keeps its marker and "
    "writes its entry to the cleaned segment's index; a later pass, once the data is gone, drops the entry and, "
    "after delete.retention.ms, the marker; CleanedTransactionMetadata.onControlBatchRead).",
    impact="Nothing: the cleaner removed the aborted data, and removes the entry and the marker after it.",
    action="No action.",
    per_producer=True,
)


def expected_entries(transactions: DataFrame) -> DataFrame:
    """One row per ABORT that closed a transaction: the txnindex entry the broker must have written."""
    started = transactions.where(F.col("outcome") != OUTCOME_EMPTY).select(
        *TP,
        F.col("first_offset").alias("key"),
        F.coalesce(F.col("marker_offset"), F.lit(NEVER)).alias("ends_at"),
    )
    by_start = Window.partitionBy(*TP).orderBy("key").rowsBetween(Window.unboundedPreceding, 0)
    still_open_after = started.select(
        *TP,
        F.max("ends_at").over(by_start).alias("key"),
        F.lit(0).alias("kind"),
        F.col("key").alias("start"),
        *[F.lit(None).cast(t).alias(c) for c, t in _ABORT_COLUMNS],
    )
    aborts = transactions.where(F.col("outcome") == OUTCOME_ABORTED).select(
        *TP,
        F.col("marker_offset").alias("key"),
        F.lit(1).alias("kind"),
        F.lit(None).cast("long").alias("start"),
        *[F.col(c).cast(t).alias(c) for c, t in _ABORT_COLUMNS],
    )
    # the rows after this one in (key, kind) order, as a running frame of the reverse order: Spark evaluates a
    # frame that ends at unboundedFollowing anew for every row, which is quadratic in a partition's size
    following = (
        Window.partitionBy(*TP).orderBy(F.desc("key"), F.desc("kind")).rowsBetween(Window.unboundedPreceding, -1)
    )
    earliest_open = F.min("start").over(following)
    return (
        still_open_after.unionByName(aborts)
        .withColumn("earliest_open", earliest_open)
        .where(F.col("kind") == 1)
        .select(
            *TP,
            *[c for c, _ in _ABORT_COLUMNS],
            F.when(F.col("earliest_open") < F.col("marker_offset"), F.col("earliest_open"))
            .otherwise(F.col("marker_offset") + 1)
            .alias("expected_lso"),
        )
    )


_ABORT_COLUMNS = (
    ("producer_id", "long"),
    ("producer_epoch", "int"),
    ("first_offset", "long"),
    ("marker_offset", "long"),
    ("marker_segment_base_offset", "long"),
    ("broker_id", "int"),
)


@frame("txnindex.entries", rows_of="txn_index")
def TXN_INDEX_ENTRIES(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """Entries of the audited replicas' .txnindex files, in file order, with the owning segment's offset range.

    Located at the entry's marker offset; `previous_last_offset` is the last offset of the entry before it in
    the same file.
    """
    if inputs.txn_index is None:
        return None
    # One `.txnindex` per segment; a dump text may print the indexes of several segments.
    in_file = Window.partitionBy(*TP, "broker_id", "source_file", "segment_base_offset").orderBy("position")
    return (
        audited_entries(inputs.txn_index, inputs.replicas)
        .join(segment_ranges(inputs.segments), on=[*TP, "broker_id", "segment_base_offset"], how="left")
        .withColumn("base_offset", F.col("last_offset"))
        .withColumn("producer_epoch", F.lit(None).cast("int"))
        .withColumn("previous_last_offset", F.lag("last_offset").over(in_file))
    )


@check(INDEX_FILE_CORRUPT, on=TXN_INDEX_ENTRIES)
def index_file_corrupt(ctx: AuditContext) -> Fires:
    previous_last = F.col("previous_last_offset")
    return Fires(
        (F.col("entry_status") != ENTRY_OK)
        | (F.col("version") != 0)
        | (F.col("last_offset") <= previous_last)
        | (F.col("last_offset") < F.col("segment_base_offset"))
        | (F.col("first_offset") > F.col("last_offset")),
        F.format_string(
            "txnindex entry at byte %d: status %s, version %s, first %s, last %s (previous last %s)",
            F.col("position"),
            F.col("entry_status"),
            F.col("version").cast("string"),
            F.col("first_offset").cast("string"),
            F.col("last_offset").cast("string"),
            previous_last.cast("string"),
        ),
        {"previous_last_offset": previous_last, "segment_base_offset": F.col("segment_base_offset")},
    )


@check(ENTRY_IN_WRONG_SEGMENT, on=TXN_INDEX_ENTRIES)
def entry_in_wrong_segment(ctx: AuditContext) -> Fires:
    return Fires(
        (F.col("entry_status") == ENTRY_OK)
        & (
            (F.col("last_offset") < F.col("segment_base_offset")) | (F.col("last_offset") >= F.col("next_segment_base"))
        ),
        F.format_string(
            "entry for marker offset %d sits in the index of segment %d (next segment starts at %s)",
            F.col("last_offset"),
            F.col("segment_base_offset"),
            F.col("next_segment_base").cast("string"),
        ),
        {"segment_base_offset": F.col("segment_base_offset"), "next_segment_base": F.col("next_segment_base")},
    )


@frame("txnindex.comparison")
def TXN_INDEX_COMPARISON(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """The entries the ABORT markers imply matched with the entries written, on (partition, pid, marker offset).

    Empty ABORT markers are candidates too: pre-2.8 brokers wrote an entry for them (IDX-005), and on
    compacted topics a missing entry is the cleaner's doing (IDX-008). Located at the marker offset.
    """
    if inputs.txn_index is None:
        return None
    transactions = inputs.transactions
    empty_aborts = transactions.where(
        (F.col("outcome") == OUTCOME_EMPTY) & (F.col("control_type") == CONTROL_ABORT)
    ).select(*TP, "producer_id", "producer_epoch", "marker_offset", "broker_id", F.lit(True).alias("is_empty_abort"))
    candidates = (
        expected_entries(transactions)
        .withColumn("is_empty_abort", F.lit(False))
        .unionByName(empty_aborts, allowMissingColumns=True)
    )
    written = (
        audited_entries(inputs.txn_index, inputs.replicas)
        .where(F.col("entry_status") == ENTRY_OK)
        .select(
            *TP,
            "producer_id",
            F.col("last_offset").alias("marker_offset"),
            F.col("first_offset").alias("entry_first_offset"),
            F.col("last_stable_offset").alias("entry_lso"),
            "source_file",
            "position",
            F.col("broker_id").alias("entry_broker_id"),
        )
    )
    commit_markers = transactions.where(F.col("control_type") == CONTROL_COMMIT).select(
        *TP, "producer_id", "marker_offset", F.lit(True).alias("points_at_commit")
    )
    later_starts = (
        transactions.where(F.col("outcome") != OUTCOME_EMPTY)
        .select(*TP, F.col("first_offset").alias("entry_lso"), F.lit(True).alias("lso_is_a_start"))
        .distinct()
    )
    partitions = (
        inputs.partitions.select(*TP, "log_start_offset")
        .join(inputs.replicas.drop("broker_id"), on=TP, how="inner")
        .select(*TP, "log_start_offset", "is_compacted", "has_index_files")
    )
    return (
        candidates.join(written, on=[*TP, "producer_id", "marker_offset"], how="full_outer")
        .join(commit_markers, on=[*TP, "producer_id", "marker_offset"], how="left")
        .join(later_starts, on=[*TP, "entry_lso"], how="left")
        .join(partitions, on=TP, how="inner")
        .where(F.col("has_index_files"))
        .withColumn("broker_id", F.coalesce("broker_id", "entry_broker_id"))
        .withColumn("base_offset", F.col("marker_offset"))
        .withColumn("last_offset", F.col("marker_offset"))
    )


# Conditions on one row of TXN_INDEX_COMPARISON.
def _is_written() -> Column:
    return F.col("entry_first_offset").isNotNull()


def _is_expected() -> Column:
    return F.col("expected_lso").isNotNull()


def _is_empty_abort() -> Column:
    return F.coalesce(F.col("is_empty_abort"), F.lit(False))


def _legacy_empty() -> Column:
    return _is_empty_abort() & (F.col("entry_first_offset") == F.col("marker_offset"))


def _cleaned_abort_entry() -> Column:
    """The entry of an ABORT whose data the cleaner removed, kept as its pass keeps the marker."""
    return _is_empty_abort() & F.col("is_compacted") & (F.col("entry_first_offset") < F.col("marker_offset"))


def _comparison_evidence() -> dict[str, Column]:
    return {
        "expected_first_offset": F.col("first_offset"),
        "entry_first_offset": F.col("entry_first_offset"),
        "expected_lso": F.col("expected_lso"),
        "entry_lso": F.col("entry_lso"),
    }


@check(MISSING_ABORT_ENTRY, on=TXN_INDEX_COMPARISON)
def missing_abort_entry(ctx: AuditContext) -> Fires:
    return Fires(
        _is_expected() & ~_is_written(),
        F.format_string(
            "no .txnindex entry for the ABORT at offset %d (producer %d, transaction from offset %d)",
            F.col("marker_offset"),
            F.col("producer_id"),
            F.col("first_offset"),
        ),
        _comparison_evidence(),
    )


@check(WRONG_FIRST_OFFSET, on=TXN_INDEX_COMPARISON)
def wrong_first_offset(ctx: AuditContext) -> Fires:
    return Fires(
        _is_expected()
        & _is_written()
        & (F.col("entry_first_offset") != F.col("first_offset"))
        & (F.col("entry_first_offset") >= F.col("log_start_offset")),
        F.format_string(
            "txnindex entry for the ABORT at %d starts at %d, the transaction at %d",
            F.col("marker_offset"),
            F.col("entry_first_offset"),
            F.col("first_offset"),
        ),
        _comparison_evidence(),
    )


@check(ORPHAN_ENTRY, on=TXN_INDEX_COMPARISON)
def orphan_entry(ctx: AuditContext) -> Fires:
    return Fires(
        ~_is_expected() & _is_written() & ~_legacy_empty() & ~_cleaned_abort_entry(),
        F.format_string(
            "txnindex entry (producer %d, offsets %d..%d) matches no ABORT of that producer that closed a transaction",
            F.col("producer_id"),
            F.col("entry_first_offset"),
            F.col("marker_offset"),
        ),
        _comparison_evidence(),
        severity=F.when(F.col("points_at_commit"), F.lit("CRITICAL")).otherwise(F.lit("ERROR")),
    )


@check(WRONG_LSO, on=TXN_INDEX_COMPARISON)
def wrong_lso(ctx: AuditContext) -> Fires:
    return Fires(
        _is_expected() & _is_written() & (F.col("entry_lso") != F.col("expected_lso")),
        F.format_string(
            "txnindex entry for the ABORT at %d records LSO %d, expected %d",
            F.col("marker_offset"),
            F.col("entry_lso"),
            F.col("expected_lso"),
        ),
        _comparison_evidence(),
        severity=F.when(
            F.coalesce(F.col("lso_is_a_start"), F.lit(False)) & (F.col("entry_lso") > F.col("marker_offset")),
            F.lit("INFO"),
        ).otherwise(F.lit("WARN")),
    )


@check(LEGACY_EMPTY_ENTRY, on=TXN_INDEX_COMPARISON)
def legacy_empty_entry(ctx: AuditContext) -> Fires:
    return Fires(
        _is_written() & _legacy_empty(),
        F.format_string("txnindex entry for the ABORT at %d that closed no transaction", F.col("marker_offset")),
        _comparison_evidence(),
        severity=F.lit("INFO" if ctx.settings.broker_older_than("2.8") else "WARN"),
    )


@check(ABORT_DATA_CLEANED, on=TXN_INDEX_COMPARISON)
def abort_data_cleaned(ctx: AuditContext) -> Fires:
    return Fires(
        _is_empty_abort() & F.col("is_compacted") & (~_is_written() | _cleaned_abort_entry()),
        F.when(
            _is_written(),
            F.format_string(
                "ABORT at %d has no data left; its txnindex entry (from offset %d) is still kept",
                F.col("marker_offset"),
                F.col("entry_first_offset"),
            ),
        ).otherwise(F.format_string("ABORT at %d has no data left and no txnindex entry", F.col("marker_offset"))),
        _comparison_evidence(),
    )
