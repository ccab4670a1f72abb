"""Conformance of the audit over real broker data in ../shared/realdata.

Each source (a repository's broker data dir, a published dump) is its own cluster, so each is audited
under its own topic prefix in one Spark job.
"""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual
from reference_coordinator import reference_records

from pipeline.audit.engine.run import run_audit
from pipeline.audit.replay.coordinator_records import audited_records, audited_rows
from pipeline.audit.replay.plan import prepare_batches
from pipeline.config import load_settings
from pipeline.sources.dumplog.parser import parse_dump
from pipeline.sources.partition_files.reader import read_partition_files
from pipeline.sources.segments import discover_segments, read_segments
from schemas.batches import BATCHES
from schemas.transaction_log import TRANSACTION_LOG

pytestmark = pytest.mark.realdata
NOT_INFO = ("WARN", "ERROR", "CRITICAL")


def _audit_settings():
    """Topic-kind patterns that also match the `<source>:` prefix each source's topics get here."""
    settings = load_settings().audit
    return settings.model_copy(
        update={
            "coordinator_topics": [f"*{t}" for t in settings.coordinator_topics],
            "kraft_topics": [f"*{t}" for t in settings.kraft_topics],
        }
    )


# Outcomes the brokers printed, read off the dumps: (topic as "<dump file>:<topic>", partition, producer id,
# first data offset or None for an empty marker, marker offset or None for an open transaction, outcome).
DUMP_TRANSACTIONS = {
    ("ableasdale-kafka-transactions-README-01:transaction-topic", 0, 0, 0, 5, "COMMITTED"),
    ("ableasdale-kafka-transactions-README-02:transaction2-topic", 0, 1, 0, 5, "ABORTED"),
    ("ableasdale-kafka-transactions-README-03:transaction4-topic", 0, 2, 0, None, "OPEN"),
    ("ableasdale-kafka-transactions-README-04:transaction-topic", 0, 0, None, 0, "EMPTY"),
    ("ableasdale-kafka-transactions-README-05:transaction-topic", 0, 0, None, 0, "EMPTY"),
    ("ableasdale-kafka-transactions-README-05:transaction-topic", 0, 0, 1, None, "OPEN"),
    ("ableasdale-kafka-transactions-README-06:transaction-topic", 0, 0, None, 0, "EMPTY"),
    ("ableasdale-kafka-transactions-README-06:transaction-topic", 0, 0, 1, 6, "ABORTED"),
    ("ableasdale-kafka-transactions-README-07:transaction-topic", 0, 0, None, 0, "EMPTY"),
    ("ableasdale-kafka-transactions-README-07:transaction-topic", 0, 0, 1, 6, "ABORTED"),
    ("ableasdale-kafka-transactions-README-07:transaction-topic", 0, 1, 7, 12, "COMMITTED"),
    ("ableasdale-kafka-transactions-README-08:transaction-topic", 0, 0, 0, 5, "ABORTED"),
    ("ableasdale-kafka-transactions-README-10:transaction-topic", 0, 0, 0, None, "OPEN"),
    ("ableasdale-kafka-transactions-README-11:transaction-topic", 0, 0, 0, 5, "COMMITTED"),
    ("faderskd-blog-2023-11-29-kafka-transactions-01:", -1, 2000, 5, 6, "COMMITTED"),
    ("faderskd-blog-2023-11-29-kafka-transactions-02:__consumer_offsets", 47, 2000, 11, 12, "COMMITTED"),
    ("fvaleri-strimzi-debugging-session008-5f15e509-L93:__consumer_offsets", 12, 0, 1, 2, "COMMITTED"),
    ("fvaleri-strimzi-debugging-session008-5f15e509-L93:wc-output", 0, 0, 0, 8, "COMMITTED"),
    ("fvaleri-strimzi-debugging-session008-63aadccc-L104:", -1, 0, 1, 2, "COMMITTED"),
    ("fvaleri-strimzi-debugging-session008-63aadccc-L104:wc-output", 0, 0, 0, 16, "COMMITTED"),
    ("fvaleri-strimzi-debugging-session008-e7fa2b0a-L51:__consumer_offsets", 12, 0, 1, 2, "COMMITTED"),
    ("fvaleri-strimzi-debugging-session008-e7fa2b0a-L51:output-topic", 0, 0, 0, 1, "COMMITTED"),
    ("fvaleri-strimzi-debugging-session010-01:output-topic", 0, 1, 0, 1, "COMMITTED"),
    ("fvaleri-strimzi-debugging-session010-02:__consumer_offsets", 12, 1, 7, 8, "COMMITTED"),
    ("klog-testWithDeepIterationWithControlRecords-L167:transactional-foo", 0, 0, 0, 4, "COMMITTED"),
    ("klog-testWithDeepIterationWithControlRecords-L167:transactional-foo", 0, 0, 5, 6, "COMMITTED"),
    ("strimzi-blog-2023-05-03-kafka-transactions-01:__consumer_offsets", 12, 0, 1, 2, "COMMITTED"),
    ("strimzi-blog-2023-05-03-kafka-transactions-01:output-topic", 0, 0, 0, 1, "COMMITTED"),
}


@pytest.fixture(scope="module")
def dump_tables(spark, realdata):
    """The `batches` and `transaction_log` rows of every published dump, topics prefixed by the dump, in the
    unknown cluster as the ingest places dump text."""
    rows, transaction_log = [], []
    for path in sorted((realdata / "dumplog-text").glob("*.txt")):
        parsed = parse_dump(path.read_text(), path.name)
        rows.extend({**row, "topic": f"{path.stem}:{row['topic']}"} for row in parsed.batches)
        transaction_log.extend({**row, "topic": f"{path.stem}:{row['topic']}"} for row in parsed.transaction_log)
    unknown_cluster = {"cluster_id": ""}
    return (
        spark.createDataFrame(rows, BATCHES).fillna(unknown_cluster),
        spark.createDataFrame(transaction_log, TRANSACTION_LOG).fillna(unknown_cluster),
    )


@pytest.fixture(scope="module")
def dump_audit(dump_tables, scratch):
    batches, transaction_log = dump_tables
    result = run_audit(batches, _audit_settings(), "realdata", scratch("dumps"), transaction_log=transaction_log)
    findings = result.findings.collect()
    transactions = result.transactions.collect()
    result.release()
    return findings, transactions


def _by_repository(df):
    """Prefix topics with the repository their files came from: each is a cluster of its own."""
    repository = F.regexp_extract("source_file", r"broker-segments/([^/]+)/", 1)
    return df.withColumn("topic", F.concat(repository, F.lit(":"), F.col("topic")))


def test_broker_segments_and_their_snapshots_raise_nothing_above_info(spark, realdata, scratch):
    """Clean broker-written logs: no WARN or worse, and every broker-written snapshot matches the replay."""
    settings = load_settings()
    roots = [str(p) for p in sorted((realdata / "broker-segments").iterdir()) if "+" in p.name]
    assert len(roots) == 6
    side = read_partition_files(spark, discover_segments(roots, settings.ingest).listings)
    snapshots = _by_repository(side.producer_snapshots)
    result = run_audit(
        _by_repository(read_segments(spark, roots, settings)),
        _audit_settings(),
        "realdata",
        scratch("segments"),
        txn_index=_by_repository(side.txn_index),
        producer_snapshots=snapshots,
        file_problems=_by_repository(side.file_problems),
    )
    findings = result.findings.collect()
    audited_partitions = result.partition_summary.where(F.col("batch_count") > 0).count()
    batches = result.partition_summary.agg(F.sum("batch_count")).first()[0]
    result.release()
    assert [(f.topic, f.rule_code, f.message) for f in findings if f.severity in NOT_INFO] == []
    # normal behaviour is not a finding in bulk: at most one INFO finding per 1,000 batches
    assert sum(f.severity == "INFO" for f in findings) * 1000 <= batches, [f.rule_code for f in findings]
    assert [f for f in findings if f.rule_code.startswith("SNP")] == []
    assert audited_partitions >= 9
    assert snapshots.where(F.col("producer_id").isNotNull()).count() >= 90


def test_dumped_transactions_reconstruct_to_the_printed_outcomes(dump_audit):
    _, transactions = dump_audit
    found = {(t.topic, t.partition, t.producer_id, t.first_offset, t.marker_offset, t.outcome) for t in transactions}
    assert found == DUMP_TRANSACTIONS


# Two posts print the __consumer_offsets-12 batch lines of one run (CreateTime 1665506597950, October 2022) over
# the record lines of a later one (1680383688085, April 2023); their batches do not rebuild to the printed CRC
# either. FMT-008 sees the record timestamps disagree with the batch's maxTimestamp: (dump, rule, position).
SPLICED_DUMP_BATCHES = {
    ("fvaleri-strimzi-debugging-session008-e7fa2b0a-L51", "FMT-008", 339),
    ("fvaleri-strimzi-debugging-session008-e7fa2b0a-L51", "FMT-008", 457),
    ("strimzi-blog-2023-05-03-kafka-transactions-01", "FMT-008", 339),
}


def test_dumped_transactional_logs_raise_nothing_above_info_but_their_spliced_timestamps(dump_audit):
    findings, _ = dump_audit
    # The dumps come from different clusters whose producer ids collide (most start at 0), and no dump holds both
    # a __transaction_state partition and the partitions it lists, so the cross-checks (XTX) have no cluster to
    # compare here; they are covered by tests/integration/test_rules.py.
    above_info = {
        (f.topic.split(":")[0], f.rule_code, f.position)
        for f in findings
        if f.severity in NOT_INFO and not f.rule_code.startswith("XTX")
    }
    assert above_info == SPLICED_DUMP_BATCHES


def test_printed_coordinator_histories_follow_the_state_machine(dump_audit, dump_tables):
    """The five `--transaction-log-decoder` dumps hold complete commit and abort cycles: no TSL finding."""
    findings, _ = dump_audit
    assert [(f.topic, f.rule_code, f.message) for f in findings if f.rule_code.startswith("TSL")] == []
    batches, transaction_log = dump_tables
    audited = prepare_batches(batches, _audit_settings())
    checked = audited_records(transaction_log, audited, None)
    assert checked.where(F.col("is_uncleaned")).count() == 25  # 4 + 4 + 5 + 5 + 7 records, none left out
    # made one partition at a time, they are the window definitions' (tests/integration/test_coordinator_records.py)
    assertDataFrameEqual(checked, reference_records(audited_rows(transaction_log, audited, None)))


def test_fence_abort_in_dump_is_recognised(dump_audit):
    """README-06: data at epoch 1 aborted by a marker at epoch 2 (a fenced producer, spec §3.4)."""
    findings, _ = dump_audit
    fenced = [f for f in findings if f.rule_code == "EPO-004"]
    assert {f.topic.split(":")[0] for f in fenced} >= {"ableasdale-kafka-transactions-README-06"}
