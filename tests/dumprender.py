"""Render the files of a Kafka log root as `kafka-dump-log.sh` 3.2-4.x prints them (spec §4), for parity tests.

Batch headers, control records, `.txnindex`, `.index` and `.timeindex` entries are read here with `struct`, from
the layouts of spec §1; records are walked (and decompressed) by `records.iter_records`, and the keys and values
of the coordinator topics and the producer snapshots are decoded by the project's binary decoders, then printed
in the JSON of the 4.x `--transaction-log-decoder` / `--offsets-decoder` and the 4.x snapshot line. What the tool
cannot go on reading (a header cut short, a bad magic, a batch shorter than its header) ends the file with
`Found N invalid bytes at the end of <file>`, as the tool's batch iterator stops there.
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

from crc32c import crc32c

from pipeline.sources.coordinator_records.consumer_offsets import decode_offset_commit
from pipeline.sources.coordinator_records.transaction_state import decode_transaction_log
from pipeline.sources.partition_files.binary_files import decode_producer_snapshot
from pipeline.sources.records.api import RecordError, iter_records
from schemas.offset_commits import CONSUMER_OFFSETS_TOPIC
from schemas.transaction_log import TRANSACTION_STATE_TOPIC

_V2_HEADER = struct.Struct(">qiibIhiqqqhii")  # DefaultRecordBatch, 61 bytes
_LEGACY_HEADER = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_TXN_INDEX_ENTRY = struct.Struct(">hqqqq")
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_MARKERS = {0: "ABORT", 1: "COMMIT"}
_MAX_SEQUENCE = 2_147_483_647
DELETED = "<DELETE>"


def render_log_root(root: Path, out: Path) -> list[Path]:
    """One dump text per topic in `out`, as `kafka-dump-log.sh --files` prints all the `.log`, `.snapshot`,
    `.txnindex`, `.index` and `.timeindex` files of the topic's partition directories under `root`, in one run."""
    renderers = {
        ".log": render_log,
        ".snapshot": render_snapshot,
        ".txnindex": render_txn_index,
        ".index": render_offset_index,
        ".timeindex": render_time_index,
    }
    by_topic: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*")):
        renderer = renderers.get(path.suffix)
        if renderer is not None and path.is_file():
            by_topic.setdefault(path.parent.name.rpartition("-")[0], []).append(renderer(path))
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for topic, texts in by_topic.items():
        target = out / f"{topic}.txt"
        target.write_text("".join(texts), encoding="utf-8")
        written.append(target)
    return written


def _timestamp(timestamp_type: int, value: int) -> str:
    return f"{'LogAppendTime' if timestamp_type else 'CreateTime'}: {value}"


def render_log(path: Path) -> str:
    data = path.read_bytes()
    lines = [f"Dumping {path}", f"Log starting offset: {int(path.name.split('.')[0].split('-')[0])}"]
    topic = path.parent.name.rpartition("-")[0]
    position = 0
    while position < len(data):
        rendered = _render_entry(data, position, topic)
        if rendered is None:
            lines.append(f"Found {len(data) - position} invalid bytes at the end of {path.name}")
            break
        entry_lines, size = rendered
        lines += entry_lines
        position += size
    return "\n".join(lines) + "\n"


def _render_entry(data: bytes, position: int, topic: str) -> tuple[list[str], int] | None:
    if len(data) - position < _LEGACY_HEADER.size:
        return None
    _, length, _, magic, _ = _LEGACY_HEADER.unpack_from(data, position)
    size = length + 12
    if position + size > len(data):
        return None
    if magic == 2 and size >= _V2_HEADER.size:
        return _render_v2(data[position : position + size], position, topic), size
    if magic in (0, 1) and size >= _LEGACY_HEADER.size + (8 if magic else 0) + 8:
        return [_render_legacy(data[position : position + size], position)], size
    return None


def _render_legacy(entry: bytes, position: int) -> str:
    offset, _, crc, magic, attributes = _LEGACY_HEADER.unpack_from(entry)
    if magic == 0:
        timestamp = "NoTimestampType: -1"
    else:
        timestamp = _timestamp((attributes >> 3) & 1, struct.unpack_from(">q", entry, _LEGACY_HEADER.size)[0])
    valid = str(zlib.crc32(entry[16:]) == crc).lower()
    codec = attributes & 7
    return (
        f"offset: {offset} position: {position} {timestamp} size: {len(entry)} magic: {magic} "
        f"compresscodec: {_CODECS[codec] if codec < 5 else codec} crc: {crc} isvalid: {valid}"
    )


def _render_v2(entry: bytes, position: int, topic: str) -> list[str]:
    (
        base_offset,
        _,
        leader_epoch,
        _,
        crc,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = _V2_HEADER.unpack_from(entry)
    timestamp_type = (attributes >> 3) & 1
    transactional, control = bool(attributes & 0x10), bool(attributes & 0x20)
    horizon = f"OptionalLong[{base_timestamp}]" if attributes & 0x40 else "OptionalLong.empty"
    last_sequence = -1 if base_sequence < 0 else (base_sequence + last_offset_delta) & _MAX_SEQUENCE
    codec = attributes & 7
    lines = [
        f"baseOffset: {base_offset} lastOffset: {base_offset + last_offset_delta} count: {count} "
        f"baseSequence: {base_sequence} lastSequence: {last_sequence} producerId: {producer_id} "
        f"producerEpoch: {producer_epoch} partitionLeaderEpoch: {leader_epoch} "
        f"isTransactional: {str(transactional).lower()} isControl: {str(control).lower()} deleteHorizonMs: {horizon} "
        f"position: {position} {_timestamp(timestamp_type, max_timestamp)} size: {len(entry)} magic: 2 "
        f"compresscodec: {_CODECS[codec] if codec < 5 else codec} crc: {crc} "
        f"isvalid: {str(crc32c(entry[21:]) == crc).lower()}"
    ]
    try:
        for record in iter_records(entry):
            offset = base_offset + record.offset_delta
            timestamp = max_timestamp if timestamp_type else base_timestamp + record.timestamp_delta
            sequence = -1 if base_sequence < 0 else (base_sequence + record.offset_delta) & _MAX_SEQUENCE
            headers = ",".join(name for name, _ in record.headers)
            metadata = (
                f"| offset: {offset} {_timestamp(timestamp_type, timestamp)} "
                f"keySize: {_size(record.key)} valueSize: {_size(record.value)} sequence: {sequence} "
                f"headerKeys: [{headers}]"
            )
            if control:
                lines.append(metadata + _control_tail(record.key, record.value))
            else:
                lines.append(metadata + _data_tail(topic, offset, record.key, record.value))
    except RecordError:
        pass  # the tool stops printing records of a batch it cannot iterate
    return lines


def _size(field: bytes | None) -> int:
    return -1 if field is None else len(field)


def _control_tail(key: bytes | None, value: bytes | None) -> str:
    control_type = struct.unpack_from(">h", key, 2)[0] if key is not None and len(key) >= 4 else -1
    if control_type in _MARKERS and value is not None and len(value) >= 6:
        return f" endTxnMarker: {_MARKERS[control_type]} coordinatorEpoch: {struct.unpack_from('>i', value, 2)[0]}"
    return f" controlType: UNKNOWN({control_type})"


def _data_tail(topic: str, offset: int, key: bytes | None, value: bytes | None) -> str:
    """`--transaction-log-decoder` / `--offsets-decoder` output on the coordinator topics, nothing elsewhere
    (data topics are dumped with `--deep-iteration` only)."""
    if topic == TRANSACTION_STATE_TOPIC:
        printed_key, printed_value = _transaction_log_json(decode_transaction_log(key, value), offset)
    elif topic == CONSUMER_OFFSETS_TOPIC:
        printed_key, printed_value = _offset_commit_json(decode_offset_commit(key, value), key, offset)
    else:
        return ""
    tail = f" key: {printed_key}"
    return tail if printed_value is None else f"{tail} payload: {printed_value}"


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def _transaction_log_json(row: dict, offset: int) -> tuple[str, str | None]:
    if row.get("key_version") not in (None, 0):
        return f"unknown::version={row['key_version']}", None
    if row.get("decode_error"):
        return f"Error at offset {offset}, skipping. {row['decode_error']}", None
    key = _json({"type": "0", "data": {"transactionalId": row["transactional_id"]}})
    if row["is_tombstone"]:
        return key, DELETED
    data = {
        "producerId": row["producer_id"],
        "producerEpoch": row["producer_epoch"],
        "transactionTimeoutMs": row["transaction_timeout_ms"],
        "transactionStatus": row["state_name"] if row["state_name"] is not None else row["state"],
        "transactionPartitions": None
        if row["partitions"] is None
        else [{"topic": entry["topic"], "partitionIds": entry["partitions"]} for entry in row["partitions"]],
        "transactionLastUpdateTimestampMs": row["last_update_timestamp_ms"],
        "transactionStartTimestampMs": row["start_timestamp_ms"],
    }
    if row["value_version"] >= 1:
        data.update(
            previousProducerId=row["previous_producer_id"],
            nextProducerId=row["next_producer_id"],
            clientTransactionVersion=row["client_transaction_version"],
            nextProducerEpoch=row["next_producer_epoch"],
        )
    return key, _json({"version": str(row["value_version"]), "data": data})


def _offset_commit_json(row: dict, key: bytes | None, offset: int) -> tuple[str, str | None]:
    version = row.get("key_version")
    if version == 2:  # GroupMetadataKey: int16 version, then the group as an int16-length string
        (length,) = struct.unpack_from(">h", key, 2)
        return _json({"type": "2", "data": {"group": key[4 : 4 + length].decode()}}), None
    if row.get("decode_error"):
        return f"Error at offset {offset}, skipping. {row['decode_error']}", None
    printed_key = _json(
        {
            "type": str(version),
            "data": {"group": row["group"], "topic": row["committed_topic"], "partition": row["committed_partition"]},
        }
    )
    if row["is_tombstone"]:
        return printed_key, DELETED
    data = {"offset": row["committed_offset"]}
    if row["value_version"] >= 3:
        data["leaderEpoch"] = row["leader_epoch"]
    data.update(metadata=row["metadata"], commitTimestamp=row["commit_timestamp"])
    if row["value_version"] == 1:
        data["expireTimestamp"] = row["expire_timestamp"]
    return printed_key, _json({"version": str(row["value_version"]), "data": data})


def render_snapshot(path: Path) -> str:
    """The 4.x snapshot lines; a snapshot the tool rejects (bad version or CRC) prints only its `Dumping` line."""
    lines = [f"Dumping {path}"]
    for row in decode_producer_snapshot(path.read_bytes()):
        if row["file_status"] != "ok" or row["producer_id"] is None:
            continue
        first = row["current_txn_first_offset"]
        line = (
            f"producerId: {row['producer_id']} producerEpoch: {row['producer_epoch']} "
            f"coordinatorEpoch: {row['coordinator_epoch']} "
            f"currentTxnFirstOffset: {'OptionalLong.empty' if first is None else f'OptionalLong[{first}]'} "
            f"lastTimestamp: {row['timestamp']}"
        )
        if row["last_offset"] >= 0:
            first_sequence = (row["last_sequence"] - row["offset_delta"]) & _MAX_SEQUENCE
            line += (
                f" firstSequence: {first_sequence} lastSequence: {row['last_sequence']} "
                f"lastOffset: {row['last_offset']} offsetDelta: {row['offset_delta']} timestamp: {row['timestamp']}"
            )
        lines.append(line)
    return "\n".join(lines) + "\n"


def render_txn_index(path: Path) -> str:
    data = path.read_bytes()
    lines = [f"Dumping {path}"]
    for start in range(0, len(data) - len(data) % _TXN_INDEX_ENTRY.size, _TXN_INDEX_ENTRY.size):
        version, producer_id, first, last, lso = _TXN_INDEX_ENTRY.unpack_from(data, start)
        lines.append(
            f"version: {version} producerId: {producer_id} firstOffset: {first} lastOffset: {last} "
            f"lastStableOffset: {lso}"
        )
    return "\n".join(lines) + "\n"


def _base_offset(path: Path) -> int:
    return int(path.name.split(".")[0])


def render_offset_index(path: Path) -> str:
    data, base = path.read_bytes(), _base_offset(path)
    entries = [_OFFSET_ENTRY.unpack_from(data, at) for at in range(0, len(data) - 7, 8)]
    lines = [f"Dumping {path}"] + [f"offset: {base + relative} position: {where}" for relative, where in entries]
    if not entries:
        lines.append(f"{path} is empty.")
    return "\n".join(lines) + "\n"


def render_time_index(path: Path) -> str:
    data, base = path.read_bytes(), _base_offset(path)
    entries = [_TIME_ENTRY.unpack_from(data, at) for at in range(0, len(data) - 11, 12)]
    lines = [f"Dumping {path}"] + [f"timestamp: {stamp} offset: {base + relative}" for stamp, relative in entries]
    if not entries:
        lines.append(f"{path} is empty.")
    return "\n".join(lines) + "\n"
