"""Columnar `batches` exports: round trips through every format and the errors for malformed exports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.errors import InputError
from pipeline.sources.columnar import columnar_format, read_columnar
from schemas.batches import BATCHES, STATUS_OK, STATUS_TRUNCATED

REQUIRED = {"topic": "orders", "partition": 0, "entry_status": STATUS_OK, "segment_base_offset": 0, "position": 0}


def batch_row(**values) -> dict:
    row = dict.fromkeys(BATCHES.fieldNames())
    row.update(REQUIRED, source_file="/data/orders-0/00000000000000000000.log", source_format="segments")
    row.update(values)
    return row


ROWS = [
    batch_row(
        producer_id=4005,
        base_offset=0,
        last_offset=4,
        producer_epoch=16,
        base_sequence=2147483646,
        last_sequence=3,
        is_transactional=True,
        is_control=False,
        record_count=5,
        base_timestamp=1596728571524,
        max_timestamp=1596728571530,
        partition_leader_epoch=0,
        magic=2,
        attributes=0x13,
        compression=3,
        timestamp_type=0,
        has_delete_horizon=False,
        last_offset_delta=4,
        batch_length=161,
        crc=4294967295,
        crc_valid=True,
        size_bytes=173,
        broker_id=1,
    ),
    batch_row(
        producer_id=4005,
        base_offset=5,
        last_offset=5,
        is_transactional=True,
        is_control=True,
        control_type=1,
        coordinator_epoch=0,
        position=173,
    ),
    batch_row(position=251, entry_status=STATUS_TRUNCATED, size_bytes=17, entry_note='17 bytes, then "EOF"'),
]


def sorted_rows(frame) -> list[dict]:
    return sorted((row.asDict() for row in frame.collect()), key=lambda row: row["position"])


@pytest.mark.parametrize("file_format", ["parquet", "json", "csv"])
def test_round_trip(spark, tmp_path: Path, file_format: str):
    exported = tmp_path / f"batches.{file_format}"
    writer = spark.createDataFrame(ROWS, BATCHES).coalesce(1).write
    if file_format == "csv":
        writer = writer.option("header", True)
    writer.format(file_format).save(str(exported))  # a directory of part files, as Spark writes it

    frame = read_columnar(spark, [str(exported)])
    assert frame.schema == BATCHES
    assert sorted_rows(frame) == ROWS


def test_missing_nullable_columns_are_filled(spark, tmp_path: Path):
    export = tmp_path / "minimal.jsonl"
    export.write_text(json.dumps({**REQUIRED, "source_file": "a.log", "producer_id": 7, "extra": "ignored"}) + "\n")
    [row] = read_columnar(spark, [str(export)]).collect()
    assert (row.topic, row.producer_id, row.source_format, row.crc, row.is_control) == (
        "orders",
        7,
        "columnar",
        None,
        None,
    )


def test_missing_required_columns_are_named(tmp_path: Path, spark):
    export = tmp_path / "partial.json"
    export.write_text(json.dumps({"topic": "orders", "entry_status": "ok", "source_file": "a.log"}) + "\n")
    with pytest.raises(InputError) as error:
        read_columnar(spark, [str(export)])
    message = str(error.value)
    assert message.startswith(f"{export}: not a `batches` export")
    assert "missing required columns: partition, segment_base_offset, position" in message


def test_incompatible_types_are_named(tmp_path: Path, spark):
    export = tmp_path / "doubles.jsonl"
    export.write_text(json.dumps({**REQUIRED, "source_file": "a.log", "base_offset": 1.5, "is_control": 3}) + "\n")
    with pytest.raises(InputError, match=r"incompatible type: base_offset \(double, expected bigint\), is_control"):
        read_columnar(spark, [str(export)])


def test_null_in_a_required_column_fails_the_query(tmp_path: Path, spark):
    export = tmp_path / "null-topic.jsonl"
    export.write_text(json.dumps({**REQUIRED, "topic": None, "source_file": "a.log"}) + "\n")
    frame = read_columnar(spark, [str(export)])
    assert frame.schema == BATCHES
    with pytest.raises(Exception, match="required column topic is null"):
        frame.collect()


def test_directory_of_mixed_formats_is_refused(tmp_path: Path, spark):
    (tmp_path / "a.csv").write_text("topic\norders\n")
    (tmp_path / "b.parquet").write_bytes(b"")
    with pytest.raises(InputError, match=r"one format .* found suffixes \.csv, \.parquet"):
        read_columnar(spark, [str(tmp_path)])


def test_format_by_suffix():
    assert [columnar_format(name) for name in ("a.PARQUET", "b.jsonl", "c.json", "d.csv", "e.txt", "dir")] == [
        "parquet",
        "json",
        "json",
        "csv",
        None,
        None,
    ]
