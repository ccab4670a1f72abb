"""The partitions a `__transaction_state` record lists, as the sorted set of `topic-partition` names the cross-checks
join on.

Spark has no vectorised form of this: nested `transform` lambdas over the (topic, partitions) entries are
interpreted row by row, which took about half of the coordinator records' plan at 10 M batches (a million records).
Here the names are built with Arrow's compute functions on whole columns, in the tasks that make the coordinator
records (pipeline.audit.replay.coordinator_records).

The result is what Spark's `array_sort(array_distinct(flatten(transform(...concat_ws('-', topic, p)...))))` gives
(tests/integration/test_partition_sets.py holds that expression as the reference): null when the array, an entry,
or an entry's partition list is null (Spark's `flatten` of a null element); a null topic or partition number is left
out of its name, as `concat_ws` leaves it out; names sorted by their UTF-8 bytes, each once.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def partition_names(partitions: pa.Array) -> pa.Array:
    """`partitions` (list<struct<topic: string, partitions: list<int32>>>) as list<string> of sorted distinct
    `topic-partition` names, row for row."""
    if isinstance(partitions, pa.ChunkedArray):
        partitions = partitions.combine_chunks()
    rows = len(partitions)
    entries = partitions.flatten()
    entry_row = pc.list_parent_indices(partitions).to_numpy(zero_copy_only=False)
    numbers = entries.field("partitions")
    number_entry = pc.list_parent_indices(numbers).to_numpy(zero_copy_only=False)
    topic = entries.field("topic").take(pa.array(number_entry, pa.int64()))
    number = pc.cast(numbers.flatten(), pa.string())
    # concat_ws leaves a null part out; Arrow's join gives null instead (and its "skip" mode drops rows).
    names = pc.coalesce(pc.binary_join_element_wise(topic, number, "-"), topic, number, pa.scalar(""))
    null_rows = np.asarray(partitions.is_null(), dtype=bool)
    broken = np.asarray(pc.or_(entries.is_null(), numbers.is_null()), dtype=bool)
    null_rows[entry_row[broken]] = True
    name_row = entry_row[number_entry]
    kept = ~null_rows[name_row]
    listed = pa.table({"row": pa.array(name_row[kept], pa.int64()), "name": names.filter(pa.array(kept))})
    listed = listed.sort_by([("row", "ascending"), ("name", "ascending")])
    row = listed.column("row").to_numpy()
    name = listed.column("name").combine_chunks()
    first = np.ones(len(row), dtype=bool)
    if len(row) > 1:
        repeated = np.asarray(pc.equal(name[1:], name[:-1]), dtype=bool) & (row[1:] == row[:-1])
        first[1:] = ~repeated
    row = row[first]
    offsets = np.zeros(rows + 1, dtype=np.int32)
    np.cumsum(np.bincount(row, minlength=rows), out=offsets[1:])
    return pa.ListArray.from_arrays(
        pa.array(offsets), name.filter(pa.array(first)), type=pa.list_(pa.string()), mask=pa.array(null_rows)
    )
