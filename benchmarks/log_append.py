"""A generated log root as it stood before its newest batches were appended, and the append itself.

    python benchmarks/log_append.py withhold ROOT BEFORE [--share 0.01]
    python benchmarks/log_append.py append BEFORE ROOT

Measures the nightly incremental case: `withhold` writes BEFORE, the root without the batches whose
maxTimestamp is past a cut time chosen so that about `share` of all batches (`__transaction_state` included) lie
after it; `append` then brings BEFORE up to ROOT in place, as a night of produce traffic does to a broker's log
dirs, so the next `produce-audit run` on the same warehouse finds grown, new and unchanged segments.
`differing_rows` is what that rerun is checked by: its result tables against a full run's over the final root.

Per partition directory the cut is the first batch in log order (segments by base offset, then file position)
whose maxTimestamp is past the cut time; from there on everything is appended later. The segment holding the
cut is truncated at that batch boundary, its `.index`, `.timeindex` and `.txnindex` keep the entries below it,
later segments are left out with their indexes, and so are the snapshots above the cut offset. Untouched files
are hard links into ROOT, truncated ones real copies. What a broker also rewrites as it goes is kept as in ROOT:
the per-broker offset checkpoints, `leader-epoch-checkpoint` and `partition.metadata`, so an audit of BEFORE may
report checkpoints past its log end (and a leader epoch starting past it) that the final root explains. The
compacted topic's closed segments are as compacted as in ROOT, and the truncated segment lacks the final
time-index entry a broker writes when it closes a segment.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import struct
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
from deltalake import DeltaTable

from pipeline.sources.kafka_format.encoding import segment_file_name
from pipeline.sources.kafka_format.windows import decode_segment
from schemas.batches import STATUS_OK

OFFSET_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, position
TIME_INDEX_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
TXN_INDEX_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first offset, last offset, LSO (spec §1.3)
INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")
RESULT_TABLES = (
    "findings",
    "transactions",
    "producer_state",
    "partition_summary",
    "global_transactions",
    "read_committed",
)


@dataclass(frozen=True)
class SegmentBatches:
    """The well-formed v2 batches of one `.log` segment, in file order."""

    path: Path
    base_offsets: np.ndarray
    max_timestamps: np.ndarray
    positions: np.ndarray

    @property
    def segment_base(self) -> int:
        return int(self.path.stem)


@dataclass(frozen=True)
class Cut:
    """Where a partition directory's appended part starts: a batch boundary of one segment."""

    segment: SegmentBatches
    batch: int  # index of the first appended batch in `segment`

    @property
    def position(self) -> int:
        return int(self.segment.positions[self.batch])

    @property
    def offset(self) -> int:
        return int(self.segment.base_offsets[self.batch])


@dataclass(frozen=True)
class Withheld:
    cut_timestamp: int
    batches: int  # of all batches, those after the cut
    total_batches: int
    segments_left_out: int
    segments_truncated: int
    snapshots_left_out: int


@dataclass(frozen=True)
class Appended:
    files: int  # files copied over, new or changed
    segments: int  # of them, `.log` segments
    removed: int  # files of BEFORE that ROOT does not have


def partition_dirs(root: Path) -> list[Path]:
    """`broker-*/<topic>-<partition>` directories, the layout `produce-audit generate` writes."""
    return sorted(path for broker in root.glob("broker-*") for path in broker.iterdir() if path.is_dir())


def read_segments(directory: Path) -> list[SegmentBatches]:
    """The directory's segments in log order, each with its batches' header fields from the product's decoder."""
    segments = []
    for path in sorted(directory.glob("*.log"), key=lambda p: int(p.stem)):
        table = decode_segment(path.read_bytes(), verify_records=False)
        table = table.filter(pc.equal(table["entry_status"], STATUS_OK))
        segments.append(
            SegmentBatches(
                path,
                table["base_offset"].to_numpy(),
                table["max_timestamp"].to_numpy(),
                table["position"].to_numpy(),
            )
        )
    return segments


def cut_timestamp(max_timestamps: np.ndarray, share: float) -> int:
    """The largest timestamp with about `share` of the batches past it (fewer when timestamps tie)."""
    after = max(1, round(len(max_timestamps) * share))
    return int(np.partition(max_timestamps, len(max_timestamps) - after - 1)[len(max_timestamps) - after - 1])


def find_cut(segments: list[SegmentBatches], cut_time: int) -> Cut | None:
    """The first batch in log order whose maxTimestamp is past `cut_time`, or None when nothing of it is later."""
    for segment in segments:
        later = np.flatnonzero(segment.max_timestamps > cut_time)
        if len(later):
            return Cut(segment, int(later[0]))
    return None


def _entries(data: bytes, layout: struct.Struct) -> Iterator[tuple]:
    whole = len(data) - len(data) % layout.size
    return layout.iter_unpack(data[:whole])


def _truncated_index(path: Path, cut: Cut) -> bytes:
    """The entries of one of the cut segment's index files that point below the cut."""
    data = path.read_bytes()
    base = cut.segment.segment_base
    if path.suffix == ".index":
        kept = [entry for entry in _entries(data, OFFSET_INDEX_ENTRY) if entry[1] < cut.position]
        return b"".join(OFFSET_INDEX_ENTRY.pack(*entry) for entry in kept)
    if path.suffix == ".timeindex":
        kept = [entry for entry in _entries(data, TIME_INDEX_ENTRY) if base + entry[1] < cut.offset]
        return b"".join(TIME_INDEX_ENTRY.pack(*entry) for entry in kept)
    kept = [entry for entry in _entries(data, TXN_INDEX_ENTRY) if entry[3] < cut.offset]
    return b"".join(TXN_INDEX_ENTRY.pack(*entry) for entry in kept)


def _partition_before(source: Path, target: Path, segments: list[SegmentBatches], cut: Cut | None) -> tuple[int, ...]:
    """Write one partition directory's before state; (batches after the cut, segments left out, truncated,
    snapshots left out)."""
    target.mkdir(parents=True)
    if cut is None:
        for path in source.iterdir():
            os.link(path, target / path.name)
        return 0, 0, 0, 0
    later_bases = {s.segment_base for s in segments if s.segment_base > cut.segment.segment_base}
    truncated = cut.batch > 0
    if not truncated:
        later_bases.add(cut.segment.segment_base)
    batches = len(cut.segment.base_offsets) - cut.batch
    batches += sum(len(s.base_offsets) for s in segments if s.segment_base > cut.segment.segment_base)
    cut_files = {segment_file_name(cut.segment.segment_base, suffix) for suffix in (".log", *INDEX_SUFFIXES)}
    snapshots_left_out = 0
    for path in source.iterdir():
        if path.suffix in (".log", *INDEX_SUFFIXES) and int(path.stem) in later_bases:
            continue
        if path.suffix == ".snapshot" and int(path.stem) > cut.offset:
            snapshots_left_out += 1
            continue
        data = None
        if truncated and path.name in cut_files:
            data = path.read_bytes()[: cut.position] if path.suffix == ".log" else _truncated_index(path, cut)
        if data is None or len(data) == path.stat().st_size:
            os.link(path, target / path.name)
        else:
            (target / path.name).write_bytes(data)
    return batches, len(later_bases), int(truncated), snapshots_left_out


def withhold(root: Path, before: Path, share: float = 0.01) -> Withheld:
    """Write `before`: `root` without its newest `share` of batches, as its brokers held it then."""
    if before.exists():
        raise FileExistsError(f"{before} exists")
    directories = partition_dirs(root)
    segments = {directory: read_segments(directory) for directory in directories}
    timestamps = np.concatenate([s.max_timestamps for per_dir in segments.values() for s in per_dir])
    cut_time = cut_timestamp(timestamps, share)
    shutil.copytree(root, before, copy_function=os.link, ignore=_partition_dir_names(set(directories)))
    totals = np.zeros(4, dtype=np.int64)
    for directory in directories:
        target = before / directory.relative_to(root)
        totals += _partition_before(directory, target, segments[directory], find_cut(segments[directory], cut_time))
    return Withheld(cut_time, int(totals[0]), len(timestamps), *(int(n) for n in totals[1:]))


def _partition_dir_names(directories: set[Path]):
    def ignore(folder: str, names: list[str]) -> list[str]:
        return [name for name in names if Path(folder, name) in directories]

    return ignore


def append(before: Path, root: Path) -> Appended:
    """Make `before` hold exactly `root`: copy every file that is missing or differs, remove what `root` lacks.

    A copied file is unlinked first, so a hard link into `root` is never written through, and it gets a new
    modification time, as a broker's append gives it."""
    files = segments = removed = 0
    for source in sorted(path for path in root.rglob("*") if path.is_file()):
        target = before / source.relative_to(root)
        if target.is_file() and (os.path.samefile(source, target) or filecmp.cmp(source, target, shallow=False)):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
        shutil.copyfile(source, target)
        files += 1
        segments += source.suffix == ".log"
    for target in sorted(path for path in before.rglob("*") if path.is_file()):
        if not (root / target.relative_to(before)).exists():
            target.unlink()
            removed += 1
    return Appended(files, segments, removed)


def _result_rows(warehouse: Path, table: str) -> Counter:
    """The table's current rows without `run_id`, as comparable text (rows hold lists and maps)."""
    rows = DeltaTable(str(warehouse / table)).to_pyarrow_table().drop_columns(["run_id"]).to_pylist()
    return Counter(json.dumps(row, sort_keys=True, default=str) for row in rows)


def differing_rows(warehouse: Path, other: Path) -> dict[str, tuple[int, int]]:
    """Per result table that differs: (rows only in `warehouse`, rows only in `other`), counted with repeats.

    Each audit replaces the audited topics' rows, so a table's current version holds the latest run's rows when
    both runs audited the same topics."""
    differing = {}
    for table in RESULT_TABLES:
        rows, other_rows = _result_rows(warehouse, table), _result_rows(other, table)
        only, other_only = rows - other_rows, other_rows - rows
        if only or other_only:
            differing[table] = (only.total(), other_only.total())
    return differing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    withhold_parser = commands.add_parser("withhold", help="write BEFORE from ROOT")
    withhold_parser.add_argument("root", type=Path)
    withhold_parser.add_argument("before", type=Path)
    withhold_parser.add_argument("--share", type=float, default=0.01)
    append_parser = commands.add_parser("append", help="bring BEFORE up to ROOT in place")
    append_parser.add_argument("before", type=Path)
    append_parser.add_argument("root", type=Path)
    args = parser.parse_args()
    if args.command == "withhold":
        print(json.dumps(vars(withhold(args.root, args.before, args.share))))
    else:
        print(json.dumps(vars(append(args.before, args.root))))


if __name__ == "__main__":
    main()
