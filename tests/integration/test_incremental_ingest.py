"""Incremental ingest: the manifest of ingested segments, and reruns that decode only what changed."""

from __future__ import annotations

import os
import struct
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import Row

from pipeline import runner
from pipeline.arguments import build_parser
from pipeline.cli import settings_for
from pipeline.config import IngestSettings, Settings
from pipeline.ingest_manifest import (
    HASHED_BYTES,
    NEW,
    OUTCOMES,
    REPLACED,
    REREAD,
    active_segments,
    entry_hashes,
    triage,
)
from pipeline.run_record import StepResult
from pipeline.sources.kafka_format.encoding import encode_batch, segment_file_name
from pipeline.sources.segments import SegmentFile, read_segments
from pipeline.tables.files_by_source import files_by_source
from pipeline.tables.publication import STATUS_SUCCEEDED, table_versions
from pipeline.tables.store import TableStore
from pipeline.tables.upgrade import LAYOUT_VERSION
from schemas.batches import BATCHES, BATCHES_PARTITION_BY
from schemas.ingest_manifest import INGEST_MANIFEST
from schemas.runs import RUNS
from schemas.transaction_log import TRANSACTION_LOG, TRANSACTION_LOG_PARTITION_BY, TRANSACTION_STATE_TOPIC

BATCHES_PER_SEGMENT = 2
RECORDS_PER_BATCH = 2


def segment_bytes(base_offset: int, producer_id: int = 1, batches: int = BATCHES_PER_SEGMENT) -> bytes:
    """Idempotent batches from `base_offset` on; other producer ids give other bytes of the same length."""
    offsets = range(base_offset, base_offset + batches * RECORDS_PER_BATCH, RECORDS_PER_BATCH)
    return b"".join(
        encode_batch(offset, RECORDS_PER_BATCH, producer_id=producer_id, producer_epoch=0, base_sequence=offset)
        for offset in offsets
    )


def write_log_dir(root: Path, segments: dict[str, list[int]]) -> Path:
    """A broker log dir with `meta.properties` and the given `<topic>-<partition>` segments."""
    broker = root / "broker-0"
    broker.mkdir(parents=True)
    (broker / "meta.properties").write_text("version=1\nnode.id=0\ncluster.id=c\n")
    for partition_dir, base_offsets in segments.items():
        (broker / partition_dir).mkdir()
        for base_offset in base_offsets:
            (broker / partition_dir / segment_file_name(base_offset)).write_bytes(segment_bytes(base_offset))
    return root


def rows(df) -> set[tuple]:
    return {tuple(row) for row in df.collect()}


def topic_rows(store: TableStore, table: str, schema, topic: str) -> set[tuple]:
    return rows(store.read(table, schema=schema).where(f"topic = '{topic}'"))


def manifest(store: TableStore, topic: str) -> dict[str, Row]:
    """The topic's manifest rows by `<partition dir>/<segment file>`."""
    table = store.read("ingest_manifest", schema=INGEST_MANIFEST).where(f"topic = '{topic}'")
    return {"/".join(row.source_file.rsplit("/", 2)[1:]): row for row in table.collect()}


def segment_counts(result: StepResult) -> dict[str, int]:
    return {key.removeprefix("segments."): value for key, value in result.counts.items() if key.startswith("segments.")}


def described(row: Row) -> dict:
    """A manifest row without when it was written."""
    return {name: value for name, value in row.asDict().items() if name != "ingested_at"}


def test_reruns_decode_only_new_active_and_changed_segments(spark, tmp_path):
    orders = write_log_dir(tmp_path / "orders-logs", {"orders-0": [0, 4, 8, 12], "orders-1": [0]})
    payments = write_log_dir(tmp_path / "payments-logs", {"payments-0": [0]})
    broker = orders / "broker-0"
    store = TableStore(spark, str(tmp_path / "warehouse"))
    settings = Settings()

    def ingest(run_id: str, inputs: list[Path], given: Settings = settings) -> dict[str, int]:
        return segment_counts(runner.ingest(spark, store, given, run_id, [str(root) for root in inputs]))

    def assert_batches_are_a_fresh_decode() -> set[tuple]:
        ingested = topic_rows(store, "batches", BATCHES, "orders")
        assert ingested == rows(read_segments(spark, [str(orders)], settings))
        return ingested

    def run_ids() -> dict[str, str]:
        return {name: row.run_id for name, row in manifest(store, "orders").items()}

    # First run: every segment is new, and the manifest describes each file as listed and decoded.
    assert ingest("run-1", [orders, payments]) == outcomes(new=6)
    first = assert_batches_are_a_fresh_decode()
    other_topic = (
        topic_rows(store, "batches", BATCHES, "payments"),
        topic_rows(store, "ingest_manifest", INGEST_MANIFEST, "payments"),
    )
    recorded = manifest(store, "orders")
    assert set(recorded) == {f"orders-0/{segment_file_name(offset)}" for offset in (0, 4, 8, 12)} | {
        f"orders-1/{segment_file_name(0)}"
    }
    for name, row in recorded.items():
        stat = (broker / name).stat()
        assert (row.size_bytes, row.mtime_ns, row.broker_id, row.run_id) == (stat.st_size, stat.st_mtime_ns, 0, "run-1")
        assert row.rows_ingested == BATCHES_PER_SEGMENT
        assert row.last_batch_position == stat.st_size // BATCHES_PER_SEGMENT
        assert (row.first_batch_hash, row.last_batch_hash) == entry_hashes(str(broker / name), row.last_batch_position)
        assert row.decoded_bytes == stat.st_size  # decoded whole, to its last byte
    active = {f"orders-0/{segment_file_name(12)}", f"orders-1/{segment_file_name(0)}"}
    assert {name for name, row in recorded.items() if row.is_active} == active
    # Decoded as byte ranges of about an entry each (several tasks and files per segment), which the decode tasks
    # describe file by file, the manifest says the same of every segment.
    split_store = TableStore(spark, str(tmp_path / "split-warehouse"))
    split = Settings.model_validate({"ingest": {"segment_split_bytes": 100}})
    runner.ingest(spark, split_store, split, "run-1", [str(orders)])
    assert {name: described(row) for name, row in manifest(split_store, "orders").items()} == {
        name: described(row) for name, row in recorded.items()
    }

    # The same log dir again, without the other one: nothing changed, nothing is decoded, and the segments' files
    # stay in the table as they were.
    files_before = files_by_source(store.path("batches"), {"topic": ["orders"]})
    manifest_version = store.version("ingest_manifest")
    assert ingest("run-2", [orders]) == outcomes(skipped=5)
    assert topic_rows(store, "batches", BATCHES, "orders") == first
    assert files_by_source(store.path("batches"), {"topic": ["orders"]}) == files_before
    assert store.version("ingest_manifest") == manifest_version  # the same rows: not written again
    assert set(run_ids().values()) == {"run-1"}

    # The broker appends to the active segment, an older segment is rewritten in place with the same size and
    # modification time (only the hashes tell), and retention deletes the oldest one.
    with open(broker / "orders-0" / segment_file_name(12), "ab") as active_segment:
        active_segment.write(segment_bytes(16, batches=1))
    rewritten = broker / "orders-0" / segment_file_name(4)
    before = rewritten.stat()
    rewritten.write_bytes(segment_bytes(4, producer_id=2))
    os.utime(rewritten, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = rewritten.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    (broker / "orders-0" / segment_file_name(0)).unlink()
    assert ingest("run-3", [orders]) == outcomes(appended=1, replaced=1, skipped=2, removed=1)
    latest = assert_batches_are_a_fresh_decode()
    # The grown segment kept the file of the rows decoded before and got one for the entry appended to it.
    grown_segment = str(broker / "orders-0" / segment_file_name(12))
    grown = files_by_source(store.path("batches"), {"topic": ["orders"]})[grown_segment]
    assert set(files_before[str(broker / "orders-0" / segment_file_name(12))].paths) < set(grown.paths)
    assert grown.rows == BATCHES_PER_SEGMENT + 1
    assert len(latest) == len(first) - BATCHES_PER_SEGMENT + 1
    assert {row[BATCHES.fieldNames().index("producer_id")] for row in latest} == {1, 2}
    assert segments_per_file(store) == {1}  # decoded and kept rows alike: a file holds one segment file's rows
    assert run_ids() == {
        f"orders-0/{segment_file_name(4)}": "run-3",
        f"orders-0/{segment_file_name(8)}": "run-1",
        f"orders-0/{segment_file_name(12)}": "run-3",
        f"orders-1/{segment_file_name(0)}": "run-1",
    }

    # `batches` changed behind the manifest's back (the rows of a skipped segment gone): that segment is read again.
    skipped_file = str(broker / "orders-0" / segment_file_name(8))
    # Written in one file, the log no longer says which file holds which segment: the kept rows, those of the
    # segment appended to among them, are read and written again.
    truncated = store.read("batches", schema=BATCHES).where(f"topic = 'orders' AND source_file != '{skipped_file}'")
    store.overwrite_partitions(truncated.coalesce(1), "batches", BATCHES_PARTITION_BY, {"topic": ["orders"]})
    assert files_by_source(store.path("batches"), {"topic": ["orders"]}) is None
    publish_as_a_run(spark, store, "edit")  # published, so the next run keeps it instead of rolling it back
    with open(broker / "orders-0" / segment_file_name(12), "ab") as active_segment:
        active_segment.write(segment_bytes(18, batches=1))
    assert ingest("run-4", [orders]) == outcomes(appended=1, replaced=1, skipped=2)
    latest = assert_batches_are_a_fresh_decode()
    assert len(latest) == len(first) - BATCHES_PER_SEGMENT + 2
    assert segments_per_file(store) == {1}

    # A batch caught half written ends the appended decode in a truncated tail; once it is whole, the segment is
    # decoded again from its start, since where its last decode stopped is no entry boundary to go on from.
    torn = broker / "orders-1" / segment_file_name(0)
    appended_batch = segment_bytes(4, batches=1)
    with open(torn, "ab") as active_segment:
        active_segment.write(appended_batch[:30])
    assert ingest("run-4a", [orders]) == outcomes(appended=1, skipped=3)
    assert_batches_are_a_fresh_decode()
    assert manifest(store, "orders")[f"orders-1/{segment_file_name(0)}"].decoded_bytes is None
    with open(torn, "ab") as active_segment:
        active_segment.write(appended_batch[30:])
    assert ingest("run-4b", [orders]) == outcomes(reread=1, skipped=3)
    latest = assert_batches_are_a_fresh_decode()
    assert manifest(store, "orders")[f"orders-1/{segment_file_name(0)}"].decoded_bytes == torn.stat().st_size

    # With incremental ingest off (--full) every segment is decoded again, to the same rows.
    full = Settings(ingest=IngestSettings(incremental=False))
    assert ingest("run-5", [orders], full) == outcomes(reread=4)
    assert topic_rows(store, "batches", BATCHES, "orders") == latest
    assert set(run_ids().values()) == {"run-5"}

    # The topic of the log dir left out after the first run kept its rows and its manifest rows.
    assert (
        topic_rows(store, "batches", BATCHES, "payments"),
        topic_rows(store, "ingest_manifest", INGEST_MANIFEST, "payments"),
    ) == other_topic


def test_an_empty_active_segment_is_described_without_rows_and_skipped_next_time(spark, tmp_path):
    """A broker rolls a new segment before writing to it: an empty file, which no decode task writes rows of."""
    root = write_log_dir(tmp_path / "logs", {"orders-0": [0]})
    empty = root / "broker-0" / "orders-0" / segment_file_name(BATCHES_PER_SEGMENT)
    empty.write_bytes(b"")
    store = TableStore(spark, str(tmp_path / "warehouse"))

    def ingest(run_id: str) -> dict[str, int]:
        return segment_counts(runner.ingest(spark, store, Settings(), run_id, [str(root)]))

    assert ingest("run-1") == outcomes(new=2)
    row = manifest(store, "orders")[f"orders-0/{empty.name}"]
    assert (row.rows_ingested, row.last_batch_position, row.decoded_bytes, row.is_active) == (0, None, None, True)
    assert (row.first_batch_hash, row.last_batch_hash) == entry_hashes(str(empty), None)
    assert ingest("run-2") == outcomes(skipped=2)


def outcomes(**counts: int) -> dict[str, int]:
    """Segments per outcome, every outcome named."""
    return {outcome: counts.get(outcome, 0) for outcome in OUTCOMES}


def segments_per_file(store: TableStore) -> set[int]:
    """How many segment files' rows each data file of the `batches` snapshot holds."""
    paths = DeltaTable(store.path("batches")).file_uris()
    return {len(pq.read_table(path, columns=["source_file"]).column("source_file").unique()) for path in paths}


def publish_as_a_run(spark, store: TableStore, run_id: str) -> None:
    """Record the tables' current versions in `runs`, as a writing run that changed them does last."""
    now = datetime.now(UTC)
    row = Row(
        run_id=run_id, command="ingest", started_at=now, finished_at=now, status=STATUS_SUCCEEDED, inputs=None,
        reference_time_ms=None, delta_backend=store.backend_name, counts={}, config_json=None, tool_version=None,
        table_versions=table_versions(store), layout_version=LAYOUT_VERSION,
    )  # fmt: skip
    store.append(spark.createDataFrame([tuple(row[name] for name in RUNS.fieldNames())], RUNS), "runs")


def segment(location: str, base_offset: int = 0, size: int = 100, mtime_ns: int | None = 5) -> SegmentFile:
    return SegmentFile(location, "t", 0, 1, base_offset, size, mtime_ns=mtime_ns)


def recorded_row(
    size: int = 100,
    mtime_ns: int | None = 5,
    broker_id: int | None = 1,
    hashes=("a", "b"),
    cluster_id: str = "",
    is_active: bool = False,
    decoded_bytes: int | None = 100,
) -> dict:
    first, last = hashes
    return {
        "is_active": is_active,
        "decoded_bytes": decoded_bytes,
        "size_bytes": size,
        "mtime_ns": mtime_ns,
        "broker_id": broker_id,
        "cluster_id": cluster_id,
        "first_batch_hash": first,
        "last_batch_hash": last,
        "rows_ingested": 3,
    }


def test_triage_leaves_unchanged_listings_and_appended_active_segments_to_the_hash_check():
    listed = {
        "new": segment("t-0/new.log"),
        "active": segment("t-0/active.log"),
        "active_grown": segment("t-0/active_grown.log", size=120, mtime_ns=6),
        "active_torn": segment("t-0/active_torn.log", size=120, mtime_ns=6),
        "active_shrunk": segment("t-0/active_shrunk.log", size=80, mtime_ns=6),
        "rolled": segment("t-0/rolled.log", size=120, mtime_ns=6),
        "grown": segment("t-0/grown.log", size=120),
        "touched": segment("t-0/touched.log", mtime_ns=6),
        "moved": segment("t-0/moved.log"),
        "reclustered": segment("t-0/reclustered.log"),
        "unhashed": segment("t-0/unhashed.log"),
        "same": segment("t-0/same.log"),
        "no_mtime": segment("t-0/no_mtime.log", mtime_ns=None),
    }
    recorded = {
        "t-0/active.log": recorded_row(is_active=True),
        "t-0/active_grown.log": recorded_row(is_active=True),
        "t-0/active_torn.log": recorded_row(is_active=True, decoded_bytes=90),  # ended in a partial entry
        "t-0/active_shrunk.log": recorded_row(is_active=True),
        "t-0/rolled.log": recorded_row(is_active=True),  # appended to, then rolled: no longer the last segment
        "t-0/grown.log": recorded_row(),
        "t-0/touched.log": recorded_row(),
        "t-0/moved.log": recorded_row(broker_id=2),
        "t-0/reclustered.log": recorded_row(cluster_id="east"),  # ingested under another --cluster-id
        "t-0/unhashed.log": recorded_row(hashes=(None, "b")),
        "t-0/same.log": recorded_row(),
        "t-0/no_mtime.log": recorded_row(mtime_ns=None),
    }
    segments = list(listed.values())
    active = frozenset({"t-0/active.log", "t-0/active_grown.log", "t-0/active_torn.log", "t-0/active_shrunk.log"})
    outcomes, candidates = triage(segments, recorded, active, incremental=True)
    assert outcomes == {
        "t-0/new.log": NEW,
        "t-0/active_torn.log": REREAD,
        "t-0/active_shrunk.log": REREAD,
        "t-0/grown.log": REPLACED,
        "t-0/touched.log": REPLACED,
        "t-0/moved.log": REPLACED,
        "t-0/reclustered.log": REPLACED,
        "t-0/unhashed.log": REPLACED,
    }
    expected = ["active", "active_grown", "rolled", "same", "no_mtime"]
    assert candidates == [listed[name] for name in expected]

    outcomes, candidates = triage(segments, recorded, frozenset(), incremental=False)
    assert candidates == [] and outcomes["t-0/same.log"] == REREAD and outcomes["t-0/new.log"] == NEW


def test_the_active_segment_is_the_last_of_each_partition_directory():
    segments = [
        segment("b0/t-0/00000000000000000000.log", 0),
        segment("b0/t-0/00000000000000000090.log", 90),
        segment("b0/t-0/00000000000000000010.log", 10),
        segment("b1/t-0/00000000000000000000.log", 0),  # the same partition on another broker
    ]
    assert active_segments(segments) == {"b0/t-0/00000000000000000090.log", "b1/t-0/00000000000000000000.log"}


def test_entry_hashes_follow_the_first_and_last_entry_bytes(tmp_path):
    data = segment_bytes(0, batches=3)
    last = 2 * len(data) // 3
    path = tmp_path / "t-0" / segment_file_name(0)
    path.parent.mkdir()
    path.write_bytes(data)
    first_hash, last_hash = entry_hashes(str(path), last)
    assert None not in (first_hash, last_hash) and first_hash != last_hash

    middle_changed = bytearray(data)
    middle_changed[last - 10] ^= 0xFF  # inside the second batch: neither end entry changes
    path.write_bytes(bytes(middle_changed))
    assert entry_hashes(str(path), last) == (first_hash, last_hash)

    for position, expected_change in ((0, (True, False)), (last + HASHED_BYTES - 1, (False, True))):
        changed = bytearray(data)
        changed[position] ^= 0xFF
        path.write_bytes(bytes(changed))
        first_now, last_now = entry_hashes(str(path), last)
        assert (first_now != first_hash, last_now != last_hash) == expected_change

    path.write_bytes(data[:last])  # shrunk below the recorded last entry: hashed as absent, no error
    assert entry_hashes(str(path), last) == (first_hash, entry_hashes(str(path), None)[1])
    path.unlink()
    assert entry_hashes(str(path), last) == (None, None)


@pytest.mark.parametrize(("argv", "incremental"), [([], True), (["--full"], False)])
@pytest.mark.parametrize("command", ["ingest", "run"])
def test_full_flag_turns_incremental_ingest_off(command, argv, incremental):
    args = build_parser().parse_args([command, "--input", "logs", *argv])
    assert settings_for(args).ingest.incremental is incremental


def transaction_state_bytes(base_offset: int, batches: int = BATCHES_PER_SEGMENT) -> bytes:
    """`__transaction_state` batches of one record each, a tombstone of transactional id `app-<offset>`."""
    return b"".join(
        encode_batch(offset, [None], keys=[struct.pack(">h", 0) + struct.pack(">h", len(key)) + key])
        for offset in range(base_offset, base_offset + batches)
        for key in [b"app-%d" % offset]
    )


def test_transaction_log_keeps_the_files_of_skipped_segments(spark, tmp_path):
    broker = tmp_path / "logs" / "broker-0"
    broker.mkdir(parents=True)
    (broker / "meta.properties").write_text("version=1\nnode.id=0\ncluster.id=c\n")
    for partition_dir, base_offsets in {"__transaction_state-0": [0, 2], "__transaction_state-1": [0]}.items():
        (broker / partition_dir).mkdir()
        for base_offset in base_offsets:
            (broker / partition_dir / segment_file_name(base_offset)).write_bytes(transaction_state_bytes(base_offset))
    store = TableStore(spark, str(tmp_path / "warehouse"))
    location = store.path("transaction_log")
    settings = Settings()

    def ingest(run_id: str, given: Settings = settings, warehouse: TableStore = store) -> StepResult:
        return runner.ingest(spark, warehouse, given, run_id, [str(tmp_path / "logs")])

    def fresh_decode(name: str) -> set[tuple]:
        fresh = TableStore(spark, str(tmp_path / name))
        ingest("fresh", Settings(ingest=IngestSettings(incremental=False)), fresh)
        return rows(fresh.read("transaction_log", schema=TRANSACTION_LOG))

    assert ingest("run-1").counts["transaction_log.partitions"] == 2
    first = files_by_source(location, {"topic": [TRANSACTION_STATE_TOPIC]})
    assert len(first) == 3

    # The broker appends to one active segment: the files of the other segments stay, the grown one keeps its file
    # and gets one more, and the table holds what a full decode gives.
    grown = str(broker / "__transaction_state-0" / segment_file_name(2))
    with open(grown, "ab") as active_segment:
        active_segment.write(transaction_state_bytes(4, batches=1))
    result = ingest("run-2")
    assert segment_counts(result) == outcomes(appended=1, skipped=2)
    assert result.counts["transaction_log"] == 2 * BATCHES_PER_SEGMENT + BATCHES_PER_SEGMENT + 1
    assert result.counts["transaction_log.partitions"] == 2
    latest = files_by_source(location, {"topic": [TRANSACTION_STATE_TOPIC]})
    assert {name: files for name, files in latest.items() if name != grown} == {
        name: files for name, files in first.items() if name != grown
    }
    assert set(first[grown].paths) < set(latest[grown].paths) and latest[grown].rows == BATCHES_PER_SEGMENT + 1
    assert rows(store.read("transaction_log", schema=TRANSACTION_LOG)) == fresh_decode("full-1")

    # A table whose files do not say which segment they hold is decoded whole, into one file per segment again.
    table = store.read("transaction_log", schema=TRANSACTION_LOG)
    replaced = {"topic": [TRANSACTION_STATE_TOPIC]}
    store.overwrite_partitions(table.coalesce(1), "transaction_log", TRANSACTION_LOG_PARTITION_BY, replaced)
    assert files_by_source(location, {"topic": [TRANSACTION_STATE_TOPIC]}) is None
    publish_as_a_run(spark, store, "edit")
    assert segment_counts(ingest("run-3")) == outcomes(skipped=3)
    assert set(files_by_source(location, {"topic": [TRANSACTION_STATE_TOPIC]})) == set(first)
    assert rows(store.read("transaction_log", schema=TRANSACTION_LOG)) == fresh_decode("full-2")
