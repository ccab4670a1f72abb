"""REP anomalies: follower copies that depart from their leader's (docs/rules.md §6.10), at replication factor > 1.

They are not in the catalog: a run's other anomalies, and so its leaders' logs, are the same at every
replication factor. Once every leader is written, replica faults take the share of `--anomaly-rate` one rule
family gets (the anomalies over the catalog's families), the three kinds in turn, at most one per partition,
on data partitions of topics not compacted (the audit compares their copies without CRC) whose segments were
rolled at their log end (no segment-base anomaly). The faulted offsets are batch boundaries the whole log agrees
on: every batch before them in file order ends below, every batch after starts at or above.

- `follower-truncation-point` (REP-002 WARN): a follower that led under the previous epoch kept batches the next
  leader never got: from the start offset of a later leader epoch its copy holds 1-4 batches of the leader's
  offsets and producers under the previous epoch, with other record values (so other CRCs). Its log ends after
  them, its leader-epoch cache stops at that epoch and its high watermark below them.
- `follower-divergence` (REP-001 ERROR): one batch of a follower's copy has another base sequence than the
  leader's, with a valid CRC, under the same leader epoch. Never in the copy of the lowest broker id, which the
  audit would take as the partition's replica (`audit.replica_choice`), and only on a batch its producer
  writes again in the same segment, so the copy's snapshots still agree with its log.
- `followers-lagging` (REP-003 INFO, on the leader): every follower's log ends at a batch boundary before the
  leader's, as on followers that had not caught up. The leader's copy is then the only longest one, which is
  what REP-003 reports (one follower behind of three is not: the other still holds the leader's end).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.generate.anomalies.registry import Kind, catalog
from pipeline.generate.partition_log import MAX_SEQUENCE, DataPartition
from pipeline.generate.rand import STREAM_REPLICAS, Rng
from pipeline.generate.replicas import Departure, Entry, log_entries, with_crc
from pipeline.sources.kafka_format.layout import RECORD_BATCH_OVERHEAD

if TYPE_CHECKING:
    from pipeline.generate.anomalies.injector import AnomalyInjector

SLOT = "replica"
MAX_TAIL_BATCHES = 4
LAG_CANDIDATES = 32  # a lagging follower ends within the last this many boundaries of the leader's log
_VALUE_AT = RECORD_BATCH_OVERHEAD + 14  # the first record's value: length, attributes, 2 deltas, key length, key
_HEX = b"0123456789abcdef"


class ReplicaFaults:
    """Chooses the follower copies that depart and records their ground truth."""

    def __init__(self, inj: AnomalyInjector) -> None:
        self.inj = inj
        sim = inj.sim
        self.rng = Rng(sim.options.seed, STREAM_REPLICAS)
        self.departures: dict[tuple[str, int, int], Departure] = {}
        self._logs: dict[int, _Log] = {}
        families = len({kind.family for kind in catalog()})
        self.count = round(sim.options.anomaly_rate * sim.options.batches / families)

    def inject(self) -> dict[tuple[str, int, int], Departure]:
        for number in range(self.count):
            kind = KINDS[number % len(KINDS)]
            if not kind.function(self, kind):
                self.inj.skipped[kind.name] += 1
        return self.departures

    def targets(self) -> list[DataPartition]:
        inj = self.inj
        return [
            partition
            for partition in inj.sim.partitions
            if partition.followers
            and not partition.compacted
            and partition.next_offset > 2
            and inj.slot_free(partition, SLOT)
            and inj.slot_free(partition, "roll")
        ]

    def log(self, partition: DataPartition) -> _Log:
        if partition.index not in self._logs:
            self._logs[partition.index] = _Log(partition)
        return self._logs[partition.index]

    def depart(self, kind: Kind, partition: DataPartition, broker_id: int, departure: Departure) -> None:
        self.inj.claim_slot(partition, SLOT)
        self.departures[(partition.topic, partition.partition, broker_id)] = departure


class _Log:
    """The leader's batches in file order, and the boundaries the whole log agrees on."""

    def __init__(self, partition: DataPartition) -> None:
        self.entries: list[Entry] = log_entries(partition.directory)
        count = len(self.entries)
        self.prefix_last = [-1] * (count + 1)  # largest last offset of entries[:i]
        for i, entry in enumerate(self.entries):
            self.prefix_last[i + 1] = max(self.prefix_last[i], entry.last_offset)
        self.suffix_base = [1 << 62] * (count + 1)  # smallest base offset of entries[i:]
        for i in range(count - 1, -1, -1):
            self.suffix_base[i] = min(self.suffix_base[i + 1], self.entries[i].base_offset)
        self.log_start = partition.log_start_offset

    def __len__(self) -> int:
        return len(self.entries)

    def boundary(self, i: int) -> bool:
        """Every batch before entries[i] ends below its base offset, every one from it on starts at or above, and
        only it starts there; past the log start."""
        if not 1 <= i < len(self.entries):
            return False
        base = self.entries[i].base_offset
        return (
            self.prefix_last[i] < base
            and self.suffix_base[i] == base
            and self.suffix_base[i + 1] > self.entries[i].last_offset
            and base > self.log_start
        )

    def end_before(self, i: int) -> int:
        """The offset after the last batch of entries[:i]."""
        return self.prefix_last[i] + 1


def _restamp(epoch: int):
    """Rewrite a batch as an earlier leader wrote it: that leader epoch, another first record value, its CRC."""

    def rewrite(entry: Entry, batch: bytearray) -> bytearray:
        batch[12:16] = epoch.to_bytes(4, "big", signed=True)
        if not entry.is_control and entry.records > 0 and batch[_VALUE_AT] in _HEX:
            batch[_VALUE_AT] = _HEX[_HEX.index(batch[_VALUE_AT]) ^ 1]
        return with_crc(batch)

    return rewrite


def follower_truncation_point(faults: ReplicaFaults, kind: Kind) -> bool:
    found = []
    for partition in faults.targets():
        starts = {
            start: (epoch, previous[0])
            for previous, (epoch, start) in zip(partition.leader_epochs, partition.leader_epochs[1:], strict=False)
            if epoch > previous[0]
        }
        if not starts:
            continue
        log = faults.log(partition)
        for i, entry in enumerate(log.entries):
            epochs = starts.get(entry.base_offset)
            if (
                epochs is None
                or entry.leader_epoch != epochs[0]
                or entry.is_control
                or entry.records < 1
                or not log.boundary(i)
            ):
                continue
            ends = [
                j
                for j in range(i + 1, min(i + MAX_TAIL_BATCHES, len(log)) + 1)
                if log.entries[j - 1].segment == entry.segment and (j == len(log) or log.boundary(j))
            ]
            if ends:
                found.append((partition, i, ends, epochs))
    if not found:
        return False
    rng = faults.rng
    partition, i, ends, (epoch, previous) = rng.choice(found)
    log = faults.log(partition)
    j = rng.choice(ends)
    start = log.entries[i].base_offset
    end = log.entries[j].base_offset if j < len(log) else log.end_before(j)
    broker_id = rng.choice(partition.followers)
    faults.depart(
        kind,
        partition,
        broker_id,
        Departure(
            start=start,
            end=end,
            leader_epochs=[(e, s) for e, s in partition.leader_epochs if s < start],
            high_watermark=start,
            rewrite=_restamp(previous),
        ),
    )
    pid = log.entries[i].producer_id
    faults.inj.truth(
        kind,
        partition,
        pid if pid >= 0 else None,
        start,
        f"broker {broker_id}'s copy holds {j - i} batches from offset {start} under leader epoch {previous}, "
        f"the leader's under {epoch}",
        broker_id=broker_id,
    )
    return True


def follower_divergence(faults: ReplicaFaults, kind: Kind) -> bool:
    found = []
    for partition in faults.targets():
        lowest = min(partition.broker_id, *partition.followers)
        followers = [broker for broker in partition.followers if broker != lowest]
        if not followers:
            continue
        log = faults.log(partition)
        seen_again: set[tuple[int, int]] = set()  # (segment, producer id) with a data batch later in the segment
        for i in range(len(log) - 1, -1, -1):
            entry = log.entries[i]
            if entry.is_control or entry.producer_id < 0:
                continue
            key = (entry.segment, entry.producer_id)
            if key in seen_again and entry.base_sequence >= 0 and entry.records > 0 and log.boundary(i):
                found.append((partition, followers, i))
            seen_again.add(key)
    if not found:
        return False
    rng = faults.rng
    partition, followers, i = rng.choice(found)
    entry = faults.log(partition).entries[i]
    broker_id = rng.choice(followers)
    changed = (entry.base_sequence + 1) & MAX_SEQUENCE

    def rewrite(batch_entry: Entry, batch: bytearray) -> bytearray:
        if batch_entry.base_offset != entry.base_offset:
            return batch
        batch[53:57] = changed.to_bytes(4, "big", signed=True)
        return with_crc(batch)

    faults.depart(
        kind,
        partition,
        broker_id,
        Departure(
            start=entry.base_offset,
            end=partition.next_offset,
            leader_epochs=list(partition.leader_epochs),
            high_watermark=partition.next_offset,
            rewrite=rewrite,
        ),
    )
    faults.inj.truth(
        kind,
        partition,
        entry.producer_id,
        entry.base_offset,
        f"broker {broker_id}'s batch at {entry.base_offset} has base sequence {changed}, the leader's "
        f"{entry.base_sequence}",
        broker_id=broker_id,
    )
    return True


def followers_lagging(faults: ReplicaFaults, kind: Kind) -> bool:
    found = []
    for partition in faults.targets():
        log = faults.log(partition)
        cuts = [i for i in range(len(log) - 1, 0, -1) if log.boundary(i)][:LAG_CANDIDATES]
        if cuts:
            found.append((partition, cuts))
    if not found:
        return False
    rng = faults.rng
    partition, cuts = rng.choice(found)
    log = faults.log(partition)
    ahead = 0
    for broker_id in partition.followers:
        i = rng.choice(cuts)
        end = log.entries[i].base_offset
        ahead = max(ahead, log.end_before(i))
        faults.depart(
            kind,
            partition,
            broker_id,
            Departure(
                start=end,
                end=end,
                leader_epochs=[(e, s) for e, s in partition.leader_epochs if s < end],
                high_watermark=end,
            ),
        )
    faults.inj.truth(
        kind,
        partition,
        None,
        ahead,
        f"the followers' copies end before offset {ahead}, the leader's at {partition.next_offset}",
    )
    return True


KINDS = (
    Kind("follower-truncation-point", "REP-002", "WARN", follower_truncation_point, at_finish=True),
    Kind("follower-divergence", "REP-001", "ERROR", follower_divergence, at_finish=True),
    Kind("followers-lagging", "REP-003", "INFO", followers_lagging, at_finish=True),
)
