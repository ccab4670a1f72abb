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

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.tables.snapshot_files import logged_files


@dataclass(frozen=True)
class SourceFiles:
    """The files holding one segment's rows, and how many rows they hold."""

    paths: tuple[str, ...]  # as the add actions name them (relative, percent-encoded)
    rows: int


def files_by_source(location: str, topics: list[str]) -> dict[str, SourceFiles] | None:
    """The latest snapshot's files of `topics` by `source_file`; None when some file does not name exactly one."""
    actions = logged_files(location, ["path", "num_records", "partition.topic", "min.source_file", "max.source_file"])
    if actions is None:
        return None
    actions = actions.filter(pc.is_in(actions.column("partition.topic"), value_set=pa.array(topics, pa.string())))
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
