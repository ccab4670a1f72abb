"""The Spark reader of the coordinator topics `__transaction_state` and `__consumer_offsets`: it walks their
segments like `segments.read_segments` (same byte-range split, same entry walk from `kafka_format`) and reads the
records of the batches it keeps with `records.window_records`, a window at a time; only the batches that can hold
such records are read again from the file, and their rows are made as columns by `coordinator_records`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from pipeline.arrow_pass import ArrowPass
from pipeline.config import Settings
from pipeline.sources.coordinator_records.consumer_offsets import offset_commit_rows
from pipeline.sources.coordinator_records.rows import BATCH_FIELDS, CoordinatorRecords
from pipeline.sources.coordinator_records.transaction_state import transaction_log_rows
from pipeline.sources.filesystems import resolve, shipped
from pipeline.sources.kafka_format.windows import iter_decoded, next_entry_start
from pipeline.sources.log_roots import SegmentFile
from pipeline.sources.segments import SEGMENT_DESCRIPTOR, SOURCE_FORMAT, segment_ranges
from schemas.batches import STATUS_OK
from schemas.offset_commits import CONSUMER_OFFSETS_TOPIC, OFFSET_COMMITS
from schemas.transaction_log import TRANSACTION_LOG, TRANSACTION_STATE_TOPIC

log = logging.getLogger(__name__)

# topic -> (table schema, how its records become columns, whether only transactional data batches hold them)
TOPIC_READERS: dict[str, tuple[T.StructType, CoordinatorRecords, bool]] = {
    TRANSACTION_STATE_TOPIC: (TRANSACTION_LOG, transaction_log_rows, False),
    CONSUMER_OFFSETS_TOPIC: (OFFSET_COMMITS, offset_commit_rows, True),
}


def internal_topic_passes(
    spark: SparkSession, segments: list[SegmentFile], settings: Settings
) -> tuple[ArrowPass | None, ArrowPass | None]:
    """(`transaction_log` rows, offset-commit records) of the `__transaction_state` and `__consumer_offsets`
    files among `segments` (those of a listing, `log_roots`), as passes that decode them on the executors; None
    for a topic without files.

    The second pass also makes the group metadata records of transactional batches (key version 2), which
    the `offset_commits` table leaves out (`dispatch.split_offset_commit_records`).
    """
    passes: list[ArrowPass | None] = []
    for topic, (schema, records, transactional_only) in TOPIC_READERS.items():
        of_topic = [segment for segment in segments if segment.topic == topic]
        if not of_topic:
            passes.append(None)
            continue
        # Dealt to tasks by size like the batches decode: a few coordinator partitions often hold most records.
        rows, ranges, tasks = segment_ranges(spark, of_topic, settings.ingest.segment_split_bytes)
        log.debug(
            "decoding the %s records of %d segment files as %d byte ranges in %d tasks",
            topic,
            len(of_topic),
            ranges,
            tasks,
        )
        decode = partial(_decode_descriptors, records, transactional_only)
        passes.append(ArrowPass(spark.createDataFrame(rows, SEGMENT_DESCRIPTOR), shipped(spark, decode), schema))
    transaction_log, offset_commit_records = passes
    return transaction_log, offset_commit_records


def _decode_descriptors(
    records: CoordinatorRecords, transactional_only: bool, descriptor_batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Executor side: segment byte ranges in, table rows out, one Arrow batch per decoded window."""
    for descriptors in descriptor_batches:
        for descriptor in descriptors.to_pylist():
            yield from range_batches(SegmentFile(**descriptor), records, transactional_only)


def range_rows(
    segment: SegmentFile, records: CoordinatorRecords, transactional_only: bool
) -> Iterator[list[dict[str, Any]]]:
    """`range_batches` as rows, for callers outside Spark."""
    for batch in range_batches(segment, records, transactional_only):
        yield batch.to_pylist()


def range_batches(
    segment: SegmentFile, records: CoordinatorRecords, transactional_only: bool
) -> Iterator[pa.RecordBatch]:
    """Executor side of one byte range: rows of the batches that start in it, with provenance, per decoded window.

    Entries the broker cannot iterate (and legacy or control batches) hold no such records; `batches` reports
    them. The batches kept of a window are read again from the file in one read. An I/O error ends the range
    with one row whose `decode_error` says so, at the batch being read (or the last one read).
    """
    provenance = {
        "topic": segment.topic,
        "partition": segment.partition,
        "segment_base_offset": segment.segment_base_offset,
        "source_file": segment.location,
        "source_format": SOURCE_FORMAT,
        "broker_id": segment.broker_id,
        "cluster_id": segment.cluster_id,
    }
    position = segment.start
    try:
        filesystem, path = resolve(segment.location)
        with filesystem.open_input_file(path) as walk, filesystem.open_input_file(path) as entries:
            file_size = walk.size()
            first = next_entry_start(walk.read_at, file_size, segment.start)
            if first is None:
                return
            walk.seek(first)
            # Records are walked by `window_records`, only for the batches kept.
            for table in iter_decoded(walk.read, file_size, start=first, end=segment.end, verify_records=False):
                kept = pc.and_(pc.equal(table["entry_status"], STATUS_OK), pc.invert(table["is_control"]))
                if transactional_only:
                    kept = pc.and_(kept, table["is_transactional"])
                batches = table.filter(kept).select(list(BATCH_FIELDS)).to_pydict()
                positions, sizes = batches["position"], batches["size_bytes"]
                if not positions:
                    continue
                position = positions[0]
                window = entries.read_at(positions[-1] + sizes[-1] - position, position)
                starts = [at - position for at in positions]
                # A file that shrank meanwhile gives short entries, which `window_records` reports.
                ends = [min(start + size, len(window)) for start, size in zip(starts, sizes, strict=True)]
                position = positions[-1]
                rows = records.window(memoryview(window), starts, ends, batches, provenance)
                if rows.num_rows:
                    yield rows
    except OSError as exc:
        log.warning("cannot read %s: %s", segment.location, exc)
        error = dict(provenance, position=position, decode_error=f"cannot read the file: {exc}")
        yield pa.RecordBatch.from_pylist([error], schema=records.schema)
