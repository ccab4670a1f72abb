"""The catalog of anomaly kinds: every family module imported, so that each has registered its kinds."""

from __future__ import annotations

from itertools import chain, zip_longest

from pipeline.generate.anomalies import (  # noqa: F401 (registering the kinds)
    batch_format,
    coordinator,
    epochs,
    segment_files,
    sequences,
    snapshots,
    transactions,
    txnindex,
)
from pipeline.generate.anomalies.registry import Kind, registered


def catalog() -> tuple[Kind, ...]:
    """Every kind, one of each family in turn, so that a few dozen anomalies already cover every family."""
    families: dict[str, list[Kind]] = {}
    for item in registered():
        families.setdefault(item.family, []).append(item)
    return tuple(item for item in chain.from_iterable(zip_longest(*families.values())) if item is not None)
