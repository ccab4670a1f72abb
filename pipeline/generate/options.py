"""What a generate run is asked for, with the defaults of `produce-audit generate` (no heavy imports: `--help`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_PARTITIONS = 12
DEFAULT_PRODUCERS = 200
DEFAULT_BROKERS = 3
DEFAULT_REPLICATION_FACTOR = 1
DEFAULT_SEED = 1
DEFAULT_ANOMALY_RATE = 0.0001
DEFAULT_SEGMENT_BYTES = 8 * 1024 * 1024
SMALLEST_SEGMENT_BYTES = 4096  # a few of the largest batches (373 bytes) per segment


@dataclass(frozen=True)
class GenerateOptions:
    out: Path
    batches: int
    partitions: int = DEFAULT_PARTITIONS
    producers: int = DEFAULT_PRODUCERS
    brokers: int = DEFAULT_BROKERS
    seed: int = DEFAULT_SEED
    anomaly_rate: float = DEFAULT_ANOMALY_RATE
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    # skew: one more idempotent producer writes half of the batches of one (not compacted) partition
    hot_producer: bool = False
    # copies of each partition's log: the leader's and N-1 followers' on the next brokers
    replication_factor: int = DEFAULT_REPLICATION_FACTOR

    def problems(self) -> list[str]:
        """What makes these options unusable, in words for the command line."""
        checks = [
            (self.batches >= 1, "--batches must be at least 1"),
            (self.partitions >= 1, "--partitions must be at least 1"),
            (self.producers >= 1, "--producers must be at least 1"),
            (self.brokers >= 1, "--brokers must be at least 1"),
            (
                1 <= self.replication_factor <= max(self.brokers, 1),
                "--replication-factor must be between 1 and --brokers",
            ),
            (self.seed >= 0, "--seed must not be negative"),
            (0 <= self.anomaly_rate <= 0.1, "--anomaly-rate must be between 0 and 0.1"),
            (
                self.segment_bytes >= SMALLEST_SEGMENT_BYTES,
                f"--segment-bytes must be at least {SMALLEST_SEGMENT_BYTES}",
            ),
        ]
        return [message for ok, message in checks if not ok]
