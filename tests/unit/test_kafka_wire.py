"""`kafka://` inputs without a broker: the URI, the client's settings and secrets, the plan's topics and ranges,
and a range fetched from responses as a leader gives them (cut at a size limit, starting inside a batch)."""

from __future__ import annotations

import json
import socket

import pytest

from pipeline.config import KafkaSettings, Settings
from pipeline.errors import InputError
from pipeline.sources.kafka_format.encoding import encode_batch
from pipeline.sources.kafka_wire.address import parse_bootstrap
from pipeline.sources.kafka_wire.connection import client_config
from pipeline.sources.kafka_wire.fetch import FetchError, fetch_failure, fetch_range, seconds_ahead
from pipeline.sources.kafka_wire.fetch_plan import (
    FetchRange,
    chosen_topics,
    continuation,
    plan_fetches,
    split,
    timestamp_ms,
)
from pipeline.tables.files_by_source import FetchedFile

URI = "kafka://b1:9092,b2:9092"
BOOTSTRAP = parse_bootstrap(URI)


def test_a_uri_names_brokers_and_nothing_else():
    assert parse_bootstrap("KAFKA://a.example:9092,[::1]:9093/").servers == ("a.example:9092", "[::1]:9093")
    assert parse_bootstrap("kafka://a:1/").uri == "kafka://a:1"
    for wrong, says in [
        ("kafka://user:secret@a:9092", "credentials do not go in the URI"),
        ("kafka://a:9092/topic", "expected kafka://HOST:PORT"),
        ("kafka://a", "a is not HOST:PORT"),
        ("kafka://a:9092,", "(empty) is not HOST:PORT"),
        ("kafka://a:70000", "is not HOST:PORT"),
    ]:
        with pytest.raises(InputError, match=says.replace("(", r"\(").replace(")", r"\)")):
            parse_bootstrap(wrong)


def test_the_password_is_read_where_the_client_is_made_and_never_a_setting(tmp_path, monkeypatch):
    sasl = {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "auditor"}
    monkeypatch.setenv("AUDIT_PASSWORD", "s3cret")
    settings = KafkaSettings(**sasl, sasl_password_env="AUDIT_PASSWORD", ssl_cafile="/ca.pem")
    config = client_config(BOOTSTRAP, settings)
    assert config["sasl_plain_password"] == "s3cret" and config["bootstrap_servers"] == ["b1:9092", "b2:9092"]
    assert config["ssl_cafile"] == "/ca.pem" and config["sasl_mechanism"] == "SCRAM-SHA-512"
    assert "s3cret" not in json.dumps(Settings(kafka=settings).model_dump(mode="json"))
    (tmp_path / "password").write_text("from-a-file\n")
    from_file = KafkaSettings(**sasl, sasl_password_file=str(tmp_path / "password"))
    assert client_config(BOOTSTRAP, from_file)["sasl_plain_password"] == "from-a-file"
    monkeypatch.delenv("AUDIT_PASSWORD")
    with pytest.raises(InputError, match="AUDIT_PASSWORD is not set"):
        client_config(BOOTSTRAP, settings)
    with pytest.raises(InputError, match="needs kafka.sasl_mechanism and kafka.sasl_username"):
        client_config(BOOTSTRAP, KafkaSettings(security_protocol="SASL_PLAINTEXT"))
    with pytest.raises(Exception, match="sasl_password"):
        KafkaSettings(sasl_password="in-the-config")  # a secret has no setting to go in


def test_topics_are_chosen_by_glob_and_internal_ones_only_by_name():
    topics = [
        {"name": name, "authorized_operations": ["READ", "DESCRIBE"]}
        for name in ("orders", "orders-changelog", "payments", "__transaction_state", "__consumer_offsets")
    ]

    def names(globs):
        return [topic["name"] for topic in chosen_topics(BOOTSTRAP, topics, globs)]

    assert names(["*"]) == ["orders", "orders-changelog", "payments"]
    assert names(["orders*", "__transaction_state"]) == ["orders", "orders-changelog", "__transaction_state"]
    with pytest.raises(InputError, match=r"no topic the principal may describe matches kafka.topics \['audit-\*'\]"):
        names(["audit-*"])
    denied = [{"name": "orders", "authorized_operations": ["DESCRIBE"]}]
    with pytest.raises(InputError, match="topic orders: the principal may not read it"):
        chosen_topics(BOOTSTRAP, denied, ["*"])


def test_a_partition_is_cut_into_ranges_of_about_range_bytes():
    settings = KafkaSettings(range_bytes=1024)

    def cut(start, end, first, size, log_start=100):
        return split(URI, ("t", 0), 1, (start, end, first), log_start, size, settings, "c")

    assert [(r.start, r.end, r.first, r.log_start, r.size) for r in cut(100, 1100, True, 4096)] == [
        (100, 350, True, 100, 1024), (350, 600, False, 100, 1024), (600, 850, False, 100, 1024),
        (850, 1100, False, 100, 1024),
    ]  # fmt: skip
    assert [(r.start, r.end, r.first) for r in cut(600, 1100, False, 4096)] == [(600, 850, False), (850, 1100, False)]
    assert [(r.start, r.end) for r in cut(105, 107, True, 0)] == [(105, 107)]  # sizes unknown: one range
    assert len(cut(0, 2, True, 10**9, log_start=0)) == 2  # never an empty range
    assert cut(9, 9, True, 4096) == []


def test_a_nightly_run_goes_on_after_the_rows_an_earlier_run_fetched():
    kept = [FetchedFile("a.parquet", 100, 100, 600), FetchedFile("b.parquet", 100, 600, 900)]
    assert continuation(100, 1200, kept) == (["a.parquet", "b.parquet"], [(900, 1200, False)])
    assert continuation(100, 900, kept) == (["a.parquet", "b.parquet"], [(900, 900, False)])  # nothing new
    assert continuation(250, 1200, kept) == ([], [(250, 1200, True)])  # retention moved the log start: whole
    assert continuation(100, 800, kept) == ([], [(100, 800, True)])  # the log is shorter than what was read
    assert continuation(100, 1200, []) == ([], [(100, 1200, True)])


def test_times_bound_a_run_as_epoch_milliseconds_or_iso_8601():
    assert timestamp_ms("1767225600000") == 1767225600000
    assert timestamp_ms("2026-01-01T00:00:00Z") == timestamp_ms("2026-01-01T00:00:00") == 1767225600000
    assert timestamp_ms("2026-01-01T01:00:00+01:00") == 1767225600000
    with pytest.raises(InputError, match="neither epoch milliseconds nor an ISO-8601 time"):
        timestamp_ms("yesterday")


def test_an_unreachable_bootstrap_is_one_input_error_naming_it():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(InputError, match=rf"kafka://127.0.0.1:{port}: no broker of 127.0.0.1:{port} answered within"):
        plan_fetches(parse_bootstrap(f"kafka://127.0.0.1:{port}"), KafkaSettings(connect_timeout_ms=500))


class Leader:
    """Answers Fetch as a leader does: every batch from the one holding `offset` on, cut at `max_bytes`."""

    def __init__(self, batches: list[bytes], offsets: list[tuple[int, int]], max_bytes: int) -> None:
        self.batches, self.offsets, self.max_bytes = batches, offsets, max_bytes
        self.asked: list[int] = []

    def fetch(self, topic: str, partition: int, offset: int) -> bytes:
        self.asked.append(offset)
        held = [i for i, (_, last) in enumerate(self.offsets) if last >= offset]
        data = b"".join(self.batches[i] for i in held)
        first = len(self.batches[held[0]]) if held else 0
        return data[: max(self.max_bytes, first)]  # the first batch comes whole (KIP-74)


def _leader(max_bytes: int) -> Leader:
    batches, offsets, offset = [], [], 0
    for count in [3, 1, 4, 2, 5]:
        batches.append(encode_batch(offset, count, producer_id=7, producer_epoch=0, base_sequence=offset))
        offsets.append((offset, offset + count - 1))
        offset += count
    return Leader(batches, offsets, max_bytes)


def _fetched(leader: Leader, start: int, end: int, first: bool) -> list[dict]:
    fetch = FetchRange(URI, "t", 0, 1, start, end, first, 0, "c", 0)
    return [row for table in fetch_range(leader, fetch, verify_records=True) for row in table.to_pylist()]


def test_a_range_keeps_the_batches_that_start_in_it_across_responses_cut_at_the_size_limit():
    whole = _fetched(_leader(10**6), 0, 15, True)
    assert [row["base_offset"] for row in whole] == [0, 3, 4, 8, 10]
    leader = _leader(150)  # a response holds one whole batch and part of the next
    cut = _fetched(leader, 0, 15, True)
    assert cut == whole and leader.asked == [0, 3, 4, 8, 10]
    assert [row["position"] for row in cut] == [row["base_offset"] for row in cut]  # a response has no file position
    assert {row["segment_base_offset"] for row in cut} == {0} and {row["broker_id"] for row in cut} == {1}
    assert {row["source_file"] for row in cut} == {f"{URI}/t-0"}
    assert {row["source_format"] for row in cut} == {"fetch"}


def test_the_batch_holding_a_ranges_start_belongs_to_the_range_before():
    leader = _leader(10**6)
    before, after = _fetched(leader, 0, 5, True), _fetched(leader, 5, 15, False)
    assert [row["base_offset"] for row in before] == [0, 3, 4]  # 4..7 holds 5: it starts in the range before
    assert [row["base_offset"] for row in after] == [8, 10]
    assert before + after == _fetched(leader, 0, 15, True)  # the rows of one range over both
    first = _fetched(leader, 5, 15, True)  # the log starts inside 4..7 (DeleteRecords): its batch is the first
    assert [row["base_offset"] for row in first] == [4, 8, 10]


def test_a_response_without_a_whole_batch_names_the_partition_and_offset():
    leader = _leader(10**6)
    leader.fetch = lambda topic, partition, offset: leader.batches[0][:40]  # type: ignore[method-assign]
    with pytest.raises(FetchError, match=r"kafka://b1:9092,b2:9092: t-0 at offset 0: the first batch came cut short"):
        _fetched(leader, 0, 15, True)


def test_a_task_waits_when_it_reads_faster_than_its_byte_rate_cap():
    assert seconds_ahead(3_000_000, 1_000_000, 1.0) == pytest.approx(2.0)
    assert seconds_ahead(1_000_000, 1_000_000, 2.5) < 0  # behind the cap: no wait
    assert seconds_ahead(10**12, 0, 0.1) == 0.0  # no cap


def test_a_task_that_cannot_go_on_fails_with_one_line_the_driver_can_name():
    leader = _leader(10**6)
    leader.fetch = lambda topic, partition, offset: leader.batches[0]  # type: ignore[method-assign]
    with pytest.raises(FetchError) as raised:
        _fetched(leader, 5, 15, False)  # the leader answers offset 5 with offsets 0..2: no step forward
    spark_error = (
        f"Job aborted ... Traceback ...\npipeline.sources.kafka_wire.fetch.FetchError: {raised.value}\n\tat ..."
    )
    assert fetch_failure(RuntimeError(spark_error)) == str(raised.value)
    assert str(raised.value).startswith("kafka://b1:9092,b2:9092: t-0 at offset 5: ")
    assert fetch_failure(RuntimeError("ValueError: something else")) is None
