"""One entry point for every kind of input: Kafka log directories, dump text and columnar exports.

Each reader gets its inputs from the run's input plan (`input_plan.plan_inputs`), so nothing is listed or
classified here. Rows of log dirs carry the cluster their listing gave them; rows of inputs that name no cluster
(dump text, a columnar export without a `cluster_id`) get their input's here (`InputPlan.clusters`: the cluster
the input was given with, else `ingest.cluster_id`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipeline.arrow_pass import ArrowPass
from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.sources.columnar import read_columnar
from pipeline.sources.dumplog.reader import (
    read_dumplog,
    read_dumplog_offset_commit_records,
    read_dumplog_snapshots,
    read_dumplog_transaction_log,
    read_dumplog_txn_index,
)
from pipeline.sources.input_plan import ACCEPTED, InputPlan
from schemas.offset_commits import GROUP_METADATA_KEY_VERSION, OFFSET_COMMITS
from schemas.transaction_log import TRANSACTION_LOG

if TYPE_CHECKING:
    from pipeline.sources.log_roots import SegmentFile
    from pipeline.sources.partition_files.reader import PartitionFiles


def read_inputs(
    spark: SparkSession, plan: InputPlan, settings: Settings, segments: list[SegmentFile] | None = None
) -> DataFrame:
    """`batches` rows of all planned inputs (schema BATCHES), whatever their kind, as one DataFrame.

    `segments`, when given, are the `.log` files of the log-dir inputs to decode (all of them by default).
    """
    frames = []
    if plan.segment_roots:
        # Imported on use: dump and columnar inputs do not need the binary segment decoder.
        from pipeline.sources.segments import read_segments

        to_decode = plan.log_roots.segments if segments is None else segments
        frames.append(read_segments(spark, plan.segment_roots, settings, to_decode))
    if plan.dump_files:
        frames.append(of_clusters(plan, plan.dump_files, lambda files: read_dumplog(spark, files, settings)))
    if plan.columnar_paths:
        frames.append(of_clusters(plan, plan.columnar_paths, lambda paths: read_columnar(spark, paths)))
    if not frames:
        raise InputError("(none)", f"no input given; {ACCEPTED}")
    return reduce(DataFrame.unionByName, frames)


def of_clusters(plan: InputPlan, paths: list[str], read: Callable[[list[str]], DataFrame]) -> DataFrame:
    """The rows `read` makes of the `paths` of each cluster (`InputPlan.clusters`), as one DataFrame, with
    `cluster_id` set to that cluster where the input named none."""
    groups: dict[str, list[str]] = {}
    for path in paths:
        groups.setdefault(plan.clusters.get(path, ""), []).append(path)
    return reduce(DataFrame.unionByName, (in_cluster(read(files), cluster) for cluster, files in groups.items()))


def in_cluster(rows: DataFrame, cluster: str) -> DataFrame:
    """`rows` with `cluster_id` set to `cluster` where the input named none; the column stays nullable, as in
    the table schemas (a coalesce would make it not)."""
    cluster_id = F.col("cluster_id")
    return rows.withColumn("cluster_id", F.when(cluster_id.isNull(), F.lit(cluster)).otherwise(cluster_id))


def read_partition_inputs(spark: SparkSession, plan: InputPlan, settings: Settings) -> PartitionFiles | None:
    """The files beside the segments of the log-dir inputs (indexes, snapshots, checkpoints) and the `.txnindex`
    and `.snapshot` dumps among the dump text, as one `PartitionFiles`, or None when there are neither.

    Dump text shows no checkpoints or index problems, and columnar exports carry no such files.
    """
    if not plan.segment_roots and not plan.dump_files:
        return None
    from pipeline.sources.partition_files.reader import empty_partition_files, read_partition_files

    files = read_partition_files(spark, plan.log_roots.listings) if plan.segment_roots else empty_partition_files(spark)
    dumped = dumped_partition_files(spark, plan, settings)
    return replace(files, **{table: getattr(files, table).unionByName(rows) for table, rows in dumped.items()})


def dumped_partition_files(spark: SparkSession, plan: InputPlan, settings: Settings) -> dict[str, DataFrame]:
    """The `txn_index` and `producer_snapshots` rows of the `.txnindex` and `.snapshot` dumps among the dump text,
    by table; nothing without dump text."""
    if not plan.dump_files:
        return {}
    from pipeline.sources.partition_files.dump_forms import snapshots_from_dumplog, txn_index_from_dumplog

    skip = settings.ingest.skip_dir_suffixes
    return {
        "txn_index": of_clusters(
            plan, plan.dump_files, lambda files: txn_index_from_dumplog(read_dumplog_txn_index(spark, files, skip))
        ),
        "producer_snapshots": of_clusters(
            plan, plan.dump_files, lambda files: snapshots_from_dumplog(read_dumplog_snapshots(spark, files, skip))
        ),
    }


@dataclass
class InternalTopicInputs:
    """The records of the coordinator topics in the inputs; nothing is read before a pass or frame runs."""

    transaction_log: list[ArrowPass]  # passes making the TRANSACTION_LOG rows of `__transaction_state`
    # OFFSET_COMMITS rows of the transactional `__consumer_offsets` batches, group metadata records included
    offset_commit_records: DataFrame


def read_internal_topic_inputs(
    spark: SparkSession, plan: InputPlan, settings: Settings, segments: list[SegmentFile] | None = None
) -> InternalTopicInputs | None:
    """The `__transaction_state` records and transactional `__consumer_offsets` records of the log-dir, `kafka://`
    and dump inputs, or None when there are none of these; columnar exports of `batches` hold no records.

    `segments`, when given, are the `.log` files of the log-dir inputs to decode (all of them by default).
    """
    transaction_logs: list[ArrowPass] = []
    offset_commit_records: list[DataFrame] = []
    if plan.segment_roots:
        from pipeline.sources.internal_topics import internal_topic_passes

        to_decode = plan.log_roots.segments if segments is None else segments
        transaction_log, records = internal_topic_passes(spark, to_decode, settings)
        transaction_logs.append(transaction_log or ArrowPass.of(spark.createDataFrame([], TRANSACTION_LOG)))
        offset_commit_records.append(records.frame() if records else spark.createDataFrame([], OFFSET_COMMITS))
    if plan.wire:
        from pipeline.sources.kafka_wire.coordinator_fetch import coordinator_passes

        transaction_log, records = coordinator_passes(spark, plan.wire, settings.kafka)
        transaction_logs.append(transaction_log or ArrowPass.of(spark.createDataFrame([], TRANSACTION_LOG)))
        offset_commit_records.append(records.frame() if records else spark.createDataFrame([], OFFSET_COMMITS))
    if plan.dump_files:
        dumped = of_clusters(plan, plan.dump_files, lambda files: read_dumplog_transaction_log(spark, files, settings))
        transaction_logs.append(ArrowPass.of(dumped))
        offset_commit_records.append(
            of_clusters(plan, plan.dump_files, lambda files: read_dumplog_offset_commit_records(spark, files, settings))
        )
    if not transaction_logs:
        return None
    return InternalTopicInputs(
        transaction_log=transaction_logs,
        offset_commit_records=reduce(DataFrame.unionByName, offset_commit_records),
    )


def split_offset_commit_records(records: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(`offset_commits` rows, group metadata records) of `InternalTopicInputs.offset_commit_records`.

    Group metadata (key version 2) in a transactional batch is not an offset commit; it is counted, not kept.
    """
    group_metadata = F.col("key_version").eqNullSafe(GROUP_METADATA_KEY_VERSION)
    return records.where(~group_metadata), records.where(group_metadata)
