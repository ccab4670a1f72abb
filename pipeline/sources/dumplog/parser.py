"""The dump-text parser: one pass over the lines, `Dumping <path>` sections, and the rows, entries and counts of
`DumpParse`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from pipeline.sources.dumplog.coordinator_rows import coordinator_record_row
from pipeline.sources.dumplog.grammar import (
    BATCH,
    BLANK,
    CONTROL_RECORD,
    DEEP_GROUP_NOTE,
    DEEP_RECORD,
    DIAGNOSTIC,
    DIAGNOSTIC_LINE,
    DUMPED_FILE,
    DUMPING,
    HEADER,
    INDEX_ENTRY,
    INDEX_ENTRY_LINE,
    INT32,
    INT64,
    INVALID_BYTES,
    KRAFT_SNAPSHOT_HEADER,
    LEGACY_BATCH,
    LINE_NUMBER_GUTTER,
    PIPE_RECORD,
    PIPE_RECORD_2_8,
    RECORD,
    RECORD_WITHOUT_METADATA,
    SNAPSHOT,
    SNAPSHOT_0_11,
    SNAPSHOT_ENTRY,
    STARTING_OFFSET,
    TRUNCATED_TAIL,
    TXN_INDEX,
    TXN_INDEX_ENTRY,
    UNKNOWN,
    V2_BATCH,
    DeepGroup,
    DumpParse,
    Section,
)
from pipeline.sources.dumplog.partition_file_entries import empty_snapshot_entry, snapshot_entry, txn_index_entry
from pipeline.sources.dumplog.rows import (
    add_note,
    bool_or_null,
    control_fields,
    deep_record_batch,
    empty_batch_row,
    fill_codec_fields,
    first_out_of_range,
    holds_offset,
    in_range,
    int_or_null,
    is_control_record,
    printed_timestamp,
    set_last_offset_delta,
)
from pipeline.sources.log_dir_names import PARTITION_DIR
from pipeline.sources.partition_files.entries import SNAPSHOT_SUFFIX
from schemas.batches import STATUS_LEGACY, STATUS_OK, STATUS_TRUNCATED
from schemas.transaction_log import (
    TRANSACTION_STATE_TOPIC,
)

LINE_KINDS = (
    HEADER,
    BATCH,
    RECORD,
    CONTROL_RECORD,
    SNAPSHOT_ENTRY,
    TXN_INDEX_ENTRY,
    INDEX_ENTRY,
    TRUNCATED_TAIL,
    DIAGNOSTIC,
    BLANK,
    UNKNOWN,
)
MAX_REPORTED_UNKNOWN_LINES = 20


class _DumpParser:
    """Line-by-line state machine behind parse_dump: the open section and the rows record lines amend."""

    def __init__(self, source_file: str, skip_dir_suffixes: Sequence[str]) -> None:
        self.source_file = source_file
        self.skip_dir_suffixes = tuple(skip_dir_suffixes)
        self.batches: list[dict[str, Any]] = []
        self.snapshot_entries: list[dict[str, Any]] = []
        self.txn_index_entries: list[dict[str, Any]] = []
        self.transaction_log: list[dict[str, Any]] = []
        self.offset_commit_records: list[dict[str, Any]] = []
        self.line_counts: Counter[str] = Counter(dict.fromkeys(LINE_KINDS, 0))
        self.unknown_lines: list[tuple[int, str]] = []
        self.notes: list[str] = []
        self.section = Section()
        self.last_batch: dict[str, Any] | None = None  # the row the next record lines belong to
        self.record_timestamps: list[int | None] = []  # of the record lines printed under a v2 batch line
        self.deep_group: DeepGroup | None = None
        self.line_handlers: list[tuple[re.Pattern[str], str, Callable[[int, re.Match[str]], None]]] = [
            (PIPE_RECORD, RECORD, self._on_pipe_record),
            (PIPE_RECORD_2_8, RECORD, self._on_pipe_record),
            (RECORD_WITHOUT_METADATA, RECORD, self._ignore),
            (V2_BATCH, BATCH, self._on_v2_batch),
            (DEEP_RECORD, RECORD, self._on_deep_record),
            (LEGACY_BATCH, BATCH, self._on_legacy_batch),
            (INDEX_ENTRY_LINE, INDEX_ENTRY, self._ignore),
            (SNAPSHOT, SNAPSHOT_ENTRY, self._on_snapshot_entry),
            (SNAPSHOT_0_11, SNAPSHOT_ENTRY, self._on_snapshot_entry),
            (TXN_INDEX, TXN_INDEX_ENTRY, self._on_txn_index_entry),
            (DUMPING, HEADER, self._on_dumping),
            (STARTING_OFFSET, HEADER, self._on_starting_offset),
            (KRAFT_SNAPSHOT_HEADER, HEADER, self._ignore),
            (INVALID_BYTES, TRUNCATED_TAIL, self._on_invalid_bytes),
            (DIAGNOSTIC_LINE, DIAGNOSTIC, self._ignore),
        ]

    def parse(self, text: str) -> DumpParse:
        for line_number, raw in enumerate(text.splitlines(), start=1):
            self._feed(line_number, raw.strip())
        self._flush_deep_group()
        self._close_snapshot_section()
        return DumpParse(
            batches=self.batches,
            snapshot_entries=self.snapshot_entries,
            txn_index_entries=self.txn_index_entries,
            line_counts=dict(self.line_counts),
            unknown_lines=self.unknown_lines,
            notes=self.notes,
            transaction_log=self.transaction_log,
            offset_commit_records=self.offset_commit_records,
        )

    def _feed(self, line_number: int, line: str) -> None:
        if not line:
            self.line_counts[BLANK] += 1
            return
        if self._classify_line(line_number, line):
            return
        gutter = LINE_NUMBER_GUTTER.match(line)
        if gutter:
            rest = line[gutter.end() :]
            if not rest:
                self.line_counts[BLANK] += 1
                return
            if self._classify_line(line_number, rest):
                return
        self.line_counts[UNKNOWN] += 1
        if len(self.unknown_lines) < MAX_REPORTED_UNKNOWN_LINES:
            self.unknown_lines.append((line_number, line))

    def _classify_line(self, line_number: int, line: str) -> bool:
        for pattern, kind, handler in self.line_handlers:
            match = pattern.fullmatch(line)
            if match is None:
                continue
            out_of_range = first_out_of_range(match)
            if out_of_range:
                self.notes.append(f"line {line_number}: {out_of_range}; not read as a {kind} line")
                continue
            self.line_counts[CONTROL_RECORD if is_control_record(match) else kind] += 1
            handler(line_number, match)
            return True
        return False

    def _ignore(self, line_number: int, match: re.Match[str]) -> None:
        """Lines that are recognised and counted but carry nothing for the tables."""

    # --- sections -------------------------------------------------------------------------------------

    def _open_section(self, line_number: int, path: str | None) -> None:
        self._flush_deep_group()
        self._close_snapshot_section()
        self.section = Section(path=path, line_number=line_number)
        self.last_batch = None
        if path is None:
            return
        dumped = DUMPED_FILE.fullmatch(path)
        if dumped is None or not in_range(dumped.group("base_offset"), INT64):
            return
        self.section.base_offset = int(dumped.group("base_offset"))
        self.section.suffix = dumped.group("suffix")
        parts = re.split(r"[/\\]", path)
        directory = parts[-2] if len(parts) > 1 else ""
        partition_dir = PARTITION_DIR.fullmatch(directory)
        if partition_dir and in_range(partition_dir.group("partition"), INT32):
            self.section.topic = partition_dir.group("topic")
            self.section.partition = int(partition_dir.group("partition"))
        if directory and directory.endswith(self.skip_dir_suffixes):
            self.section.skipped = True
            self.notes.append(f"line {line_number}: {path} is in a skipped directory; its entries are not loaded")

    def _claim_section(self, line_number: int) -> Section:
        """The section an entry belongs to; notes once when the dump does not say which partition it is."""
        section = self.section
        if not section.has_entries:
            section.has_entries = True
            if section.partition == -1:
                where = (
                    f"{section.path} names no <topic>-<partition> directory"
                    if section.path
                    else "no `Dumping` line names the dumped file"
                )
                self.notes.append(f"line {line_number}: {where}; entries get topic '' and partition -1")
        return section

    def _on_dumping(self, line_number: int, match: re.Match[str]) -> None:
        self._open_section(line_number, match.group("path"))

    def _on_starting_offset(self, line_number: int, match: re.Match[str]) -> None:
        # A second header without a `Dumping` line means output of another file was pasted in.
        if self.section.has_header or self.section.has_entries:
            self._open_section(line_number, None)
        self.section.has_header = True
        if self.section.base_offset is None:
            self.section.base_offset = int(match.group("offset"))

    # --- batches --------------------------------------------------------------------------------------

    def _append_batch(self, row: dict[str, Any], section: Section) -> None:
        if not section.skipped:
            self.batches.append(row)

    def _on_v2_batch(self, line_number: int, match: re.Match[str]) -> None:
        self._flush_deep_group()
        section = self._claim_section(line_number)
        position, size = int(match.group("position")), int(match.group("size"))
        base_offset, last_offset = int(match.group("base_offset")), int(match.group("last_offset"))
        delete_horizon = match.group("delete_horizon")
        row = empty_batch_row(section, self.source_file, position)
        row.update(
            producer_id=int(match.group("producer_id")),
            base_offset=base_offset,
            last_offset=last_offset,
            producer_epoch=int(match.group("producer_epoch")),
            base_sequence=int(match.group("base_sequence")),
            last_sequence=int(match.group("last_sequence")),
            is_transactional=bool_or_null(match.group("transactional")),
            is_control=bool_or_null(match.group("control")),
            record_count=int_or_null(match.group("count")),
            max_timestamp=printed_timestamp(match),
            partition_leader_epoch=int(match.group("leader_epoch")),
            has_delete_horizon=None if match.group("delete_horizon_field") is None else delete_horizon is not None,
            base_timestamp=int_or_null(delete_horizon),  # the field holds the delete horizon when the bit is set
            batch_length=size - 12,
            crc=int(match.group("crc")),
            crc_valid=bool_or_null(match.group("valid") or match.group("valid_before_size")),
            entry_status=STATUS_OK,
            size_bytes=size,
        )
        set_last_offset_delta(row, last_offset, base_offset)
        fill_codec_fields(row, match)
        self._append_batch(row, section)
        self.last_batch = row
        self.record_timestamps = []
        section.next_position = position + size

    def _on_legacy_batch(self, line_number: int, match: re.Match[str]) -> None:
        self._flush_deep_group()
        section = self._claim_section(line_number)
        position, size = int(match.group("position")), int(match.group("size"))
        last_offset = int(match.group("last_offset"))
        row = empty_batch_row(section, self.source_file, position)
        fill_codec_fields(row, match)
        # An uncompressed legacy entry is one message; a compressed wrapper carries its last inner offset.
        uncompressed = row["compression"] == 0
        row.update(
            base_offset=last_offset if uncompressed else None,
            last_offset=last_offset,
            last_offset_delta=0 if uncompressed else None,
            record_count=1 if uncompressed else None,
            is_transactional=False,  # legacy entries never carry producer state (spec §1.1.6)
            is_control=False,
            max_timestamp=printed_timestamp(match),
            batch_length=size - 12,
            crc=int(match.group("crc")),
            crc_valid=bool_or_null(match.group("valid") or match.group("valid_before_size")),
            entry_status=STATUS_LEGACY,
            size_bytes=size,
        )
        self._append_batch(row, section)
        self.last_batch = row
        section.next_position = position + size

    def _on_pipe_record(self, line_number: int, match: re.Match[str]) -> None:
        row = self.last_batch
        offset = int(match.group("offset"))
        self._on_coordinator_record(match, row if row is not None and holds_offset(row, offset) else None)
        control_type, coordinator_epoch = control_fields(match)
        if row is None or not holds_offset(row, offset):
            if control_type is not None:
                self.notes.append(f"line {line_number}: control record at offset {offset} follows no batch line")
            return
        if row["entry_status"] == STATUS_LEGACY and row["compression"] != 0:
            # Deep iteration of a compressed legacy wrapper: its inner messages give count and first offset.
            row["record_count"] = (row["record_count"] or 0) + 1
            if row["base_offset"] is None:
                row["base_offset"] = offset
                set_last_offset_delta(row, row["last_offset"], offset)
        if control_type is not None:
            row["control_type"] = control_type
            row["coordinator_epoch"] = coordinator_epoch
        if row["entry_status"] == STATUS_OK:
            self._on_record_timestamp(row, printed_timestamp(match))

    def _on_record_timestamp(self, row: dict[str, Any], timestamp: int | None) -> None:
        """`max_record_timestamp` of a v2 batch row, once its lines have shown every record's timestamp."""
        self.record_timestamps.append(timestamp)
        shown = len(self.record_timestamps) == row["record_count"] and None not in self.record_timestamps
        row["max_record_timestamp"] = max(self.record_timestamps) if shown else None

    def _on_deep_record(self, line_number: int, match: re.Match[str]) -> None:
        section = self.section
        position = int(match.group("position"))
        group = self.deep_group
        if group is None or group.section is not section or group.position != position:
            self._flush_deep_group()
            self._claim_section(line_number)
            group = self.deep_group = DeepGroup(section=section, position=position)
        group.records.append(match)
        self._on_coordinator_record(match, deep_record_batch(group, match))

    # --- coordinator-topic records --------------------------------------------------------------------

    def _on_coordinator_record(self, match: re.Match[str], batch: dict[str, Any] | None) -> None:
        row = coordinator_record_row(self.section, self.source_file, match, batch)
        if row is None:
            return
        if row["topic"] == TRANSACTION_STATE_TOPIC:
            self.transaction_log.append(row)
        else:
            self.offset_commit_records.append(row)

    def _flush_deep_group(self) -> None:
        group, self.deep_group = self.deep_group, None
        if group is None:
            return
        first, last = group.records[0], group.records[-1]
        row = empty_batch_row(group.section, self.source_file, group.position)
        fill_codec_fields(row, first)
        base_offset, last_offset = int(first.group("offset")), int(last.group("offset"))
        magic = row["magic"]
        row.update(
            base_offset=base_offset,
            last_offset=last_offset,
            record_count=len(group.records),
            max_timestamp=printed_timestamp(max(group.records, key=lambda record: int(record.group("ts")))),
            entry_status=STATUS_OK if magic >= 2 else STATUS_LEGACY,
        )
        set_last_offset_delta(row, last_offset, base_offset)
        add_note(row, DEEP_GROUP_NOTE.format(records=len(group.records)))
        if magic >= 2:
            row.update(
                producer_id=int_or_null(first.group("producer_id")),
                producer_epoch=int_or_null(first.group("producer_epoch")),
                base_sequence=int_or_null(first.group("sequence")),
                last_sequence=int_or_null(last.group("sequence")),
                is_transactional=bool_or_null(first.group("transactional")),
                is_control=False,
                max_record_timestamp=row["max_timestamp"],  # the row holds exactly the printed records
            )
        else:
            # v2 records print a constant `isvalid: true`; only legacy messages carry their own CRC.
            row.update(
                is_transactional=False,
                is_control=False,
                crc_valid=all(record.group("valid") == "true" for record in group.records),
            )
            if row["compression"] == 0:  # one message, whose CRC is the entry's
                row["crc"] = int_or_null(first.group("crc"))
        for record in group.records:
            control_type, coordinator_epoch = control_fields(record)
            if control_type is not None:
                row.update(is_control=True, control_type=control_type, coordinator_epoch=coordinator_epoch)
        self._append_batch(row, group.section)
        self.last_batch = None
        group.section.next_position = None

    def _on_invalid_bytes(self, line_number: int, match: re.Match[str]) -> None:
        self._flush_deep_group()
        section = self._claim_section(line_number)
        count = int(match.group("count"))
        position = section.next_position if section.next_position is not None else -1
        row = empty_batch_row(section, self.source_file, position)
        note = f"{count} invalid bytes at the end of {match.group('file')}"
        if position == -1:
            note += "; their position is not printed in deep dumps of 0.11-2.1"
        row.update(entry_status=STATUS_TRUNCATED, size_bytes=count, entry_note=note)
        self._append_batch(row, section)
        self.last_batch = None

    # --- snapshot and transaction index entries -------------------------------------------------------

    def _close_snapshot_section(self) -> None:
        """A `.snapshot` dump without producer lines is a snapshot without entries: one entry row with null
        producer fields, as the binary reader gives it, so the file is seen."""
        section = self.section
        if section.suffix != SNAPSHOT_SUFFIX or section.snapshot_entries or section.skipped:
            return
        self.snapshot_entries.append(empty_snapshot_entry(section, self.source_file))

    def _on_snapshot_entry(self, line_number: int, match: re.Match[str]) -> None:
        section = self._claim_section(line_number)
        section.snapshot_entries += 1
        entry = snapshot_entry(section, self.source_file, line_number, match)
        if not section.skipped:
            self.snapshot_entries.append(entry)

    def _on_txn_index_entry(self, line_number: int, match: re.Match[str]) -> None:
        section = self._claim_section(line_number)
        entry = txn_index_entry(section, self.source_file, line_number, match)
        section.txn_index_entries += 1
        if not section.skipped:
            self.txn_index_entries.append(entry)


def parse_dump(text: str, source_file: str, *, skip_dir_suffixes: Sequence[str] = ()) -> DumpParse:
    """Parse kafka-dump-log output; `skip_dir_suffixes` leaves out sections dumped from such partition dirs."""
    return _DumpParser(source_file, skip_dir_suffixes).parse(text)


def has_dump_header(text: str) -> bool:
    """Whether a `Dumping <path>` line (possibly indented or numbered) occurs in `text`."""
    for line in text.splitlines():
        line = line.strip()
        gutter = LINE_NUMBER_GUTTER.match(line)
        if DUMPING.fullmatch(line) or (gutter and DUMPING.fullmatch(line[gutter.end() :])):
            return True
    return False
