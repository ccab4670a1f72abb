"""Baseline for benchmarks: the single-process Python replay a user would write without Spark.

    python benchmarks/baseline_replay.py --input LOGROOT [--input LOGROOT2 ...] [--findings-out FILE]
        [--reference-time TIME] [--transaction-version auto|1|2] [--compacted-topics GLOB ...] [--no-crc]

NOT part of the product. It exists so that benchmarks can compare `produce-audit run` with the obvious
alternative: read every `.log` segment of a log root with `struct` (61-byte v2 batch headers only, plus the one
control record of a transaction marker), replay the broker's producer state per (topic, partition, producer id)
with dicts and lists in one pass, and count findings. It covers only these rule families, with the product's
semantics (docs/rules.md, pipeline/audit/replay/plan.py and the rule modules):

    SEQ-001..SEQ-009, EPO-001..EPO-007, TXN-001..TXN-007, LSO-001, LSO-002, LSO-004

Nothing else: no file-integrity rules (FMT/SEG/LEP), no `.txnindex`, snapshot or `__transaction_state` checks,
no Delta tables, no dump-text or columnar inputs. Inputs are what `produce-audit run --input` takes as log dirs:
a `<topic>-<partition>` dir, a `log.dirs` dir of them, or a dir of broker dirs (broker id from meta.properties).
When several brokers hold a partition, the replica with the highest leader epoch, then the longest log, then
the lowest broker id is audited (`replica_facts`). The defaults are those of conf/local.yaml.

Prints `{"batches": N, "findings": {"SEQ-004": {"CRITICAL": 3}, ...}, "seconds": ...}` to stdout; with
--findings-out, one JSON line per finding: rule_code, severity, topic, partition, producer_id, base_offset.
Memory: the producer-batch headers of one partition's replicas at a time (plus the segment file being read).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import sys
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 batch header (spec §1.1)
LEGACY_PREFIX = struct.Struct(">qiIbb")  # magic 0/1: offset, size, crc, magic, attributes
SEGMENT_FILE = re.compile(r"^\d{20}\.log$")
PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
PROPERTY = re.compile(r"^[ \t]*([^#!\s=:]+)[ \t]*[=:][ \t]*(.*?)[ \t]*$", re.MULTILINE)
SKIP_DIR_SUFFIXES = ("-delete", "-future", "-stray")

INT32_MAX = 2_147_483_647
SEQ_SPAN = INT32_MAX + 1
WRAP_JUMP = 1 << 30  # a backwards step larger than this between batches is a wrap (as the product decides)
WINDOW = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN
ABORT, COMMIT = 0, 1
EPOCH_MAX = 32767
ATTR_TRANSACTIONAL, ATTR_CONTROL, ATTR_DELETE_HORIZON = 0x10, 0x20, 0x40
LATE_TRANSACTION_BUFFER_MS = 5 * 60 * 1000
COORDINATOR_CLEANUP_INTERVAL_MS = 10_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class Options:
    """The audit settings the covered rules read; defaults as in conf/local.yaml."""

    producer_id_expiration_ms: int = 86_400_000
    transaction_max_timeout_ms: int = 900_000
    transaction_version: str = "auto"  # auto | 1 | 2
    broker_version: str | None = None  # EPO-003 is WARN below 4.2
    compacted_topics: list[str] = field(default_factory=list)
    coordinator_topics: list[str] = field(
        default_factory=lambda: ["__consumer_offsets", "__transaction_state", "__share_group_state"]
    )
    kraft_topics: list[str] = field(default_factory=lambda: ["__cluster_metadata"])
    reference_time_ms: int | None = None
    verify_crc: bool = True


class Batch(NamedTuple):
    """Header fields of one v2 batch that carries producer state, and where it was read."""

    base_offset: int
    last_offset: int
    producer_id: int
    epoch: int
    base_sequence: int
    last_sequence: int
    transactional: bool
    control: bool
    control_type: int | None
    coordinator_epoch: int | None
    max_timestamp: int
    segment: int
    position: int


class Finding(NamedTuple):
    rule_code: str
    severity: str
    topic: str
    partition: int
    producer_id: int | None
    base_offset: int | None


@dataclass
class Replica:
    """One broker's copy of a partition: its producer batches and what replica choice and LSO need."""

    batches: list[Batch] = field(default_factory=list)
    max_leader_epoch: int | None = None
    max_last_offset: int | None = None
    max_timestamp: int | None = None
    first_offset: int | None = None  # first retained (readable) offset
    delete_horizon: bool = False  # a batch the cleaner rewrote: the partition is compacted


def _max(a, b):
    return b if a is None else a if b is None else max(a, b)


def _min(a, b):
    return b if a is None else a if b is None else min(a, b)


def glob_matcher(patterns: list[str]):
    """Topic glob patterns (`*`, `?`, everything else literal, case-sensitive) as one regex, like SQL LIKE."""
    parts = ["".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in p) for p in patterns]
    regex = re.compile("|".join(f"(?:{p})" for p in parts), re.DOTALL) if parts else None
    return lambda topic: regex is not None and regex.fullmatch(topic) is not None


def last_sequence(base: int, delta: int) -> int:
    """DefaultRecordBatch.lastSequence: base + lastOffsetDelta, wrapping past 2147483647; -1 stays -1."""
    if base == -1:
        return -1
    if base > INT32_MAX - delta:
        return delta - (INT32_MAX - base) - 1
    return base + delta


# --- reading log dirs ---------------------------------------------------------------------------------------


def broker_id_of(log_dir: str) -> int | None:
    """`node.id` or `broker.id` from the log dir's meta.properties, if there is one."""
    try:
        with open(os.path.join(log_dir, "meta.properties"), encoding="utf-8", errors="replace") as f:
            properties = dict(PROPERTY.findall(f.read(64 * 1024)))
    except OSError:
        return None
    for key in ("node.id", "broker.id"):
        value = properties.get(key)
        if value is not None and value.lstrip("-").isdigit():
            return int(value)
    return None


CHECKPOINTS = ("log-start-offset-checkpoint", "cleaner-offset-checkpoint")


def find_segments(root: str):
    """(topic, partition, broker id, segment base offset, path) of every `.log` in a `<topic>-<partition>` dir,
    and the log-start and cleaner offset checkpoint files found, as (broker id, file name, path)."""
    root = os.path.abspath(root)
    if not os.path.isdir(root):
        raise SystemExit(f"{root}: not a directory")
    segments, checkpoints, broker_ids = [], [], {}
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.endswith(SKIP_DIR_SUFFIXES))
        checkpoints += [(directory, name, os.path.join(directory, name)) for name in CHECKPOINTS if name in files]
        match = PARTITION_DIR.match(os.path.basename(directory))
        logs = sorted(name for name in files if SEGMENT_FILE.match(name))
        if match is None or not logs:
            continue
        log_dir = os.path.dirname(directory)
        if log_dir not in broker_ids:
            broker_ids[log_dir] = broker_id_of(log_dir)
            if directory == root:  # a partition dir given as the root: its log dir's checkpoints
                checkpoints += [
                    (log_dir, name, os.path.join(log_dir, name))
                    for name in CHECKPOINTS
                    if os.path.isfile(os.path.join(log_dir, name))
                ]
        for name in logs:
            topic, partition = match["topic"], int(match["partition"])
            segments.append((topic, partition, broker_ids[log_dir], int(name[:20]), os.path.join(directory, name)))
    return segments, [(broker_id_of(d), name, path) for d, name, path in checkpoints]


def read_checkpoints(checkpoints, kind: str) -> dict[tuple[str, int, int], int]:
    """(topic, partition, broker id) -> highest offset in the log dirs' checkpoint files named `kind`."""
    starts: dict[tuple[str, int, int], int] = {}
    for broker_id, name, path in checkpoints:
        if name != kind:
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
        for line in lines[2:]:  # version, entry count, then "<topic> <partition> <offset>"
            fields = line.split()
            if len(fields) == 3 and re.fullmatch(r"[+-]?\d+", fields[1]) and re.fullmatch(r"[+-]?\d+", fields[2]):
                key = (fields[0], int(fields[1]), -1 if broker_id is None else broker_id)
                starts[key] = max(starts.get(key, int(fields[2])), int(fields[2]))
    return starts


def _varint(buf, pos: int, end: int, bits: int) -> tuple[int, int]:
    """Zig-zag LEB128 (ByteUtils.readVarint / readVarlong); ValueError when malformed."""
    raw = 0
    for shift in range(0, 7 * ((bits + 6) // 7), 7):
        if pos >= end:
            raise ValueError("ends inside a varint")
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            raw &= (1 << bits) - 1
            return (raw >> 1) ^ -(raw & 1), pos
    raise ValueError("varint too long")


def control_record(buf, start: int, end: int) -> tuple[int | None, int | None]:
    """(control type, coordinator epoch) of the first record of an uncompressed control batch (spec §1.1.5)."""
    try:
        length, pos = _varint(buf, start, end, 32)
        if length < 0 or pos + length > end:
            return None, None
        end = pos + length
        _, pos = _varint(buf, pos + 1, end, 64)  # skip attributes, read the timestamp delta
        _, pos = _varint(buf, pos, end, 32)  # offset delta
        key_length, pos = _varint(buf, pos, end, 32)
        if key_length < 4 or pos + key_length > end:
            return None, None
        key_version, control_type = struct.unpack_from(">hh", buf, pos)
        if key_version < 0:
            return None, None
        if control_type not in (ABORT, COMMIT):
            return control_type, None
        value_length, pos = _varint(buf, pos + key_length, end, 32)
        if value_length < 6 or pos + value_length > end:
            return control_type, None
        value_version, coordinator_epoch = struct.unpack_from(">hi", buf, pos)
        return control_type, (coordinator_epoch if value_version >= 0 else None)
    except ValueError:
        return None, None


def read_segment(path: str, segment: int, replica: Replica, keep_producer_batches: bool, verify_crc: bool):
    """Walk the entries of one segment like FileLogInputStream.nextBatch; returns (v2 batches, CRC mismatches).

    Stops at an entry the broker cannot iterate past (too small, bad magic, truncated tail). Batches with a
    producer id (minus empty control batches) go to `replica.batches`; legacy messages only count for the
    replica's offsets and timestamps.
    """
    with open(path, "rb") as f:
        data = f.read()
    view = memoryview(data)
    pos, size_of_file, v2, bad_crc = 0, len(data), 0, 0
    while size_of_file - pos >= 17:
        size = struct.unpack_from(">i", data, pos + 8)[0]
        end = pos + 12 + size
        magic = data[pos + 16]
        if size < 14 or end > size_of_file or magic > 2 or (magic == 2 and size < 49):
            break
        if magic < 2:
            offset, _, _, _, attributes = LEGACY_PREFIX.unpack_from(data, pos)
            replica.max_last_offset = _max(replica.max_last_offset, offset)
            if attributes & 0x07 == 0:
                replica.first_offset = _min(replica.first_offset, offset)
            if magic == 1 and size >= 22:
                replica.max_timestamp = _max(replica.max_timestamp, struct.unpack_from(">q", data, pos + 18)[0])
            pos = end
            continue
        (base_offset, _, leader_epoch, _, crc, attributes, delta, _, max_ts, pid, epoch, base_seq, count) = (
            HEADER.unpack_from(data, pos)
        )
        v2 += 1
        if verify_crc and crc32c(view[pos + 21 : end]) != crc:
            bad_crc += 1  # FMT-004; the header is still replayed (spec §6.0a.2)
        last_offset = base_offset + delta
        replica.max_leader_epoch = _max(replica.max_leader_epoch, leader_epoch)
        replica.max_last_offset = _max(replica.max_last_offset, last_offset)
        replica.max_timestamp = _max(replica.max_timestamp, max_ts)
        replica.first_offset = _min(replica.first_offset, base_offset)
        replica.delete_horizon = replica.delete_horizon or bool(attributes & ATTR_DELETE_HORIZON)
        control = bool(attributes & ATTR_CONTROL)
        if keep_producer_batches and pid >= 0 and not (control and count == 0):
            control_type = coordinator_epoch = None
            if control and attributes & 0x07 == 0 and count > 0:
                control_type, coordinator_epoch = control_record(data, pos + 61, end)
            replica.batches.append(
                Batch(
                    base_offset, last_offset, pid, epoch, base_seq, last_sequence(base_seq, delta),
                    bool(attributes & ATTR_TRANSACTIONAL), control, control_type, coordinator_epoch, max_ts,
                    segment, pos,
                )
            )  # fmt: skip
        pos = end
    return v2, bad_crc


# --- the replay ---------------------------------------------------------------------------------------------


class Producer:
    """The broker's per-(partition, producer id) state before the next batch, as pipeline/audit/replay/plan.py keeps it.

    Fencing epoch = highest epoch so far (a regression never lowers it). An epoch run is the batches at one
    fencing epoch; its sequence state (5-batch window, highest unwrapped sequence written) is reset when the
    fencing epoch rises. A transaction is the transactional data since the last marker.
    """

    def __init__(self) -> None:
        self.rows = 0
        self.epoch: int | None = None
        self.run_first_row = 0
        self.prev: Batch | None = None
        self.prev_is_marker = False
        self.coordinator_epoch: int | None = None
        self.seen_txn = self.seen_plain = self.tv2 = self.saw_transactional = False
        self.tv2_abort: tuple[int, int] | None = None  # a TV2 ABORT one above its data: (offset, data epoch)
        self.skips: list[int] = []  # offsets of EPO-006 candidates: not for a TV2 producer, known at its end
        self.txn_first_offset: int | None = None
        self.txn_epoch: int | None = None
        self.txn_start_ts: int | None = None
        self.txn_last_ts: int | None = None
        self.new_run()

    def new_run(self) -> None:
        self.seq_rows = 0
        self.prev_last: int | None = None
        self.wraps = 0  # wraps between batches up to the previous one, plus wraps inside earlier batches
        self.position: int | None = None  # highest unwrapped last sequence written in the run
        self.min_base: int | None = None
        self.window: deque = deque(maxlen=WINDOW)  # (base, last, unwrapped base, unwrapped last)


def replay_partition(
    topic: str,
    partition: int,
    batches: list[Batch],
    options: Options,
    sequence_checked: bool,
    cleaned_to: int | None = None,
) -> tuple[list[Finding], list[tuple[int, int, int]]]:
    """Replay one partition's producer batches in offset order, in one pass. `cleaned_to`: the cleaner checkpoint
    of a compacted partition, below which a forward sequence gap is the cleaner's (SEQ-001 INFO).

    Returns the SEQ, EPO and TXN findings, and the transactions left open at the end of the log as
    (producer id, first offset, timestamp of their last data batch).
    """
    found: list[Finding] = []
    producers: dict[int, Producer] = {}
    expiry = options.producer_id_expiration_ms
    long_txn = options.transaction_max_timeout_ms + COORDINATOR_CLEANUP_INTERVAL_MS
    configured_tv2 = {"auto": None, "1": False, "2": True}[options.transaction_version]
    epo3 = "WARN" if _older_than(options.broker_version, (4, 2)) else "ERROR"

    def fire(code: str, severity: str) -> None:  # a finding at the batch being replayed
        found.append(Finding(code, severity, topic, partition, b.producer_id, b.base_offset))

    for b in sorted(batches, key=lambda b: (b.base_offset, b.segment, b.position)):
        p = producers.get(b.producer_id)
        if p is None:
            p = producers[b.producer_id] = Producer()
        p.rows += 1
        known, state_epoch, e = p.epoch is not None, p.epoch, b.epoch
        if not known or e > state_epoch:
            p.run_first_row = p.rows
            p.new_run()
        is_data = not b.control
        is_marker = b.control and b.control_type in (ABORT, COMMIT)
        txn_data, plain_data = is_data and b.transactional, is_data and not b.transactional
        txn_open = p.txn_first_offset is not None
        expired = p.prev is not None and not txn_open and b.max_timestamp - p.prev.max_timestamp >= expiry
        tv2 = p.tv2 if configured_tv2 is None else configured_tv2
        closing = is_marker and txn_open
        bump = e - p.txn_epoch if closing else None

        # SEQ: client-topic data at the run's epoch, against the run's sequence state. Sequences are unwrapped
        # (u_base, u_last) so that "highest sequence written" (position) is a running max.
        if is_data and sequence_checked and (not known or e >= state_epoch):
            base, last = b.base_sequence, b.last_sequence
            wrap_between = int(p.prev_last is not None and base < p.prev_last - WRAP_JUMP)
            wrap_inside = int(last < base)
            u_base = base + (p.wraps + wrap_between) * SEQ_SPAN
            u_last = last + (p.wraps + wrap_between + wrap_inside) * SEQ_SPAN
            if p.seq_rows == 0:  # first data batch of the epoch run
                tv2_first = tv2 and b.transactional and not txn_open
                if base != 0 and expired:
                    fire("SEQ-007", "WARN")
                elif base != 0:
                    if known and e == state_epoch and p.run_first_row > 1 and not tv2_first:
                        fire("SEQ-002", "ERROR")
                    if known and e > state_epoch and not tv2_first:
                        fire("SEQ-003", "ERROR")
                    if known and tv2_first:
                        fire("SEQ-009", "ERROR")
                    if not known or p.run_first_row == 1:
                        fire("SEQ-006", "INFO")
            else:
                exact = any(w[0] == base and w[1] == last for w in p.window)  # a cached range: duplicate
                overlaps = any(w[2] <= u_last and u_base <= w[3] for w in p.window)  # intersects a cached range
                behind = u_base <= p.position  # starts at or below the highest sequence written
                if exact:
                    fire("SEQ-004", "WARN" if expired else "CRITICAL")
                elif behind and (overlaps or u_base >= p.min_base):
                    fire("SEQ-005", "CRITICAL" if overlaps else "ERROR")
                elif (behind and u_base < p.min_base) or (not behind and u_base != p.position + 1):
                    if not expired:
                        cleaned = not behind and cleaned_to is not None and b.base_offset <= cleaned_to
                        fire("SEQ-001", "INFO" if cleaned else "ERROR")
                    elif base != 0:
                        fire("SEQ-007", "WARN")
            if wrap_inside or (base == 0 and p.prev_last == INT32_MAX):
                fire("SEQ-008", "INFO")
            p.seq_rows += 1
            p.prev_last = last
            p.wraps += wrap_between + wrap_inside
            p.position = _max(p.position, u_last)
            p.min_base = _min(p.min_base, u_base)
            p.window.append((base, last, u_base, u_last))

        # EPO
        if known and e < state_epoch:
            if is_data:
                fire("EPO-001", "WARN" if expired else "ERROR")
            elif is_marker:
                fire("EPO-002", "ERROR")
        if closing:
            abort = b.control_type == ABORT
            if tv2 and bump == 0:
                fire("EPO-003", epo3)
            if abort and (bump == 2 if tv2 else bump == 1):  # TV2: the 4.0.0 double bump (KAFKA-19367)
                fire("EPO-004", "INFO")
            if tv2 and abort and bump == 1:  # a fence when the next data is two above (spec §3.4)
                p.tv2_abort = (b.base_offset, p.txn_epoch)
            if bump > 1 and not (tv2 and abort and bump == 2):
                fire("EPO-005", "WARN")
        if is_data and p.tv2_abort is not None:
            marker_offset, data_epoch = p.tv2_abort
            if e == data_epoch + 2:
                found.append(Finding("EPO-004", "INFO", topic, partition, b.producer_id, marker_offset))
            p.tv2_abort = None
        if known and e - state_epoch > 1:
            p.skips.append(b.base_offset)
        if txn_data and e == EPOCH_MAX:
            fire("EPO-007", "WARN")

        # TXN
        if plain_data and txn_open:
            fire("TXN-001", "ERROR")
        if txn_data and txn_open and e > p.txn_epoch:
            fire("TXN-002", "CRITICAL")
        if is_marker and not txn_open:
            fire("TXN-003", "INFO")
        ce, state_ce = b.coordinator_epoch, p.coordinator_epoch
        if is_marker and ce is not None and state_ce is not None and ce < state_ce:
            fire("TXN-004", "ERROR")
        if closing and b.control_type == COMMIT and b.max_timestamp - p.txn_start_ts > long_txn:
            fire("TXN-005", "WARN")
        if (txn_data and not p.seen_txn and p.seen_plain) or (plain_data and not p.seen_plain and p.seen_txn):
            fire("TXN-006", "WARN")
        if tv2 and is_marker and p.prev_is_marker and p.prev.epoch == e and p.prev.control_type != b.control_type:
            fire("TXN-007", "WARN")

        # the state after the batch
        if closing and b.control_type == COMMIT and bump == 1:
            p.tv2 = True  # TV2 bumps the epoch on every commit (transaction version inference)
        p.epoch = e if not known else max(state_epoch, e)
        p.prev, p.prev_is_marker = b, is_marker
        p.seen_txn |= txn_data
        p.seen_plain |= plain_data
        p.saw_transactional |= b.transactional
        if is_marker:
            p.coordinator_epoch = _max(p.coordinator_epoch, b.coordinator_epoch)
            p.txn_first_offset = p.txn_epoch = p.txn_start_ts = p.txn_last_ts = None
        elif txn_data:
            if p.txn_first_offset is None:
                p.txn_first_offset, p.txn_start_ts = b.base_offset, b.max_timestamp
            p.txn_epoch = _max(p.txn_epoch, e)
            p.txn_last_ts = _max(p.txn_last_ts, b.max_timestamp)

    for pid, p in producers.items():  # EPO-006 is not for a TV2 producer, whose epoch counts its transactions
        if not (p.saw_transactional and (p.tv2 if configured_tv2 is None else configured_tv2)):
            found.extend(Finding("EPO-006", "INFO", topic, partition, pid, offset) for offset in p.skips)
    open_transactions = [
        (pid, p.txn_first_offset, p.txn_last_ts) for pid, p in producers.items() if p.txn_first_offset is not None
    ]
    return found, open_transactions


def _older_than(version: str | None, than: tuple[int, int]) -> bool:
    if not version:
        return False
    return tuple(int(part) for part in version.split(".")[:2] if part.isdigit()) < than


# --- the run ------------------------------------------------------------------------------------------------


@dataclass
class Result:
    batches: int
    crc_mismatches: int
    partitions: int
    findings: list[Finding]
    seconds: float

    def counts(self) -> dict[str, dict[str, int]]:
        by_rule: dict[str, Counter] = {}
        for f in self.findings:
            by_rule.setdefault(f.rule_code, Counter())[f.severity] += 1
        return {code: dict(sorted(by_rule[code].items())) for code in sorted(by_rule)}


def audit(roots: list[str], options: Options | None = None) -> Result:
    """Read every segment under `roots`, choose one replica per partition, replay it, and collect the findings."""
    options = options or Options()
    started = time.perf_counter()
    is_compacted = glob_matcher(options.compacted_topics)
    is_coordinator = glob_matcher(options.coordinator_topics)
    is_kraft = glob_matcher(options.kraft_topics)
    segments: dict[tuple[str, int], dict[int, list[tuple[int, str]]]] = {}  # (topic, partition) -> broker -> files
    checkpoints = []
    for root in roots:
        found_segments, found_checkpoints = find_segments(root)
        checkpoints += found_checkpoints
        for topic, partition, broker_id, segment, path in found_segments:
            broker = -1 if broker_id is None else broker_id
            segments.setdefault((topic, partition), {}).setdefault(broker, []).append((segment, path))
    log_starts = read_checkpoints(checkpoints, "log-start-offset-checkpoint")
    cleaned_to = read_checkpoints(checkpoints, "cleaner-offset-checkpoint")
    hanging_after = options.transaction_max_timeout_ms + LATE_TRANSACTION_BUFFER_MS

    def rank(item):  # highest leader epoch, then longest log, then lowest broker id
        broker, replica = item
        low = float("-inf")
        epoch, end = replica.max_leader_epoch, replica.max_last_offset
        return (low if epoch is None else epoch, low if end is None else end, -broker)

    batches = bad_crc = 0
    findings: list[Finding] = []
    for (topic, partition), brokers in sorted(segments.items()):  # one partition in memory at a time
        copies = {broker: Replica() for broker in brokers}
        for broker, files in brokers.items():
            for segment, path in sorted(files):
                v2, bad = read_segment(path, segment, copies[broker], not is_kraft(topic), options.verify_crc)
                batches, bad_crc = batches + v2, bad_crc + bad
        broker, replica = max(copies.items(), key=rank)
        cleaner_offset = cleaned_to.get((topic, partition, broker))
        # compacted as the product knows it: configured, listed by the cleaner's checkpoint, or rewritten by it
        compacted = is_compacted(topic) or cleaner_offset is not None or replica.delete_horizon
        found, open_transactions = replay_partition(
            topic,
            partition,
            replica.batches,
            options,
            sequence_checked=not is_coordinator(topic),
            cleaned_to=cleaner_offset if compacted else None,
        )
        findings += found
        if not open_transactions:
            continue
        # LSO-001 at the first unstable offset (clamped to the log start), LSO-002/004 for the hanging ones
        log_start = _max(replica.first_offset, log_starts.get((topic, partition, broker)))
        first_unstable = _max(min(first for _, first, _ in open_transactions), log_start)
        findings.append(Finding("LSO-001", "INFO", topic, partition, None, first_unstable))
        now = options.reference_time_ms if options.reference_time_ms is not None else replica.max_timestamp
        for pid, first, last_timestamp in open_transactions:
            if now is not None and now - last_timestamp > hanging_after:
                findings.append(Finding("LSO-002", "ERROR", topic, partition, pid, first))
                if compacted:
                    findings.append(Finding("LSO-004", "WARN", topic, partition, pid, first))
    return Result(batches, bad_crc, len(segments), once_per_producer(findings), time.perf_counter() - started)


# The rules of those replayed here whose INFO findings note normal behaviour: the product reports them once per
# (partition, producer), at the first occurrence (docs/rules.md, "once per producer").
PER_PRODUCER = frozenset({"EPO-004", "EPO-006", "SEQ-001", "SEQ-008", "TXN-003"})


def once_per_producer(findings: list[Finding]) -> list[Finding]:
    """The findings with the INFO ones of PER_PRODUCER rules kept at their first offset per partition and producer."""
    first: dict[tuple, Finding] = {}
    kept = []
    for f in findings:
        if f.severity != "INFO" or f.rule_code not in PER_PRODUCER:
            kept.append(f)
            continue
        key = (f.rule_code, f.topic, f.partition, f.producer_id)
        earlier = first.get(key)
        if earlier is None or (f.base_offset if f.base_offset is not None else -1) < (
            earlier.base_offset if earlier.base_offset is not None else -1
        ):
            first[key] = f
    return kept + list(first.values())


def parse_reference_time(text: str) -> int:
    """Epoch milliseconds, or ISO-8601 (naive = UTC), as `produce-audit --reference-time` takes it."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - EPOCH) // timedelta(milliseconds=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("roots", nargs="*", metavar="LOGROOT")
    parser.add_argument("--input", action="append", default=[], metavar="LOGROOT", help="a log root (repeatable)")
    parser.add_argument("--findings-out", metavar="FILE", help="write the findings as JSON lines")
    parser.add_argument("--reference-time", type=parse_reference_time, help="ISO-8601 or epoch ms (LSO-002)")
    parser.add_argument("--transaction-version", choices=("auto", "1", "2"), default="auto")
    parser.add_argument("--broker-version", help="e.g. 3.7 (EPO-003 is WARN below 4.2)")
    parser.add_argument("--compacted-topics", nargs="*", default=[], metavar="GLOB")
    parser.add_argument("--producer-id-expiration-ms", type=int, default=Options.producer_id_expiration_ms)
    parser.add_argument("--transaction-max-timeout-ms", type=int, default=Options.transaction_max_timeout_ms)
    parser.add_argument("--no-crc", dest="verify_crc", action="store_false", help="skip CRC-32C verification")
    args = parser.parse_args(argv)
    roots = args.roots + args.input
    if not roots:
        parser.error("give at least one log root")
    options = Options(
        producer_id_expiration_ms=args.producer_id_expiration_ms,
        transaction_max_timeout_ms=args.transaction_max_timeout_ms,
        transaction_version=args.transaction_version,
        broker_version=args.broker_version,
        compacted_topics=args.compacted_topics,
        reference_time_ms=args.reference_time,
        verify_crc=args.verify_crc,
    )
    result = audit(roots, options)
    if args.findings_out:
        with open(args.findings_out, "w") as out:
            for finding in result.findings:
                out.write(json.dumps(finding._asdict()) + "\n")
    summary = {
        "batches": result.batches,
        "partitions": result.partitions,
        "crc_mismatches": result.crc_mismatches if options.verify_crc else None,
        "findings": result.counts(),
        "seconds": round(result.seconds, 3),
        "batches_per_second": round(result.batches / result.seconds) if result.seconds > 0 else None,
    }
    json.dump(summary, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


try:
    from crc32c import crc32c
except ImportError:  # only needed with CRC verification on

    def crc32c(data) -> int:
        raise SystemExit("CRC-32C verification needs the crc32c package (pip install crc32c), or pass --no-crc")


if __name__ == "__main__":
    sys.exit(main())
