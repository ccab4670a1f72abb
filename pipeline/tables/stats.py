"""Row counts read from a Delta table's log instead of counted by a Spark job.

Every data file's add action carries `numRecords` in its statistics (delta-spark and the embedded backend both
write them), so the rows of a table, or of some of its partitions, are a sum over the log: no task, no file
scan. A run counts what it wrote after every write; with a Spark job each, those counts were a tenth of a small
run's jobs. The values of a column that every file holds one of (its minimum equal to its maximum) are read from
the log the same way. Tables whose files lack the statistics, or whose log delta-rs cannot open, return None and
the caller counts with Spark.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from pipeline.tables.snapshot_files import logged_files


def logged_row_count(location: str, partition_values: dict[str, list] | None = None) -> int | None:
    """Rows of the latest snapshot whose partition columns take one of the listed values; None when unknown."""
    try:
        actions = pa.table(DeltaTable(location).get_add_actions(flatten=True))
    except Exception:  # not a table delta-rs reads (a scheme it lacks, a newer protocol): count with Spark
        return None
    keep = pa.array([True] * actions.num_rows, pa.bool_())
    for column, values in (partition_values or {}).items():
        name = f"partition.{column}"
        if name not in actions.column_names:
            return None
        wanted = pa.array([None if value is None else str(value) for value in values], pa.string())
        keep = pc.and_(keep, pc.is_in(actions.column(name).cast(pa.string()), value_set=wanted))
    records = actions.filter(keep).column("num_records")
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
    for name, values in partition_values.items():
        wanted = pa.array([None if value is None else str(value) for value in values], pa.string())
        actions = actions.filter(pc.is_in(actions.column(f"partition.{name}").cast(pa.string()), value_set=wanted))
    found = set()
    records, lows, highs = (actions.column(name).to_pylist() for name in ["num_records", *names[:2]])
    for count, low, high in zip(records, lows, highs, strict=True):
        if count is None or (count > 0 and (low is None or low != high)):
            return None
        if count:
            found.add(low)
    return found
