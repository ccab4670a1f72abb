"""The `payloads` rows of a deep ingest: every data record of the segments, its payload reduced to a hash.

A second pass over the same byte ranges as the `batches` decode (`segments.segment_ranges`), in Spark tasks: the
entries are found by the same window decode, each window's bytes are read once more, and the records of every
readable data batch are walked by `records.iter_records` (every codec decompressed) and hashed there, so neither
record bytes nor rows reach the driver. The default ingest never imports this module.
"""

from __future__ import annotations

import hashlib
import logging
import struct
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.config import Settings
from pipeline.sources.filesystems import resolve, shipped
from pipeline.sources.kafka_format.windows import DEFAULT_WINDOW_BYTES, iter_decoded, next_entry_start
from pipeline.sources.log_roots import SegmentFile
from pipeline.sources.records.api import Record, RecordError, iter_records
from pipeline.sources.segments import SEGMENT_DESCRIPTOR, segment_ranges
from schemas.batches import STATUS_OK
from schemas.payloads import PAYLOADS

log = logging.getLogger(__name__)

_ARROW_PAYLOADS = to_arrow_schema(PAYLOADS)
_LENGTH = struct.Struct(">i")
_NO_SEQUENCE = -1
_SEQUENCE_SPAN = 1 << 31
_BATCH_FIELDS = ("base_offset", "producer_id", "producer_epoch", "base_sequence", "is_transactional", "position")


def read_payloads(spark: SparkSession, segments: list[SegmentFile], settings: Settings) -> DataFrame:
    """The `PAYLOADS` rows of `segments`, decoded in as many tasks, over the same byte ranges, as their batches."""
    if not segments:
        return spark.createDataFrame([], PAYLOADS)
    rows, _, tasks = segment_ranges(spark, segments, settings.ingest.segment_split_bytes)
    log.debug("hashing the record payloads of %d segment files in %d tasks", len(segments), tasks)
    return spark.createDataFrame(rows, SEGMENT_DESCRIPTOR).mapInArrow(shipped(spark, hash_descriptors), PAYLOADS)


def hash_descriptors(descriptor_batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side of `read_payloads`: segment descriptors in, `PAYLOADS` record batches out."""
    for descriptors in descriptor_batches:
        for descriptor in descriptors.to_pylist():
            yield from hash_file(SegmentFile(**descriptor))


def hash_file(segment: SegmentFile, window_bytes: int = DEFAULT_WINDOW_BYTES) -> Iterator[pa.RecordBatch]:
    """The payload rows of the data batches that start in the segment's byte range. A file that cannot be read
    has none: its `batches` rows say so (`unreadable`).

    Each decoded window's batches are read again with a positional read, after which the sequential read the
    decode goes on with must seek back (pyarrow's files refuse it otherwise).
    """
    try:
        filesystem, path = resolve(segment.location)
        with filesystem.open_input_file(path) as source:
            file_size = source.size()
            first = next_entry_start(source.read_at, file_size, segment.start)
            if first is None:
                return
            source.seek(first)
            decoded = iter_decoded(
                source.read, file_size, window_bytes=window_bytes, start=first, end=segment.end, verify_records=False
            )
            for table in decoded:
                rows = _readable_data(table)
                if not rows:
                    continue
                window_start = rows[0]["position"]
                resume = source.tell()
                window = source.read_at(rows[-1]["position"] + rows[-1]["size_bytes"] - window_start, window_start)
                source.seek(resume)
                yield from _payload_table(rows, memoryview(window), window_start, segment).to_batches()
    except OSError as exc:
        log.warning("cannot read %s for its payloads: %s", segment.location, exc)


def _readable_data(table: pa.Table) -> list[dict]:
    """The v2 data batches of a decoded window whose CRC matches: the only ones whose records are what was sent."""
    batches = table.select([*_BATCH_FIELDS, "size_bytes", "magic", "is_control", "crc_valid", "entry_status"])
    return [
        row
        for row in batches.to_pylist()
        if row["entry_status"] == STATUS_OK and row["magic"] == 2 and not row["is_control"] and row["crc_valid"]
    ]


def _payload_table(rows: list[dict], window: memoryview, window_start: int, segment: SegmentFile) -> pa.Table:
    columns: dict[str, list] = {name: [] for name in _ARROW_PAYLOADS.names}
    for batch in rows:
        start = batch["position"] - window_start
        try:
            records = list(iter_records(window[start : start + batch["size_bytes"]]))
        except RecordError:  # FMT-006 reports it; its records are not what the producer sent
            continue
        for record in records:
            columns["base_offset"].append(batch["base_offset"])
            columns["offset"].append(batch["base_offset"] + record.offset_delta)
            columns["producer_id"].append(batch["producer_id"])
            columns["producer_epoch"].append(batch["producer_epoch"])
            columns["sequence"].append(record_sequence(batch["base_sequence"], record.offset_delta))
            columns["is_transactional"].append(batch["is_transactional"])
            columns["payload_hash"].append(payload_hash(record))
            columns["position"].append(batch["position"])
    count = len(columns["offset"])
    columns.update(
        topic=[segment.topic] * count,
        partition=[segment.partition] * count,
        source_file=[segment.location] * count,
        broker_id=[segment.broker_id] * count,
        cluster_id=[segment.cluster_id] * count,
    )
    return pa.Table.from_pydict(columns, schema=_ARROW_PAYLOADS)


def record_sequence(base_sequence: int, offset_delta: int) -> int:
    """`DefaultRecordBatch.incrementSequence(base, delta)`: the record's sequence, wrapping past Integer.MAX_VALUE."""
    if base_sequence == _NO_SEQUENCE:
        return _NO_SEQUENCE
    return (base_sequence + offset_delta) % _SEQUENCE_SPAN


def payload_hash(record: Record) -> bytes | None:
    """BLAKE2b-128 of key, value and headers, each length-prefixed (null as -1) so no two payloads share an input;
    None for a record with nothing in it (no key, no value, no headers)."""
    if record.key is None and record.value is None and not record.headers:
        return None
    digest = hashlib.blake2b(digest_size=16)
    for part in (record.key, record.value):
        _update(digest, part)
    digest.update(_LENGTH.pack(len(record.headers)))
    for name, value in record.headers:
        _update(digest, name.encode("utf-8"))
        _update(digest, value)
    return digest.digest()


def _update(digest, part: bytes | None) -> None:
    digest.update(_LENGTH.pack(-1 if part is None else len(part)))
    if part:
        digest.update(part)
