"""Entry rows of the files beside segments as a dump prints them: `.snapshot` producer lines and `.txnindex`
aborted-transaction lines, with the partition and offset their section names."""

from __future__ import annotations

import re
from typing import Any

from pipeline.sources.dumplog.grammar import BATCH_METADATA_1_0, SNAPSHOT_0_11, SNAPSHOT_ENTRY_FIELDS, Section
from pipeline.sources.dumplog.rows import int32_or_none, int_or_null, parse_txn_first_offset
from pipeline.sources.kafka_format.layout import TXN_INDEX_ENTRY_BYTES


def empty_snapshot_entry(section: Section, source_file: str) -> dict[str, Any]:
    """The one row of a snapshot without entries: null producer fields, as the binary reader gives it."""
    entry = dict.fromkeys(SNAPSHOT_ENTRY_FIELDS)
    entry.update(
        topic=section.topic,
        partition=section.partition,
        snapshot_offset=section.base_offset,
        source_file=source_file,
        line_number=section.line_number,
    )
    return entry


def snapshot_entry(section: Section, source_file: str, line_number: int, match: re.Match[str]) -> dict[str, Any]:
    """A producer line of a `.snapshot` dump, of any broker version."""
    groups = match.groupdict()
    entry: dict[str, Any] = {
        "topic": section.topic,
        "partition": section.partition,
        "snapshot_offset": section.base_offset,
        "producer_id": int(groups["producer_id"]),
        "producer_epoch": int(groups["producer_epoch"]),
        "coordinator_epoch": int_or_null(groups["coordinator_epoch"]),
        "current_txn_first_offset": parse_txn_first_offset(groups["txn_first_offset"]),
        "last_timestamp": int_or_null(groups["last_timestamp"]),
        "first_sequence": int_or_null(groups.get("first_sequence")),
        "last_sequence": int_or_null(groups["last_sequence"]),
        "last_offset": int_or_null(groups["last_offset"]),
        "offset_delta": int_or_null(groups["offset_delta"]),
        "timestamp": int_or_null(groups.get("timestamp")),
        "source_file": source_file,
        "line_number": line_number,
    }
    if match.re is SNAPSHOT_0_11:
        entry["timestamp"] = entry["last_timestamp"]  # 0.11 keeps one timestamp: the last batch's
    cached = list(BATCH_METADATA_1_0.finditer(groups.get("queue") or ""))
    if cached:
        newest = cached[-1]  # the one batch a snapshot file persists
        entry.update(
            first_sequence=int(newest.group("first_sequence")),
            last_sequence=int(newest.group("last_sequence")),
            last_offset=int(newest.group("last_offset")),
            offset_delta=int32_or_none(int(newest.group("last_offset")) - int(newest.group("first_offset"))),
            timestamp=int(newest.group("timestamp")),
        )
    return entry


def txn_index_entry(section: Section, source_file: str, line_number: int, match: re.Match[str]) -> dict[str, Any]:
    """An aborted-transaction line of a `.txnindex` dump; its position follows from the entries before it."""
    return {
        "topic": section.topic,
        "partition": section.partition,
        "segment_base_offset": section.base_offset,
        **{name: int(value) for name, value in match.groupdict().items()},
        "position": TXN_INDEX_ENTRY_BYTES * section.txn_index_entries,
        "source_file": source_file,
        "line_number": line_number,
    }
