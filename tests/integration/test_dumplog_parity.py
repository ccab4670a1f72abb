"""kafka-dump-log text at parity with the segments it was printed from: a generated log root, with a
`__consumer_offsets` partition of transactional offset commits added, is audited once from its files and once
from their dump text (every line kind of spec §4), and both audits must give the same findings and transactions.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from pipeline import runner
from pipeline.config import AuditSettings, Settings
from pipeline.generate.cluster import COMPACTED_TOPICS_GLOB
from pipeline.generate.options import GenerateOptions
from pipeline.generate.simulation import write_log_root
from pipeline.sources.dumplog.grammar import BLANK, UNKNOWN
from pipeline.sources.dumplog.parser import LINE_KINDS, parse_dump
from pipeline.sources.kafka_format.encoding import encode_batch, encode_marker, encode_txnindex_entry
from pipeline.tables.store import TableStore
from tests.dumprender import render_log_root

GENERATED = dict(batches=3000, partitions=4, producers=24, brokers=1, segment_bytes=16 * 1024, anomaly_rate=0.02)
OFFSETS_PARTITION = "__consumer_offsets-7"
T0 = 1_767_225_600_000
# Columns the text cannot show, left out of the comparison.
UNPRINTED_COLUMNS = {
    "run_id": "each audit is its own run",
    "broker_id": "the dump names a file, not the broker whose log dir held it",
    "cluster_id": "nor the cluster: dump text is in the unknown cluster unless --cluster-id names it",
    "segment": "the text's findings name the dump file instead of the segment",
    "source_file": "the same",
    "source_format": "'dumplog' instead of 'segment'",
    "findings_by_rule": "counts the findings of unprinted files too",
    "findings_by_severity": "the same",
    "cleaner_offset": "cleaner-offset-checkpoint is a file of the log dir, which the tool does not dump",
}
# Findings of files and fields kafka-dump-log does not print, left out of the comparison, with what the segments
# raise for the generated anomalies.
UNPRINTED_FINDINGS = {
    "FMT-005": "the tool prints no batch attributes",
    "FMT-006": "the tool prints the records it can iterate, not why the others do not parse",
    "SEG-001": "the tool dumps the files it is given: it lists no directory, so no leftover file",
    "SEG-004": "`.index` lines are read as counts, not checked against the log",
    "SEG-005": "`.timeindex` lines are read as counts, not checked against the log",
    "SEG-006": "`partition.metadata` is not a file kafka-dump-log reads",
    "LEP-001": "`leader-epoch-checkpoint` is not a file kafka-dump-log reads",
    "LEP-002": "the same",
    "SNP-001": "the tool prints a corrupt snapshot's error on stderr, not in the dump",
}
PROSE = "$ bin/kafka-dump-log.sh --deep-iteration --files ...\n"  # a prompt pasted with the dump: an unknown line


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _offset_commit(group: str, topic: str, partition: int, offset: int, timestamp: int) -> tuple[bytes, bytes]:
    """OffsetCommitKey v1 and OffsetCommitValue v3, field by field from their message schemas."""
    key = struct.pack(">h", 1) + _string(group) + _string(topic) + struct.pack(">i", partition)
    value = struct.pack(">hqi", 3, offset, -1) + _string("") + struct.pack(">q", timestamp)
    return key, value


def _write_offsets_partition(directory: Path) -> None:
    """Transactional offset commits of three producers: committed, aborted, and one left open."""
    entries, offset = [], 0
    for pid, epoch, outcome in ((9001, 0, True), (9002, 3, False), (9001, 0, True), (9003, 1, None)):
        key, value = _offset_commit("eos-app", "orders", pid % 4, 100 + offset, T0 + offset)
        group_key = struct.pack(">h", 2) + _string("eos-app")
        entries.append(
            encode_batch(
                offset,
                [value, b"\x00\x03"],
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=offset,
                is_transactional=True,
                base_timestamp=T0 + offset,
                keys=[key, group_key],
            )
        )
        offset += 2
        if outcome is not None:
            entries.append(encode_marker(offset, pid, epoch, outcome, 4, T0 + offset))
            offset += 1
    directory.mkdir(parents=True)
    torn = encode_batch(offset, 1, producer_id=9004, producer_epoch=0, base_sequence=0)[:40]  # a write cut short
    (directory / "00000000000000000000.log").write_bytes(b"".join(entries) + torn)
    # the ABORT at offset 5 closes 9002's transaction from 3; 9001's from 0 is committed by then
    (directory / "00000000000000000000.txnindex").write_bytes(encode_txnindex_entry(9002, 3, 5, 6))


@pytest.fixture(scope="module")
def roots(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("parity")
    segments = base / "logs"
    write_log_root(GenerateOptions(out=segments, **GENERATED))
    _write_offsets_partition(segments / "broker-0" / OFFSETS_PARTITION)
    (segments / "_ground_truth.parquet").unlink()
    dumps = base / "dumps"
    render_log_root(segments, dumps)
    orders = dumps / "orders.txt"
    orders.write_text(PROSE + orders.read_text())
    return segments, dumps


@pytest.fixture(scope="module")
def audits(spark, roots, tmp_path_factory) -> dict[str, TableStore]:
    stores = {}
    for name, root in zip(("segments", "dumps"), roots, strict=True):
        warehouse = tmp_path_factory.mktemp(f"warehouse-{name}")
        settings = Settings(warehouse=str(warehouse), audit=AuditSettings(compacted_topics=[COMPACTED_TOPICS_GLOB]))
        store = TableStore(spark, str(warehouse))
        runner.run(spark, store, settings, f"parity-{name}", [str(root)], None)
        stores[name] = store
    return stores


def _comparable(stores: dict[str, TableStore], name: str, table: str) -> DataFrame:
    frame = stores[name].read(table)
    if "rule_code" in frame.columns:
        frame = frame.where(~F.col("rule_code").isin(*UNPRINTED_FINDINGS))
    if table == "producer_snapshots":  # a corrupt one (SNP-001) is a `Dumping` line alone in the text
        corrupt = stores["segments"].read(table).where(F.col("file_status") != "ok")
        frame = frame.join(
            corrupt.select("topic", "partition", "snapshot_offset"),
            on=["topic", "partition", "snapshot_offset"],
            how="left_anti",
        )
    if "evidence" in frame.columns:  # each reader says in its own words why an entry is not `ok`
        frame = frame.withColumn("evidence", F.map_filter("evidence", lambda key, _: key != "note"))
    if "rule_code" in frame.columns:  # the tool counts a torn tail's bytes; it prints no offset out of them
        torn = F.col("rule_code") == "FMT-001"
        frame = frame.withColumn("base_offset", F.when(~torn, F.col("base_offset")))
    return frame.drop(*(column for column in UNPRINTED_COLUMNS if column in frame.columns))


@pytest.mark.parametrize(
    "table", ["findings", "transactions", "producer_state", "partition_summary", "txn_index", "producer_snapshots"]
)
def test_text_gives_the_tables_of_the_segments(audits, table):
    segments, dumps = (_comparable(audits, name, table) for name in ("segments", "dumps"))
    assert segments.count() > 0
    assertDataFrameEqual(dumps, segments)


def test_the_text_raises_what_the_anomalies_of_printed_files_raise(audits):
    """Every rule family the generator injects is compared, the coordinator topics' included."""
    codes = {row.rule_code for row in audits["dumps"].read("findings").select("rule_code").distinct().collect()}
    families = {code.split("-")[0] for code in codes}
    assert families == {"SEQ", "EPO", "TXN", "IDX", "LSO", "SNP", "FMT", "SEG", "TSL", "XTX"}
    transactions = audits["dumps"].read("transactions").where(F.col("topic") == "__consumer_offsets")
    assert sorted((row.producer_id, row.outcome) for row in transactions.collect()) == [
        (9001, "COMMITTED"),
        (9001, "COMMITTED"),
        (9002, "ABORTED"),
        (9003, "OPEN"),
    ]


def test_unknown_lines_reach_runs_and_the_report(audits):
    for name, counted, unknown in (("segments", None, 0), ("dumps", 1, 1)):
        [run] = audits[name].read("runs").collect()
        assert run.counts.get("dumplog.lines.unknown") == counted
        report = Path(audits[name].warehouse) / "reports" / run.run_id
        summary = json.loads((report / "summary.json").read_text())
        assert summary["run"]["unknown_dump_lines"] == unknown  # always there: 0 for a run that read no dump text
        note = "1 line(s) fit no kafka-dump-log layout and were not read"
        for page in ("report.html", "report.md"):
            assert (note in (report / page).read_text()) == bool(unknown), (name, page)


def test_the_dumps_hold_every_line_kind(roots):
    _, dumps = roots
    totals = dict.fromkeys(LINE_KINDS, 0)
    for path in dumps.iterdir():
        for kind, count in parse_dump(path.read_text(), str(path)).line_counts.items():
            totals[kind] += count
    assert totals[UNKNOWN] == 1 and totals[BLANK] == 0
    assert [kind for kind, count in totals.items() if not count] == [BLANK], totals
