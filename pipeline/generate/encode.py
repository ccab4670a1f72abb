"""Bulk encoding of v2 record batches and transaction markers from column arrays.

The simulation hands over one chunk of a partition's entries as numpy columns; this module lays them out
in one buffer with a handful of vectorised steps instead of one `encode_batch` call per batch: the 61-byte
headers through a big-endian structured dtype, the records from fixed templates (every record is 39 bytes:
one-byte varints, an 8-byte key, a 24-byte value; a marker's control record is 17 bytes), scattered to their
positions with fancy indexing. Only the CRC-32C is computed per batch, one hardware `crc32c` call each.

The byte layout is the one `kafka_format.encode_batch`/`encode_marker` write (tests read every batch back
with the project's decoder and with kafka-python).
Record timestamps are the batch base timestamp plus the record's offset delta, so maxTimestamp is always
the largest record timestamp; a record kept by compaction keeps its offset delta and timestamp.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from crc32c import crc32c

from pipeline.sources.kafka_format.layout import ATTR_CONTROL, ATTR_TRANSACTIONAL, CRC_START, RECORD_BATCH_OVERHEAD

HEADER = np.dtype(
    {
        "names": [
            "base_offset",
            "batch_length",
            "leader_epoch",
            "magic",
            "crc",
            "attributes",
            "last_offset_delta",
            "base_timestamp",
            "max_timestamp",
            "producer_id",
            "producer_epoch",
            "base_sequence",
            "records_count",
        ],
        "formats": [">i8", ">i4", ">i4", "u1", ">u4", ">i2", ">i4", ">i8", ">i8", ">i8", ">i2", ">i4", ">i4"],
        "offsets": [0, 8, 12, 16, 17, 21, 23, 27, 35, 43, 51, 53, 57],
        "itemsize": RECORD_BATCH_OVERHEAD,
    }
)
KEY_BYTES = 8
VALUE_BYTES = 24
RECORD_BYTES = 7 + KEY_BYTES + VALUE_BYTES  # length, attributes, 2 deltas, 2 lengths, header count: 1 byte each
MARKER_RECORD_BYTES = 17
MARKER_BYTES = RECORD_BATCH_OVERHEAD + MARKER_RECORD_BYTES
MAX_RECORDS = 8  # per batch; offset and timestamp deltas stay one-byte varints

# Mutations (anomalies) applied while encoding; a batch carries at most one.
MUTATE_CRC = 1  # stored CRC no longer matches (applied after the CRC)
MUTATE_UNUSED_ATTRIBUTE = 2  # attribute bit 7 set, CRC valid
MUTATE_HEADER_COUNT = 3  # last record's header count -1, CRC valid
MUTATE_MAX_TIMESTAMP = 4  # maxTimestamp one above the largest record timestamp, CRC valid
MUTATE_MARKER_SEQUENCE = 5  # control batch with baseSequence 0, CRC valid

_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_NIBBLE_SHIFTS = np.arange(28, -1, -4, dtype=np.uint64)


def _zigzag_byte(value: int) -> int:
    return value << 1


def _record_template() -> np.ndarray:
    template = np.zeros(RECORD_BYTES, dtype=np.uint8)
    template[0] = _zigzag_byte(RECORD_BYTES - 1)
    template[4] = _zigzag_byte(KEY_BYTES)
    template[5 + KEY_BYTES] = _zigzag_byte(VALUE_BYTES)
    return template


def _marker_template() -> np.ndarray:
    template = np.zeros(MARKER_RECORD_BYTES, dtype=np.uint8)
    template[0] = _zigzag_byte(MARKER_RECORD_BYTES - 1)
    template[4] = _zigzag_byte(4)  # key: int16 version 0, int16 type
    template[9] = _zigzag_byte(6)  # value: int16 version 0, int32 coordinator epoch
    return template


_RECORD = _record_template()
_MARKER = _marker_template()
_VALUE_AT = 6 + KEY_BYTES


@dataclass
class Chunk:
    """Entries of one partition in offset order, one array element per batch or marker.

    `keep` is a bit mask of the records that survive compaction (bit i = offset delta i); `control` is -1
    for data and the marker type (0 abort, 1 commit) for markers; `attributes` holds only the flags the
    encoder does not derive (transactional is given, control is set from `control`).
    """

    base_offset: np.ndarray
    last_offset_delta: np.ndarray
    records: np.ndarray
    keep: np.ndarray
    producer_id: np.ndarray
    producer_epoch: np.ndarray
    base_sequence: np.ndarray
    attributes: np.ndarray
    base_timestamp: np.ndarray
    leader_epoch: np.ndarray
    control: np.ndarray
    coordinator_epoch: np.ndarray
    mutation: np.ndarray

    def __len__(self) -> int:
        return len(self.base_offset)

    def select(self, rows: np.ndarray) -> Chunk:
        return Chunk(**{name: getattr(self, name)[rows] for name in self.__dataclass_fields__})


@dataclass
class Encoded:
    """The bytes of a chunk and, per entry, what the segment indexes need."""

    data: np.ndarray
    sizes: np.ndarray
    last_offsets: np.ndarray
    max_timestamps: np.ndarray


def _hex32(values: np.ndarray) -> np.ndarray:
    """Eight lower-case hex digits per uint32, as an (n, 8) byte array."""
    return _HEX[(values.astype(np.uint64)[:, None] >> _NIBBLE_SHIFTS) & np.uint64(0xF)]


def _scatter(out: np.ndarray, starts: np.ndarray, rows: np.ndarray) -> None:
    out[starts[:, None] + np.arange(rows.shape[1])] = rows


def encode_chunk(chunk: Chunk, key_space: int | None) -> Encoded:
    """Encode `chunk`; keys are drawn from `key_space` distinct keys when given (a compacted topic's keys)."""
    rows = len(chunk)
    is_marker = chunk.control >= 0
    bits = np.unpackbits(chunk.keep.astype(np.uint8)[:, None], axis=1, bitorder="little").astype(bool)
    bits &= np.arange(MAX_RECORDS) < chunk.records[:, None]
    bits[is_marker] = False
    kept = bits.sum(axis=1)
    first_kept = np.where(kept > 0, bits.argmax(axis=1), 0)
    last_kept = np.where(kept > 0, MAX_RECORDS - 1 - bits[:, ::-1].argmax(axis=1), 0)
    sizes = np.where(is_marker, MARKER_BYTES, RECORD_BATCH_OVERHEAD + RECORD_BYTES * kept).astype(np.int64)
    starts = np.cumsum(sizes) - sizes
    out = np.zeros(int(sizes.sum()), dtype=np.uint8)

    header = np.zeros(rows, dtype=HEADER)
    header["base_offset"] = chunk.base_offset
    header["batch_length"] = sizes - 12
    header["leader_epoch"] = chunk.leader_epoch
    header["magic"] = 2
    header["attributes"] = chunk.attributes | np.where(is_marker, ATTR_CONTROL | ATTR_TRANSACTIONAL, 0)
    header["last_offset_delta"] = chunk.last_offset_delta
    header["base_timestamp"] = chunk.base_timestamp + first_kept
    header["max_timestamp"] = chunk.base_timestamp + last_kept
    header["producer_id"] = chunk.producer_id
    header["producer_epoch"] = chunk.producer_epoch
    header["base_sequence"] = np.where(is_marker, -1, chunk.base_sequence)
    header["records_count"] = np.where(is_marker, 1, kept)
    mutation = chunk.mutation
    header["attributes"] |= np.where(mutation == MUTATE_UNUSED_ATTRIBUTE, 0x80, 0).astype(np.int16)
    header["max_timestamp"] += mutation == MUTATE_MAX_TIMESTAMP
    header["base_sequence"] = np.where(mutation == MUTATE_MARKER_SEQUENCE, 0, header["base_sequence"])
    _scatter(out, starts, header.view(np.uint8).reshape(rows, RECORD_BATCH_OVERHEAD))

    batch, delta = np.nonzero(bits)
    if len(batch):
        rank = np.arange(len(batch)) - (np.cumsum(kept) - kept)[batch]
        records = np.tile(_RECORD, (len(batch), 1))
        records[:, 2] = 2 * (delta - first_kept[batch])
        records[:, 3] = 2 * delta
        sequence = chunk.base_sequence[batch]
        record_sequence = np.where(
            sequence >= 0, (sequence + delta) & 0x7FFFFFFF, (chunk.base_offset[batch] + delta) & 0xFFFFFFFF
        ).astype(np.uint64)
        producer = chunk.producer_id[batch].astype(np.uint64)
        key = (producer * np.uint64(0x9E3779B1) + record_sequence * np.uint64(0x85EBCA6B)) & np.uint64(0xFFFFFFFF)
        if key_space is not None:
            key %= np.uint64(key_space)
        records[:, 5 : 5 + KEY_BYTES] = _hex32(key)
        records[:, _VALUE_AT : _VALUE_AT + 8] = _hex32(producer & np.uint64(0xFFFFFFFF))
        records[:, _VALUE_AT + 8 : _VALUE_AT + 16] = _hex32(record_sequence)
        records[:, _VALUE_AT + 16 : _VALUE_AT + 24] = _hex32(
            (chunk.base_timestamp[batch] + delta).astype(np.uint64) & np.uint64(0xFFFFFFFF)
        )
        _scatter(out, starts[batch] + RECORD_BATCH_OVERHEAD + RECORD_BYTES * rank, records)

    markers = np.flatnonzero(is_marker)
    if len(markers):
        control = np.tile(_MARKER, (len(markers), 1))
        control[:, 8] = chunk.control[markers]
        control[:, 12:16] = chunk.coordinator_epoch[markers].astype(">i4").view(np.uint8).reshape(-1, 4)
        _scatter(out, starts[markers] + RECORD_BATCH_OVERHEAD, control)

    ends = starts + sizes
    for row in np.flatnonzero(mutation == MUTATE_HEADER_COUNT).tolist():
        out[ends[row] - 1] = 1  # zig-zag -1
    view = memoryview(out)
    crcs = np.array(
        [crc32c(view[start:end]) for start, end in zip((starts + CRC_START).tolist(), ends.tolist(), strict=True)],
        dtype=">u4",
    )
    crcs ^= np.where(mutation == MUTATE_CRC, 0x00010000, 0).astype(np.uint32)
    _scatter(out, starts + 17, crcs.view(np.uint8).reshape(rows, 4))
    return Encoded(out, sizes, chunk.base_offset + chunk.last_offset_delta, header["max_timestamp"].astype(np.int64))
