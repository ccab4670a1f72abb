"""Resource bounds, scaled down from benchmarks/bounds_suite.py so they run on every CI build without Spark.

A length field claiming 2 GiB must cost what the file holds, not what the field claims; thousands of partition
dirs must be listed in one pass whatever their number; and a huge file beside the segments must be decoded a
chunk at a time, or reported, never read whole. (That a partition of many producers is replayed without the Python
worker copying the partition's rows is tests/integration/test_replay_memory.py: its input comes from Spark.)
"""

from __future__ import annotations

import importlib.util
import struct
import tracemalloc
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from crc32c import crc32c
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.config import IngestSettings
from pipeline.sources import log_roots
from pipeline.sources.kafka_format.encoding import segment_file_name
from pipeline.sources.kafka_format.windows import iter_decoded, next_entry_start
from pipeline.sources.partition_files.binary_files import SNAPSHOT_ENTRY, SNAPSHOT_HEADER
from pipeline.sources.partition_files.discovery import discover_partition_files
from pipeline.sources.partition_files.entries import ROWS_PER_BATCH, TXN_INDEX_ENTRY
from pipeline.sources.partition_files.index_checks import OFFSET_INDEX_ENTRY, TIME_INDEX_ENTRY
from pipeline.sources.partition_files.reader import (
    TEXT_FILE_MAX_BYTES,
    checkpoint_rows,
    decode_files,
    leader_epoch_rows,
    partition_metadata_rows,
)
from pipeline.sources.segments import SegmentFile, decode_file, discover_segments
from schemas.batches import STATUS_OK, STATUS_TRUNCATED
from schemas.file_problems import FILE_PROBLEMS
from schemas.producer_snapshots import PRODUCER_SNAPSHOTS
from schemas.txn_index import TXN_INDEX

REPO = Path(__file__).resolve().parents[2]
MIB = 1 << 20


def _load_bounds_inputs():
    spec = importlib.util.spec_from_file_location("bounds_inputs", REPO / "benchmarks" / "bounds_inputs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bounds_inputs = _load_bounds_inputs()


class RecordingFile:
    """A file read through `read`/`read_at` callables that remember the largest request."""

    def __init__(self, path: Path) -> None:
        self.data = path.read_bytes()
        self.position = 0
        self.largest_request = 0

    def read(self, size: int) -> bytes:
        self.largest_request = max(self.largest_request, size)
        chunk = self.data[self.position : self.position + size]
        self.position += len(chunk)
        return chunk

    def read_at(self, size: int, position: int) -> bytes:
        self.largest_request = max(self.largest_request, size)
        return self.data[position : position + size]


@pytest.fixture(scope="module")
def claims(tmp_path_factory) -> list[Path]:
    return bounds_inputs.huge_claims(tmp_path_factory.mktemp("claims"), batches=1000)


@pytest.mark.parametrize("partition", [0, 1], ids=["last batch claims 2 GiB", "first batch claims 2 GiB"])
def test_a_batch_claiming_2_gib_costs_what_the_file_holds(claims, partition):
    segment = claims[partition]
    size = segment.stat().st_size
    list(iter_decoded(RecordingFile(segment).read, size))  # the kernels load before memory is traced
    file = RecordingFile(segment)
    tracemalloc.start()
    try:
        rows = pa.concat_tables(iter_decoded(file.read, size))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert file.largest_request <= size
    assert peak < 16 * MIB
    claimant = rows.num_rows - 1
    assert rows["entry_status"].to_pylist() == [STATUS_OK] * claimant + [STATUS_TRUNCATED]
    assert rows["position"][claimant].as_py() == claimant * (size // 1000)
    assert "declares 214748" in rows["entry_note"][claimant].as_py()


def test_a_range_after_a_2_gib_claim_reads_headers_only(claims):
    """The task of a byte range behind the claim walks the chain from the file start and stops at the claim."""
    segment = claims[1]
    size = segment.stat().st_size
    file = RecordingFile(segment)
    assert next_entry_start(file.read_at, size, size // 2) is None
    assert file.largest_request <= size
    descriptor = SegmentFile(str(segment), "claims", 1, 0, 0, size, start=size // 2)
    assert list(decode_file(descriptor)) == []


class CountingFileSystem:
    """Passes calls to a pyarrow filesystem and counts them by name."""

    def __init__(self, filesystem) -> None:
        self.filesystem = filesystem
        self.calls: dict[str, int] = {}

    def __getattr__(self, name):
        method = getattr(self.filesystem, name)

        def counted(*args, **kwargs):
            self.calls[name] = self.calls.get(name, 0) + 1
            return method(*args, **kwargs)

        return counted


@pytest.fixture(scope="module")
def wide_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("wide")
    bounds_inputs.many_partitions(root, 2000, batches=1)
    return root


def test_thousands_of_partition_dirs_are_listed_in_one_pass(wide_root, monkeypatch):
    counting = []

    def resolve(location):
        filesystem, path = log_roots.pafs.LocalFileSystem(), location
        counting.append(CountingFileSystem(filesystem))
        return counting[-1], path

    monkeypatch.setattr(log_roots, "resolve", resolve)
    found = discover_segments([str(wide_root)], IngestSettings()).segments
    assert len(found) == 2000
    assert {segment.broker_id for segment in found} == {0}
    assert len(counting) == 1
    # the root's type, one recursive listing, and one meta.properties read for the one log dir
    assert counting[0].calls == {"get_file_info": 2, "open_input_stream": 1}


@pytest.mark.parametrize("name", ["leader-epoch-checkpoint", "partition.metadata", "recovery-point-offset-checkpoint"])
def test_a_huge_text_file_is_one_problem_naming_it_not_a_whole_read(tmp_path, name):
    """A sparse 80 MiB file where a checkpoint belongs: read whole, its one line would be quoted in the problem."""
    log_dir = tmp_path / "broker-0"
    bounds_inputs.many_partitions(tmp_path, 1)
    huge = (log_dir if name.endswith("offset-checkpoint") else log_dir / "wide-0") / name
    with huge.open("wb") as file:
        file.truncate(TEXT_FILE_MAX_BYTES + 16 * MIB)
    files = discover_partition_files(discover_segments([str(log_dir)], IngestSettings()).listings).files
    descriptor = next(file for file in files if file.location == str(huge))
    read = {
        "leader-epoch-checkpoint": leader_epoch_rows,
        "partition.metadata": partition_metadata_rows,
        "recovery-point-offset-checkpoint": checkpoint_rows,
    }[name]
    tracemalloc.start()
    try:
        rows = read(descriptor)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * MIB
    assert len(rows) == 1
    assert rows[0]["source_file"] == str(huge)
    assert f"it holds {TEXT_FILE_MAX_BYTES + 16 * MIB} bytes" in rows[0]["problem"]


HUGE_BINARY = 256 * MIB
SNAPSHOT_ENTRIES = (HUGE_BINARY - SNAPSHOT_HEADER.size) // SNAPSHOT_ENTRY.size


def _valid_zero_snapshot(file) -> None:
    """A snapshot of SNAPSHOT_ENTRIES all-zero entries with a correct CRC: only its 10-byte header is written."""
    count = struct.pack(">i", SNAPSHOT_ENTRIES)
    crc = crc32c(count)
    zeros = bytes(16 * MIB)
    for start in range(0, SNAPSHOT_ENTRIES * SNAPSHOT_ENTRY.size, len(zeros)):
        crc = crc32c(zeros[: min(len(zeros), SNAPSHOT_ENTRIES * SNAPSHOT_ENTRY.size - start)], crc)
    file.write(struct.pack(">hI", 1, crc) + count)
    file.truncate(SNAPSHOT_HEADER.size + SNAPSHOT_ENTRIES * SNAPSHOT_ENTRY.size)


def _summary(column: str, batches) -> tuple[int, dict, list]:
    """(rows, count of each value of `column`, the last row) of record batches, keeping none of them."""
    rows, counts, last = 0, {}, None
    for batch in batches:
        assert batch.num_rows <= ROWS_PER_BATCH
        rows += batch.num_rows
        for count in pc.value_counts(batch[column]).to_pylist():
            counts[count["values"]] = counts.get(count["values"], 0) + count["counts"]
        last = batch.slice(batch.num_rows - 1).to_pylist()[0]
    return rows, counts, last


# One entry, for a segment the partition does not hold: a problem each
FIRST_INDEX_ENTRY = {".index": OFFSET_INDEX_ENTRY.pack(1, 0), ".timeindex": TIME_INDEX_ENTRY.pack(1, 1)}


@pytest.mark.parametrize(
    ("suffix", "table", "schema", "column", "rows", "counts", "last"),
    [
        (".index", "file_problems", FILE_PROBLEMS, "kind", 1, {"offset_index": 1}, {"position": 0}),
        (".timeindex", "file_problems", FILE_PROBLEMS, "kind", 2, {"time_index": 2}, {"position": 0}),
        (
            ".txnindex",
            "txn_index",
            TXN_INDEX,
            "entry_status",
            HUGE_BINARY // TXN_INDEX_ENTRY.size + 1,
            {"ok": HUGE_BINARY // TXN_INDEX_ENTRY.size, "truncated": 1},
            {"position": HUGE_BINARY // TXN_INDEX_ENTRY.size * TXN_INDEX_ENTRY.size},
        ),
        (".snapshot", "producer_snapshots", PRODUCER_SNAPSHOTS, "file_status", 1, {"bad_version": 1}, {"version": 0}),
        (
            "valid.snapshot",
            "producer_snapshots",
            PRODUCER_SNAPSHOTS,
            "file_status",
            SNAPSHOT_ENTRIES,
            {"ok": SNAPSHOT_ENTRIES},
            {"producer_id": 0, "crc_valid": True},
        ),
    ],
)
def test_a_huge_binary_file_is_decoded_a_chunk_at_a_time(tmp_path, suffix, table, schema, column, rows, counts, last):
    """A sparse 256 MiB file of each binary kind, through the executor's reader: read whole, the file alone would
    take 256 MiB, and its rows as Python objects gigabytes."""
    log_dir = tmp_path / "broker-0"
    bounds_inputs.many_partitions(tmp_path, 1)
    huge = log_dir / "wide-0" / segment_file_name(1000, ".snapshot" if suffix == "valid.snapshot" else suffix)
    with huge.open("wb") as file:
        if suffix == "valid.snapshot":
            _valid_zero_snapshot(file)
        else:
            file.write(FIRST_INDEX_ENTRY.get(suffix, b""))  # an index of zeros holds no entry
            file.truncate(HUGE_BINARY)
    files = discover_partition_files(discover_segments([str(log_dir)], IngestSettings()).listings).files
    descriptor = next(file for file in files if file.location == str(huge))
    descriptors = pa.RecordBatch.from_pylist([vars(descriptor)])
    arrow_schemas = {table: to_arrow_schema(schema)}

    def decoded():
        return (batch for name, batch in decode_files(arrow_schemas, iter([descriptors])) if name == table)

    next(decoded())  # the kernels load before memory is traced
    tracemalloc.start()
    try:
        found = _summary(column, decoded())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * MIB
    assert found[:2] == (rows, counts)
    assert {name: found[2][name] for name in last} == last
