"""Scheduling anomalies into a run and recording their ground truth.

`--anomaly-rate` is a fraction of the data batches: a run of N batches gets round(rate * N) anomalies, the kinds of
`catalog.catalog()` (the simulation hands them over) taken in turn (the catalog interleaves rule families, so a few
dozen cover every family), each kind up to its limit. Kinds that change the log as it is written are spread evenly
over 5-85 % of the run; kinds that change files beside it are applied when the run ends. A kind that finds no
target yet waits and is retried every few steps, for at most 2 % of the run (5000 steps at least) and not past 92 %
of it, then is dropped (counted, never recorded): so waiting never costs more than a bounded share of the steps.

Anomalies must not overlap, so that each yields exactly the findings it declares: every one claims the
(partition, producer id) pairs it touches and any partition-level slot it uses (the tail of a log, a
snapshot, an index, a checkpoint file), and the markers injected by one are never picked up by another.
"""

from __future__ import annotations

from collections import Counter, deque
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pipeline.generate import ground_truth
from pipeline.generate.anomalies.registry import Kind
from pipeline.generate.ground_truth import Truth
from pipeline.generate.partition_log import DataPartition, ProducerEntry
from pipeline.generate.producers import IdempotentProducer, ProducerSimulation, TransactionalProducer
from pipeline.generate.rand import STREAM_ANOMALIES, Rng

if TYPE_CHECKING:
    from pipeline.generate.options import GenerateOptions
    from pipeline.generate.producers import Producer

FIRST_FRACTION, LAST_FRACTION, GIVE_UP_FRACTION = 0.05, 0.85, 0.92
RETRY_STEPS = 16
PATIENCE_FRACTION, PATIENCE_STEPS = 0.02, 5000
LULL_AFTER_STEPS = 50
LULL_MINUTES = 25  # longer than transaction.max.timeout.ms + 5 min, so an open transaction left behind hangs


class AnomalySimulation(ProducerSimulation, Protocol):
    """What the injector and the kinds use of the simulation: what its producers use, and its options, step,
    partitions, producers (all and active) and lulls. A protocol, so that the anomalies do not import the simulation
    that runs them."""

    options: GenerateOptions
    step: int
    partitions: list[DataPartition]
    producers: list[Producer]
    active: list[Producer]

    def lull(self, minutes: int) -> None: ...


class AnomalyInjector:
    def __init__(self, sim: AnomalySimulation, kinds: tuple[Kind, ...]) -> None:
        self.sim = sim
        self.rng = Rng(sim.options.seed, STREAM_ANOMALIES)
        self.truths: list[Truth] = []
        self.skipped: Counter[str] = Counter()
        self.claimed_pairs: set[tuple[int, int]] = set()
        self.claimed_slots: set[tuple[int, str]] = set()
        self.protected_markers: set[tuple[int, int]] = set()
        self.prepared: dict[str, object] = {}  # kind name -> the producer its preparation set up
        self.hooks_waiting: Counter[str] = Counter()  # kind name -> hooks registered that have not fired
        self.lull_at: int | None = None
        batches = sim.options.batches
        plan = _plan(kinds, round(sim.options.anomaly_rate * batches))
        stream = [kind for kind in plan if not kind.at_finish]
        self.at_finish_kinds = [kind for kind in plan if kind.at_finish]
        first, last = int(batches * FIRST_FRACTION), int(batches * LAST_FRACTION)
        self._due = deque(
            (first + index * (last - first) // max(len(stream), 1), kind) for index, kind in enumerate(stream)
        )
        self._waiting: list[tuple[int, Kind]] = []  # (step it became due, kind)
        self._give_up = int(batches * GIVE_UP_FRACTION)
        self._patience = max(PATIENCE_STEPS, int(batches * PATIENCE_FRACTION))
        self.next_step = self._due[0][0] if self._due else batches

    # --- scheduling ---------------------------------------------------------------------------------------

    def at_step(self) -> None:
        step = self.sim.step
        while self._due and self._due[0][0] <= step:
            self._waiting.append(self._due.popleft())
        waiting = []
        for due, kind in self._waiting:
            if step > self._give_up or step - due > self._patience:
                self.skipped[kind.name] += 1
            elif not kind.run(self):
                waiting.append((due, kind))
        self._waiting = waiting
        if self.lull_at is not None and step >= self.lull_at:
            self.sim.lull(LULL_MINUTES)
            self.lull_at = None
        candidates = [self._due[0][0]] if self._due else []
        if self._waiting:
            candidates.append(step + RETRY_STEPS)
        if self.lull_at is not None:
            candidates.append(self.lull_at)
        self.next_step = min(candidates, default=self.sim.options.batches)

    def request_lull(self) -> None:
        if self.lull_at is None:
            self.lull_at = self.sim.step + LULL_AFTER_STEPS
            self.next_step = min(self.next_step, self.lull_at)

    def at_finish(self) -> None:
        self.skipped.update(kind.name for _, kind in [*self._waiting, *self._due])
        for kind in self.at_finish_kinds:
            if not kind.run(self):
                self.skipped[kind.name] += 1

    # --- targets ------------------------------------------------------------------------------------------

    def free(self, partition: DataPartition, pid: int) -> bool:
        return (partition.index, pid) not in self.claimed_pairs

    def claim(self, partition: DataPartition, pid: int) -> None:
        self.claimed_pairs.add((partition.index, pid))

    def slot_free(self, partition: DataPartition, slot: str) -> bool:
        return (partition.index, slot) not in self.claimed_slots

    def claim_slot(self, partition: DataPartition, slot: str) -> None:
        self.claimed_slots.add((partition.index, slot))

    def idempotent(self, condition) -> tuple[IdempotentProducer, DataPartition, ProducerEntry] | None:
        """A random (producer, partition, its state there) with `condition`, on a partition not compacted."""
        found = [
            (producer, partition, entry)
            for producer in self.sim.active
            if isinstance(producer, IdempotentProducer)
            for partition in producer.targets
            if not partition.compacted
            and self.free(partition, producer.pid)
            and (entry := partition.producers.get(producer.pid)) is not None
            and condition(producer, partition, entry)
        ]
        return self.rng.choice(found) if found else None

    def transactional(self, condition) -> list[TransactionalProducer]:
        return [
            producer
            for producer in self.sim.active
            if isinstance(producer, TransactionalProducer)
            and all(producer is not prepared for prepared in self.prepared.values())
            and condition(producer)
        ]

    def transacting(self) -> list[TransactionalProducer]:
        """Producers in a transaction no other anomaly works on."""
        return self.transactional(lambda p: p.txn is not None and not p.txn.claimed and not p.fenced)

    def in_transaction(self) -> list[tuple[TransactionalProducer, DataPartition]]:
        """(producer, partition) pairs where the producer's unclaimed transaction has data and the pair is free."""
        return [
            (producer, partition)
            for producer in self.transacting()
            for partition in producer.txn.added
            if self.free(partition, producer.pid) and _has_open_data(partition, producer.pid)
        ]

    def partitions(self, condition) -> list[DataPartition]:
        return [partition for partition in self.sim.partitions if condition(partition)]

    def protect(self, partition: DataPartition, offset: int) -> None:
        self.protected_markers.add((partition.index, offset))

    # --- ground truth -------------------------------------------------------------------------------------

    def truth(
        self,
        kind: Kind,
        partition,
        producer_id: int | None,
        base_offset: int | None,
        detail: str,
        **overrides,
    ) -> None:
        self.truths.append(
            Truth(
                anomaly=kind.name,
                rule_code=overrides.get("rule_code", kind.rule_code),
                severity=overrides.get("severity", kind.severity),
                topic=partition.topic,
                partition=partition.partition,
                broker_id=overrides.get("broker_id", partition.broker_id),
                producer_id=producer_id,
                base_offset=base_offset,
                consequences=overrides.get("consequences", kind.consequences),
                detail=detail,
            )
        )

    def write_ground_truth(self, out: Path) -> Path:
        """Write the truth of the run, once every file is written; hooks that never fired count as skipped."""
        self.skipped.update(+self.hooks_waiting)
        return ground_truth.write(out, self.truths)


def _has_open_data(partition: DataPartition, pid: int) -> bool:
    entry = partition.producers.get(pid)
    return entry is not None and entry.txn_first_offset >= 0


def _plan(kinds: tuple[Kind, ...], count: int) -> list[Kind]:
    """`count` kinds taken in catalog order, round and round, each up to its limit."""
    plan: list[Kind] = []
    used: Counter[str] = Counter()
    while len(plan) < count:
        available = [kind for kind in kinds if kind.limit is None or used[kind.name] < kind.limit]
        if not available:
            break
        for kind in available:
            if len(plan) == count:
                break
            plan.append(kind)
            used[kind.name] += 1
    return plan
