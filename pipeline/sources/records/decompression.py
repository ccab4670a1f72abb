"""Decompression as Kafka's own streams read each codec (gzip members, xerial or raw snappy, lz4 frames with
checksums, zstd frames), bounded by `MAX_RECORDS_BYTES` so a batch that would inflate beyond it is a record
problem, not an out-of-memory error.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import numba
import numpy as np

from pipeline.sources.jit import CACHE_KERNELS
from pipeline.sources.records.layout import BATCH_LENGTH, CODEC_NAMES, RECORD_BATCH_OVERHEAD
from pipeline.sources.records.walk import read_only_view

_SECTION = RECORD_BATCH_OVERHEAD  # where the records section starts: messages give batch byte positions


class Undecodable(Exception):
    """The records section does not decompress; `position` is relative to the section."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(reason)
        self.position = position
        self.reason = reason


def _too_large(codec: int, limit: int) -> Undecodable:
    return Undecodable(0, f"{CODEC_NAMES[codec]} records decompress to more than {limit} bytes")


_GZIP_MEMBER_START = b"\x1f\x8b\x08"


def _gunzip(section, limit: int) -> bytes:
    """gzip members like `GZIPInputStream`: CRC and size checked, bytes after a member that start no member ignored."""
    pieces: list[bytes] = []
    total = 0
    remaining = section
    while True:
        member = zlib.decompressobj(wbits=31)
        try:
            piece = member.decompress(remaining, limit - total + 1)
        except zlib.error as exc:
            raise Undecodable(len(section) - len(remaining), f"gzip records do not decompress: {exc}") from None
        total += len(piece)
        if total > limit:
            raise _too_large(1, limit)
        pieces.append(piece)
        if not member.eof:
            raise Undecodable(len(section), "gzip records end inside the compressed stream")
        remaining = member.unused_data
        if remaining[: len(_GZIP_MEMBER_START)] != _GZIP_MEMBER_START:
            return b"".join(pieces)


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version, compatible version
_XERIAL_MAGIC_HEAD = struct.unpack(">i", _XERIAL_MAGIC[:4])[0]  # a chunk size equal to it starts another stream
_XERIAL_CHUNK = 32 * 1024  # SnappyOutputStream's default block size


def _unsnappy(section, limit: int) -> bytes:
    """xerial `SnappyInputStream`: framed chunks after a magic header, or one raw snappy block without it."""
    size = len(section)
    if not size:
        raise Undecodable(0, "snappy records are empty")
    if size < _XERIAL_HEADER.size or bytes(section[: len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC:
        return _raw_snappy(section, 0, limit)
    pieces: list[bytes] = []
    total = 0
    position = 0
    while size - position >= 4:
        chunk_size = BATCH_LENGTH.unpack_from(section, position)[0]
        if chunk_size == _XERIAL_MAGIC_HEAD:  # a concatenated stream: its header, then its chunks
            if size - position < _XERIAL_HEADER.size:
                raise Undecodable(position, f"snappy records end inside a stream header at byte {_SECTION + position}")
            magic, version, _ = _XERIAL_HEADER.unpack_from(section, position)
            if magic != _XERIAL_MAGIC:
                break
            if version < 1:
                raise Undecodable(position, f"snappy stream header at byte {_SECTION + position} has version {version}")
            position += _XERIAL_HEADER.size
            continue
        if chunk_size < 0 or chunk_size > size - position - 4:
            raise Undecodable(
                position,
                f"snappy chunk at byte {_SECTION + position} declares {chunk_size} bytes, {size - position - 4} follow",
            )
        piece = _raw_snappy(section[position + 4 : position + 4 + chunk_size], position + 4, limit - total)
        total += len(piece)
        pieces.append(piece)
        position += 4 + chunk_size
    return b"".join(pieces)  # fewer than 4 bytes after the last chunk are not read, as by SnappyInputStream


def _raw_snappy(block, position: int, limit: int) -> bytes:
    """One raw snappy block; its declared length is checked against `limit` before anything is decompressed."""
    try:
        length = cramjam.snappy.decompress_raw_len(block)
    except cramjam.DecompressionError as exc:
        raise Undecodable(position, f"snappy block at byte {_SECTION + position} has no valid length: {exc}") from None
    if length > limit:
        raise _too_large(2, limit)
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as exc:
        raise Undecodable(position, f"snappy block at byte {_SECTION + position} does not decompress: {exc}") from None


_XXH_PRIMES = (2654435761, 2246822519, 3266489917, 668265263, 374761393)
_UINT32_MASK = 0xFFFFFFFF


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def _rotl32(value, bits):
    return ((value << np.uint64(bits)) | (value >> np.uint64(32 - bits))) & np.uint64(_UINT32_MASK)


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def _word32(buf, position):
    word = np.uint64(0)
    for index in range(4):
        word |= np.uint64(buf[position + index]) << np.uint64(8 * index)
    return word


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def _xxh32(buf, start, end):
    """XXH32 with seed 0 of buf[start:end], as lz4 frames use it for descriptor and block checksums.

    32-bit arithmetic in uint64 with explicit masks: numba widens uint32 products.
    """
    mask = np.uint64(_UINT32_MASK)
    prime1, prime2, prime3 = np.uint64(_XXH_PRIMES[0]), np.uint64(_XXH_PRIMES[1]), np.uint64(_XXH_PRIMES[2])
    prime4, prime5 = np.uint64(_XXH_PRIMES[3]), np.uint64(_XXH_PRIMES[4])
    position = start
    if end - start >= 16:
        lanes = np.empty(4, dtype=np.uint64)
        lanes[0] = (prime1 + prime2) & mask
        lanes[1] = prime2
        lanes[2] = np.uint64(0)
        lanes[3] = (np.uint64(1 << 32) - prime1) & mask
        while end - position >= 16:
            for lane in range(4):
                accumulator = (lanes[lane] + _word32(buf, position) * prime2) & mask
                lanes[lane] = (_rotl32(accumulator, 13) * prime1) & mask
                position += 4
        hash_value = (
            _rotl32(lanes[0], 1) + _rotl32(lanes[1], 7) + _rotl32(lanes[2], 12) + _rotl32(lanes[3], 18)
        ) & mask
    else:
        hash_value = prime5
    hash_value = (hash_value + np.uint64(end - start)) & mask
    while end - position >= 4:
        hash_value = (hash_value + _word32(buf, position) * prime3) & mask
        hash_value = (_rotl32(hash_value, 17) * prime4) & mask
        position += 4
    while position < end:
        hash_value = (hash_value + np.uint64(buf[position]) * prime5) & mask
        hash_value = (_rotl32(hash_value, 11) * prime1) & mask
        position += 1
    hash_value ^= hash_value >> np.uint64(15)
    hash_value = (hash_value * prime2) & mask
    hash_value ^= hash_value >> np.uint64(13)
    hash_value = (hash_value * prime3) & mask
    hash_value ^= hash_value >> np.uint64(16)
    return hash_value


def xxh32(data) -> int:
    """XXH32 (seed 0) of a bytes-like object."""
    return int(_xxh32(read_only_view(np.frombuffer(data, dtype=np.uint8)), 0, len(data)))


_LZ4_MAGIC = 0x184D2204
_LZ4_UNCOMPRESSED_BLOCK = 0x80000000
_UINT32_LE = struct.Struct("<I")


def _unlz4(section, limit: int) -> bytes:
    """One lz4 frame like Kafka's `Lz4BlockInputStream`: version 1, independent blocks, checksummed descriptor."""
    size = len(section)
    if size < 7:
        raise Undecodable(0, f"lz4 records of {size} bytes end inside the frame header")
    magic = _UINT32_LE.unpack_from(section, 0)[0]
    if magic != _LZ4_MAGIC:
        raise Undecodable(0, f"lz4 frame magic 0x{magic:08X} is not 0x{_LZ4_MAGIC:08X}")
    flags, block_descriptor = section[4], section[5]
    if flags & 0x03 or (flags >> 6) != 1 or not flags & 0x20 or block_descriptor & 0x8F:
        raise Undecodable(4, f"lz4 frame descriptor 0x{flags:02X} 0x{block_descriptor:02X} is not supported")
    block_size_code = block_descriptor >> 4
    if block_size_code < 4:
        raise Undecodable(5, f"lz4 block size code {block_size_code} is below 4")
    max_block = 1 << (2 * block_size_code + 8)
    position = 6 + (8 if flags & 0x08 else 0)
    if position >= size:
        raise Undecodable(0, "lz4 records end inside the frame header")
    raw = read_only_view(np.frombuffer(section, dtype=np.uint8))
    if section[position] != (int(_xxh32(raw, 4, position)) >> 8) & 0xFF:
        raise Undecodable(position, "lz4 frame descriptor checksum does not match")
    position += 1
    scratch = np.empty(max_block, dtype=np.uint8)
    pieces: list[bytes] = []
    total = 0
    while True:
        if size - position < 4:
            raise Undecodable(position, f"lz4 records end at byte {_SECTION + size} before the frame's end mark")
        word = _UINT32_LE.unpack_from(section, position)[0]
        block_size = word & ~_LZ4_UNCOMPRESSED_BLOCK
        if block_size == 0:
            return b"".join(pieces)  # the end mark; Kafka's stream reads nothing after it
        if block_size > max_block:
            raise Undecodable(
                position, f"lz4 block at byte {_SECTION + position} of {block_size} bytes exceeds {max_block}"
            )
        block_start = position + 4
        block_end = block_start + block_size
        if block_end > size:
            raise Undecodable(position, f"lz4 block at byte {_SECTION + position} runs past the end of the records")
        block = section[block_start:block_end]
        if word & _LZ4_UNCOMPRESSED_BLOCK:
            piece = bytes(block)
        else:
            try:
                piece = scratch[: cramjam.lz4.decompress_block_into(block, scratch)].tobytes()
            except cramjam.DecompressionError as exc:
                raise Undecodable(
                    position, f"lz4 block at byte {_SECTION + position} does not decompress: {exc}"
                ) from None
        position = block_end
        if flags & 0x10:
            if size - position < 4:
                raise Undecodable(
                    position, f"lz4 records end inside the checksum of the block at byte {_SECTION + block_start - 4}"
                )
            if _UINT32_LE.unpack_from(section, position)[0] != int(_xxh32(raw, block_start, block_end)):
                raise Undecodable(block_start - 4, f"lz4 block at byte {_SECTION + block_start - 4} fails its checksum")
            position += 4
        total += len(piece)
        if total > limit:
            raise _too_large(3, limit)
        pieces.append(piece)


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MASK = 0xFFFFFFF0
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50
_ZSTD_BLOCK_MAX = 128 * 1024
_ZSTD_DICTIONARY_ID_BYTES = (0, 1, 2, 4)
_ZSTD_CONTENT_SIZE_BYTES = (0, 2, 4, 8)


def _zstd_bound(section) -> int:
    """An upper bound of what the zstd frames of `section` decompress to, from their block headers (RFC 8878)."""
    size = len(section)
    position = bound = 0
    while position < size:
        if size - position < 5:
            raise Undecodable(position, f"zstd records end inside a frame header at byte {_SECTION + position}")
        magic = _UINT32_LE.unpack_from(section, position)[0]
        if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE_MAGIC:
            if size - position < 8:
                raise Undecodable(position, f"zstd records end inside a frame header at byte {_SECTION + position}")
            position += 8 + _UINT32_LE.unpack_from(section, position + 4)[0]
            continue
        if magic != _ZSTD_MAGIC:
            raise Undecodable(position, f"zstd frame magic 0x{magic:08X} at byte {_SECTION + position} is unknown")
        descriptor = section[position + 4]
        single_segment = descriptor & 0x20
        content_size_bytes = _ZSTD_CONTENT_SIZE_BYTES[descriptor >> 6] or (1 if single_segment else 0)
        position += 5 + (0 if single_segment else 1) + _ZSTD_DICTIONARY_ID_BYTES[descriptor & 0x03] + content_size_bytes
        while True:
            if size - position < 3:
                raise Undecodable(position, f"zstd records end inside a block header at byte {_SECTION + position}")
            header = int.from_bytes(section[position : position + 3], "little")
            block_type, block_size = (header >> 1) & 0x03, header >> 3
            if block_type == 3:
                raise Undecodable(position, f"zstd block at byte {_SECTION + position} has the reserved block type")
            position += 3 + (1 if block_type == 1 else block_size)
            bound += _ZSTD_BLOCK_MAX if block_type == 2 else block_size
            if header & 0x01:
                break
        position += 4 if descriptor & 0x04 else 0
    if position > size:
        raise Undecodable(size, "zstd records end inside a frame")
    return bound


def _unzstd(section, limit: int) -> np.ndarray:
    """zstd frames (skippable frames skipped) like zstd-jni's stream, into a buffer no larger than needed."""
    bound = _zstd_bound(section)
    output = np.empty(min(bound, limit + 1), dtype=np.uint8)
    try:
        written = cramjam.zstd.decompress_into(section, output)
    except cramjam.DecompressionError as exc:
        if bound > limit:
            raise Undecodable(0, f"zstd records do not decompress within {limit} bytes: {exc}") from None
        raise Undecodable(0, f"zstd records do not decompress: {exc}") from None
    if written > limit:
        raise _too_large(4, limit)
    output.flags.writeable = False
    return output[:written]


def decompress_section(section, codec: int, limit: int) -> np.ndarray:
    """The decompressed records section as a read-only uint8 array, or Undecodable."""
    if codec == 1:
        data = _gunzip(section, limit)
    elif codec == 2:
        data = _unsnappy(section, limit)
    elif codec == 3:
        data = _unlz4(section, limit)
    else:
        return _unzstd(section, limit)
    return np.frombuffer(data, dtype=np.uint8)  # read-only, as bytes are


def compress_records(records: bytes, codec: int) -> bytes:
    """The records section as a Kafka producer writes it with `codec` (0 none .. 4 zstd); used by the encoder.

    gzip without a timestamp; snappy in xerial framing of 32 KiB chunks; lz4 as `Lz4BlockOutputStream` writes it
    (64 KiB independent blocks, no checksums but the descriptor's); zstd as one frame.
    """
    if codec == 0:
        return records
    if codec == 1:
        return gzip.compress(records, mtime=0)
    if codec == 2:
        chunks = [
            bytes(cramjam.snappy.compress_raw(records[start : start + _XERIAL_CHUNK]))
            for start in range(0, len(records), _XERIAL_CHUNK)
        ]
        return _XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1) + b"".join(
            BATCH_LENGTH.pack(len(chunk)) + chunk for chunk in chunks
        )
    if codec == 3:
        descriptor = bytes([0x60, 0x40])  # version 1, independent blocks; 64 KiB blocks
        frame = [_UINT32_LE.pack(_LZ4_MAGIC), descriptor, bytes([(xxh32(descriptor) >> 8) & 0xFF])]
        for start in range(0, len(records), 64 * 1024):
            block = records[start : start + 64 * 1024]
            compressed = bytes(cramjam.lz4.compress_block(block, store_size=False))
            if len(compressed) < len(block):
                frame += [_UINT32_LE.pack(len(compressed)), compressed]
            else:
                frame += [_UINT32_LE.pack(len(block) | _LZ4_UNCOMPRESSED_BLOCK), block]
        return b"".join([*frame, _UINT32_LE.pack(0)])
    if codec == 4:
        return bytes(cramjam.zstd.compress(records))
    raise ValueError(f"compression codec {codec} is not one of 0 (none) .. 4 (zstd)")
