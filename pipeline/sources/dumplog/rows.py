"""Batch rows from matched dump lines: numbers in range or noted, control fields, codec and timestamp fields, and the
approximate batches of 0.11-2.1 deep dumps (runs of records at one position).
"""

from __future__ import annotations

import re
from typing import Any

from pipeline.sources.dumplog.grammar import (
    BATCH_METADATA_1_0,
    COMPRESSION_IDS,
    GROUP_RANGES,
    INT,
    INT32,
    JSON_CONTROL_TYPES,
    MARKER_CONTROL_TYPES,
    MAX_INT64_DIGITS,
    SOURCE_FORMAT,
    TIMESTAMP_TYPE_IDS,
    DeepGroup,
    Section,
)
from schemas.batches import BATCHES


def int_or_null(text: str | None) -> int | None:
    return None if text is None or text == "null" else int(text)


def in_range(text: str, bounds: tuple[int, int]) -> bool:
    """Whether a printed integer lies in `bounds`, without converting runs of digits int() refuses (4300+)."""
    digits = text.lstrip("-").lstrip("0")
    if len(digits) > MAX_INT64_DIGITS:
        return False
    value = int(digits or "0") * (-1 if text.startswith("-") else 1)
    return bounds[0] <= value <= bounds[1]


def first_out_of_range(match: re.Match[str]) -> str | None:
    """The first number a matched line prints outside its Kafka type (cached batches of a snapshot line
    included), described; None when every number fits."""
    groups = [match.groupdict()]
    groups += [cached.groupdict() for cached in BATCH_METADATA_1_0.finditer(groups[0].get("queue") or "")]
    for fields in groups:
        for name, text in fields.items():
            number = re.search(INT, text) if name in GROUP_RANGES and text is not None else None
            if number and not in_range(number.group(), GROUP_RANGES[name]):
                low, high = GROUP_RANGES[name]
                return f"{name} {number.group()[:40]} is outside [{low}, {high}]"
    return None


def int32_or_none(value: int) -> int | None:
    """An offset delta from two printed offsets; None when it does not fit Kafka's int32 delta."""
    return value if INT32[0] <= value <= INT32[1] else None


def set_last_offset_delta(row: dict[str, Any], last_offset: int, base_offset: int) -> None:
    """`last_offset_delta` of a batch row from its printed offsets, or null and a note when they are too far apart."""
    row["last_offset_delta"] = int32_or_none(last_offset - base_offset)
    if row["last_offset_delta"] is None:
        add_note(row, f"offsets {base_offset}..{last_offset} are too far apart for one batch")


def bool_or_null(text: str | None) -> bool | None:
    return None if text is None else text == "true"


def parse_txn_first_offset(text: str) -> int | None:
    number = re.search(INT, text)
    return int(number.group()) if number else None


def empty_batch_row(section: Section, source_file: str, position: int) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(BATCHES.fieldNames())
    row.update(
        topic=section.topic,
        partition=section.partition,
        segment_base_offset=section.base_offset if section.base_offset is not None else -1,
        position=position,
        source_file=source_file,
        source_format=SOURCE_FORMAT,
    )
    return row


def control_fields(match: re.Match[str]) -> tuple[int | None, int | None]:
    """(control_type, coordinator_epoch) of a record line's tail; (None, None) for a data record."""
    if match.group("marker"):
        return MARKER_CONTROL_TYPES[match.group("marker")], int(match.group("coordinator_epoch"))
    if match.group("control_type"):
        return int(match.group("control_type")), None
    name = match.group("json_control") or match.group("leader_change")
    if name:
        return JSON_CONTROL_TYPES[name], None
    return None, None


def is_control_record(match: re.Match[str]) -> bool:
    return "tail" in match.re.groupindex and control_fields(match)[0] is not None


def add_note(row: dict[str, Any], note: str) -> None:
    row["entry_note"] = f"{row['entry_note']}; {note}" if row["entry_note"] else note


def fill_codec_fields(row: dict[str, Any], match: re.Match[str]) -> None:
    row["magic"] = int(match.group("magic"))
    row["compression"] = COMPRESSION_IDS.get(match.group("codec").lower())
    row["timestamp_type"] = TIMESTAMP_TYPE_IDS.get(match.group("ts_type"))
    if row["compression"] is None:
        add_note(row, f"unknown compression codec {match.group('codec')}")


def printed_timestamp(match: re.Match[str]) -> int | None:
    return None if match.group("ts_type") == "NoTimestampType" else int(match.group("ts"))


def holds_offset(row: dict[str, Any], offset: int) -> bool:
    """Whether a record at `offset` belongs to the batch row (a compressed legacy entry's first offset is open)."""
    if row["last_offset"] is None or offset > row["last_offset"]:
        return False
    return row["base_offset"] is None or offset >= row["base_offset"]


def deep_record_batch(group: DeepGroup, match: re.Match[str]) -> dict[str, Any]:
    """What a 0.11-2.1 deep record line says about its batch, in `batches` column names."""
    return {
        "base_offset": int(group.records[0].group("offset")),
        "position": group.position,
        "max_timestamp": None,
        "partition_leader_epoch": None,
        "is_transactional": bool_or_null(match.group("transactional")),
        "compression": COMPRESSION_IDS.get(match.group("codec").lower()),
        "producer_id": int_or_null(match.group("producer_id")),
        "producer_epoch": int_or_null(match.group("producer_epoch")),
    }
