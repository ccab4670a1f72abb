"""The data files of a table grouped by Kafka partition, read from the Delta log's file statistics.

`batches` files hold one segment file each, so a file's `partition` statistics name the one Kafka partition it
holds. Tasks handed the files of whole partitions can read them themselves (pipeline.audit.replay.files) instead of
Spark reading, exchanging and converting every row. A table where a file holds several partitions (a columnar
export), or whose files lack the statistics, has no such grouping: None, and the caller reads it with Spark.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from urllib.parse import unquote

from pipeline.tables.snapshot_files import logged_files
from pipeline.tables.staged_write import partition_values


@dataclass(frozen=True)
class FileGroup:
    """Every file holding rows of one topic's partition number, whatever their broker or cluster.

    `copies`: the most log directories one cluster's segment files of the partition were read from, each a replica
    of it; 2 when the statistics cannot tell (a file of another source, or of several), so that several copies are
    never taken for one.
    """

    topic: str
    partition: int
    paths: tuple[str, ...]
    size_bytes: int
    copies: int


def files_per_partition(location: str) -> list[FileGroup] | None:
    """The latest snapshot's files by (topic, partition); None when some file holds several partitions, or when
    the log does not say which (no statistics, a reader feature, no `topic` partition column)."""
    needed = ["path", "size_bytes", "num_records", "partition.topic", "min.partition", "max.partition"]
    actions = logged_files(location, needed)
    if actions is None:
        return None
    groups: dict[tuple[str, int], list[tuple[str, int, tuple[str, str | None]]]] = {}
    root = location.rstrip("/")
    columns = (actions.column(name).to_pylist() for name in needed)
    sources = _source_files(actions)
    for (path, size, records, topic, low, high), source in zip(zip(*columns, strict=True), sources, strict=True):
        if records == 0:
            continue
        if records is None or low is None or low != high or topic is None:
            return None
        # Add action paths are relative URIs: percent-decoding gives the folder names as stored.
        path = f"{root}/{unquote(path)}"
        replica = (cluster_of(path), _log_dir(source, topic, low))
        groups.setdefault((topic, low), []).append((path, size, replica))
    return [
        FileGroup(
            topic,
            partition,
            tuple(path for path, _, _ in files),
            sum(size for _, size, _ in files),
            _copies([replica for _, _, replica in files]),
        )
        for (topic, partition), files in sorted(groups.items())
    ]


def _source_files(actions) -> list[str | None]:
    """The one source file (segment or dump file) each data file holds rows of; None where the statistics do not
    name exactly one."""
    if not {"min.source_file", "max.source_file"} <= set(actions.column_names):
        return [None] * actions.num_rows
    low, high = (actions.column(name).to_pylist() for name in ("min.source_file", "max.source_file"))
    return [first if first == last else None for first, last in zip(low, high, strict=True)]


def _log_dir(source: str | None, topic: str, partition: int) -> str | None:
    """The log directory of a segment file of the partition (`<log dir>/<topic>-<partition>/<segment>.log`), which
    holds one replica of it; None for any other source (dump text, a columnar export, whose rows may name
    several brokers)."""
    if source is None or not source.endswith(".log"):
        return None
    folder = posixpath.dirname(source)
    return posixpath.dirname(folder) if posixpath.basename(folder) == f"{topic}-{partition}" else None


def _copies(replicas: list[tuple[str, str | None]]) -> int:
    """The most log dirs of one cluster among the (cluster, log dir) of a partition's files; 2 if one is unknown."""
    if any(log_dir is None for _, log_dir in replicas):
        return 2
    per_cluster: dict[str, set[str | None]] = {}
    for cluster, log_dir in replicas:
        per_cluster.setdefault(cluster, set()).add(log_dir)
    return max(len(dirs) for dirs in per_cluster.values())


def cluster_of(path: str) -> str:
    """The cluster whose rows a `batches` file holds, from the `cluster_id=` folder above its `topic=` one (the
    files hold no partition column); "" for the unknown cluster, stored in Hive's default folder."""
    return partition_values("/".join(path.split("/")[-3:-1])).get("cluster_id") or ""
