"""`produce-audit generate`'s ground truth against the audit: a run over a generated log root finds every injected
anomaly at its severity, and nothing else."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pytest

from pipeline.generate import ground_truth
from pipeline.generate.options import GenerateOptions
from pipeline.generate.simulation import write_log_root

# Small segments so partitions roll; a rate high enough that every anomaly kind is injected at least once.
ANOMALOUS = dict(batches=2000, anomaly_rate=0.05, segment_bytes=8 * 1024)


def _generate(root: Path, **options) -> Path:
    write_log_root(GenerateOptions(out=root, **options))
    return root


@pytest.fixture(scope="module")
def anomalous_root(tmp_path_factory) -> Path:
    return _generate(tmp_path_factory.mktemp("generated") / "root", **ANOMALOUS)


@pytest.fixture(scope="module")
def truth(anomalous_root) -> list[dict]:
    return ground_truth.read(anomalous_root).to_pylist()


def test_the_audit_finds_every_injected_anomaly_and_nothing_else(spark, anomalous_root, truth, tmp_path):
    from deltalake import DeltaTable

    from pipeline import runner
    from pipeline.cli import new_run_id
    from pipeline.config import AuditSettings, Settings
    from pipeline.generate.cluster import COMPACTED_TOPICS_GLOB
    from pipeline.generate.recall import compare_with_findings
    from pipeline.tables.store import TableStore

    warehouse = tmp_path / "warehouse"
    settings = Settings(warehouse=str(warehouse), audit=AuditSettings(compacted_topics=[COMPACTED_TOPICS_GLOB]))
    runner.run(spark, TableStore(spark, str(warehouse)), settings, new_run_id(), [str(anomalous_root)], None)
    outcome = compare_with_findings(anomalous_root, warehouse)

    assert outcome["found"] == outcome["injected"] == len(truth)
    assert outcome["missed"] == []
    assert outcome["wrong_severity"] == []
    assert outcome["unexplained"] == []
    batches = DeltaTable(str(warehouse / "batches")).to_pyarrow_table()
    assert pc.sum(pc.equal(batches["entry_status"], "ok")).as_py() > ANOMALOUS["batches"]
    assert set(batches["source_format"].to_pylist()) == {"segment"}  # _ground_truth.parquet not read as input
    # a decision whose marker contradicts it, or was lost, is a torn row of global_transactions; only producers
    # some anomaly was injected on have torn rows
    decisions = DeltaTable(str(warehouse / "global_transactions")).to_pyarrow_table().to_pylist()
    torn = {row["producer_id"] for row in decisions if row["is_torn"]}
    broken = {
        row["producer_id"] for row in truth if row["anomaly"] in ("marker-contradicts-decision", "hanging-transaction")
    }
    assert broken and broken <= torn
    assert torn <= {row["producer_id"] for row in truth}
