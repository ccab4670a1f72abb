"""Byte-range splitting of large segments: every split decodes exactly what one pass over the file does (over Spark's
tasks: tests/integration/test_segment_split_tasks.py)."""

from __future__ import annotations

import struct
from dataclasses import replace

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.sources.kafka_format.encoding import segment_file_name
from pipeline.sources.segments import SegmentFile, decode_file, split_segment
from schemas.batches import (
    BATCHES,
    STATUS_BAD_MAGIC,
    STATUS_OK,
    STATUS_TOO_SMALL,
    STATUS_TRUNCATED,
    STATUS_UNREADABLE,
)
from tests.large_segments import build_segment, write_partition

ARROW_BATCHES = to_arrow_schema(BATCHES)
STOPS = {STATUS_TRUNCATED, STATUS_TOO_SMALL, STATUS_BAD_MAGIC}


def break_entry(data: bytes, fraction: float, how: str) -> bytes:
    """`data` with the entry nearest to `fraction` of the way through made unreadable for the broker."""
    position = 0
    while position < fraction * len(data):
        position += 12 + struct.unpack_from(">i", data, position + 8)[0]
    broken = bytearray(data)
    if how == "too_small":
        struct.pack_into(">i", broken, position + 8, 5)
    else:
        broken[position + 16] = 9
    return bytes(broken)


def decode(segment: SegmentFile) -> pa.Table:
    return pa.Table.from_batches(list(decode_file(segment)), schema=ARROW_BATCHES)


def decode_ranges(segment: SegmentFile, split_bytes: int) -> list[pa.Table]:
    return [decode(piece) for piece in split_segment(segment, split_bytes)]


SEGMENT, INDEX = build_segment(1000, seed=7)
VARIANTS = {
    "clean": SEGMENT,
    "truncated_tail": SEGMENT[:-40],
    "too_small_inside": break_entry(SEGMENT, 0.6, "too_small"),
    "bad_magic_inside": break_entry(SEGMENT, 0.3, "bad_magic"),
}


def test_split_segment_covers_the_file_once():
    segment = SegmentFile("x/00000000000000000000.log", "orders", 0, None, 0, size=1000)
    assert split_segment(segment, 1000) == [segment]
    pieces = split_segment(segment, 300)
    assert [(piece.start, piece.end) for piece in pieces] == [(0, 300), (300, 600), (600, 900), (900, None)]
    assert {piece.location for piece in pieces} == {segment.location}
    # A segment decoded from a later byte on (the rest of a grown active segment) splits from there.
    rest = replace(segment, start=450)
    assert split_segment(rest, 1000) == [rest]
    assert [(piece.start, piece.end) for piece in split_segment(rest, 300)] == [(450, 750), (750, None)]


@pytest.mark.parametrize("with_index", [False, True], ids=["no_index", "index"])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("split_bytes", [997, 50_000])
def test_ranges_decode_like_one_pass(tmp_path, variant, split_bytes, with_index):
    data = VARIANTS[variant]
    log_file = write_partition(tmp_path, data, INDEX if with_index else None)
    segment = SegmentFile(str(log_file), "orders", 0, None, 0, size=len(data))
    whole = decode(segment)
    assert pa.concat_tables(decode_ranges(segment, split_bytes)).equals(whole)

    statuses = whole.column("entry_status").to_pylist()
    if variant == "clean":
        assert statuses == [STATUS_OK] * 1000
    else:
        assert statuses[:-1] == [STATUS_OK] * (len(statuses) - 1)
        assert statuses[-1] == {"truncated_tail": STATUS_TRUNCATED, "too_small_inside": STATUS_TOO_SMALL}.get(
            variant, STATUS_BAD_MAGIC
        )


@pytest.mark.parametrize("variant", ["truncated_tail", "too_small_inside", "bad_magic_inside"])
def test_the_stop_row_comes_from_the_range_it_starts_in(tmp_path, variant):
    data = VARIANTS[variant]
    log_file = write_partition(tmp_path, data, INDEX)
    segment = SegmentFile(str(log_file), "orders", 0, None, 0, size=len(data))
    pieces = split_segment(segment, 20_000)
    tables = decode_ranges(segment, 20_000)
    (holder,) = [number for number, table in enumerate(tables) if STOPS & set(table["entry_status"].to_pylist())]
    stop = tables[holder].to_pylist()[-1]
    assert stop["entry_status"] in STOPS
    assert pieces[holder].start <= stop["position"] < (pieces[holder].end or len(data))
    assert stop["position"] + stop["size_bytes"] == len(data)
    assert holder < len(pieces) - 1 or variant == "truncated_tail"
    assert all(table.num_rows == 0 for table in tables[holder + 1 :])


def test_each_range_of_a_vanished_file_reports_its_own_bytes(tmp_path):
    missing = SegmentFile(str(tmp_path / "orders-0" / segment_file_name(0)), "orders", 0, None, 0, size=10_000)
    rows = [table.to_pylist() for table in decode_ranges(missing, 3000)]
    assert [[row["entry_status"] for row in table] for table in rows] == [[STATUS_UNREADABLE]] * 4
    assert [(table[0]["position"], table[0]["size_bytes"]) for table in rows] == [
        (0, 3000),
        (3000, 3000),
        (6000, 3000),
        (9000, 1000),
    ]
