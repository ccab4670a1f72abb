"""Large segments as a broker writes them, with their `.index`, for the tests of byte-range splitting."""

from __future__ import annotations

import random
import struct
from pathlib import Path

from pipeline.sources.kafka_format.encoding import encode_batch, encode_marker, segment_file_name

INDEX_INTERVAL_BYTES = 4096  # the broker's default index.interval.bytes


def build_segment(batches: int, seed: int) -> tuple[bytes, list[tuple[int, int]]]:
    """A segment of mostly small batches with some large ones and transaction markers, and its `.index` entries.

    Like the broker, an index entry (last offset, position) is added once more than `INDEX_INTERVAL_BYTES` were
    appended since the previous one.
    """
    rng = random.Random(seed)
    parts: list[bytes] = []
    index: list[tuple[int, int]] = []
    offset = position = since_index = 0
    for _ in range(batches):
        kind = rng.random()
        if kind < 0.05:
            batch, count = encode_marker(offset, 7, 0, rng.random() < 0.5, 1, 1_767_225_600_000), 1
        elif kind < 0.08:
            batch, count = encode_batch(offset, [rng.randbytes(rng.randint(2000, 9000))]), 1
        else:
            count = rng.randint(1, 3)
            batch = encode_batch(offset, count, producer_id=rng.randint(1, 20), producer_epoch=0, base_sequence=offset)
        if since_index > INDEX_INTERVAL_BYTES:
            index.append((offset + count - 1, position))
            since_index = 0
        parts.append(batch)
        offset += count
        position += len(batch)
        since_index += len(batch)
    return b"".join(parts), index


def write_partition(root: Path, data: bytes, index: list[tuple[int, int]] | None) -> Path:
    partition_dir = root / "orders-0"
    partition_dir.mkdir(parents=True)
    log_file = partition_dir / segment_file_name(0)
    log_file.write_bytes(data)
    if index is not None:
        entries = b"".join(struct.pack(">ii", offset, position) for offset, position in index)
        (partition_dir / segment_file_name(0, ".index")).write_bytes(entries)
    return log_file
