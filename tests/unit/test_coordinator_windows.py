"""The window decode of the coordinator topics against a straightforward reference: the well-formed path of
`transaction_log_values` against the checked `decode_transaction_log` on varied and garbled records, and the rows
of whole windows against a decode entry by entry (`iter_records`, then the checked decoders).

The bytes are written by the small encoders below from the message schemas, not by the code under test.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from crc32c import crc32c

from pipeline.sources.coordinator_records import transaction_state
from pipeline.sources.coordinator_records.consumer_offsets import decode_offset_commit, offset_commit_rows
from pipeline.sources.coordinator_records.transaction_state import (
    TRANSACTION_LOG_DECODED,
    decode_transaction_log,
    transaction_log_rows,
    transaction_log_values,
)
from pipeline.sources.internal_topics import range_rows
from pipeline.sources.kafka_format.encoding import encode_batch, encode_marker, uvarint
from pipeline.sources.kafka_format.windows import decode_segment
from pipeline.sources.records.api import RecordError, iter_records, window_records
from pipeline.sources.segments import SegmentFile, split_segment
from schemas.transaction_log import TRANSACTION_STATES

# --- encoders written from the message schemas ----------------------------------------------------------


def txn_key(transactional_id: bytes, version: int = 0) -> bytes:
    return struct.pack(">hh", version, len(transactional_id)) + transactional_id


def txn_value(version: int, state: int, partitions, tags: dict[int, bytes], rng: random.Random) -> bytes:
    """TransactionLogValue v0 or v1 with random ids and times; `partitions` is None or [(topic, ids)]."""
    body = struct.pack(
        ">hqhib", version, rng.randrange(-1, 1 << 40), rng.randrange(-1, 1 << 15), rng.randrange(1 << 31), state
    )
    if version == 0:
        body += struct.pack(">i", -1 if partitions is None else len(partitions))
        for topic, ids in partitions or []:
            body += struct.pack(">h", len(topic)) + topic + struct.pack(f">i{len(ids)}i", len(ids), *ids)
    else:
        body += uvarint(0 if partitions is None else len(partitions) + 1)
        for topic, ids in partitions or []:
            body += uvarint(len(topic) + 1) + topic + uvarint(len(ids) + 1) + struct.pack(f">{len(ids)}i", *ids)
            body += b"\x00" if rng.random() < 0.9 else b"\x01\x05\x01\x07"  # an entry's tagged fields, rarely one
    body += struct.pack(">qq", rng.randrange(1 << 41), rng.randrange(-1, 1 << 41))
    if version == 1:
        body += uvarint(len(tags)) + b"".join(uvarint(tag) + uvarint(len(data)) + data for tag, data in tags.items())
    return body


def random_record(rng: random.Random) -> tuple[bytes, bytes | None]:
    """A well-formed record: every state byte, v0 and v1 values, long names (varints of two bytes), tombstones."""
    name = rng.choice([b"app", b"", "z\u00fcrich-\u2603".encode(), b"t" * rng.randrange(100, 300)])
    key = txn_key(name + str(rng.randrange(1000)).encode())
    if rng.random() < 0.1:
        return key, None
    partitions = None
    if rng.random() < 0.8:
        partitions = [
            (rng.choice([b"orders", b"", b"p" * 200]), [rng.randrange(-1, 1 << 31) for _ in range(rng.randrange(40))])
            for _ in range(rng.randrange(4))
        ]
    tags = {}
    if rng.random() < 0.7:
        known = {0: struct.pack(">q", 41), 1: struct.pack(">q", 43), 2: struct.pack(">h", 2), 3: struct.pack(">h", 6)}
        known[rng.choice([5, 9, 200])] = bytes(rng.randrange(4))  # a tag the reader skips
        tags = dict(sorted(rng.sample(sorted(known.items()), rng.randrange(len(known) + 1))))
    state = rng.randrange(-2, len(TRANSACTION_STATES) + 2)
    return key, txn_value(rng.choice([0, 1]), state, partitions, tags, rng)


def garbled(data: bytes, rng: random.Random) -> bytes:
    """`data` cut short, with bytes changed, or with bytes added."""
    kind = rng.randrange(3)
    if kind == 0 or not data:
        return data[: rng.randrange(len(data) + 1)]
    if kind == 1:
        out = bytearray(data)
        for _ in range(rng.randrange(1, 4)):
            out[rng.randrange(len(out))] = rng.choice([0x00, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        return bytes(out)
    at = rng.randrange(len(data) + 1)
    return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 6))) + data[at:]


def checked(key: bytes | None, value: bytes | None) -> tuple:
    return tuple(map(decode_transaction_log(key, value).get, TRANSACTION_LOG_DECODED))


# --- the well-formed path ---------------------------------------------------------------------------------


def test_well_formed_records_never_reach_the_checked_decoder(monkeypatch):
    rng = random.Random(11)
    records = [random_record(rng) for _ in range(3000)]
    expected = [checked(key, value) for key, value in records]
    checked_calls = []
    monkeypatch.setattr(transaction_state, "decode_transaction_log", lambda *record: checked_calls.append(record) or {})
    for (key, value), row in zip(records, expected, strict=True):
        assert transaction_log_values(key, value) == row or (key, value) in checked_calls
    # Only values with a tagged field in a partition entry are left to the checked decoder.
    assert len(checked_calls) < len(records) / 4
    assert all(row[-1] is None for row in expected)


def test_the_well_formed_path_gives_what_the_checked_decoder_gives_on_garbled_records():
    rng = random.Random(12)
    compared = 0
    for _ in range(3000):
        key, value = random_record(rng)
        cases = [(key, value), (None, value), (garbled(key, rng), value)]
        if value is not None:
            cases += [(key, garbled(value, rng)) for _ in range(8)]
            cases += [(key, value[:cut]) for cut in rng.sample(range(len(value)), min(len(value), 5))]
        for case in cases:
            assert transaction_log_values(*case) == checked(*case), case
            compared += 1
    assert compared > 30000


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (txn_key(b"a"), struct.pack(">hqhib", 1, 1, 1, 1, 1) + b"\xff\xff\xff\xff\x7f"),  # a 5-byte count
        (txn_key(b"a"), struct.pack(">hqhib", 1, 1, 1, 1, 1) + b"\x80\x80\x80\x80\x80\x01"),  # a 6-byte varint
        (txn_key(b"a"), struct.pack(">hqhibi", 0, 1, 1, 1, 1, 1) + struct.pack(">hi", 1, 0)),  # topic cut short
        (txn_key(b"a"), struct.pack(">hqhibi", 0, 1, 1, 1, 1, 1) + struct.pack(">h", 0) + struct.pack(">i", -1)),
        (txn_key(b"a"), struct.pack(">hqhibi", 0, 1, 1, 1, 1, -2)),
        (txn_key(b"a") + b"trailing", struct.pack(">hqhibiqq", 0, 1, 1, 1, 1, 0, 1, 1) + b"trailing"),
        (struct.pack(">hh", 0, -1), None),
        (struct.pack(">hh", 0, 3) + b"\xff\xfe\xfd", None),
    ],
)
def test_edge_records_give_what_the_checked_decoder_gives(key, value):
    assert transaction_log_values(key, value) == checked(key, value)


# --- whole windows ----------------------------------------------------------------------------------------

T0 = 1_767_225_600_000


def record_bytes(offset_delta: int, key: bytes | None, value: bytes | None, headers=()) -> bytes:
    def zigzag(number: int) -> bytes:
        return uvarint(((number << 1) ^ (number >> 63)) & 0xFFFFFFFFFFFFFFFF)

    def field(data: bytes | None) -> bytes:
        return zigzag(-1) if data is None else zigzag(len(data)) + data

    body = b"\x00" + zigzag(offset_delta * 3) + zigzag(offset_delta) + field(key) + field(value)
    body += zigzag(len(headers)) + b"".join(zigzag(len(name)) + name + field(data) for name, data in headers)
    return zigzag(len(body)) + body


def raw_batch(base_offset: int, section: bytes, count: int, last_offset_delta: int) -> bytes:
    """An uncompressed v2 batch around a ready-made records section, with a valid CRC."""
    header = struct.pack(
        ">qiibIhiqqqhii", base_offset, 49 + len(section), 0, 2, 0, 0, last_offset_delta, T0, T0 + 9, -1, -1, -1, count
    )
    data = bytearray(header + section)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def varied_segment(rng: random.Random) -> bytes:
    """Batches of every kind a coordinator partition can hold, good and bad, a few hundred records in all."""
    entries = []
    offset = 0
    for _ in range(200):
        records = [random_record(rng) for _ in range(rng.choice([1, 1, 1, 2, 5]))]
        if rng.random() < 0.2:  # a garbled key or value
            key, value = records[0]
            records[0] = (garbled(key, rng), value) if value is None else (key, garbled(value, rng))
        kind = rng.randrange(8)
        keys, values = [key for key, _ in records], [value for _, value in records]
        if kind == 0:  # records with headers and a gap in the offsets
            section = b"".join(
                record_bytes(2 * index, key, value, headers=[(b"h", b"x")] * index)
                for index, (key, value) in enumerate(records)
            )
            entries.append(raw_batch(offset, section, len(records), 2 * len(records) - 2))
        elif kind == 1:  # records Kafka's reader rejects: one announced too many
            section = b"".join(record_bytes(index, key, value) for index, (key, value) in enumerate(records))
            entries.append(raw_batch(offset, section, len(records) + 1, len(records)))
        elif kind == 2:
            entries.append(encode_marker(offset, 7, 0, commit=True, coordinator_epoch=1, timestamp=T0))
        else:
            entries.append(
                encode_batch(
                    offset,
                    values,
                    producer_id=rng.choice([-1, 7]),
                    is_transactional=rng.random() < 0.5,
                    partition_leader_epoch=rng.randrange(5),
                    base_timestamp=T0,
                    max_timestamp=T0 + 5,
                    compression=rng.choice([0, 0, 0, 1, 2, 3, 4]),
                    timestamp_type=rng.choice([0, 1]),
                    keys=keys,
                )
            )
        offset += len(records) + 1
    return b"".join(entries)


def reference_rows(data: bytes, segment: SegmentFile, records, decode, transactional_only: bool) -> list[dict]:
    """The rows entry by entry: `iter_records` on each kept entry, then the checked decoder on each record."""
    provenance = {
        "topic": segment.topic,
        "partition": segment.partition,
        "segment_base_offset": segment.segment_base_offset,
        "source_file": segment.location,
        "source_format": "segment",
        "broker_id": segment.broker_id,
        "cluster_id": segment.cluster_id,
    }
    rows = []
    for header in decode_segment(data, verify_records=False).to_pylist():
        if (
            header["entry_status"] != "ok"
            or header["is_control"]
            or (transactional_only and not header["is_transactional"])
        ):
            continue
        fields = dict(provenance, **{column: header[field] for column, field in records.batch_columns})
        entry = data[header["position"] : header["position"] + header["size_bytes"]]
        try:
            decoded = list(iter_records(entry))
        except RecordError as exc:
            rows.append(
                dict(fields, decode_error=f"records unreadable at byte {exc.position} of the batch: {exc.reason}")
            )
            continue
        for record in decoded:
            row = dict(fields, record_offset=header["base_offset"] + record.offset_delta)
            if records.with_timestamp:
                log_append_time = header["timestamp_type"] == 1
                row["record_timestamp"] = (
                    header["max_timestamp"] if log_append_time else header["base_timestamp"] + record.timestamp_delta
                )
            row.update(decode(record.key, record.value))
            rows.append(row)
    return [{name: row.get(name) for name in records.schema.names} for row in rows]


@pytest.mark.parametrize(
    ("records", "decode", "transactional_only"),
    [(transaction_log_rows, decode_transaction_log, False), (offset_commit_rows, decode_offset_commit, True)],
)
def test_window_rows_are_the_rows_of_an_entry_by_entry_decode(tmp_path: Path, records, decode, transactional_only):
    data = varied_segment(random.Random(13))
    path = tmp_path / "__transaction_state-4" / "00000000000000000000.log"
    path.parent.mkdir()
    path.write_bytes(data)
    segment = SegmentFile(str(path), "__transaction_state", 4, 2, 0, len(data), cluster_id="c")
    expected = reference_rows(data, segment, records, decode, transactional_only)
    assert len(expected) > 100
    assert sum(row["decode_error"] is not None for row in expected) > 10
    whole = [row for rows in range_rows(segment, records, transactional_only) for row in rows]
    assert whole == expected
    pieces = [
        row
        for piece in split_segment(segment, 4096)
        for rows in range_rows(piece, records, transactional_only)
        for row in rows
    ]
    assert pieces == expected


def test_window_records_are_what_iter_records_gives_entry_by_entry():
    data = varied_segment(random.Random(14))
    headers = decode_segment(data, verify_records=False).to_pylist()
    entries = [data[header["position"] : header["position"] + header["size_bytes"]] for header in headers]
    rng = random.Random(15)
    for entry in entries[:40]:  # entries iter_records refuses before walking their records
        bad = bytearray(entry)
        at = rng.choice([16, 21, 57, 11])  # magic 1, codec 7, a negative count, another batch length
        bad[at] = {16: 1, 21: 7, 57: 0xFF, 11: entry[11] ^ 1}[at]
        entries += [bytes(bad), entry[: rng.randrange(len(entry))]]
    rng.shuffle(entries)
    starts = [sum(map(len, entries[:index])) for index in range(len(entries))]
    ends = [start + len(entry) for start, entry in zip(starts, entries, strict=True)]
    per_entry = list(window_records(memoryview(b"".join(entries)), starts, ends))
    assert len(per_entry) == len(entries)
    for entry, records in zip(entries, per_entry, strict=True):
        try:
            expected = list(iter_records(entry))
        except RecordError as exc:
            assert isinstance(records, RecordError)
            assert (records.position, records.reason) == (exc.position, exc.reason)
        else:
            assert records == expected
