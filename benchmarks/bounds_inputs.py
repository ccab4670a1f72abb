"""The inputs of the resource-bounds checks, written as a broker lays them out with the project's encoder.

Each builder writes a log dir (`meta.properties`, then `<topic>-<partition>` dirs with `.log`, `.index`,
`.timeindex`, `leader-epoch-checkpoint` and `partition.metadata`) of idempotent producers whose sequences are
in order, so the audit has nothing to say about them but what the input is built to provoke. Batches come from
`pipeline.generate.encode.encode_chunk` in bounded chunks, so building a 2 GiB segment takes little memory.
`benchmarks/bounds_suite.py` builds them at full size; the tests build them scaled down.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from pipeline.generate import layout
from pipeline.generate.encode import MAX_RECORDS, RECORD_BYTES, Chunk, encode_chunk
from pipeline.generate.segment_writer import SegmentWriter
from pipeline.sources.kafka_format.layout import LOG_OVERHEAD, RECORD_BATCH_OVERHEAD

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
CHUNK_BATCHES = 1 << 18
LARGEST_BATCH_BYTES = RECORD_BATCH_OVERHEAD + MAX_RECORDS * RECORD_BYTES
FIRST_PRODUCER_ID = 1000
LARGEST_CLAIM = 2**31 - 1  # the largest batch length an int32 field can state


def _chunk(
    first: int, count: int, producers: int | None, records: int, first_producer: int = FIRST_PRODUCER_ID
) -> Chunk:
    """Data batches `first` .. `first + count` of a partition: batch i is sequence number i // producers of
    producer `first_producer` + i % producers, or, with `producers` None, the first batch of producer
    `first_producer` + i."""
    index = np.arange(first, first + count, dtype=np.int64)
    if producers is None:
        producer, sequence = index, np.zeros(count, dtype=np.int64)
    else:
        producer, sequence = index % producers, index // producers * records
    zeros = np.zeros(count, dtype=np.int64)
    return Chunk(
        base_offset=index * records,
        last_offset_delta=np.full(count, records - 1, dtype=np.int64),
        records=np.full(count, records, dtype=np.int64),
        keep=np.full(count, (1 << records) - 1, dtype=np.int64),
        producer_id=first_producer + producer,
        producer_epoch=zeros,
        base_sequence=sequence,
        attributes=np.zeros(count, dtype=np.int16),
        base_timestamp=T0 + index,
        leader_epoch=zeros,
        control=np.full(count, -1, dtype=np.int64),
        coordinator_epoch=zeros,
        mutation=zeros,
    )


def _chunks(batches: int, producers: int | None, records: int) -> Iterator[Chunk]:
    for first in range(0, batches, CHUNK_BATCHES):
        yield _chunk(first, min(CHUNK_BATCHES, batches - first), producers, records)


def _log_dir(root: Path, broker_id: int = 0) -> Path:
    log_dir = root / f"broker-{broker_id}"
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / "meta.properties").write_text(layout.meta_properties(broker_id, "bounds", TOPIC_ID))
    return log_dir


def write_partition(log_dir: Path, name: str, chunks: Iterator[Chunk]) -> Path:
    """One partition dir holding one segment (from offset 0) of `chunks`; returns the segment's path."""
    writer = SegmentWriter(log_dir / name)
    writer.open(0)
    for chunk in chunks:
        writer.append(encode_chunk(chunk, None))
    writer.close()
    (writer.directory / "leader-epoch-checkpoint").write_text(layout.leader_epoch_checkpoint([(0, 0)]))
    (writer.directory / "partition.metadata").write_text(layout.partition_metadata(TOPIC_ID))
    return writer.directory / "00000000000000000000.log"


def large_segment(root: Path, segment_bytes: int, producers: int = 200) -> Path:
    """One partition whose single segment holds `segment_bytes` or a little less, in batches of 8 records."""
    batches = segment_bytes // LARGEST_BATCH_BYTES
    return write_partition(_log_dir(root), "large-0", _chunks(batches, producers, MAX_RECORDS))


def many_producers(root: Path, producers: int) -> Path:
    """One partition with one batch of each of `producers` distinct producer ids."""
    return write_partition(_log_dir(root), "producers-0", _chunks(producers, None, 1))


def huge_claims(root: Path, batches: int = 1000) -> list[Path]:
    """Two partitions of `batches` valid batches, except that a length field claims about 2 GiB: that of the
    last batch in `claims-0`, that of the first in `claims-1`. The files stay small."""
    log_dir = _log_dir(root)
    segments = []
    for partition, claimant in ((0, batches - 1), (1, 0)):
        segment = write_partition(log_dir, f"claims-{partition}", _chunks(batches, 10, 1))
        with segment.open("r+b") as file:
            file.seek(_batch_start(claimant) + 8)
            file.write(struct.pack(">i", LARGEST_CLAIM - partition * LOG_OVERHEAD))
        segments.append(segment)
    return segments


def _batch_start(number: int) -> int:
    """Where batch `number` of a segment of single-record batches (all the same size) starts."""
    return number * (RECORD_BATCH_OVERHEAD + RECORD_BYTES)


def many_partitions(root: Path, partitions: int, batches: int = 3) -> list[Path]:
    """`partitions` dirs `wide-<n>` in one log dir, each a segment of `batches` batches of its own producer."""
    log_dir = _log_dir(root)
    return [
        write_partition(log_dir, f"wide-{n}", iter([_chunk(0, batches, 1, 1, FIRST_PRODUCER_ID + n)]))
        for n in range(partitions)
    ]
