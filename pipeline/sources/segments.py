"""Spark ingestion of Kafka log directories into the `batches` table shape.

The driver only hands out the segments of a listing (`log_roots`); segment bytes are read and decoded on the
executors inside `mapInArrow`, so the driver never holds segment bytes or batch rows. Local paths and URIs
(`s3://`, `s3a://`, `gs://`, `hdfs://`, `file://` ...) go through the same code (`filesystems.resolve`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from dataclasses import astuple, replace
from functools import partial

import pyarrow as pa
from pyspark import RDD
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.arrow_pass import ArrowPass
from pipeline.config import Settings
from pipeline.sources.filesystems import resolve, shipped
from pipeline.sources.kafka_format.layout import DECODED_SCHEMA
from pipeline.sources.kafka_format.windows import iter_decoded, next_entry_start
from pipeline.sources.log_roots import SegmentFile, discover_segments
from schemas.batches import BATCHES, STATUS_UNREADABLE

log = logging.getLogger(__name__)

SOURCE_FORMAT = "segment"

SEGMENT_DESCRIPTOR = T.StructType(
    [
        T.StructField("location", T.StringType(), False),
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("broker_id", T.IntegerType(), True),
        T.StructField("segment_base_offset", T.LongType(), False),
        T.StructField("size", T.LongType(), False),
        T.StructField("start", T.LongType(), False),
        T.StructField("end", T.LongType(), True),
        T.StructField("mtime_ns", T.LongType(), True),
        T.StructField("cluster_id", T.StringType(), True),
    ]
)

_ARROW_BATCHES = to_arrow_schema(BATCHES)


def read_segments(
    spark: SparkSession, roots: list[str], settings: Settings, segments: list[SegmentFile] | None = None
) -> DataFrame:
    """All entries of all segments under `roots` as a DataFrame with exactly the `BATCHES` schema.

    `segments`, when given, are the files to decode instead of all of them: some of those `discover_segments`
    found under `roots` (the incremental ingest passes the ones it re-reads; none gives an empty DataFrame).
    A file larger than `segment_split_bytes` is cut into byte ranges of that size (`split_segment`), so one
    large segment does not keep a single core busy. There is at least one task per `segment_split_bytes` of
    input and never more tasks than ranges; ranges are dealt to tasks largest first, so the ranges of a large
    file go to different tasks. Each task streams its ranges in bounded windows. A file that cannot be opened or
    read yields a row with entry_status `unreadable` (one per range) instead of failing the job.
    """
    if segments is None:
        segments = discover_segments(roots, settings.ingest).segments
    if not segments:
        return spark.createDataFrame([], BATCHES)
    return segment_pass(spark, segments, settings).frame()


def segment_pass(spark: SparkSession, segments: list[SegmentFile], settings: Settings) -> ArrowPass:
    """The byte ranges of `segments` as `SEGMENT_DESCRIPTOR` rows dealt to tasks (`segment_ranges`), and the
    executor function that decodes them into `BATCHES` rows, one range after another."""
    rows, ranges, tasks = segment_ranges(spark, segments, settings.ingest.segment_split_bytes)
    log.debug(
        "decoding %d segment files (%d bytes) as %d byte ranges in %d tasks",
        len(segments),
        sum(segment.size - segment.start for segment in segments),
        ranges,
        tasks,
    )
    decode = partial(decode_descriptors, verify_records=settings.ingest.verify_records)
    return ArrowPass(spark.createDataFrame(rows, SEGMENT_DESCRIPTOR), shipped(spark, decode), BATCHES)


def segment_ranges(spark: SparkSession, segments: list[SegmentFile], split_bytes: int) -> tuple[RDD, int, int]:
    """The byte ranges of `segments` (`split_segment`) as `SEGMENT_DESCRIPTOR` rows dealt to tasks, how many ranges
    and how many tasks: at least one per `split_bytes` of input, never more than ranges, the largest dealt first."""
    ranges = [piece for segment in segments for piece in split_segment(segment, split_bytes)]
    total_bytes = sum(segment.size - segment.start for segment in segments)
    tasks = min(len(ranges), max(spark.sparkContext.defaultParallelism, math.ceil(total_bytes / split_bytes)))
    ranges.sort(key=lambda piece: _range_end(piece) - piece.start, reverse=True)
    tasks_ranges = [[astuple(piece) for piece in ranges[task::tasks]] for task in range(tasks)]
    rows = spark.sparkContext.parallelize(tasks_ranges, tasks).flatMap(lambda task_ranges: task_ranges)
    return rows, len(ranges), tasks


def split_segment(segment: SegmentFile, split_bytes: int) -> list[SegmentFile]:
    """The segment from its `start` on as byte ranges of `split_bytes`; the last one runs to the end of the file.

    A range does not need to start on an entry: its task walks the entry chain from the start of the file to its
    first entry (`kafka_format.next_entry_start`), so the ranges decode exactly what one pass over the file does.
    The `.index` file is not used for this: its positions are batch starts, but an entry the broker cannot
    iterate past may lie before them, and then a decode starting there would report entries that a pass over
    the file never reaches.
    """
    starts = (
        range(segment.start, segment.size, split_bytes)
        if segment.size - segment.start > split_bytes
        else [segment.start]
    )
    return [
        replace(segment, start=start, end=start + split_bytes if start + split_bytes < segment.size else None)
        for start in starts
    ]


def _range_end(segment: SegmentFile) -> int:
    return segment.size if segment.end is None else segment.end


def decode_descriptors(
    descriptor_batches: Iterator[pa.RecordBatch], verify_records: bool = True
) -> Iterator[pa.RecordBatch]:
    """Executor side of `read_segments`: segment descriptors in, `BATCHES` record batches out."""
    for descriptors in descriptor_batches:
        for descriptor in descriptors.to_pylist():
            yield from decode_file(SegmentFile(**descriptor), verify_records)


def decode_file(segment: SegmentFile, verify_records: bool = True) -> Iterator[pa.RecordBatch]:
    """Stream-decode the entries that start in the segment's byte range (records walked with `verify_records`).

    An I/O error ends it with one `unreadable` row at the failing position.
    """
    resume_position = segment.start
    try:
        filesystem, path = resolve(segment.location)
        with filesystem.open_input_file(path) as source:
            file_size = source.size()
            first = next_entry_start(source.read_at, file_size, segment.start)
            if first is None:
                return
            source.seek(first)
            decoded = iter_decoded(source.read, file_size, start=first, end=segment.end, verify_records=verify_records)
            for table in decoded:
                last = table.num_rows - 1
                resume_position = table["position"][last].as_py() + table["size_bytes"][last].as_py()
                yield from _with_provenance(table, segment).to_batches()
    except OSError as exc:
        log.warning("cannot read %s: %s", segment.location, exc)
        yield from _with_provenance(_unreadable_row(segment, resume_position, exc), segment).to_batches()


def _with_provenance(table: pa.Table, segment: SegmentFile) -> pa.Table:
    return with_provenance(
        table,
        topic=segment.topic,
        partition=segment.partition,
        segment_base_offset=segment.segment_base_offset,
        source_file=segment.location,
        source_format=SOURCE_FORMAT,
        broker_id=segment.broker_id,
        cluster_id=segment.cluster_id,
    )


def with_provenance(table: pa.Table, **provenance: object) -> pa.Table:
    """Decoded entries (`DECODED_SCHEMA`) as `BATCHES` rows, each with the same `provenance` columns: topic,
    partition, segment_base_offset, source_file, source_format, broker_id, cluster_id."""
    rows = table.num_rows
    arrays = [
        pa.repeat(pa.scalar(provenance[field.name], field.type), rows)
        if field.name in provenance
        else table[field.name]
        for field in _ARROW_BATCHES
    ]
    return pa.Table.from_arrays(arrays, schema=_ARROW_BATCHES)


def _unreadable_row(segment: SegmentFile, position: int, exc: OSError) -> pa.Table:
    """The bytes of the range that were not decoded, from `position` to the end of the range."""
    row = {name: None for name in DECODED_SCHEMA.names}
    row.update(
        entry_status=STATUS_UNREADABLE,
        entry_note=f"cannot read the file: {exc}",
        position=position,
        size_bytes=max(_range_end(segment) - position, 0),
    )
    return pa.Table.from_pylist([row], schema=DECODED_SCHEMA)
