"""`produce-audit generate`: determinism, the broker layout, decodability and the ground truth (the audit against
the ground truth is tests/integration/test_generate_recall.py)."""

from __future__ import annotations

import contextlib
import io
import json
from collections import Counter
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecords

from pipeline.cli import EXIT_OK, EXIT_USAGE, main
from pipeline.config import IngestSettings
from pipeline.generate import ground_truth
from pipeline.generate.options import GenerateOptions
from pipeline.generate.simulation import write_log_root
from pipeline.sources.coordinator_records.transaction_state import decode_transaction_log
from pipeline.sources.kafka_format.windows import decode_segment
from pipeline.sources.partition_files.binary_files import decode_producer_snapshot, decode_txn_index
from pipeline.sources.partition_files.discovery import discover_partition_files
from pipeline.sources.partition_files.text_files import (
    decode_leader_epoch_checkpoint,
    decode_offset_checkpoint,
    decode_partition_metadata,
)
from pipeline.sources.records.api import iter_records
from pipeline.sources.segments import discover_segments
from schemas.checkpoints import CHECKPOINT_KINDS

FAMILIES = {"SEQ", "EPO", "TXN", "IDX", "LSO", "SNP", "FMT", "SEG", "LEP", "TSL", "XTX"}
# Small segments so partitions roll; a rate high enough that every anomaly kind is injected at least once.
ANOMALOUS = dict(batches=2000, anomaly_rate=0.05, segment_bytes=8 * 1024)


def _generate(root: Path, **options) -> Path:
    write_log_root(GenerateOptions(out=root, **options))
    return root


def _files(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


@pytest.fixture(scope="module")
def anomalous_root(tmp_path_factory) -> Path:
    return _generate(tmp_path_factory.mktemp("generated") / "root", **ANOMALOUS)


@pytest.fixture(scope="module")
def truth(anomalous_root) -> list[dict]:
    return ground_truth.read(anomalous_root).to_pylist()


def test_same_arguments_give_identical_bytes(tmp_path, anomalous_root):
    again = _generate(tmp_path / "again", **ANOMALOUS)
    assert _files(again) == _files(anomalous_root)
    other_seed = _generate(tmp_path / "other", **ANOMALOUS, seed=2)
    assert _files(other_seed) != _files(anomalous_root)


def test_broker_layout(anomalous_root, truth):
    renamed = {f"{row['topic']}-{row['partition']}" for row in truth if row["rule_code"] == "SEG-003"}
    brokers = sorted(path.name for path in anomalous_root.iterdir() if path.is_dir())
    assert brokers == ["broker-0", "broker-1", "broker-2"]
    partitions = {}
    for broker in brokers:
        log_dir = anomalous_root / broker
        assert "node.id=" in (log_dir / "meta.properties").read_text()
        for kind in CHECKPOINT_KINDS:
            entries, problems = decode_offset_checkpoint((log_dir / kind).read_text())
            assert problems == [], (broker, kind)
        for partition_dir in log_dir.iterdir():
            if partition_dir.is_dir():
                partitions[partition_dir.name] = partition_dir
    assert {f"__transaction_state-{n}" for n in range(50)} <= set(partitions)
    assert {"orders-0", "payments-0", "inventory-changelog-0"} <= set(partitions)

    rolled = 0
    for name, directory in partitions.items():
        logs = sorted(directory.glob("*.log"))
        assert logs, name
        for log in logs:
            assert log.with_suffix(".index").exists() and log.with_suffix(".timeindex").exists(), log
            assert log.stat().st_size <= ANOMALOUS["segment_bytes"] + 100, log  # a torn tail may follow
        assert (directory / "leader-epoch-checkpoint").exists() and (directory / "partition.metadata").exists()
        if len(logs) > 1:
            rolled += 1
        if len(logs) > 1 and name not in renamed:  # SEG-003 names a segment one below its snapshot
            assert (directory / logs[-1].with_suffix(".snapshot").name).exists(), "no snapshot at the active segment"
        if not name.startswith("__"):
            for snapshot in directory.glob("*.snapshot"):
                assert decode_producer_snapshot(snapshot.read_bytes())[0]["file_status"] in ("ok", "crc_mismatch")
    assert rolled >= 10


def test_side_files_decode(anomalous_root, truth):
    corrupted = {(row["topic"], row["partition"]) for row in truth if row["rule_code"] in ("LEP-001", "SEG-006")}
    for directory in [path for path in anomalous_root.glob("broker-*/*") if path.is_dir()]:
        topic, _, number = directory.name.rpartition("-")
        if (topic, int(number)) in corrupted:
            continue
        assert decode_leader_epoch_checkpoint((directory / "leader-epoch-checkpoint").read_text())[1] == []
        assert decode_partition_metadata((directory / "partition.metadata").read_text())[1] == []
        for index in directory.glob("*.txnindex"):
            assert {row["entry_status"] for row in decode_txn_index(index.read_bytes())} == {"ok"}


def _batches(root: Path):
    """(path, decoded table, bytes) of every segment."""
    for path in sorted(root.rglob("*.log")):
        data = path.read_bytes()
        yield path, decode_segment(data), data


def test_every_batch_decodes_with_both_readers(anomalous_root, truth):
    def injected(code: str) -> set[tuple[str, int]]:
        return {(f"{r['topic']}-{r['partition']}", r["base_offset"]) for r in truth if r["rule_code"] == code}

    crc_flipped, bad_records, bad_keys, tails = injected("FMT-004"), injected("FMT-006"), injected("TSL-001"), Counter()
    batches = transaction_records = 0
    for path, table, data in _batches(anomalous_root):
        partition = path.parent.name
        rows = table.to_pylist()
        for row in rows:
            if row["entry_status"] != "ok":
                tails[row["entry_status"]] += 1
                continue
            key = (partition, row["base_offset"])
            assert row["crc_valid"] == (key not in crc_flipped), (path, row["position"])
            assert (row["record_problem"] is None) == (key not in bad_records), (path, row["position"])
        readable = data[: rows[-1]["position"]] if rows and rows[-1]["entry_status"] != "ok" else data
        records = MemoryRecords(readable)
        while records.has_next():
            batch = records.next_batch()
            key = (partition, batch.base_offset)
            assert batch.validate_crc() == (key not in crc_flipped), (path, batch.base_offset)
            if key not in crc_flipped | bad_records:
                assert len(list(batch)) == batch.records_count
            batches += 1
        if partition.startswith("__transaction_state"):
            for row in rows:
                entry = data[row["position"] : row["position"] + row["size_bytes"]]
                for record in iter_records(entry):
                    decoded = decode_transaction_log(record.key, record.value)
                    assert ("decode_error" in decoded) == ((partition, row["base_offset"]) in bad_keys)
                    transaction_records += 1
    assert batches == sum(
        1 for _, table, _ in _batches(anomalous_root) for s in table["entry_status"].to_pylist() if s == "ok"
    )
    assert transaction_records > 0
    assert tails == Counter({"truncated_tail": 1, "too_small": 1, "bad_magic": 1})


def test_the_ingest_ignores_the_ground_truth(anomalous_root, truth):
    assert (anomalous_root / ground_truth.FILE_NAME).exists()
    discovery = discover_segments([str(anomalous_root)], IngestSettings())
    files = discover_partition_files(discovery.listings)
    locations = [s.location for s in discovery.segments] + [f.location for f in files.files]
    assert locations and not any(ground_truth.FILE_NAME in location for location in locations)
    leftovers = [row for row in truth if row["rule_code"] == "SEG-001"]  # the only names the listing objects to
    assert len(files.naming_problems) == len(leftovers)


def test_ground_truth_covers_every_rule_family_and_kind(truth):
    from pipeline.generate.anomalies.catalog import catalog

    assert {row["rule_code"].split("-")[0] for row in truth} == FAMILIES
    assert {row["anomaly"] for row in truth} == {kind.name for kind in catalog()}


def test_generate_command(tmp_path):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["generate", "--out", str(tmp_path / "root"), "--batches", "300", "--anomaly-rate", "0"])
    assert code == EXIT_OK
    report = json.loads(out.getvalue())
    assert report["data_batches"] == 300 and report["anomalies"] == 0
    assert ground_truth.read(tmp_path / "root").num_rows == 0
    assert main(["generate", "--out", str(tmp_path / "root"), "--batches", "300"]) == EXIT_USAGE  # not empty
    assert main(["generate", "--out", str(tmp_path / "other"), "--batches", "0"]) == EXIT_USAGE


def test_a_hot_producer_writes_half_of_one_partition(tmp_path):
    root = _generate(tmp_path / "hot", batches=3000, hot_producer=True)
    by_partition: dict[str, Counter] = {}
    for path, table, _ in _batches(root):
        if path.parent.name.startswith("__"):
            continue
        counts = by_partition.setdefault(path.parent.name, Counter())
        counts.update(
            pid
            for pid, control in zip(table["producer_id"].to_pylist(), table["is_control"].to_pylist(), strict=True)
            if not control
        )
    shares = {name: max(counts.values()) / sum(counts.values()) for name, counts in by_partition.items()}
    hot = max(shares, key=shares.get)
    assert 0.4 < shares[hot] < 0.6, shares
    assert sorted(shares.values())[-2] < 0.3, shares  # the other partitions keep their many producers
