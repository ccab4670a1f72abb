"""One entry point for every kind of input: Kafka log directories, dump text and columnar exports.

Inputs are classified on the driver from file listings alone, through the pyarrow filesystems the readers
open them with (`filesystems.resolve`), so local paths and URIs such as s3:// or s3a:// behave alike; no file
content is read here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import reduce
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

import pyarrow as pa
from pyarrow import fs as pafs
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.sources.columnar import FORMATS_BY_SUFFIX, columnar_format, read_columnar, require_spark_filesystem
from pipeline.sources.dumplog.reader import (
    read_dumplog,
    read_dumplog_offset_commit_records,
    read_dumplog_snapshots,
    read_dumplog_transaction_log,
    read_dumplog_txn_index,
)
from pipeline.sources.filesystems import configure, resolve
from pipeline.sources.log_dir_names import PARTITION_DIR, SEGMENT_FILE
from schemas.offset_commits import GROUP_METADATA_KEY_VERSION

if TYPE_CHECKING:
    from pipeline.sources.segments import SegmentFile

DUMP_SUFFIXES = (".txt", ".dump", ".out")
INTERNAL_TOPIC_PREFIX = "__"  # __consumer_offsets, __transaction_state, __cluster_metadata, ...
ACCEPTED = (
    "accepted inputs: a Kafka log directory (a `<topic>-<partition>` directory of `<20 digits>.log` segments, "
    "a log.dirs directory of them, or a directory of broker directories), kafka-dump-log text files "
    f"({', '.join('*' + suffix for suffix in DUMP_SUFFIXES)}), columnar `batches` exports "
    f"({', '.join('*' + suffix for suffix in FORMATS_BY_SUFFIX)}), or directories of such files"
)


@dataclass
class InputPlan:
    """Which reader gets which path; paths keep the spelling the caller gave."""

    segment_roots: list[str] = field(default_factory=list)
    dump_files: list[str] = field(default_factory=list)
    columnar_paths: list[str] = field(default_factory=list)


def _is_dump(name: str) -> bool:
    return PurePosixPath(name).suffix.lower() in DUMP_SUFFIXES


def _is_hidden(relative_path: str) -> bool:
    """Hidden or `_`-prefixed files and directories (_SUCCESS, .crc, _delta_log) are not data, as in Spark; a
    `__` prefix is Kafka's internal topics' (`__consumer_offsets-12.txt`, the dump of a partition), not Spark's."""
    return any(
        part.startswith(".") or (part.startswith("_") and not part.startswith(INTERNAL_TOPIC_PREFIX))
        for part in relative_path.split("/")
    )


def _classify(path: str, plan: InputPlan) -> None:
    """Driver-side listing through the pyarrow filesystem of the path, as the readers open it."""
    try:
        filesystem, fs_path = resolve(path)
        info = filesystem.get_file_info(fs_path)
        if info.type == pafs.FileType.NotFound:
            raise InputError(path, "does not exist")
        if info.type == pafs.FileType.File:
            _classify_file(path, plan)
        else:
            _classify_directory(path, filesystem, fs_path.rstrip("/"), plan)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(path, f"cannot be listed: {exc}") from None


def _classify_file(path: str, plan: InputPlan) -> None:
    if _is_dump(path):
        plan.dump_files.append(path)
    elif columnar_format(path):
        plan.columnar_paths.append(path)
    else:
        raise InputError(path, f"unrecognised file type; {ACCEPTED}")


def _classify_directory(path: str, filesystem: pafs.FileSystem, base: str, plan: InputPlan) -> None:
    root_name = base.rpartition("/")[2]
    dumps: list[str] = []
    columnar: list[str] = []
    others = 0
    for entry in filesystem.get_file_info(pafs.FileSelector(base, recursive=True)):
        if entry.type != pafs.FileType.File:
            continue
        relative = entry.path[len(base) + 1 :]
        *dirs, name = relative.split("/")
        if SEGMENT_FILE.fullmatch(name) and PARTITION_DIR.fullmatch(dirs[-1] if dirs else root_name):
            # Kafka data: the segment reader walks the directory itself.
            plan.segment_roots.append(path)
            return
        if _is_hidden(relative):
            continue
        display = f"{path.rstrip('/')}/{relative}"
        if _is_dump(name):
            dumps.append(display)
        elif columnar_format(name):
            columnar.append(display)
        else:
            others += 1
    if not dumps and not columnar:
        raise InputError(path, f"holds no Kafka segments, dump text or columnar files; {ACCEPTED}")
    plan.dump_files.extend(dumps)
    # A directory of one columnar format is read as one data set (partition directories included).
    single_format = len({columnar_format(file) for file in columnar}) == 1
    if columnar and not dumps and not others and single_format:
        plan.columnar_paths.append(path)
    else:
        plan.columnar_paths.extend(columnar)


def classify_inputs(spark: SparkSession, inputs: list[str]) -> InputPlan:
    """Sort inputs by reader; raises InputError for a missing or unrecognised input."""
    configure(spark)
    plan = InputPlan()
    for path in inputs:
        _classify(path, plan)
    for path in plan.columnar_paths:
        require_spark_filesystem(spark, path)
    # An input named twice is read once.
    return InputPlan(
        segment_roots=list(dict.fromkeys(plan.segment_roots)),
        dump_files=list(dict.fromkeys(plan.dump_files)),
        columnar_paths=list(dict.fromkeys(plan.columnar_paths)),
    )


def read_inputs(
    spark: SparkSession, inputs: list[str], settings: Settings, segments: list[SegmentFile] | None = None
) -> DataFrame:
    """`batches` rows of all inputs (schema BATCHES), whatever their kind, as one DataFrame.

    `segments`, when given, are the `.log` files of the log-dir inputs to decode (all of them by default).
    """
    plan = classify_inputs(spark, inputs)
    frames = []
    if plan.segment_roots:
        # Imported on use: dump and columnar inputs do not need the binary segment decoder.
        from pipeline.sources.segments import read_segments

        frames.append(read_segments(spark, plan.segment_roots, settings, segments))
    if plan.dump_files:
        frames.append(read_dumplog(spark, plan.dump_files, settings))
    if plan.columnar_paths:
        frames.append(read_columnar(spark, plan.columnar_paths))
    if not frames:
        raise InputError("(none)", f"no input given; {ACCEPTED}")
    return reduce(DataFrame.unionByName, frames)


def read_partition_inputs(spark: SparkSession, inputs: list[str], settings: Settings):
    """The files beside the segments of the log-dir inputs (indexes, snapshots, checkpoints) and the `.txnindex`
    and `.snapshot` dumps among the dump text, as one `PartitionFiles`, or None when there are neither.

    Dump text shows no checkpoints or index problems, and columnar exports carry no such files.
    """
    plan = classify_inputs(spark, inputs)
    if not plan.segment_roots and not plan.dump_files:
        return None
    from pipeline.sources.partition_files.dump_forms import snapshots_from_dumplog, txn_index_from_dumplog
    from pipeline.sources.partition_files.reader import empty_partition_files, read_partition_files

    if plan.segment_roots:
        files = read_partition_files(spark, plan.segment_roots, settings)
    else:
        files = empty_partition_files(spark)
    if not plan.dump_files:
        return files
    skip = settings.ingest.skip_dir_suffixes
    dumped_index = txn_index_from_dumplog(read_dumplog_txn_index(spark, plan.dump_files, skip))
    dumped_snapshots = snapshots_from_dumplog(read_dumplog_snapshots(spark, plan.dump_files, skip))
    return replace(
        files,
        txn_index=files.txn_index.unionByName(dumped_index),
        producer_snapshots=files.producer_snapshots.unionByName(dumped_snapshots),
    )


@dataclass
class InternalTopicInputs:
    """The records of the coordinator topics in the inputs; each DataFrame is lazy."""

    transaction_log: DataFrame  # TRANSACTION_LOG rows of `__transaction_state`
    # OFFSET_COMMITS rows of the transactional `__consumer_offsets` batches, group metadata records included
    offset_commit_records: DataFrame


def read_internal_topic_inputs(
    spark: SparkSession, inputs: list[str], settings: Settings
) -> InternalTopicInputs | None:
    """The `__transaction_state` records and transactional `__consumer_offsets` records of the log-dir and dump
    inputs, or None when there are neither; columnar exports of `batches` hold no records."""
    plan = classify_inputs(spark, inputs)
    transaction_logs: list[DataFrame] = []
    offset_commit_records: list[DataFrame] = []
    if plan.segment_roots:
        from pipeline.sources.internal_topics import read_internal_segments

        transaction_log, records = read_internal_segments(spark, plan.segment_roots, settings)
        transaction_logs.append(transaction_log)
        offset_commit_records.append(records)
    if plan.dump_files:
        transaction_logs.append(read_dumplog_transaction_log(spark, plan.dump_files, settings))
        offset_commit_records.append(read_dumplog_offset_commit_records(spark, plan.dump_files, settings))
    if not transaction_logs:
        return None
    return InternalTopicInputs(
        transaction_log=reduce(DataFrame.unionByName, transaction_logs),
        offset_commit_records=reduce(DataFrame.unionByName, offset_commit_records),
    )


def split_offset_commit_records(records: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(`offset_commits` rows, group metadata records) of `InternalTopicInputs.offset_commit_records`.

    Group metadata (key version 2) in a transactional batch is not an offset commit; it is counted, not kept.
    """
    group_metadata = F.col("key_version").eqNullSafe(GROUP_METADATA_KEY_VERSION)
    return records.where(~group_metadata), records.where(group_metadata)
