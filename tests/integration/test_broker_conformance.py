"""Conformance against a real Apache Kafka broker: the audit of logs it wrote, with clients whose outcomes we know.

One broker life per test session (tests/kafka_broker/session.py) runs every workload; its log dir, the
kafka-dump-log text of its segments and damaged copies of one of its partitions are audited by the installed
`produce-audit run` with default settings (two runs in all), and the tables are read back from the warehouse.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from deltalake import DeltaTable

from pipeline.sources.kafka_wire.connection import CLIENT_ID
from tests.kafka_broker import corruption, jvm, ledger
from tests.kafka_broker.audits import NOT_INFO, Audit, audits, read_audit
from tests.kafka_broker.wire_audits import COORDINATOR_TOPICS, EXPIRING_TOPIC

pytestmark = pytest.mark.broker
REPO = Path(__file__).resolve().parents[2]
INTERNAL = ("__consumer_offsets", "__transaction_state", "__cluster_metadata")
# Rules that read the files beside the segments (snapshots, indexes, checkpoints): dump text carries none.
SIDE_FILE_RULES = ("SNP-", "IDX-", "SEG-004", "SEG-005", "SEG-006", "LEP-", "LSO-003")
# Batch header fields a Fetch response carries as the segment holds them, and where the row was read.
HEADER_COLUMNS = [
    "topic", "partition", "base_offset", "last_offset", "producer_id", "producer_epoch", "base_sequence",
    "last_sequence", "is_transactional", "is_control", "control_type", "coordinator_epoch", "record_count",
    "base_timestamp", "max_timestamp", "partition_leader_epoch", "attributes", "batch_length", "crc", "crc_valid",
    "entry_status", "size_bytes",
]  # fmt: skip


@pytest.fixture(scope="session")
def broker_run(tmp_path_factory):
    """Start the broker once, run every workload, stop it: the log dir, dumps and ledger of that one life."""
    reason = jvm.missing()
    if reason:
        pytest.skip(f"no Kafka broker: {reason}")
    pytest.importorskip("confluent_kafka", reason="the librdkafka client (pip install -e '.[test]')")
    from tests.kafka_broker.session import run_all

    return run_all(tmp_path_factory.mktemp("kafka-broker") / "run")


@pytest.fixture(scope="session")
def truth(broker_run) -> dict:
    return ledger.read(broker_run.ground_truth)


@pytest.fixture(scope="session")
def v1_transactions(truth) -> list[tuple[int, int]]:
    """(first offset, marker offset) on v1-0 of the six v1-transactions, in the order written."""
    entries = [e for e in truth["entries"] if e["workload"] == "v1-transactions"]
    return [(min(e["offsets"]["v1-0"]), max(e["offsets"]["v1-0"]) + 1) for e in entries]


@pytest.fixture(scope="session")
def both_runs(broker_run, v1_transactions, tmp_path_factory) -> tuple[Audit, Audit]:
    """(combined, dumped): one run over the broker's log dir and, as topics of their own, the damaged copies of its
    v1-0; and one over the kafka-dump-log text of its segments.

    The copies share a run with the broker's log dir to save a Spark start; their topic names appear in no
    coordinator record, so their findings are only ever compared with those of the undamaged copy.
    """
    copies = tmp_path_factory.mktemp("damaged") / "logs"
    corruption.damaged_copies(broker_run.log_dir / "v1-0", copies, v1_transactions)
    combined, dumped = audits(
        [
            ([broker_run.log_dir, copies], tmp_path_factory.mktemp("broker-wh") / "wh"),
            ([broker_run.dumps], tmp_path_factory.mktemp("dump-wh") / "wh"),
        ]
    )
    return combined, dumped


@pytest.fixture(scope="session")
def fetched(broker_run) -> Audit:
    """The tables of `run --input kafka://...` (SASL/SCRAM) while the broker served, after every workload: a
    nightly run that went on from a run while the Java client's V2 workloads wrote."""
    earlier, audited = broker_run.wire.earlier, broker_run.wire.audited
    assert earlier.exit_code == 0, earlier.stderr[-3000:]
    assert audited.exit_code == 0, audited.stderr[-3000:]
    return read_audit(audited.warehouse)


@pytest.fixture(scope="session")
def combined(both_runs) -> Audit:
    return both_runs[0]


@pytest.fixture(scope="session")
def binary(combined) -> Audit:
    return combined.topics(lambda topic: topic not in corruption.COPIES)


@pytest.fixture(scope="session")
def damaged(combined) -> Audit:
    return combined.topics(lambda topic: topic in corruption.COPIES)


@pytest.fixture(scope="session")
def dumped(both_runs) -> Audit:
    return both_runs[1]


def _keys(findings: pd.DataFrame) -> set[tuple]:
    return {
        (f.topic, f.partition, f.rule_code, f.severity, None if pd.isna(f.base_offset) else int(f.base_offset))
        for f in findings.itertuples()
    }


def _client_topics(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[~frame.topic.isin(INTERNAL)]


# INFO findings the workloads cause on purpose, each as the rule describes it: (topic, rule, count).
EXPECTED_INFO = {
    # a fenced instance (v1-zombie) and a timed-out transaction (v1-timeout), two partitions each: the
    # coordinator's ABORT one epoch above the data
    ("v1", "EPO-004", 4),
    # their V2 twins (v2-zombie, v2-timeout): this broker writes the ABORT one epoch above the data, as any TV2
    # abort, and the new instance's data two above it tells the fence (spec §3.4, §6.3)
    ("v2", "EPO-004", 4),
    # the two timeouts: PrepareAbort one epoch above the Ongoing record, past its start plus the timeout
    ("__transaction_state", "XTX-010", 2),
    # DeleteRecords removed the head of retention-0: its first retained batch continues a sequence
    ("retention", "SEQ-006", 1),
    # ... and the snapshot of the first retained segment now lies below the new log start offset
    ("retention", "SNP-002", 1),
}


def test_clean_broker_logs_raise_nothing_above_info(binary):
    above_info = binary.findings(above_info=True)
    assert _keys(above_info) == set()


def test_clean_broker_logs_raise_the_expected_info_findings(binary):
    info = binary.findings()
    info = info[(info.severity == "INFO") & (info.rule_code != "SNP-005")]
    found = {(topic, rule, count) for (topic, rule), count in info.groupby(["topic", "rule_code"]).size().items()}
    assert found == EXPECTED_INFO


def test_the_snapshot_written_at_shutdown_holds_the_transaction_open_across_the_restart(binary, truth):
    """The clean stop wrote a snapshot with v1-restart's transaction open; the log closes it after (SNP-005)."""
    (entry,) = [e for e in truth["entries"] if e["transactional_id"] == "v1-restart"]
    findings = binary.findings()
    closed_later = findings[(findings.topic == "restart") & (findings.rule_code == "SNP-005")]
    found = {(f.partition, int(f.base_offset)) for f in closed_later.itertuples()}
    assert found == {(int(key.rsplit("-", 1)[1]), max(offsets) + 1) for key, offsets in entry["offsets"].items()}


def test_broker_snapshots_match_the_replay(binary):
    """Including after markers that changed the epoch, which clear the producer's batch window (spec §2.7)."""
    findings = binary.findings()
    assert _keys(findings[findings.rule_code.str.startswith("SNP-") & findings.severity.isin(NOT_INFO)]) == set()


def _first_batches(audit: Audit) -> dict[tuple[str, int], int]:
    """The first retained offset of each partition: retention deleted what lies below it."""
    batches = audit.tables["batches"]
    return {(t, int(p)): int(o) for (t, p), o in batches.groupby(["topic", "partition"]).base_offset.min().items()}


def _client_transactions(truth: dict, first_batches: dict[tuple[str, int], int]) -> set[tuple]:
    """(topic, partition, first offset, outcome) of every transaction the clients ended, where it is retained."""
    expected = set()
    for entry in truth["entries"]:
        if entry["transactional_id"] is None:
            continue
        for key, offsets in entry["offsets"].items():
            topic, partition = key.rsplit("-", 1)
            retained = [o for o in offsets if o >= first_batches[(topic, int(partition))]]
            if retained:
                expected.add((topic, int(partition), min(retained), entry["outcome"]))
    return expected


def test_every_client_transaction_is_reconstructed_with_its_outcome(binary, truth):
    transactions = _client_topics(binary.tables["transactions"])
    found = {(t.topic, t.partition, t.first_offset, t.outcome) for t in transactions.itertuples()}
    assert found == _client_transactions(truth, _first_batches(binary))
    assert len(found) >= 60


def test_java_transactions_carry_the_producer_id_and_epoch_the_client_held(binary, truth):
    """The V2 client's producer id and data epoch (read from its TransactionManager) against the audit's."""
    by_start = {(t.topic, t.partition, t.first_offset): t for t in binary.tables["transactions"].itertuples()}
    checked = 0
    for entry in truth["entries"]:
        if entry.get("producer_id") is None:
            continue
        for key, offsets in entry["offsets"].items():
            topic, partition = key.rsplit("-", 1)
            row = by_start[(topic, int(partition), min(offsets))]
            assert (row.producer_id, row.producer_epoch) == (entry["producer_id"], entry["producer_epoch"]), key
            assert row.transaction_version.startswith("2"), (key, row.transaction_version)
            # Transactions V2: every marker carries the epoch the coordinator bumped at the end of the transaction
            assert row.marker_epoch == entry["producer_epoch"] + 1, key
            checked += 1
    assert checked >= 20


def test_transactional_offset_commits_follow_their_transactions(binary, truth):
    """send_offsets_to_transaction: each producer's __consumer_offsets transactions end as its data did."""
    transactions = binary.tables["transactions"]
    offsets_workloads = [e for e in truth["entries"] if e["workload"] in ("v1-offsets", "v2-offsets")]
    expected = {}
    for entry in offsets_workloads:
        ((key, offsets),) = entry["offsets"].items()
        topic, partition = key.rsplit("-", 1)
        start = (transactions.topic == topic) & (transactions.partition == int(partition))
        (producer_id,) = transactions[start & (transactions.first_offset == min(offsets))].producer_id
        expected.setdefault(producer_id, []).append(entry["outcome"])
    commits = transactions[transactions.topic == "__consumer_offsets"].sort_values("first_offset")
    found = {pid: list(rows.outcome) for pid, rows in commits.groupby("producer_id")}
    assert found == expected
    assert sorted(map(len, found.values())) == [3, 3]


def test_idempotent_producers_wrote_every_acknowledged_record_once(binary, truth):
    """No duplicate and no hole: each partition ends where its acknowledged records (and markers) end."""
    acknowledged: dict[str, int] = {}
    for entry in truth["entries"]:
        for key, offsets in entry["offsets"].items():
            acknowledged[key] = acknowledged.get(key, 0) + len(offsets)
    summary = binary.tables["partition_summary"]
    ends = {f"{r.topic}-{r.partition}": r.log_end_offset for r in summary.itertuples()}
    for key in ("idempotent-0", "idempotent-1", "idempotent-2"):
        assert ends[key] == acknowledged[key]
    for key in ("restart-0", "restart-1"):  # and the COMMIT marker of the transaction open across the restart
        assert ends[key] == acknowledged[key] + 1
    findings = binary.findings()
    # restart's SNP-005 (the shutdown snapshot with a transaction open) has a test of its own below
    idempotent = findings.topic.isin(["idempotent", "restart"]) & (findings.rule_code != "SNP-005")
    assert _keys(findings[idempotent]) == set()


def _producer_state_against_the_broker(binary, truth) -> list[tuple]:
    """(topic, partition, producer id, field, audit value, broker value) for every difference from DescribeProducers."""
    state = binary.tables["producer_state"].set_index(["topic", "partition", "producer_id"])
    differences = []
    for broker in truth["notes"]["describe_producers"]:
        row = state.loc[(broker["topic"], broker["partition"], broker["producer_id"])]
        audit_values = {
            "producer_epoch": row.producer_epoch,
            "last_sequence": row.last_sequence,
            "coordinator_epoch": -1 if pd.isna(row.coordinator_epoch) else row.coordinator_epoch,
            "current_transaction_start_offset": -1
            if pd.isna(row.current_txn_start_offset)
            else row.current_txn_start_offset,
        }
        for name, value in audit_values.items():
            if int(value) != broker[name]:
                differences.append(
                    (broker["topic"], broker["partition"], broker["producer_id"], name, int(value), broker[name])
                )
    return differences


def test_producer_state_has_the_epochs_and_transactions_the_broker_reports(binary, truth):
    assert [d for d in _producer_state_against_the_broker(binary, truth) if d[3] != "last_sequence"] == []
    assert len(truth["notes"]["describe_producers"]) >= 25


def test_producer_state_has_the_last_sequences_the_broker_reports(binary, truth):
    assert _producer_state_against_the_broker(binary, truth) == []


def test_txnindex_holds_one_entry_per_aborted_transaction(binary, broker_run):
    """The broker's .txnindex files against the markers: no IDX finding, and as many entries as aborts retained."""
    findings = binary.findings()
    assert _keys(findings[findings.rule_code.str.startswith("IDX-")]) == set()
    entries = sum(path.stat().st_size // 34 for path in broker_run.log_dir.glob("*/*.txnindex"))
    aborted = binary.tables["transactions"].outcome == "ABORTED"
    assert entries == aborted.sum() >= 15


TRANSACTION_COLUMNS = [
    "topic", "partition", "producer_id", "producer_epoch", "first_offset", "last_offset", "marker_offset",
    "marker_epoch", "coordinator_epoch", "outcome", "batch_count", "record_count", "transaction_version",
]  # fmt: skip


def _rows(frame: pd.DataFrame, columns: list[str]) -> list[tuple]:
    return sorted(tuple(None if pd.isna(v) else v for v in row) for row in frame[columns].itertuples(index=False))


def test_dump_text_reconstructs_the_same_transactions(binary, dumped):
    assert _rows(dumped.tables["transactions"], TRANSACTION_COLUMNS) == _rows(
        binary.tables["transactions"], TRANSACTION_COLUMNS
    )


def test_dump_text_gives_the_same_verdicts(binary, dumped):
    """Every finding of the segments that does not need the files beside them, and nothing else."""
    findings = binary.findings()
    from_segments = findings[~findings.rule_code.str.startswith(SIDE_FILE_RULES)]
    assert _keys(dumped.findings()) == _keys(from_segments)


def _added(damaged: Audit, copy: str) -> set[tuple]:
    """(rule, severity, offset) of the findings on `copy` that the undamaged copy does not have."""
    findings = damaged.findings()

    def keys(topic):
        return {(rule, severity, offset) for _, _, rule, severity, offset in _keys(findings[findings.topic == topic])}

    return keys(copy) - keys("pristine")


def test_a_torn_marker_is_a_truncated_tail_and_the_index_and_snapshots_disagree_with_the_replay(
    damaged, v1_transactions
):
    """The COMMIT of transaction 2 cut in half: its data now runs into transaction 3 and ends with its ABORT."""
    (_, commit), (first, abort) = v1_transactions[2], v1_transactions[3]
    assert _added(damaged, "truncated") == {
        ("FMT-001", "ERROR", commit),  # the torn marker ends a segment that is not the active one
        ("SEG-005", "WARN", None),  # the segment's .timeindex points at the torn marker
        ("IDX-002", "CRITICAL", abort),  # the broker indexed the ABORT from transaction 3 on, the replay from 2
        ("SNP-003", "ERROR", first),  # the snapshots at the next two segments hold no open transaction
        ("SNP-003", "ERROR", abort),
    }


def test_flipped_bits_in_a_batch_are_a_crc_mismatch(damaged, v1_transactions):
    assert _added(damaged, "bitflip") == {("FMT-004", "ERROR", v1_transactions[1][0])}


def test_a_dropped_middle_segment_is_a_gap_in_offsets_and_sequences(damaged, v1_transactions):
    """The segment of committed transaction 4 removed with its files."""
    after = v1_transactions[5][0]
    assert _added(damaged, "dropped") == {
        ("FMT-012", "WARN", after),
        ("SEQ-001", "ERROR", after),  # the producer's sequences jump over the lost batch
        ("SNP-003", "WARN", after),  # the next snapshot remembers the lost batch as the producer's last
    }


def test_a_deleted_abort_marker_is_told_by_the_snapshot_after_it(damaged, v1_transactions):
    """Transaction 3's ABORT was alone in its segment; without it the replay merges its data into transaction 4.

    Only the gap and the snapshot written at the next segment, which holds no open transaction, show it.
    """
    (first, abort), (_, commit) = v1_transactions[3], v1_transactions[4]
    assert _added(damaged, "markerless") == {("FMT-012", "WARN", abort + 1), ("SNP-003", "ERROR", abort + 1)}
    transactions = damaged.tables["transactions"]
    merged = transactions[(transactions.topic == "markerless") & (transactions.first_offset == first)]
    assert list(zip(merged.marker_offset, merged.outcome, strict=True)) == [(commit, "COMMITTED")]


def _header_rows(batches: pd.DataFrame) -> pd.DataFrame:
    return batches[HEADER_COLUMNS].sort_values(HEADER_COLUMNS[:3]).reset_index(drop=True)


def test_every_fetched_batch_equals_the_log_dirs_byte_for_byte(binary, fetched, broker_run):
    """Every batch of every topic but the KRaft log (which Fetch does not serve), header fields and CRC, from the
    log start on: Fetch hands out the bytes the leader stores. Rows carry the leader's id and where they came from."""
    wire = fetched.tables["batches"]
    stored = binary.tables["batches"]
    first = wire.groupby(["topic", "partition"]).base_offset.min().rename("first").reset_index()
    retained = stored.merge(first, on=["topic", "partition"])
    retained = retained[retained.last_offset >= retained["first"]]
    assert set(wire.topic) == set(stored.topic) - {"__cluster_metadata"}
    assert {"idempotent", "v1", "v2", "restart", "retention", *COORDINATOR_TOPICS} <= set(wire.topic)
    pd.testing.assert_frame_equal(_header_rows(wire), _header_rows(retained), check_dtype=False)
    assert set(wire.broker_id) == {1} and set(wire.source_format) == {"fetch"}
    assert wire.source_file.str.startswith(f"{broker_run.wire.uri}/").all()


def test_the_protocol_gives_the_log_dirs_transactions_and_verdicts(binary, fetched):
    """The same transactions, the coordinator's records among them, and every finding of the log dir but those of
    the rules that read the files beside the segments and of the KRaft log, which Fetch does not serve."""
    assert _rows(fetched.tables["transactions"], TRANSACTION_COLUMNS) == _rows(
        binary.tables["transactions"], TRANSACTION_COLUMNS
    )
    assert fetched.tables["transactions"].transaction_version.str.endswith("/coordinator").any()
    findings = binary.findings()
    from_segments = findings[
        ~findings.rule_code.str.startswith(SIDE_FILE_RULES) & (findings.topic != "__cluster_metadata")
    ]
    assert _keys(fetched.findings()) == _keys(from_segments)
    assert {("__transaction_state", "XTX-010")} <= {(f.topic, f.rule_code) for f in fetched.findings().itertuples()}


def test_a_nightly_protocol_run_goes_on_from_the_rows_and_replay_of_the_run_before(broker_run, fetched):
    """The partitions the V2 workloads did not write since are kept and their replay goes on; its tables are those
    of a run over the whole log (the tests above hold them to the log dir's)."""
    log = broker_run.wire.audited.stderr
    resumed = re.search(r"(\d+) partition\(s\) go on from the rows an earlier run fetched", log)
    going_on = re.search(r"(\d+) going on from the kept replay", log)
    assert resumed and going_on and int(resumed.group(1)) > 0 and int(going_on.group(1)) > 0, log[-3000:]


def test_a_wrong_password_ends_the_run_with_one_line_naming_the_cluster(broker_run):
    refused = broker_run.wire.refused
    errors = [line for line in refused.stderr.splitlines() if "error" in line.lower()]
    assert refused.exit_code == 2, refused.stderr[-3000:]
    assert errors == [errors[0]] and broker_run.wire.uri in errors[0] and "refused the credentials" in errors[0], errors
    assert "not-the-password" not in refused.stderr
    assert not (refused.warehouse / "batches").exists()


def test_the_protocol_audit_sends_only_the_read_only_requests_its_docs_list(broker_run):
    """What the broker's request log saw of the audit's client id: Fetch at READ_UNCOMMITTED, and metadata and
    offsets; never a Produce, a group or a commit, and never a Metadata request that may create a topic. The
    docs list exactly these API keys (SASL's and ApiVersions are answered before the request log)."""
    lines = broker_run.requests.read_text().splitlines()
    requests = [json.loads(line.removeprefix("Completed request:")) for line in lines if f'"{CLIENT_ID}"' in line]
    keys = {
        request["requestHeader"]["requestApiKeyName"]: request["requestHeader"]["requestApiKey"] for request in requests
    }
    assert keys == {
        "FETCH": 1, "LIST_OFFSETS": 2, "METADATA": 3, "DESCRIBE_LOG_DIRS": 35, "DESCRIBE_CLUSTER": 60,
        "DESCRIBE_PRODUCERS": 61,
    }  # fmt: skip
    documented = (REPO / "docs" / "collecting-logs.md").read_text().split("**Read-only by construction.**")[1]
    assert set(keys.values()) <= {int(key) for key in re.findall(r"\((\d+)\)", documented.split("\n*")[0])}
    bodies = [(request["requestHeader"]["requestApiKey"], request["request"]) for request in requests]
    assert all(body["isolationLevel"] == 0 and body["replicaId"] == -1 for key, body in bodies if key == 1)
    naming_topics = [body for key, body in bodies if key == 3 and body["topics"]]
    assert naming_topics and not any(body["allowAutoTopicCreation"] for body in naming_topics)


def test_a_producer_its_leader_expired_while_its_batches_remain_has_lost_its_state(broker_run):
    """A broker that expires idle producers within seconds, audited with the shipped settings (a day, the brokers'
    default): the leader reports no producer for the partition, whose log still holds the producer's batches."""
    expired = broker_run.expired
    assert expired.exit_code == 0, expired.stderr[-3000:]
    audit = read_audit(expired.warehouse)
    (producer,) = audit.tables["producer_state"].itertuples()
    live = DeltaTable(str(expired.warehouse / "live_producers")).to_pandas()
    assert len(live) == 1 and live.producer_id.isna().all() and live.settled.all()
    assert _keys(audit.findings(above_info=True)) == {(EXPIRING_TOPIC, 0, "LIV-001", "WARN", producer.last_offset)}
    (finding,) = audit.findings(above_info=True).itertuples()
    assert finding.producer_id == producer.producer_id and "holds no state for producer" in finding.message
