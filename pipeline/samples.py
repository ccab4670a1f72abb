"""The bundled sample log root: one broker log dir whose partitions show the producer stories the audit reports.

Run `python -m pipeline.samples OUTDIR` to write it. The output is deterministic byte for byte (fixed
timestamps, ids and payloads), so findings on it can be pinned in tests and docs.

* `orders-0`: idempotent producer 1000, 40 clean batches over two segments (rolled at offset 90).
* `orders-1`: producer 1001 writes a batch twice (duplicate), then skips sequences 12-14 (gap).
* `payments-0`: transactional producer 2000 commits one transaction and aborts the next (with its
  `.txnindex` entry), interleaved with idempotent producer 2001.
* `payments.audit-log-2`: producer 3000 bumps its epoch and restarts at sequence 0 (legal).
"""

from __future__ import annotations

import base64
import sys
import uuid
from pathlib import Path

from pipeline.sources.kafka_format.encoding import encode_batch, encode_marker, encode_txnindex_entry, segment_file_name

BROKER_ID = 0
START_TIMESTAMP = 1767225600000  # 2026-01-01T00:00:00Z
TIMESTAMP_STEP = 1000
LEADER_EPOCH = 0
COORDINATOR_EPOCH = 1
CLUSTER_ID = "cHJvZHVjZS1hdWRpdC0w"
_TOPIC_ID_NAMESPACE = uuid.UUID("6f1c7d1e-2b53-4c1a-9a57-6b0d0e5a2f10")


class _PartitionLog:
    """Appends batches to a partition the way a leader does: contiguous offsets, one clock tick per batch."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.next_offset = 0
        self.segments: dict[int, bytearray] = {0: bytearray()}
        self.txn_index: dict[int, bytearray] = {}
        self._active = 0
        self._batches = 0

    @property
    def dir_name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def roll(self) -> None:
        self._active = self.next_offset
        self.segments[self._active] = bytearray()

    def data(self, producer_id: int, epoch: int, first_sequence: int, count: int, transactional: bool = False) -> bytes:
        """Append a batch of `count` records; returns its bytes so a test story can write it again."""
        values = [
            f'{{"topic":"{self.topic}","producer":{producer_id},"seq":{first_sequence + index}}}'.encode()
            for index in range(count)
        ]
        batch = encode_batch(
            self.next_offset,
            values,
            producer_id,
            epoch,
            first_sequence,
            transactional,
            LEADER_EPOCH,
            self._tick(),
        )
        return self.append(batch, count)

    def append(self, batch: bytes, offsets: int) -> bytes:
        """Append `batch` at the log end offset; only the base offset (not covered by the CRC) is rewritten."""
        stamped = self.next_offset.to_bytes(8, "big", signed=True) + batch[8:]
        self.segments[self._active] += stamped
        self.next_offset += offsets
        return stamped

    def marker(self, producer_id: int, epoch: int, commit: bool) -> int:
        offset = self.next_offset
        self.append(encode_marker(offset, producer_id, epoch, commit, COORDINATOR_EPOCH, self._tick()), 1)
        return offset

    def aborted(self, producer_id: int, first_offset: int, marker_offset: int, last_stable_offset: int) -> None:
        entries = self.txn_index.setdefault(self._active, bytearray())
        entries += encode_txnindex_entry(producer_id, first_offset, marker_offset, last_stable_offset)

    def _tick(self) -> int:
        timestamp = START_TIMESTAMP + self._batches * TIMESTAMP_STEP
        self._batches += 1
        return timestamp


def _orders_0() -> _PartitionLog:
    log = _PartitionLog("orders", 0)
    sequence = 0
    for batch_number in range(40):
        if batch_number == 30:
            log.roll()
        log.data(1000, 0, sequence, 3)
        sequence += 3
    return log


def _orders_1() -> _PartitionLog:
    log = _PartitionLog("orders", 1)
    log.data(1001, 0, 0, 3)
    retried = log.data(1001, 0, 3, 3)
    log.data(1001, 0, 6, 3)
    log.append(retried, 3)  # the same batch again: a duplicate the broker should have rejected
    log.data(1001, 0, 9, 3)
    log.data(1001, 0, 15, 3)  # sequences 12-14 never arrive
    log.data(1001, 0, 18, 3)
    return log


def _payments_0() -> _PartitionLog:
    log = _PartitionLog("payments", 0)
    transactional, idempotent, epoch = 2000, 2001, 3
    log.data(transactional, epoch, 0, 2, transactional=True)
    log.data(idempotent, 0, 0, 2)
    log.data(transactional, epoch, 2, 1, transactional=True)
    log.marker(transactional, epoch, commit=True)
    log.data(idempotent, 0, 2, 2)
    first_offset = log.next_offset
    log.data(transactional, epoch, 3, 2, transactional=True)
    log.data(idempotent, 0, 4, 2)
    abort_offset = log.marker(transactional, epoch, commit=False)
    log.aborted(transactional, first_offset, abort_offset, abort_offset + 1)
    log.data(idempotent, 0, 6, 2)
    return log


def _audit_log_2() -> _PartitionLog:
    log = _PartitionLog("payments.audit-log", 2)
    for sequence in (0, 2, 4):
        log.data(3000, 0, sequence, 2)
    for sequence in (0, 2):
        log.data(3000, 1, sequence, 2)
    return log


def _topic_id(topic: str) -> str:
    """Kafka prints topic ids as URL-safe base64 without padding."""
    raw = uuid.uuid5(_TOPIC_ID_NAMESPACE, topic).bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _offset_checkpoint(entries: list[tuple[str, int, int]]) -> str:
    lines = [f"{topic} {partition} {offset}" for topic, partition, offset in sorted(entries)]
    return "\n".join(["0", str(len(lines)), *lines]) + "\n"


def generate(outdir: Path) -> Path:
    """Write the sample broker log dir `outdir/broker-0` and return the log root `outdir`."""
    outdir = Path(outdir)
    broker_dir = outdir / f"broker-{BROKER_ID}"
    if broker_dir.exists():
        raise FileExistsError(f"{broker_dir} already exists; remove it or choose another directory")
    broker_dir.mkdir(parents=True)
    (broker_dir / "meta.properties").write_text(
        f"#\n#produce-audit sample\nbroker.id={BROKER_ID}\nversion=0\ncluster.id={CLUSTER_ID}\n"
    )
    partitions = [_orders_0(), _orders_1(), _payments_0(), _audit_log_2()]
    for partition in partitions:
        partition_dir = broker_dir / partition.dir_name
        partition_dir.mkdir()
        for base_offset, content in partition.segments.items():
            (partition_dir / segment_file_name(base_offset)).write_bytes(bytes(content))
        for base_offset, content in partition.txn_index.items():
            (partition_dir / segment_file_name(base_offset, ".txnindex")).write_bytes(bytes(content))
        (partition_dir / "leader-epoch-checkpoint").write_text(f"0\n1\n{LEADER_EPOCH} 0\n")
        (partition_dir / "partition.metadata").write_text(f"version: 0\ntopic_id: {_topic_id(partition.topic)}\n")
    end_offsets = [(p.topic, p.partition, p.next_offset) for p in partitions]
    (broker_dir / "log-start-offset-checkpoint").write_text(
        _offset_checkpoint([(p.topic, p.partition, 0) for p in partitions])
    )
    (broker_dir / "recovery-point-offset-checkpoint").write_text(_offset_checkpoint(end_offsets))
    (broker_dir / "replication-offset-checkpoint").write_text(_offset_checkpoint(end_offsets))
    return outdir


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m pipeline.samples OUTDIR", file=sys.stderr)
        return 2
    try:
        print(generate(Path(args[0])))
    except FileExistsError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
