"""One replica per partition is audited, chosen by `audit.replica_choice`."""

import pytest
from logbuilder import PartitionLog

from pipeline.audit.replay.plan import replica_facts
from pipeline.config import AuditSettings
from schemas.batches import BATCHES


@pytest.fixture(scope="module")
def two_replicas(spark):
    follower = PartitionLog(broker_id=0, leader_epoch=3)
    for seq in range(3):
        follower.data(1, 0, seq, 1)
    newer_leader = PartitionLog(broker_id=1, leader_epoch=4)
    for seq in range(2):
        newer_leader.data(1, 0, seq, 1)
    return spark.createDataFrame(follower.rows + newer_leader.rows, BATCHES)


@pytest.mark.parametrize(("rule", "broker"), [("leader_epoch", 1), ("broker_id", 0)])
def test_one_replica_is_kept(two_replicas, rule, broker):
    facts = replica_facts(two_replicas, AuditSettings(replica_choice=rule))
    assert {row.broker_id for row in facts.select("broker_id").collect()} == {broker}
