"""Damaged copies of a partition directory the broker wrote, each with one kind of damage operators meet.

The copies get topic names of their own (`<damage>-0`), so one audit reads them side by side with an
undamaged copy; the batches to damage are found by reading the copies' batch headers, not by fixed positions.
"""

from __future__ import annotations

import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

COPIES = ("pristine", "truncated", "bitflip", "dropped", "markerless")  # the copies' topic names
HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 batch header (spec §1.1)
CONTROL = 0x20
COMPRESSION = 0x07


@dataclass(frozen=True)
class Batch:
    segment: Path
    position: int
    size: int
    base_offset: int
    last_offset: int
    is_control: bool
    producer_id: int
    leader_epoch: int
    attributes: int


def batches(partition_dir: Path) -> list[Batch]:
    """Every batch of every segment, in offset order."""
    found = []
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        position = 0
        while position + HEADER.size <= len(data):
            base, length, epoch, _, _, attributes, delta, _, _, producer, _, _, _ = HEADER.unpack_from(data, position)
            size = length + 12
            control = bool(attributes & CONTROL)
            found.append(Batch(segment, position, size, base, base + delta, control, producer, epoch, attributes))
            position += size
    return found


def copy(partition_dir: Path, root: Path, damage: str) -> Path:
    target = root / f"{damage}-0"
    shutil.copytree(partition_dir, target)
    return target


def marker(partition_dir: Path, offset: int) -> Batch:
    """The control batch at `offset`."""
    return next(b for b in batches(partition_dir) if b.base_offset == offset and b.is_control)


def truncate_inside(batch: Batch) -> None:
    """Cut the segment in the middle of `batch`: the rest of the segment is lost, the batch is a torn tail."""
    with open(batch.segment, "r+b") as segment:
        segment.truncate(batch.position + batch.size // 2)


def flip_bits(batch: Batch) -> None:
    """Invert one byte of the batch's records section; the header still reads, the CRC no longer matches."""
    with open(batch.segment, "r+b") as segment:
        segment.seek(batch.position + HEADER.size + 4)
        byte = segment.read(1)[0]
        segment.seek(-1, 1)
        segment.write(bytes([byte ^ 0xFF]))


def flip_payload_byte(batch: Batch) -> int:
    """Invert the last byte of the last record's value: every length and the header still read, the records
    parse, only the CRC no longer matches. The batch must be uncompressed and its last record carry no headers
    (its last byte the header count 0, after the value). Returns the byte's position in the segment."""
    if batch.attributes & COMPRESSION or batch.is_control:
        raise ValueError(f"not an uncompressed data batch: {batch}")
    with open(batch.segment, "r+b") as segment:
        segment.seek(batch.position + batch.size - 2)
        value, headers = segment.read(2)
        if headers != 0:
            raise ValueError(f"the last record of {batch} has headers")
        segment.seek(-2, 1)
        segment.write(bytes([value ^ 0xFF]))
    return batch.position + batch.size - 2


def drop_segment(segment: Path) -> None:
    """Remove a segment with every file of its base offset (index, time index, .txnindex, snapshot)."""
    for path in segment.parent.glob(f"{segment.stem}.*"):
        path.unlink()


def damaged_copies(partition_dir: Path, root: Path, transactions: list[tuple[int, int]]) -> None:
    """An undamaged copy of `partition_dir` and one per damage, under `root`.

    `transactions` are (first offset, marker offset) of the six transactions of v1-transactions on the
    partition, in the order written: commit, abort, commit, abort (its marker alone in a segment), commit, abort.
    """
    copy(partition_dir, root, "pristine")
    truncate_inside(marker(copy(partition_dir, root, "truncated"), transactions[2][1]))
    flipped = copy(partition_dir, root, "bitflip")
    flip_bits(next(b for b in batches(flipped) if b.base_offset == transactions[1][0]))
    dropped = copy(partition_dir, root, "dropped")
    drop_segment(next(b for b in batches(dropped) if b.base_offset == transactions[4][0]).segment)
    drop_segment(marker(copy(partition_dir, root, "markerless"), transactions[3][1]).segment)
