"""`produce-audit generate --replication-factor` against the audit: the copies of a clean root raise what one copy
does, and every injected replica fault is found at the broker the ground truth names."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.generate import ground_truth
from pipeline.generate.cluster import COMPACTED_TOPICS_GLOB
from pipeline.generate.options import GenerateOptions
from pipeline.generate.simulation import write_log_root
from tests.commands import in_process

CLEAN = dict(batches=3000, anomaly_rate=0.0, segment_bytes=8 * 1024)
ANOMALOUS = dict(batches=2000, anomaly_rate=0.05, segment_bytes=8 * 1024, replication_factor=3)


def _generate(root: Path, **options) -> Path:
    write_log_root(GenerateOptions(out=root, **options))
    return root


@pytest.fixture(scope="module")
def clean_roots(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("replicas")
    return _generate(base / "rf1", **CLEAN), _generate(base / "rf3", **CLEAN, replication_factor=3)


@pytest.fixture(scope="module")
def anomalous_root(tmp_path_factory) -> Path:
    return _generate(tmp_path_factory.mktemp("replicas") / "anomalous", **ANOMALOUS)


@pytest.fixture(scope="module")
def replica_truth(anomalous_root) -> list[dict]:
    return [row for row in ground_truth.read(anomalous_root).to_pylist() if row["rule_code"].startswith("REP-")]


def _audit(root: Path, warehouse: Path) -> list[dict]:
    from deltalake import DeltaTable

    conf = warehouse.parent / f"{warehouse.name}.yaml"
    conf.write_text(f'audit:\n  compacted_topics: ["{COMPACTED_TOPICS_GLOB}"]\n')
    done = in_process(
        "run", "--input", str(root), "--warehouse", str(warehouse), "--conf", str(conf), "--fail-on", "never"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return DeltaTable(str(warehouse / "findings")).to_pyarrow_table().to_pylist()


def _place(finding: dict) -> tuple:
    return tuple(finding[c] for c in ("rule_code", "severity", "topic", "partition", "producer_id", "base_offset"))


def test_the_copies_of_a_clean_root_raise_what_one_copy_does(spark, clean_roots, tmp_path):
    rf1, rf3 = clean_roots
    one = _audit(rf1, tmp_path / "rf1")
    three = _audit(rf3, tmp_path / "rf3")
    alarms = [_place(f) for f in three if f["severity"] != "INFO"]
    assert alarms == []
    # the same findings at the same places; only rows naming a replica (REP, another copy's CRC) may differ
    assert sorted(_place(f) for f in three if not f["rule_code"].startswith("REP-")) == sorted(map(_place, one))
    assert [f for f in three if f["rule_code"].startswith("REP-")] == []


def test_the_audit_finds_every_replica_fault(spark, anomalous_root, replica_truth, tmp_path):
    from pipeline.generate.recall import compare_with_findings

    findings = _audit(anomalous_root, tmp_path / "warehouse")
    outcome = compare_with_findings(anomalous_root, tmp_path / "warehouse")
    assert outcome["missed"] == []
    assert outcome["wrong_severity"] == []
    assert outcome["unexplained"] == []
    assert outcome["found"] == outcome["injected"]
    for row in replica_truth:  # at the broker the ground truth names
        assert any(
            f["rule_code"] == row["rule_code"]
            and (f["topic"], f["partition"], f["base_offset"]) == (row["topic"], row["partition"], row["base_offset"])
            and f["broker_id"] == row["broker_id"]
            for f in findings
        ), row
    # no replica finding nobody injected, even at INFO
    truth = {(row["rule_code"], row["topic"], row["partition"], row["base_offset"]) for row in replica_truth}
    assert {
        (f["rule_code"], f["topic"], f["partition"], f["base_offset"]) for f in findings if f["rule_code"][:4] == "REP-"
    } == truth
