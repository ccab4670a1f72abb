"""Problem codes, fields and limits the record walk and its callers share."""

from __future__ import annotations

import struct

MAX_RECORDS_BYTES = 256 * 1024 * 1024
"""Largest decompressed records section accepted; far above what a producer puts in one batch (its batch.size and
max.request.size are a few MiB at most), far below what would exhaust an executor."""
RECORD_BATCH_OVERHEAD = 61  # the records section starts here
BATCH_LENGTH = struct.Struct(">i")
LAST_OFFSET_DELTA_AT = 23
RECORD_COUNT_AT = 57
ATTRIBUTES_LOW_BYTE_AT = 22  # attributes are an int16 at 21; only the low byte is used
CODEC_MASK = 0x07
CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
CODECS = len(CODEC_NAMES)
