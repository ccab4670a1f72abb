"""How the report page and the Markdown summary spell places, offsets, producers and times: the same in both."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pipeline.sources.kafka_wire.address import is_kafka_uri


def place(row: Mapping[str, Any], clusters: int = 1) -> str:
    """topic-partition @broker, leaving out what the row does not know, and its cluster when the run audited
    several (`clusters`)."""
    partition, broker = row.get("partition"), row.get("broker_id")
    where = row["topic"] if partition is None else f"{row['topic']}-{partition}"
    where = where if broker is None else f"{where} @{broker}"
    return f"{where} in {cluster_name(row.get('cluster_id'))}" if clusters > 1 else where


def cluster_name(cluster_id: str | None) -> str:
    """How a report names a cluster: its id, or that it is unknown (inputs that named none)."""
    return f"cluster {cluster_id}" if cluster_id else "an unknown cluster"


def offsets(row: Mapping[str, Any]) -> str | None:
    base, last = row.get("base_offset"), row.get("last_offset")
    if base is None:
        return None
    return str(base) if last is None or last == base else f"{base}-{last}"


def producer(row: Mapping[str, Any]) -> str | None:
    if row.get("producer_id") is None:
        return None
    epoch = row.get("producer_epoch")
    return f"{row['producer_id']}:{epoch if epoch is not None else '-'}"


def utc(epoch_ms: float | None) -> str:
    """Epoch milliseconds as UTC date and time; the number itself when out of datetime's range (logs hold anything)."""
    if epoch_ms is None:
        return "-"
    try:
        return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, ValueError, OSError):
        return f"{epoch_ms:.0f} ms"


def reference_time(epoch_ms: int | None) -> str:
    return "latest batch timestamp of each partition" if epoch_ms is None else f"{utc(epoch_ms)} UTC ({epoch_ms} ms)"


# `runs.counts` keys naming each rule that had nothing to read in a run's inputs (`rules_without_input`)
WITHOUT_INPUT = "rules.without_input."


def families(codes: Sequence[str]) -> str:
    """`IDX-006, IDX-007, LIV-001` as `IDX-006/007, LIV-001`."""
    numbers: dict[str, list[str]] = {}
    for code in sorted(codes):
        family, _, number = code.partition("-")
        numbers.setdefault(family, []).append(number)
    return ", ".join(f"{family}-{'/'.join(found)}" for family, found in numbers.items())


def run_notes(run: Mapping[str, Any]) -> list[str]:
    """What the reports say of where the run's rows came from and what it could not check."""
    notes = [note] if (note := unknown_dump_lines_note(run)) else []
    if fetched := [given for given in run.get("inputs") or [] if is_kafka_uri(given)]:
        notes.append(f"read over the Kafka protocol from the leaders of {', '.join(fetched)}")
    if codes := run.get("rules_without_input"):
        notes.append(f"{len(codes)} rule(s) had nothing to read in these inputs and did not run: {families(codes)}")
    return notes


def unknown_dump_lines_note(run: Mapping[str, Any]) -> str | None:
    """What the reports say of the dump-text lines the run could not read (the log names the first of them);
    None when it read all of them, read no dump text, or did not ingest (`unknown_dump_lines` 0 or null)."""
    unknown = run.get("unknown_dump_lines")
    if not unknown:
        return None
    return f"dump text: {unknown:,} line(s) fit no kafka-dump-log layout and were not read"
