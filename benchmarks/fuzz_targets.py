"""The decoders under fuzz: for every kind of file the auditor reads, its seeds from the real Kafka data, the
mutation it gets, and a case runner that decodes one mutated input and checks the output's contract.

A decoder passes a case when it returns within the time limit and what it returns is well formed: rows fit the
Arrow schema of the table they land in (an out-of-range number would fail the Spark task), positions lie inside
the input, problem lines name a line of the text. Only `records.iter_records` raises by design (RecordError,
naming a byte of the batch, which its callers turn into a row); any other exception is a crash.
Used by benchmarks/fuzz_suite.py (the benchmark) and tests/unit/test_decoder_fuzz.py (its seeded CI subset).
"""

from __future__ import annotations

import io
import json
import random
import re
import signal
import struct
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow as pa
from crc32c import crc32c
from mutations import mutate_bytes, mutate_text
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.sources.coordinator_records.consumer_offsets import decode_offset_commit
from pipeline.sources.coordinator_records.transaction_state import decode_transaction_log, transaction_log_rows
from pipeline.sources.dumplog.parser import parse_dump
from pipeline.sources.dumplog.reader import SNAPSHOT_ENTRIES, TXN_INDEX_ENTRIES
from pipeline.sources.kafka_format.windows import decode_segment, iter_decoded
from pipeline.sources.partition_files.binary_files import (
    SNAPSHOT_CRC_START,
    SNAPSHOT_ENTRY,
    decode_producer_snapshot,
    decode_txn_index,
)
from pipeline.sources.partition_files.entries import TXN_INDEX_ENTRY
from pipeline.sources.partition_files.index_checks import check_offset_index, check_time_index
from pipeline.sources.partition_files.text_files import (
    decode_leader_epoch_checkpoint,
    decode_offset_checkpoint,
    decode_partition_metadata,
)
from pipeline.sources.records.api import RecordError, iter_records
from schemas.batches import BATCHES, STATUS_BAD_MAGIC, STATUS_LEGACY, STATUS_OK, STATUS_TOO_SMALL, STATUS_TRUNCATED
from schemas.checkpoints import CHECKPOINT_KINDS, CHECKPOINTS
from schemas.file_problems import FILE_PROBLEMS
from schemas.leader_epochs import LEADER_EPOCHS
from schemas.offset_commits import OFFSET_COMMITS
from schemas.partition_metadata import PARTITION_METADATA
from schemas.producer_snapshots import PRODUCER_SNAPSHOTS
from schemas.transaction_log import TRANSACTION_LOG
from schemas.txn_index import TXN_INDEX

SEGMENT_STATUSES = {STATUS_OK, STATUS_LEGACY, STATUS_TRUNCATED, STATUS_TOO_SMALL, STATUS_BAD_MAGIC}
SNAPSHOT_STATUSES = {"ok", "truncated", "bad_version", "trailing_bytes", "crc_mismatch"}
TRANSACTION_STATE_SEGMENTS = (
    "klog-testWithTransactionLogDecoder-L204",
    "fvaleri-strimzi-debugging-session010-03",
    "ableasdale-kafka-transactions-README-09",
    "ableasdale-kafka-transactions-README-12",
)
OFFSET_COMMIT_BATCH = "fvaleri-strimzi-debugging-session010-02__off7"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_BYTE_NAMED = re.compile(r"\bbyte (\d+)")
_BATCH_BYTE = re.compile(r"\bbyte (\d+)\b(?! of the \w+-decompressed)")  # not a byte of the decompressed records
_KEY_OR_VALUE_BYTE = re.compile(r"^(key|value) byte (\d+): ")


class Malformed(Exception):
    """The decoder returned, but its output breaks its contract."""


class Hang(BaseException):
    """The decoder ran past the per-case time limit (a BaseException, so no `except Exception` swallows it)."""


@dataclass(frozen=True)
class Seed:
    """One real file (or a part of one) and what its decoder needs beside it."""

    name: str  # path under the real data, with a `#part` suffix for a part of a file
    data: Any  # bytes, or str for text decoders
    context: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Target:
    """A decoder kind: its seeds, how a seed is mutated into an input, and the checked decode of an input."""

    kind: str
    decoder: str  # the entry point, for the report
    seeds: list[Seed]
    mutate: Callable[[Seed, random.Random], tuple[str, Any]]
    run: Callable[[Seed, Any, random.Random], None]


@dataclass(frozen=True)
class Failure:
    kind: str
    seed: str
    mutation: str
    outcome: str  # 'crash', 'hang' or 'malformed'
    error: str


@dataclass
class Tally:
    """What one kind's cases gave."""

    inputs: int = 0
    failures: list[Failure] = field(default_factory=list)
    errors_by_design: int = 0  # RecordError raised where iter_records is designed to raise


class _ExpectedError(Exception):
    """Raised by a case runner after it checked a decoder's own error: counted, not a failure."""


# --- running cases ------------------------------------------------------------------------------------


def run_cases(target: Target, count: int, rng: random.Random, seconds: float, tally: Tally | None = None) -> Tally:
    """`count` mutated inputs of `target`, round robin over its seeds, each decoded under a time limit."""
    tally = tally or Tally()
    previous = signal.signal(signal.SIGALRM, _expire)
    try:
        for _ in range(count):
            seed = target.seeds[tally.inputs % len(target.seeds)]
            mutation, mutated = target.mutate(seed, rng)
            case_rng = random.Random(rng.getrandbits(64))
            outcome = error = None
            signal.setitimer(signal.ITIMER_REAL, seconds)
            try:
                target.run(seed, mutated, case_rng)
            except _ExpectedError:
                tally.errors_by_design += 1
            except Hang:
                outcome, error = "hang", f"over {seconds} s"
            except Malformed as exc:
                outcome, error = "malformed", str(exc)
            except Exception as exc:
                outcome, error = "crash", _describe(exc)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            tally.inputs += 1
            if outcome is not None:
                tally.failures.append(Failure(target.kind, seed.name, mutation, outcome, error))
    finally:
        signal.signal(signal.SIGALRM, previous)
    return tally


def _expire(signum, frame):
    raise Hang()


def _describe(exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    return f"{type(exc).__name__}: {exc} ({Path(frame.filename).name}:{frame.lineno})"[:500]


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise Malformed(message)


@cache
def _arrow(schema: T.StructType) -> pa.Schema:
    return to_arrow_schema(schema)


def fits(rows: list[dict[str, Any]], schema: T.StructType, table: str) -> None:
    """The rows load into the table's Arrow schema, as the Spark readers load them (missing columns null)."""
    try:
        pa.Table.from_pylist(rows, schema=_arrow(schema))
    except (pa.ArrowException, OverflowError, TypeError, ValueError) as exc:
        raise Malformed(f"rows do not fit the {table} schema: {exc}") from None


# --- mutations ------------------------------------------------------------------------------------------


def _stacked(data: Any, rng: random.Random) -> tuple[str, Any]:
    """One to three mutations on top of each other: damage rarely comes alone."""
    mutate = mutate_text if isinstance(data, str) else mutate_bytes
    mutations = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        mutation, data = mutate(data, rng)
        mutations.append(mutation)
    return "+".join(mutations), data


def _mutate_data(seed: Seed, rng: random.Random) -> tuple[str, Any]:
    return _stacked(seed.data, rng)


def _mutate_snapshot(seed: Seed, rng: random.Random) -> tuple[str, bytes]:
    """Half the mutated snapshots get their CRC recomputed, so the entry checks behind the CRC check are reached."""
    mutation, data = _stacked(seed.data, rng)
    if len(data) >= SNAPSHOT_CRC_START and rng.random() < 0.5:
        data = data[:2] + struct.pack(">I", crc32c(data[SNAPSHOT_CRC_START:])) + data[SNAPSHOT_CRC_START:]
        mutation += "+crc"
    return mutation, data


def _mutate_one_of(names: tuple[str, ...]) -> Callable[[Seed, random.Random], tuple[str, dict[str, Any]]]:
    """Mutate one of several inputs of a case (an index or the segment it indexes, a record's key or value)."""

    def mutate(seed: Seed, rng: random.Random) -> tuple[str, dict[str, Any]]:
        inputs = {"data": seed.data, **seed.context}
        present = [name for name in names if inputs.get(name) is not None]
        name = rng.choice(present)
        if name == "value" and rng.random() < 0.05:
            return "value:null", {**inputs, "value": None}
        mutation, inputs[name] = _stacked(inputs[name], rng)
        return f"{name}:{mutation}", inputs

    return mutate


# --- case runners ---------------------------------------------------------------------------------------


def _run_segment(seed: Seed, data: bytes, rng: random.Random) -> None:
    """Whole and streamed decoding agree; every row is an entry inside the file with a known status."""
    whole = decode_segment(data)
    window = rng.choice([17, 64, 500, 4096])
    streamed = list(iter_decoded(io.BytesIO(data).read, len(data), window_bytes=window))
    rows = whole.select(["position", "size_bytes", "entry_status", "compression", "record_problem"]).to_pylist()
    expect({row["entry_status"] for row in rows} <= SEGMENT_STATUSES, "an unknown entry status")
    positions = [row["position"] for row in rows]
    expect(positions == sorted(positions), "rows out of file order")
    expect(all(0 <= position < len(data) for position in positions), "a row outside the file")
    expect(all(row["position"] + row["size_bytes"] <= len(data) for row in rows), "a row past the end of the file")
    for row in rows:
        problem = row["record_problem"]
        named = [int(byte) for byte in _BATCH_BYTE.findall(problem or "")]
        size = row["size_bytes"]
        expect(all(byte <= size for byte in named), f"{problem!r}: the batch has {size} bytes")
        expect(problem is None or row["compression"] != 0 or bool(named), f"{problem!r} names no byte of the batch")
    joined = pa.concat_tables(streamed) if streamed else whole.slice(0, 0)
    expect(joined.equals(whole), f"decoding in {window}-byte windows differs from decoding the file whole")


def _run_records(seed: Seed, entry: bytes, rng: random.Random) -> None:
    """Records come back whole, or RecordError names a byte of the batch."""
    try:
        records = list(iter_records(entry))
    except RecordError as exc:
        expect(0 <= exc.position <= len(entry), f"RecordError at byte {exc.position} of a {len(entry)}-byte batch")
        expect(f"batch byte {exc.position}" in str(exc), f"RecordError does not name its byte: {exc}")
        raise _ExpectedError() from None
    deltas = [record.offset_delta for record in records]
    expect(deltas == sorted(set(deltas)), "record offset deltas do not increase")
    for record in records:
        expect(record.key is None or isinstance(record.key, bytes), "a key that is not bytes")
        expect(record.value is None or isinstance(record.value, bytes), "a value that is not bytes")


def _run_transaction_state_segment(seed: Seed, data: bytes, rng: random.Random) -> None:
    """`__transaction_state` rows as the Spark reader makes them; a fault names a byte of its batch."""
    batches = decode_segment(data, verify_records=False).to_pylist()
    rows = []
    for batch in batches:
        if batch["entry_status"] == STATUS_OK and not batch["is_control"]:
            entry = data[batch["position"] : batch["position"] + batch["size_bytes"]]
            rows.extend(transaction_log_rows(entry, batch))
    fits(rows, TRANSACTION_LOG, "transaction_log")
    for row in rows:
        error = row.get("decode_error")
        named = error is None or error == "record has no key" or _BYTE_NAMED.search(error) is not None
        expect(named, f"{error!r} names no byte")
        expect(0 <= row["position"] < len(data), f"a row at byte {row['position']} of a {len(data)}-byte file")


def _run_coordinator_record(seed: Seed, inputs: dict[str, Any], rng: random.Random) -> None:
    """One key/value through its decoder; a fault names a byte inside the key or the value."""
    key, value = inputs["key"], inputs["value"]
    row = seed.context["decode"](key, value)
    fits([row], seed.context["schema"], seed.context["table"])
    error = row.get("decode_error")
    if error is None or error == "record has no key":
        return
    where = _KEY_OR_VALUE_BYTE.match(error)
    expect(where is not None, f"{error!r} names no byte of the key or value")
    part = key if where.group(1) == "key" else value
    expect(int(where.group(2)) <= len(part), f"{error!r}: the {where.group(1)} has {len(part)} bytes")


def _run_snapshot(seed: Seed, data: bytes, rng: random.Random) -> None:
    rows = decode_producer_snapshot(data)
    fits(rows, PRODUCER_SNAPSHOTS, "producer_snapshots")
    expect(bool(rows), "no row for a snapshot file")
    expect({row["file_status"] for row in rows} <= SNAPSHOT_STATUSES, "an unknown file status")
    if len(rows) > 1:
        expect(all(row["file_status"] == "ok" and row["crc_valid"] for row in rows), "entries of a rejected file")
        expect(len(rows) * SNAPSHOT_ENTRY.size <= len(data), "more entries than the file holds")


def _run_txn_index(seed: Seed, data: bytes, rng: random.Random) -> None:
    rows = decode_txn_index(data)
    fits(rows, TXN_INDEX, "txn_index")
    whole = len(data) - len(data) % TXN_INDEX_ENTRY.size
    for number, row in enumerate(rows):
        if row["entry_status"] == "ok":
            expect(row["position"] == number * TXN_INDEX_ENTRY.size, f"entry {number} at byte {row['position']}")
            expect(row["position"] + TXN_INDEX_ENTRY.size <= len(data), "an entry past the end of the file")
        else:
            expect((row["entry_status"], row["position"]) == ("truncated", whole), f"unexpected row {row}")


def _run_index(seed: Seed, inputs: dict[str, Any], rng: random.Random) -> None:
    """SEG-004/SEG-005 problems name a byte of the index file, which the problem row keeps."""
    data, log = inputs["data"], inputs.get("log")
    read_log = None if log is None else (lambda position, length: log[position : position + length])
    if seed.context["kind"] == "index":
        problems = check_offset_index(data, seed.context["base_offset"], read_log)
    else:
        problems = check_time_index(data, seed.context["base_offset"], inputs.get("offset_index") or b"", read_log)
    fits([{"position": position, "message": message} for position, message in problems], FILE_PROBLEMS, "file_problems")
    for position, message in problems:
        expect(isinstance(message, str) and bool(message), "a problem without a message")
        expect(0 <= position < max(len(data), 1), f"a problem at byte {position} of a {len(data)}-byte index")


def _text_checker(decode: Callable[[str], tuple[list[dict[str, Any]], list[Any]]], schema: T.StructType, table: str):
    def run(seed: Seed, text: str, rng: random.Random) -> None:
        entries, problems = decode(text)
        lines = _line_count(text)
        fits(entries + [{"problem": message} for _, message in problems], schema, table)
        for entry in entries:
            expect(3 <= entry["line"] <= lines, f"an entry on line {entry['line']} of {lines}")
        for line, message in problems:
            expect(line is None or 1 <= line <= lines, f"a problem on line {line} of {lines}")
            expect(line is None or message.startswith(f"line {line}:"), f"{message!r} does not name line {line}")

    return run


def _line_count(text: str) -> int:
    """Lines as the checkpoint readers count them: a final line break does not open another line."""
    lines = _LINE_BREAK.split(text)
    return len(lines) - (lines[-1] == "")


def _run_partition_metadata(seed: Seed, text: str, rng: random.Random) -> None:
    row, problems = decode_partition_metadata(text)
    rows = [{**row, "problem": problem.message} for problem in problems] or [row]
    fits(rows, PARTITION_METADATA, "partition_metadata")
    expect(len(problems) <= 1, "more than one problem")
    for line, message in problems:
        expect(line is None or message.startswith(f"line {line}:"), f"{message!r} does not name line {line}")


def _run_dumplog(seed: Seed, text: str, rng: random.Random) -> None:
    """Every table of the parse loads; every line is accounted for once."""
    parsed = parse_dump(text, seed.name)
    fits(parsed.batches, BATCHES, "batches")
    fits(parsed.snapshot_entries, SNAPSHOT_ENTRIES, "dump snapshot entries")
    fits(parsed.txn_index_entries, TXN_INDEX_ENTRIES, "dump txn index entries")
    fits(parsed.transaction_log, TRANSACTION_LOG, "transaction_log")
    fits(parsed.offset_commit_records, OFFSET_COMMITS, "offset_commits")
    lines = len(text.splitlines())
    expect(sum(parsed.line_counts.values()) == lines, f"{sum(parsed.line_counts.values())} lines counted of {lines}")
    expect(all(1 <= number <= lines for number, _ in parsed.unknown_lines), "an unknown line outside the text")


# --- seeds from the real data ---------------------------------------------------------------------------


def load_targets(realdata: Path | None, extra_segments: list[Path] = ()) -> list[Target]:
    """Every decoder kind with its seeds; without the real data only the segment kinds, from `extra_segments`."""
    segments = [Seed(str(path), path.read_bytes()) for path in extra_segments if path.stat().st_size]
    if realdata is not None:
        segments += _real_segments(realdata)
    targets = [
        Target("segment", "kafka_format.decode_segment, iter_decoded", segments, _mutate_data, _run_segment),
        Target("records", "records.iter_records", list(_batch_entries(segments)), _mutate_data, _run_records),
    ]
    if realdata is None:
        return targets
    files = realdata / "broker-segments"
    dumps = realdata / "dumplog-text"
    return targets + [
        Target(
            "transaction_state_segment",
            "coordinator_records.transaction_log_rows over kafka_format.decode_segment",
            [_seed(realdata, _rebuilt_segment(realdata, name)) for name in TRANSACTION_STATE_SEGMENTS],
            _mutate_data,
            _run_transaction_state_segment,
        ),
        Target(
            "coordinator_record",
            "coordinator_records.decode_transaction_log, decode_offset_commit",
            list(_coordinator_records(realdata)),
            _mutate_one_of(("key", "value")),
            _run_coordinator_record,
        ),
        Target(
            "snapshot",
            "partition_files.decode_producer_snapshot",
            [_seed(realdata, path) for path in sorted(files.rglob("*.snapshot"))],
            _mutate_snapshot,
            _run_snapshot,
        ),
        Target("txnindex", "partition_files.decode_txn_index", _txn_index_seeds(dumps), _mutate_data, _run_txn_index),
        Target(
            "offset_index",
            "partition_files.check_offset_index",
            _index_seeds(realdata, "index"),
            _mutate_one_of(("data", "log")),
            _run_index,
        ),
        Target(
            "time_index",
            "partition_files.check_time_index",
            _index_seeds(realdata, "timeindex"),
            _mutate_one_of(("data", "offset_index", "log")),
            _run_index,
        ),
        Target(
            "leader_epoch_checkpoint",
            "partition_files.decode_leader_epoch_checkpoint",
            _text_seeds(realdata, sorted(files.rglob("leader-epoch-checkpoint"))),
            _mutate_data,
            _text_checker(decode_leader_epoch_checkpoint, LEADER_EPOCHS, "leader_epochs"),
        ),
        Target(
            "offset_checkpoint",
            "partition_files.decode_offset_checkpoint",
            _text_seeds(realdata, sorted(path for kind in CHECKPOINT_KINDS for path in files.rglob(kind))),
            _mutate_data,
            _text_checker(decode_offset_checkpoint, CHECKPOINTS, "checkpoints"),
        ),
        Target(
            "partition_metadata",
            "partition_files.decode_partition_metadata",
            _text_seeds(realdata, sorted(files.rglob("partition.metadata"))),
            _mutate_data,
            _run_partition_metadata,
        ),
        Target(
            "dumplog",
            "dumplog.parse_dump",
            _text_seeds(realdata, sorted(dumps.glob("*.txt"))),
            _mutate_data,
            _run_dumplog,
        ),
    ]


def _seed(realdata: Path, path: Path, **context: Any) -> Seed:
    return Seed(str(path.relative_to(realdata)), path.read_bytes(), context)


def _text_seeds(realdata: Path, paths: list[Path]) -> list[Seed]:
    """Read as the decoders' readers read them: UTF-8, bad bytes replaced, line breaks as they are."""
    texts = [path.read_bytes().decode("utf-8", errors="replace") for path in paths]
    return [Seed(str(path.relative_to(realdata)), text) for path, text in zip(paths, texts, strict=True)]


def _real_segments(realdata: Path) -> list[Seed]:
    """Broker segments and bootstrap checkpoints, rebuilt segments and batch runs, and client batch vectors."""
    paths = [
        *sorted((realdata / "broker-segments").rglob("*.log")),
        *sorted((realdata / "broker-segments").rglob("bootstrap.checkpoint")),
        *sorted((realdata / "reconstructed-from-dump" / "segments").glob("*.log")),
        *sorted((realdata / "reconstructed-from-dump" / "partial").glob("*.batches.bin")),
    ]
    seeds = [_seed(realdata, path) for path in paths if path.stat().st_size]
    for path in sorted((realdata / "client-vectors").rglob("*.json")):
        vector = json.loads(path.read_text())
        if isinstance(vector.get("hex"), str):
            seeds.append(Seed(str(path.relative_to(realdata)), bytes.fromhex(vector["hex"])))
    return seeds


def _batch_entries(segments: list[Seed]) -> Iterator[Seed]:
    """Every v2 batch entry of the segment seeds, whole, as `iter_records` takes them."""
    for seed in segments:
        for row in decode_segment(seed.data, verify_records=False).to_pylist():
            if row["entry_status"] == STATUS_OK:
                position = row["position"]
                yield Seed(f"{seed.name}#{position}", seed.data[position : position + row["size_bytes"]])


def _coordinator_records(realdata: Path) -> Iterator[Seed]:
    """The key and value of every record of the rebuilt `__transaction_state` segments and offset commit batch."""
    transaction_log = {"decode": decode_transaction_log, "schema": TRANSACTION_LOG, "table": "transaction_log"}
    for name in TRANSACTION_STATE_SEGMENTS:
        yield from _records_of(_batch_entries([_seed(realdata, _rebuilt_segment(realdata, name))]), transaction_log)
    vector = realdata / "reconstructed-from-dump" / "vectors" / f"{OFFSET_COMMIT_BATCH}.json"
    entry = Seed(str(vector.relative_to(realdata)), bytes.fromhex(json.loads(vector.read_text())["hex"]))
    offset_commits = {"decode": decode_offset_commit, "schema": OFFSET_COMMITS, "table": "offset_commits"}
    yield from _records_of([entry], offset_commits)


def _records_of(entries: Iterator[Seed] | list[Seed], decoder: dict[str, Any]) -> Iterator[Seed]:
    for entry in entries:
        for number, record in enumerate(iter_records(entry.data)):
            yield Seed(f"{entry.name}#record{number}", None, {"key": record.key, "value": record.value, **decoder})


def _rebuilt_segment(realdata: Path, name: str) -> Path:
    return realdata / "reconstructed-from-dump" / "segments" / f"{name}.log"


def _txn_index_seeds(dumps: Path) -> list[Seed]:
    """No broker-written `.txnindex` was found: the entries `kafka-dump-log` printed of one, in their 34-byte form."""
    seeds = []
    for path in sorted(dumps.glob("*.txt")):
        entries = parse_dump(path.read_text(), path.name).txn_index_entries
        if entries:
            fields = ("version", "producer_id", "first_offset", "last_offset", "last_stable_offset")
            data = b"".join(TXN_INDEX_ENTRY.pack(*(entry[name] for name in fields)) for entry in entries)
            seeds.append(Seed(f"dumplog-text/{path.name}#txnindex", data))
    return seeds


def _index_seeds(realdata: Path, suffix: str) -> list[Seed]:
    """Non-empty `.index`/`.timeindex` files with the segment (and for a time index the offset index) beside them."""
    seeds = []
    for path in sorted((realdata / "broker-segments").rglob(f"*.{suffix}")):
        if not path.stat().st_size:
            continue
        log, offset_index = path.with_suffix(".log"), path.with_suffix(".index")
        context = {
            "kind": suffix,
            "base_offset": int(path.stem),
            "log": log.read_bytes() if log.exists() else None,
            "offset_index": offset_index.read_bytes() if suffix == "timeindex" and offset_index.exists() else None,
        }
        seeds.append(_seed(realdata, path, **context))
    return seeds
