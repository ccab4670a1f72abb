"""The v2 record-batch layout the decoder and encoder share (spec §1.1): field offsets and sizes, attribute bits,
codecs, control types and the entry overheads of every magic.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numba
import pyarrow as pa

from pipeline.sources.jit import CACHE_KERNELS

LOG_OVERHEAD = 12  # offset:int64 + size:int32 in front of every entry
HEADER_SIZE_UP_TO_MAGIC = 17
RECORD_BATCH_OVERHEAD = 61  # v2 batch header; the first record starts here
# the v2 batch header: base offset, length, leader epoch, magic, CRC, attributes, last offset delta, base and max
# timestamps, producer id, epoch, base sequence, record count
V2_HEADER = struct.Struct(">qiibIhiqqqhii")
TXN_INDEX_ENTRY_BYTES = 34  # AbortedTxn: version, producerId, firstOffset, lastOffset, lastStableOffset
CRC_START = 21  # v2 CRC-32C covers attributes .. end of batch
NO_SEQUENCE = -1
COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
DECODED_SCHEMA = pa.schema(
    [
        pa.field("producer_id", pa.int64()),
        pa.field("base_offset", pa.int64()),
        pa.field("last_offset", pa.int64()),
        pa.field("producer_epoch", pa.int32()),
        pa.field("base_sequence", pa.int32()),
        pa.field("last_sequence", pa.int32()),
        pa.field("is_transactional", pa.bool_()),
        pa.field("is_control", pa.bool_()),
        pa.field("control_type", pa.int32()),
        pa.field("coordinator_epoch", pa.int32()),
        pa.field("record_count", pa.int32()),
        pa.field("base_timestamp", pa.int64()),
        pa.field("max_timestamp", pa.int64()),
        pa.field("max_record_timestamp", pa.int64()),
        pa.field("partition_leader_epoch", pa.int32()),
        pa.field("magic", pa.int32()),
        pa.field("attributes", pa.int32()),
        pa.field("compression", pa.int32()),
        pa.field("timestamp_type", pa.int32()),
        pa.field("has_delete_horizon", pa.bool_()),
        pa.field("last_offset_delta", pa.int32()),
        pa.field("batch_length", pa.int32()),
        pa.field("crc", pa.int64()),
        pa.field("crc_valid", pa.bool_()),
        pa.field("record_problem", pa.string()),
        pa.field("entry_status", pa.string(), nullable=False),
        pa.field("entry_note", pa.string()),
        pa.field("position", pa.int64(), nullable=False),
        pa.field("size_bytes", pa.int64()),
    ]
)
"""The `batches` columns that come from segment bytes, in `BATCHES` order; the caller adds provenance columns."""
INT32 = struct.Struct(">i")
SIZE_AND_MAGIC = struct.Struct(">i4xB")
CONTROL_KEY = struct.Struct(">hh")
MARKER_VALUE = struct.Struct(">hi")
MARKER_BYTES = 78
# Kernels compile on first use, once per Python process unless cached on disk (pipeline.sources.jit).
njit_kernel = numba.njit(nogil=True, cache=CACHE_KERNELS)


class Stop(NamedTuple):
    status: str
    position: int  # in the window
    note: str


class Malformed(ValueError):
    """A control record that cannot be parsed; the message becomes the entry note."""
