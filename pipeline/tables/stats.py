"""Row counts read from a Delta table's log instead of counted by a Spark job.

Every data file's add action carries `numRecords` in its statistics (delta-spark and the embedded backend both
write them), so the rows of a table, or of some of its partitions, are a sum over the log: no task, no file
scan. A run counts what it wrote after every write; with a Spark job each, those counts were a tenth of a small
run's jobs. The values of a column that every file holds one of (its minimum equal to its maximum), and the
partitions that hold rows, are read from the log the same way. Tables whose files lack the statistics, or whose
log delta-rs cannot open, return None and the caller counts with Spark.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from pipeline.tables.backend import replaced_partitions
from pipeline.tables.snapshot_files import logged_files


def logged_row_count(location: str, partition_values: dict[str, list] | None = None) -> int | None:
    """Rows of the latest snapshot in the listed partitions (`TableStore.overwrite_partitions`); None when unknown."""
    try:
        actions = pa.table(DeltaTable(location).get_add_actions(flatten=True))
    except Exception:  # not a table delta-rs reads (a scheme it lacks, a newer protocol): count with Spark
        return None
    if partition_values:
        if any(f"partition.{name}" not in actions.column_names for name in partition_values):
            return None
        actions = of_partitions(actions, partition_values)
    records = actions.column("num_records")
    if records.null_count:
        return None
    return int(pc.sum(records).as_py() or 0)


def logged_values(location: str, column: str, partition_values: dict[str, list]) -> set | None:
    """The values `column` takes in the latest snapshot's files of the listed partitions, when the statistics of
    every such file say it holds one value (minimum equal to maximum); None when some file does not say so."""
    names = [f"min.{column}", f"max.{column}", *(f"partition.{name}" for name in partition_values)]
    actions = logged_files(location, ["num_records", *names])
    if actions is None:
        return None
    actions = of_partitions(actions, partition_values)
    found = set()
    records, lows, highs = (actions.column(name).to_pylist() for name in ["num_records", *names[:2]])
    for count, low, high in zip(records, lows, highs, strict=True):
        if count is None or (count > 0 and (low is None or low != high)):
            return None
        if count:
            found.add(low)
    return found


def logged_partitions(location: str, columns: list[str]) -> set[tuple] | None:
    """The partitions (a tuple of the values of `columns`, the table's partition columns) whose files in the latest
    snapshot hold rows; None when the log does not say."""
    actions = logged_files(location, ["num_records", *(f"partition.{column}" for column in columns)])
    if actions is None or actions.column("num_records").null_count:
        return None
    held = actions.filter(pc.greater(actions.column("num_records"), 0))
    return set(zip(*(held.column(f"partition.{column}").to_pylist() for column in columns), strict=True))


def of_partitions(actions: pa.Table, partition_values: dict[str, list]) -> pa.Table:
    """The flattened add actions of the files in the listed partitions (`replaced_partitions`): one tuple per file
    on the driver, as many as the table has files."""
    wanted = replaced_partitions(partition_values)
    columns = [actions.column(f"partition.{name}").cast(pa.string()).to_pylist() for name in partition_values]
    keep = [partition in wanted for partition in zip(*columns, strict=True)]
    return actions.filter(pa.array(keep, pa.bool_()))


def logged_pairs(location: str) -> set[tuple[str, str]]:
    """The (cluster_id, topic) partitions holding files in the latest snapshot, the unknown cluster as ""."""
    actions = logged_files(location, ["partition.cluster_id", "partition.topic"])
    if actions is None:
        return set()
    clusters, topics = (actions.column(name).to_pylist() for name in ("partition.cluster_id", "partition.topic"))
    return {(cluster or "", topic) for cluster, topic in zip(clusters, topics, strict=True)}
