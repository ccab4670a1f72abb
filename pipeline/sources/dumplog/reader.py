"""The Spark readers of dump text: files are parsed on the executors; the driver checks each file's header only."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.sources.dumplog.grammar import DumpParse
from pipeline.sources.dumplog.parser import has_dump_header, parse_dump
from pipeline.sources.filesystems import resolve, shipped
from schemas.batches import BATCHES
from schemas.offset_commits import OFFSET_COMMITS
from schemas.transaction_log import (
    TRANSACTION_LOG,
)

log = logging.getLogger(__name__)

LOGGED_UNKNOWN_LINES = 10
# The `Dumping` line opens every dump; a file without one in its first bytes is not a dump.
HEADER_PEEK_BYTES = 64 * 1024
# One producer entry of a `.snapshot` dump (spec §1.4, §4.3). Fields a version does not print are null.
SNAPSHOT_ENTRIES = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("snapshot_offset", T.LongType(), True),  # from the file name: the map end offset
        # null in the one entry of a snapshot dumped without producer lines (a snapshot without entries)
        T.StructField("producer_id", T.LongType(), True),
        T.StructField("producer_epoch", T.IntegerType(), True),
        T.StructField("coordinator_epoch", T.IntegerType(), True),
        T.StructField("current_txn_first_offset", T.LongType(), True),  # null for None / OptionalLong.empty
        T.StructField("last_timestamp", T.LongType(), True),  # 0.11 and 3.3+ only
        T.StructField("first_sequence", T.IntegerType(), True),  # the cached batch, when one is printed
        T.StructField("last_sequence", T.IntegerType(), True),
        T.StructField("last_offset", T.LongType(), True),
        T.StructField("offset_delta", T.IntegerType(), True),
        T.StructField("timestamp", T.LongType(), True),
        T.StructField("source_file", T.StringType(), False),
        T.StructField("line_number", T.IntegerType(), False),
    ]
)
# One aborted transaction of a `.txnindex` dump (spec §1.3).
TXN_INDEX_ENTRIES = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("segment_base_offset", T.LongType(), True),
        T.StructField("version", T.IntegerType(), False),
        T.StructField("producer_id", T.LongType(), False),
        T.StructField("first_offset", T.LongType(), False),
        T.StructField("last_offset", T.LongType(), False),
        T.StructField("last_stable_offset", T.LongType(), False),
        T.StructField("position", T.LongType(), False),  # entries are 34 bytes, printed in file order
        T.StructField("source_file", T.StringType(), False),
        T.StructField("line_number", T.IntegerType(), False),
    ]
)
# What parse_dump saw in each file: the audit reports unknown lines instead of dropping them.
DUMP_REPORT = T.StructType(
    [
        T.StructField("source_file", T.StringType(), False),
        T.StructField("line_counts", T.MapType(T.StringType(), T.LongType(), False), False),
        T.StructField(
            "unknown_lines",
            T.ArrayType(
                T.StructType(
                    [
                        T.StructField("line_number", T.IntegerType(), False),
                        T.StructField("text", T.StringType(), False),
                    ]
                ),
                False,
            ),
            False,
        ),
        T.StructField("notes", T.ArrayType(T.StringType(), False), False),
    ]
)
_DUMP_FILE = T.StructType([T.StructField("path", T.StringType(), False)])


def _check_dump_headers(paths: Sequence[str]) -> None:
    """Raise InputError for a path that cannot be read or is no dump; only the first HEADER_PEEK_BYTES are read."""
    for path in paths:
        try:
            filesystem, fs_path = resolve(path)
            with filesystem.open_input_stream(fs_path) as stream:
                head = stream.read(HEADER_PEEK_BYTES)
        except (OSError, pa.ArrowException) as exc:
            raise InputError(path, f"cannot be read: {exc}") from None
        # A partial last line at the cut is harmless: the header is at the top.
        if not has_dump_header(head.decode("utf-8", errors="replace")):
            raise InputError(path, "not kafka-dump-log output: no `Dumping <file>` line at the top")


def _map_dumps(
    spark: SparkSession,
    paths: Sequence[str],
    schema: T.StructType,
    rows_of: Callable[[DumpParse, str], list[dict[str, Any]]],
    skip_dir_suffixes: Sequence[str] = (),
) -> DataFrame:
    """Parse every file in one task of its own (files are read whole) and emit `rows_of` each parse."""
    if not paths:
        return spark.createDataFrame([], schema)
    _check_dump_headers(paths)
    arrow_schema = to_arrow_schema(schema)
    skip = tuple(skip_dir_suffixes)

    def parse_files(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for path in batch.column("path").to_pylist():
                filesystem, fs_path = resolve(path)
                with filesystem.open_input_stream(fs_path) as stream:
                    content = stream.read()
                parsed = parse_dump(content.decode("utf-8", errors="replace"), path, skip_dir_suffixes=skip)
                rows = rows_of(parsed, path)
                if rows:
                    yield pa.RecordBatch.from_pylist(rows, schema=arrow_schema)

    files = spark.sparkContext.parallelize([(path,) for path in paths], len(paths))
    return spark.createDataFrame(files, _DUMP_FILE).mapInArrow(shipped(spark, parse_files), schema)


def read_dumplog(spark: SparkSession, paths: list[str], settings: Settings) -> DataFrame:
    """`batches` rows (schema BATCHES) of dump text files, parsed on the executors.

    Raises InputError for a file that cannot be read or has no `Dumping` line at its top. Sections dumped
    from partition directories named with `settings.ingest.skip_dir_suffixes` are left out, as for segments.
    """
    return _map_dumps(spark, paths, BATCHES, lambda parsed, _: parsed.batches, settings.ingest.skip_dir_suffixes)


def read_dumplog_report(spark: SparkSession, paths: list[str]) -> DataFrame:
    """One DUMP_REPORT row per file: line counts by kind, the first unknown lines and parser notes."""

    def report(parsed: DumpParse, source_file: str) -> list[dict[str, Any]]:
        return [
            {
                "source_file": source_file,
                "line_counts": list(parsed.line_counts.items()),
                "unknown_lines": [{"line_number": number, "text": text} for number, text in parsed.unknown_lines],
                "notes": parsed.notes,
            }
        ]

    return _map_dumps(spark, paths, DUMP_REPORT, report)


def dump_line_counts(spark: SparkSession, paths: list[str]) -> dict[str, int]:
    """`dumplog.files` and `dumplog.lines.<kind>` (every kind, `unknown` included) summed over the dump files, for
    `runs.counts`; the first unknown lines are logged with their file and line number."""
    report = read_dumplog_report(spark, paths).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        totals = report.select(F.explode("line_counts")).groupBy("key").agg(F.sum("value").alias("lines")).collect()
        unknown = (
            report.select("source_file", F.explode("unknown_lines").alias("line")).limit(LOGGED_UNKNOWN_LINES).collect()
        )
    finally:
        report.unpersist()
    counts = {"dumplog.files": len(paths)}
    counts.update({f"dumplog.lines.{row.key}": int(row.lines) for row in totals})
    for row in unknown:
        line = row.line
        log.warning("%s line %d fits no kafka-dump-log layout: %s", row.source_file, line.line_number, line.text)
    return counts


def read_dumplog_snapshots(spark: SparkSession, paths: list[str], skip_dir_suffixes: Sequence[str] = ()) -> DataFrame:
    """Producer-snapshot entries (schema SNAPSHOT_ENTRIES) of `.snapshot` dumps."""
    return _map_dumps(spark, paths, SNAPSHOT_ENTRIES, lambda parsed, _: parsed.snapshot_entries, skip_dir_suffixes)


def read_dumplog_txn_index(spark: SparkSession, paths: list[str], skip_dir_suffixes: Sequence[str] = ()) -> DataFrame:
    """Aborted-transaction entries (schema TXN_INDEX_ENTRIES) of `.txnindex` dumps."""
    return _map_dumps(spark, paths, TXN_INDEX_ENTRIES, lambda parsed, _: parsed.txn_index_entries, skip_dir_suffixes)


def read_dumplog_transaction_log(spark: SparkSession, paths: list[str], settings: Settings) -> DataFrame:
    """`transaction_log` rows (schema TRANSACTION_LOG) of the `__transaction_state` sections of dump files."""
    return _map_dumps(
        spark, paths, TRANSACTION_LOG, lambda parsed, _: parsed.transaction_log, settings.ingest.skip_dir_suffixes
    )


def read_dumplog_offset_commit_records(spark: SparkSession, paths: list[str], settings: Settings) -> DataFrame:
    """Records (schema OFFSET_COMMITS) of the transactional batches of `__consumer_offsets` sections of dump files,
    group metadata records (key version 2) included, as `internal_topics.internal_topic_passes` makes them."""
    return _map_dumps(
        spark,
        paths,
        OFFSET_COMMITS,
        lambda parsed, _: parsed.offset_commit_records,
        settings.ingest.skip_dir_suffixes,
    )
