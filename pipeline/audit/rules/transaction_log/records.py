"""`__transaction_state` alone (spec §6.7): the coordinator's own records, each on its own and the last of each id.

Rows come from the `transaction_log` table (one per record). Transitions between consecutive records of one
transactional id are checked in `transaction_log_transitions`, and only where the partition is not yet cleaned:
compaction removes intermediate states, so two records that survived it need not be neighbours in the
coordinator's history. The uncleaned part starts at the `cleaner-offset-checkpoint` value, or after the last gap
in the partition's record offsets when that is higher (the topic is written without transactions, so any missing
offset was cleaned). A tombstone ends an id's history; the record after it starts a new one.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pipeline.audit.core.columns import INT32_MAX
from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.core.registry import Fires, check, frame, rule
from schemas.keys import TP
from schemas.transaction_log import (
    COMPLETE_STATES,
    DEAD,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_EPOCH_FENCE,
    PREPARE_STATES,
)

TIMEOUT_CHECK_INTERVAL_MS = 10_000  # the coordinator looks for timed-out transactions this often
PREPARE_STUCK_MS = 5 * 60_000  # "a few minutes" of spec §6.7 TSL-012: markers are normally written in seconds

KEY_VERSION = rule(
    "TSL-001",
    "KEY_VERSION",
    "WARN",
    "6.7",
    "A __transaction_state key version other than 0; the coordinator skips such records on load.",
    impact="The coordinator skips records with an unknown key version at load: that transactional id's state is lost.",
    action=(
        "Check which broker version wrote the `__transaction_state` partition and whether brokers of mixed versions "
        "share the cluster."
    ),
)
VALUE_VERSION = rule(
    "TSL-002",
    "VALUE_VERSION",
    "ERROR",
    "6.7",
    "A value version outside 0-1 (ERROR). A version-1 value is INFO when the configured broker version is below "
    "4.0: the spec's condition (written while transaction.version = 0) is not in the log, and a broker before 4.0 "
    "has no transaction.version to raise.",
    also=("INFO",),
    impact=(
        "An unknown value version makes the coordinator fail to load the record; a version-1 value on an older "
        "broker points at a downgrade."
    ),
    action=(
        "Check the broker versions and the `transaction.version` feature (`kafka-features.sh describe`); set "
        "`audit.broker_version`."
    ),
)
STATUS_INVALID = rule(
    "TSL-003",
    "STATUS_INVALID",
    "ERROR",
    "6.7",
    "A transaction status outside 0-7, or Dead (6) / PrepareEpochFence (7), which are never persisted.",
    impact=(
        "Dead and PrepareEpochFence are never persisted; such a status means a corrupt record the coordinator cannot "
        "load."
    ),
    action=(
        "Dump the record with `kafka-dump-log.sh --transaction-log-decoder` and compare replicas of the "
        "`__transaction_state` partition."
    ),
)
EMPTY_SHAPE = rule(
    "TSL-004",
    "EMPTY_SHAPE",
    "ERROR",
    "6.7",
    "An Empty record with partitions or a start timestamp other than -1. An empty partition array is accepted "
    "like a null one: kafka-dump-log text prints both alike.",
    impact=(
        "An Empty record with partitions or a start time is a state the coordinator never writes; loading it gives "
        "the id a wrong transaction."
    ),
    action="Dump the record with `kafka-dump-log.sh --transaction-log-decoder` and compare replicas.",
)
COMPLETE_SHAPE = rule(
    "TSL-005",
    "COMPLETE_SHAPE",
    "ERROR",
    "6.7",
    "CompleteCommit/CompleteAbort with partitions or a start timestamp of -1; Ongoing/Prepare* without "
    "partitions (ERROR), except a TV2 PrepareAbort of an empty transaction (INFO).",
    also=("INFO",),
    impact=(
        "A Complete* with partitions or an Ongoing/Prepare* without them is a state the coordinator never writes; "
        "the reloaded coordinator may send markers to the wrong partitions."
    ),
    action="Dump the id's records with `kafka-dump-log.sh --transaction-log-decoder` and compare replicas.",
    per_producer=True,
)
TIMEOUT_TOO_LARGE = rule(
    "TSL-010",
    "TIMEOUT_TOO_LARGE",
    "WARN",
    "6.7",
    "A transaction timeout above audit.transaction_max_timeout_ms (transaction.max.timeout.ms) that is not the "
    "two-phase-commit value Integer.MAX_VALUE; reported once per id and timeout value.",
    impact=(
        "A timeout above `transaction.max.timeout.ms` should have been refused; such a transaction can keep the LSO "
        "back longer than the cluster allows."
    ),
    action=(
        "Check the producer's `transaction.timeout.ms` and the broker's `transaction.max.timeout.ms` (set "
        "`audit.transaction_max_timeout_ms` to the cluster's value)."
    ),
)
STUCK_STATE = rule(
    "TSL-012",
    "STUCK_STATE",
    "WARN",
    "6.7",
    "The last record of an id is Ongoing past its start + timeout + 10 s, or Prepare* with no Complete* for more "
    "than 5 minutes, at the reference time (--reference-time, else the partition's newest timestamp).",
    impact=(
        "The coordinator should have aborted or completed this transaction long ago: it is down, the partition is "
        "offline, or markers keep failing, and the transaction's partitions have a stuck LSO."
    ),
    action=(
        "Check the transactional id with `kafka-transactions.sh describe --transactional-id ID` and the coordinator "
        "broker's log; abort stuck partitions with `kafka-transactions.sh abort`."
    ),
)
PID_SHARED = rule(
    "TSL-014",
    "PID_SHARED",
    "CRITICAL",
    "6.7",
    "The same producer id is the current producer id of two transactional ids (latest record of each id, "
    "across all partitions of the cluster's __transaction_state topic).",
    impact=(
        "Fencing is keyed by producer id on every partition: two transactional ids on one producer id fence each "
        "other and can commit or abort each other's data."
    ),
    action=(
        "Stop the producers of both ids and compare replicas of the `__transaction_state` partitions; producer ids "
        "come from unique blocks, so report it with the broker versions."
    ),
)
BATCH_ATTRIBUTES = rule(
    "TSL-015",
    "BATCH_ATTRIBUTES",
    "WARN",
    "6.7",
    "A __transaction_state batch that is transactional, compressed, or carries a producer id other than -1.",
    impact=(
        "The coordinator writes `__transaction_state` uncompressed and without a producer id; other batches were not "
        "written by it."
    ),
    action=(
        "Check that no client produces to `__transaction_state` and that the copy is not mixed up with another topic."
    ),
)


def _state_in(column: Column, states) -> Column:
    return column.isin(*states)


@frame("transaction_log.records", coordinator_local=True)
def COORDINATOR_RECORDS(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """Every audited `__transaction_state` record (pipeline.audit.replay.coordinator_records), located at its offset.

    `is_first_of_batch`: the record has the lowest offset of its batch; `previous_timeout_ms`: the timeout of the
    id's record before it in the partition, cleaned or not.
    """
    return inputs.coordinator_records


# Conditions on one row of COORDINATOR_RECORDS.
def _partition_count() -> Column:
    return F.coalesce(F.size("partition_set"), F.lit(0))


def _value() -> Column:
    """The record has a value with a status."""
    return ~F.col("is_tombstone") & F.col("state").isNotNull()


@check(KEY_VERSION, on=COORDINATOR_RECORDS)
def key_version(ctx: AuditContext) -> Fires:
    return Fires(
        F.col("key_version") != 0,
        F.format_string("key version %d; the coordinator skips the record", "key_version"),
        {"transactional_id": F.col("transactional_id")},
    )


@check(VALUE_VERSION, on=COORDINATOR_RECORDS)
def value_version(ctx: AuditContext) -> Fires:
    new_version_on_old_broker = F.lit(ctx.settings.broker_older_than("4.0")) & (F.col("value_version") == 1)
    return Fires(
        _value() & (~F.col("value_version").isin(0, 1) | new_version_on_old_broker),
        F.format_string("value version %d of %s", "value_version", "transactional_id"),
        {"transactional_id": F.col("transactional_id")},
        severity=F.when(F.col("value_version") == 1, F.lit("INFO")).otherwise(F.lit("ERROR")),
    )


@check(STATUS_INVALID, on=COORDINATOR_RECORDS)
def status_invalid(ctx: AuditContext) -> Fires:
    state = F.col("state")
    return Fires(
        _value() & (~state.between(EMPTY, PREPARE_EPOCH_FENCE) | state.isin(DEAD, PREPARE_EPOCH_FENCE)),
        F.format_string("%s persisted with status %d", "transactional_id", "state"),
        {"transactional_id": F.col("transactional_id"), "state": F.col("state_name")},
    )


@check(EMPTY_SHAPE, on=COORDINATOR_RECORDS)
def empty_shape(ctx: AuditContext) -> Fires:
    partitions = _partition_count()
    return Fires(
        _value() & (F.col("state") == EMPTY) & ((partitions > 0) | (F.col("start_timestamp_ms") != -1)),
        F.format_string(
            "Empty record of %s with %d partition(s) and start timestamp %d",
            "transactional_id",
            partitions,
            F.coalesce("start_timestamp_ms", F.lit(-1)),
        ),
        {"transactional_id": F.col("transactional_id"), "partitions": F.array_join("partition_set", ",")},
    )


@check(COMPLETE_SHAPE, on=COORDINATOR_RECORDS)
def complete_shape(ctx: AuditContext) -> Fires:
    state = F.col("state")
    partitions = _partition_count()
    empty_abort = (state == PREPARE_ABORT) & F.col("is_tv2")
    return Fires(
        _value()
        & (
            (_state_in(state, COMPLETE_STATES) & ((partitions > 0) | (F.col("start_timestamp_ms") == -1)))
            | (_state_in(state, (ONGOING, *PREPARE_STATES)) & (partitions == 0))
        ),
        F.format_string(
            "%s record of %s with %d partition(s) and start timestamp %d",
            "state_name",
            "transactional_id",
            partitions,
            F.coalesce("start_timestamp_ms", F.lit(-1)),
        ),
        {"transactional_id": F.col("transactional_id")},
        severity=F.when(empty_abort & (partitions == 0), F.lit("INFO")).otherwise(F.lit("ERROR")),
    )


@check(BATCH_ATTRIBUTES, on=COORDINATOR_RECORDS)
def batch_attributes(ctx: AuditContext) -> Fires:
    batch_problems = F.concat_ws(
        ", ",
        F.when(F.col("batch_is_transactional"), F.lit("transactional")),
        F.when(F.col("batch_compression") != 0, F.format_string("compression %d", "batch_compression")),
        F.when(F.col("batch_producer_id") != -1, F.format_string("producer id %d", "batch_producer_id")),
    )
    return Fires(
        F.col("is_first_of_batch") & (F.length(batch_problems) > 0),
        F.format_string("__transaction_state batch at offset %d: %s", "batch_base_offset", batch_problems),
        {"batch_base_offset": F.col("batch_base_offset")},
    )


@check(TIMEOUT_TOO_LARGE, on=COORDINATOR_RECORDS)
def timeout_too_large(ctx: AuditContext) -> Fires:
    """Once per id and timeout value (every record of the id would repeat it)."""
    timeout = F.col("transaction_timeout_ms")
    return Fires(
        (timeout > ctx.settings.transaction_max_timeout_ms)
        & (timeout != INT32_MAX)
        & ~F.col("previous_timeout_ms").eqNullSafe(timeout),
        F.format_string(
            "%s: transaction timeout %d ms above transaction.max.timeout.ms %d",
            "transactional_id",
            "transaction_timeout_ms",
            F.lit(ctx.settings.transaction_max_timeout_ms),
        ),
        {"transactional_id": F.col("transactional_id")},
    )


def _live() -> Column:
    """A value naming a producer id."""
    return ~F.col("is_tombstone") & (F.col("producer_id") >= 0)


@frame("transaction_log.latest")
def LATEST_COORDINATOR_RECORDS(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """The last record of each id, with the time the partition is judged at (`reference_time_ms`).

    `ids_of_producer`: the sorted transactional ids whose last record is a value naming the same producer id,
    across all partitions of the cluster's __transaction_state topic.
    """
    records = inputs.coordinator_records
    if records is None:
        return None
    # The latest record of an id is the one no later record follows (`followed`, from the window that made the
    # records): no sort of every record again. The partition's newest time is an aggregate, a row per partition.
    latest = records.where(F.col("transactional_id").isNotNull() & ~F.col("followed"))
    if ctx.reference_time_ms is not None:
        latest = latest.withColumn("reference_time_ms", F.lit(ctx.reference_time_ms).cast("long"))
    else:
        newest = records.groupBy(*TP).agg(
            F.greatest(F.max("batch_timestamp"), F.max("last_update_timestamp_ms")).alias("reference_time_ms")
        )
        latest = latest.join(F.broadcast(newest), on=TP, how="inner")
    # One cluster has one __transaction_state topic, whose partitions together map ids to producer ids.
    sharing = Window.partitionBy("cluster_id", "topic", F.when(_live(), F.col("producer_id")))
    return latest.withColumn(
        "ids_of_producer", F.array_sort(F.collect_set(F.when(_live(), F.col("transactional_id"))).over(sharing))
    )


@check(STUCK_STATE, on=LATEST_COORDINATOR_RECORDS)
def stuck_state(ctx: AuditContext) -> Fires:
    state = F.col("state")
    deadline = F.col("start_timestamp_ms") + F.col("transaction_timeout_ms") + TIMEOUT_CHECK_INTERVAL_MS
    return Fires(
        ~F.col("is_tombstone")
        & (
            ((state == ONGOING) & (deadline < F.col("reference_time_ms")))
            | (
                _state_in(state, PREPARE_STATES)
                & (F.col("last_update_timestamp_ms") + PREPARE_STUCK_MS < F.col("reference_time_ms"))
            )
        ),
        F.format_string(
            "%s still %s at %d (last update %d)",
            "transactional_id",
            "state_name",
            "reference_time_ms",
            "last_update_timestamp_ms",
        ),
        {"transactional_id": F.col("transactional_id"), "reference_time_ms": F.col("reference_time_ms")},
    )


@check(PID_SHARED, on=LATEST_COORDINATOR_RECORDS)
def pid_shared(ctx: AuditContext) -> Fires:
    ids = F.col("ids_of_producer")
    return Fires(
        _live() & (F.size(ids) > 1),
        F.format_string("producer %d is the current producer of %s", "producer_id", F.array_join(ids, ", ")),
        {"transactional_id": F.col("transactional_id"), "transactional_ids": F.array_join(ids, ",")},
    )
