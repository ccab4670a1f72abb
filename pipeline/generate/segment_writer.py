"""Writes one partition's segment files as a broker does: `.log`, `.index`, `.timeindex`, and the snapshots.

Index entries follow `LogSegment.append`: after more than `index.interval.bytes` (4096) since the last entry,
the next batch gets an offset-index entry (its last offset, its position) and the time index gets the
largest timestamp so far with the last offset of the batch that has it, if that timestamp is larger than the
last one indexed. A segment that stops being active, or a log that closes, appends the final time-index
entry. Index files are written trimmed, as after a clean shutdown (no preallocated tail).
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable
from pathlib import Path

from crc32c import crc32c

from pipeline.generate.encode import Encoded
from pipeline.sources.kafka_format.encoding import segment_file_name

INDEX_INTERVAL_BYTES = 4096
_SNAPSHOT_HEADER = struct.Struct(">hI")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
SNAPSHOT_VERSION = 1

IndexMutation = Callable[[array, array], bool]
"""Changes (relative offset, position) or (timestamp, relative offset) entries in place; True if it did."""


def snapshot_bytes(entries: list[tuple[int, int, int, int, int, int, int, int]]) -> bytes:
    """A producer-state snapshot (spec §1.4): version 1, CRC-32C of bytes [6, end), the 46-byte entries."""
    body = struct.pack(">i", len(entries)) + b"".join(_SNAPSHOT_ENTRY.pack(*entry) for entry in entries)
    return _SNAPSHOT_HEADER.pack(SNAPSHOT_VERSION, crc32c(body)) + body


class SegmentWriter:
    """The active segment of one partition directory and the index entries accumulated for it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.base_offset = 0
        self.position = 0
        self._log = None
        self.offset_index_mutation: IndexMutation | None = None
        self.time_index_mutation: IndexMutation | None = None

    def open(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self.position = 0
        self._since_entry = 0
        self._offsets = array("i")  # relative offset, position, ...
        self._times = array("q")  # timestamp, relative offset, ...
        self._max_timestamp = -1
        self._max_timestamp_offset = base_offset
        self._last_time_entry = -1
        self._last_indexed_offset = base_offset - 1
        self._log = open(self.directory / segment_file_name(base_offset), "wb")  # noqa: SIM115 (closed in close())

    def append(self, encoded: Encoded) -> None:
        self._log.write(encoded.data)
        base = self.base_offset
        position, since = self.position, self._since_entry
        for size, last_offset, max_timestamp in zip(
            encoded.sizes.tolist(), encoded.last_offsets.tolist(), encoded.max_timestamps.tolist(), strict=True
        ):
            if max_timestamp > self._max_timestamp:
                self._max_timestamp, self._max_timestamp_offset = max_timestamp, last_offset
            if since > INDEX_INTERVAL_BYTES:
                if last_offset > self._last_indexed_offset:  # OffsetIndex.append refuses anything else
                    self._offsets.extend((last_offset - base, position))
                    self._last_indexed_offset = last_offset
                self._time_entry()
                since = 0
            since += size
            position += size
        self.position, self._since_entry = position, since

    def append_raw(self, data: bytes) -> None:
        """Bytes that are no batch the broker appended (a torn tail): not indexed."""
        self._log.write(data)
        self.position += len(data)

    def _time_entry(self) -> None:
        if self._max_timestamp > self._last_time_entry:
            self._times.extend((self._max_timestamp, self._max_timestamp_offset - self.base_offset))
            self._last_time_entry = self._max_timestamp

    def close(self) -> None:
        """Finish the segment: the final time-index entry, then both index files."""
        self._log.close()
        self._time_entry()
        offsets, times = self._offsets, self._times
        if self.offset_index_mutation and self.offset_index_mutation(offsets, times):
            self.offset_index_mutation = None
        if self.time_index_mutation and self.time_index_mutation(offsets, times):
            self.time_index_mutation = None
        (self.directory / segment_file_name(self.base_offset, ".index")).write_bytes(
            struct.pack(f">{len(offsets)}i", *offsets)
        )
        (self.directory / segment_file_name(self.base_offset, ".timeindex")).write_bytes(
            b"".join(struct.pack(">qi", times[i], times[i + 1]) for i in range(0, len(times), 2))
        )

    def write_snapshot(self, offset: int, content: bytes) -> None:
        (self.directory / segment_file_name(offset, ".snapshot")).write_bytes(content)
