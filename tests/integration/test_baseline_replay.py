"""The benchmark baseline (benchmarks/baseline_replay.py) finds what the product finds, for the families it covers.

The baseline is a plain single-process Python replay that benchmarks compare the product with; it is not part of
the product. These tests run the product once, over every source at the same time, and compare its findings of
SEQ-001..009, EPO-001..007, TXN-001..007, LSO-001/002/004 with the baseline's, finding by finding (rule,
severity, topic, partition, producer id, offset). The product's semantics are the reference.

Sources: the bundled sample; random producer histories written here with the project's encoder (TV2 commits,
zombie epochs, duplicates, overlaps, wraps, expiry gaps, hanging transactions, odd control batches, competing
replicas, a log start above an open transaction), which reach rules the other sources do not; a root from
`produce-audit generate` with injected anomalies; and every real broker dir of ../shared/realdata.

The product is run as `produce-audit run` runs it, without the Delta tables: its readers decode the segments
and the log-dir checkpoints (the covered rules read nothing else) and `run_audit` audits them, in one audit of all
sources so that the test stays fast on a small machine. Each source is a cluster of its own (the real broker dirs
reuse topic names), so each source's topics get a `<source>:` prefix, as tests/integration/test_realdata_audit.py does.
"""

from __future__ import annotations

import importlib.util
import json
import random
import re
import struct
import subprocess
import sys
import zlib
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from pipeline.sources.kafka_format.encoding import encode_batch, encode_marker, segment_file_name
from tests import benchmark_modules

REPO = Path(__file__).resolve().parents[2]
REALDATA_SEGMENTS = REPO.parent / "shared" / "realdata" / "broker-segments"
COVERED = re.compile(r"^(SEQ-00[1-9]|EPO-00[1-7]|TXN-00[1-7]|LSO-00[124])$")
ALL_COVERED = {f"SEQ-00{n}" for n in range(1, 10)} | {f"EPO-00{n}" for n in range(1, 8)}
ALL_COVERED |= {f"TXN-00{n}" for n in range(1, 8)} | {"LSO-001", "LSO-002", "LSO-004"}
COMPACTED = ["*-changelog"]
CLI = Path(sys.executable).parent / "produce-audit"


baseline = benchmark_modules.load("baseline_replay")


def baseline_findings(root: Path) -> Counter:
    result = baseline.audit([str(root)], baseline.Options(compacted_topics=COMPACTED))
    return Counter(tuple(finding) for finding in result.findings)


# --- random producer histories ------------------------------------------------------------------------------

T0 = 1_767_225_600_000
INT32_MAX = 2_147_483_647
DAY_MS = 86_400_000


class _Producer:
    def __init__(self, rng: random.Random, pid: int) -> None:
        self.pid = pid
        self.epoch = rng.choice([0, 0, 0, 0, 0, 3, 32766])
        self.transactional = rng.random() < 0.6
        self.tv2 = self.transactional and rng.random() < 0.5
        self.sequence = rng.choice([0, 0, 0, 7, INT32_MAX - 2])
        self.in_txn = False
        self.coordinator_epoch = rng.randrange(3)
        self.ranges: list[tuple[int, int]] = []  # recent (base, count) for retries


def _data(rng: random.Random, p: _Producer, offset: int, ts: int, leader_epoch: int) -> tuple[bytes, int]:
    count = rng.randint(1, 3)
    epoch, sequence, transactional = p.epoch, p.sequence, p.transactional
    roll = rng.random()
    if roll < 0.04 and p.ranges:  # retry of a recent batch, whole or re-batched
        sequence, count = rng.choice(p.ranges)
        count = count if rng.random() < 0.6 else count + 1
    elif roll < 0.07:
        sequence = (sequence + rng.randint(1, 4)) % (INT32_MAX + 1)  # gap
    elif roll < 0.09:
        sequence = max(0, sequence - rng.randint(5, 50))  # far back
    elif roll < 0.11:
        sequence = 0
    elif roll < 0.13:
        sequence = INT32_MAX - rng.randrange(3)  # about to wrap
    roll = rng.random()
    if roll < 0.03:
        epoch = max(0, p.epoch - 1)  # zombie
    elif roll < 0.07:
        epoch = p.epoch = min(32767, p.epoch + rng.choice([1, 1, 2, 3]))
        if rng.random() < 0.7:
            sequence = 0
    if rng.random() < 0.05:
        transactional = not transactional
    if transactional and rng.random() < 0.01:
        epoch = 32767
    if rng.random() < 0.005:
        sequence = -1  # a producer id without a sequence (FMT-009)
    batch = encode_batch(offset, count, p.pid, epoch, sequence, transactional, leader_epoch, ts, ts + rng.randrange(5))
    last = sequence + count - 1
    p.sequence = last + 1 - (INT32_MAX + 1) if last + 1 > INT32_MAX else last + 1
    p.ranges = (p.ranges + [(sequence, count)])[-6:]
    p.in_txn = p.in_txn or transactional
    return batch, count


def _marker(rng: random.Random, p: _Producer, offset: int, ts: int, leader_epoch: int) -> bytes:
    bump = rng.choices([0, 1, 2, 3, -1], [10, 80, 5, 3, 2] if p.tv2 else [85, 8, 3, 2, 2])[0]
    epoch = max(0, min(32767, p.epoch + bump))
    p.coordinator_epoch += rng.random() < 0.05  # a coordinator failover
    coordinator_epoch = p.coordinator_epoch - (rng.random() < 0.03)  # a zombie coordinator
    if epoch > p.epoch:
        p.epoch, p.ranges = epoch, []
        p.sequence = 0 if rng.random() < 0.8 else p.sequence  # a client that did not reset its sequences
    p.in_txn = False
    commit = rng.random() < 0.7
    marker = encode_marker(offset, p.pid, epoch, commit, coordinator_epoch, ts, leader_epoch)
    if rng.random() < 0.1:  # a marker retried with the other outcome
        marker += encode_marker(offset + 1, p.pid, epoch, not commit, coordinator_epoch, ts, leader_epoch)
    return marker


def _odd_control(rng: random.Random, p: _Producer, offset: int, ts: int, leader_epoch: int) -> bytes:
    """A control batch the broker would not write for a producer: KRaft type, compressed, empty, short value."""
    kind = rng.randrange(4)
    key = struct.pack(">hh", 0, 2 if kind == 0 else rng.randrange(2))
    value = struct.pack(">hi", 0, p.coordinator_epoch)
    if kind == 1:
        return encode_batch(offset, [value], p.pid, p.epoch, -1, True, leader_epoch, ts, compression=1,
                            is_control=True, keys=[key])  # fmt: skip
    if kind == 2:
        return encode_batch(offset, [], p.pid, p.epoch, -1, True, leader_epoch, ts, is_control=True, keys=[])
    values = [value if kind == 0 else value[:2]]
    return encode_batch(offset, values, p.pid, p.epoch, -1, True, leader_epoch, ts, is_control=True, keys=[key])


def _legacy_message(offset: int, timestamp: int) -> bytes:
    """A magic 1 message with a null key and a 5-byte value."""
    body = struct.pack(">bbqi", 1, 0, timestamp, -1) + struct.pack(">i", 5) + b"value"
    return struct.pack(">qiI", offset, 4 + len(body), zlib.crc32(body)) + body


def _history(rng: random.Random, first_pid: int, leader_epoch: int) -> tuple[list[tuple[int, bytes]], int]:
    """Entries (base offset, bytes) of one partition's log, and the highest leader epoch written."""
    producers = [_Producer(rng, first_pid + k) for k in range(rng.randint(1, 4))]
    entries, offset, ts = [], 0, T0 + rng.randrange(10**6)
    for _ in range(rng.randint(40, 160)):
        p = rng.choice(producers)
        roll = rng.random()
        ts += DAY_MS + rng.randrange(9) if roll < 0.02 else 1_300_000 if roll < 0.04 else rng.randrange(1, 2000)
        leader_epoch += rng.random() < 0.02
        roll = rng.random()
        if roll < 0.01:  # a message from before the upgrade to v2: no producer state, but it counts for the log
            entries.append((offset, _legacy_message(offset, ts + rng.choice([0, 2_000_000]))))
            offset += 1
        elif roll < 0.04:
            entries.append((offset, _odd_control(rng, p, offset, ts, leader_epoch)))
            offset += 1
        elif roll < 0.07:
            count = rng.randint(1, 2)
            entries.append((offset, encode_batch(offset, count, -1, -1, -1, False, leader_epoch, ts)))
            offset += count
        elif p.transactional and (p.in_txn and roll < 0.3 or roll < 0.09):
            markers = _marker(rng, p, offset, ts, leader_epoch)
            entries.append((offset, markers))
            offset += len(markers) // 78
        else:
            batch, count = _data(rng, p, offset, ts, leader_epoch)
            entries.append((offset, batch))
            offset += count + (rng.random() < 0.02)
    if rng.random() < 0.5:  # the partition goes on without its producers: open transactions hang
        ts += 1_300_000
        entries.append((offset, encode_batch(offset, 1, -1, -1, -1, False, leader_epoch, ts)))
    return entries, leader_epoch


def _write_partition(rng: random.Random, directory: Path, entries: list[tuple[int, bytes]]) -> None:
    directory.mkdir(parents=True)
    cuts = sorted(rng.sample(range(1, len(entries)), rng.randint(0, 2)))
    for start, end in zip([0, *cuts], [*cuts, len(entries)], strict=True):
        body = bytearray(b"".join(batch for _, batch in entries[start:end]))
        if rng.random() < 0.1:  # a corrupted record: bad CRC, header still replayed
            body[-3] ^= 0xFF
        if end == len(entries) and rng.random() < 0.3:
            body += entries[0][1][:40]  # unflushed tail
        (directory / segment_file_name(entries[start][0])).write_bytes(bytes(body))


def write_random_histories(root: Path, seed: int = 15) -> Path:
    """Three brokers; topics `fuzz` (12 partitions), `fuzz-changelog` (compacted) and `__consumer_offsets`.

    A third of the partitions have a second replica on another broker: a truncated copy, the same log on a
    lower broker id, or a different log with a newer leader epoch, so the replica choice decides what is found.
    Some log-start-offset-checkpoint entries lie inside the log; a `-delete` dir holds a partition not to be read.
    """
    rng = random.Random(seed)
    partitions = [("fuzz", n) for n in range(12)] + [("fuzz-changelog", n) for n in range(4)]
    partitions += [("__consumer_offsets", n) for n in range(2)]
    log_starts: dict[int, list[str]] = {0: [], 1: [], 2: []}
    for index, (topic, partition) in enumerate(partitions):
        broker = 1 + index % 2
        entries, epoch = _history(rng, 1000 * (index + 1), rng.randrange(5))
        replicas = {broker: entries}
        kind = index % 3
        if kind == 0 and len(entries) > 10:
            replicas[(broker + 1) % 3] = entries[: len(entries) // 2]
        elif kind == 1:
            replicas[0] = entries
        elif kind == 2:
            replicas[(broker + 1) % 3] = _history(rng, 1000 * (index + 1), epoch + 1)[0]
        for broker_id, log in replicas.items():
            _write_partition(rng, root / f"broker-{broker_id}" / f"{topic}-{partition}", log)
            start = rng.choice(log)[0] if rng.random() < 0.2 else 0
            log_starts[broker_id].append(f"{topic} {partition} {start}")
    for broker_id, lines in log_starts.items():
        log_dir = root / f"broker-{broker_id}"
        (log_dir / "meta.properties").write_text(f"version=0\nbroker.id={broker_id}\n")
        (log_dir / "log-start-offset-checkpoint").write_text("\n".join(["0", str(len(lines)), *lines]) + "\n")
    skipped = root / "retired-delete" / "fuzz-0"  # under a dir with a skipped suffix: not read
    skipped.mkdir(parents=True)
    (skipped / segment_file_name(0)).write_bytes(encode_batch(0, 1, 5, 0, 9, partition_leader_epoch=99))
    return root


# --- the product, once over every source --------------------------------------------------------------------


def _generate_available() -> bool:
    if importlib.util.find_spec("pipeline.generate") is None or not CLI.exists():
        return False
    completed = subprocess.run([str(CLI), "generate", "--help"], capture_output=True, stdin=subprocess.DEVNULL)
    return completed.returncode == 0


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path]:
    """Source label -> log root."""
    found = {
        "sample": REPO / "samples" / "basic",
        "histories": write_random_histories(tmp_path_factory.mktemp("histories")),
    }
    if _generate_available():
        root = tmp_path_factory.mktemp("generated")
        args = ["--batches", "5000", "--partitions", "12", "--brokers", "3", "--anomaly-rate", "0.01", "--seed", "3"]
        command = [str(CLI), "generate", "--out", str(root), *args]
        completed = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        assert completed.returncode == 0, completed.stderr
        found["generated"] = root
    if REALDATA_SEGMENTS.is_dir():
        found.update({p.name: p for p in sorted(REALDATA_SEGMENTS.iterdir()) if p.is_dir() and "+" in p.name})
    return found


@pytest.fixture(scope="module")
def product(spark, scratch, sources) -> dict[str, Counter]:
    """Source label -> the product's findings of the covered families, as the baseline's tuples.

    The segments and checkpoints are decoded by the functions `read_segments` and `read_partition_files` run on
    the executors, called here on the driver: the data is small, and Python workers would cost more than it.
    """
    import pyarrow as pa
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema

    from pipeline.audit.engine.run import run_audit
    from pipeline.config import load_settings
    from pipeline.sources.partition_files.discovery import discover_partition_files
    from pipeline.sources.partition_files.reader import checkpoint_rows
    from pipeline.sources.segments import decode_file, discover_segments
    from schemas.batches import BATCHES
    from schemas.checkpoints import CHECKPOINT_KINDS, CHECKPOINTS

    settings = load_settings(overrides={"audit": {"compacted_topics": COMPACTED}})
    batches, checkpoints = [], []
    for label, root in sources.items():  # each source its own cluster: its topics prefixed by its label
        discovery = discover_segments([str(root)], settings.ingest)
        for segment in discovery.segments:
            segment = replace(segment, topic=f"{label}:{segment.topic}")
            batches += decode_file(segment, settings.ingest.verify_records)
        for file in discover_partition_files(discovery.listings).files:
            rows = checkpoint_rows(file) if file.kind in CHECKPOINT_KINDS else []
            checkpoints += [{**row, "topic": f"{label}:{row['topic']}"} for row in rows if row["topic"] is not None]
    batches = spark.createDataFrame(pa.Table.from_batches(batches, to_arrow_schema(BATCHES)))
    audit = settings.audit.model_copy(
        update={
            "compacted_topics": [f"*:{t}" for t in COMPACTED],
            "coordinator_topics": [f"*:{t}" for t in settings.audit.coordinator_topics],
            "kraft_topics": [f"*:{t}" for t in settings.audit.kraft_topics],
        }
    )
    shuffle_partitions = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")  # a few thousand rows: one task per stage is fastest
    try:
        result = run_audit(
            batches, audit, "baseline", scratch("baseline"), checkpoints=spark.createDataFrame(checkpoints, CHECKPOINTS)
        )
        rows = (
            result.findings.where(F.col("rule_code").rlike(COVERED.pattern))
            .select("rule_code", "severity", "topic", "partition", "producer_id", "base_offset")
            .collect()
        )
        result.release()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", shuffle_partitions)
    found: dict[str, Counter] = {label: Counter() for label in sources}
    for row in rows:
        label, topic = row.topic.split(":", 1)
        found[label][(row.rule_code, row.severity, topic, row.partition, row.producer_id, row.base_offset)] += 1
    return found


def _differences(product_findings: Counter, baseline_findings: Counter) -> dict[str, list]:
    return {
        "only_product": sorted((product_findings - baseline_findings).elements()),
        "only_baseline": sorted((baseline_findings - product_findings).elements()),
    }


NO_DIFFERENCE = {"only_product": [], "only_baseline": []}


def test_sample_findings_are_the_product_findings(product):
    expected = Counter(
        {
            ("SEQ-004", "CRITICAL", "orders", 1, 1001, 9): 1,
            ("SEQ-001", "ERROR", "orders", 1, 1001, 15): 1,
        }
    )
    assert product["sample"] == expected
    assert baseline_findings(REPO / "samples" / "basic") == expected


def test_random_histories_agree_with_the_product(product, sources):
    found = baseline_findings(sources["histories"])
    assert _differences(product["histories"], found) == NO_DIFFERENCE
    # the histories reach every covered rule, so the agreement means something
    assert {code for code, *_ in found} == ALL_COVERED
    assert {("SEQ-004", "WARN"), ("SEQ-005", "ERROR"), ("EPO-001", "WARN")} <= {(c, s) for c, s, *_ in found}


def test_generated_log_root_agrees_with_the_product(product, sources):
    if "generated" not in sources:
        pytest.skip("`produce-audit generate` is not available")
    found = baseline_findings(sources["generated"])
    assert _differences(product["generated"], found) == NO_DIFFERENCE
    assert sum(1 for code, severity, *_ in found.elements() if severity != "INFO") >= 10


@pytest.mark.realdata
def test_real_broker_dirs_agree_with_the_product(product, sources, realdata):
    repositories = [label for label in sources if "+" in label]
    assert len(repositories) >= 6
    for label in repositories:
        found = baseline_findings(sources[label])
        assert _differences(product[label], found) == NO_DIFFERENCE, label
        assert [f for f in found if f[1] != "INFO"] == [], label


def test_command_line_prints_counts_and_writes_findings(tmp_path):
    findings_out = tmp_path / "findings.jsonl"
    completed = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "baseline_replay.py"), "--input", str(REPO / "samples" / "basic"),
         "--findings-out", str(findings_out)],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    summary = json.loads(completed.stdout)
    assert summary["findings"] == {"SEQ-001": {"ERROR": 1}, "SEQ-004": {"CRITICAL": 1}}
    assert summary["batches"] > 0 and summary["seconds"] >= 0
    lines = [json.loads(line) for line in findings_out.read_text().splitlines()]
    assert {(f["rule_code"], f["topic"], f["partition"], f["base_offset"]) for f in lines} == {
        ("SEQ-004", "orders", 1, 9),
        ("SEQ-001", "orders", 1, 15),
    }
