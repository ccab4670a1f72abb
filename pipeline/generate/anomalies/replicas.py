"""REP anomalies: follower copies that depart from their leader's (docs/rules.md §6.10), at replication factor > 1.

They are not in the catalog: a run's other anomalies, and so its leaders' logs, are the same at every
replication factor. Once every leader is written, replica faults take the share of `--anomaly-rate` one rule
family gets (the anomalies over the catalog's families), the three kinds in turn, at most one per partition,
on data partitions of topics not compacted (the audit compares their copies without CRC) whose segments were
rolled at their log end (no segment-base anomaly). The faulted offsets are batch boundaries the whole log agrees
on: every batch before them in file order ends below, every batch after starts at or above. The leader's batches
are read back from its finished segments, only the segment a truncation point starts in and the last
`TAIL_SEGMENTS` segments for the other kinds, so the work per partition stays bounded at any size.

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

import numpy as np

from pipeline.generate.anomalies.catalog import catalog
from pipeline.generate.anomalies.registry import Kind
from pipeline.generate.encode import HEADER
from pipeline.generate.partition_log import MAX_SEQUENCE, DataPartition
from pipeline.generate.rand import STREAM_REPLICAS, Rng
from pipeline.generate.replicas import ATTR_CONTROL, Departure, Entry, segment_headers, with_crc
from pipeline.sources.kafka_format.encoding import segment_file_name
from pipeline.sources.kafka_format.layout import RECORD_BATCH_OVERHEAD

if TYPE_CHECKING:
    from pipeline.generate.anomalies.injector import AnomalyInjector

SLOT = "replica"
MAX_TAIL_BATCHES = 4
LAG_CANDIDATES = 32  # a lagging follower ends within the last this many boundaries of the leader's log
TAIL_SEGMENTS = 4  # divergence and lag are looked for in the leader's last segments: bounded work per partition
_VALUE_AT = RECORD_BATCH_OVERHEAD + 14  # the first record's value: length, attributes, 2 deltas, key length, key
_HEX = b"0123456789abcdef"


class ReplicaFaults:
    """Chooses the follower copies that depart and records their ground truth."""

    def __init__(self, inj: AnomalyInjector) -> None:
        self.inj = inj
        sim = inj.sim
        self.rng = Rng(sim.options.seed, STREAM_REPLICAS)
        self.departures: dict[tuple[str, int, int], Departure] = {}
        self._regions: dict[tuple[int, int, int | None], _Region] = {}
        families = len({kind.family for kind in catalog()})
        self.count = round(sim.options.anomaly_rate * sim.options.batches / families)

    def inject(self) -> dict[tuple[str, int, int], Departure]:
        for number in range(self.count):
            kind = KINDS[number % len(KINDS)]
            if not kind.function(self, kind):
                self.inj.skipped[kind.name] += 1
        self._regions.clear()
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

    def region(self, partition: DataPartition, first: int, last: int | None = None) -> _Region:
        """The leader's batches of its segments from base `first` (to base `last`, else to the log end)."""
        key = (partition.index, first, last)
        if key not in self._regions:
            bases = [base for base in partition.segment_bases if base >= first and (last is None or base <= last)]
            self._regions[key] = _Region(partition, bases)
        return self._regions[key]

    def tail_region(self, partition: DataPartition) -> _Region:
        """The leader's last segments, at least TAIL_SEGMENTS of them (the whole log when it has fewer)."""
        return self.region(partition, partition.segment_bases[-TAIL_SEGMENTS:][0])

    def pick(self, found: list[tuple[DataPartition, np.ndarray]]) -> tuple[DataPartition, int] | None:
        """One (partition, index) uniformly among every partition's candidate indexes."""
        total = sum(len(indexes) for _, indexes in found)
        if not total:
            return None
        draw = self.rng.below(total)
        for partition, indexes in found:
            if draw < len(indexes):
                return partition, int(indexes[draw])
            draw -= len(indexes)
        raise AssertionError("unreachable")

    def depart(self, partition: DataPartition, broker_id: int, departure: Departure) -> None:
        self.inj.claim_slot(partition, SLOT)
        self.departures[(partition.topic, partition.partition, broker_id)] = departure


class _Region:
    """The leader's batches of consecutive segments in file order, as columns, and the boundaries the whole log
    agrees on there. The segments before the region end below its first base (segments roll at the log end)."""

    def __init__(self, partition: DataPartition, bases: list[int]) -> None:
        directory = partition.directory
        parts, segments = [], []
        for base in bases:
            _, headers = segment_headers((directory / segment_file_name(base)).read_bytes())
            parts.append(headers)
            segments.append(np.full(len(headers), base, dtype=np.int64))
        headers = np.concatenate(parts) if parts else np.zeros(0, dtype=HEADER)
        self.segment = np.concatenate(segments) if segments else np.zeros(0, np.int64)
        self.base = headers["base_offset"].astype(np.int64)
        self.last = self.base + headers["last_offset_delta"].astype(np.int64)
        self.epoch = headers["leader_epoch"].astype(np.int64)
        self.data = (headers["attributes"].astype(np.int64) & ATTR_CONTROL) == 0
        self.records = headers["records_count"].astype(np.int64)
        self.producer_id = headers["producer_id"].astype(np.int64)
        self.base_sequence = headers["base_sequence"].astype(np.int64)
        count = len(self.base)
        first = bases[0] if bases else 0
        # prefix[i]: the largest last offset of the batches before entry i; suffix[i]: the smallest base from i on
        self.prefix = np.maximum.accumulate(np.concatenate([[first - 1], self.last]))
        self.suffix = np.concatenate([np.minimum.accumulate(self.base[::-1])[::-1], [np.iinfo(np.int64).max]])
        inside = (np.arange(count) >= 1) | (first > 0)  # a copy holds one batch at least
        self.boundary = (
            inside
            & (self.prefix[:count] < self.base)
            & (self.suffix[:count] == self.base)
            & (self.suffix[1:] > self.last)
            & (self.base > partition.log_start_offset)
        )

    def __len__(self) -> int:
        return len(self.base)

    def ends_at(self, j: int) -> bool:
        """The region's batches before index j hold a prefix of the log: j is a boundary or the region's end."""
        return j == len(self) or bool(self.boundary[j])

    def end_before(self, j: int) -> int:
        """The offset after the last batch before index j."""
        return int(self.prefix[j]) + 1


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
        epochs = partition.leader_epochs
        for (previous, _), (epoch, start) in zip(epochs, epochs[1:], strict=False):
            if not 0 < start < partition.next_offset:
                continue
            segment = max(base for base in partition.segment_bases if base <= start)
            region = faults.region(partition, segment, segment)  # the tail stays in the segment it starts in
            at = np.flatnonzero(region.base == start)
            if len(at) != 1:
                continue
            i = int(at[0])
            if not (region.boundary[i] and region.data[i] and region.records[i] > 0 and region.epoch[i] == epoch):
                continue
            ends = [j for j in range(i + 1, min(i + MAX_TAIL_BATCHES, len(region)) + 1) if region.ends_at(j)]
            if ends:
                found.append((partition, region, i, ends, epoch, previous))
    if not found:
        return False
    rng = faults.rng
    partition, region, i, ends, epoch, previous = rng.choice(found)
    j = rng.choice(ends)
    start = int(region.base[i])
    end = int(region.base[j]) if j < len(region) else region.end_before(j)
    broker_id = rng.choice(partition.followers)
    faults.depart(
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
    pid = int(region.producer_id[i])
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
        if not any(broker != lowest for broker in partition.followers):
            continue
        region = faults.tail_region(partition)
        eligible = region.data & (region.producer_id >= 0) & (region.base_sequence >= 0) & (region.records > 0)
        # the producer writes again in the same segment: the copy's snapshots (at segment ends) keep that batch
        order = np.arange(len(region))
        keys = np.stack([region.segment, region.producer_id], axis=1)[eligible]
        _, group = np.unique(keys, axis=0, return_inverse=True)
        group = group.reshape(-1)
        latest = np.full(group.max() + 1 if len(group) else 0, -1, dtype=np.int64)
        np.maximum.at(latest, group, order[eligible])
        again = np.zeros(len(region), dtype=bool)
        again[eligible] = order[eligible] < latest[group]
        found.append((partition, np.flatnonzero(again & region.boundary)))
    chosen = faults.pick(found)
    if chosen is None:
        return False
    partition, i = chosen
    region = faults.tail_region(partition)
    offset, pid, sequence = int(region.base[i]), int(region.producer_id[i]), int(region.base_sequence[i])
    lowest = min(partition.broker_id, *partition.followers)
    broker_id = faults.rng.choice([broker for broker in partition.followers if broker != lowest])
    changed = (sequence + 1) & MAX_SEQUENCE

    def rewrite(entry: Entry, batch: bytearray) -> bytearray:
        if entry.base_offset != offset:
            return batch
        batch[53:57] = changed.to_bytes(4, "big", signed=True)
        return with_crc(batch)

    faults.depart(
        partition,
        broker_id,
        Departure(
            start=offset,
            end=partition.next_offset,
            leader_epochs=list(partition.leader_epochs),
            high_watermark=partition.next_offset,
            rewrite=rewrite,
        ),
    )
    faults.inj.truth(
        kind,
        partition,
        pid,
        offset,
        f"broker {broker_id}'s batch at {offset} has base sequence {changed}, the leader's {sequence}",
        broker_id=broker_id,
    )
    return True


def followers_lagging(faults: ReplicaFaults, kind: Kind) -> bool:
    found = []
    for partition in faults.targets():
        region = faults.tail_region(partition)
        found.append((partition, np.flatnonzero(region.boundary)[-LAG_CANDIDATES:]))
    found = [(partition, cuts) for partition, cuts in found if len(cuts)]
    if not found:
        return False
    rng = faults.rng
    partition, cuts = rng.choice(found)
    region = faults.tail_region(partition)
    ahead = 0
    for broker_id in partition.followers:
        i = int(cuts[rng.below(len(cuts))])
        end = int(region.base[i])
        ahead = max(ahead, region.end_before(i))
        faults.depart(
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
