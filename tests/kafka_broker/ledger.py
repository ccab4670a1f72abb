"""What the clients saw, written down as they saw it: the ground truth the audit's tables are compared with.

Every transaction a workload ends is one entry: its transactional id, the outcome the client was told (or,
for a fenced or timed-out transaction, the outcome the coordinator forces), and per partition the offsets the
broker acknowledged for its records. Idempotent producers get one entry per producer with the offsets of
all their acknowledged records.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

COMMITTED = "COMMITTED"
ABORTED = "ABORTED"


@dataclass
class Entry:
    workload: str
    client: str  # confluent-kafka (librdkafka: Transactions V1) or java kafka-clients (V2 when the broker offers it)
    transactional_id: str | None  # None: an idempotent producer
    outcome: str | None  # COMMITTED / ABORTED; None for idempotent records
    how: str  # commit, abort, fenced (a newer instance of the id), timeout (the coordinator aborted it), ...
    offsets: dict[str, list[int]] = field(default_factory=dict)  # "topic-partition" -> offsets
    producer_id: int | None = None  # as the client held it while writing, where the client exposes it (Java)
    producer_epoch: int | None = None

    def acked(self, topic: str, partition: int, offset: int) -> None:
        self.offsets.setdefault(f"{topic}-{partition}", []).append(offset)


@dataclass
class Ledger:
    entries: list[Entry] = field(default_factory=list)
    notes: dict[str, object] = field(default_factory=dict)  # broker events, versions, what could not be produced

    def entry(self, workload: str, client: str, transactional_id: str | None, outcome: str | None, how: str) -> Entry:
        entry = Entry(workload, client, transactional_id, outcome, how)
        self.entries.append(entry)
        return entry

    def extend(self, records: list[dict]) -> None:
        """Entries reported by another process (the Java client) as dicts of Entry's fields."""
        self.entries.extend(Entry(**record) for record in records)

    def write(self, path: Path) -> None:
        payload = {"entries": [asdict(entry) for entry in self.entries], "notes": self.notes}
        for entry in payload["entries"]:
            entry["offsets"] = {key: sorted(values) for key, values in sorted(entry["offsets"].items())}
        path.write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")


def read(path: Path) -> dict:
    return json.loads(path.read_text())
