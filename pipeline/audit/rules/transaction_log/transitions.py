"""`__transaction_state` alone (spec §6.7): each uncleaned record of a transactional id against the one before it,
as the coordinator's state machine allows its states (§5.2), producer ids and epochs (§5.3), partitions, timeouts
and expiry to follow each other.

The records are those of pipeline.audit.replay.coordinator_records; only the uncleaned ones are paired, since
compaction removes intermediate states and two records that survived it need not be neighbours in the coordinator's
history.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.core.registry import Fires, check, frame, rule
from schemas.transaction_log import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    COMPLETE_STATES,
    DEAD,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARE_EPOCH_FENCE,
    PREPARE_STATES,
)

EXPIRABLE_STATES = (EMPTY, *COMPLETE_STATES)
VALID_PREVIOUS_STATES = {  # spec §5.2; PrepareAbort's Empty/Complete* predecessors only under TV2 (empty abort)
    EMPTY: (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT),
    ONGOING: (ONGOING, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT),
    PREPARE_COMMIT: (ONGOING,),
    PREPARE_ABORT: (ONGOING, PREPARE_EPOCH_FENCE),
    COMPLETE_COMMIT: (PREPARE_COMMIT,),
    COMPLETE_ABORT: (PREPARE_ABORT,),
    DEAD: (EMPTY, COMPLETE_ABORT, COMPLETE_COMMIT),
    PREPARE_EPOCH_FENCE: (ONGOING,),
}
TV2_EMPTY_ABORT_PREVIOUS = (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT)
ILLEGAL_TRANSITION = rule(
    "TSL-006",
    "ILLEGAL_TRANSITION",
    "ERROR",
    "6.7",
    "Consecutive uncleaned records of one transactional id whose states are not a valid transition (spec §5.2).",
    impact=(
        "An illegal state change means coordinator records are missing or were written out of order: the "
        "transaction's outcome on its partitions may not match."
    ),
    action=(
        "Check for a coordinator failover (the partition's leader epochs) and compare replicas; check the affected "
        "partitions' markers (XTX findings)."
    ),
)
EPOCH_TRANSITION = rule(
    "TSL-007",
    "EPOCH_TRANSITION",
    "ERROR",
    "6.7",
    "Producer id / epoch change that §5.3 does not allow: Empty not at the same epoch, +1, or a new producer id "
    "at 0; Ongoing or Complete* changing them (except TV2 overflow to the next producer id at 0); Prepare* not "
    "at the same epoch (TV0/1) or +1 (TV2); a PrepareAbort after Ongoing may also be a fence or timeout abort, "
    "+1 in every version (+2 tolerated under TV2: a 4.0.0 coordinator bumped twice, KAFKA-19367).",
    impact=(
        "Epochs drive fencing; an epoch or producer-id change the coordinator never makes means a stale coordinator "
        "or missing records, so zombies may not be fenced."
    ),
    action=(
        "Compare the id's history across replicas of the `__transaction_state` partition and check for unclean "
        "leader elections there."
    ),
)
PARTITION_SET = rule(
    "TSL-008",
    "PARTITION_SET",
    "ERROR",
    "6.7",
    "Ongoing followed by Ongoing whose partitions are not a superset, or Prepare* whose partitions differ from "
    "the preceding Ongoing record's.",
    impact=(
        "The coordinator sends markers to the partitions of its Prepare* record; if they differ from the Ongoing "
        "set, some partitions get no marker and their transactions hang."
    ),
    action=(
        "Check the partitions left out for open transactions (LSO-002, XTX-002) and abort them with "
        "`kafka-transactions.sh abort`."
    ),
)
TIMEOUT_CHANGED = rule(
    "TSL-009",
    "TIMEOUT_CHANGED",
    "ERROR",
    "6.7",
    "The transaction timeout changes on a transition other than to Empty (InitProducerId).",
    impact=(
        "The timeout is fixed between InitProducerId calls; a change mid-transaction means corrupt or mixed records, "
        "and timeout aborts fire at the wrong time."
    ),
    action="Dump the id's records with `kafka-dump-log.sh --transaction-log-decoder` and compare replicas.",
)
TIME_REGRESSION = rule(
    "TSL-011",
    "TIME_REGRESSION",
    "WARN",
    "6.7",
    "The last-update timestamp of a transactional id goes backwards from one record to the next.",
    impact=(
        "Expiry of transactional ids uses the last-update time; going backwards points at a coordinator with a "
        "skewed clock, which can expire ids early or late."
    ),
    action="Check the clocks (NTP) of the brokers that led the `__transaction_state` partition.",
)
EARLY_EXPIRY = rule(
    "TSL-013",
    "EARLY_EXPIRY",
    "WARN",
    "6.7",
    "A tombstone for an id whose previous record is not expirable (Ongoing, Prepare*), or that was updated less "
    "than audit.transactional_id_expiration_ms before the tombstone's batch timestamp.",
    impact=(
        "An id expired while a transaction was open or before its expiry time: its producer loses fencing, and open "
        "transactions of the id can hang."
    ),
    action=(
        "Compare the gap with `transactional.id.expiration.ms` (`audit.transactional_id_expiration_ms`) and check "
        "coordinator clocks; look for hanging transactions of the id's producer (LSO-002)."
    ),
)


@frame("transaction_log.transitions", coordinator_local=True)
def COORDINATOR_TRANSITIONS(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """Each uncleaned record of an id with the previous uncleaned record of the same id (`prev`), if there is one."""
    # `prev` comes with the records (pipeline.audit.replay.coordinator_records: each partition's in its task).
    records = inputs.coordinator_records
    if records is None:
        return None
    return records.where(F.col("is_uncleaned") & F.col("transactional_id").isNotNull())


def _epoch_allowed() -> Column:
    """Spec §5.3: the producer id and epoch a state may follow its predecessor with."""
    state, epoch, pid = F.col("state"), F.col("producer_epoch"), F.col("producer_id")
    step = epoch - F.col("prev.producer_epoch")
    same_pid = pid == F.col("prev.producer_id")
    overflow = F.col("is_tv2") & (pid == F.col("prev.next_producer_id")) & (epoch == 0)
    prepare_step = F.when(F.col("is_tv2"), step == 1).otherwise(step == 0)
    # after Ongoing, a fence or timeout abort is +1 in every version; +2 from a 4.0.0 coordinator on TV2
    abort_step = F.when(F.col("is_tv2"), step.isin(1, 2)).otherwise(step.isin(0, 1))
    return (
        F.when(state == EMPTY, (same_pid & step.isin(0, 1)) | (~same_pid & (epoch == 0)))
        .when(state == ONGOING, same_pid & (step == 0))
        .when(state == PREPARE_COMMIT, same_pid & prepare_step)
        .when(
            state == PREPARE_ABORT,
            same_pid & F.when(F.col("prev.state") == ONGOING, abort_step).otherwise(prepare_step),
        )
        .when(state.isin(*COMPLETE_STATES), (same_pid & (step == 0)) | overflow)
        .otherwise(F.lit(True))  # Dead and PrepareEpochFence are never persisted: TSL-003
    )


def _valid_previous(state: Column, previous: Column, tv2: Column) -> Column:
    allowed = F.lit(False)
    for next_state, previous_states in VALID_PREVIOUS_STATES.items():
        allowed = F.when(state == next_state, previous.isin(*previous_states)).otherwise(allowed)
    return allowed | ((state == PREPARE_ABORT) & tv2 & previous.isin(*TV2_EMPTY_ABORT_PREVIOUS))


# Conditions on one row of COORDINATOR_TRANSITIONS.
def _pair() -> Column:
    """Two consecutive values of the id with valid statuses: a transition to check."""
    state = F.col("state")
    return (
        F.col("prev").isNotNull()
        & ~F.col("prev.is_tombstone")
        & ~F.col("is_tombstone")
        & state.between(EMPTY, PREPARE_EPOCH_FENCE)
        & F.col("prev.state").between(EMPTY, PREPARE_EPOCH_FENCE)
    )


def _transition() -> Column:
    return F.format_string("%s -> %s of %s", "prev.state_name", "state_name", "transactional_id")


def _transition_evidence() -> dict[str, Column]:
    return {
        "transactional_id": F.col("transactional_id"),
        "previous_offset": F.col("prev.record_offset"),
        "previous_state": F.col("prev.state_name"),
    }


@check(ILLEGAL_TRANSITION, on=COORDINATOR_TRANSITIONS)
def illegal_transition(ctx: AuditContext) -> Fires:
    return Fires(
        _pair() & ~_valid_previous(F.col("state"), F.col("prev.state"), F.col("is_tv2")),
        F.concat(_transition(), F.lit(" is not a valid transition")),
        _transition_evidence(),
    )


@check(EPOCH_TRANSITION, on=COORDINATOR_TRANSITIONS)
def epoch_transition(ctx: AuditContext) -> Fires:
    return Fires(
        _pair() & ~_epoch_allowed(),
        F.format_string(
            "%s: producer %d epoch %d -> producer %d epoch %d",
            _transition(),
            "prev.producer_id",
            "prev.producer_epoch",
            "producer_id",
            "producer_epoch",
        ),
        {
            **_transition_evidence(),
            "previous_producer_id": F.col("prev.producer_id"),
            "previous_epoch": F.col("prev.producer_epoch"),
        },
    )


@check(PARTITION_SET, on=COORDINATOR_TRANSITIONS)
def partition_set(ctx: AuditContext) -> Fires:
    state = F.col("state")
    dropped = F.array_except("prev.partition_set", "partition_set")
    return Fires(
        _pair()
        & F.col("prev.state").eqNullSafe(ONGOING)
        & (
            ((state == ONGOING) & (F.size(dropped) > 0))
            | (state.isin(*PREPARE_STATES) & ~F.col("prev.partition_set").eqNullSafe(F.col("partition_set")))
        ),
        F.format_string(
            "%s: partitions [%s] -> [%s]",
            _transition(),
            F.array_join("prev.partition_set", ","),
            F.array_join("partition_set", ","),
        ),
        {**_transition_evidence(), "dropped": F.array_join(dropped, ",")},
    )


@check(TIMEOUT_CHANGED, on=COORDINATOR_TRANSITIONS)
def timeout_changed(ctx: AuditContext) -> Fires:
    return Fires(
        _pair() & (F.col("state") != EMPTY) & (F.col("transaction_timeout_ms") != F.col("prev.transaction_timeout_ms")),
        F.format_string(
            "%s: timeout %d ms -> %d ms", _transition(), "prev.transaction_timeout_ms", "transaction_timeout_ms"
        ),
        _transition_evidence(),
    )


@check(TIME_REGRESSION, on=COORDINATOR_TRANSITIONS)
def time_regression(ctx: AuditContext) -> Fires:
    return Fires(
        _pair() & (F.col("last_update_timestamp_ms") < F.col("prev.last_update_timestamp_ms")),
        F.format_string(
            "%s: last update %d -> %d", _transition(), "prev.last_update_timestamp_ms", "last_update_timestamp_ms"
        ),
        _transition_evidence(),
    )


@check(EARLY_EXPIRY, on=COORDINATOR_TRANSITIONS)
def early_expiry(ctx: AuditContext) -> Fires:
    expiry_ms = ctx.settings.transactional_id_expiration_ms
    too_early = F.col("prev.last_update_timestamp_ms") > F.col("batch_timestamp") - F.lit(expiry_ms)
    return Fires(
        F.col("is_tombstone")
        & F.col("prev").isNotNull()
        & ~F.col("prev.is_tombstone")
        & (~F.col("prev.state").isin(*EXPIRABLE_STATES) | too_early),
        F.format_string(
            "tombstone for %s, last %s at %d, batch time %d",
            "transactional_id",
            "prev.state_name",
            "prev.last_update_timestamp_ms",
            "batch_timestamp",
        ),
        {**_transition_evidence(), "transactional_id_expiration_ms": F.lit(expiry_ms)},
    )
