"""The transaction version the coordinator recorded for each producer's transactions, for the replay.

A batch does not say which transaction version wrote it (spec §6.9), but `__transaction_state` does: every
TransactionLogValue v1 carries the client's ClientTransactionVersion (spec §5.1). Only the Ongoing records are
read: they are written on the client's (TV1) or the leader's implicit (TV2) add of a partition, at the data
epoch of the transaction, while a fence or timeout abort and the Empty after InitProducerId carry the
coordinator's own level (cross_checks.tv2_transaction_epochs). A client moves to TV2 at the start of a
transaction and never back (spec §3.9), and a V2 instance of a transactional id may take over the producer id
of a V1 one, so the version is known per producer id by epoch: TV2 from the lowest epoch of a TV2 transaction
on, TV1 up to the highest epoch of a TV0/TV1 one. One row per producer id of a cluster (producer ids are a
cluster's own): a broadcast join, no shuffle.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from schemas.keys import CLUSTER_PRODUCER
from schemas.transaction_log import ONGOING


def coordinator_versions(transaction_log: DataFrame) -> DataFrame:
    """Per (cluster, producer id): the lowest epoch of a transaction the coordinator recorded as TV2 (`tv2_from_epoch`)
    and the highest it recorded as TV0/TV1 (`tv1_through_epoch`), each null when there is none."""
    is_tv2 = F.col("client_transaction_version") >= 2
    return (
        transaction_log.where(
            (F.col("state") == ONGOING)
            & (F.col("producer_id") >= 0)
            & F.col("client_transaction_version").isNotNull()
            & F.col("decode_error").isNull()
        )
        .groupBy(*CLUSTER_PRODUCER)
        .agg(
            F.min(F.when(is_tv2, F.col("producer_epoch"))).alias("tv2_from_epoch"),
            F.max(F.when(~is_tv2, F.col("producer_epoch"))).alias("tv1_through_epoch"),
        )
    )


def with_coordinator_version(rows: DataFrame, transaction_log: DataFrame | None) -> DataFrame:
    """`rows` with `coordinator_version`: 2 or 1 as its cluster's coordinator recorded it for the row's producer
    id and epoch, null when it did not (or no `__transaction_state` was ingested)."""
    if transaction_log is None:
        return rows.withColumn("coordinator_version", F.lit(None).cast("int"))
    versions = F.broadcast(coordinator_versions(transaction_log))
    return rows.join(versions, on=CLUSTER_PRODUCER, how="left").select(
        *rows.columns, _version_at_epoch().alias("coordinator_version")
    )


def _version_at_epoch() -> Column:
    epoch = F.col("producer_epoch")
    return (
        F.when(epoch >= F.col("tv2_from_epoch"), F.lit(2))
        .when(epoch <= F.col("tv1_through_epoch"), F.lit(1))
        .cast("int")
    )
