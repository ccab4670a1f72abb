"""Build `batches` rows for one partition the way a broker would have written them, for rule tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas.batches import BATCHES, STATUS_OK
from schemas.file_problems import FILE_PROBLEMS
from schemas.leader_epochs import LEADER_EPOCHS
from schemas.live_producers import LIVE_PRODUCERS
from schemas.offset_commits import OFFSET_COMMITS
from schemas.producer_snapshots import PRODUCER_SNAPSHOTS
from schemas.transaction_log import TRANSACTION_LOG, TRANSACTION_STATES
from schemas.txn_index import TXN_INDEX

INT32_MAX = 2_147_483_647
T0 = 1_767_225_600_000


def _last_sequence(base: int, delta: int) -> int:
    if base < 0:
        return -1
    return delta - (INT32_MAX - base) - 1 if base > INT32_MAX - delta else base + delta


@dataclass
class PartitionLog:
    """Appends batches at consecutive offsets; every call returns the row it added.

    Like a leader, it tracks open transactions and writes the `.txnindex` entry of every ABORT that closes
    one (with the LSO of spec §6.0 step 4), unless told not to.
    """

    topic: str = "t"
    partition: int = 0
    next_offset: int = 0
    clock: int = T0
    tick_ms: int = 1000
    leader_epoch: int = 0
    broker_id: int = 0
    cluster_id: str = ""
    rows: list[dict] = field(default_factory=list)
    index_rows: list[dict] = field(default_factory=list)
    snapshot_rows: list[dict] = field(default_factory=list)
    problem_rows: list[dict] = field(default_factory=list)
    checkpoint_rows: list[dict] = field(default_factory=list)
    leader_epoch_rows: list[dict] = field(default_factory=list)
    transaction_log_rows: list[dict] = field(default_factory=list)
    offset_commit_rows: list[dict] = field(default_factory=list)
    live_rows: list[dict] = field(default_factory=list)
    open_txns: dict[int, int] = field(default_factory=dict)

    def _row(self, **values) -> dict:
        row = {name: None for name in BATCHES.fieldNames()}
        row.update(
            topic=self.topic,
            partition=self.partition,
            partition_leader_epoch=self.leader_epoch,
            magic=2,
            compression=0,
            timestamp_type=0,
            has_delete_horizon=False,
            crc=0,
            crc_valid=True,
            entry_status=STATUS_OK,
            segment_base_offset=0,
            source_file=f"{self.topic}-{self.partition}/00000000000000000000.log",
            source_format="segment",
            broker_id=self.broker_id,
            cluster_id=self.cluster_id,
        )
        row.update(values)
        row["position"] = sum(r["size_bytes"] for r in self.rows)
        self.rows.append(row)
        return row

    def data(self, pid: int, epoch: int, seq: int, count: int = 1, txn: bool = False, at: int | None = None) -> dict:
        self.clock = at if at is not None else self.clock + self.tick_ms
        base = self.next_offset
        self.next_offset += count
        if txn:
            self.open_txns.setdefault(pid, base)
        return self._row(
            base_offset=base,
            last_offset=base + count - 1,
            last_offset_delta=count - 1,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            last_sequence=_last_sequence(seq, count - 1),
            is_transactional=txn,
            is_control=False,
            record_count=count,
            base_timestamp=self.clock,
            max_timestamp=self.clock,
            attributes=0x10 if txn else 0,
            batch_length=49 + 20 * count,
            size_bytes=61 + 20 * count,
        )

    def marker(
        self,
        pid: int,
        epoch: int,
        commit: bool = True,
        coordinator_epoch: int = 0,
        at: int | None = None,
        index: bool = True,
    ) -> dict:
        self.clock = at if at is not None else self.clock + self.tick_ms
        offset = self.next_offset
        self.next_offset += 1
        first = self.open_txns.pop(pid, None)
        if not commit and first is not None and index:
            self.index_entry(pid, first, offset, min(self.open_txns.values(), default=offset + 1))
        return self._row(
            base_offset=offset,
            last_offset=offset,
            last_offset_delta=0,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=-1,
            last_sequence=-1,
            is_transactional=True,
            is_control=True,
            control_type=1 if commit else 0,
            coordinator_epoch=coordinator_epoch,
            record_count=1,
            base_timestamp=self.clock,
            max_timestamp=self.clock,
            attributes=0x30,
            batch_length=66,
            size_bytes=78,
        )

    def index_entry(
        self, pid: int, first: int, last: int, lso: int, version: int = 0, segment_base_offset: int = 0
    ) -> dict:
        row = {name: None for name in TXN_INDEX.fieldNames()}
        row.update(
            topic=self.topic,
            partition=self.partition,
            producer_id=pid,
            first_offset=first,
            last_offset=last,
            last_stable_offset=lso,
            version=version,
            entry_status="ok",
            segment_base_offset=segment_base_offset,
            position=34 * sum(1 for r in self.index_rows if r["segment_base_offset"] == segment_base_offset),
            source_file=f"{self.topic}-{self.partition}/{segment_base_offset:020d}.txnindex",
            source_format="segment",
            broker_id=self.broker_id,
            cluster_id=self.cluster_id,
        )
        self.index_rows.append(row)
        return row

    def snapshot(
        self,
        offset: int,
        pid: int | None,
        epoch: int | None = None,
        last_sequence: int = -1,
        last_offset: int = -1,
        offset_delta: int = 0,
        coordinator_epoch: int = -1,
        txn_first_offset: int | None = None,
        status: str = "ok",
    ) -> dict:
        """A row of `<offset>.snapshot` as the partition-file reader gives it."""
        row = {name: None for name in PRODUCER_SNAPSHOTS.fieldNames()}
        row.update(
            topic=self.topic,
            partition=self.partition,
            snapshot_offset=offset,
            producer_id=pid,
            producer_epoch=epoch,
            last_sequence=last_sequence,
            last_offset=last_offset,
            offset_delta=offset_delta,
            timestamp=self.clock,
            coordinator_epoch=coordinator_epoch,
            current_txn_first_offset=txn_first_offset,
            version=1,
            crc_valid=status == "ok",
            file_status=status,
            source_file=f"{self.topic}-{self.partition}/{offset:020d}.snapshot",
            source_format="segment",
            broker_id=self.broker_id,
            cluster_id=self.cluster_id,
        )
        self.snapshot_rows.append(row)
        return row

    def live_producer(
        self,
        pid: int | None,
        epoch: int | None = None,
        last_sequence: int | None = None,
        txn_start: int | None = None,
        *,
        age_ms: int = 1000,
        settled: bool = True,
        last_timestamp: int | None = None,
    ) -> dict:
        """A row of `live_producers`: what the leader reported `age_ms` after the last batch, with the read ending
        at the log's end; `pid` None: the leader reported no producer for the partition."""
        row = {name: None for name in LIVE_PRODUCERS.fieldNames()}
        if pid is not None:
            row.update(
                producer_id=pid,
                producer_epoch=epoch,
                last_sequence=last_sequence,
                last_timestamp=self.clock if last_timestamp is None else last_timestamp,
                coordinator_epoch=-1,
                current_txn_start_offset=txn_start,
            )
        row.update(
            topic=self.topic,
            partition=self.partition,
            described_at=self.clock + age_ms,
            log_end_offset=self.next_offset,
            read_end_offset=self.next_offset,
            settled=settled,
            source="kafka://127.0.0.1:9092",
            broker_id=self.broker_id,
            cluster_id=self.cluster_id,
        )
        self.live_rows.append(row)
        return row

    def file_problem(self, kind: str, message: str) -> dict:
        row = {
            "kind": kind,
            "topic": self.topic,
            "partition": self.partition,
            "source_file": f"{self.topic}-{self.partition}/leader-epoch-checkpoint",
            "position": None,
            "message": message,
            "broker_id": self.broker_id,
            "cluster_id": self.cluster_id,
        }
        assert set(row) == set(FILE_PROBLEMS.fieldNames())
        self.problem_rows.append(row)
        return row

    def log_start_checkpoint(self, offset: int) -> dict:
        return self.checkpoint("log-start-offset-checkpoint", offset)

    def cleaner_checkpoint(self, offset: int) -> dict:
        """The log dir's cleaner-offset-checkpoint lists the partition: the cleaner compacted it up to `offset`."""
        return self.checkpoint("cleaner-offset-checkpoint", offset)

    def checkpoint(self, kind: str, offset: int) -> dict:
        row = {
            "kind": kind,
            "topic": self.topic,
            "partition": self.partition,
            "offset": offset,
            "problem": None,
            "source_file": kind,
            "broker_id": self.broker_id,
            "cluster_id": self.cluster_id,
        }
        self.checkpoint_rows.append(row)
        return row

    def epoch_checkpoint(self, *entries: tuple[int, int]) -> list[dict]:
        """The `leader-epoch-checkpoint` rows of (epoch, start offset) entries, in file order."""
        rows = [
            {
                "topic": self.topic,
                "partition": self.partition,
                "epoch": epoch,
                "start_offset": start_offset,
                "line": line,
                "problem": None,
                "source_file": f"{self.topic}-{self.partition}/leader-epoch-checkpoint",
                "broker_id": self.broker_id,
                "cluster_id": self.cluster_id,
            }
            for line, (epoch, start_offset) in enumerate(entries, start=3)
        ]
        assert all(set(row) == set(LEADER_EPOCHS.fieldNames()) for row in rows)
        self.leader_epoch_rows.extend(rows)
        return rows

    def txn_state(
        self,
        transactional_id: str,
        state: int | None,
        pid: int,
        epoch: int,
        partitions: tuple[str, ...] = (),
        timeout_ms: int = 60_000,
        start: int | None = None,
        **values,
    ) -> dict:
        """A `__transaction_state` record (in its own coordinator batch) as the coordinator writes it.

        `partitions` are `topic-partition` names; `start` defaults to -1 for Empty and to the record time
        otherwise; `state=None` writes a tombstone. Other columns can be overridden through `values`.
        """
        batch = self._row(
            base_offset=self.next_offset,
            last_offset=self.next_offset,
            last_offset_delta=0,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            last_sequence=-1,
            is_transactional=False,
            is_control=False,
            record_count=1,
            base_timestamp=self.clock + self.tick_ms,
            max_timestamp=self.clock + self.tick_ms,
            attributes=0,
            batch_length=120,
            size_bytes=132,
        )
        self.clock += self.tick_ms
        self.next_offset += 1
        by_topic: dict[str, list[int]] = {}
        for name in partitions:
            topic, _, number = name.rpartition("-")
            by_topic.setdefault(topic, []).append(int(number))
        tombstone = state is None
        row = {name: None for name in TRANSACTION_LOG.fieldNames()}
        row.update(
            topic=self.topic,
            partition=self.partition,
            transactional_id=transactional_id,
            key_version=0,
            is_tombstone=tombstone,
            record_offset=batch["base_offset"],
            record_timestamp=self.clock,
            batch_base_offset=batch["base_offset"],
            batch_timestamp=self.clock,
            partition_leader_epoch=self.leader_epoch,
            batch_is_transactional=False,
            batch_compression=0,
            batch_producer_id=-1,
            segment_base_offset=0,
            position=batch["position"],
            source_file=batch["source_file"],
            source_format="segment",
            broker_id=self.broker_id,
            cluster_id=self.cluster_id,
        )
        if not tombstone:
            row.update(
                producer_id=pid,
                producer_epoch=epoch,
                state=state,
                state_name=TRANSACTION_STATES[state] if 0 <= state < len(TRANSACTION_STATES) else None,
                value_version=0,
                transaction_timeout_ms=timeout_ms,
                partitions=[{"topic": t, "partitions": p} for t, p in by_topic.items()] if state != 0 else None,
                last_update_timestamp_ms=self.clock,
                start_timestamp_ms=start if start is not None else (-1 if state == 0 else self.clock),
            )
        row.update(values)
        self.transaction_log_rows.append(row)
        return row

    def offset_commit(self, pid: int, epoch: int, group: str, committed: str, offset: int) -> dict:
        """A transactional offset commit of `committed` (`topic-partition`) written to this partition."""
        batch = self.data(pid, epoch, 0, 1, txn=True)
        committed_topic, _, committed_partition = committed.rpartition("-")
        row = {name: None for name in OFFSET_COMMITS.fieldNames()}
        row.update(
            topic=self.topic,
            partition=self.partition,
            producer_id=pid,
            producer_epoch=epoch,
            group=group,
            committed_topic=committed_topic,
            committed_partition=int(committed_partition),
            committed_offset=offset,
            commit_timestamp=self.clock,
            record_offset=batch["base_offset"],
            batch_base_offset=batch["base_offset"],
            key_version=1,
            value_version=3,
            is_tombstone=False,
            segment_base_offset=0,
            position=batch["position"],
            source_file=batch["source_file"],
            source_format="segment",
            broker_id=self.broker_id,
            cluster_id=self.cluster_id,
        )
        self.offset_commit_rows.append(row)
        return row

    def skip(self, offsets: int) -> None:
        self.next_offset += offsets
