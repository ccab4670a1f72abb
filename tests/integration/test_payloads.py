"""Deep mode: the `payloads` table a `--deep` ingest writes from generated segments, and the payload rules on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline import audit_step, runner
from pipeline.arguments import build_parser
from pipeline.audit.core.columns import explode_findings
from pipeline.audit.core.context import AuditContext, AuditInputs
from pipeline.audit.core.registry import CHECKS, FRAMES, RULES
from pipeline.audit.state.materialised import build_state
from pipeline.cli import settings_for
from pipeline.config import AuditSettings, IngestSettings, Settings
from pipeline.run_record import StepResult
from pipeline.sources.kafka_format.encoding import DEFAULT_TIMESTAMP, encode_batch, encode_marker, segment_file_name
from pipeline.sources.payloads import hash_file, payload_hash, record_sequence
from pipeline.sources.records.api import Record
from pipeline.sources.segments import SegmentFile
from pipeline.tables.store import TableStore
from schemas.batches import BATCHES
from schemas.payloads import PAYLOADS

ZSTD = 4
PAYLOAD_FRAMES = ("payloads.epoch_resends", "payloads.unlinked_copies")


def idempotent(offset: int, values: list[bytes | None], pid: int, epoch: int, seq: int, **options) -> bytes:
    return encode_batch(offset, values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, **options)


def plain(offset: int, values: list[bytes | None], **options) -> bytes:
    """A batch of a producer without idempotence: no producer id, no sequences."""
    return encode_batch(offset, values, **options)


def marker(offset: int, pid: int, epoch: int, commit: bool) -> bytes:
    return encode_marker(offset, pid, epoch, commit, 0, DEFAULT_TIMESTAMP)


SEGMENTS = {
    # producer 1 re-sends `a` after two epoch bumps: one PAY-001, at the first re-send (offset 2)
    "orders-0": [
        idempotent(0, [b"a", b"b"], pid=1, epoch=0, seq=0),
        idempotent(2, [b"a"], pid=1, epoch=1, seq=0, compression=ZSTD),
        idempotent(3, [b"a"], pid=1, epoch=2, seq=0),
    ],
    # an aborted transaction's payload sent again after the abort, under the next epoch: legitimate
    "orders-1": [
        idempotent(0, [b"x"], pid=2, epoch=0, seq=0, is_transactional=True),
        marker(1, pid=2, epoch=0, commit=False),
        idempotent(2, [b"x"], pid=2, epoch=1, seq=0, is_transactional=True, compression=ZSTD),
        marker(3, pid=2, epoch=1, commit=True),
    ],
    # `y` by two producer ids and `z` in two non-idempotent batches: PAY-002 each; `w` twice in one batch and
    # empty records in two batches: nothing
    "orders-2": [
        idempotent(0, [b"y"], pid=3, epoch=0, seq=0),
        idempotent(1, [b"y"], pid=4, epoch=0, seq=0),
        plain(2, [b"z"]),
        plain(3, [b"z", b"w", b"w"]),
        plain(6, [None]),
        plain(7, [None]),
    ],
    # a compacted topic: equal values under one key are its normal state
    "users-0": [
        idempotent(0, [b"u"], pid=5, epoch=0, seq=0, keys=[b"k"]),
        idempotent(1, [b"u"], pid=5, epoch=1, seq=0, keys=[b"k"]),
    ],
}


def write_log_dir(root: Path) -> Path:
    broker = root / "broker-0"
    broker.mkdir(parents=True)
    (broker / "meta.properties").write_text("version=1\nnode.id=0\ncluster.id=c\n")
    for partition_dir, batches in SEGMENTS.items():
        (broker / partition_dir).mkdir()
        (broker / partition_dir / segment_file_name(0)).write_bytes(b"".join(batches))
    return root


def settings(deep: bool) -> Settings:
    return Settings(ingest=IngestSettings(deep=deep), audit=AuditSettings(compacted_topics=["users"]))


@pytest.fixture(scope="module")
def deep_audit(spark, tmp_path_factory, scratch):
    """One deep ingest of the generated logs, and the findings of the payload frames on its audit state (the other
    frames are the other tests' concern): the store, the ingest's counts and the payload findings."""
    root = tmp_path_factory.mktemp("payloads")
    logs = write_log_dir(root / "logs")
    store = TableStore(spark, str(root / "warehouse"))
    given = settings(deep=True)
    counts = runner.ingest(spark, store, given, "run-1", [str(logs)]).counts
    ctx = AuditContext(given.audit)
    side = {"payloads": store.read("payloads", schema=PAYLOADS)}
    inputs = build_state(store.read("batches", schema=BATCHES), side, ctx, scratch("payload-state"))
    findings = [
        explode_findings(FRAMES[name].build(inputs, ctx), [(check.rule, check.function(ctx)) for check in CHECKS[name]])
        for name in PAYLOAD_FRAMES
    ]
    return store, counts, findings[0].unionByName(findings[1]).collect()


def test_deep_ingest_hashes_every_data_record_of_every_codec(deep_audit):
    store, counts, _ = deep_audit
    rows = store.read("payloads", schema=PAYLOADS).where("topic = 'orders' AND partition = 0").collect()
    by_offset = {row.offset: row for row in rows}
    assert counts["payloads"] == 16  # 4 + 2 + 8 + 2 data records; markers have no rows
    assert sorted(by_offset) == [0, 1, 2, 3]
    assert [(by_offset[o].producer_epoch, by_offset[o].sequence, by_offset[o].base_offset) for o in range(4)] == [
        (0, 0, 0),
        (0, 1, 0),
        (1, 0, 2),
        (2, 0, 3),
    ]
    # the zstd-compressed copy hashes like the uncompressed ones, and another payload does not
    assert by_offset[0].payload_hash == by_offset[2].payload_hash == by_offset[3].payload_hash
    assert by_offset[1].payload_hash != by_offset[0].payload_hash
    empty = store.read("payloads", schema=PAYLOADS).where("topic = 'orders' AND partition = 2 AND offset >= 6")
    assert [row.payload_hash for row in empty.collect()] == [None, None]


def test_payload_rules_fire_on_epoch_resends_and_unlinked_copies_only(deep_audit):
    found = sorted(
        (row.rule_code, row.severity, row.partition, row.base_offset, row.evidence["first_offset"])
        for row in deep_audit[2]
    )
    assert found == [
        ("PAY-001", "WARN", 0, 2, "0"),  # once, at the first re-send, though `a` came back under two epochs
        ("PAY-002", "INFO", 2, 1, "0"),  # `y` by producers 3 and 4
        ("PAY-002", "INFO", 2, 3, "2"),  # `z` in two non-idempotent batches
    ]


def test_without_deep_no_payloads_table_and_no_payload_frames(spark, tmp_path, deep_audit):
    logs = write_log_dir(tmp_path / "logs")
    store = TableStore(spark, str(tmp_path / "warehouse"))
    counts = runner.ingest(spark, store, settings(deep=False), "run-1", [str(logs)]).counts
    assert "payloads" not in counts
    assert not store.exists("payloads")
    # the frames of an audit without payloads are skipped before reading anything else
    anything = deep_audit[0].read("payloads", schema=PAYLOADS)
    inputs = AuditInputs(*[anything] * 11)
    ctx = AuditContext(settings(deep=False).audit)
    assert {check.frame for code in ("PAY-001", "PAY-002") for check in RULES[code].checks} == set(PAYLOAD_FRAMES)
    assert [FRAMES[name].build(inputs, ctx) for name in PAYLOAD_FRAMES] == [None, None]


class Handed(Exception):
    """Stops an audit once it has been handed its tables."""


@pytest.mark.parametrize("deep", [False, True])
def test_the_audit_is_handed_payloads_in_deep_mode_only(deep_audit, monkeypatch, deep):
    handed = {}

    def handed_tables(batches, settings, run_id, scratch, reference_time_ms, **side_tables):
        handed.update(side_tables)
        raise Handed

    monkeypatch.setattr(audit_step, "run_audit", handed_tables)
    result = StepResult()
    with pytest.raises(Handed):
        audit_step.audit_batches(deep_audit[0], settings(deep), "run-2", None, result, deep=deep)
    assert ("payloads" in handed) is deep
    assert result.counts["deep"] == int(deep)


@pytest.mark.parametrize(("argv", "deep"), [([], False), (["--deep"], True)])
@pytest.mark.parametrize("command", ["ingest", "run"])
def test_deep_flag_turns_deep_mode_on(command, argv, deep):
    args = build_parser().parse_args([command, "--input", "logs", *argv])
    assert settings_for(args).ingest.deep is deep


def test_small_windows_hash_what_one_window_does(tmp_path):
    path = tmp_path / "orders-2" / segment_file_name(0)
    path.parent.mkdir()
    data = b"".join(SEGMENTS["orders-2"] + SEGMENTS["orders-0"][1:])  # offsets 0-9 and the zstd batch at 2 again
    path.write_bytes(data)
    segment = SegmentFile(str(path), "orders", 2, broker_id=0, segment_base_offset=0, size=len(data))

    def hashed(window_bytes: int) -> list[tuple]:
        batches = hash_file(segment, window_bytes)
        return [(row["offset"], row["payload_hash"]) for batch in batches for row in batch.to_pylist()]

    whole = hashed(1 << 20)
    assert [offset for offset, _ in whole] == [0, 1, 2, 3, 4, 5, 6, 7, 2, 3]
    assert hashed(100) == whole


def test_payload_hash_separates_key_value_and_headers():
    def record(key, value, headers=()):
        return Record(0, 0, key, value, headers)

    hashes = [
        payload_hash(record(b"ab", b"c")),
        payload_hash(record(b"a", b"bc")),
        payload_hash(record(None, b"abc")),
        payload_hash(record(b"", b"abc")),
        payload_hash(record(None, b"abc", (("h", b"1"),))),
        payload_hash(record(None, b"abc", (("h", None),))),
    ]
    assert len(set(hashes)) == len(hashes)
    assert all(len(digest) == 16 for digest in hashes)
    assert payload_hash(record(None, None)) is None
    assert payload_hash(record(None, None, (("h", None),))) is not None
    assert payload_hash(record(b"k", b"v")) == payload_hash(record(b"k", b"v"))


def test_record_sequence_wraps_like_the_producer():
    assert record_sequence(5, 3) == 8
    assert record_sequence(2_147_483_646, 3) == 1
    assert record_sequence(-1, 3) == -1


def test_payload_rules_are_registered_in_their_section():
    assert {code: (RULES[code].severity, RULES[code].section) for code in ("PAY-001", "PAY-002")} == {
        "PAY-001": ("WARN", "6.11"),
        "PAY-002": ("INFO", "6.11"),
    }
