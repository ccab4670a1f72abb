"""Decoders of the text files beside segments, as Kafka's own parsers read them: `leader-epoch-checkpoint`,
`partition.metadata` and the log-dir offset checkpoints (spec §1.2). Bad lines become problems, never exceptions.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Any

from pipeline.sources.partition_files.entries import FormatProblem

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_JAVA_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_MAX_INT64_DIGITS = len(str(2**63))
_BASE64_UUID = re.compile(r"[A-Za-z0-9_-]{22}(?:==)?")
_ZERO_UUID = bytes(16)


def decode_leader_epoch_checkpoint(text: str) -> tuple[list[dict[str, Any]], list[FormatProblem]]:
    """Entries (`epoch`, `start_offset`, `line`) of a `leader-epoch-checkpoint`, and its LEP-001 problems.

    The file is read as the broker's CheckpointReadBuffer reads it: version `0`, entry count, then one
    `<leader epoch> <start offset>` line per entry. An empty file has no entries and no problem.
    """
    return _decode_checkpoint(text, _epoch_entry, "<leader epoch> <start offset>")


def decode_offset_checkpoint(text: str) -> tuple[list[dict[str, Any]], list[FormatProblem]]:
    """Entries (`topic`, `partition`, `offset`, `line`) of a log-dir offset checkpoint, and its problems.

    Same layout as `decode_leader_epoch_checkpoint`, with `<topic> <partition> <offset>` lines.
    """
    return _decode_checkpoint(text, _offset_entry, "<topic> <partition> <offset>")


def decode_partition_metadata(text: str) -> tuple[dict[str, Any], list[FormatProblem]]:
    """`version` and `topic_id` of a `partition.metadata`, as far as they can be read, and its SEG-006 problem.

    Read as PartitionMetadataReadBuffer does (`version: 0`, then `topic_id: <base64 UUID>`, not the zero
    UUID); unlike the broker, the two key names are checked too. The broker stops at the first problem, so
    there is at most one.
    """
    row: dict[str, Any] = {"version": None, "topic_id": None}
    lines = _lines(text)
    if not lines:
        return row, [FormatProblem(None, "the file is empty")]
    fields = _fields(lines[0])
    version = _parse_int(fields[1], 32) if len(fields) == 2 and fields[0] == "version:" else None
    if version is None:
        return row, [FormatProblem(1, f"line 1: {lines[0]!r} is not 'version: <number>'")]
    row["version"] = version
    if version != 0:
        return row, [FormatProblem(1, f"line 1: version {version}, expected 0")]
    if len(lines) < 2:
        return row, [FormatProblem(2, "line 2: missing, expected 'topic_id: <uuid>'")]
    fields = _fields(lines[1])
    if len(fields) != 2 or fields[0] != "topic_id:":
        return row, [FormatProblem(2, f"line 2: {lines[1]!r} is not 'topic_id: <uuid>'")]
    if not _BASE64_UUID.fullmatch(fields[1]):
        return row, [FormatProblem(2, f"line 2: {fields[1]!r} is not a URL-safe base64 UUID")]
    row["topic_id"] = fields[1]
    if base64.urlsafe_b64decode(fields[1][:22] + "==") == _ZERO_UUID:
        return row, [FormatProblem(2, "line 2: the zero UUID is not a valid topic id")]
    return row, []


def _decode_checkpoint(
    text: str, entry_of: Callable[[list[str]], dict[str, Any] | None], entry_format: str
) -> tuple[list[dict[str, Any]], list[FormatProblem]]:
    rows: list[dict[str, Any]] = []
    problems: list[FormatProblem] = []
    lines = _lines(text)
    if lines and _parse_int(lines[0], 32) != 0:
        problems.append(FormatProblem(1, f"line 1: version {lines[0]!r}, expected 0"))
    if len(lines) < 2:
        return rows, problems  # the broker reads no entries from a file that ends before its count
    count = _parse_int(lines[1], 32)
    if count is None or count < 0:
        problems.append(FormatProblem(2, f"line 2: entry count {lines[1]!r} is not a non-negative integer"))
    for number, line in enumerate(lines[2:], start=3):
        entry = entry_of(_fields(line))
        if entry is None:
            problems.append(FormatProblem(number, f"line {number}: {line!r} is not '{entry_format}'"))
        else:
            rows.append({**entry, "line": number})
    if count is not None and count >= 0 and count != len(lines) - 2:
        problems.append(FormatProblem(2, f"line 2: the count says {count} entries, {len(lines) - 2} lines follow"))
    return rows, problems


def _epoch_entry(fields: list[str]) -> dict[str, Any] | None:
    if len(fields) != 2:
        return None
    epoch, start_offset = _parse_int(fields[0], 32), _parse_int(fields[1], 64)
    if epoch is None or start_offset is None:
        return None
    return {"epoch": epoch, "start_offset": start_offset}


def _offset_entry(fields: list[str]) -> dict[str, Any] | None:
    if len(fields) != 3:
        return None
    partition, offset = _parse_int(fields[1], 32), _parse_int(fields[2], 64)
    if partition is None or offset is None:
        return None
    return {"topic": fields[0], "partition": partition, "offset": offset}


def _lines(text: str) -> list[str]:
    """Lines as Java's BufferedReader.readLine returns them: a final line break does not open another line."""
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def _fields(line: str) -> list[str]:
    """Java's `line.split("\\\\s+")`: a leading empty field is kept (and makes the line malformed)."""
    fields = _JAVA_WHITESPACE.split(line)
    while fields and fields[-1] == "":
        fields.pop()
    return fields


def _parse_int(text: str, bits: int) -> int | None:
    """Java's Integer/Long.parseInt: optional sign, ASCII digits, in range; None where Java would throw.

    Leading zeros are dropped first: Java accepts any number of them, and Python's int() refuses more than
    4300 digits, so a long run of digits is out of range before it is converted.
    """
    if not _JAVA_INT.fullmatch(text):
        return None
    digits = text.lstrip("+-").lstrip("0")
    if len(digits) > _MAX_INT64_DIGITS:
        return None
    value = int(digits or "0") * (-1 if text.startswith("-") else 1)
    limit = 1 << (bits - 1)
    return value if -limit <= value < limit else None
