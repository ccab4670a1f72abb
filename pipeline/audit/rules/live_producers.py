"""The leaders' producer state against the log: what DescribeProducers (KIP-664) reported for each partition of a
`kafka://` input when it was planned (`live_producers`), against the replay's state at the end of the batches read.

A leader's `ProducerStateManager` is the state the broker judges the next write by. When it has forgotten a
producer whose batches the retained log still holds, that producer's next write is refused (UNKNOWN_PRODUCER_ID, or
OutOfOrderSequence from a leader that rebuilt its state from a later point: the state loss of KIP-360); when it
holds another epoch, last sequence or open transaction than the log shows, the leader and the log disagree about
what was written. Spec §6 reads files only; these codes extend its catalog in its style, as §6.12, as the SNP rules
(§6.6) compare a snapshot's entries with the replay. They need a `kafka://` input; without one they are skipped.

Only what the log and the timing cannot explain is reported. A producer the leader expired is normal: one whose
last batch is older than `audit.producer_id_expiration_ms` at the time the leader was asked is not reported (set it
to the brokers' `producer.id.expiration.ms`). Fields are compared only on a partition whose high watermark did not
move while it was described (`settled`) and whose read ended there, so the leader's state belongs to exactly the
batches read; the coordinator epoch is left to the XTX rules, which hold each marker's against the coordinator's
records. Producers the leader knows and the log does not are normal (a cleaner
or retention removed their batches while the state stays until expiry), unless the leader holds an open
transaction for them within the offsets read (LIV-003).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.core.registry import Fires, check, frame, rule
from schemas.keys import TP, TP_PID

SECTION = "6.12"

LIVE_STATE_LOST = rule(
    "LIV-001",
    "LIVE_STATE_LOST",
    "WARN",
    SECTION,
    "A producer id with batches in the log read from a partition is not among the producers its leader reported "
    "(DescribeProducers), although its last batch is younger than `audit.producer_id_expiration_ms` at the time of "
    "the request: the leader lost the producer's state without expiring it. Producers older than that are expired "
    "by the broker, which is normal and not reported. Needs a `kafka://` input.",
    impact=(
        "The producer's next write is refused with UNKNOWN_PRODUCER_ID (or OutOfOrderSequence, KIP-360): an "
        "idempotent producer resets its epoch and sequences, and batches in flight may be written twice or lost "
        "from the application's point of view; a transactional one aborts."
    ),
    action=(
        "Check `producer.id.expiration.ms` of the brokers against `audit.producer_id_expiration_ms`; if the broker "
        "did not expire it, look for a leader change or restart around `described_at` that rebuilt the state from a "
        "snapshot or truncated the log (server.log: `Loading producer state`, `Truncating`)."
    ),
)
LIVE_STATE_DIFFERS = rule(
    "LIV-002",
    "LIVE_STATE_DIFFERS",
    "ERROR",
    SECTION,
    "On a partition whose high watermark did not move while its leader was described, and whose batches were read "
    "up to it, the leader's state of a producer differs from the replay's at the end of the log in its epoch, "
    "its last sequence or the first offset of its open transaction. ERROR for the epoch or the open transaction, "
    "WARN for the last sequence. Needs a `kafka://` input.",
    impact=(
        "The leader judges the producer's next write by another state than the log holds: a write the log allows "
        "is refused, or a duplicate accepted; an open transaction the log closed (or a closed one it holds open) "
        "keeps the last stable offset where it is, and read_committed consumers wait."
    ),
    action=(
        "Compare with `kafka-transactions.sh describe-producers --topic T --partition P` (and the producer's "
        "batches around its last offset); an open transaction the log does not hold is aborted with "
        "`kafka-transactions.sh abort` and reported to the broker's maintainers with the log."
    ),
)
LIVE_OPEN_TXN_UNSEEN = rule(
    "LIV-003",
    "LIVE_OPEN_TXN_UNSEEN",
    "ERROR",
    SECTION,
    "On a partition whose high watermark did not move while its leader was described, the leader reports an open "
    "transaction from an offset within the batches read for a producer of which those batches hold nothing. Needs "
    "a `kafka://` input.",
    impact=(
        "The leader keeps the partition's last stable offset at that transaction's first offset until it times "
        "out or is aborted: read_committed consumers stop there, for a transaction no batch of the log belongs to."
    ),
    action=(
        "Abort it (`kafka-transactions.sh abort --topic T --partition P --start-offset F`) and keep the broker's "
        "logs and the partition's files for its maintainers."
    ),
)

_COMPARED = ("producer_epoch", "last_sequence", "current_txn_start_offset")


@frame("live_producers", rows_of="live_producers")
def LIVE_PRODUCERS(inputs: AuditInputs, ctx: AuditContext) -> DataFrame | None:  # noqa: N802
    """One row per (partition, producer) over the leader's producers and the replay's of each described partition:
    `live_*` columns are the leader's, `replay_*` the replay's state at the end of the log; `in_leader` and
    `in_log` say which sides have the producer."""
    if inputs.live_producers is None:
        return None
    live = inputs.live_producers
    described = live.groupBy(*TP).agg(
        F.max("broker_id").alias("leader_id"),
        F.max("described_at").alias("described_at"),
        F.bool_and("settled").alias("settled"),
        F.max("log_end_offset").alias("log_end_offset"),
        F.max("read_end_offset").alias("read_end_offset"),
    )
    leader = live.where(F.col("producer_id").isNotNull()).select(
        *TP_PID,
        *[F.col(name).alias(f"live_{name}") for name in (*_COMPARED, "last_timestamp")],
        F.lit(True).alias("in_leader"),
    )
    replay = (
        inputs.producer_state.where(F.col("producer_id") >= 0)
        .select(*TP_PID, *[F.col(c).alias(f"replay_{c}") for c in (*_COMPARED, "last_timestamp", "last_offset")])
        .withColumn("in_log", F.lit(True))
    )
    return (
        leader.join(replay, on=TP_PID, how="full")
        .join(F.broadcast(described), on=TP, how="inner")
        .join(inputs.partitions.select(*TP, "log_start_offset"), on=TP, how="left")
        .withColumns(
            {
                "in_leader": F.coalesce("in_leader", F.lit(False)),
                "in_log": F.coalesce("in_log", F.lit(False)),
                "producer_epoch": F.coalesce("replay_producer_epoch", "live_producer_epoch"),
                "base_offset": F.coalesce("replay_last_offset", "live_current_txn_start_offset"),
                "last_offset": F.coalesce("replay_last_offset", "live_current_txn_start_offset"),
                "position": F.lit(None).cast("long"),
                "source_file": F.lit(None).cast("string"),
                "broker_id": F.col("leader_id"),
            }
        )
    )


def _comparable() -> Column:
    """The leader's state is that of exactly the batches read."""
    return F.col("settled") & (F.col("read_end_offset") == F.col("log_end_offset"))


def _differs(name: str) -> Column:
    return ~F.col(f"live_{name}").eqNullSafe(F.col(f"replay_{name}"))


def _evidence() -> dict[str, Column]:
    return {
        **{f"leader_{name}": F.col(f"live_{name}") for name in (*_COMPARED, "last_timestamp")},
        **{f"replay_{name}": F.col(f"replay_{name}") for name in (*_COMPARED, "last_timestamp")},
        "described_at": F.col("described_at"),
        "log_end_offset": F.col("log_end_offset"),
    }


@check(LIVE_STATE_LOST, on=LIVE_PRODUCERS)
def live_state_lost(ctx: AuditContext) -> Fires:
    age = F.col("described_at") - F.col("replay_last_timestamp")
    return Fires(
        F.col("in_log") & ~F.col("in_leader") & (age < F.lit(ctx.settings.producer_id_expiration_ms)),
        F.format_string(
            "the leader (broker %d) holds no state for producer %d, whose last batch is %d ms old",
            F.col("leader_id"),
            F.col("producer_id"),
            age,
        ),
        {**_evidence(), "age_ms": age, "producer_id_expiration_ms": F.lit(ctx.settings.producer_id_expiration_ms)},
    )


@check(LIVE_STATE_DIFFERS, on=LIVE_PRODUCERS)
def live_state_differs(ctx: AuditContext) -> Fires:
    serious = _differs("producer_epoch") | _differs("current_txn_start_offset")
    return Fires(
        F.col("in_log") & F.col("in_leader") & _comparable() & (serious | _differs("last_sequence")),
        F.format_string(
            "the leader (broker %d) holds another state for producer %d than the log: %s",
            F.col("leader_id"),
            F.col("producer_id"),
            F.concat_ws(", ", *[F.when(_differs(name), F.lit(name)) for name in _COMPARED]),
        ),
        _evidence(),
        severity=F.when(serious, F.lit("ERROR")).otherwise(F.lit("WARN")),
    )


@check(LIVE_OPEN_TXN_UNSEEN, on=LIVE_PRODUCERS)
def live_open_txn_unseen(ctx: AuditContext) -> Fires:
    start = F.col("live_current_txn_start_offset")
    return Fires(
        F.col("in_leader")
        & ~F.col("in_log")
        & F.col("settled")
        & start.isNotNull()
        & (start >= F.coalesce("log_start_offset", F.lit(0)))
        & (start < F.col("read_end_offset")),
        F.format_string(
            "the leader (broker %d) holds a transaction of producer %d open from offset %d; the log holds none of "
            "its batches",
            F.col("leader_id"),
            F.col("producer_id"),
            start,
        ),
        _evidence(),
    )
