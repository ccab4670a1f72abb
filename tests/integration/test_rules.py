"""Every registered rule fires on a log built to break it and stays silent on its near miss.

All scenarios are audited together in one Spark job (one topic each) to keep the suite fast.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from logbuilder import INT32_MAX, T0, PartitionLog

from pipeline.audit.core.registry import RULES
from pipeline.audit.engine.run import run_audit
from pipeline.config import AuditSettings
from schemas.batches import BATCHES, STATUS_BAD_MAGIC, STATUS_TOO_SMALL, STATUS_TRUNCATED
from schemas.checkpoints import CHECKPOINTS
from schemas.file_problems import (
    FILE_PROBLEMS,
    PROBLEM_FILE_NAME,
    PROBLEM_LEADER_EPOCH_CHECKPOINT,
    PROBLEM_LEFTOVER_FILES,
    PROBLEM_OFFSET_INDEX,
    PROBLEM_PARTITION_METADATA,
    PROBLEM_TIME_INDEX,
)
from schemas.leader_epochs import LEADER_EPOCHS
from schemas.live_producers import LIVE_PRODUCERS
from schemas.offset_commits import OFFSET_COMMITS
from schemas.producer_snapshots import PRODUCER_SNAPSHOTS
from schemas.transaction_log import TRANSACTION_LOG
from schemas.txn_index import TXN_INDEX

DAY_MS = 86_400_000
MINUTE_MS = 60_000


def seq_001(log, miss):
    log.data(1, 0, 0, 3)
    log.data(1, 0, 3 if miss else 5, 2)
    log.data(1, 0, 5 if miss else 7, 1)


def seq_002(log, miss):
    log.data(1, 0, 0, 1, txn=True)
    log.marker(1, 1, commit=False)
    log.data(1, 1, 0 if miss else 5, 1, txn=True)


def seq_003(log, miss):
    log.data(1, 0, 0, 3)
    log.data(1, 1, 0 if miss else 3, 1)


def seq_004(log, miss):
    log.data(1, 0, 0, 3)
    log.data(1, 0, 3, 3)
    if miss:
        log.data(1, 1, 0, 3)  # a retry after an epoch bump is a new sequence space
    else:
        log.data(1, 0, 3, 3)


def seq_005(log, miss):
    log.data(1, 0, 0, 3)
    log.data(1, 0, 3 if miss else 1, 3)


def seq_006(log, miss):
    log.data(1, 0, 0 if miss else 7, 1)
    log.data(1, 0, 1 if miss else 8, 1)


def seq_007(log, miss):
    log.data(1, 0, 0, 1)
    log.data(1, 0, 1 if miss else 9, 1, at=log.clock + 2 * DAY_MS)


def seq_008(log, miss):
    log.data(1, 0, 0 if miss else INT32_MAX - 1, 3)
    log.data(1, 0, 3 if miss else 1, 1)


def seq_009(log, miss):
    log.data(1, 5, 0, 2, txn=True)
    log.marker(1, 6, commit=True)
    log.data(1, 6, 0 if miss else 3, 1, txn=True)


def epo_001(log, miss):
    log.data(1, 1, 0, 1)
    log.data(1, 2 if miss else 0, 0 if miss else 1, 1)


def epo_002(log, miss):
    log.data(1, 2, 0, 1, txn=True)
    log.marker(1, 2 if miss else 1)


def epo_003(log, miss):
    log.data(1, 5, 0, 1, txn=True)
    log.marker(1, 6, commit=True)
    log.data(1, 6, 0, 1, txn=True)
    log.marker(1, 7 if miss else 6, commit=False)


def epo_004(log, miss):
    log.data(1, 0, 0, 1, txn=True)
    log.marker(1, 0 if miss else 1, commit=False)


def epo_005(log, miss):
    log.data(1, 0, 0, 1, txn=True)
    log.marker(1, 1 if miss else 3, commit=False)


def epo_006(log, miss):
    log.data(1, 0, 0, 1)
    log.data(1, 1 if miss else 3, 0, 1)


def epo_007(log, miss):
    log.data(1, 32767, 0, 1, txn=not miss)


def txn_001(log, miss):
    log.data(1, 0, 0, 1, txn=True)
    if miss:
        log.marker(1, 0)
    log.data(1, 0, 1, 1)


def txn_002(log, miss):
    log.data(1, 0, 0, 1, txn=True)
    if miss:
        log.marker(1, 0, commit=False)
    log.data(1, 1, 0, 1, txn=True)


def txn_003(log, miss):
    if miss:
        log.data(1, 0, 0, 1, txn=True)
    log.marker(1, 0)


def txn_004(log, miss):
    log.data(1, 0, 0, 1, txn=True)
    log.marker(1, 0, coordinator_epoch=5)
    log.data(1, 0, 1, 1, txn=True)
    log.marker(1, 0, coordinator_epoch=5 if miss else 3)


def txn_005(log, miss):
    log.data(1, 0, 0, 1, txn=True)
    log.marker(1, 0, at=log.clock + (1 if miss else 20) * MINUTE_MS)


def txn_006(log, miss):
    if not miss:
        log.data(1, 0, 0, 1)
    log.data(1, 0, 0 if miss else 1, 1, txn=True)
    log.marker(1, 0)


def txn_007(log, miss):
    log.data(1, 5, 0, 1, txn=True)
    log.marker(1, 6, commit=True)
    log.marker(1, 6, commit=miss)  # a repeated COMMIT is the KAFKA-19999 retry


def lso_001(log, miss):
    log.data(1, 0, 0, 1, txn=True)
    if miss:
        log.marker(1, 0)


def lso_002(log, miss):
    log.data(1, 0, 0, 1, txn=True)
    log.data(2, 0, 0, 1, at=log.clock + (5 if miss else 30) * MINUTE_MS)


def lso_003(log, miss):
    log.data(1, 0, 0, 2, txn=True)
    log.data(2, 0, 0, 1)
    log.log_start_checkpoint(0 if miss else 1)


def lso_004(log, miss):
    log.topic = "plain-hanging" if miss else "compacted-hanging"
    lso_002(log, miss=False)


def fmt_001(log, miss):
    log.data(1, 0, 0, 1)
    if not miss:
        log._row(entry_status=STATUS_TRUNCATED, size_bytes=30, magic=None, partition_leader_epoch=None)


def fmt_001_unreadable_partition(log, miss):
    """A corrupt length at the start of the only segment: nothing of the partition decodes."""
    log._row(entry_status=STATUS_TRUNCATED, size_bytes=4096, magic=None, partition_leader_epoch=None)


def fmt_001_mostly_unreadable_partition(log, miss):
    """One batch decodes, then a corrupt length: the tail holds more bytes than the partition read before it."""
    log.data(1, 0, 0, 1)
    log._row(entry_status=STATUS_TRUNCATED, size_bytes=1 << 20, magic=None, partition_leader_epoch=None)


def fmt_002(log, miss):
    log.data(1, 0, 0, 1)
    if not miss:
        log._row(entry_status=STATUS_TOO_SMALL, size_bytes=12, magic=None, partition_leader_epoch=None)


def fmt_003(log, miss):
    log.data(1, 0, 0, 1)
    if not miss:
        log._row(entry_status=STATUS_BAD_MAGIC, size_bytes=100, magic=7, partition_leader_epoch=None)


def fmt_004(log, miss):
    log.data(1, 0, 0, 1)["crc_valid"] = miss


def fmt_005(log, miss):
    log.data(1, 0, 0, 1)["compression"] = 4 if miss else 5


def fmt_006(log, miss):
    row = log.data(1, 0, 0, 2)
    row["record_problem"] = "record 1: offset delta 0 at byte 72 is not above the previous record's 0"
    row["crc_valid"] = not miss  # a batch whose CRC fails is FMT-004's, whatever its records look like


def fmt_007(log, miss):
    log.data(1, 0, 0, 3)["record_count"] = 3 if miss else 2


def fmt_008(log, miss):
    row = log.data(1, 0, 0, 2)
    row["max_record_timestamp"] = row["max_timestamp"] - (0 if miss else 5)


def fmt_009(log, miss):
    row = log.data(-1, -1, -1, 1, txn=True)
    row["is_transactional"] = miss is False


def fmt_010(log, miss):
    log.data(1, 0, 0, 1, txn=True)
    log.marker(1, 0)["is_transactional"] = miss


def fmt_011(log, miss):
    log.data(1, 0, 0, 2)
    if not miss:
        log.next_offset -= 1
    log.data(2, 0, 0, 1)


def fmt_012(log, miss):
    log.data(1, 0, 0, 2)
    if not miss:
        log.skip(5)
    log.data(2, 0, 0, 1)


def fmt_013(log, miss):
    log.leader_epoch = 4
    log.data(1, 0, 0, 1)
    log.leader_epoch = 5 if miss else 3
    log.data(2, 0, 0, 1)


def seg_002(log, miss):
    log.data(1, 0, 0, 5)
    if not miss:
        log.skip(2)
    first = log.data(1, 0, 5, 1)
    first.update(segment_base_offset=5, source_file="t/00000000000000000005.log", position=0)


def seg_003(log, miss):
    log.data(1, 0, 0, 5)
    nxt = log.data(1, 0, 5, 1)
    nxt.update(segment_base_offset=5 if miss else 3, source_file="t/00000000000000000003.log", position=0)


def idx_001(log, miss):
    log.data(1, 0, 0, 2, txn=True)
    log.marker(1, 0, commit=False, index=miss)


def idx_002(log, miss):
    log.data(1, 0, 0, 2, txn=True)
    log.data(1, 0, 2, 1, txn=True)
    log.marker(1, 0, commit=False)
    if not miss:
        log.index_rows[-1]["first_offset"] = 2


def idx_003(log, miss):
    log.data(1, 0, 0, 2)
    if not miss:
        log.index_entry(1, 0, 1, 2)


def idx_004(log, miss):
    log.data(1, 0, 0, 1, txn=True)
    log.data(2, 0, 0, 1, txn=True)
    log.marker(1, 0, commit=False)
    assert log.index_rows[-1]["last_stable_offset"] == 1  # producer 2's transaction is still open
    if not miss:
        log.index_rows[-1]["last_stable_offset"] = 3
    log.marker(2, 0)


def idx_005(log, miss):
    log.data(1, 0, 0, 1)
    marker = log.marker(1, 0, commit=False)
    if not miss:
        log.index_entry(1, marker["base_offset"], marker["base_offset"], marker["base_offset"] + 1)


def idx_006(log, miss):
    log.data(1, 0, 0, 1, txn=True)
    log.marker(1, 0, commit=False)
    log.index_rows[-1]["version"] = 0 if miss else 1


def idx_007(log, miss):
    log.data(1, 0, 0, 1, txn=True)
    log.marker(1, 0, commit=False, index=miss)
    if not miss:
        log.index_entry(1, 0, 1, 2, segment_base_offset=100)


def idx_008(log, miss):
    log.topic = "plain-cleaned-abort" if miss else "compacted-cleaned-abort"
    log.data(1, 0, 0, 1)
    log.marker(1, 0, commit=False)


def snp_001(log, miss):
    log.data(1, 0, 0, 1)
    log.snapshot(1, None, status="ok" if miss else "crc_mismatch")


def snp_002(log, miss):
    log.data(1, 0, 0, 3)
    log.snapshot(3 if miss else 100, 1, 0, last_sequence=2, last_offset=2, offset_delta=2)


def snp_003(log, miss):
    log.data(1, 3, 0, 2)
    log.data(1, 3, 2, 1)
    log.snapshot(3, 1, 3 if miss else 2, last_sequence=2, last_offset=2, offset_delta=0)


def snp_004(log, miss):
    log.data(1, 0, 0, 1, txn=True)
    log.marker(1, 0)
    log.data(1, 0, 1, 2, txn=True)
    log.snapshot(
        4, 1, 0, last_sequence=2, last_offset=3, offset_delta=1, coordinator_epoch=0, txn_first_offset=2 if miss else 3
    )


def snp_005(log, miss):
    log.data(1, 0, 0, 2, txn=True)
    if miss:
        log.marker(1, 0)
        log.snapshot(3, 1, 0, last_sequence=1, last_offset=1, offset_delta=1, coordinator_epoch=0)
    else:
        log.snapshot(2, 1, 0, last_sequence=1, last_offset=1, offset_delta=1, txn_first_offset=0)
        log.marker(1, 0)


def lep_002(log, miss):
    log.data(1, 0, 0, 1)
    log.epoch_checkpoint((0, 0), (2, 5), (3, 7) if miss else (1, 7))


def lep_003(log, miss):
    log.data(1, 0, 0, 1)
    log.data(2, 0, 0, 1)
    log.leader_epoch = 1
    log.data(1, 0, 1, 1)
    if miss:
        log.epoch_checkpoint((0, 0), (1, 2))
    else:
        log.leader_epoch = 2  # an epoch the checkpoint does not list
        log.data(1, 0, 2, 1)
        log.epoch_checkpoint((0, 0), (1, 1))


EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD = range(7)


def coordinator_pid(rule_number, miss, k=0):
    """Producer ids unique to a scenario: TSL-014 compares current producer ids across the whole audit."""
    return 10_000 + 100 * rule_number + (50 if miss else 0) + k


def commit_cycle(log, tid, pid, epoch, partitions=("t-0",)):
    log.txn_state(tid, EMPTY, pid, epoch)
    log.txn_state(tid, ONGOING, pid, epoch, partitions)
    start = log.transaction_log_rows[-1]["start_timestamp_ms"]
    log.txn_state(tid, PREPARE_COMMIT, pid, epoch, partitions, start=start)
    log.txn_state(tid, COMPLETE_COMMIT, pid, epoch, start=start)


def tsl_001(log, miss):
    log.txn_state("a", EMPTY, coordinator_pid(1, miss), 0, key_version=0 if miss else 1)


def tsl_002(log, miss):
    log.txn_state("a", EMPTY, coordinator_pid(2, miss), 0, value_version=1 if miss else 2)


def tsl_003(log, miss):
    log.txn_state("a", EMPTY if miss else DEAD, coordinator_pid(3, miss), 0)


def tsl_004(log, miss):
    log.txn_state("a", EMPTY, coordinator_pid(4, miss), 0, start=None if miss else T0)


def tsl_005(log, miss):
    pid = coordinator_pid(5, miss)
    log.txn_state("a", EMPTY, pid, 0)
    log.txn_state("a", ONGOING, pid, 0, ("t-0",))
    start = log.transaction_log_rows[-1]["start_timestamp_ms"]
    log.txn_state("a", PREPARE_COMMIT, pid, 0, ("t-0",), start=start)
    log.txn_state("a", COMPLETE_COMMIT, pid, 0, start=start if miss else -1)


def tsl_006(log, miss):
    pid = coordinator_pid(6, miss)
    log.txn_state("a", EMPTY, pid, 0)
    if miss:
        log.skip(3)  # compacted away: what came between is unknown, so the pair is not checked
    log.txn_state("a", PREPARE_COMMIT, pid, 0, ("t-0",))


def tsl_007(log, miss):
    pid = coordinator_pid(7, miss)
    if miss:  # a TV2 chain: Prepare bumps the epoch, the next transaction goes on at it
        tv2 = {"value_version": 1, "client_transaction_version": 2}
        log.txn_state("a", EMPTY, pid, 0, **tv2)
        log.txn_state("a", ONGOING, pid, 0, ("t-0",), **tv2)
        log.txn_state("a", PREPARE_COMMIT, pid, 1, ("t-0",), **tv2)
        log.txn_state("a", COMPLETE_COMMIT, pid, 1, **tv2)
        log.txn_state("a", ONGOING, pid, 1, ("t-1",), **tv2)
        log.txn_state("a", PREPARE_ABORT, pid, 2, ("t-1",), **tv2)
        log.txn_state("a", COMPLETE_ABORT, pid, 2, **tv2)
    else:
        log.txn_state("a", EMPTY, pid, 0)
        log.txn_state("a", ONGOING, pid, 1, ("t-0",))


def tsl_008(log, miss):
    pid = coordinator_pid(8, miss)
    log.txn_state("a", EMPTY, pid, 0)
    log.txn_state("a", ONGOING, pid, 0, ("t-0",))
    log.txn_state("a", ONGOING, pid, 0, ("t-0", "u-3"))
    log.txn_state("a", PREPARE_COMMIT, pid, 0, ("t-0", "u-3") if miss else ("t-0",))


def tsl_009(log, miss):
    pid = coordinator_pid(9, miss)
    commit_cycle(log, "a", pid, 0)
    if miss:
        log.txn_state("a", EMPTY, pid, 1, timeout_ms=30_000)
    else:
        log.txn_state("a", ONGOING, pid, 0, ("t-0",), timeout_ms=30_000)


def tsl_010(log, miss):
    log.txn_state("a", EMPTY, coordinator_pid(10, miss), 0, timeout_ms=INT32_MAX if miss else 1_000_000)


def tsl_011(log, miss):
    pid = coordinator_pid(11, miss)
    log.txn_state("a", EMPTY, pid, 0)
    row = log.txn_state("a", ONGOING, pid, 0, ("t-0",))
    if not miss:
        row["last_update_timestamp_ms"] -= 10_000


def tsl_012(log, miss):
    pid = coordinator_pid(12, miss)
    log.txn_state("a", EMPTY, pid, 0)
    log.txn_state("a", ONGOING, pid, 0, ("t-0",))
    log.clock += 30_000 if miss else 120_000  # timeout 60 s plus the coordinator's 10 s check interval
    log.txn_state("other", EMPTY, coordinator_pid(12, miss, 1), 0)


def tsl_013(log, miss):
    pid = coordinator_pid(13, miss)
    if miss:
        commit_cycle(log, "a", pid, 0)
        log.clock += 8 * DAY_MS
    else:
        log.txn_state("a", EMPTY, pid, 0)
        log.txn_state("a", ONGOING, pid, 0, ("t-0",))
    log.txn_state("a", None, pid, 0)


def tsl_014(log, miss):
    log.txn_state("a", EMPTY, coordinator_pid(14, miss), 0)
    log.txn_state("b", EMPTY, coordinator_pid(14, miss, 1 if miss else 0), 0)


def tsl_015(log, miss):
    log.txn_state("a", EMPTY, coordinator_pid(15, miss), 0, batch_compression=0 if miss else 1)


def transactional_write(log, tid, pid, decision=None, **prepare_values):
    """Empty, Ongoing on the log's partition, one data batch, and the Prepare record of `decision` if given."""
    tp = f"{log.topic}-{log.partition}"
    log.txn_state(tid, EMPTY, pid, 0)
    start = log.txn_state(tid, ONGOING, pid, 0, (tp,))["start_timestamp_ms"]
    log.data(pid, 0, 0, 1, txn=True)
    if decision is not None:
        log.txn_state(tid, decision, pid, 0, (tp,), start=start, **prepare_values)
    return start


def xtx_001(log, miss):
    pid = coordinator_pid(21, miss)
    transactional_write(log, "a", pid, PREPARE_COMMIT)
    log.marker(pid, 0, commit=miss)


def xtx_003(log, miss):
    pid = coordinator_pid(23, miss)
    transactional_write(log, "a", pid, PREPARE_COMMIT if miss else None)
    log.marker(pid, 0)


def xtx_004(log, miss):
    pid = coordinator_pid(24, miss)
    if miss:
        transactional_write(log, "a", pid)
    else:  # the data went to a partition the transaction never added
        log.txn_state("a", EMPTY, pid, 0)
        log.txn_state("a", ONGOING, pid, 0, ("elsewhere-0",))
        log.data(pid, 0, 0, 1, txn=True)


def xtx_002(log, miss):
    pid = coordinator_pid(22, miss)
    start = transactional_write(log, "a", pid, PREPARE_COMMIT)
    if miss:
        log.marker(pid, 0)
    log.txn_state("a", COMPLETE_COMMIT, pid, 0, start=start)


def xtx_002_pending(log, _):
    """The Prepare record is the id's latest: its markers may still be on their way."""
    transactional_write(log, "a", coordinator_pid(22, False, 1), PREPARE_COMMIT)


def xtx_002_next_transaction_open(log, _):
    """The decided transaction got its marker; the open one is the next transaction, which added the partition
    again and has not ended yet."""
    pid = coordinator_pid(22, True, 1)
    start = transactional_write(log, "a", pid, PREPARE_COMMIT)
    log.marker(pid, 0)
    log.txn_state("a", COMPLETE_COMMIT, pid, 0, start=start)
    log.txn_state("a", ONGOING, pid, 0, (f"{log.topic}-{log.partition}",))
    log.data(pid, 0, 1, 1, txn=True)


def xtx_006(log, miss):
    """A fence abort decides at epoch + 1; its marker must carry that epoch, not one more."""
    pid = coordinator_pid(26, miss)
    start = transactional_write(log, "a", pid)
    tp = f"{log.topic}-{log.partition}"
    log.txn_state("a", PREPARE_ABORT, pid, 1, (tp,), start=start)
    log.marker(pid, 1 if miss else 2, commit=False)
    log.txn_state("a", COMPLETE_ABORT, pid, 1, start=start)


TV2 = {"value_version": 1, "client_transaction_version": 2}


def xtx_008(log, miss):
    """A TV2 commit bumps the epoch at Prepare; a marker at the data's epoch is a V1 marker or a late one."""
    pid = coordinator_pid(28, miss)
    tp = f"{log.topic}-{log.partition}"
    log.txn_state("a", EMPTY, pid, 0, **TV2)
    start = log.txn_state("a", ONGOING, pid, 0, (tp,), **TV2)["start_timestamp_ms"]
    log.data(pid, 0, 0, 1, txn=True)
    log.txn_state("a", PREPARE_COMMIT, pid, 1, (tp,), start=start, **TV2)
    log.marker(pid, 1 if miss else 0)
    log.txn_state("a", COMPLETE_COMMIT, pid, 1, start=start, **TV2)


def xtx_010(log, miss):
    """An abort at epoch + 1 after the transaction's timeout (60 s) is the coordinator's timeout abort; before
    it, the same shape is a fence by a new instance. The records are written without data between them: the
    coordinator's partition holds nothing else, and a gap in its offsets would read as compaction."""
    pid = coordinator_pid(30, miss)
    tp = f"{log.topic}-{log.partition}"
    log.data(pid, 0, 0, 1, txn=True)
    log.txn_state("a", EMPTY, pid, 0)
    start = log.txn_state("a", ONGOING, pid, 0, (tp,))["start_timestamp_ms"]
    log.clock += 1_000 if miss else 120_000
    log.txn_state("a", PREPARE_ABORT, pid, 1, (tp,), start=start)
    log.txn_state("a", COMPLETE_ABORT, pid, 1, start=start)
    log.marker(pid, 1, commit=False)


def xtx_009(log, miss):
    pid = coordinator_pid(29, miss)
    log.txn_state("a", EMPTY, pid, 0)
    log.txn_state("a", ONGOING, pid, 0, ("out-0", f"{log.topic}-{log.partition}") if miss else ("out-0",))
    log.offset_commit(pid, 0, "group-1", "in-0", 42)


def xtx_005(log, miss):
    pid = coordinator_pid(25, miss)
    if miss:
        transactional_write(log, "a", pid)  # still Ongoing: the transaction is open, not hanging
    else:  # the coordinator completed, but no marker reached the partition
        start = transactional_write(log, "a", pid, PREPARE_COMMIT)
        log.txn_state("a", COMPLETE_COMMIT, pid, 0, start=start)


def xtx_007(log, miss):
    pid = coordinator_pid(27, miss)
    transactional_write(log, "a", pid, PREPARE_COMMIT, partition_leader_epoch=5)
    log.marker(pid, 0, coordinator_epoch=5 if miss else 3)


def xtx_011(log, miss):
    pid = coordinator_pid(31, miss)
    transactional_write(log, "a", pid)
    log.txn_state("b", EMPTY, pid + 1 if miss else pid, 0)


def file_problem(kind):
    def scenario(log, miss):
        log.data(1, 0, 0, 1)
        if not miss:
            log.file_problem(kind, f"a {kind} problem as found by the partition-file reader")

    return scenario


def copy_on_broker(log, broker_id, rows):
    """Another broker's copy of `rows` of the log, as a follower appends them: the same bytes in its own log dir."""
    log.rows.extend({**row, "broker_id": broker_id} for row in rows)


def three_batches(log):
    pid = 7_001
    return [log.data(pid, 0, seq, 1) for seq in range(3)]


def rep_001(log, miss):
    """One copy's batch differs in its CRC at the same leader epoch: no later leader explains it."""
    copy = [dict(row) for row in three_batches(log)]
    if not miss:
        copy[1]["crc"] = 99
    copy_on_broker(log, 1, copy)


def rep_002(log, miss):
    """Broker 1 led in epoch 1 and wrote its own batch at offset 2; broker 0's batch there, of epoch 0, is gone
    once broker 0 rejoins."""
    copy = [dict(row) for row in three_batches(log)]
    if not miss:
        copy[2].update(partition_leader_epoch=1, producer_id=7_002, base_sequence=0, last_sequence=0, crc=5)
    copy_on_broker(log, 1, copy)


def rep_003(log, miss):
    """Broker 1's copy lags broker 0's by one batch and agrees with it otherwise."""
    batches = three_batches(log)
    copy_on_broker(log, 1, batches if miss else batches[:2])


def liv_001(log, miss):
    """The leader forgot a producer whose last batch is a second old; a day-old one it expired, as brokers do."""
    log.data(1, 0, 0, 3)
    log.live_producer(None, age_ms=2 * DAY_MS if miss else 1000)


def liv_002(log, miss):
    """The leader holds another epoch; the near miss is a partition still written while it was described."""
    log.data(1, 0, 0, 3)
    log.live_producer(1, 1, 2, settled=not miss)


def liv_003(log, miss):
    """An open transaction of a producer the log does not hold; the near miss began after the read ended."""
    log.data(1, 0, 0, 3)
    log.live_producer(1, 0, 2)
    log.live_producer(9, 0, 0, txn_start=log.next_offset if miss else 1)


SCENARIOS = {
    "SEQ-001": (seq_001, "ERROR"),
    "SEQ-002": (seq_002, "ERROR"),
    "SEQ-003": (seq_003, "ERROR"),
    "SEQ-004": (seq_004, "CRITICAL"),
    "SEQ-005": (seq_005, "CRITICAL"),
    "SEQ-006": (seq_006, "INFO"),
    "SEQ-007": (seq_007, "WARN"),
    "SEQ-008": (seq_008, "INFO"),
    "SEQ-009": (seq_009, "ERROR"),
    "EPO-001": (epo_001, "ERROR"),
    "EPO-002": (epo_002, "ERROR"),
    "EPO-003": (epo_003, "ERROR"),
    "EPO-004": (epo_004, "INFO"),
    "EPO-005": (epo_005, "WARN"),
    "EPO-006": (epo_006, "INFO"),
    "EPO-007": (epo_007, "WARN"),
    "TXN-001": (txn_001, "ERROR"),
    "TXN-002": (txn_002, "CRITICAL"),
    "TXN-003": (txn_003, "INFO"),
    "TXN-004": (txn_004, "ERROR"),
    "TXN-005": (txn_005, "WARN"),
    "TXN-006": (txn_006, "WARN"),
    "TXN-007": (txn_007, "WARN"),
    "LSO-001": (lso_001, "INFO"),
    "LSO-002": (lso_002, "ERROR"),
    "LSO-003": (lso_003, "WARN"),
    "LSO-004": (lso_004, "WARN"),
    "IDX-001": (idx_001, "CRITICAL"),
    "IDX-002": (idx_002, "CRITICAL"),
    "IDX-003": (idx_003, "ERROR"),
    "IDX-004": (idx_004, "WARN"),
    "IDX-005": (idx_005, "WARN"),
    "IDX-006": (idx_006, "ERROR"),
    "IDX-007": (idx_007, "ERROR"),
    "IDX-008": (idx_008, "INFO"),
    "SNP-001": (snp_001, "WARN"),
    "SNP-002": (snp_002, "WARN"),
    "SNP-003": (snp_003, "ERROR"),
    "SNP-004": (snp_004, "ERROR"),
    "SNP-005": (snp_005, "INFO"),
    "SEG-001": (file_problem(PROBLEM_FILE_NAME), "WARN"),
    "SEG-004": (file_problem(PROBLEM_OFFSET_INDEX), "WARN"),
    "SEG-005": (file_problem(PROBLEM_TIME_INDEX), "WARN"),
    "SEG-006": (file_problem(PROBLEM_PARTITION_METADATA), "WARN"),
    "LEP-001": (file_problem(PROBLEM_LEADER_EPOCH_CHECKPOINT), "ERROR"),
    "LEP-002": (lep_002, "ERROR"),
    "LEP-003": (lep_003, "WARN"),
    "FMT-001": (fmt_001, "WARN"),
    "FMT-002": (fmt_002, "ERROR"),
    "FMT-003": (fmt_003, "ERROR"),
    "FMT-004": (fmt_004, "ERROR"),
    "FMT-005": (fmt_005, "ERROR"),
    "FMT-006": (fmt_006, "ERROR"),
    "FMT-007": (fmt_007, "ERROR"),
    "FMT-008": (fmt_008, "WARN"),
    "FMT-009": (fmt_009, "ERROR"),
    "FMT-010": (fmt_010, "ERROR"),
    "FMT-011": (fmt_011, "ERROR"),
    "FMT-012": (fmt_012, "WARN"),
    "FMT-013": (fmt_013, "ERROR"),
    "TSL-001": (tsl_001, "WARN"),
    "TSL-002": (tsl_002, "ERROR"),
    "TSL-003": (tsl_003, "ERROR"),
    "TSL-004": (tsl_004, "ERROR"),
    "TSL-005": (tsl_005, "ERROR"),
    "TSL-006": (tsl_006, "ERROR"),
    "TSL-007": (tsl_007, "ERROR"),
    "TSL-008": (tsl_008, "ERROR"),
    "TSL-009": (tsl_009, "ERROR"),
    "TSL-010": (tsl_010, "WARN"),
    "TSL-011": (tsl_011, "WARN"),
    "TSL-012": (tsl_012, "WARN"),
    "TSL-013": (tsl_013, "WARN"),
    "TSL-014": (tsl_014, "CRITICAL"),
    "TSL-015": (tsl_015, "WARN"),
    "XTX-001": (xtx_001, "CRITICAL"),
    "XTX-002": (xtx_002, "ERROR"),
    "XTX-003": (xtx_003, "WARN"),
    "XTX-004": (xtx_004, "ERROR"),
    "XTX-005": (xtx_005, "ERROR"),
    "XTX-006": (xtx_006, "ERROR"),
    "XTX-007": (xtx_007, "ERROR"),
    "XTX-008": (xtx_008, "ERROR"),
    "XTX-009": (xtx_009, "ERROR"),
    "XTX-010": (xtx_010, "INFO"),
    "REP-001": (rep_001, "ERROR"),
    "REP-002": (rep_002, "WARN"),
    "REP-003": (rep_003, "INFO"),
    "LIV-001": (liv_001, "WARN"),
    "LIV-002": (liv_002, "ERROR"),
    "LIV-003": (liv_003, "ERROR"),
    "XTX-011": (xtx_011, "CRITICAL"),
    "SEG-002": (seg_002, "WARN"),
    "SEG-003": (seg_003, "ERROR"),
}


def seq_001_cleaned_away(log, _):
    """The cleaner removed the batches of sequences 3-4, superseded by later records: a compacted partition, known by
    its cleaner checkpoint alone, and the gap lies below it."""
    log.data(1, 0, 0, 3)
    log.skip(2)
    log.data(1, 0, 5, 1)
    log.data(1, 0, 6, 1)
    log.cleaner_checkpoint(log.next_offset)


def seq_001_above_the_cleaner_checkpoint(log, _):
    """A gap in the part of a compacted partition the cleaner has not reached yet is a gap."""
    log.cleaner_checkpoint(3)
    log.data(1, 0, 0, 3)
    log.data(1, 0, 3, 1)
    log.data(1, 0, 6, 1)


def snp_003_cleaned_away(log, _):
    """The snapshot was written before the cleaner removed producer 1's only batch (superseded by producer 2's
    records): a compacted partition, known by its cleaner checkpoint."""
    log.data(2, 0, 0, 1)
    log.skip(1)
    log.data(2, 0, 1, 1)
    log.snapshot(3, 1, 0, last_sequence=0, last_offset=1, offset_delta=0)
    log.snapshot(3, 2, 0, last_sequence=1, last_offset=2, offset_delta=0)
    log.cleaner_checkpoint(3)


def idx_008_entry_kept(log, _):
    """The cleaner pass that removed producer 1's aborted batches (offsets 1-2) kept their ABORT marker and wrote
    its entry to the cleaned segment's index: a compacted partition, known by its cleaner checkpoint."""
    log.data(2, 0, 0, 1)
    log.skip(2)
    marker = log.marker(1, 0, commit=False)
    log.index_entry(1, 1, marker["base_offset"], marker["base_offset"] + 1)
    log.cleaner_checkpoint(log.next_offset)


def idx_003_entry_of_an_empty_abort(log, _):
    """The same entry on a partition nothing says is compacted: no batch of the transaction it names is there."""
    log.data(2, 0, 0, 1)
    log.skip(2)
    marker = log.marker(1, 0, commit=False)
    log.index_entry(1, 1, marker["base_offset"], marker["base_offset"] + 1)


def lep_003_cleaned_away(log, _):
    """Epoch 1 began at offset 1, whose batch the cleaner removed: a compacted partition, known by its cleaner
    checkpoint."""
    log.data(1, 0, 0, 1)
    log.leader_epoch = 1
    log.skip(1)
    log.data(1, 0, 2, 1)
    log.epoch_checkpoint((0, 0), (1, 1))
    log.cleaner_checkpoint(3)


def fmt_004_corrupt_follower_copy(log, _):
    """Broker 1's copy of the second batch has a flipped byte; broker 0's copy, the audited one, is intact."""
    batches = three_batches(log)
    copy_on_broker(log, 1, [batches[0], {**batches[1], "crc_valid": False}, batches[2]])


def txn_003_three_empty_markers(log, _):
    """Three markers of producer 1 that close nothing, and one of producer 2: normal behaviour, noted once per
    producer."""
    for _ in range(3):
        log.marker(1, 0)
    log.marker(2, 0)


def snp_003_window_cleared_by_a_v2_marker(log, _):
    """A V2 commit bumps the epoch and the broker clears the producer's batch window (spec §2.7): the snapshot
    after it rightly holds no last batch."""
    log.data(1, 0, 0, 2, txn=True)
    log.marker(1, 1)
    log.snapshot(3, 1, 1, coordinator_epoch=0)


def snp_003_window_cleared_by_a_fence(log, _):
    """A V1 abort by the coordinator at a bumped epoch (a fence or timeout) clears the window as well."""
    log.data(1, 0, 0, 2, txn=True)
    log.marker(1, 1, commit=False)
    log.snapshot(3, 1, 1, coordinator_epoch=0)


def xtx_008_v1_client_after_a_tv2_fence(log, _):
    """As a 4.x broker writes it: a new instance fences a V1 client's transaction, and the coordinator writes the
    abort and the Empty after it as TV2 records; the V1 client then commits at the bumped epoch the V1 way (marker
    at the data's epoch), under an Ongoing record of its own version."""
    pid = coordinator_pid(28, True, k=1)
    tp = f"{log.topic}-{log.partition}"
    log.txn_state("b", EMPTY, pid, 0)
    start = log.txn_state("b", ONGOING, pid, 0, (tp,))["start_timestamp_ms"]
    log.data(pid, 0, 0, 1, txn=True)
    log.txn_state("b", PREPARE_ABORT, pid, 1, (tp,), start=start, **TV2)
    log.marker(pid, 1, commit=False)
    log.txn_state("b", COMPLETE_ABORT, pid, 1, start=start, **TV2)
    log.txn_state("b", EMPTY, pid, 2, **TV2)
    start = log.txn_state("b", ONGOING, pid, 2, (tp,))["start_timestamp_ms"]
    log.data(pid, 2, 0, 1, txn=True)
    log.txn_state("b", PREPARE_COMMIT, pid, 2, (tp,), start=start)
    log.marker(pid, 2)
    log.txn_state("b", COMPLETE_COMMIT, pid, 2, start=start)


def xtx_006_v1_client_with_tv2_fence_records(log, _):
    """A 4.x coordinator fences a V1 client's transaction and writes its records as TV2; the abort marker carries
    the data's epoch instead of the fence's. The producer id's TV2 records do not make the transaction a TV2 one
    (XTX-008 stays silent), so the marker's epoch is judged as V1's: XTX-006."""
    pid = coordinator_pid(26, False, k=1)
    tp = f"{log.topic}-{log.partition}"
    log.txn_state("b", EMPTY, pid, 0)
    start = log.txn_state("b", ONGOING, pid, 0, (tp,))["start_timestamp_ms"]
    log.data(pid, 0, 0, 1, txn=True)
    log.txn_state("b", PREPARE_ABORT, pid, 1, (tp,), start=start, **TV2)
    log.marker(pid, 0, commit=False)
    log.txn_state("b", COMPLETE_ABORT, pid, 1, start=start, **TV2)


def tv2_transaction(log, pid=1):
    """A TV2 commit (marker one above its data, which makes the producer TV2) and the next transaction's data."""
    log.data(pid, 5, 0, 1, txn=True)
    log.marker(pid, 6, commit=True)
    log.data(pid, 6, 0, 1, txn=True)


def epo_004_tv2_fence_by_a_new_instance(log, _):
    """Every TV2 abort is one above its data (KAFKA-19367); a new instance's data two above shows the fence."""
    tv2_transaction(log)
    log.marker(1, 7, commit=False)
    log.data(1, 8, 0, 1, txn=True)


def epo_004_tv2_client_abort(log, _):
    """The producer aborts its own TV2 transaction and goes on at the bumped epoch."""
    tv2_transaction(log)
    log.marker(1, 7, commit=False)
    log.data(1, 7, 0, 1, txn=True)


def epo_004_tv2_double_bump(log, _):
    """A 4.0.0 coordinator's TV2 fence or timeout abort bumped the epoch twice (KAFKA-19367)."""
    tv2_transaction(log)
    log.marker(1, 8, commit=False)


def epo_005_tv2_three_above(log, _):
    tv2_transaction(log)
    log.marker(1, 9, commit=False)


def epo_006_tv2_producer(log, _):
    """A TV2 producer's transactions elsewhere bump its epoch: a skip here is normal."""
    tv2_transaction(log)
    log.marker(1, 7, commit=True)
    log.data(1, 10, 0, 1, txn=True)
    log.marker(1, 11, commit=True)


def tv2_abort_records(log, pid, timed_out):
    """Data of a TV2 transaction, then its records up to CompleteAbort one epoch above. The records of a scenario
    follow each other without data between them (the markers and later data come after them): the coordinator's
    partition holds nothing else, and a gap in its offsets would read as compaction."""
    tp = f"{log.topic}-{log.partition}"
    log.data(pid, 0, 0, 1, txn=True)
    log.txn_state("a", EMPTY, pid, 0, **TV2)
    start = log.txn_state("a", ONGOING, pid, 0, (tp,), **TV2)["start_timestamp_ms"]
    log.clock += 120_000 if timed_out else 1_000
    log.txn_state("a", PREPARE_ABORT, pid, 1, (tp,), start=start, **TV2)
    log.txn_state("a", COMPLETE_ABORT, pid, 1, start=start, **TV2)
    return tp


def tv2_commit_records(log, pid, epoch, tp):
    start = log.txn_state("a", ONGOING, pid, epoch, (tp,), **TV2)["start_timestamp_ms"]
    log.txn_state("a", PREPARE_COMMIT, pid, epoch + 1, (tp,), start=start, **TV2)
    log.txn_state("a", COMPLETE_COMMIT, pid, epoch + 1, start=start, **TV2)


def tv2_abort_then_commit(log, pid, next_epoch):
    """The ABORT marker one above the data, then a committed transaction's data at `next_epoch`."""
    log.marker(pid, 1, commit=False)
    log.data(pid, next_epoch, 0, 1, txn=True)
    log.marker(pid, next_epoch + 1)


def tv2_timeout(log, _):
    """The coordinator aborts a timed-out TV2 transaction at one above its data; the same producer goes on there
    (its EndTxn(ABORT) answered with the bumped epoch)."""
    pid = coordinator_pid(30, False, k=2)
    tp = tv2_abort_records(log, pid, timed_out=True)
    tv2_commit_records(log, pid, 1, tp)
    tv2_abort_then_commit(log, pid, 1)


def tv2_client_abort_with_records(log, _):
    pid = coordinator_pid(30, True, k=2)
    tp = tv2_abort_records(log, pid, timed_out=False)
    tv2_commit_records(log, pid, 1, tp)
    tv2_abort_then_commit(log, pid, 1)


def tv2_fence_without_data_after(log, _):
    """A new instance fences the TV2 transaction (its InitProducerId's retry writes Empty two above the data)
    and writes nowhere on this partition: only the coordinator's records show the fence."""
    pid = coordinator_pid(30, False, k=3)
    tv2_abort_records(log, pid, timed_out=False)
    log.txn_state("a", EMPTY, pid, 2, **TV2)
    log.marker(pid, 1, commit=False)


def tv2_fence_chain(log, _):
    """As a 4.1 broker writes a TV2 fence by a new instance: PrepareAbort and the marker one above the data, Empty
    two above, and the new instance's transaction there."""
    pid = coordinator_pid(30, False, k=4)
    tp = tv2_abort_records(log, pid, timed_out=False)
    log.txn_state("a", EMPTY, pid, 2, **TV2)
    tv2_commit_records(log, pid, 2, tp)
    tv2_abort_then_commit(log, pid, 2)


def liv_002_last_sequence(log, miss):
    log.data(1, 0, 0, 3)
    log.live_producer(1, 0, 5)


# More cases of a rule, fired only: (name, rule code) -> (builder, severity)
VARIANTS = {
    ("last sequence ahead", "LIV-002"): (liv_002_last_sequence, "WARN"),
    ("unreadable partition", "FMT-001"): (fmt_001_unreadable_partition, "ERROR"),
    ("mostly unreadable partition", "FMT-001"): (fmt_001_mostly_unreadable_partition, "ERROR"),
    ("markers pending", "XTX-002"): (xtx_002_pending, "WARN"),
    ("V1 client with TV2 fence records", "XTX-006"): (xtx_006_v1_client_with_tv2_fence_records, "ERROR"),
    ("leftover files", "SEG-001"): (file_problem(PROBLEM_LEFTOVER_FILES), "INFO"),
    ("cleaned away", "SEQ-001"): (seq_001_cleaned_away, "INFO"),
    ("above the cleaner checkpoint", "SEQ-001"): (seq_001_above_the_cleaner_checkpoint, "ERROR"),
    ("cleaned away", "SNP-003"): (snp_003_cleaned_away, "INFO"),
    ("cleaned away", "LEP-003"): (lep_003_cleaned_away, "INFO"),
    ("entry kept", "IDX-008"): (idx_008_entry_kept, "INFO"),
    ("entry of an empty abort", "IDX-003"): (idx_003_entry_of_an_empty_abort, "ERROR"),
    ("corrupt follower copy", "FMT-004"): (fmt_004_corrupt_follower_copy, "ERROR"),
    ("TV2 fence by a new instance", "EPO-004"): (epo_004_tv2_fence_by_a_new_instance, "INFO"),
    ("TV2 double bump", "EPO-004"): (epo_004_tv2_double_bump, "INFO"),
    ("TV2 marker three above", "EPO-005"): (epo_005_tv2_three_above, "WARN"),
    ("TV2 timeout", "EPO-004"): (tv2_timeout, "INFO"),
    ("TV2 timeout", "XTX-010"): (tv2_timeout, "INFO"),
    ("TV2 fence without data after", "EPO-004"): (tv2_fence_without_data_after, "INFO"),
    ("TV2 fence chain", "EPO-004"): (tv2_fence_chain, "INFO"),
}
# Logs of normal behaviour that repeats, whose folded findings a test reads: (name, rule code) -> builder
FOLDED = {
    ("three empty markers", "TXN-003"): txn_003_three_empty_markers,
}


# More correct logs a rule must stay silent on: (name, rule code) -> builder
def liv_002_in_agreement(log, miss):
    """A transactional producer with an open transaction, as the leader holds it."""
    log.data(1, 0, 0, 3, txn=True)
    log.live_producer(1, 0, 2, txn_start=0)


SILENT_VARIANTS = {
    ("leader in agreement", "LIV-002"): liv_002_in_agreement,
    ("window cleared by a V2 marker", "SNP-003"): snp_003_window_cleared_by_a_v2_marker,
    ("window cleared by a fence", "SNP-003"): snp_003_window_cleared_by_a_fence,
    ("next transaction open", "XTX-002"): xtx_002_next_transaction_open,
    ("V1 client after a TV2 fence", "XTX-008"): xtx_008_v1_client_after_a_tv2_fence,
    ("TV2 client abort", "EPO-004"): epo_004_tv2_client_abort,
    ("TV2 double bump", "EPO-005"): epo_004_tv2_double_bump,
    ("TV2 marker three above", "EPO-004"): epo_005_tv2_three_above,
    ("TV2 producer", "EPO-006"): epo_006_tv2_producer,
    ("TV2 client abort with records", "EPO-004"): tv2_client_abort_with_records,
    ("TV2 client abort with records", "XTX-010"): tv2_client_abort_with_records,
    ("TV2 fence chain", "TSL-007"): tv2_fence_chain,
    ("TV2 fence chain", "XTX-006"): tv2_fence_chain,
    ("TV2 fence chain", "XTX-008"): tv2_fence_chain,
    ("TV2 fence chain", "XTX-004"): tv2_fence_chain,
    ("TV2 timeout", "XTX-004"): tv2_timeout,
    ("entry kept", "IDX-003"): idx_008_entry_kept,
}


@pytest.fixture(scope="module")
def audited(spark, scratch):
    """Findings per (code, near miss), from one audit over every scenario log."""
    side_tables = {  # run_audit argument: (PartitionLog attribute, schema)
        "txn_index": ("index_rows", TXN_INDEX),
        "producer_snapshots": ("snapshot_rows", PRODUCER_SNAPSHOTS),
        "file_problems": ("problem_rows", FILE_PROBLEMS),
        "checkpoints": ("checkpoint_rows", CHECKPOINTS),
        "leader_epochs": ("leader_epoch_rows", LEADER_EPOCHS),
        "transaction_log": ("transaction_log_rows", TRANSACTION_LOG),
        "offset_commits": ("offset_commit_rows", OFFSET_COMMITS),
        "live_producers": ("live_rows", LIVE_PRODUCERS),
    }
    rows, side_rows, topics = [], {table: [] for table in side_tables}, {}
    for code, (build, _) in SCENARIOS.items():
        for miss in (False, True):
            log = PartitionLog(topic=f"{code.lower()}-{'miss' if miss else 'fire'}", clock=T0)
            build(log, miss)
            rows.extend(log.rows)
            for table, (attribute, _) in side_tables.items():
                side_rows[table].extend(getattr(log, attribute))
            topics[code, miss] = log.topic
    variants = {key: build for key, (build, _) in VARIANTS.items()} | SILENT_VARIANTS | FOLDED
    for (name, code), build in variants.items():
        log = PartitionLog(topic=f"{code.lower()}-{name.replace(' ', '-')}", clock=T0)
        build(log, False)
        rows.extend(log.rows)
        for table, (attribute, _) in side_tables.items():
            side_rows[table].extend(getattr(log, attribute))
        topics[name, code] = log.topic
    settings = AuditSettings(compacted_topics=["compacted-*"])
    result = run_audit(
        spark.createDataFrame(rows, BATCHES),
        settings,
        "test-run",
        scratch("rules"),
        **{table: spark.createDataFrame(side_rows[table], schema) for table, (_, schema) in side_tables.items()},
    )
    by_topic: dict[str, list] = {}
    for row in result.findings.collect():
        by_topic.setdefault(row.topic, []).append(row)
    summaries = {row.topic: row for row in result.partition_summary.collect()}
    producers = {(row.topic, row.producer_id): row for row in result.producer_state.collect()}
    result.release()
    findings = {key: by_topic.get(topic, []) for key, topic in topics.items()}
    states = {("producer_state", *key): producers.get((topic, 1)) for key, topic in topics.items()}
    return findings | states | {("summary", *key): summaries.get(topic) for key, topic in topics.items()}


# Rules whose scenarios need more than batch rows (the record payloads of a deep ingest): the file named fires
# each and keeps it silent on near misses.
TESTED_ELSEWHERE = {"PAY-001": "test_payloads.py", "PAY-002": "test_payloads.py"}


def test_every_registered_rule_has_a_scenario():
    assert set(SCENARIOS) | set(TESTED_ELSEWHERE) == set(RULES)
    assert not set(SCENARIOS) & set(TESTED_ELSEWHERE)
    for code, file in TESTED_ELSEWHERE.items():
        assert code in (Path(__file__).parent / file).read_text()


@pytest.mark.parametrize("code", sorted(SCENARIOS))
def test_rule_fires(code, audited):
    _, severity = SCENARIOS[code]
    fired = [f for f in audited[code, False] if f.rule_code == code]
    assert fired, f"{code} did not fire; found {[f.rule_code for f in audited[code, False]]}"
    assert fired[0].severity == severity
    assert fired[0].rule_name == RULES[code].name
    assert fired[0].message


@pytest.mark.parametrize("name, code", sorted(VARIANTS))
def test_rule_variant_fires(name, code, audited):
    _, severity = VARIANTS[name, code]
    assert [f.severity for f in audited[name, code] if f.rule_code == code] == [severity]


@pytest.mark.parametrize("code", sorted(SCENARIOS))
def test_rule_stays_silent_on_near_miss(code, audited):
    assert [f for f in audited[code, True] if f.rule_code == code] == []


@pytest.mark.parametrize("name, code", sorted(SILENT_VARIANTS))
def test_rule_stays_silent_on_variant(name, code, audited):
    assert [f for f in audited[name, code] if f.rule_code == code] == []


@pytest.mark.parametrize("name", ["window cleared by a V2 marker", "window cleared by a fence"])
def test_producer_state_has_no_last_sequence_after_a_marker_changed_the_epoch(name, audited):
    """As DescribeProducers answers: the marker's epoch, and -1 for the cleared window's last sequence."""
    state = audited["producer_state", name, "SNP-003"]
    assert (state.producer_epoch, state.last_sequence) == (1, -1)


def test_normal_behaviour_is_noted_once_per_producer(audited):
    """TXN-003 is normal: its INFO findings come once per (partition, producer), the first with the count."""
    found = sorted(
        (f.producer_id, f.base_offset, f.message, f.evidence["occurrences"], f.evidence["last_occurrence_offset"])
        for f in audited["three empty markers", "TXN-003"]
        if f.rule_code == "TXN-003"
    )
    assert [row[0:2] + row[3:] for row in found] == [(1, 0, "3", "2"), (2, 3, "1", "3")]
    assert found[0][2].endswith("(first of 3 on this partition)") and "first of" not in found[1][2]


def test_one_finding_per_cause(audited):
    """A duplicate is not also out of order; an overlap is not also a gap (spec §6.0a.2)."""
    assert sorted(f.rule_code for f in audited["SEQ-004", False]) == ["SEQ-004"]
    assert sorted(f.rule_code for f in audited["SEQ-005", False]) == ["SEQ-005"]


def test_wraparound_is_in_sequence(audited):
    assert "SEQ-001" not in {f.rule_code for f in audited["SEQ-008", False]}


def test_clean_transactional_logs_leave_only_informational_findings(audited):
    """The near misses of the transaction and index rules are correct logs: nothing above INFO."""
    for code in ("TXN-003", "EPO-004", "IDX-001", "IDX-002", "IDX-004", "IDX-006", "SNP-003", "SNP-004", "SNP-005"):
        assert [f.rule_code for f in audited[code, True] if f.severity != "INFO"] == [], code


def test_epoch_checkpoint_disagreements_are_each_reported(audited):
    messages = sorted(f.message for f in audited["LEP-003", False] if f.rule_code == "LEP-003")
    assert messages == [
        "batches of leader epoch 2 from offset 3, which leader-epoch-checkpoint does not list",
        "leader-epoch-checkpoint says epoch 1 starts at offset 1; its first batch starts at 2",
    ]


def test_valid_coordinator_histories_raise_nothing(audited):
    """A TV2 commit-then-abort chain, a new timeout at InitProducerId, and a tombstone after expiry."""
    for code in ("TSL-007", "TSL-009", "TSL-013"):
        assert [f.rule_code for f in audited[code, True] if f.rule_code.startswith("TSL")] == [], code


def test_agreeing_markers_raise_no_cross_check(audited):
    """A COMMIT marker after PrepareCommit, with the coordinator epoch of the Prepare record's batch."""
    for code in ("XTX-001", "XTX-002", "XTX-006", "XTX-007", "XTX-008"):
        assert [f.rule_code for f in audited[code, True] if f.rule_code.startswith(("TSL", "XTX"))] == [], code


def test_a_marker_at_another_epoch_is_reported_once(audited):
    """XTX-006 and XTX-008 name the marker's epoch; it is not also a marker without a decision (XTX-003)."""
    for code in ("XTX-006", "XTX-008"):
        assert sorted(f.rule_code for f in audited[code, False] if f.rule_code.startswith("XTX")) == [code], code


def test_a_tv2_double_bump_is_reported_as_the_4_0_0_coordinators(audited):
    (fence,) = [f for f in audited["TV2 double bump", "EPO-004"] if f.rule_code == "EPO-004"]
    assert "KAFKA-19367" in fence.message


def test_the_coordinator_records_tell_a_tv2_fence_or_timeout_at_the_marker(audited):
    """Reported at the ABORT marker, with what showed it: the partition's next data or the coordinator's records."""
    reasons = {
        "TV2 fence by a new instance": "the next data is at epoch 8",
        "TV2 timeout": "timed out, as the coordinator's records show",
        "TV2 fence without data after": "the coordinator's Empty record is one epoch above the marker",
        "TV2 fence chain": "the next data is at epoch 2",
    }
    for name, reason in reasons.items():
        (fence,) = [f for f in audited[name, "EPO-004"] if f.rule_code == "EPO-004"]
        assert reason in fence.message, (name, fence.message)
        assert fence.evidence["marker_epoch"] == str(int(fence.evidence["transaction_epoch"]) + 1)


def test_hanging_transaction_carries_abort_command(audited):
    hanging = next(f for f in audited["LSO-002", False] if f.rule_code == "LSO-002")
    assert hanging.evidence["abort_command"].endswith(f"--topic {hanging.topic} --partition 0 --start-offset 0")


@pytest.mark.parametrize(
    ("scenario", "uncommitted", "committed"),
    [
        (("IDX-004", True), 2, 1),  # one aborted record of two, nothing open
        (("LSO-001", False), 1, 0),  # an open transaction at the start holds everything back
        (("SEQ-004", False), 9, 9),  # idempotent data only: a duplicate is visible to both
    ],
)
def test_visible_record_counts(audited, scenario, uncommitted, committed):
    summary = audited["summary", *scenario]
    assert (summary.read_uncommitted_records, summary.read_committed_records) == (uncommitted, committed)
