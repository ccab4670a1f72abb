"""kafka-dump-log text through the Spark readers: the published dumps of shared/realdata parsed on the executors,
the files they refuse or leave out, and the report, snapshot and transaction-index readers."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import Settings
from pipeline.errors import InputError
from pipeline.sources.dumplog.grammar import BATCH, UNKNOWN
from pipeline.sources.dumplog.parser import LINE_KINDS, parse_dump
from pipeline.sources.dumplog.reader import (
    DUMP_REPORT,
    SNAPSHOT_ENTRIES,
    TXN_INDEX_ENTRIES,
    dump_line_counts,
    read_dumplog,
    read_dumplog_report,
    read_dumplog_snapshots,
    read_dumplog_txn_index,
)
from schemas.batches import BATCHES
from tests.published_dumps import EXPECTED_UNKNOWN_LINES, HEADERLESS_DUMP, dump_text


@pytest.fixture(scope="module")
def real_parses(realdata: Path):
    names = sorted(path.name for path in (realdata / "dumplog-text").glob("*.txt"))
    return {name: parse_dump(dump_text(realdata, name), name) for name in names}


@pytest.fixture(scope="module")
def dump_paths(realdata: Path) -> list[str]:
    return [str(realdata / "dumplog-text" / name) for name in sorted(EXPECTED_UNKNOWN_LINES) if name != HEADERLESS_DUMP]


def test_read_dumplog_parses_on_the_executors(spark, dump_paths, real_parses):
    frame = read_dumplog(spark, dump_paths, Settings())
    assert frame.schema == BATCHES
    rows = frame.collect()
    expected = {str(Path(path)): len(real_parses[Path(path).name].batches) for path in dump_paths}
    actual: dict[str, int] = {}
    for row in rows:
        actual[row.source_file] = actual.get(row.source_file, 0) + 1
    assert actual == {path: count for path, count in expected.items() if count}
    [commit] = [row for row in rows if row.producer_id == 0 and row.coordinator_epoch == 4 and row.base_offset == 4]
    assert (commit.topic, commit.control_type, commit.is_control) == ("transactional-foo", 1, True)


def test_read_dumplog_refuses_a_file_without_dumping_line(spark, realdata: Path, dump_paths):
    headerless = str(realdata / "dumplog-text" / HEADERLESS_DUMP)
    with pytest.raises(InputError, match="README-13.txt: not kafka-dump-log output"):
        read_dumplog(spark, [*dump_paths[:2], headerless], Settings())
    with pytest.raises(InputError, match="cannot be read"):
        read_dumplog(spark, [str(realdata / "dumplog-text" / "missing.txt")], Settings())


def test_read_dumplog_leaves_out_skipped_directories(spark, tmp_path: Path):
    dump = tmp_path / "moved.txt"
    dump.write_text(
        "Dumping /data/orders-0.8f1c3b2a9d4e4f6a-future/00000000000000000000.log\n"
        "Log starting offset: 0\n"
        "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 0 lastSequence: 0 producerId: 1 producerEpoch: 0 "
        "partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        "position: 0 CreateTime: 1 size: 70 magic: 2 compresscodec: none crc: 1 isvalid: true\n"
    )
    assert read_dumplog(spark, [str(dump)], Settings()).count() == 0


def test_report_snapshot_and_txn_index_readers(spark, dump_paths):
    report = read_dumplog_report(spark, dump_paths)
    assert report.schema == DUMP_REPORT
    unknown = {Path(row.source_file).name: row.line_counts[UNKNOWN] for row in report.collect()}
    assert unknown == {name: count for name, count in EXPECTED_UNKNOWN_LINES.items() if name != HEADERLESS_DUMP}

    snapshots = read_dumplog_snapshots(spark, dump_paths)
    assert snapshots.schema == SNAPSHOT_ENTRIES
    assert sorted(row.producer_id for row in snapshots.collect()) == [171101] * 2 + [173102] * 2 + [199398] * 2

    txn_index = read_dumplog_txn_index(spark, dump_paths)
    assert txn_index.schema == TXN_INDEX_ENTRIES
    assert [(row.producer_id, row.last_stable_offset) for row in txn_index.collect()] == [(0, 2)]


def test_line_counts_of_a_run(spark, dump_paths, real_parses):
    counts = dump_line_counts(spark, dump_paths)
    assert counts["dumplog.files"] == len(dump_paths)
    assert counts[f"dumplog.lines.{UNKNOWN}"] == sum(
        count for name, count in EXPECTED_UNKNOWN_LINES.items() if name != HEADERLESS_DUMP
    )
    assert counts[f"dumplog.lines.{BATCH}"] == sum(
        real_parses[Path(path).name].line_counts[BATCH] for path in dump_paths
    )
    assert set(counts) == {"dumplog.files", *(f"dumplog.lines.{kind}" for kind in LINE_KINDS)}
