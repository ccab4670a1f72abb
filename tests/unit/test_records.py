"""Record-level decoding: codecs, every FMT-006 condition, decompression bombs, and real batches of every origin."""

from __future__ import annotations

import json
import random
import struct
import tracemalloc
import zlib

import cramjam
import pyarrow as pa
import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from pipeline.config import load_settings
from pipeline.sources.dumplog.parser import parse_dump
from pipeline.sources.kafka_format.encoding import encode_batch, encode_marker, segment_file_name
from pipeline.sources.kafka_format.windows import decode_segment, decode_window
from pipeline.sources.records import columns
from pipeline.sources.records.api import Record, RecordError, iter_records
from pipeline.sources.records.decompression import compress_records, xxh32
from pipeline.sources.segments import SegmentFile, decode_file

T0 = 1_767_225_600_000
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


# --- building batches byte by byte ----------------------------------------------------------------------


def varint(value: int) -> bytes:
    """Zig-zag LEB128, written independently of the encoder under test."""
    unsigned = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while unsigned >= 0x80:
        out.append(unsigned & 0x7F | 0x80)
        unsigned >>= 7
    out.append(unsigned)
    return bytes(out)


def field_bytes(data: bytes | None) -> bytes:
    return varint(-1) if data is None else varint(len(data)) + data


def record(
    offset_delta: int = 0,
    timestamp_delta: int = 0,
    key: bytes | None = None,
    value: bytes | None = b"v",
    headers: tuple = (),
    body: bytes | None = None,
    length: int | None = None,
) -> bytes:
    """One record; `body` replaces everything after the length, `length` the declared length."""
    if body is None:
        body = b"\x00" + varint(timestamp_delta) + varint(offset_delta) + field_bytes(key) + field_bytes(value)
        body += varint(len(headers)) + b"".join(varint(len(name)) + name + field_bytes(data) for name, data in headers)
    return varint(len(body) if length is None else length) + body


def batch(
    section: bytes,
    count: int,
    last_offset_delta: int | None = None,
    codec: int = 0,
    max_timestamp: int = T0,
    log_append_time: bool = False,
) -> bytes:
    """A v2 batch around a ready-made records section, with a valid CRC."""
    attributes = codec | (0x08 if log_append_time else 0)
    header = struct.pack(
        ">qiibIhiqqqhii",
        0,
        49 + len(section),
        0,
        2,
        0,
        attributes,
        max(count - 1, 0) if last_offset_delta is None else last_offset_delta,
        T0,
        max_timestamp,
        -1,
        -1,
        -1,
        count,
    )
    data = bytearray(header + section)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def problem_of(entry: bytes) -> str | None:
    (row,) = decode_segment(entry).to_pylist()
    return row["record_problem"]


def rejected(entry: bytes, **kwargs) -> RecordError:
    with pytest.raises(RecordError) as caught:
        iter_records(entry, **kwargs)
    return caught.value


# --- codecs ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_every_codec_round_trips(codec):
    rng = random.Random(codec)
    values = [rng.randbytes(rng.randrange(0, 300)) for _ in range(40)] + [None, b"", bytes(150_000)]
    keys = [None if index % 3 else b"key-%d" % index for index in range(len(values))]
    entry = encode_batch(7, values, 5, 1, 0, keys=keys, compression=codec, max_timestamp=T0 + 9)
    decoded = list(iter_records(entry))
    assert [r.value for r in decoded] == values
    assert [r.key for r in decoded] == keys
    assert [r.offset_delta for r in decoded] == list(range(len(values)))
    assert [r.timestamp_delta for r in decoded] == [0] * (len(values) - 1) + [9]
    (row,) = decode_segment(entry).to_pylist()
    assert row["compression"] == codec and row["crc_valid"]
    assert row["record_problem"] is None
    assert row["max_record_timestamp"] == row["max_timestamp"] == T0 + 9


@pytest.mark.parametrize("codec", [0, 1])
def test_agrees_with_kafka_python_on_headers_nulls_and_timestamps(codec):
    rng = random.Random(11)
    for _ in range(30):
        builder = DefaultRecordBatchBuilder(2, codec, False, 77, 2, 10, 1 << 24)
        expected = []
        offset = 0
        for _ in range(rng.randrange(1, 12)):
            offset += rng.randrange(1, 4)  # gaps, as after compaction
            key = rng.choice([None, b"", rng.randbytes(rng.randrange(1, 40))])
            value = rng.choice([None, b"", rng.randbytes(rng.randrange(1, 400))])
            headers = [(f"h{index}-é", rng.choice([None, rng.randbytes(5)])) for index in range(rng.randrange(0, 4))]
            timestamp = T0 + rng.randrange(-5000, 5000)
            builder.append(offset, timestamp, key, value, headers)
            expected.append((offset, timestamp, key, value, tuple(headers)))
        entry = bytes(builder.build())
        reference = DefaultRecordBatch(entry)
        assert [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in reference] == expected
        decoded = iter_records(entry)
        base_timestamp = reference.first_timestamp
        assert [
            (reference.base_offset + r.offset_delta, base_timestamp + r.timestamp_delta, r.key, r.value, r.headers)
            for r in decoded
        ] == expected
        (row,) = decode_segment(entry).to_pylist()
        assert row["record_problem"] is None
        assert row["max_record_timestamp"] == max(item[1] for item in expected) == reference.max_timestamp


def test_xxh32_known_values_and_lz4_descriptor_checksum():
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F
    frame = bytes(cramjam.lz4.compress(b"x" * 100))  # another implementation's frame descriptor checksum
    assert frame[6] == (xxh32(frame[4:6]) >> 8) & 0xFF


def test_lz4_frames_are_read_like_kafka():
    values = [b"alpha" * 30, b"beta" * 40]
    section = encode_batch(0, values, compression=3)[61:]
    # Block checksums are verified: rebuild the frame with them switched on.
    flags = 0x70
    frame = bytearray(section[:4]) + bytes([flags, 0x40, (xxh32(bytes([flags, 0x40])) >> 8) & 0xFF])
    position = 7
    while (word := struct.unpack_from("<I", section, position)[0]) != 0:
        block = section[position + 4 : position + 4 + (word & 0x7FFFFFFF)]
        frame += section[position : position + 4] + block + struct.pack("<I", xxh32(block))
        position += 4 + len(block)
    frame += struct.pack("<I", 0) + b"trailing bytes after the end mark are never read"
    assert [r.value for r in iter_records(batch(bytes(frame), 2, codec=3))] == values
    corrupt = bytearray(frame)
    corrupt[-len(b"trailing bytes after the end mark are never read") - 5] ^= 0xFF  # last block checksum
    assert "fails its checksum" in problem_of(batch(bytes(corrupt), 2, codec=3))
    # Linked blocks (what lz4's own frame writer produces) are refused, as Lz4BlockInputStream refuses them.
    linked = bytes(cramjam.lz4.compress(section))
    assert "not supported" in problem_of(batch(linked, 2, codec=3))
    wrong_checksum = bytearray(section)
    wrong_checksum[6] ^= 0x01
    assert "descriptor checksum" in problem_of(batch(bytes(wrong_checksum), 2, codec=3))


def test_snappy_accepts_raw_blocks_and_concatenated_xerial_streams():
    body = record(0, value=b"one") + record(1, value=b"two" * 50)
    raw = bytes(cramjam.snappy.compress_raw(body))
    assert [r.value for r in iter_records(batch(raw, 2, codec=2))] == [b"one", b"two" * 50]
    first, second = record(0, value=b"one"), record(1, value=b"two")
    stream = compress_records(first, 2) + compress_records(second, 2) + b"\x00\x01"
    assert [r.value for r in iter_records(batch(stream, 2, codec=2))] == [b"one", b"two"]
    overrun = compress_records(body, 2)[:-3]
    assert "declares" in problem_of(batch(overrun, 2, codec=2))
    assert "empty" in problem_of(batch(b"", 2, codec=2))


def test_zstd_reads_several_frames_skippable_frames_and_streamed_frames():
    first, second = record(0, value=b"one"), record(1, value=b"two" * 1000)
    streamed = cramjam.zstd.Compressor()
    streamed.compress(second)
    skippable = struct.pack("<II", 0x184D2A53, 3) + b"abc"
    section = bytes(cramjam.zstd.compress(first)) + skippable + bytes(streamed.finish())
    assert [r.value for r in iter_records(batch(section, 2, codec=4))] == [b"one", b"two" * 1000]
    assert "unknown" in problem_of(batch(section + b"\x00" * 8, 2, codec=4))


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_truncated_compressed_records_are_a_record_problem(codec):
    section = encode_batch(0, [b"value-%d" % index for index in range(50)], compression=codec)[61:]
    for cut in (1, len(section) // 2, len(section) - 1):
        entry = batch(section[:cut], 50, codec=codec)
        problem = problem_of(entry)
        assert problem is not None, cut
        error = rejected(entry)
        assert error.reason == problem and error.position >= 61


def test_structure_problems_inside_compressed_records_name_the_decompressed_position():
    body = record(0) + record(0)
    entry = batch(gzip_of(body), 2, codec=1)
    error = rejected(entry)
    assert error.position == 61
    assert error.reason == problem_of(entry)
    assert error.reason == (
        f"record 1: offset delta 0 at byte {len(record(0)) + 3} of the gzip-decompressed records"
        " is not above the previous record's 0"
    )


def gzip_of(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=31)
    return compressor.compress(data) + compressor.flush()


def test_gzip_members_are_concatenated_and_trailing_garbage_is_ignored_like_gzipinputstream():
    first, second = record(0, value=b"one"), record(1, value=b"two")
    entry = batch(gzip_of(first) + gzip_of(second) + b"not a gzip member", 2, codec=1)
    assert [r.value for r in iter_records(entry)] == [b"one", b"two"]
    corrupt = bytearray(gzip_of(first + second))
    corrupt[-8] ^= 0xFF  # the CRC-32 of the member
    assert "do not decompress" in problem_of(batch(bytes(corrupt), 2, codec=1))


# --- decompression bombs --------------------------------------------------------------------------------


def zstd_rle_bomb(gibibytes: int) -> bytes:
    """A zstd frame of run-length blocks that inflates 32 KiB to `gibibytes` GiB."""
    block_header = (1 << 1 | (128 * 1024) << 3).to_bytes(3, "little")  # RLE, 128 KiB, not last
    last_header = (1 | 1 << 1 | (128 * 1024) << 3).to_bytes(3, "little")
    blocks = gibibytes * 8192
    return struct.pack("<IBB", 0xFD2FB528, 0x00, 0x38) + (block_header + b"\x00") * (blocks - 1) + last_header + b"\0"


def bomb_sections() -> dict[int, bytes]:
    deflate = zlib.compressobj(9, wbits=31)
    gzip_bomb = b"".join(deflate.compress(bytes(1 << 20)) for _ in range(64)) + deflate.flush()
    lz4_block = bytes(cramjam.lz4.compress_block(bytes(64 * 1024), store_size=False))
    lz4_bomb = compress_records(b"", 3)[:-4] + (struct.pack("<I", len(lz4_block)) + lz4_block) * 1024
    snappy_bomb = b"\x80\x80\x80\x80\x08" + b"\x00" * 64  # a raw block whose length preamble says 2^31 bytes
    return {1: gzip_bomb, 2: snappy_bomb, 3: lz4_bomb + struct.pack("<I", 0), 4: zstd_rle_bomb(1)}


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_decompression_bombs_become_record_problems_in_bounded_memory(codec, monkeypatch):
    limit = 1 << 20
    entry = batch(bomb_sections()[codec], 1, codec=codec)
    tracemalloc.start()
    try:
        error = rejected(entry, max_records_bytes=limit)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "more than 1048576 bytes" in error.reason or "within 1048576 bytes" in error.reason
    assert peak < 8 * limit
    monkeypatch.setattr(columns, "MAX_RECORDS_BYTES", limit)  # the bound record_columns decompresses within
    assert problem_of(entry) == error.reason


# --- every FMT-006 condition ----------------------------------------------------------------------------

STRUCTURE_CASES = {
    "length varint too long": (b"\x80\x80\x80\x80\x80\x01", 1, "record 0: the length varint at byte 61"),
    "timestamp varlong too long": (
        record(body=b"\x00" + b"\x80" * 10 + b"\x01"),
        1,
        "record 0: the timestamp delta varint at byte 63 is longer than 10 bytes",
    ),
    "negative record length": (varint(-5) + b"\x00" * 5, 1, "record 0 at byte 61 declares a negative length -5"),
    "record past the records": (record(length=40), 1, "record 0 at byte 61 declares 40 bytes but only 7"),
    "records end in a length": (record() + b"\x80", 2, "record 1: the records end inside its length varint"),
    "empty record": (record(body=b""), 1, "record 0: the attributes at byte 62 runs past the end of the record"),
    "key past the record": (
        record(body=b"\x00\x00\x00" + varint(10) + b"ab"),
        1,
        "record 0: the key of 10 bytes at byte 66 runs past the end of the record (2 left)",
    ),
    "key length below -1": (
        record(body=b"\x00\x00\x00" + varint(-2) + varint(-1) + varint(0)),
        1,
        "record 0: key length -2 at byte 65 is below -1",
    ),
    "value length below -1": (
        record(body=b"\x00\x00\x00" + varint(-1) + varint(-3) + varint(0)),
        1,
        "record 0: value length -3 at byte 66 is below -1",
    ),
    "negative header count": (
        record(body=b"\x00\x00\x00" + varint(-1) + varint(-1) + varint(-1)),
        1,
        "record 0: header count -1 at byte 67 is negative",
    ),
    "header count past the record": (
        record(body=b"\x00\x00\x00" + varint(-1) + varint(-1) + varint(9) + b"\x00\x00"),
        1,
        "record 0: header count 9 at byte 67 exceeds the 2 bytes left in the record",
    ),
    "negative header key length": (
        record(body=b"\x00\x00\x00" + varint(-1) + varint(-1) + varint(1) + varint(-1) + varint(-1)),
        1,
        "record 0: header key length -1 at byte 68 is negative",
    ),
    "header value length below -1": (
        record(body=b"\x00\x00\x00" + varint(-1) + varint(-1) + varint(1) + varint(1) + b"h" + varint(-4)),
        1,
        "record 0: header value length -4 at byte 70 is below -1",
    ),
    "fields end before the length": (
        record(body=b"\x00\x00\x00" + varint(-1) + varint(-1) + varint(0) + b"\xff"),
        1,
        "record 0 at byte 61 declares 7 bytes but its fields end after 6",
    ),
    "field varint cut by the record end": (
        record(body=b"\x00\x00\x00" + varint(-1) + b"\x80"),
        1,
        "record 0: the value length at byte 66 runs past the end of the record",
    ),
    "offset delta repeated": (record(0) + record(0), 2, "record 1: offset delta 0 at byte 72 is not above"),
    "offset delta negative": (record(-1), 1, "record 0: offset delta -1 at byte 64 is negative"),
    "offset delta above lastOffsetDelta": (
        record(0) + record(2),
        2,
        "record 1: offset delta 2 at byte 72 is above the batch's lastOffsetDelta 1",
    ),
    "bytes after the records": (record(0) + b"\x00\x00", 1, "2 bytes left after the 1 records, from byte 69"),
    "bytes in an empty batch": (b"\x00", 0, "1 bytes left after the 0 records, from byte 61"),
    "fewer records than counted": (record(0) + record(1), 3, "the records end at byte 77 after 2 of 3 records"),
}


@pytest.mark.parametrize("case", STRUCTURE_CASES)
def test_record_structure_problems(case):
    section, count, expected = STRUCTURE_CASES[case]
    entry = batch(section, count)
    error = rejected(entry)
    assert error.reason.startswith(expected), error.reason
    assert f"byte {error.position}" in error.reason
    (row,) = decode_segment(entry).to_pylist()
    assert row["record_problem"] == error.reason
    assert row["max_record_timestamp"] is None


def test_near_misses_of_the_structure_checks_parse():
    compacted = record(0, key=b"k") + record(3, key=b"k") + record(7, key=b"k")  # gaps up to lastOffsetDelta
    entry = batch(compacted, 3, last_offset_delta=7)
    assert [r.offset_delta for r in iter_records(entry)] == [0, 3, 7]
    assert problem_of(entry) is None
    five_byte_varint = record(body=b"\x00\x00\x00" + b"\x81\x80\x80\x80\x00" + varint(-1) + varint(0))
    assert [r.key for r in iter_records(batch(five_byte_varint, 1))] == [None]  # -1 in five bytes
    assert list(iter_records(batch(b"", 0))) == []


def test_entries_iter_records_cannot_read():
    marker = encode_marker(0, 1, 0, True, 0, T0)
    assert rejected(marker[:60]).position == 0
    assert rejected(marker + b"\x00").position == 8
    legacy = bytearray(marker)
    legacy[16] = 1
    assert rejected(bytes(legacy)).position == 16
    assert rejected(batch(b"", -1)).reason == "record count -1 is negative"
    assert "codec 5" in rejected(batch(b"", 0, codec=5)).reason


def test_unchecked_batches_and_verification_off_leave_the_columns_null():
    negative_count, unknown_codec = batch(b"", -1), batch(record(), 1, codec=6)
    rows = decode_segment(negative_count + unknown_codec).to_pylist()
    assert [(r["record_problem"], r["max_record_timestamp"]) for r in rows] == [(None, None)] * 2
    broken = batch(record(0) + record(0), 2)
    (row,) = decode_segment(broken, verify_records=False).to_pylist()
    assert row["record_problem"] is None and row["max_record_timestamp"] is None
    assert decode_window(broken, verify_records=False).table.column("crc_valid").to_pylist() == [True]


def test_max_record_timestamp_of_create_and_log_append_time():
    section = record(0, timestamp_delta=-40) + record(1, timestamp_delta=25) + record(2, timestamp_delta=3)
    (row,) = decode_segment(batch(section, 3, max_timestamp=T0 + 1)).to_pylist()
    assert row["max_record_timestamp"] == T0 + 25  # FMT-008 material: maxTimestamp says T0 + 1
    (row,) = decode_segment(batch(section, 3, max_timestamp=T0 + 99, log_append_time=True)).to_pylist()
    assert row["max_record_timestamp"] == T0 + 99  # Kafka gives every record the append time
    (row,) = decode_segment(batch(b"", 0)).to_pylist()
    assert row["record_problem"] is None and row["max_record_timestamp"] is None


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_corrupted_batches_never_crash_and_both_paths_agree(codec):
    rng = random.Random(100 + codec)
    clean = encode_batch(0, [rng.randbytes(rng.randrange(0, 30)) for _ in range(12)], compression=codec)
    for _ in range(150):
        section = bytearray(clean[61:])
        for _ in range(rng.randrange(1, 4)):
            section[rng.randrange(len(section))] = rng.randrange(256)
        entry = batch(bytes(section), 12, codec=codec)
        problem = problem_of(entry)
        try:
            decoded = list(iter_records(entry))
        except RecordError as exc:
            assert exc.reason == problem
        else:
            assert problem is None and len(decoded) == 12
            assert all(isinstance(r, Record) for r in decoded)


# --- real data ------------------------------------------------------------------------------------------


def client_vectors(realdata):
    for path in sorted((realdata / "client-vectors").rglob("*.json")):
        vector = json.loads(path.read_text())
        if "expected" in vector:
            yield vector


def hex_or_none(data: bytes | None) -> str | None:
    return None if data is None else data.hex()


@pytest.mark.realdata
def test_client_vectors_decode_to_their_expected_records(realdata):
    vectors = list(client_vectors(realdata))
    assert len(vectors) == 70
    compared = problems = 0
    timestamp_mismatches = set()
    for vector in vectors:
        entry = bytes.fromhex(vector["hex"])
        expected = vector["expected"]
        (row,) = decode_segment(entry).to_pylist()
        if row["record_problem"] is not None:
            problems += 1
            assert "zstd" in vector["id"] and expected["compression"] == 0, vector["id"]
            assert "offset delta" in row["record_problem"]
            with pytest.raises(RecordError):
                iter_records(entry)
            continue
        decoded = list(iter_records(entry))
        assert len(decoded) == expected["recordCount"], vector["id"]
        create_time = expected["timestampType"] == 0 and expected["recordCount"] > 0
        if create_time and row["max_record_timestamp"] != expected["maxTimestamp"]:
            timestamp_mismatches.add((vector["source"]["repo"], expected["maxTimestamp"]))
        if not vector.get("expected_records"):
            continue
        actual = [
            {
                "offset": expected["baseOffset"] + r.offset_delta,
                "timestamp": expected["firstTimestamp"] + r.timestamp_delta,
                "keyHex": hex_or_none(r.key),
                "valueHex": hex_or_none(r.value),
                "headers": [{"key": name, "valueHex": hex_or_none(value)} for name, value in r.headers],
            }
            for r in decoded
        ]
        wanted = [{name: r[name] for name in actual[0]} for r in vector["expected_records"]]
        assert actual == wanted, vector["id"]
        compared += 1
    assert problems == 1
    assert compared >= 50
    # Only sarama's hand-written vectors leave maxTimestamp at 0 while their records carry timestamps.
    assert timestamp_mismatches == {("IBM/sarama", 0)}


@pytest.mark.realdata
def test_kafkajs_zstd_fixture_decodes_once_its_attributes_name_zstd(realdata):
    """The fixture holds a zstd frame but its attributes say uncompressed: Kafka's reader rejects it (FMT-006)."""
    vector = next(v for v in client_vectors(realdata) if "zstd" in v["id"])
    entry = bytearray(bytes.fromhex(vector["hex"]))
    assert entry[61:65] == b"\x28\xb5\x2f\xfd"
    entry[22] = 4
    struct.pack_into(">I", entry, 17, crc32c(bytes(entry[21:])))
    (decoded,) = iter_records(bytes(entry))
    assert decoded.key == b"lorem" and decoded.value.startswith(b"Lorem ipsum")
    assert problem_of(bytes(entry)) is None


def fetch_record_set(fetch_response: bytes) -> bytes:
    """The partition's record set: the last field of these single-partition Fetch responses."""
    for position in range(5, len(fetch_response)):
        if struct.unpack_from(">i", fetch_response, position - 4)[0] == len(fetch_response) - position:
            return fetch_response[position:]
    raise AssertionError("no record set found")


@pytest.mark.realdata
def test_mixed_legacy_and_v2_fetch_fixtures_agree_with_kafka_python(realdata):
    fixtures = sorted((realdata / "client-vectors" / "kafka-go" / "fixtures-raw").glob("*.hex"))
    assert len(fixtures) == 11
    v2_batches = legacy = 0
    for fixture in fixtures:
        record_set = fetch_record_set(bytes.fromhex(fixture.read_text().strip()))
        reference = MemoryRecords(record_set)
        for row in decode_segment(record_set).to_pylist():
            kafka_batch = reference.next_batch()
            if kafka_batch.magic < 2:
                legacy += 1
                assert row["record_problem"] is None and row["max_record_timestamp"] is None
                continue
            v2_batches += 1
            expected = [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in kafka_batch]
            entry = record_set[row["position"] : row["position"] + row["size_bytes"]]
            assert [
                (
                    row["base_offset"] + r.offset_delta,
                    row["base_timestamp"] + r.timestamp_delta,
                    r.key,
                    r.value,
                    r.headers,
                )
                for r in iter_records(entry)
            ] == expected
            assert row["record_problem"] is None
            assert row["max_record_timestamp"] == max(item[1] for item in expected)
    assert v2_batches >= 15 and legacy >= 20


def plain_rendering(key: bytes | None, value: bytes | None) -> str:
    """What DumpLogSegments prints with --print-data-log and its default StringDecoder."""
    key_part = "" if key is None else f"key: {key.decode(errors='replace')} "
    return key_part + ("" if value is None else f"payload: {value.decode(errors='replace')}")


@pytest.mark.realdata
def test_reconstructed_batches_decode_to_the_records_the_broker_printed(realdata):
    vectors = [json.loads(p.read_text()) for p in sorted((realdata / "reconstructed-from-dump" / "vectors").glob("*"))]
    printed_compared = records_compared = 0
    for vector in vectors:
        entry = bytes.fromhex(vector["hex"])
        printed = vector["expected_from_broker_dump"]
        (row,) = decode_segment(entry).to_pylist()
        assert row["record_problem"] is None, vector["id"]
        assert row["max_record_timestamp"] == printed["maxTimestamp"], vector["id"]
        for r, expected in zip(iter_records(entry), vector["expected_records_from_broker_dump"], strict=True):
            assert printed["baseOffset"] + r.offset_delta == expected["offset"]
            assert row["base_timestamp"] + r.timestamp_delta == expected["timestamp"]
            assert (len(r.key) if r.key is not None else -1) == expected["keySize"]
            assert (len(r.value) if r.value is not None else -1) == expected["valueSize"]
            sequence = -1 if printed["baseSequence"] < 0 else printed["baseSequence"] + r.offset_delta
            assert sequence == expected["sequence"]
            if "endTxnMarker" in expected:
                control_type = struct.unpack(">hh", r.key)[1]
                assert ("ABORT", "COMMIT")[control_type] == expected["endTxnMarker"]
                assert struct.unpack(">hi", r.value)[1] == expected["coordinatorEpoch"]
            elif len(expected.get("printed", "")) == len(plain_rendering(r.key, r.value)):
                assert plain_rendering(r.key, r.value) == expected["printed"]
                printed_compared += 1
            records_compared += 1
    assert len(vectors) == 55
    assert records_compared == 105 and printed_compared >= 60


@pytest.mark.realdata
def test_broker_written_segments_and_reconstructed_segments_parse_completely(realdata):
    files = sorted((realdata / "broker-segments").rglob("*.log")) + sorted(
        (realdata / "broker-segments").rglob("*.checkpoint")
    )
    files += sorted((realdata / "reconstructed-from-dump" / "segments").glob("*.log"))
    batches = records_walked = 0
    for path in files:
        data = path.read_bytes()
        for row in decode_segment(data).to_pylist():
            assert row["record_problem"] is None, (path.name, row["position"])
            assert row["timestamp_type"] == 0
            if row["record_count"]:
                assert row["max_record_timestamp"] == row["max_timestamp"], (path.name, row["position"])
            entry = data[row["position"] : row["position"] + row["size_bytes"]]
            records_walked += sum(1 for _ in iter_records(entry))
            batches += 1
    assert batches > 1000 and records_walked >= batches


def dump_batch_line(base_offset: int, count: int, position: int, timestamp: int) -> str:
    return (
        f"baseOffset: {base_offset} lastOffset: {base_offset + count - 1} count: {count} baseSequence: -1 "
        "lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false "
        f"isControl: false deleteHorizonMs: OptionalLong.empty position: {position} CreateTime: {timestamp} "
        "size: 80 magic: 2 compresscodec: none crc: 1 isvalid: true"
    )


def dump_record_line(offset: int, timestamp: int) -> str:
    return f"| offset: {offset} CreateTime: {timestamp} keySize: -1 valueSize: 1 sequence: -1 headerKeys: []"


def test_dump_text_gives_the_record_timestamps_only_when_it_prints_every_record():
    text = "\n".join(
        [
            "Dumping /tmp/kafka-logs/t-0/00000000000000000000.log",
            "Log starting offset: 0",
            dump_batch_line(0, 2, 0, 1000),
            dump_record_line(0, 990),
            dump_record_line(1, 1005),
            dump_batch_line(2, 2, 80, 2000),
            dump_record_line(2, 2000),
            dump_batch_line(4, 1, 160, 3000),
        ]
    )
    rows = parse_dump(text, "dump.txt").batches
    assert [row["max_record_timestamp"] for row in rows] == [1005, None, None]
    assert [row["max_timestamp"] for row in rows] == [1000, 2000, 3000]


def test_the_ingest_setting_reaches_the_segment_decoder(tmp_path):
    assert load_settings().ingest.verify_records is True
    path = tmp_path / "t-0" / segment_file_name(0)
    path.parent.mkdir()
    path.write_bytes(encode_batch(0, 2) + batch(record(0) + record(0), 2))
    segment = SegmentFile(str(path), "t", 0, None, 0, path.stat().st_size)
    verified, unverified = (
        pa.Table.from_batches(list(decode_file(segment, verify))).column("record_problem").to_pylist()
        for verify in (True, False)
    )
    assert verified[0] is None and verified[1].startswith("record 1: offset delta 0")
    assert unverified == [None, None]
