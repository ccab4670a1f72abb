"""The input plan (one driver-side listing per input, classified once per run) and the union of all readers."""

from __future__ import annotations

import json
import sys
import types
from collections import Counter
from pathlib import Path

import pytest
from pyarrow import fs as pafs
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from pipeline.arguments import build_parser
from pipeline.cli import settings_for
from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.runner import ingest
from pipeline.sources.dispatch import read_inputs, read_partition_inputs
from pipeline.sources.input_plan import plan_inputs
from pipeline.sources.kafka_format.encoding import encode_batch, segment_file_name
from pipeline.tables.store import TableStore
from schemas.batches import BATCHES

DUMP = """\
Dumping /kafka/orders-0/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 0 lastSequence: 0 producerId: 1 producerEpoch: 0 \
partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 \
CreateTime: 1 size: 70 magic: 2 compresscodec: none crc: 1 isvalid: true
"""
COLUMNAR_ROW = {
    "topic": "payments",
    "partition": 2,
    "entry_status": "ok",
    "segment_base_offset": 0,
    "position": 0,
    "source_file": "export",
}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_kafka_log_directories_go_to_the_segment_reader(spark, realdata: Path):
    broker = realdata / "broker-segments" / "DucAnh1303+microservice"
    partition = broker / "kafka" / "data" / "order-0"
    internal = realdata / "broker-segments" / "jeyaprakash123+JP_ECommerceApp"
    plan = plan_inputs(spark, [str(broker), str(partition), str(internal), str(broker)], Settings().ingest)
    assert (plan.segment_roots, plan.dump_files, plan.columnar_paths) == (
        [str(broker), str(partition), str(internal)],
        [],
        [],
    )
    # The listing is the plan's: every segment of the partition dir is among those of its broker dir, once.
    locations = [segment.location for segment in plan.log_roots.segments]
    assert len(locations) == len(set(locations))
    assert {location for location in locations if location.startswith(str(partition))} == {
        str(path) for path in partition.glob("*.log")
    }


def test_dump_and_columnar_files_in_a_directory(spark, tmp_path: Path):
    write(tmp_path / "a.txt", DUMP)
    write(tmp_path / "nested" / "b.dump", DUMP)
    write(tmp_path / "c.jsonl", json.dumps(COLUMNAR_ROW) + "\n")
    write(tmp_path / "_sources.json", "{}")  # hidden like _SUCCESS: metadata, not data
    write(tmp_path / ".a.txt.crc", "")
    write(tmp_path / "README.md", "notes")
    write(tmp_path / "__consumer_offsets-12.txt", DUMP)  # named after an internal topic's partition: data
    write(tmp_path / "__transaction_state" / "30.out", DUMP)
    plan = plan_inputs(spark, [str(tmp_path), str(tmp_path / "a.txt")], Settings().ingest)
    assert sorted(plan.dump_files) == [
        str(tmp_path / "__consumer_offsets-12.txt"),
        str(tmp_path / "__transaction_state" / "30.out"),
        str(tmp_path / "a.txt"),
        str(tmp_path / "nested" / "b.dump"),
    ]
    assert plan.columnar_paths == [str(tmp_path / "c.jsonl")]
    assert plan.segment_roots == []


def test_a_directory_of_one_columnar_format_is_one_data_set(spark, tmp_path: Path):
    write(tmp_path / "export" / "topic=a" / "part-0.parquet", "")
    write(tmp_path / "export" / "_SUCCESS", "")
    plan = plan_inputs(spark, [str(tmp_path / "export")], Settings().ingest)
    assert (plan.segment_roots, plan.dump_files, plan.columnar_paths) == ([], [], [str(tmp_path / "export")])


def test_missing_and_unrecognised_inputs(spark, tmp_path: Path):
    with pytest.raises(InputError, match=r"nowhere: does not exist"):
        plan_inputs(spark, [str(tmp_path / "nowhere")], Settings().ingest)
    with pytest.raises(InputError, match=r"segment\.bin: unrecognised file type; accepted inputs: a Kafka log"):
        plan_inputs(spark, [str(write(tmp_path / "segment.bin", ""))], Settings().ingest)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"empty: holds no Kafka segments, dump text or columnar files"):
        plan_inputs(spark, [str(tmp_path / "empty")], Settings().ingest)


def test_read_inputs_unions_every_reader(spark, tmp_path: Path, monkeypatch):
    log_root = tmp_path / "broker-1"
    write(log_root / "orders-0" / "00000000000000000000.log", "")
    dump = write(tmp_path / "dumps" / "orders.txt", DUMP)
    export = write(tmp_path / "exports" / "payments.json", json.dumps(COLUMNAR_ROW) + "\n")
    settings = Settings()

    calls = []

    def read_segments(session, roots, given_settings, segments=None):
        calls.append((session, roots, given_settings, segments))
        return session.createDataFrame([], BATCHES)

    segments = types.ModuleType("pipeline.sources.segments")
    segments.read_segments = read_segments
    monkeypatch.setitem(sys.modules, "pipeline.sources.segments", segments)

    plan = plan_inputs(spark, [str(log_root), str(dump), str(export)], settings.ingest)
    frame = read_inputs(spark, plan, settings)
    assert calls == [(spark, [str(log_root)], settings, plan.log_roots.segments)]
    assert [segment.location for segment in plan.log_roots.segments] == [
        str(log_root / "orders-0" / "00000000000000000000.log")
    ]
    assert frame.schema == BATCHES
    assertDataFrameEqual(
        frame.select("source_format", "topic", "partition"),
        [
            Row(source_format="columnar", topic="payments", partition=2),
            Row(source_format="dumplog", topic="orders", partition=0),
        ],
    )


class CountingFileSystem(pafs.LocalFileSystem):
    """The local filesystem, counting what the driver asks of it: recursive listings, lookups and opened files."""

    listings: Counter[str] = Counter()
    lookups: Counter[str] = Counter()
    opened: Counter[str] = Counter()

    def get_file_info(self, paths_or_selector):
        if isinstance(paths_or_selector, pafs.FileSelector):
            self.listings[paths_or_selector.base_dir] += 1
        else:
            paths = [paths_or_selector] if isinstance(paths_or_selector, str) else paths_or_selector
            self.lookups.update(paths)
        return super().get_file_info(paths_or_selector)

    def open_input_stream(self, path, *args, **kwargs):
        self.opened[path] += 1
        return super().open_input_stream(path, *args, **kwargs)


def test_a_run_lists_and_classifies_each_input_once(spark, tmp_path: Path, monkeypatch):
    """Every reader of the ingest (segments, incremental manifest, files beside the segments, coordinator topics)
    takes the run's input plan: a log root is listed once, an input looked up once, a meta.properties read once.
    (The dump readers still peek at the head of a dump file each, on the driver, to reject what is no dump.)"""
    inputs = tmp_path / "inputs"
    cluster, other_broker = inputs / "cluster" / "broker-0", inputs / "broker-1"
    layout = ((cluster, 0, ["orders-0", "__transaction_state-0"]), (other_broker, 1, ["payments-0"]))
    for broker, node_id, partitions in layout:
        write(broker / "meta.properties", f"version=1\nnode.id={node_id}\n")
        write(broker / "recovery-point-offset-checkpoint", f"0\n1\n{partitions[0][:-2]} 0 4\n")
        for partition_dir in partitions:
            (broker / partition_dir).mkdir()
            for base_offset in (0, 2):
                batch = encode_batch(base_offset, 2, producer_id=1, producer_epoch=0, base_sequence=base_offset)
                (broker / partition_dir / segment_file_name(base_offset)).write_bytes(batch)
    dump = write(inputs / "dumps" / "orders.txt", DUMP)
    roots = [str(inputs / "cluster"), str(other_broker / "payments-0"), str(dump)]
    monkeypatch.setattr(pafs, "LocalFileSystem", CountingFileSystem)

    def under_inputs(counts: Counter[str]) -> dict[str, int]:
        return {path: count for path, count in counts.items() if path.startswith(str(inputs))}

    counts = ingest(spark, TableStore(spark, str(tmp_path / "warehouse")), Settings(), "run-1", roots).counts
    assert (counts["segments.new"], counts["transaction_log"], counts["checkpoints"]) == (6, 4, 2)
    assert under_inputs(CountingFileSystem.listings) == {roots[0]: 1, roots[1]: 1}
    assert {root: CountingFileSystem.lookups[root] for root in roots} == dict.fromkeys(roots, 1)
    read_properties = {path: count for path, count in CountingFileSystem.opened.items() if path.endswith("properties")}
    assert read_properties == {
        str(cluster / "meta.properties"): 1,
        str(other_broker / "meta.properties"): 1,
    }


def test_snapshot_and_txn_index_dumps_reach_their_tables(spark, tmp_path: Path):
    """Dumped `.txnindex` and `.snapshot` files give the txn_index and producer_snapshots rows of the binary
    readers; a snapshot dumped without producer lines is a snapshot without entries, still seen."""
    dump = write(
        tmp_path / "side.txt",
        DUMP
        + "Dumping /kafka/orders-0/00000000000000000000.txnindex\n"
        + "version: 0 producerId: 4 firstOffset: 10 lastOffset: 15 lastStableOffset: 10\n"
        + "Dumping /kafka/orders-0/00000000000000000016.snapshot\n"
        + "producerId: 4 producerEpoch: 1 coordinatorEpoch: 2 currentTxnFirstOffset: OptionalLong.empty "
        + "lastTimestamp: 9 firstSequence: 0 lastSequence: 4 lastOffset: 14 offsetDelta: 4 timestamp: 9\n"
        + "Dumping /kafka/orders-0/00000000000000000020.snapshot\n",
    )
    files = read_partition_inputs(spark, plan_inputs(spark, [str(dump)], Settings().ingest), Settings())
    [entry] = files.txn_index.collect()
    assert (entry.topic, entry.partition, entry.producer_id, entry.last_offset, entry.entry_status) == (
        "orders",
        0,
        4,
        15,
        "ok",
    )
    snapshots = sorted(files.producer_snapshots.collect(), key=lambda row: row.snapshot_offset)
    assert [(row.snapshot_offset, row.producer_id, row.last_sequence, row.file_status) for row in snapshots] == [
        (16, 4, 4, "ok"),
        (20, None, None, "ok"),
    ]
    assert files.leader_epochs.count() == files.checkpoints.count() == files.file_problems.count() == 0
    columnar = write(tmp_path / "c.jsonl", json.dumps(COLUMNAR_ROW))
    assert read_partition_inputs(spark, plan_inputs(spark, [str(columnar)], Settings().ingest), Settings()) is None


def test_each_input_given_with_its_cluster_reads_as_that_clusters(spark, tmp_path: Path):
    """Dump text and columnar exports name no cluster: `--cluster-input ID LOGROOT` gives each input its own,
    whatever its path holds (`=`, a scheme), and the others get `--cluster-id`."""
    east = write(tmp_path / "east=1" / "orders.txt", DUMP)
    west = write(tmp_path / "west" / "orders.txt", DUMP)
    export = write(tmp_path / "exports" / "payments.json", json.dumps(COLUMNAR_ROW) + "\n")
    argv = ["ingest", "--cluster-id", "other", "--cluster-input", "east", str(east.parent), "--input", str(export)]
    args = build_parser().parse_args([*argv, "--cluster-input", "west", f"file://{west}"])
    settings = settings_for(args)
    assert args.inputs == [str(east.parent), str(export), f"file://{west}"]

    rows = read_inputs(spark, plan_inputs(spark, args.inputs, settings.ingest), settings)
    clusters = {(row.cluster_id, row.topic, *row.source_file.split("/")[-2:-1]) for row in rows.collect()}
    assert clusters == {("east", "orders", "east=1"), ("west", "orders", "west"), ("other", "payments")}
