"""Segment decoding and batch encoding: real broker bytes, client-library vectors, kafka-python cross-checks."""

from __future__ import annotations

import io
import json
import struct
import time

import pyarrow as pa
import pytest
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.sources.kafka_format.encoding import encode_batch, encode_marker, encode_txnindex_entry, segment_file_name
from pipeline.sources.kafka_format.layout import DECODED_SCHEMA
from pipeline.sources.kafka_format.v2_columns import last_sequence
from pipeline.sources.kafka_format.windows import decode_segment, decode_window, iter_decoded
from schemas.batches import (
    BATCHES,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    STATUS_BAD_MAGIC,
    STATUS_LEGACY,
    STATUS_OK,
    STATUS_TOO_SMALL,
    STATUS_TRUNCATED,
)

# JSON field names of the expected-value files -> `batches` columns
FIELD_TO_COLUMN = {
    "position": "position",
    "baseOffset": "base_offset",
    "lastOffset": "last_offset",
    "batchLength": "batch_length",
    "partitionLeaderEpoch": "partition_leader_epoch",
    "magic": "magic",
    "crc": "crc",
    "crcValid": "crc_valid",
    "attributes": "attributes",
    "compression": "compression",
    "timestampType": "timestamp_type",
    "isTransactional": "is_transactional",
    "isControl": "is_control",
    "firstTimestamp": "base_timestamp",
    "maxTimestamp": "max_timestamp",
    "producerId": "producer_id",
    "producerEpoch": "producer_epoch",
    "baseSequence": "base_sequence",
    "lastSequence": "last_sequence",
    "recordCount": "record_count",
    "lastOffsetDelta": "last_offset_delta",
    "count": "record_count",
    "size": "size_bytes",
}
DUMP_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
DUMP_TIMESTAMP_TYPES = {"CreateTime": 0, "LogAppendTime": 1}
MARKER_TYPES = {"ABORT": CONTROL_ABORT, "COMMIT": CONTROL_COMMIT}


def mismatches(row: dict, expected: dict, label: str) -> list[str]:
    return [
        f"{label}: {field}={value!r} but {FIELD_TO_COLUMN[field]}={row[FIELD_TO_COLUMN[field]]!r}"
        for field, value in expected.items()
        if field in FIELD_TO_COLUMN and row[FIELD_TO_COLUMN[field]] != value
    ]


def dump_expectations(vector: dict) -> dict:
    """A reconstructed vector's broker-printed fields, in the names of FIELD_TO_COLUMN (control type aside)."""
    expected = dict(vector["expected_from_broker_dump"])
    expected["compression"] = DUMP_CODECS[expected.pop("compresscodec")]
    expected["timestampType"] = DUMP_TIMESTAMP_TYPES[expected["timestampType"]]
    expected["crcValid"] = True
    return expected


def control_expectations(vector: dict) -> tuple[int | None, int | None]:
    markers = [r for r in vector["expected_records_from_broker_dump"] if "endTxnMarker" in r]
    if not markers:
        return None, None
    return MARKER_TYPES[markers[0]["endTxnMarker"]], markers[0]["coordinatorEpoch"]


# --- real data ------------------------------------------------------------------------------------------


@pytest.mark.realdata
def test_broker_segments_match_expected_fields(realdata):
    expected_files = sorted((realdata / "broker-segments" / "_expected").glob("*.log.json"))
    expected_files += sorted((realdata / "broker-segments" / "_expected").glob("*.checkpoint.json"))
    assert len(expected_files) >= 10
    problems = []
    batches_checked = 0
    for expected_file in expected_files:
        expected = json.loads(expected_file.read_text())
        data = (realdata / "broker-segments" / expected["file"]).read_bytes()
        rows = decode_segment(data).to_pylist()
        assert len(rows) == len(expected["batches"]), expected["file"]
        assert sum(row["size_bytes"] for row in rows) == expected["size"] == len(data)
        for row, batch in zip(rows, expected["batches"], strict=True):
            label = f"{expected['file']}@{batch['position']}"
            problems += mismatches(row, batch, label)
            expected_type = batch["control"]["typeCode"] if "control" in batch else None
            if row["control_type"] != expected_type or row["entry_status"] != STATUS_OK:
                problems.append(f"{label}: control_type {row['control_type']} status {row['entry_status']}")
            batches_checked += 1
    assert not problems, "\n".join(problems)
    assert batches_checked > 1000


@pytest.mark.realdata
def test_reconstructed_vectors_match_broker_dump(realdata):
    base = realdata / "reconstructed-from-dump"
    vectors = [json.loads(path.read_text()) for path in sorted((base / "vectors").glob("*.json"))]
    assert len(vectors) == 55
    problems = []
    for vector in vectors:
        rows = decode_segment(bytes.fromhex(vector["hex"])).to_pylist()
        assert len(rows) == 1, vector["id"]
        expected = {k: v for k, v in dump_expectations(vector).items() if k != "position"}
        problems += mismatches(rows[0], expected, vector["id"])
        control_type, coordinator_epoch = control_expectations(vector)
        if (rows[0]["control_type"], rows[0]["coordinator_epoch"]) != (control_type, coordinator_epoch):
            problems.append(f"{vector['id']}: control {rows[0]['control_type']}/{rows[0]['coordinator_epoch']}")
    assert not problems, "\n".join(problems)


@pytest.mark.realdata
def test_reconstructed_segments_place_every_vector_at_its_position(realdata):
    base = realdata / "reconstructed-from-dump"
    containers = {}
    for entry in json.loads((base / "_summary.json").read_text()):
        if entry["kind"] in ("segment", "partial"):
            data = (realdata / entry["out"]).read_bytes()
            table = decode_window(data, file_position=entry["first_position"]).table
            assert table.num_rows == entry["batches_rebuilt"], entry["out"]
            containers[entry["sample"]] = {row["position"]: row for row in table.to_pylist()}
    assert len(containers) == 19 + 4
    problems = []
    placed = 0
    for path in sorted((base / "vectors").glob("*.json")):
        vector = json.loads(path.read_text())
        sample = vector["source"]["sample_file"].rsplit("/", 1)[-1]
        if sample not in containers:
            continue
        expected = dump_expectations(vector)
        row = containers[sample].get(expected["position"])
        if row is None:
            problems.append(f"{vector['id']}: no entry at position {expected['position']}")
            continue
        problems += mismatches(row, expected, vector["id"])
        if (row["control_type"], row["coordinator_epoch"]) != control_expectations(vector):
            problems.append(f"{vector['id']}: control {row['control_type']}/{row['coordinator_epoch']}")
        placed += 1
    assert not problems, "\n".join(problems)
    assert placed >= 40


@pytest.mark.realdata
def test_encode_marker_reproduces_broker_written_markers(realdata):
    reproduced = 0
    for path in sorted((realdata / "reconstructed-from-dump" / "vectors").glob("*.json")):
        vector = json.loads(path.read_text())
        control_type, coordinator_epoch = control_expectations(vector)
        if control_type is None:
            continue
        printed = vector["expected_from_broker_dump"]
        marker = encode_marker(
            printed["baseOffset"],
            printed["producerId"],
            printed["producerEpoch"],
            control_type == CONTROL_COMMIT,
            coordinator_epoch,
            printed["maxTimestamp"],
            printed["partitionLeaderEpoch"],
        )
        assert marker.hex() == vector["hex"], vector["id"]
        reproduced += 1
    assert reproduced >= 15


@pytest.mark.realdata
def test_client_vectors_match_expected_fields(realdata):
    paths = sorted((realdata / "client-vectors").rglob("*.json"))
    problems = []
    checked = 0
    for path in paths:
        vector = json.loads(path.read_text())
        if "expected" not in vector:
            continue
        rows = decode_segment(bytes.fromhex(vector["hex"])).to_pylist()
        assert len(rows) == 1, vector["id"]
        problems += mismatches(rows[0], vector["expected"], vector["id"])
        if rows[0]["entry_status"] != STATUS_OK:
            problems.append(f"{vector['id']}: status {rows[0]['entry_status']}")
        checked += 1
    assert not problems, "\n".join(problems)
    assert checked == 70


@pytest.mark.realdata
def test_kafka_python_negative_vector_has_a_bad_crc(realdata):
    path = next((realdata / "client-vectors" / "kafka-python").glob("*NEGATIVE.json"))
    vector = json.loads(path.read_text())
    (row,) = decode_segment(bytes.fromhex(vector["hex"])).to_pylist()
    assert row["crc_valid"] is False
    assert row["crc"] == vector["decoded"]["crcStored"]
    assert row["is_control"] is True and row["is_transactional"] is False
    assert row["producer_id"] == -1
    assert row["control_type"] == CONTROL_ABORT
    assert "marker value version" in row["entry_note"]


@pytest.mark.realdata
def test_sarama_control_key_value_vectors(realdata):
    path = realdata / "client-vectors" / "sarama" / "control_record_test.go__key_value_vectors.json"
    for vector in json.loads(path.read_text())["vectors"]:
        batch = encode_batch(
            0,
            [bytes.fromhex(vector["valueHex"])],
            7,
            0,
            -1,
            True,
            is_control=True,
            keys=[bytes.fromhex(vector["keyHex"])],
        )
        (row,) = decode_segment(batch).to_pylist()
        expected_type = vector["expected"]["type"]
        if expected_type in MARKER_TYPES:
            assert row["control_type"] == MARKER_TYPES[expected_type]
            assert row["coordinator_epoch"] == vector["expected"]["coordinatorEpoch"]
            assert row["entry_note"] is None
        else:
            assert row["control_type"] == 128
            assert row["coordinator_epoch"] is None


def _record_set(fetch_response: bytes) -> bytes:
    """The partition's record set: the last field of these single-partition Fetch responses."""
    for position in range(5, len(fetch_response)):
        if struct.unpack_from(">i", fetch_response, position - 4)[0] == len(fetch_response) - position:
            return fetch_response[position:]
    raise AssertionError("no record set found")


@pytest.mark.realdata
def test_mixed_legacy_and_compressed_fetch_fixtures_agree_with_kafka_python(realdata):
    fixtures = sorted((realdata / "client-vectors" / "kafka-go" / "fixtures-raw").glob("*.hex"))
    assert len(fixtures) == 11
    legacy_seen = 0
    for fixture in fixtures:
        records = _record_set(bytes.fromhex(fixture.read_text().strip()))
        rows = decode_segment(records).to_pylist()
        reference = MemoryRecords(records)
        for row in rows:
            batch = reference.next_batch()
            assert batch is not None, fixture.name
            assert row["magic"] == batch.magic
            assert row["size_bytes"] == batch.size_in_bytes
            assert row["compression"] == batch.compression_type
            assert row["crc_valid"] is batch.validate_crc() is True
            if batch.magic < 2:
                legacy_seen += 1
                assert row["entry_status"] == STATUS_LEGACY
                assert row["last_offset"] == batch.base_offset  # the wrapper offset is the last inner offset
                assert row["producer_id"] is None and row["base_sequence"] is None
                assert row["base_offset"] == (batch.base_offset if batch.compression_type == 0 else None)
            else:
                assert row["entry_status"] == STATUS_OK
                assert row["base_offset"] == batch.base_offset
        assert reference.next_batch() is None, fixture.name
    assert legacy_seen >= 20


# --- encoder round trips --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base_sequence", "records", "expected_last"),
    [
        (0, 3, 2),
        (-1, 5, -1),
        (2147483647, 1, 2147483647),
        (2147483647, 2, 0),
        (2147483646, 3, 0),
        (2147483640, 10, 1),
    ],
)
def test_sequence_wraparound_agrees_with_kafka_python(base_sequence, records, expected_last):
    batch = encode_batch(100, records, 42, 1, base_sequence)
    reference = DefaultRecordBatch(batch)
    (row,) = decode_segment(batch).to_pylist()
    assert row["last_sequence"] == reference.last_sequence == expected_last
    assert last_sequence(base_sequence, records - 1) == expected_last


def test_last_sequence_is_vectorised():
    result = last_sequence(
        pa.array([0, -1, 2147483647]).to_numpy().astype("int32"), pa.array([4, 4, 1]).to_numpy().astype("int32")
    )
    assert result.tolist() == [4, -1, 0]


@pytest.mark.parametrize("compression", [0, 1])
@pytest.mark.parametrize("transactional", [False, True])
def test_encode_batch_reads_back_in_kafka_python(compression, transactional):
    values = [b"alpha", None, b"gamma" * 50]
    batch = encode_batch(
        1234,
        values,
        producer_id=77,
        producer_epoch=5,
        base_sequence=10,
        is_transactional=transactional,
        partition_leader_epoch=9,
        base_timestamp=1_700_000_000_000,
        max_timestamp=1_700_000_000_500,
        compression=compression,
    )
    reference = DefaultRecordBatch(batch)
    assert reference.validate_crc()
    assert (reference.base_offset, reference.last_offset) == (1234, 1236)
    assert (reference.producer_id, reference.producer_epoch, reference.base_sequence) == (77, 5, 10)
    assert reference.is_transactional is transactional
    assert reference.compression_type == compression
    assert reference.leader_epoch == 9
    records = list(reference)
    assert [r.value for r in records] == values
    assert [r.key for r in records] == [None, None, None]
    assert [r.offset for r in records] == [1234, 1235, 1236]
    assert [r.timestamp for r in records] == [1_700_000_000_000, 1_700_000_000_000, 1_700_000_000_500]

    (row,) = decode_segment(batch).to_pylist()
    assert row["crc_valid"] is True
    assert row["crc"] == reference.crc
    assert (row["base_offset"], row["last_offset"], row["record_count"]) == (1234, 1236, 3)
    assert (row["producer_id"], row["producer_epoch"], row["base_sequence"], row["last_sequence"]) == (77, 5, 10, 12)
    assert row["is_transactional"] is transactional and row["is_control"] is False
    assert (row["base_timestamp"], row["max_timestamp"]) == (1_700_000_000_000, 1_700_000_000_500)
    assert row["compression"] == compression and row["partition_leader_epoch"] == 9
    assert row["size_bytes"] == len(batch) == row["batch_length"] + 12


def test_default_record_count_values_and_compacted_offset_delta():
    batch = encode_batch(0, 4, last_offset_delta=9)
    reference = DefaultRecordBatch(batch)
    assert [r.value for r in reference] == [b"value-0", b"value-1", b"value-2", b"value-3"]
    (row,) = decode_segment(batch).to_pylist()
    assert (row["record_count"], row["last_offset_delta"], row["last_offset"]) == (4, 9, 9)


@pytest.mark.parametrize("commit", [True, False])
def test_encode_marker_is_the_78_byte_control_batch(commit):
    marker = encode_marker(500, 2000, 3, commit, 7, 1_767_225_600_000, partition_leader_epoch=2)
    assert len(marker) == 78
    reference = DefaultRecordBatch(marker)
    assert reference.validate_crc()
    assert reference.is_control_batch and reference.is_transactional
    assert reference.base_sequence == -1
    (control,) = list(reference)
    assert control.commit is commit and control.abort is not commit
    (row,) = decode_segment(marker).to_pylist()
    assert row["control_type"] == (CONTROL_COMMIT if commit else CONTROL_ABORT)
    assert row["coordinator_epoch"] == 7
    assert (row["producer_id"], row["producer_epoch"], row["base_offset"]) == (2000, 3, 500)
    assert row["attributes"] == 0x30 and row["entry_note"] is None


def test_encode_txnindex_entry_and_segment_names():
    entry = encode_txnindex_entry(2000, 8, 12, 13)
    assert len(entry) == 34
    assert struct.unpack(">hqqqq", entry) == (0, 2000, 8, 12, 13)
    assert segment_file_name(0) == "00000000000000000000.log"
    assert segment_file_name(40, ".txnindex") == "00000000000000000040.txnindex"
    with pytest.raises(ValueError):
        segment_file_name(-1)


def test_encoder_rejects_unsupported_compression():
    with pytest.raises(ValueError, match="compression"):
        encode_batch(0, 1, compression=5)


# --- iteration like FileLogInputStream ------------------------------------------------------------------


def statuses(data: bytes) -> list[str]:
    return decode_segment(data).column("entry_status").to_pylist()


def test_empty_segment_has_no_rows():
    table = decode_segment(b"")
    assert table.num_rows == 0 and table.schema == DECODED_SCHEMA


def test_size_below_minimum_stops_iteration():
    first = encode_batch(0, 1)
    corrupt = struct.pack(">qi", 1, 10) + b"\x02" * 5
    rows = decode_segment(first + corrupt + encode_batch(2, 1)).to_pylist()
    assert [r["entry_status"] for r in rows] == [STATUS_OK, STATUS_TOO_SMALL]
    stop = rows[1]
    assert stop["position"] == len(first)
    assert stop["batch_length"] == 10 and stop["base_offset"] == 1
    assert stop["size_bytes"] == len(corrupt) + len(encode_batch(2, 1))
    assert "below the 14-byte minimum" in stop["entry_note"]


def test_v2_batch_shorter_than_its_header_is_too_small():
    short = struct.pack(">qiib", 5, 30, 0, 2) + b"\x00" * 30
    rows = decode_segment(encode_batch(0, 1) + short).to_pylist()
    assert rows[1]["entry_status"] == STATUS_TOO_SMALL
    assert rows[1]["magic"] == 2 and "61-byte" in rows[1]["entry_note"]


@pytest.mark.parametrize("cut", [5, 16, 17, 40, 60])
def test_partial_trailing_entry_is_a_truncated_tail(cut):
    first, second = encode_batch(0, 2), encode_batch(2, 2)
    rows = decode_segment(first + second[:cut]).to_pylist()
    assert [r["entry_status"] for r in rows] == [STATUS_OK, STATUS_TRUNCATED]
    assert rows[1]["position"] == len(first)
    assert rows[1]["size_bytes"] == cut
    assert rows[1]["base_offset"] == (2 if cut >= 8 else None)


@pytest.mark.parametrize(("magic_byte", "printed"), [(7, 7), (0xFF, -1)])
def test_bad_magic_stops_iteration(magic_byte, printed):
    bad = bytearray(encode_batch(1, 1))
    bad[16] = magic_byte
    rows = decode_segment(encode_batch(0, 1) + bytes(bad) + encode_batch(2, 1)).to_pylist()
    assert [r["entry_status"] for r in rows] == [STATUS_OK, STATUS_BAD_MAGIC]
    assert rows[1]["magic"] == printed
    assert f"magic byte {printed}" in rows[1]["entry_note"]


def _legacy_message(magic: int, offset: int, compression: int = 0) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, compression, 1 << 20)
    builder.append(offset, 1_500_000_000_000, None, b"legacy-value")
    if compression:
        builder.append(offset + 1, 1_500_000_000_001, None, b"legacy-value-2")
    return bytes(builder.build())


def test_legacy_messages_are_kept_and_skipped():
    v0, v1 = _legacy_message(0, 0), _legacy_message(1, 1)
    v1_gzip = _legacy_message(1, 2, compression=1)
    v2 = encode_batch(4, 1)
    rows = decode_segment(v0 + v1 + v1_gzip + v2).to_pylist()
    assert [r["entry_status"] for r in rows] == [STATUS_LEGACY] * 3 + [STATUS_OK]
    assert [r["magic"] for r in rows] == [0, 1, 1, 2]
    assert all(r["crc_valid"] for r in rows)
    assert [r["base_offset"] for r in rows] == [0, 1, None, 4]
    assert [r["last_offset"] for r in rows][:2] == [0, 1]
    assert rows[2]["compression"] == 1 and "last inner offset" in rows[2]["entry_note"]
    assert rows[1]["base_timestamp"] == 1_500_000_000_000 and rows[0]["max_timestamp"] is None
    assert all(r["producer_id"] is None and r["is_transactional"] is False for r in rows[:3])
    assert [r["size_bytes"] for r in rows] == [len(v0), len(v1), len(v1_gzip), len(v2)]


def test_legacy_crc_is_crc32_over_magic_to_end():
    message = bytearray(_legacy_message(1, 0))
    message[-1] ^= 0x01
    (row,) = decode_segment(bytes(message)).to_pylist()
    assert row["entry_status"] == STATUS_LEGACY and row["crc_valid"] is False


def test_crc_covers_attributes_to_end_but_not_the_leader_epoch():
    batch = bytearray(encode_batch(0, 2))
    batch[-3] ^= 0x40
    assert decode_segment(bytes(batch)).column("crc_valid").to_pylist() == [False]
    batch = bytearray(encode_batch(0, 2))
    struct.pack_into(">i", batch, 12, 99)
    (row,) = decode_segment(bytes(batch)).to_pylist()
    assert row["crc_valid"] is True and row["partition_leader_epoch"] == 99


def test_wrong_crcs_are_found_among_many_batches():
    batches = [bytearray(encode_batch(offset, 1)) for offset in range(4000)]
    for offset in (700, 2500):  # larger than a shared check takes
        batches[offset] = bytearray(encode_batch(offset, [b"x" * 2000]))
    for index in (10, 700, 2000, 3900):
        batches[index][-3] ^= 0x40
    struct.pack_into(">I", batches[3000], 17, 12345)
    data = b"".join(batches)
    assert len(data) > 256 * 1024  # more than one shared check
    valid = decode_segment(data).column("crc_valid").to_pylist()
    assert [index for index, ok in enumerate(valid) if not ok] == [10, 700, 2000, 3000, 3900]


def control_row(**kwargs) -> dict:
    defaults = dict(producer_id=9, producer_epoch=0, base_sequence=-1, is_transactional=True, is_control=True)
    keys = kwargs.pop("keys")
    values = kwargs.pop("values")
    (row,) = decode_segment(encode_batch(0, values, keys=keys, **defaults, **kwargs)).to_pylist()
    return row


def test_control_record_that_cannot_be_parsed_leaves_the_type_null():
    commit_key, value = struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 4)
    compressed = control_row(keys=[commit_key], values=[value], compression=1)
    assert compressed["control_type"] is None and "compressed" in compressed["entry_note"]
    empty = control_row(keys=[], values=[])
    assert empty["control_type"] is None and "no record" in empty["entry_note"]
    short_key = control_row(keys=[b"\x00\x01"], values=[value])
    assert short_key["control_type"] is None and "key of 2 bytes" in short_key["entry_note"]
    null_key = control_row(keys=[None], values=[value])
    assert null_key["control_type"] is None and "key of -1 bytes" in null_key["entry_note"]
    negative = control_row(keys=[struct.pack(">hh", -1, 1)], values=[value])
    assert negative["control_type"] is None and "negative" in negative["entry_note"]


def test_marker_value_problems_keep_the_type():
    commit_key = struct.pack(">hh", 0, 1)
    short_value = control_row(keys=[commit_key], values=[b"\x00\x00"])
    assert short_value["control_type"] == CONTROL_COMMIT and short_value["coordinator_epoch"] is None
    assert "2 bytes" in short_value["entry_note"]
    newer = control_row(keys=[commit_key], values=[struct.pack(">hi", 3, 11)])
    assert newer["coordinator_epoch"] == 11 and "version 3 read as version 0" in newer["entry_note"]


def test_kraft_control_types_carry_no_coordinator_epoch():
    row = control_row(keys=[struct.pack(">hh", 0, 2)], values=[b"\x00\x00\x00\x00\x00\x00\x00\x00"])
    assert row["control_type"] == 2 and row["coordinator_epoch"] is None and row["entry_note"] is None


def test_control_record_overrunning_the_batch_is_reported():
    batch = bytearray(encode_marker(0, 1, 0, True, 0, 0))
    batch[61] = 0x7E  # record length 63, far past the end of the batch
    (row,) = decode_segment(bytes(batch)).to_pylist()
    assert row["control_type"] is None and "runs past the batch" in row["entry_note"]


# --- windows and streaming ------------------------------------------------------------------------------


def mixed_segment() -> bytes:
    return (
        encode_batch(0, 3, 1, 0, 0)
        + _legacy_message(1, 3)
        + encode_marker(4, 1, 0, True, 2, 0)
        + encode_batch(5, 300, 1, 0, 3)
        + encode_batch(305, 1)[:30]
    )


@pytest.mark.parametrize("window_bytes", [1, 17, 61, 100, 1000, 1 << 20])
def test_streamed_windows_decode_like_the_whole_segment(window_bytes):
    data = mixed_segment()
    whole = decode_segment(data)
    tables = list(iter_decoded(io.BytesIO(data).read, len(data), window_bytes=window_bytes))
    assert pa.concat_tables(tables).equals(whole)
    assert whole.column("entry_status").to_pylist()[-1] == STATUS_TRUNCATED


def test_file_shorter_than_announced_ends_cleanly():
    data = encode_batch(0, 1) + encode_batch(1, 1)
    tables = list(iter_decoded(io.BytesIO(data).read, len(data) + 500, window_bytes=64))
    assert pa.concat_tables(tables).column("entry_status").to_pylist() == [STATUS_OK, STATUS_OK]


def test_huge_declared_size_is_truncated_without_reading_on():
    data = struct.pack(">qi", 0, 0x7FFFFFFF) + b"\x02" * 100
    decoded = decode_window(data[:40], file_position=0, file_size=len(data))
    assert decoded.resume_at is None
    (row,) = decoded.table.to_pylist()
    assert row["entry_status"] == STATUS_TRUNCATED and row["size_bytes"] == len(data)


@pytest.mark.parametrize(
    ("size", "status"),
    [(-(2**31), STATUS_TOO_SMALL), (-1, STATUS_TOO_SMALL), (13, STATUS_TOO_SMALL), (2**31 - 1, STATUS_TRUNCATED)],
)
def test_size_field_extremes_end_the_walk_at_their_entry(size, status):
    first, broken = encode_batch(0, 1), bytearray(encode_batch(1, 1))
    struct.pack_into(">i", broken, 8, size)
    data = first + bytes(broken) + encode_batch(2, 1) * 50
    whole = decode_segment(data)
    rows = whole.to_pylist()
    assert [r["entry_status"] for r in rows] == [STATUS_OK, status]
    assert rows[1]["position"] == len(first) and rows[1]["size_bytes"] == len(data) - len(first)
    assert rows[1]["batch_length"] == size
    tables = list(iter_decoded(io.BytesIO(data).read, len(data), window_bytes=100))
    assert pa.concat_tables(tables).equals(whole)


def test_entries_smaller_than_a_v2_header_are_all_walked():
    message = _legacy_message(0, 0)
    assert len(message) < 61  # more entries than the walk first makes room for
    data = message * 2000 + encode_batch(2000, 1)
    table = decode_segment(data)
    assert table.column("entry_status").to_pylist() == [STATUS_LEGACY] * 2000 + [STATUS_OK]
    assert table.column("position").to_pylist() == [len(message) * index for index in range(2001)]


def test_window_reports_where_to_resume():
    first, second = encode_batch(0, 1), encode_batch(1, 1)
    data = first + second
    decoded = decode_window(data[: len(first) + 20], file_position=1000, file_size=1000 + len(data))
    assert decoded.resume_at == 1000 + len(first)
    assert decoded.table.column("position").to_pylist() == [1000]


def test_decoded_schema_matches_batches():
    batches = to_arrow_schema(BATCHES)
    assert [name for name in batches.names if name in DECODED_SCHEMA.names] == DECODED_SCHEMA.names
    for field in DECODED_SCHEMA:
        assert batches.field(field.name).type == field.type, field.name
        assert batches.field(field.name).nullable == field.nullable, field.name


def test_decoding_small_batches_is_fast():
    count = 100_000
    data = encode_batch(0, 1, 7, 0, 0) * count
    started = time.process_time()
    table = decode_segment(data)
    elapsed = time.process_time() - started
    assert table.num_rows == count
    assert elapsed < 10, f"{count} batches took {elapsed:.1f}s of CPU"
