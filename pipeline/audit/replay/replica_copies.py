"""The copies of one partition against each other, taken where its rows are: the rows of the
`replica_divergence.copies` frame before they are located (pipeline.audit.rules.replicas says what they mean).

A replay task holds whole partitions, every broker's copy (pipeline.audit.replay.files), so it reads each copy's batch
headers itself, a window of base offsets at a time: no batch of any copy is exchanged by offset, and a task holds the
headers of one window, whatever the size of the partition. When the replay exchanges its rows instead (a columnar
export, a DataFrame), Spark groups the copies' headers by partition and the same function compares them
(`copies_by_exchange`).

Per copy: its first and last offsets and those every copy holds (`common_first`..`common_last`); then, over that range,
the first base offset where the copy departs from the reference copy there (the batch with the highest leader epoch,
then the lowest broker id): a batch whose signature differs, or, when the partition is not compacted, no batch at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from pipeline.sources.filesystems import resolve
from schemas.batches import BATCHES, STATUS_OK

COPIES_TABLE = "copies"  # the scratch table the replay's tasks write the rows into
WINDOW_ROWS = 262_144  # about this many headers of all copies held at once

SIGNATURE = pa.struct(
    [
        ("last_offset", pa.int64()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int32()),
        ("base_sequence", pa.int32()),
        ("is_control", pa.bool_()),
        ("crc", pa.int64()),
    ]
)
COPY = pa.struct(
    [
        ("broker_id", pa.int32()),
        ("partition_leader_epoch", pa.int32()),
        ("signature", SIGNATURE),
        ("last_offset", pa.int64()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int32()),
        ("source_file", pa.string()),
        ("position", pa.int64()),
    ]
)
COPIES_SCHEMA = pa.schema(
    [
        ("cluster_id", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("broker_id", pa.int32()),
        ("copy_first", pa.int64()),
        ("copy_last", pa.int64()),
        ("copies", pa.int64()),
        ("common_first", pa.int64()),
        ("common_last", pa.int64()),
        ("others_last", pa.int64()),
        ("departure", pa.struct([("base_offset", pa.int64()), ("copy", COPY), ("reference", COPY)])),
    ]
)
# A header's columns as `batches` holds them (broker id null for dumps and exports: broker -1).
HEADERS = ["base_offset", "entry_status", *(name for name in COPY.names if name != "signature"), "base_sequence"]
HEADERS += ["is_control", "crc"]
HEADER_SCHEMA = pa.schema([field for field in to_arrow_schema(BATCHES) if field.name in HEADERS])
# Where several batches of one copy share the first departing base offset, the least by the copy's fields is taken.
COPY_ORDER = ["partition_leader_epoch", *SIGNATURE.names, "last_offset", "producer_id", "producer_epoch"]
COPY_ORDER += ["source_file", "position"]

Windows = Callable[[int, int, int], Iterable[pa.Table]]  # (first, last, rows) -> OK headers by ascending offset ranges


def partition_copies(
    cluster: str,
    topic: str,
    partition: int,
    extents: dict[int, tuple[int, int, int]],
    windows: Windows,
    compacted: bool,
) -> list[dict]:
    """The frame's rows of one partition of one cluster from its copies' `extents` (broker -> first offset, last
    offset, readable batches) and `windows` of their readable headers; none unless two or more brokers hold it."""
    if len(extents) < 2:
        return []
    firsts = [first for first, _, _ in extents.values()]
    lasts = [last for _, last, _ in extents.values()]
    common_first, common_last, top = max(firsts), min(lasts), max(lasts)
    longest = lasts.count(top)
    runner_up = max((last for last in lasts if last < top), default=None)
    departures: dict[int, dict] = {}
    if common_first <= common_last:
        rows = sum(count for _, _, count in extents.values())
        departures = _departures(windows(common_first, common_last, rows), sorted(extents), compacted)
    return [
        {
            "cluster_id": cluster,
            "topic": topic,
            "partition": partition,
            "broker_id": broker,
            "copy_first": first,
            "copy_last": last,
            "copies": len(extents),
            "common_first": common_first,
            "common_last": common_last,
            "others_last": runner_up if last == top and longest == 1 else top,
            "departure": departures.get(broker),
        }
        for broker, (first, last, _) in sorted(extents.items())
    ]


def _departures(windows: Iterable[pa.Table], brokers: list[int], compacted: bool) -> dict[int, dict]:
    """Per broker, its first departure (base offset, its batch or None, the reference's batch), the windows taken in
    order of their offsets until every broker has departed."""
    found: dict[int, dict] = {}
    for window in windows:
        if window.num_rows:
            for broker, departure in _window_departures(window, brokers, compacted).items():
                found.setdefault(broker, departure)
        if len(found) == len(brokers):
            break
    return found


def _window_departures(window: pa.Table, brokers: list[int], compacted: bool) -> dict[int, dict]:
    if compacted:  # each broker's cleaner rewrites its copy: CRCs are not compared
        window = window.set_column(window.schema.get_field_index("crc"), "crc", pa.nulls(window.num_rows, pa.int64()))
    by_reference = [("base_offset", "ascending"), ("partition_leader_epoch", "descending"), ("broker_id", "ascending")]
    rows = window.take(pc.sort_indices(window, sort_keys=by_reference, null_placement="at_end"))
    base = rows["base_offset"].to_numpy()
    starts = np.r_[True, base[1:] != base[:-1]]
    group = np.cumsum(starts) - 1
    first_rows = np.flatnonzero(starts)
    broker_ids = rows["broker_id"].to_numpy()
    differs = ~_held_by_reference(rows, group, broker_ids[first_rows][group] == broker_ids)
    departures = {}
    for broker in brokers:
        mine = broker_ids == broker
        candidates = []  # (base offset, a missing batch before a differing one at the same offset, copy, reference)
        differing = np.flatnonzero(mine & differs)
        if differing.size:
            tied = differing[base[differing] == base[differing[0]]]
            least = pc.sort_indices(
                rows.take(pa.array(tied)),
                sort_keys=[(name, "ascending") for name in COPY_ORDER],
                null_placement="at_start",
            )
            row = tied[least[0].as_py()]
            candidates.append((base[row], 1, _copy(rows, row), _copy(rows, first_rows[group[row]])))
        if not compacted:
            present = np.zeros(len(first_rows), dtype=bool)
            present[group[mine]] = True
            absent = np.flatnonzero(~present)
            if absent.size:
                candidates.append((base[first_rows[absent[0]]], 0, None, _copy(rows, first_rows[absent[0]])))
        if candidates:
            at, _, copy, ref = min(candidates, key=lambda candidate: candidate[:2])
            departures[broker] = {"base_offset": int(at), "copy": copy, "reference": ref}
    return departures


def _held_by_reference(rows: pa.Table, group: np.ndarray, of_reference: np.ndarray) -> np.ndarray:
    """Whether the reference copy holds a batch of the same signature (a null equal to a null, as Spark compares two
    structs' fields) at each row's base offset. A log that holds two batches at one base offset (FMT-011) holds them in
    every copy: each is compared with the reference copy's batches there, not the second with the first."""
    keys = {"group": pa.array(group)}
    for name in SIGNATURE.names:
        column = rows[name]
        keys[f"{name}_is_null"] = pc.cast(pc.is_null(column), pa.int8())
        keys[name] = pc.fill_null(pc.cast(column, pa.int64()), 0)
    table = pa.table(keys)
    held = table.filter(pa.array(of_reference)).group_by(table.column_names, use_threads=False).aggregate([])
    numbered = table.append_column("row", pa.array(np.arange(table.num_rows)))
    found = numbered.join(held, keys=table.column_names, join_type="left semi", use_threads=False)
    result = np.zeros(table.num_rows, dtype=bool)
    result[found["row"].to_numpy()] = True
    return result


def _copy(rows: pa.Table, index: int) -> dict:
    """Row `index` as the frame's copy struct."""
    value = {name: rows[name][int(index)].as_py() for name in HEADERS}
    return {
        name: {field: value[field] for field in SIGNATURE.names} if name == "signature" else value[name]
        for name in COPY.names
    }


def extents_of(tables: Iterable[pa.Table]) -> dict[int, tuple[int, int, int]]:
    """Per broker: the first and last offsets of its readable batches in `tables`, and how many there are."""
    extents: dict[int, tuple[int, int, int]] = {}
    for table in tables:
        readable = table.filter(pc.equal(table["entry_status"], STATUS_OK))
        if not readable.num_rows:
            continue
        grouped = readable.group_by("broker_id", use_threads=False).aggregate(
            [("base_offset", "min"), ("last_offset", "max"), ("base_offset", "count")]
        )
        columns = ("broker_id", "base_offset_min", "last_offset_max", "base_offset_count")
        for broker, first, last, count in zip(*(grouped[name].to_pylist() for name in columns), strict=True):
            before_first, before_last, before_count = extents.get(broker, (first, last, 0))
            extents[broker] = (min(first, before_first), max(last, before_last), count + before_count)
    return extents


def file_copies(
    cluster_paths: dict[str, list[str]], topic: str, partition: int, compacted_in: Callable[[str], bool]
) -> pa.Table:
    """The frame's rows of a partition whose `batches` files are `cluster_paths` (by cluster), read a window of base
    offsets at a time: a replay task's, which holds the partition's every file."""
    rows = []
    for cluster, paths in sorted(cluster_paths.items()):
        dataset = _headers(paths)
        extents = extents_of(
            _with_broker(pa.Table.from_batches([batch]))
            for batch in dataset.to_batches(columns=["broker_id", "base_offset", "last_offset", "entry_status"])
        )

        def windows(first: int, last: int, count: int, dataset=dataset) -> Iterator[pa.Table]:
            span = max(1, (last - first + 1) * WINDOW_ROWS // max(1, count))
            offset = ds.field("base_offset")
            for low in range(first, last + 1, span):
                chosen = (
                    (offset >= low) & (offset <= min(last, low + span - 1)) & (ds.field("entry_status") == STATUS_OK)
                )
                yield _with_broker(dataset.to_table(columns=HEADERS, filter=chosen))

        rows += partition_copies(cluster, topic, partition, extents, windows, compacted_in(cluster))
    return pa.Table.from_pylist(rows, schema=COPIES_SCHEMA)


def _headers(paths: list[str]) -> ds.Dataset:
    filesystem, _ = resolve(paths[0])
    return ds.dataset(
        [resolve(path)[1] for path in paths], schema=HEADER_SCHEMA, format="parquet", filesystem=filesystem
    )


def _with_broker(table: pa.Table) -> pa.Table:
    """Rows without a broker id (dumps, exports) as broker -1's, one replica."""
    index = table.schema.get_field_index("broker_id")
    return table.set_column(index, "broker_id", pc.coalesce(table["broker_id"], pa.scalar(-1, pa.int32())))


def copies_by_exchange(readable: DataFrame) -> DataFrame:
    """The frame's rows from `readable` (every readable copy's headers with `is_compacted`, as the frame reads them)
    when the replay's tasks did not hold the copies: Spark groups them by partition, the same function compares them."""
    columns = ["cluster_id", "topic", "partition", "is_compacted", *HEADERS]
    return (
        readable.select(*columns)
        .groupBy("cluster_id", "topic", "partition")
        .applyInArrow(_group_copies, from_arrow_schema(COPIES_SCHEMA))
    )


def _group_copies(group: pa.Table) -> pa.Table:
    if not group.num_rows:
        return COPIES_SCHEMA.empty_table()
    cluster, topic, partition = (group[name][0].as_py() for name in ("cluster_id", "topic", "partition"))
    compacted = bool(pc.any(group["is_compacted"]).as_py())
    headers = group.select(HEADERS)

    def windows(first: int, last: int, count: int) -> Iterator[pa.Table]:
        offsets = headers["base_offset"]
        yield headers.filter(pc.and_(pc.greater_equal(offsets, first), pc.less_equal(offsets, last)))

    rows = partition_copies(cluster, topic, partition, extents_of([headers]), windows, compacted)
    return pa.Table.from_pylist(rows, schema=COPIES_SCHEMA)
