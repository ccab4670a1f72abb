"""Deterministic random draws for the generator.

Every decision of a run comes from numpy PCG64 streams seeded from `--seed`, served from pre-drawn blocks:
one Python call per draw instead of one numpy call, and the same seed gives the same draws on every machine
with the same numpy. Separate streams (simulation, payload shaping, anomalies) keep one concern's draws from
shifting another's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")

STREAM_SIMULATION = 0
STREAM_COMPACTION = 1
STREAM_ANOMALIES = 2
STREAM_CLUSTER = 3
STREAM_REPLICAS = 4
_STREAMS = 5  # a child seed depends on its index only: adding a stream leaves the others' draws alone
_BLOCK = 1 << 16


class Rng:
    """Uniform floats in [0, 1) from one stream, and the small helpers the simulation needs."""

    def __init__(self, seed: int, stream: int) -> None:
        sequence = np.random.SeedSequence(seed).spawn(_STREAMS)[stream]
        self.generator = np.random.Generator(np.random.PCG64(sequence))
        self._values: list[float] = []
        self._index = 0

    def random(self) -> float:
        if self._index == len(self._values):
            self._values = self.generator.random(_BLOCK).tolist()
            self._index = 0
        value = self._values[self._index]
        self._index += 1
        return value

    def below(self, n: int) -> int:
        """An integer in [0, n)."""
        return int(self.random() * n)

    def between(self, low: int, high: int) -> int:
        """An integer in [low, high]."""
        return low + int(self.random() * (high - low + 1))

    def chance(self, probability: float) -> bool:
        return self.random() < probability

    def choice(self, items: Sequence[T]) -> T:
        return items[int(self.random() * len(items))]

    def sample(self, items: Sequence[T], count: int) -> list[T]:
        """`count` distinct items in draw order (partial Fisher-Yates over a copy)."""
        pool = list(items)
        for index in range(min(count, len(pool))):
            swap = index + int(self.random() * (len(pool) - index))
            pool[index], pool[swap] = pool[swap], pool[index]
        return pool[:count]
