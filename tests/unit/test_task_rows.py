"""A replay task's own rows: kept in memory or in a mapped local file, sorted by key, taken a chunk at a time."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pipeline.audit.replay import task_rows
from pipeline.audit.replay.task_rows import TaskRows, in_order, sort_order


def _batches(rows: int, size: int) -> list[pa.RecordBatch]:
    rng = np.random.default_rng(3)
    values = rng.integers(0, 50, rows)
    table = pa.table(
        {
            "key": pa.array(values, mask=values % 7 == 0),
            "name": [f"t{value % 3}" for value in values],
            "row": np.arange(rows),
        }
    )
    return table.to_batches(max_chunksize=size)


@pytest.mark.parametrize("held_rows", [10_000, 100])
def test_the_rows_come_back_whole_from_memory_or_the_file(tmp_path, monkeypatch, held_rows):
    monkeypatch.setattr(task_rows, "HELD_ROWS", held_rows)
    monkeypatch.setenv("SPARK_LOCAL_DIRS", f"{tmp_path / 'a'},{tmp_path / 'b'}")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    batches = _batches(2_345, 37)
    with TaskRows() as kept:
        for batch in batches:
            kept.add(batch)
        table = kept.table()
        spilled = sorted(path.name for path in tmp_path.rglob("produce-audit-task-*"))
        assert table.equals(pa.Table.from_batches(batches).combine_chunks())
    assert len(spilled) == (held_rows < 2_345)
    assert not list(tmp_path.rglob("produce-audit-task-*"))  # removed when the task is done


def test_an_empty_task_has_no_table():
    with TaskRows() as kept:
        kept.add(_batches(10, 10)[0].slice(0, 0))
        assert kept.table() is None


def test_sorted_as_spark_sorts_nulls_first_and_ties_in_arrival_order():
    table = pa.Table.from_batches(_batches(500, 500))
    order = sort_order(table, ["key", "name"])
    keys = table.take(order).to_pylist()
    assert [row["key"] for row in keys[: table.column("key").null_count]] == [None] * table.column("key").null_count
    ranked = [((row["key"] is not None, row["key"] or 0), row["name"], row["row"]) for row in keys]
    assert ranked == sorted(ranked)  # ties (same key and name) keep the order the rows arrived in


@pytest.mark.parametrize("chunk_rows", [1, 64, 10_000])
def test_taking_in_order_from_many_pieces_is_a_take(monkeypatch, chunk_rows):
    monkeypatch.setattr(task_rows, "CHUNK_ROWS", chunk_rows)
    table = pa.Table.from_batches(_batches(1_000, 97))
    order = np.random.default_rng(5).permutation(table.num_rows)
    taken = pa.Table.from_batches(list(in_order(table, order)))
    assert taken.equals(table.combine_chunks().take(order))
    assert max(batch.num_rows for batch in in_order(table, order)) == min(chunk_rows, table.num_rows)
