"""One partition's log as its leader appends to it, and the files beside it.

A data partition keeps, for every producer, the state the audit's replay derives from the log (spec §6.0,
`pipeline/audit/replay/plan.py`): the highest epoch seen (data or marker), the last data batch at that epoch, the
last marker's coordinator epoch and the first offset of the open transaction. Whatever is appended, clean or
injected, goes through the same bookkeeping, so the snapshots written at each roll and at the end, and the
`.txnindex` entry of every ABORT (with the LSO of spec §6.0 step 4), agree with what the audit replays. One
difference from a broker: after a marker that bumps the epoch (a fence or timeout abort) Kafka's
`ProducerStateEntry` drops the last batch (sequence and offset -1), while the replay, and so the snapshot
here, keeps it.

Entries are buffered as columns and encoded in chunks (`encode`); a compacted topic's segment is held until
it rolls, because the cleaner only rewrites closed segments (`compaction`).
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pipeline.generate import layout
from pipeline.generate.cluster import PartitionPlacement
from pipeline.generate.compaction import compact
from pipeline.generate.encode import MARKER_BYTES, RECORD_BYTES, Chunk, Encoded, encode_chunk
from pipeline.generate.rand import Rng
from pipeline.generate.segment_writer import SegmentWriter, snapshot_bytes
from pipeline.sources.kafka_format.encoding import encode_batch, encode_txnindex_entry, segment_file_name
from pipeline.sources.kafka_format.layout import ATTR_TRANSACTIONAL, RECORD_BATCH_OVERHEAD
from schemas.batches import CONTROL_ABORT

MAX_SEQUENCE = 0x7FFFFFFF
CHUNK_ENTRIES = 16384
COMPACTED_KEY_SPACE = 1000
DUPLICATE_WINDOW = 5
_RAW_FLUSH_BYTES = 256 * 1024  # per __transaction_state partition: 50 of them buffer at once

SnapshotEntry = tuple[int, int, int, int, int, int, int, int]
SnapshotHook = Callable[["DataPartition", int, list[SnapshotEntry]], bytes | None]
"""Returns the snapshot file to write instead (an anomaly), or None to leave this one alone."""
RollHook = Callable[["DataPartition"], tuple[int, int] | None]
"""Returns (segment base, snapshot offset) for the roll under way (an anomaly), or None for a normal roll."""


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """`DefaultRecordBatch.lastSequence`: wraps past 2147483647."""
    return -1 if base_sequence < 0 else (base_sequence + last_offset_delta) & MAX_SEQUENCE


class ProducerEntry:
    """A producer's state on one partition, as the audit replays it and a snapshot stores it."""

    __slots__ = (
        "epoch",
        "last_sequence",
        "last_offset",
        "offset_delta",
        "timestamp",
        "coordinator_epoch",
        "txn_first_offset",
        "recent",
        "last_marker",
        "marker_epochs",
    )

    def __init__(self) -> None:
        self.epoch = -1
        self.last_sequence = -1
        self.last_offset = -1
        self.offset_delta = 0
        self.timestamp = -1
        self.coordinator_epoch = -1
        self.txn_first_offset = -1
        # (base offset, base sequence, last offset delta, records, attributes, base timestamp, epoch) of the
        # last data batches at the current epoch: the broker's duplicate window
        self.recent: deque[tuple[int, int, int, int, int, int, int]] = deque(maxlen=DUPLICATE_WINDOW)
        self.last_marker: tuple[int, int, int, int] | None = None  # offset, epoch, control type, coordinator epoch
        self.marker_epochs: dict[int, tuple[int, int, int]] = {}  # epoch -> control type, coordinator epoch, offset


class _Columns:
    """The pending entries of a partition, one compact array per field."""

    def __init__(self) -> None:
        self.base_offset = array("q")
        self.last_offset_delta = array("i")
        self.records = array("b")
        self.producer_id = array("q")
        self.producer_epoch = array("h")
        self.base_sequence = array("i")
        self.attributes = array("h")
        self.base_timestamp = array("q")
        self.leader_epoch = array("i")
        self.control = array("b")
        self.coordinator_epoch = array("i")
        self.mutation = array("b")

    def __len__(self) -> int:
        return len(self.base_offset)

    def chunk(self) -> Chunk:
        fields = {name: np.frombuffer(values, dtype=values.typecode) for name, values in vars(self).items()}
        records = fields["records"]
        return Chunk(keep=np.full(len(records), 0xFF, dtype=np.uint8), **fields)


class _Partition:
    """What every partition directory has: segments rolled by size, leader epochs, the side files."""

    def __init__(self, placement: PartitionPlacement, root: Path, topic_id: str, segment_bytes: int) -> None:
        self.topic = placement.topic
        self.partition = placement.partition
        self.broker_id = placement.broker_id
        self.followers = placement.followers
        self.leader_epoch = placement.leader_epoch
        self.leader_epochs = [(placement.leader_epoch, 0)]
        self.topic_id = topic_id
        self.segment_bytes = segment_bytes
        self.writer = SegmentWriter(root / f"broker-{placement.broker_id}" / placement.name)
        self.writer.open(0)
        self.segment_base = 0
        self.segment_size = 0
        self.next_offset = 0
        self.snapshot_offsets: list[int] = []
        self.segment_bases = [0]
        self.log_start_offset = 0
        self.cleaned_until = 0  # first dirty offset of a compacted log
        self.text_hooks: dict[str, Callable[[str], str]] = {}
        self.extra_files: dict[str, bytes] = {}

    @property
    def directory(self) -> Path:
        return self.writer.directory

    def bump_leader_epoch(self) -> None:
        """A new leader election: the epoch starts at the log end offset (`maybeAssignEpochStartOffset`); an
        epoch that wrote nothing is dropped from the cache, as `LeaderEpochFileCache.assign` does."""
        self.leader_epoch += 1
        if self.leader_epochs[-1][1] == self.next_offset:
            self.leader_epochs.pop()
        self.leader_epochs.append((self.leader_epoch, self.next_offset))

    def _make_room(self, size: int) -> None:
        if self.segment_size and self.segment_size + size > self.segment_bytes:
            self.roll()
        self.segment_size += size

    def roll(self) -> None:
        raise NotImplementedError

    def _write_side_files(self) -> None:
        texts = {
            "leader-epoch-checkpoint": layout.leader_epoch_checkpoint(self.leader_epochs),
            "partition.metadata": layout.partition_metadata(self.topic_id),
        }
        for name, text in texts.items():
            hook = self.text_hooks.get(name)
            (self.directory / name).write_text(hook(text) if hook else text)
        for name, content in self.extra_files.items():
            (self.directory / name).write_bytes(content)


class DataPartition(_Partition):
    """A partition producers write to."""

    def __init__(
        self,
        index: int,
        placement: PartitionPlacement,
        root: Path,
        topic_id: str,
        segment_bytes: int,
        compacted: bool,
        compaction_rng: Rng,
    ) -> None:
        super().__init__(placement, root, topic_id, segment_bytes)
        self.index = index
        self.compacted = compacted
        self.key_space = COMPACTED_KEY_SPACE if compacted else None
        self.compaction_rng = compaction_rng
        self.producers: dict[int, ProducerEntry] = {}
        self.open_txns: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.aborted: dict[int, list[list[int]]] = {}  # segment base -> [pid, first, last, lso, version] entries
        self.last_commit: tuple[int, int, int, int] | None = None  # pid, txn first offset, marker offset, segment
        self.last_entry_base = -1
        self.markers = 0
        self.snapshot_hook: SnapshotHook | None = None
        self.roll_hook: RollHook | None = None
        self.tail = b""
        self._columns = _Columns()

    # --- appending -----------------------------------------------------------------------------------

    def data(self, pid: int, epoch: int, sequence: int, records: int, transactional: bool, timestamp: int) -> int:
        """Append a data batch at the log end; returns its base offset."""
        return self.append(
            pid, epoch, sequence, records, ATTR_TRANSACTIONAL if transactional else 0, timestamp, records - 1
        )

    def append(
        self,
        pid: int,
        epoch: int,
        sequence: int,
        records: int,
        attributes: int,
        timestamp: int,
        last_offset_delta: int,
        *,
        base_offset: int | None = None,
        leader_epoch: int | None = None,
        mutation: int = 0,
    ) -> int:
        """Append a data batch; the keyword arguments are for injected anomalies."""
        self._make_room(RECORD_BATCH_OVERHEAD + RECORD_BYTES * records)
        base = self.next_offset if base_offset is None else base_offset
        self.next_offset = max(self.next_offset, base + last_offset_delta + 1)
        self._add(
            base,
            last_offset_delta,
            records,
            pid,
            epoch,
            sequence,
            attributes,
            timestamp,
            leader_epoch,
            -1,
            -1,
            mutation,
        )
        if pid >= 0:
            self._apply_data(pid, epoch, sequence, records, attributes, timestamp, base, last_offset_delta)
        return base

    def marker(
        self, pid: int, epoch: int, commit: bool, coordinator_epoch: int, timestamp: int, mutation: int = 0
    ) -> int:
        """Append a COMMIT or ABORT marker; an ABORT that closes a transaction gets its `.txnindex` entry."""
        self._make_room(MARKER_BYTES)
        offset = self.next_offset
        self.next_offset += 1
        self.markers += 1
        control = 1 if commit else CONTROL_ABORT
        self._add(offset, 0, 1, pid, epoch, -1, 0, timestamp, None, control, coordinator_epoch, mutation)
        entry = self._entry(pid)
        if epoch > entry.epoch:  # the broker clears the batch window when a marker changes the epoch
            entry.epoch = epoch
            entry.recent.clear()
            entry.last_sequence, entry.last_offset, entry.offset_delta = -1, -1, 0
        entry.coordinator_epoch = coordinator_epoch
        entry.timestamp = timestamp
        entry.last_marker = (offset, epoch, control, coordinator_epoch)
        entry.marker_epochs[epoch] = (control, coordinator_epoch, offset)
        first = entry.txn_first_offset
        if first >= 0:
            entry.txn_first_offset = -1
            del self.open_txns[pid]
            if commit:
                self.last_commit = (pid, first, offset, self.segment_base)
            else:
                lso = min(self.open_txns.values(), default=offset + 1)
                self.aborted.setdefault(self.segment_base, []).append([pid, first, offset, lso, 0])
        return offset

    def skip_offsets(self, count: int) -> None:
        """Leave offsets unused (an anomaly: the log gets a gap)."""
        self.next_offset += count

    def _entry(self, pid: int) -> ProducerEntry:
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry()
        return entry

    def _apply_data(
        self, pid: int, epoch: int, sequence: int, records: int, attributes: int, timestamp: int, base: int, delta: int
    ) -> None:
        entry = self._entry(pid)
        if epoch >= entry.epoch:  # a lower epoch is a zombie write: the replay does not take it as the state
            if epoch > entry.epoch:
                entry.epoch = epoch
                entry.recent.clear()
            entry.last_sequence = last_sequence(sequence, delta)
            entry.last_offset = base + delta
            entry.offset_delta = delta
            entry.recent.append((base, sequence, delta, records, attributes, timestamp, epoch))
        entry.timestamp = timestamp + records - 1
        if attributes & ATTR_TRANSACTIONAL and entry.txn_first_offset < 0:
            entry.txn_first_offset = base
            self.open_txns[pid] = base

    def _add(
        self,
        base: int,
        delta: int,
        records: int,
        pid: int,
        epoch: int,
        sequence: int,
        attributes: int,
        timestamp: int,
        leader_epoch: int | None,
        control: int,
        coordinator_epoch: int,
        mutation: int,
    ) -> None:
        self.last_entry_base = base
        columns = self._columns
        columns.base_offset.append(base)
        columns.last_offset_delta.append(delta)
        columns.records.append(records)
        columns.producer_id.append(pid)
        columns.producer_epoch.append(epoch)
        columns.base_sequence.append(sequence)
        columns.attributes.append(attributes)
        columns.base_timestamp.append(timestamp)
        columns.leader_epoch.append(self.leader_epoch if leader_epoch is None else leader_epoch)
        columns.control.append(control)
        columns.coordinator_epoch.append(coordinator_epoch)
        columns.mutation.append(mutation)
        if len(columns) >= CHUNK_ENTRIES and not self.compacted:
            self._flush(closing=False)

    # --- files ----------------------------------------------------------------------------------------

    def _flush(self, closing: bool) -> None:
        if not len(self._columns):
            return
        chunk = self._columns.chunk()
        self._columns = _Columns()
        if self.compacted and closing:
            chunk = compact(chunk, self.compaction_rng, [start for _, start in self.leader_epochs])
        if len(chunk):
            self.writer.append(encode_chunk(chunk, self.key_space))

    def roll(self) -> None:
        """Close the active segment, open the next at the log end, and snapshot the producer state there."""
        self._flush(closing=True)
        self.writer.close()
        chosen = self.roll_hook(self) if self.roll_hook else None
        if chosen is not None:
            self.roll_hook = None
        segment_base, snapshot_offset = chosen or (self.next_offset, self.next_offset)
        if self.compacted:
            self.cleaned_until = segment_base
        self.writer.open(segment_base)
        self.segment_base = segment_base
        self.segment_bases.append(segment_base)
        self.segment_size = 0
        self.snapshot(snapshot_offset)

    def snapshot_entries(self) -> list[SnapshotEntry]:
        return [
            (
                pid,
                entry.epoch,
                entry.last_sequence,
                entry.last_offset,
                entry.offset_delta,
                entry.timestamp,
                entry.coordinator_epoch,
                entry.txn_first_offset,
            )
            for pid, entry in sorted(self.producers.items())
        ]

    def snapshot(self, offset: int) -> None:
        entries = self.snapshot_entries()
        content = self.snapshot_hook(self, offset, entries) if self.snapshot_hook else None
        if content is not None:
            self.snapshot_hook = None
        self.writer.write_snapshot(offset, snapshot_bytes(entries) if content is None else content)
        self.snapshot_offsets.append(offset)

    def finish(self) -> None:
        """Flush and close the log as a clean shutdown does: snapshot at the log end, then the side files."""
        self._flush(closing=False)
        if self.tail:
            self.writer.append_raw(self.tail)
        self.writer.close()
        if self.next_offset > max(self.snapshot_offsets, default=0):
            self.snapshot(self.next_offset)
        for segment_base, entries in self.aborted.items():
            if entries:
                (self.directory / segment_file_name(segment_base, ".txnindex")).write_bytes(
                    b"".join(_txnindex_entry(entry) for entry in entries)
                )
        self._write_side_files()


def _txnindex_entry(entry: list[int]) -> bytes:
    """A `.txnindex` entry with its version field (always 0 unless an anomaly set it)."""
    pid, first, last, lso, version = entry
    return version.to_bytes(2, "big", signed=True) + encode_txnindex_entry(pid, first, last, lso)[2:]


class TransactionStatePartition(_Partition):
    """A `__transaction_state` partition: one coordinator record per batch, no producer state."""

    def __init__(self, placement: PartitionPlacement, root: Path, topic_id: str, segment_bytes: int) -> None:
        super().__init__(placement, root, topic_id, segment_bytes)
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._max_timestamps: list[int] = []
        self._last_offsets: list[int] = []

    @property
    def coordinator_epoch(self) -> int:
        return self.leader_epoch

    def append(self, key: bytes, value: bytes | None, timestamp: int, compression: int = 0) -> int:
        """Append one record as the coordinator does (uncompressed, no producer id); returns its offset."""
        offset = self.next_offset
        batch = encode_batch(
            offset,
            [value],
            partition_leader_epoch=self.leader_epoch,
            base_timestamp=timestamp,
            compression=compression,
            keys=[key],
        )
        self._make_room(len(batch))
        self.next_offset += 1
        self._pending.append(batch)
        self._pending_bytes += len(batch)
        self._max_timestamps.append(timestamp)
        self._last_offsets.append(offset)
        if self._pending_bytes >= _RAW_FLUSH_BYTES:
            self._flush()
        return offset

    def _flush(self) -> None:
        if not self._pending:
            return
        sizes = np.array([len(batch) for batch in self._pending], dtype=np.int64)
        data = np.frombuffer(b"".join(self._pending), dtype=np.uint8)
        self.writer.append(
            Encoded(data, sizes, np.array(self._last_offsets, np.int64), np.array(self._max_timestamps, np.int64))
        )
        self._pending, self._pending_bytes, self._max_timestamps, self._last_offsets = [], 0, [], []

    def roll(self) -> None:
        self._flush()
        self.writer.close()
        self.writer.open(self.next_offset)
        self.segment_base = self.next_offset
        self.segment_bases.append(self.next_offset)
        self.segment_size = 0
        self.writer.write_snapshot(self.next_offset, snapshot_bytes([]))
        self.snapshot_offsets.append(self.next_offset)

    def finish(self) -> None:
        self._flush()
        self.writer.close()
        if self.next_offset > max(self.snapshot_offsets, default=0):
            self.writer.write_snapshot(self.next_offset, snapshot_bytes([]))
        self._write_side_files()
