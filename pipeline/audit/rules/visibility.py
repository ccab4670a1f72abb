"""Read-committed visibility: LSO and hanging transactions (spec §6.5, LSO-001/002/004) and the
per-partition summary.

The high watermark is not in the segments; until replication-offset-checkpoint is ingested the log end
offset stands in for it, so the LSO here is the first unstable offset when one exists, else the log end.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline.audit.core.context import AuditContext
from pipeline.audit.core.frames import OPEN_TRANSACTIONS, PARTITIONS
from pipeline.audit.core.registry import Fires, check, rule
from pipeline.audit.state.partitions import abort_command

FIRST_UNSTABLE_OFFSET = rule(
    "LSO-001",
    "FIRST_UNSTABLE_OFFSET",
    "INFO",
    "6.5",
    "A partition with open transactions: its first unstable offset and last stable offset, below which "
    "read_committed consumers stop.",
    impact=(
        "read_committed consumers read only up to the last stable offset; everything from the first open transaction "
        "on waits for its marker."
    ),
    action=(
        "No action while the transactions are young; watch the partition's LSO lag, and check LSO-002 for ones that "
        "stay open."
    ),
)
LATE_OR_HANGING_TXN = rule(
    "LSO-002",
    "LATE_OR_HANGING_TXN",
    "ERROR",
    "6.5",
    "Open transaction whose producer has been silent longer than transaction.max.timeout.ms + 5 min before "
    "the reference time: a healthy coordinator would have aborted it, so the LSO is stuck. The evidence "
    "holds the kafka-transactions.sh command that aborts it.",
    impact=(
        "A hanging transaction keeps the LSO stuck: read_committed consumers stop at it and their lag grows, and "
        "compaction cannot pass it."
    ),
    action=(
        "Confirm with `kafka-transactions.sh find-hanging --broker-id N` on the live cluster, then run the abort "
        "command in the evidence (`kafka-transactions.sh abort --topic T --partition N --start-offset F`)."
    ),
)
OPEN_TXN_BELOW_LOG_START = rule(
    "LSO-003",
    "OPEN_TXN_BELOW_LOG_START",
    "WARN",
    "6.5",
    "Open transaction that starts below the log start offset of log-start-offset-checkpoint (records deleted "
    "by retention or DeleteRecords): the LSO is clamped to the log start and the transaction's beginning is "
    "gone. Needs the log dir's checkpoint files.",
    impact=(
        "The transaction's beginning was deleted by retention or DeleteRecords while it was open: its first records "
        "are gone, and the LSO is clamped to the log start."
    ),
    action=(
        "Check it is not also hanging (LSO-002); find the producer with `kafka-transactions.sh describe-producers` "
        "and abort it if its owner is gone."
    ),
)
COMPACTION_BLOCKED = rule(
    "LSO-004",
    "COMPACTION_BLOCKED",
    "WARN",
    "6.5",
    "Compacted topic with a hanging transaction: the cleaner never cleans beyond the LSO.",
    impact=(
        "The log cleaner never cleans beyond the LSO, so a hanging transaction makes the compacted topic grow "
        "without bound (KIP-664)."
    ),
    action=(
        "Abort the hanging transaction (the LSO-002 finding's command) and check `cleaner-offset-checkpoint` moves "
        "afterwards."
    ),
)


def _open_evidence() -> dict[str, Column]:
    return {
        "start_offset": F.col("base_offset"),
        "last_timestamp": F.col("end_timestamp"),
        "reference_time_ms": F.col("reference_time_ms"),
        "silent_ms": F.col("silent_ms"),
        "abort_command": abort_command(F.col("topic"), F.col("partition"), F.col("base_offset")),
    }


@check(OPEN_TXN_BELOW_LOG_START, on=OPEN_TRANSACTIONS)
def open_txn_below_log_start(ctx: AuditContext) -> Fires:
    return Fires(
        F.col("base_offset") < F.col("checkpoint_log_start"),
        F.format_string(
            "transaction of producer %d open since offset %d, below the log start offset %d",
            F.col("producer_id"),
            F.col("base_offset"),
            F.col("checkpoint_log_start"),
        ),
        {"start_offset": F.col("base_offset"), "log_start_offset": F.col("checkpoint_log_start")},
    )


@check(LATE_OR_HANGING_TXN, on=OPEN_TRANSACTIONS)
def late_or_hanging_txn(ctx: AuditContext) -> Fires:
    return Fires(
        F.col("is_hanging"),
        F.format_string(
            "transaction of producer %d open since offset %d, silent for %d ms",
            F.col("producer_id"),
            F.col("base_offset"),
            F.col("silent_ms"),
        ),
        _open_evidence(),
    )


@check(COMPACTION_BLOCKED, on=OPEN_TRANSACTIONS)
def compaction_blocked(ctx: AuditContext) -> Fires:
    return Fires(
        F.col("is_hanging") & F.col("is_compacted"),
        F.format_string("hanging transaction at offset %d blocks compaction", F.col("base_offset")),
        _open_evidence(),
    )


@check(FIRST_UNSTABLE_OFFSET, on=PARTITIONS)
def first_unstable_offset(ctx: AuditContext) -> Fires:
    return Fires(
        F.col("open_transactions") > 0,
        F.format_string(
            "%d open transaction(s); first unstable offset %d, last stable offset %d",
            F.col("open_transactions"),
            F.col("first_unstable_offset"),
            F.col("last_stable_offset"),
        ),
        {
            "first_unstable_offset": F.col("first_unstable_offset"),
            "last_stable_offset": F.col("last_stable_offset"),
            "log_end_offset": F.col("log_end_offset"),
        },
    )
