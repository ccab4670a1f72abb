"""Follower copies: each partition's finished log dir, as its followers hold it on their brokers.

A follower appends the leader's batches byte for byte and rolls its segments at the same offsets (same
`segment.bytes`), so after a clean shutdown of an in-sync cluster its directory holds the leader's files:
segments, `.index`, `.timeindex`, `.txnindex`, producer snapshots, `leader-epoch-checkpoint` and
`partition.metadata`. The copies are hard links to the leader's finished files, not a second encode: writing
a follower costs a directory entry per file. (Edit a copied file in place and every copy changes: replace it
instead, as `write_copy` does.)

A follower that departs from its leader (an injected replica fault, `anomalies.replicas`) gets a `Departure`
instead: its log ends at `end` (a batch boundary, as after `Log.truncateTo`), the batches from `start` on may be
rewritten, and its other files are kept consistent with that log: the segment holding `start` is rewritten
with its indexes rebuilt as the broker appends them (`SegmentWriter`) and its `.txnindex` keeps the aborts it
holds; later segments, snapshots above `end` and the leader's stray files past it are left out; its
leader-epoch checkpoint lists the epochs of its own log.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from crc32c import crc32c

from pipeline.generate import layout
from pipeline.generate.encode import HEADER, Encoded
from pipeline.generate.segment_writer import SegmentWriter
from pipeline.sources.kafka_format.encoding import segment_file_name
from pipeline.sources.kafka_format.layout import CRC_START, RECORD_BATCH_OVERHEAD, TXN_INDEX_ENTRY_BYTES, V2_HEADER

_LAST_OFFSET_IN_TXN_ENTRY = slice(18, 26)
_FILE_NAME = re.compile(r"^(\d{20})(\..+)$")
SEGMENT_FILES = (".log", ".index", ".timeindex", ".txnindex")
ATTR_CONTROL = 0x20


@dataclass(frozen=True)
class Entry:
    """One whole v2 batch of a segment, as its header says."""

    segment: int  # base offset of the segment holding it
    position: int
    size: int
    base_offset: int
    leader_epoch: int
    attributes: int
    last_offset_delta: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)


def segment_bases(directory: Path) -> list[int]:
    """The base offsets of the `.log` segments in a partition directory, in offset order."""
    bases = []
    for path in directory.iterdir():
        named = _FILE_NAME.match(path.name)
        if named and named.group(2) == ".log":
            bases.append(int(named.group(1)))
    return sorted(bases)


def read_entries(data: bytes, segment: int) -> list[Entry]:
    """The batches of a segment up to the first entry that is not a whole v2 batch (a torn or corrupt tail)."""
    entries, position, end = [], 0, len(data)
    while position + RECORD_BATCH_OVERHEAD <= end:
        (base, length, epoch, magic, _, attributes, delta, _, max_ts, pid, producer_epoch, sequence, records) = (
            V2_HEADER.unpack_from(data, position)
        )
        size = length + 12
        if magic != 2 or size < RECORD_BATCH_OVERHEAD or position + size > end:
            break
        fields = (base, epoch, attributes, delta, max_ts, pid, producer_epoch, sequence, records)
        entries.append(Entry(segment, position, size, *fields))
        position += size
    return entries


_LENGTH_EPOCH_MAGIC = struct.Struct(">iib")


def segment_headers(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Positions and headers (`encode.HEADER` records) of a segment's whole v2 batches, as `read_entries` reads
    them: one small unpack per batch to find the next, the fields in one numpy gather."""
    positions, position, end = [], 0, len(data)
    unpack = _LENGTH_EPOCH_MAGIC.unpack_from
    while position + RECORD_BATCH_OVERHEAD <= end:
        length, _, magic = unpack(data, position + 8)
        size = length + 12
        if magic != 2 or size < RECORD_BATCH_OVERHEAD or position + size > end:
            break
        positions.append(position)
        position += size
    at = np.array(positions, dtype=np.int64)
    raw = np.frombuffer(data, dtype=np.uint8)[at[:, None] + np.arange(RECORD_BATCH_OVERHEAD)]
    return at, np.ascontiguousarray(raw).view(HEADER).reshape(len(at))


def log_entries(directory: Path) -> list[Entry]:
    """Every whole batch of a partition directory, in file order (segments by base offset)."""
    entries: list[Entry] = []
    for base in segment_bases(directory):
        entries.extend(read_entries((directory / segment_file_name(base)).read_bytes(), base))
    return entries


def with_crc(batch: bytearray) -> bytearray:
    """The batch with its CRC-32C recomputed over attributes .. end."""
    batch[17:21] = crc32c(bytes(batch[CRC_START:])).to_bytes(4, "big")
    return batch


@dataclass(frozen=True)
class Departure:
    """How a follower's copy differs from its leader's.

    Batches at base offsets from `end` on are not in the copy; those from `start` to `end` go through `rewrite`
    (their bytes as the copy holds them: same size, so positions and indexes keep their meaning).
    `leader_epochs` is the copy's leader-epoch cache; `high_watermark` what it checkpoints as replicated.
    """

    start: int
    end: int
    leader_epochs: list[tuple[int, int]]
    high_watermark: int
    rewrite: Callable[[Entry, bytearray], bytearray] | None = None


def link_copy(source: Path, target: Path) -> None:
    """The follower's directory: a hard link to each of the leader's files."""
    target.mkdir(parents=True)
    for path in sorted(source.iterdir()):
        os.link(path, target / path.name)


def write_copy(source: Path, target: Path, departure: Departure) -> None:
    """The follower's directory for a copy that departs from the leader's (see the module docstring)."""
    target.mkdir(parents=True)
    bases = segment_bases(source)
    changed = max((base for base in bases if base <= departure.start), default=bases[0])
    for path in sorted(source.iterdir()):
        named = _FILE_NAME.match(path.name)
        if path.name == "leader-epoch-checkpoint":
            (target / path.name).write_text(layout.leader_epoch_checkpoint(departure.leader_epochs))
            continue
        if named is None or named.group(2) not in (*SEGMENT_FILES, ".snapshot"):
            os.link(path, target / path.name)
            continue
        offset, suffix = int(named.group(1)), named.group(2)
        if suffix == ".snapshot":
            keep = offset <= departure.end  # a truncated broker deletes the snapshots above its log end
        else:
            keep = offset < changed or changed < offset < departure.end
        if keep:
            os.link(path, target / path.name)
    _rewrite_segment(source, target, changed, departure)


def _rewrite_segment(source: Path, target: Path, base: int, departure: Departure) -> None:
    data = (source / segment_file_name(base)).read_bytes()
    kept = [entry for entry in read_entries(data, base) if entry.base_offset < departure.end]
    if not kept:
        return  # the copy ends where this segment starts: a truncated broker deletes it
    pieces, max_timestamps = [], []
    for entry in kept:
        batch = data[entry.position : entry.position + entry.size]
        if departure.rewrite is not None and entry.base_offset >= departure.start:
            batch = bytes(departure.rewrite(entry, bytearray(batch)))
            assert len(batch) == entry.size
        pieces.append(batch)
        max_timestamps.append(V2_HEADER.unpack_from(batch)[8])
    writer = SegmentWriter(target)
    writer.open(base)
    writer.append(
        Encoded(
            np.frombuffer(b"".join(pieces), dtype=np.uint8),
            np.array([entry.size for entry in kept], np.int64),
            np.array([entry.last_offset for entry in kept], np.int64),
            np.array(max_timestamps, np.int64),
        )
    )
    writer.close()
    index = source / segment_file_name(base, ".txnindex")
    if index.exists():
        content = index.read_bytes()
        entries = [content[at : at + TXN_INDEX_ENTRY_BYTES] for at in range(0, len(content), TXN_INDEX_ENTRY_BYTES)]
        held = [
            entry
            for entry in entries
            if len(entry) == TXN_INDEX_ENTRY_BYTES
            and int.from_bytes(entry[_LAST_OFFSET_IN_TXN_ENTRY], "big", signed=True) < departure.end
        ]
        if held:
            (target / index.name).write_bytes(b"".join(held))


@dataclass(frozen=True)
class Copy:
    """A replica of a partition on one broker, with what its log dir's checkpoints say of it."""

    partition: object  # partition_log._Partition, the leader's
    broker_id: int
    end: int
    high_watermark: int

    @property
    def topic(self) -> str:
        return self.partition.topic

    @property
    def number(self) -> int:
        return self.partition.partition


def replicate(partitions: list, root: Path, departures: dict[tuple[str, int, int], Departure]) -> list[Copy]:
    """Write every follower copy of `partitions` (finished leaders) under `root`; `departures` by (topic,
    partition, follower broker). Returns the follower copies, for the log dirs' checkpoints."""
    copies = []
    for partition in partitions:
        source = partition.directory
        for broker_id in partition.followers:
            target = root / f"broker-{broker_id}" / source.name
            departure = departures.get((partition.topic, partition.partition, broker_id))
            if departure is None:
                link_copy(source, target)
                copies.append(Copy(partition, broker_id, partition.next_offset, partition.next_offset))
            else:
                write_copy(source, target, departure)
                copies.append(Copy(partition, broker_id, departure.end, departure.high_watermark))
    return copies
