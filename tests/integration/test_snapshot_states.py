"""The replay's state at each snapshot offset read from the replay's files (pipeline.audit.replay.snapshot_states) is
the window definition's (tests/reference_replay.py), on generated logs with anomalies of every family and on every
real broker dir, by either replay path."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.testing import assertDataFrameEqual

import schemas
from pipeline.audit.core.context import AuditContext
from pipeline.audit.engine.run import SIDE_TABLES, _in_known_cluster
from pipeline.audit.replay.files import Keeping
from pipeline.audit.replay.snapshot_states import ReplayUnit, by_snapshot, states_of_unit
from pipeline.audit.state.materialised import build_state
from pipeline.audit.state.snapshots import audited_non_kraft, producer_entries
from pipeline.cli import main
from pipeline.config import AuditSettings
from pipeline.generate.segment_writer import snapshot_bytes
from pipeline.sources.kafka_format.encoding import encode_batch, segment_file_name
from pipeline.tables.store import TableStore
from schemas.keys import TP
from tests import reference_replay
from tests.broker_dirs import apart_by_partition


def _ingested(spark, warehouse: Path, inputs: list[str]) -> TableStore:
    with contextlib.redirect_stdout(io.StringIO()):
        args = [arg for path in inputs for arg in ("--input", path)]
        assert main(["ingest", *args, "--warehouse", str(warehouse)]) == 0
    return TableStore(spark, str(warehouse))


def _audit_state(store: TableStore, settings: AuditSettings, scratch, from_files: bool, kept: Path | None = None):
    """The audit's state; `from_files`: as a run builds it, its replay's tasks reading the files and keeping the
    replay in the folder `kept`."""
    side = {
        name: _in_known_cluster(store.read(name, schema=schemas.SCHEMAS[name]))
        for name in SIDE_TABLES
        if store.exists(name) and name != "payloads"
    }
    batches = _in_known_cluster(store.read("batches", schema=schemas.BATCHES))
    files = store.files_per_partition("batches") if from_files else None
    keeping = Keeping(str(kept), "run") if from_files else None
    return build_state(batches, side, AuditContext(settings), scratch("snapshot-states"), files, keeping=keeping), side


@pytest.fixture(scope="module")
def generated(spark, generated_warehouse) -> TableStore:
    return TableStore(spark, str(generated_warehouse))


def _assert_same_states(inputs, side, settings: AuditSettings) -> list:
    entries = producer_entries(audited_non_kraft(side["producer_snapshots"], inputs.replicas, settings))
    # the partitions the replay holds, as the frame keeps them (an inner join with `partitions`)
    expected = reference_replay.snapshot_states(entries, inputs.producer_batches).join(
        inputs.partitions.select(*TP), on=TP, how="left_semi"
    )
    actual = by_snapshot(inputs.snapshot_states)
    assertDataFrameEqual(actual.select(*expected.columns), expected)
    return expected.collect()


@pytest.mark.parametrize("from_files", [True, False], ids=["tasks read files", "exchange"])
def test_same_states_as_the_window_on_generated_logs(spark, generated, scratch, from_files, tmp_path):
    settings = AuditSettings(compacted_topics=["*-changelog"])
    spark.conf.set("spark.sql.shuffle.partitions", "3")  # tasks hold several partitions
    try:
        inputs, side = _audit_state(generated, settings, scratch, from_files, tmp_path)
        rows = _assert_same_states(inputs, side, settings)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "4")
    # the comparison covers every kind of state, not only empty ones
    assert len(rows) > 100
    assert any(row.replayed_batches and row.replay_last_sequence > 0 for row in rows)
    assert any(row.replay_current_txn_first_offset is not None for row in rows)
    assert any(row.txn_starts_at_f for row in rows) and any(row.marker_after_x for row in rows)
    assert any(row.marker_between_f_and_x for row in rows)
    assert any(row.replay_coordinator_epoch >= 0 for row in rows if row.replayed_batches)


def test_same_states_as_the_window_on_real_broker_dirs(spark, realdata, tmp_path, scratch):
    dirs = sorted(path for path in (realdata / "broker-segments").glob("[!_]*") if path.is_dir())
    groups = apart_by_partition(dirs)
    assert sorted(d for group in groups for d in group) == [str(d) for d in dirs]
    settings = AuditSettings()
    compared = 0
    for index, group in enumerate(groups):
        store = _ingested(spark, tmp_path / f"wh{index}", group)
        inputs, side = _audit_state(store, settings, scratch, True, tmp_path / f"kept{index}")
        if inputs.snapshot_states is not None:
            compared += len(_assert_same_states(inputs, side, settings))
    assert compared > 0, "some real broker dirs hold producer snapshots"


def test_a_partition_of_one_batch_has_its_state_at_the_snapshot_after_it(spark, tmp_path, scratch):
    """A replica's last row is kept apart from its partition's body rows (pipeline.audit.replay.kept): a partition
    of one batch has no body at all, and its snapshot is still compared with that batch."""
    partition = tmp_path / "logs" / "seeded-0"
    partition.mkdir(parents=True)
    (tmp_path / "logs" / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=seeded-cluster\n")
    (partition / segment_file_name(0)).write_bytes(
        encode_batch(0, 50, producer_id=4001, producer_epoch=0, base_sequence=0)
    )
    entry = (4001, 0, 49, 49, 49, 0, -1, -1)  # pid, epoch, last sequence, last offset, offset delta, time, ...
    (partition / segment_file_name(50, ".snapshot")).write_bytes(snapshot_bytes([entry]))
    settings = AuditSettings()
    store = _ingested(spark, tmp_path / "wh", [str(tmp_path / "logs")])
    inputs, side = _audit_state(store, settings, scratch, True, tmp_path / "kept")
    (state,) = _assert_same_states(inputs, side, settings)
    assert (state.replayed_batches, state.replay_last_sequence, state.replay_last_offset) == (1, 49, 49)


def test_a_file_out_of_producer_order_is_refused_by_name(tmp_path):
    path = tmp_path / "replay.parquet"
    rows = {
        "cluster_id": ["c", "c"], "topic": ["t", "t"], "partition": pa.array([0, 0], pa.int32()), "producer_id": [7, 7],
        "is_producer_row": [True, True], "base_offset": [5, 3], "producer_epoch": [0, 0], "epoch_run": [0, 0],
        "state_epoch": [None, 0], "is_data": [True, True], "is_marker": [False, False],
        "is_transactional": [False, False], "last_sequence": [0, 1], "last_offset": [5, 3],
        "coordinator_epoch": [None, None], "txn_first_offset": [None, None],
    }  # fmt: skip
    pq.write_table(pa.table(rows), path)
    keys = pa.table(
        {"cluster_id": ["c"], "topic": ["t"], "partition": pa.array([0], pa.int32()), "producer_id": [7],
         "snapshot_offset": [4], "current_txn_first_offset": pa.array([None], pa.int64())}
    )  # fmt: skip

    with pytest.raises(ValueError, match=f"{path}: a producer's rows are not in offset order at row 1"):
        states_of_unit(ReplayUnit((str(path),)), keys)

    pq.write_table(pa.table({**rows, "base_offset": [3, 5], "last_offset": [3, 5]}), path)
    (state,) = states_of_unit(ReplayUnit((str(path),)), keys).to_pylist()
    assert (state["replayed_batches"], state["replay_last_offset"], state["marker_after_x"]) == (1, 3, False)
