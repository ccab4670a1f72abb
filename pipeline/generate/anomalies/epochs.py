"""EPO anomalies: data and markers at epochs the broker would have fenced."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.generate.anomalies.registry import Kind, anomaly
from pipeline.generate.anomalies.targets import draw_records, idle_producers, open_pair
from pipeline.generate.producers import IdempotentProducer, TransactionalProducer
from schemas.batches import CONTROL_ABORT

if TYPE_CHECKING:
    from pipeline.generate.anomalies.injector import AnomalyInjector

EPOCH_MAX = 32767


@anomaly("zombie-write", "EPO-001", "ERROR")
def zombie_write(inj: AnomalyInjector, kind: Kind) -> bool:
    """A batch of the previous epoch arrives after the producer bumped its epoch (a fenced zombie)."""
    prepared = inj.prepared.get(kind.name)
    found = inj.idempotent(
        lambda producer, partition, entry: (
            producer.epoch >= 1 and entry.epoch == producer.epoch and (prepared is None or producer is prepared)
        )
    )
    if found is None:
        if prepared is None:
            candidates = [
                p
                for p in inj.sim.active
                if isinstance(p, IdempotentProducer) and p.sequences and not p.targets[0].compacted
            ]
            if candidates:
                producer = inj.rng.choice(candidates)
                producer.bump_epoch()  # a legitimate client-side bump; the zombie comes once it wrote at the new one
                inj.prepared[kind.name] = producer
        return False
    producer, partition, _ = found
    offset = partition.append(producer.pid, producer.epoch - 1, 0, 1, 0, inj.sim.clock, 0)
    inj.prepared.pop(kind.name, None)
    inj.claim(partition, producer.pid)
    inj.truth(kind, partition, producer.pid, offset, f"data at epoch {producer.epoch - 1} after epoch {producer.epoch}")
    return True


@anomaly("stale-marker", "EPO-002", "ERROR", consequences=("TXN-003",))
def stale_marker(inj: AnomalyInjector, kind: Kind) -> bool:
    """A marker of an earlier epoch (repeating that epoch's decision) lands after the producer moved on."""

    def stale(producer: TransactionalProducer) -> list:
        return [
            (partition, epoch, decision)
            for partition in producer.targets
            if inj.free(partition, producer.pid)
            and (entry := partition.producers.get(producer.pid)) is not None
            and entry.txn_first_offset < 0
            for epoch, decision in entry.marker_epochs.items()
            if epoch < entry.epoch and (partition.index, decision[2]) not in inj.protected_markers
        ]

    prepared = inj.prepared.pop(kind.name, None)
    candidates = [
        (producer, found)
        for producer in [*inj.transactional(lambda p: True), *([prepared] if prepared else [])]
        if producer.initialized and (found := stale(producer))
    ]
    if not candidates:
        idle = [p for p in idle_producers(inj) if any(p.pid in t.producers for t in p.targets)]
        if prepared is not None:
            inj.prepared[kind.name] = prepared
        elif idle:
            producer = inj.rng.choice(idle)
            producer.next_targets = [t for t in producer.targets if producer.pid in t.producers][:2]
            producer.init_producer_id(inj.sim)  # a new instance; its next transaction moves those partitions on
            inj.prepared[kind.name] = producer
        return False
    producer, found = inj.rng.choice(candidates)
    partition, epoch, (control, coordinator_epoch, _) = inj.rng.choice(found)
    offset = partition.marker(producer.pid, epoch, control != CONTROL_ABORT, coordinator_epoch, inj.sim.clock)
    inj.claim(partition, producer.pid)
    inj.protect(partition, offset)
    inj.truth(kind, partition, producer.pid, offset, f"a marker of epoch {epoch} after epoch {producer.epoch}")
    return True


@anomaly("marker-epoch-jump", "EPO-005", "WARN", consequences=("XTX-006", "EPO-004", "EPO-006"))
def marker_epoch_jump(inj: AnomalyInjector, kind: Kind) -> bool:
    pair = open_pair(inj)
    if pair is None:
        return False
    producer, partition = pair
    offset = producer.coordinator_abort(inj.sim, jump=partition)[partition.index]
    producer.init_producer_id(inj.sim)
    producer.forbidden.add(partition.index)
    inj.claim(partition, producer.pid)
    inj.protect(partition, offset)
    inj.truth(kind, partition, producer.pid, offset, "a fence abort marker two epochs above the transaction")
    return True


@anomaly("transactional-epoch-max", "EPO-007", "WARN")
def transactional_epoch_max(inj: AnomalyInjector, kind: Kind) -> bool:
    """A transactional id comes back at epoch 32767 (the coordinator never hands that out for transactions),
    writes one transaction and stops: another bump would overflow."""
    sim = inj.sim
    targets = next((p.targets for p in sim.producers if isinstance(p, TransactionalProducer)), None)
    if not targets:
        return False
    pid = sim.new_pid()
    producer = TransactionalProducer(f"restored-processor-{pid}", pid, EPOCH_MAX, 60_000, targets)
    producer.init_producer_id(sim)
    partition = inj.rng.choice(targets)
    producer.begin(sim, [partition])
    offset = producer.write(sim, producer.txn, partition, draw_records(inj))
    producer.end(sim, True)
    inj.claim(partition, pid)
    inj.truth(kind, partition, pid, offset, "transactional data at epoch 32767")
    return True
