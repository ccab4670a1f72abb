"""Conformance against a real three-broker cluster (tests/kafka_broker/cluster_session.py): replication factor 3, a
leader and a coordinator SIGKILLed while clients write, a compacted topic the cleaners have cleaned twice.

Its three log dirs, as the clean stops left them, are audited by the installed `produce-audit run` with the shipped
defaults and `audit.compacted_topics` naming the compacted topic, as an operator would: once all together, and
once each broker alone, and the copy of one broker's log dir taken while producers wrote to it; and a copy of the
three log dirs in which one byte of a follower's copy of a batch is flipped. All in one run: each broker's log dir,
the live copy and the damaged copy of the three are copied with a cluster id of their own in meta.properties, so
the run audits the cluster, four clusters of one broker each and a damaged cluster. The audit never mixes
clusters, and one Spark start costs less than six.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from tests.kafka_broker import corruption, jvm, ledger
from tests.kafka_broker.audits import Audit, audits

pytestmark = pytest.mark.broker
INTERNAL = ("__consumer_offsets", "__transaction_state", "__cluster_metadata")
COMPACTED = "compacted"  # tests/kafka_broker/cluster_session.py
ALONE = "-alone-broker-"  # in the cluster id of each broker's copy
LIVE = "-live-copy-"  # in the cluster id of the live copy
DUMPED = "dump-text-broker-"  # the cluster id of each broker's kafka-dump-log text
DAMAGED = "-flipped-follower"  # in the cluster id of the copy of the three log dirs with a follower's byte flipped
FLIPPED = ("idempotent", 1)  # the partition of that byte
# Rules that read the files beside the segments (snapshots, indexes, checkpoints): dump text carries none.
SIDE_FILE_RULES = ("SNP-", "IDX-", "SEG-", "LEP-", "LSO-003")
TRANSACTION_COLUMNS = ["topic", "partition", "producer_id", "first_offset", "last_offset", "outcome"]
# What docs/collecting-logs.md ("A consistent copy") says a copy taken while the broker writes may show above INFO,
# and why; each only on the last segment of its partition, the one the broker was appending to.
LIVE_COPY = {
    "FMT-001": "the active segment grew while it was read: a partial last entry",
    "FMT-012": "a segment rolled or was deleted between listing and reading",
    "SNP-002": "a segment rolled or was deleted between listing and reading: its snapshot",
    "IDX-001": ".txnindex copied before the .log that got a new ABORT",
    "IDX-003": ".txnindex copied after the .log",
    "SEG-003": "the cleaner swapped a segment",
    "SEG-004": ".index of the active segment: entries past the copied log",
    "SEG-005": ".timeindex of the active segment: entries past the copied log",
    "XTX-002": "a data partition copied before its marker, __transaction_state after the Prepare* record",
}
# ... and at these severities only: a missing marker after a Complete* record is ERROR, not a copy's trace
LIVE_COPY_SEVERITY = {"XTX-002": "WARN"}


@pytest.fixture(scope="session")
def cluster_run(tmp_path_factory):
    reason = jvm.missing()
    if reason:
        pytest.skip(f"no Kafka broker: {reason}")
    pytest.importorskip("confluent_kafka", reason="the librdkafka client (pip install -e '.[test]')")
    from tests.kafka_broker.cluster_session import run_all

    return run_all(tmp_path_factory.mktemp("kafka-cluster") / "run")


@pytest.fixture(scope="session")
def truth(cluster_run) -> dict:
    return ledger.read(cluster_run.ground_truth)


@dataclass(frozen=True)
class FlippedFollower:
    log_dirs: tuple[Path, ...]  # the copies of broker 1, 2, 3
    audited: int  # the replica of FLIPPED the audit reads (audit.replica_choice: leader_epoch)
    broker: int  # the follower whose copy holds the flipped byte
    segment: str  # its file name
    base_offset: int  # of the damaged batch
    position: int  # of the damaged batch in the segment


@pytest.fixture(scope="session")
def flipped_follower(cluster_run, tmp_path_factory) -> FlippedFollower:
    """The three log dirs copied, with one byte of a record's value flipped in a follower's copy of a batch of
    FLIPPED: a copy that would be read if that follower became the leader."""
    root = tmp_path_factory.mktemp("flipped-follower")
    copies = []
    for node, log_dir in enumerate(cluster_run.log_dirs, start=1):
        copy = root / f"broker-{node}"
        shutil.copytree(log_dir, copy, copy_function=shutil.copy2)
        _rename_cluster(copy, DAMAGED)
        copies.append(copy)
    partition = f"{FLIPPED[0]}-{FLIPPED[1]}"
    replicas = {node: corruption.batches(copy / partition) for node, copy in enumerate(copies, start=1)}
    # the default replica choice: the highest leader epoch, then the longest log, then the lowest broker id
    ranks = {
        node: (max(b.leader_epoch for b in batches), max(b.last_offset for b in batches), -node)
        for node, batches in replicas.items()
    }
    audited = max(ranks, key=ranks.__getitem__)
    follower = max(node for node in replicas if node != audited)
    data = [b for b in replicas[follower] if not b.is_control]
    batch = data[len(data) // 2]
    corruption.flip_payload_byte(batch)
    return FlippedFollower(tuple(copies), audited, follower, batch.segment.name, batch.base_offset, batch.position)


@pytest.fixture(scope="session")
def audited(cluster_run, flipped_follower, tmp_path_factory) -> Audit:
    """One run over the three log dirs, over each one's copy as a cluster of its own, and over the damaged copy of
    the three."""
    root = tmp_path_factory.mktemp("cluster-audit")
    conf = root / "conf.yaml"
    conf.write_text(f'audit:\n  compacted_topics: ["{COMPACTED}"]\n')
    copies = []
    for node, log_dir in enumerate(cluster_run.log_dirs, start=1):
        copy = root / "alone" / f"broker-{node}"
        shutil.copytree(log_dir, copy, copy_function=shutil.copy2)
        _rename_cluster(copy, f"{ALONE}{node}")
        copies.append(copy)
    live = root / "live" / "broker"
    shutil.copytree(cluster_run.live_copy, live, copy_function=shutil.copy2)
    _rename_cluster(live, f"{LIVE}1")
    (root / "run").mkdir()
    dumps = [(f"{DUMPED}{node}", dump) for node, dump in enumerate(cluster_run.dumps, start=1)]
    inputs = [*cluster_run.log_dirs, *copies, live, *dumps, *flipped_follower.log_dirs]
    (audit,) = audits([(inputs, root / "run" / "wh")], conf)
    return audit


def _rename_cluster(log_dir: Path, suffix: str) -> None:
    meta = log_dir / "meta.properties"
    meta.write_text(
        "".join(
            f"{line}{suffix}\n" if line.startswith("cluster.id=") else f"{line}\n"
            for line in meta.read_text().splitlines()
        )
    )


def _clusters(audit: Audit, marked: str | None) -> Audit:
    """The rows of the clusters whose id holds `marked`; None: of the cluster itself."""

    def keep(cluster_id: pd.Series) -> pd.Series:
        if marked is None:
            return ~cluster_id.str.contains("|".join((ALONE, LIVE, DUMPED, DAMAGED)))
        return cluster_id.str.contains(marked)

    return Audit({name: frame[keep(frame.cluster_id)] for name, frame in audit.tables.items()})


@pytest.fixture(scope="session")
def together(audited) -> Audit:
    return _clusters(audited, None)


@pytest.fixture(scope="session")
def alone(audited) -> Audit:
    return _clusters(audited, ALONE)


@pytest.fixture(scope="session")
def live(audited) -> Audit:
    return _clusters(audited, LIVE)


@pytest.fixture(scope="session")
def dumped(audited) -> Audit:
    return _clusters(audited, DUMPED)


@pytest.fixture(scope="session")
def damaged(audited) -> Audit:
    return _clusters(audited, DAMAGED)


def _above_info(audit: Audit) -> set[tuple]:
    findings = audit.findings(above_info=True)
    return {
        (f.cluster_id, f.broker_id, f.topic, f.partition, f.rule_code, f.severity, f.message)
        for f in findings.itertuples()
    }


def test_the_three_brokers_audited_together_raise_nothing_above_info(together):
    assert _above_info(together) == set()
    assert set(together.tables["batches"].broker_id) == {1, 2, 3}


def test_each_broker_audited_alone_raises_nothing_above_info(alone):
    assert _above_info(alone) == set()
    assert alone.tables["batches"].cluster_id.nunique() == 3


def test_a_flipped_byte_in_a_followers_copy_is_a_crc_mismatch_of_that_copy(together, damaged, flipped_follower):
    """The batch checks read one replica per partition; every copy's CRC is checked all the same, and the damaged
    follower's is told by its broker and file, with nothing else new above INFO."""
    topic, partition = FLIPPED
    summary = damaged.tables["partition_summary"]
    summary = summary[(summary.topic == topic) & (summary.partition == partition)]
    assert summary.broker_id.tolist() == [flipped_follower.audited] != [flipped_follower.broker]

    def keys(audit: Audit) -> set[tuple]:
        return {
            (f.broker_id, f.topic, f.partition, f.rule_code, f.severity, f.base_offset)
            for f in audit.findings(above_info=True).itertuples()
        }

    assert keys(damaged) - keys(together) == {
        (flipped_follower.broker, topic, partition, "FMT-004", "ERROR", flipped_follower.base_offset)
    }
    (crc,) = damaged.findings(above_info=True).query("rule_code == 'FMT-004'").itertuples()
    assert Path(crc.segment).name == flipped_follower.segment
    assert Path(crc.segment).parent.parent.name == f"broker-{flipped_follower.broker}"
    assert crc.position == flipped_follower.position
    assert f"broker {flipped_follower.broker}'s copy" in crc.message


def test_every_acknowledged_record_is_in_every_replica(together, truth):
    """Outside the compacted topic, whose cleaner removes superseded records: each offset a client was told of lies
    in a batch of each broker's copy of its partition."""
    batches = together.tables["batches"]
    missing = []
    for entry in truth["entries"]:
        for key, offsets in entry["offsets"].items():
            topic, partition = key.rsplit("-", 1)
            if topic == COMPACTED:
                continue
            for broker in (1, 2, 3):
                held = batches[(batches.topic == topic) & (batches.partition == int(partition))]
                held = held[held.broker_id == broker]
                starts, ends = held.base_offset.to_numpy(), held.last_offset.to_numpy()
                missing += [(broker, key, o) for o in offsets if not ((starts <= o) & (o <= ends)).any()]
    assert missing == []
    assert sum(len(o) for e in truth["entries"] for o in e["offsets"].values()) >= 6000


def _client_transactions(truth: dict) -> set[tuple]:
    """(topic, partition, first offset, outcome) of every transaction the clients ended outside the compacted topic,
    whose cleaner removes aborted data and, later, markers."""
    expected = set()
    for entry in truth["entries"]:
        if entry["transactional_id"] is None:
            continue
        for key, offsets in entry["offsets"].items():
            topic, partition = key.rsplit("-", 1)
            if topic != COMPACTED:
                expected.add((topic, int(partition), min(offsets), entry["outcome"]))
    return expected


def test_every_client_transaction_is_reconstructed_on_every_replica(alone, truth):
    transactions = alone.tables["transactions"]
    transactions = transactions[~transactions.topic.isin([*INTERNAL, COMPACTED])]
    expected = _client_transactions(truth)
    for cluster, rows in transactions.groupby("cluster_id"):
        found = {(t.topic, t.partition, t.first_offset, t.outcome) for t in rows.itertuples()}
        assert found == expected, cluster
    assert transactions.cluster_id.nunique() == 3
    assert len(expected) >= 20


def test_a_live_copy_shows_only_what_a_copy_of_a_writing_broker_may(live, truth):
    """Findings above INFO on the copy taken while producers wrote: only those the docs expect of a live copy, on
    the segment the broker was appending to."""
    findings = live.findings(above_info=True)
    expected = findings.rule_code.isin(list(LIVE_COPY)) & (
        findings.rule_code.map(LIVE_COPY_SEVERITY).fillna(findings.severity) == findings.severity
    )
    unexpected = findings[~expected]
    assert unexpected[["topic", "partition", "rule_code", "severity", "message"]].to_dict("records") == []
    batches = live.tables["batches"]
    last_segments = batches.groupby(["topic", "partition"]).segment_base_offset.max()
    elsewhere = [
        (f.topic, f.partition, f.rule_code, f.segment)
        for f in findings.itertuples()
        if f.segment is not None and int(Path(f.segment).name[:20]) != last_segments.get((f.topic, f.partition))
    ]
    assert elsewhere == []
    # a transaction the copy caught between its data and its marker: its data is in the last segment
    undecided = [
        (f.topic, f.partition, f.base_offset)
        for f in findings[findings.rule_code == "XTX-002"].itertuples()
        if f.base_offset < last_segments.get((f.topic, f.partition))
    ]
    assert undecided == []
    assert len(batches) >= 100


def _per_broker(audit: Audit, table: str, columns: list[str]) -> dict[int, list[tuple]]:
    frame = audit.tables[table]
    frame = frame[~frame.topic.isin(INTERNAL)] if table == "findings" else frame
    return {
        int(broker): sorted(map(tuple, rows[columns].astype(object).where(rows[columns].notna(), None).values), key=str)
        for broker, rows in frame.groupby(frame.cluster_id.str[-1].astype(int))
    }


def test_each_brokers_dump_text_gives_the_verdicts_and_transactions_of_its_segments(alone, dumped):
    """Every finding of a broker's segments that does not need the files beside them, and its transactions."""
    keys = ["topic", "partition", "rule_code", "severity", "base_offset"]
    from_segments = Audit({"findings": alone.findings()[~alone.findings().rule_code.str.startswith(SIDE_FILE_RULES)]})
    assert _per_broker(dumped, "findings", keys) == _per_broker(from_segments, "findings", keys)
    assert _per_broker(dumped, "transactions", TRANSACTION_COLUMNS) == _per_broker(
        alone, "transactions", TRANSACTION_COLUMNS
    )
    assert dumped.tables["batches"].cluster_id.nunique() == 3


def test_no_transaction_is_torn_across_its_partitions(together, alone):
    """Not even those of the compacted topic whose markers the cleaner removed once their data was gone."""
    for audit in (together, alone):
        decisions = audit.tables["global_transactions"]
        assert len(decisions) >= 20
        assert decisions[decisions.is_torn].empty


def test_the_faults_happened(truth):
    """The killed leader and coordinator were started again, and both cleaner passes ran on every broker."""
    notes = truth["notes"]
    killed = {notes[fault]["node_id"] for fault in ("leader_killed", "coordinator_killed")}
    assert all(notes["broker_starts"][str(node)] >= 2 for node in killed)
    assert notes["compacted"]["cleaned_by_every_broker"]
    entry = next(e for e in truth["entries"] if e["workload"] == "v1-coordinator-killed")
    assert entry["outcome"] in (ledger.COMMITTED, ledger.ABORTED)
