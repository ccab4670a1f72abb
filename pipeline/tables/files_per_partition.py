"""The data files of a table grouped by Kafka partition, read from the Delta log's file statistics.

`batches` files hold one segment file each, so a file's `partition` statistics name the one Kafka partition it
holds. Tasks handed the files of whole partitions can read them themselves (pipeline.audit.replay_files) instead of
Spark reading, exchanging and converting every row. A table where a file holds several partitions (a columnar
export), or whose files lack the statistics, has no such grouping: None, and the caller reads it with Spark.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from pipeline.tables.snapshot_files import logged_files
from pipeline.tables.staged_write import partition_values


@dataclass(frozen=True)
class FileGroup:
    """Every file holding rows of one topic's partition number, whatever their broker or cluster."""

    topic: str
    partition: int
    paths: tuple[str, ...]
    size_bytes: int


def files_per_partition(location: str) -> list[FileGroup] | None:
    """The latest snapshot's files by (topic, partition); None when some file holds several partitions, or when
    the log does not say which (no statistics, a reader feature, no `topic` partition column)."""
    needed = ["path", "size_bytes", "num_records", "partition.topic", "min.partition", "max.partition"]
    actions = logged_files(location, needed)
    if actions is None:
        return None
    groups: dict[tuple[str, int], list[tuple[str, int]]] = {}
    root = location.rstrip("/")
    columns = (actions.column(name).to_pylist() for name in needed)
    for path, size, records, topic, low, high in zip(*columns, strict=True):
        if records == 0:
            continue
        if records is None or low is None or low != high or topic is None:
            return None
        # Add action paths are relative URIs: percent-decoding gives the folder names as stored.
        groups.setdefault((topic, low), []).append((f"{root}/{unquote(path)}", size))
    return [
        FileGroup(topic, partition, tuple(path for path, _ in files), sum(size for _, size in files))
        for (topic, partition), files in sorted(groups.items())
    ]


def cluster_of(path: str) -> str:
    """The cluster whose rows a `batches` file holds, from the `cluster_id=` folder above its `topic=` one (the
    files hold no partition column); "" for the unknown cluster, stored in Hive's default folder."""
    return partition_values("/".join(path.split("/")[-3:-1])).get("cluster_id") or ""
