"""Decoders of the binary files beside segments: `.txnindex` (spec §1.3) and producer-state `.snapshot` (§1.4).

They never raise on bad content and never allocate from a length read in a file: entries are decoded ROWS_PER_BATCH at a
time, and what the broker would reject becomes a status or a problem row.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
from crc32c import crc32c
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.sources.partition_files.entries import (
    ROWS_PER_BATCH,
    SNAPSHOT_ENTRY_FIELDS,
    SNAPSHOT_VERSION,
    STATUS_OK,
    TXN_INDEX_ENTRY,
    TXN_INDEX_ENTRY_FIELDS,
    ByteReader,
)
from schemas.producer_snapshots import PRODUCER_SNAPSHOTS
from schemas.txn_index import TXN_INDEX

STATUS_TRUNCATED = "truncated"
SNAPSHOT_BAD_VERSION = "bad_version"
SNAPSHOT_TRAILING_BYTES = "trailing_bytes"
SNAPSHOT_CRC_MISMATCH = "crc_mismatch"
SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, CRC-32C of bytes [6, EOF), entry count
SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
SNAPSHOT_CRC_START = 6
NO_OPEN_TRANSACTION = -1
_VERSION = struct.Struct(">h")
_VERSION_AND_CRC = struct.Struct(">hI")
_TXN_INDEX_DTYPE = np.dtype(list(zip(TXN_INDEX_ENTRY_FIELDS, (">i2", ">i8", ">i8", ">i8", ">i8"), strict=True)))
_SNAPSHOT_DTYPE = np.dtype(
    list(zip(SNAPSHOT_ENTRY_FIELDS, (">i8", ">i2", ">i4", ">i8", ">i4", ">i8", ">i4", ">i8"), strict=True))
)
_TXN_INDEX_ENTRY_SCHEMA = pa.schema(
    [to_arrow_schema(TXN_INDEX).field(name) for name in (*TXN_INDEX_ENTRY_FIELDS, "entry_status", "position")]
)
_SNAPSHOT_ENTRY_SCHEMA = pa.schema(
    [
        to_arrow_schema(PRODUCER_SNAPSHOTS).field(name)
        for name in (*SNAPSHOT_ENTRY_FIELDS, "version", "crc_valid", "file_status", "file_note")
    ]
)


def decode_txn_index(data: bytes) -> list[dict[str, Any]]:
    """Rows (TXN_INDEX names, without provenance) of a `.txnindex` held in memory; see `txn_index_batches`."""
    return [row for batch in txn_index_batches(partial(byte_range, data), len(data)) for row in batch.to_pylist()]


def decode_producer_snapshot(data: bytes) -> list[dict[str, Any]]:
    """Rows (PRODUCER_SNAPSHOTS names, without provenance) of a snapshot held in memory; see `snapshot_batches`."""
    return [row for batch in snapshot_batches(partial(byte_range, data), len(data)) for row in batch.to_pylist()]


def txn_index_batches(read_at: ByteReader, size: int) -> Iterator[pa.RecordBatch]:
    """Record batches of at most ROWS_PER_BATCH rows of a `.txnindex`: one per 34-byte entry, in file order.

    Bytes after the last whole entry give one 'truncated' row. `version` is the int16 as written (0 in every
    entry a broker writes), although the broker reads back only its first byte.
    """
    whole = size - size % TXN_INDEX_ENTRY.size
    for position, chunk in entry_chunks(read_at, 0, whole, TXN_INDEX_ENTRY.size):
        entries = np.frombuffer(chunk, _TXN_INDEX_DTYPE)
        columns = {name: pa.array(_native(entries[name])) for name in entries.dtype.names}
        columns["entry_status"] = pa.repeat(pa.scalar(STATUS_OK), len(entries))
        columns["position"] = pa.array(np.arange(len(entries), dtype=np.int64) * TXN_INDEX_ENTRY.size + position)
        yield _entry_batch(columns, _TXN_INDEX_ENTRY_SCHEMA)
    if whole < size:
        row = {**dict.fromkeys(TXN_INDEX_ENTRY_FIELDS), "entry_status": STATUS_TRUNCATED, "position": whole}
        yield pa.RecordBatch.from_pylist([row], schema=_TXN_INDEX_ENTRY_SCHEMA)


def snapshot_batches(read_at: ByteReader, size: int) -> Iterator[pa.RecordBatch]:
    """Record batches of at most ROWS_PER_BATCH rows of a producer-state snapshot.

    One 'ok' row per entry, or one row with null producer fields for a snapshot without entries or a file
    the broker would reject (the status conventions are in schemas/producer_snapshots.py). Checks follow
    the broker's order (version, entry array, CRC); trailing bytes, which the broker only notices through the
    CRC, come before it, so a structural fault names the status even when the CRC fails too. The CRC covers
    the whole file: a first pass computes it a chunk at a time, a second decodes the entries.
    """
    header = read_at(0, SNAPSHOT_HEADER.size)
    version = _VERSION.unpack_from(header)[0] if size >= _VERSION.size else None
    crc_valid = stored_crc = computed_crc = None
    if size >= SNAPSHOT_CRC_START:
        stored_crc = _VERSION_AND_CRC.unpack_from(header)[1]
        computed_crc = 0
        for _, chunk in entry_chunks(read_at, SNAPSHOT_CRC_START, size, SNAPSHOT_ENTRY.size):
            computed_crc = crc32c(chunk, computed_crc)
        crc_valid = stored_crc == computed_crc

    def file_row(status: str, note: str | None) -> pa.RecordBatch:
        row = dict.fromkeys(SNAPSHOT_ENTRY_FIELDS)
        row.update(version=version, crc_valid=crc_valid, file_status=status, file_note=note)
        return pa.RecordBatch.from_pylist([row], schema=_SNAPSHOT_ENTRY_SCHEMA)

    if version is not None and version != SNAPSHOT_VERSION:
        yield file_row(SNAPSHOT_BAD_VERSION, f"version {version}; only version {SNAPSHOT_VERSION} exists")
        return
    if size < SNAPSHOT_HEADER.size:
        yield file_row(STATUS_TRUNCATED, f"{size} bytes, shorter than the {SNAPSHOT_HEADER.size}-byte header")
        return
    count = SNAPSHOT_HEADER.unpack_from(header)[2]
    if count < 0:
        yield file_row(STATUS_TRUNCATED, f"negative entry count {count}")
        return
    end = SNAPSHOT_HEADER.size + count * SNAPSHOT_ENTRY.size
    if size < end:
        yield file_row(STATUS_TRUNCATED, f"{count} entries need {end} bytes, the file has {size}")
        return
    if size > end:
        yield file_row(SNAPSHOT_TRAILING_BYTES, f"{size - end} bytes after the {count} entries")
        return
    if not crc_valid:
        note = f"stored CRC-32C {stored_crc:#010x}, computed {computed_crc:#010x} over bytes [6, {size})"
        yield file_row(SNAPSHOT_CRC_MISMATCH, note)
        return
    if count == 0:
        yield file_row(STATUS_OK, None)
        return
    for _, chunk in entry_chunks(read_at, SNAPSHOT_HEADER.size, end, SNAPSHOT_ENTRY.size):
        entries = np.frombuffer(chunk, _SNAPSHOT_DTYPE)
        columns = {name: pa.array(_native(entries[name])) for name in entries.dtype.names}
        open_txn = _native(entries["current_txn_first_offset"])
        columns["current_txn_first_offset"] = pa.array(open_txn, mask=open_txn == NO_OPEN_TRANSACTION)
        columns["version"] = pa.repeat(pa.scalar(version, pa.int32()), len(entries))
        columns["crc_valid"] = pa.repeat(pa.scalar(True), len(entries))
        columns["file_status"] = pa.repeat(pa.scalar(STATUS_OK), len(entries))
        columns["file_note"] = pa.nulls(len(entries), pa.string())
        yield _entry_batch(columns, _SNAPSHOT_ENTRY_SCHEMA)


def entry_chunks(read_at: ByteReader, start: int, end: int, entry_size: int) -> Iterator[tuple[int, bytes]]:
    """(position, bytes) of [start, end) in reads of ROWS_PER_BATCH entries; a file that shrinks while it is
    read is an I/O error."""
    step = ROWS_PER_BATCH * entry_size
    for position in range(start, end, step):
        chunk = read_at(position, min(step, end - position))
        if len(chunk) < min(step, end - position):
            raise OSError(f"the file ends at byte {position + len(chunk)}, before byte {end}: it shrank while read")
        yield position, chunk


def _native(column: np.ndarray) -> np.ndarray:
    """A big-endian column in the machine's byte order, which Arrow requires."""
    return column.astype(column.dtype.newbyteorder("="))


def _entry_batch(columns: dict[str, pa.Array], schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [columns[name].cast(schema.field(name).type) for name in schema.names], schema=schema
    )


def byte_range(data: bytes, position: int, length: int) -> bytes:
    return data[position : position + length]
