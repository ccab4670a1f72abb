"""`produce-audit generate --replication-factor`: follower copies, their log dirs and replica faults (the audit of
them is tests/integration/test_generate_replicas_audit.py)."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import pytest

from pipeline.cli import EXIT_USAGE, main
from pipeline.generate import ground_truth
from pipeline.generate.cluster import COMPACTED_TOPICS_GLOB, TRANSACTION_STATE_PARTITIONS
from pipeline.generate.options import GenerateOptions
from pipeline.generate.replicas import log_entries, read_entries, segment_bases
from pipeline.generate.simulation import write_log_root
from pipeline.sources.kafka_format.encoding import segment_file_name
from pipeline.sources.kafka_format.windows import decode_segment
from pipeline.sources.partition_files.text_files import decode_leader_epoch_checkpoint, decode_offset_checkpoint
from schemas.checkpoints import CHECKPOINT_KINDS, CLEANER_OFFSET, RECOVERY_POINT, REPLICATION_OFFSET

CLEAN = dict(batches=3000, anomaly_rate=0.0, segment_bytes=8 * 1024)
ANOMALOUS = dict(batches=2000, anomaly_rate=0.05, segment_bytes=8 * 1024, replication_factor=3)
REP_KINDS = {"REP-001": "ERROR", "REP-002": "WARN", "REP-003": "INFO"}
# What the generator wrote before it had replicas, for a small anomalous root at replication factor 1: the
# files of every log dir, names and bytes. A change here is a change of every generated root.
RF1_DIGEST = "b522f8158d171326c9cc8d07f8c2a40b6659b21706b28078b41ebc04e8e906bd"


def _generate(root: Path, **options) -> Path:
    write_log_root(GenerateOptions(out=root, **options))
    return root


def _files(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def _checkpoint(log_dir: Path, kind: str) -> dict[tuple[str, int], int]:
    entries, problems = decode_offset_checkpoint((log_dir / kind).read_text())
    assert problems == [], (log_dir, kind)
    return {(entry["topic"], entry["partition"]): entry["offset"] for entry in entries}


def _partition_dirs(log_dir: Path) -> dict[str, Path]:
    return {path.name: path for path in log_dir.iterdir() if path.is_dir()}


def _tp(name: str) -> tuple[str, int]:
    topic, _, number = name.rpartition("-")
    return topic, int(number)


@pytest.fixture(scope="module")
def clean_roots(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("replicas")
    return _generate(base / "rf1", **CLEAN), _generate(base / "rf3", **CLEAN, replication_factor=3)


@pytest.fixture(scope="module")
def anomalous_root(tmp_path_factory) -> Path:
    return _generate(tmp_path_factory.mktemp("replicas") / "anomalous", **ANOMALOUS)


@pytest.fixture(scope="module")
def replica_truth(anomalous_root) -> list[dict]:
    return [row for row in ground_truth.read(anomalous_root).to_pylist() if row["rule_code"].startswith("REP-")]


# --- layout -------------------------------------------------------------------------------------------------


def test_replication_factor_1_writes_what_it_always_wrote(tmp_path):
    root = _generate(tmp_path / "rf1", batches=600, anomaly_rate=0.05, segment_bytes=8192)
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    assert digest.hexdigest() == RF1_DIGEST


def test_every_partition_is_on_three_brokers_as_identical_copies(clean_roots):
    rf1, rf3 = clean_roots
    brokers = sorted(path.name for path in rf3.iterdir() if path.is_dir())
    assert brokers == ["broker-0", "broker-1", "broker-2"]
    held: dict[str, list[Path]] = {}
    for broker in brokers:
        for name, directory in _partition_dirs(rf3 / broker).items():
            held.setdefault(name, []).append(directory)
    leaders = {name: directory for broker in brokers for name, directory in _partition_dirs(rf1 / broker).items()}
    assert set(held) == set(leaders)
    assert {f"__transaction_state-{n}" for n in range(TRANSACTION_STATE_PARTITIONS)} <= set(held)
    for name, copies in held.items():
        assert len(copies) == 3, name
        leader = leaders[name]
        # the leader's copy is where the partition lives at replication factor 1, with the same files
        assert _files(rf3 / leader.parent.name / name) == _files(leader), name
        first = _files(copies[0])
        assert all(_files(copy) == first for copy in copies[1:]), name
        for path in copies[0].iterdir():  # hard links: the copies cost no second encode and no disk
            assert path.stat().st_nlink == 3, path


def test_each_log_dir_lists_the_copies_it_holds(clean_roots):
    rf1, rf3 = clean_roots
    leaders = {}
    for log_dir in rf1.glob("broker-*"):
        leaders.update(_checkpoint(log_dir, RECOVERY_POINT))
    compacted = {(topic, p) for topic, p in leaders if topic.endswith(COMPACTED_TOPICS_GLOB.lstrip("*"))}
    for log_dir in rf3.glob("broker-*"):
        held = {_tp(name) for name in _partition_dirs(log_dir)}
        for kind in CHECKPOINT_KINDS:
            entries = _checkpoint(log_dir, kind)
            if kind == CLEANER_OFFSET:
                assert set(entries) == held & compacted, (log_dir, kind)
            else:
                assert set(entries) == held, (log_dir, kind)
            if kind in (RECOVERY_POINT, REPLICATION_OFFSET):
                assert entries == {tp: leaders[tp] for tp in held}, (log_dir, kind)
    for log_dir in rf1.glob("broker-*"):  # at replication factor 1 a log dir lists its own partitions only
        assert (rf3 / log_dir.name / "meta.properties").read_bytes() == (log_dir / "meta.properties").read_bytes()


def test_replication_factor_is_at_most_the_brokers(tmp_path):
    assert main(["generate", "--out", str(tmp_path / "r"), "--batches", "10", "--replication-factor", "4"]) == (
        EXIT_USAGE
    )
    assert main(["generate", "--out", str(tmp_path / "r"), "--batches", "10", "--replication-factor", "0"]) == (
        EXIT_USAGE
    )
    assert GenerateOptions(out=tmp_path, batches=10, brokers=5, replication_factor=5).problems() == []


# --- replica faults ---------------------------------------------------------------------------------------


def test_same_arguments_give_identical_bytes(tmp_path, anomalous_root):
    assert _files(_generate(tmp_path / "again", **ANOMALOUS)) == _files(anomalous_root)


def test_leaders_are_the_same_at_every_replication_factor(tmp_path, anomalous_root):
    """The replica faults draw from a stream of their own: the other anomalies, and so the leaders, stay put."""
    rf1 = _generate(tmp_path / "rf1", **{**ANOMALOUS, "replication_factor": 1})
    rf1_rows = ground_truth.read(rf1).to_pylist()
    rf3_rows = ground_truth.read(anomalous_root).to_pylist()
    assert [row for row in rf3_rows if not row["rule_code"].startswith("REP-")] == rf1_rows
    for broker in rf1.glob("broker-*"):
        for name, directory in _partition_dirs(broker).items():
            assert _files(anomalous_root / broker.name / name) == _files(directory), name


def test_every_replica_fault_kind_is_injected(replica_truth):
    assert {row["rule_code"] for row in replica_truth} == set(REP_KINDS)
    assert all(row["severity"] == REP_KINDS[row["rule_code"]] for row in replica_truth)


def _copy(root: Path, row: dict) -> Path:
    return root / f"broker-{row['broker_id']}" / f"{row['topic']}-{row['partition']}"


def _reference(root: Path, row: dict) -> Path:
    """A copy that holds the leader's log: of the copies with the highest replication offset, the lowest broker's."""
    name = f"{row['topic']}-{row['partition']}"
    ends = {
        broker: _checkpoint(broker, REPLICATION_OFFSET)[_tp(name)]
        for broker in root.glob("broker-*")
        if (broker / name).is_dir()
    }
    return max(ends, key=lambda broker: (ends[broker], -int(broker.name.split("-")[1]))) / name


def _assert_consistent(directory: Path, at: int) -> None:
    """A departing copy's files agree with its own log: the segment it departs in holds whole batches with valid
    CRCs from the departure on and indexes pointing at them, snapshots, leader epochs and the log dir's
    checkpoints stay at or below its end. (What it shares with the leader may carry the leader's anomalies.)"""
    tp = _tp(directory.name)
    end = _checkpoint(directory.parent, RECOVERY_POINT)[tp]
    assert _checkpoint(directory.parent, REPLICATION_OFFSET)[tp] <= end
    entries = log_entries(directory)
    assert entries and max(entry.last_offset for entry in entries) < end
    base = max(base for base in segment_bases(directory) if base <= at)
    data = (directory / segment_file_name(base)).read_bytes()
    table = decode_segment(data).to_pylist()
    assert {row["entry_status"] for row in table} == {"ok"}, directory
    assert all(row["crc_valid"] for row in table if row["base_offset"] >= at), directory
    positions = {entry.position: entry for entry in read_entries(data, base)}
    index = (directory / segment_file_name(base, ".index")).read_bytes()
    for relative, position in struct.iter_unpack(">ii", index):
        assert position in positions and positions[position].last_offset == base + relative, (directory, base)
    timeindex = (directory / segment_file_name(base, ".timeindex")).read_bytes()
    times = {entry.last_offset: entry.max_timestamp for entry in positions.values()}
    for timestamp, relative in struct.iter_unpack(">qi", timeindex):
        assert times.get(base + relative) == timestamp, (directory, base)
    assert all(int(snapshot.stem) <= end for snapshot in directory.glob("*.snapshot")), directory
    epochs, problems = decode_leader_epoch_checkpoint((directory / "leader-epoch-checkpoint").read_text())
    assert problems == [] and epochs and all(entry["start_offset"] < end for entry in epochs), directory
    starts = sorted((entry["start_offset"], entry["epoch"]) for entry in epochs)
    for entry in entries:  # no batch above the checkpoint's epoch at its offset
        assert entry.leader_epoch <= max(e for start, e in starts if start <= entry.base_offset), entry


def test_faulted_copies_keep_their_files_consistent(anomalous_root, replica_truth):
    for row in replica_truth:
        copy = _copy(anomalous_root, row)
        if row["rule_code"] == "REP-003":  # on the leader: every follower's copy ends before it
            followers = [
                broker / copy.name
                for broker in anomalous_root.glob("broker-*")
                if broker != copy.parent and (broker / copy.name).is_dir()
            ]
            assert len(followers) == 2
            ends = [max(entry.last_offset for entry in log_entries(follower)) + 1 for follower in followers]
            assert max(ends) == row["base_offset"]
            assert max(entry.last_offset for entry in log_entries(copy)) >= row["base_offset"]
            for follower, end in zip(followers, ends, strict=True):
                _assert_consistent(follower, end - 1)
            continue
        reference = _reference(anomalous_root, row)
        assert copy != reference
        at = row["base_offset"]
        _assert_consistent(copy, at)
        theirs = {entry.base_offset: entry for entry in log_entries(reference)}
        ours = {entry.base_offset: entry for entry in log_entries(copy)}
        departed = sorted(offset for offset, entry in ours.items() if theirs[offset] != entry)
        assert departed and departed[0] == at, row
        if row["rule_code"] == "REP-002":  # the tail under a lower leader epoch, other bytes
            assert all(ours[offset].leader_epoch < theirs[offset].leader_epoch for offset in ours if offset >= at)
            assert max(ours) < max(theirs) or ours[max(ours)] != theirs[max(ours)]
        else:  # one batch, another base sequence, same leader epoch
            assert departed == [at]
            assert ours[at].leader_epoch == theirs[at].leader_epoch
            assert ours[at].base_sequence != theirs[at].base_sequence
