"""The data files of `batches` (or `transaction_log`) by the segment file their rows were decoded from, read from
the Delta log.

Both tables are written one Parquet file per segment file (`file_by="source_file"`), so a file whose `source_file`
statistics have equal minimum and maximum holds the rows of that one segment. An incremental ingest keeps the files
of the segments it skips where they are, and counts their rows from the log, instead of reading those rows and
writing them again. A file holding several segments, or without the statistics (a table written otherwise), gives
None, and the caller reads the rows with Spark.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.tables.snapshot_files import logged_files
from pipeline.tables.stats import of_partitions


@dataclass(frozen=True)
class SourceFiles:
    """The files holding one segment's rows, and how many rows they hold."""

    paths: tuple[str, ...]  # as the add actions name them (relative, percent-encoded)
    rows: int


def files_by_source(location: str, partitions: dict[str, list]) -> dict[str, SourceFiles] | None:
    """The latest snapshot's files of the listed `partitions` (`TableStore.overwrite_partitions`) by `source_file`;
    None when some file does not name exactly one."""
    names = ["path", "num_records", "min.source_file", "max.source_file", *(f"partition.{n}" for n in partitions)]
    actions = logged_files(location, names)
    if actions is None:
        return None
    actions = of_partitions(actions, partitions)
    by_source: dict[str, SourceFiles] = {}
    columns = (actions.column(name).to_pylist() for name in ("path", "num_records", "min.source_file"))
    for path, records, low, high in zip(*columns, actions.column("max.source_file").to_pylist(), strict=True):
        if records is None or (records > 0 and (low is None or low != high)):
            return None
        if records == 0:
            continue
        known = by_source.get(low, SourceFiles((), 0))
        by_source[low] = SourceFiles((*known.paths, path), known.rows + records)
    return by_source


@dataclass(frozen=True)
class FetchedFile:
    """A `batches` file of rows fetched over the Kafka protocol: one range of one partition."""

    path: str  # as the add action names it
    log_start: int  # its rows' segment base offset: the log start the run read from
    first_offset: int  # the smallest base offset of its rows
    next_offset: int  # one past the largest last offset of its rows


def fetched_files(location: str, uri: str) -> dict[tuple[str, str, int], list[FetchedFile]] | None:
    """The latest snapshot's files of rows fetched from `uri` (their `source_file` starts with it), by (cluster,
    topic, partition), in offset order; None when the log lacks the statistics to tell."""
    names = [
        "path", "num_records", "min.source_file", "max.source_file", "min.partition", "max.partition",
        "min.base_offset", "max.last_offset", "min.segment_base_offset", "max.segment_base_offset",
        "partition.cluster_id", "partition.topic",
    ]  # fmt: skip
    actions = logged_files(location, names)
    if actions is None:
        return None
    found: dict[tuple[str, str, int], list[FetchedFile]] = {}
    for row in actions.select(names).to_pylist():
        source = row["min.source_file"]
        if not row["num_records"] or source is None or not source.startswith(f"{uri}/"):
            continue
        if source != row["max.source_file"] or row["min.partition"] != row["max.partition"]:
            return None
        log_start = row["min.segment_base_offset"]
        if (
            row["min.base_offset"] is None
            or row["max.last_offset"] is None
            or log_start != row["max.segment_base_offset"]
        ):
            return None
        key = (row["partition.cluster_id"] or "", row["partition.topic"], row["min.partition"])
        kept = FetchedFile(row["path"], log_start, row["min.base_offset"], row["max.last_offset"] + 1)
        found.setdefault(key, []).append(kept)
    return {key: sorted(files, key=lambda file: file.first_offset) for key, files in found.items()}
