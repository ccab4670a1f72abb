"""Partitions are told apart by (cluster, topic, partition): log dirs of two clusters that share broker ids and
topic names are audited side by side, never as copies of one partition; within one cluster copies still compare.
In one warehouse a run replaces the (cluster, topic) pairs it audited only, and a warehouse an older release wrote
(partitioned by topic, findings without `cluster_id`) is upgraded without any finding reading as new."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from logbuilder import PartitionLog

from pipeline.audit.engine.run import run_audit
from pipeline.cli import main
from pipeline.config import AuditSettings, IngestSettings, Settings
from pipeline.generate.options import GenerateOptions
from pipeline.generate.simulation import write_log_root
from pipeline.reports.formatting import place
from pipeline.reports.summary import render_text
from pipeline.sources.dispatch import read_inputs
from pipeline.sources.input_plan import plan_inputs
from pipeline.sources.log_roots import discover_segments
from pipeline.tables.publication import PUBLISHED_TABLES
from pipeline.tables.upgrade import LAYOUT_VERSION
from schemas import PARTITION_BY
from schemas.batches import BATCHES

DIVERGING = "diverging"  # one partition held by brokers 0 and 1, whose copies differ at offset 1


def _log_dir(path, meta: str | None):
    (path / "t-0").mkdir(parents=True)
    (path / "t-0" / "00000000000000000000.log").write_bytes(b"")
    if meta is not None:
        (path / "meta.properties").write_text(meta)
    return str(path)


def test_a_log_dir_names_its_cluster_else_the_configured_one(tmp_path):
    kraft = _log_dir(tmp_path / "kraft", "node.id=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\nversion=1\n")
    old = _log_dir(tmp_path / "old", "broker.id=2\nversion=0\n")  # meta.properties before Kafka 0.10.1
    bare = _log_dir(tmp_path / "bare", None)

    def clusters(ingest: IngestSettings) -> dict[str, tuple[int | None, str]]:
        segments = discover_segments([kraft, old, bare], ingest).segments
        return {s.location.split("/")[-3]: (s.broker_id, s.cluster_id) for s in segments}

    assert clusters(IngestSettings()) == {"kraft": (1, "MkU3OEVBNTcwNTJENDM2Qk"), "old": (2, ""), "bare": (None, "")}
    assert clusters(IngestSettings(cluster_id="east")) == {
        "kraft": (1, "MkU3OEVBNTcwNTJENDM2Qk"),
        "old": (2, "east"),
        "bare": (None, "east"),
    }


def _diverging_copies(cluster_of_copy: str) -> list[dict]:
    """Broker 0's copy in cluster "x", broker 1's in `cluster_of_copy`: a REP-001 when both are one cluster's."""
    log = PartitionLog(topic=DIVERGING, cluster_id="x")
    rows = [log.data(7_001, 0, seq, 1) for seq in range(3)]
    copy = [{**row, "broker_id": 1, "cluster_id": cluster_of_copy} for row in rows]
    copy[1]["crc"] = 99
    return rows + copy


def _audit(spark, scratch, batches, name: str):
    result = run_audit(batches, AuditSettings(), name, scratch(name))
    findings = result.findings.select("cluster_id", "topic", "rule_code").collect()
    summary = result.partition_summary.select("cluster_id", "topic", "partition", "batch_count").collect()
    result.release()
    return findings, summary


CLI = Path(sys.executable).parent / "produce-audit"
COUNTED = ("batches", "findings", "transactions")  # the tables a user counts per cluster


@pytest.fixture(scope="module")
def cluster_roots(tmp_path_factory) -> list[Path]:
    """Two generated clusters, seeds 1 and 2: one broker 0 each, the same topics, different cluster ids."""
    base = tmp_path_factory.mktemp("clusters")
    roots = [base / f"cluster-{seed}" for seed in (1, 2)]
    for seed, root in enumerate(roots, start=1):
        write_log_root(GenerateOptions(root, batches=1500, partitions=2, producers=3, brokers=1, seed=seed))
    return roots


@pytest.fixture(scope="module")
def two_clusters(spark, scratch, cluster_roots):
    """The two clusters read from their log dirs in one ingest, beside two clusters' diverging copies; audited
    together."""
    roots = cluster_roots
    settings = Settings()
    batches = read_inputs(spark, plan_inputs(spark, [str(root) for root in roots], settings.ingest), settings)
    files = batches.select("source_file", "cluster_id").distinct().collect()
    ids = {row.source_file.split("/cluster-")[1][0]: row.cluster_id for row in files}
    copies = spark.createDataFrame(_diverging_copies("y"), BATCHES)
    return ids, _audit(spark, scratch, batches.unionByName(copies), "two-clusters")


def test_each_log_dir_row_carries_its_cluster(two_clusters):
    ids, _ = two_clusters
    assert set(ids) == {"1", "2"}
    assert "" not in ids.values()
    assert ids["1"] != ids["2"]


def test_clusters_sharing_broker_ids_and_topics_are_not_copies_of_each_other(two_clusters):
    ids, (findings, summary) = two_clusters
    assert not [finding for finding in findings if finding.rule_code.startswith("REP-")]
    clusters_of = defaultdict(set)
    for row in summary:
        clusters_of[row.topic, row.partition].add(row.cluster_id)
    generated = {key: clusters for key, clusters in clusters_of.items() if key[0] != DIVERGING}
    assert generated
    assert all(clusters == set(ids.values()) for clusters in generated.values())
    assert clusters_of[DIVERGING, 0] == {"x", "y"}


def test_copies_within_one_cluster_still_compare(spark, scratch):
    findings, summary = _audit(spark, scratch, spark.createDataFrame(_diverging_copies("x"), BATCHES), "one-cluster")
    assert {(f.cluster_id, f.topic) for f in findings if f.rule_code == "REP-001"} == {("x", DIVERGING)}
    assert [(row.cluster_id, row.topic) for row in summary] == [("x", DIVERGING)]


def _summary(clusters: int) -> dict:
    finding = {
        "severity": "ERROR",
        "rule_code": "SEQ-001",
        "topic": "orders",
        "partition": 1,
        "base_offset": 15,
        "last_offset": 17,
        "producer_id": 1001,
        "producer_epoch": 0,
        "broker_id": 0,
        "cluster_id": "east",
        "message": "sequence 15 follows 11",
    }
    return {
        "run": {"id": "r", "reference_time_ms": None},
        "findings": {
            "total": 1,
            "by_severity": {"INFO": 0, "WARN": 0, "ERROR": 1, "CRITICAL": 0},
            "by_rule": {"SEQ-001": {"name": "OUT_OF_ORDER", "count": 1, "by_severity": {"ERROR": 1}}},
            "top": [finding],
        },
        "transactions": {"total": 0, "by_outcome": {}},
        "partitions": {
            "partitions": 2,
            "clusters": clusters,
            "batches": 9,
            "records": 9,
            "aborted_records": 0,
            "with_open_transactions": 0,
            "with_hanging_transactions": 0,
            "open": [],
        },
    }


def test_the_report_names_the_cluster_only_when_the_run_audited_several():
    several, one = render_text(_summary(2)), render_text(_summary(1))
    assert "CLUSTER" in several and "cluster east" in several
    assert "CLUSTER" not in one and "east" not in one
    row = _summary(2)["findings"]["top"][0]
    assert place(row, clusters=2) == "orders-1 @0 in cluster east"
    assert place({**row, "cluster_id": ""}, clusters=2) == "orders-1 @0 in an unknown cluster"
    assert place(row) == "orders-1 @0"


def _cli(*args: str) -> subprocess.CompletedProcess:
    completed = subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert completed.returncode in (0, 1), completed.stderr[-3000:]
    return completed


def _in_process(*args: str) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(list(args)) in (0, 1)


def _per_cluster(warehouse: Path) -> dict[str, Counter]:
    """Rows per cluster of the counted tables, as a user counts them."""
    tables = {table: DeltaTable(str(warehouse / table)).to_pyarrow_table(columns=["cluster_id"]) for table in COUNTED}
    return {table: Counter(rows["cluster_id"].to_pylist()) for table, rows in tables.items()}


def _files_of(warehouse: Path, cluster: str) -> set[str]:
    actions = pa.table(DeltaTable(str(warehouse / "batches")).get_add_actions(flatten=True))
    clusters = actions["partition.cluster_id"].to_pylist()
    return {path for path, of in zip(actions["path"].to_pylist(), clusters, strict=True) if of == cluster}


def _last_run(warehouse: Path) -> dict:
    runs = DeltaTable(str(warehouse / "runs")).to_pyarrow_table().to_pylist()
    return max(runs, key=lambda run: run["finished_at"])


def _as_the_release_before(warehouse: Path) -> None:
    """Rewrite the warehouse as the release before wrote it: every table partitioned by topic only, `runs` without
    `layout_version`, the last run publishing these tables; `ingest_manifest` without `cluster_id`, as older
    releases wrote it."""
    versions = {}
    for table in PUBLISHED_TABLES:
        location = str(warehouse / table)
        if not DeltaTable.is_deltatable(location):
            continue
        rows = DeltaTable(location).to_pyarrow_table()
        if table == "ingest_manifest":
            rows = rows.drop_columns(["cluster_id"])
        write_deltalake(location, rows, mode="overwrite", schema_mode="overwrite", partition_by=["topic"])
        versions[table] = DeltaTable(location).version()
    runs = DeltaTable(str(warehouse / "runs")).to_pyarrow_table().drop_columns(["layout_version"])
    last = max(range(runs.num_rows), key=lambda index: runs["finished_at"][index].as_py())
    published = runs["table_versions"].to_pylist()
    published[last] = list(versions.items())
    index = runs.schema.get_field_index("table_versions")
    runs = runs.set_column(index, "table_versions", pa.array(published, runs["table_versions"].type))
    write_deltalake(str(warehouse / "runs"), runs, mode="overwrite", schema_mode="overwrite")


def test_two_clusters_in_one_warehouse_keep_both_and_an_old_warehouse_is_upgraded(spark, cluster_roots, tmp_path):
    """Cluster A, then cluster B (the same topics) into one warehouse with the shipped defaults (the command's
    entry point in this process): B's run leaves A's rows, and A's rerun replaces A's rows only, B's files untouched.
    Then the warehouse is rewritten as the release before left it; the next run, through the installed command,
    upgrades it in place, publishes the upgrade, and compares equal with the run before it: no finding reads as
    new."""
    warehouse = tmp_path / "warehouse"
    first, second = (str(root) for root in cluster_roots)
    run = ("run", "--warehouse", str(warehouse), "--input")

    _in_process(*run, first)
    after_a = _per_cluster(warehouse)
    (a,) = after_a["batches"]
    assert after_a["batches"][a] > 0 and after_a["findings"][a] > 0 and after_a["transactions"][a] > 0
    _in_process(*run, second)
    after_b = _per_cluster(warehouse)
    (b,) = set(after_b["batches"]) - {a}
    assert all(after_b[table][a] == after_a[table][a] and after_b[table][b] > 0 for table in COUNTED), after_b
    b_files = _files_of(warehouse, b)
    _in_process(*run, first)
    assert _per_cluster(warehouse) == after_b
    assert _files_of(warehouse, b) == b_files
    before_upgrade = _last_run(warehouse)["run_id"]

    _as_the_release_before(warehouse)
    _cli(*run, first)
    assert _per_cluster(warehouse) == after_b
    # A's segments, recorded in the unknown cluster "" the upgrade filled in, are decoded again into A, and the
    # manifest's rows in "" go with them (B's too: B's next run decodes its segments again).
    manifest = DeltaTable(str(warehouse / "ingest_manifest")).to_pyarrow_table(columns=["cluster_id"])
    assert set(manifest["cluster_id"].to_pylist()) == {a}
    runs = DeltaTable(str(warehouse / "runs")).to_pyarrow_table().to_pylist()
    upgrade = [row for row in runs if row["command"] == "upgrade"]
    assert [(row["status"], row["layout_version"]) for row in upgrade] == [("succeeded", LAYOUT_VERSION)]
    assert _last_run(warehouse)["layout_version"] == LAYOUT_VERSION
    for table in PUBLISHED_TABLES:
        if DeltaTable.is_deltatable(str(warehouse / table)):
            assert DeltaTable(str(warehouse / table)).metadata().partition_columns == PARTITION_BY[table], table
    compared = subprocess.run(
        [str(CLI), "compare", "--actual", str(warehouse), "--baseline-run", before_upgrade],
        capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert compared.stdout.startswith("findings: equal"), compared.stdout + compared.stderr[-3000:]
