"""The compiled replay pass gives, for every row, exactly what the window-function reference gives
(tests/reference_replay.py): the file-order state of every entry and the producer state of every producer row,
on generated logs with anomalies of every family and on real broker dirs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.testing import assertDataFrameEqual

from pipeline.audit.replay import producer_arrow, task_rows
from pipeline.audit.replay.plan import replay, replay_input
from pipeline.audit.replay.task import ReplayEnds, replay_rows
from pipeline.config import AuditSettings, Settings
from pipeline.sources.dispatch import read_inputs
from pipeline.sources.input_plan import plan_inputs
from schemas.replay import FILE_ORDER_COLUMNS, PRODUCER_STATE_COLUMNS
from tests.broker_dirs import apart_by_partition
from tests.reference_replay import with_file_order_state as reference_file_order_state
from tests.reference_replay import with_producer_state as reference_producer_state

STATE = [field.name for field in PRODUCER_STATE_COLUMNS.fields]
NEIGHBOURS = [field.name for field in FILE_ORDER_COLUMNS.fields]
LOCATION = ["topic", "partition", "broker_id", "segment_base_offset", "position"]


@pytest.fixture(scope="module")
def generated(generated_logs) -> Path:
    return generated_logs


def _assert_same_state(spark, inputs: list[str], settings: AuditSettings) -> int:
    batches = read_inputs(spark, plan_inputs(spark, inputs, Settings().ingest), Settings()).localCheckpoint()
    compiled = replay(batches, settings).localCheckpoint()
    reference = reference_producer_state(reference_file_order_state(replay_input(batches, settings)), settings)
    reference = reference.localCheckpoint()
    assertDataFrameEqual(compiled.select(*LOCATION, *NEIGHBOURS), reference.select(*LOCATION, *NEIGHBOURS))

    def producer_rows(df):
        return df.where("is_producer_row").select(*LOCATION, *STATE)

    assertDataFrameEqual(producer_rows(compiled), producer_rows(reference))
    return producer_rows(compiled).count()


@pytest.mark.parametrize("version", ["auto", "2"])
def test_same_state_as_the_window_reference_on_generated_logs(spark, generated, version):
    settings = AuditSettings(compacted_topics=["*-changelog"], transaction_version=version)
    # small Arrow batches, so replicas span many of them
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "97")
    try:
        assert _assert_same_state(spark, [str(generated)], settings) > 2000
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")


def test_same_state_as_the_window_reference_on_real_broker_dirs(spark, realdata):
    dirs = sorted(
        path for path in (realdata / "broker-segments").iterdir() if path.is_dir() and not path.name.startswith("_")
    )
    groups = apart_by_partition(dirs)
    assert sorted(d for group in groups for d in group) == [str(d) for d in dirs]
    settings = AuditSettings()
    for group in groups:
        _assert_same_state(spark, group, settings)


def _replay_input(spark, generated) -> tuple[pa.Table, pa.Schema]:
    """The replay pass's input rows of the generated root, and the schema of its output."""
    settings = AuditSettings(compacted_topics=["*-changelog"])
    batches = read_inputs(spark, plan_inputs(spark, [str(generated)], Settings().ingest), Settings())
    rows_df = replay_input(batches, settings)
    schema = to_arrow_schema(
        T.StructType([*rows_df.schema.fields, *FILE_ORDER_COLUMNS.fields, *PRODUCER_STATE_COLUMNS.fields])
    )
    return rows_df.toArrow(), schema


def test_the_task_order_and_any_cut_of_it_change_nothing(spark, generated, monkeypatch):
    """A task sorts the rows it receives itself and walks them a chunk at a time, carrying the state across
    chunks; rows past HELD_ROWS go through a file (the task's, and a producer's waiting for its version): the
    order the rows arrive in and any cut of the walk, down to one row per chunk, give the same rows; configured as
    TV2, the generated aborts one above their data wait for their next data epoch across the cuts too."""
    rows, schema = _replay_input(spark, generated)
    key = [(name, "ascending") for name in LOCATION]

    def replayed(arriving: pa.Table, size: int, version_mode: int) -> pa.Table:
        out = replay_rows(
            iter(arriving.to_batches(max_chunksize=size)),
            expiration_ms=86_400_000,
            version_mode=version_mode,
            schema=schema,
        )
        return pa.Table.from_batches(list(out), schema=schema).sort_by(key)

    shuffled = rows.take(np.random.default_rng(7).permutation(rows.num_rows))
    for version_mode in (0, 2):
        whole = replayed(rows, rows.num_rows, version_mode)
        assert whole.num_rows == rows.num_rows
        assert whole.column("transaction_version").null_count < whole.num_rows
        if version_mode == 2:
            assert whole.column("next_data_epoch").null_count < whole.num_rows
        with monkeypatch.context() as cuts:
            cuts.setattr(producer_arrow, "HELD_ROWS", 40)
            cuts.setattr(task_rows, "HELD_ROWS", 100)
            for chunk in (7, 500):
                cuts.setattr(task_rows, "CHUNK_ROWS", chunk)
                assert replayed(shuffled, 13, version_mode).equals(whole)
            # one row per chunk, on the partitions numbered 0 of every topic (a row's state depends on its own
            # partition's rows only): every carry crosses a chunk, and the walk's cost per chunk is paid for a
            # part of the rows only
            cuts.setattr(task_rows, "CHUNK_ROWS", 1)
            expected = whole.filter(pc.equal(whole["partition"], 0))
            assert 500 < expected.num_rows < whole.num_rows
            assert replayed(shuffled.filter(pc.equal(shuffled["partition"], 0)), 13, version_mode).equals(expected)


def test_a_replay_of_appended_rows_goes_on_from_where_the_earlier_rows_left_it(spark, generated, monkeypatch):
    """Each replica's rows cut in two in file order: the replay of the later part from the ends the replay of the
    earlier part left gives the later rows exactly what one replay of all the rows gives them, and the earlier
    part's rows differ from it only where a row's state depends on later rows (the next entry of the last one,
    the transaction version concluded over a producer's rows, the next data epoch of a TV2 abort among a
    producer's last rows)."""
    rows, schema = _replay_input(spark, generated)
    key = [(name, "ascending") for name in LOCATION]

    def replayed(part: pa.Table, **ends) -> pa.Table:
        out = replay_rows(
            iter(part.to_batches(max_chunksize=101)), expiration_ms=86_400_000, version_mode=0, schema=schema, **ends
        )
        return pa.Table.from_batches(list(out), schema=schema).sort_by(key)

    monkeypatch.setattr(task_rows, "CHUNK_ROWS", 7)  # groups and replicas end and go on across chunks
    earlier_part = _earlier_rows(rows)
    assert 0 < pc.sum(earlier_part).as_py() < rows.num_rows
    whole = replayed(rows)
    left = ReplayEnds()
    first = replayed(rows.filter(earlier_part), ends=left)
    later = replayed(rows.filter(pc.invert(earlier_part)), earlier=left)
    assert later.num_rows > 1000 and len(left.producers.carries) > 100
    in_later = pc.is_in(_locations(whole), value_set=_locations(later))
    assert later.equals(whole.filter(in_later))
    expected = whole.filter(pc.invert(in_later))
    for name in ("next_entry_segment_base_offset", "transaction_version", "next_data_epoch"):
        differ = pc.fill_null(pc.not_equal(first[name], expected[name]), True)
        differ = pc.and_(differ, pc.invert(pc.and_(pc.is_null(first[name]), pc.is_null(expected[name]))))
        changed = first.filter(differ)
        if name == "next_entry_segment_base_offset":  # only the last earlier row of a replica, which had none
            assert changed.num_rows <= len(left.replicas) and changed[name].null_count == changed.num_rows
        if name == "next_data_epoch":  # only a TV2 abort after a producer's last earlier data, which had none yet
            assert changed[name].null_count == changed.num_rows and pc.all(changed["is_marker"]).as_py() is not False
        first = first.set_column(first.schema.get_field_index(name), name, expected[name])
    assert first.equals(expected)


def _earlier_rows(rows: pa.Table) -> pa.ChunkedArray:
    """The first ~70 % of each replica's rows in file order, as appending would leave them: a replica whose later
    producer rows do not all come after its earlier ones in offset order is left whole in the earlier part."""
    replica = ["cluster_id", "topic", "partition", "broker_id"]
    table = rows.select([*replica, "segment_base_offset", "position", "base_offset", "is_producer_row"])
    table = table.append_column("_row", pa.array(np.arange(rows.num_rows)))
    ordered = table.sort_by([(name, "ascending") for name in [*replica, "segment_base_offset", "position"]])
    earlier = np.zeros(rows.num_rows, dtype=bool)
    keys = ordered.select(replica).to_pylist()
    rows_at = ordered["_row"].to_numpy()
    offsets = pc.fill_null(ordered["base_offset"], -1).to_numpy()
    producer = pc.fill_null(ordered["is_producer_row"], False).to_numpy(zero_copy_only=False)
    start = 0
    while start < len(keys):
        end = start
        while end < len(keys) and keys[end] == keys[start]:
            end += 1
        cut = start + int((end - start) * 0.7)
        old, new = slice(start, cut), slice(cut, end)
        appended = not producer[new].any() or not producer[old].any()
        appended = appended or offsets[new][producer[new]].min() > offsets[old][producer[old]].max()
        earlier[rows_at[start:cut] if appended else rows_at[start:end]] = True
        start = end
    return pa.chunked_array([earlier])


def _locations(table: pa.Table) -> pa.Array:
    return pc.binary_join_element_wise(
        *(pc.cast(table[name], pa.string()) for name in LOCATION), pc.cast(table["source_file"], pa.string()), "|"
    )
