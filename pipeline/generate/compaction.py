"""Compaction-shaped cleaning of a closed segment of the compacted-style topic.

The log cleaner removes records whose key has a newer value and keeps each batch's header fields (base
offset, last offset delta, producer id, epoch, base sequence), so cleaned batches hold fewer records than
their offset range and offsets go missing between records. A batch whose records are all gone is dropped,
leaving an offset gap between batches, unless it carries producer state: an idempotent producer's batches
are kept with at least one record here, so the sequence chain the audit checks stays whole; so is the batch
where a leader epoch starts, which `leader-epoch-checkpoint` points at (the audit compares the two and does
not expect the cleaner to have removed it). Which records go is drawn at random rather than from real key
history; the shape on disk is the cleaner's.
"""

from __future__ import annotations

import numpy as np

from pipeline.generate.encode import MAX_RECORDS, Chunk
from pipeline.generate.rand import Rng

REMOVED_FRACTION = 0.5


def compact(chunk: Chunk, rng: Rng, epoch_starts: list[int]) -> Chunk:
    """The chunk as the cleaner leaves it: fewer records per batch, some batches without a producer id gone."""
    rows = len(chunk)
    if not rows:
        return chunk
    present = np.arange(MAX_RECORDS) < chunk.records[:, None]
    kept = (rng.generator.random((rows, MAX_RECORDS)) >= REMOVED_FRACTION) & present
    emptied = ~kept.any(axis=1)
    keeps_state = (chunk.producer_id >= 0) | (chunk.control >= 0) | np.isin(chunk.base_offset, epoch_starts)
    last_record = np.eye(MAX_RECORDS, dtype=bool)[np.maximum(chunk.records - 1, 0)]
    kept[emptied & keeps_state] = last_record[emptied & keeps_state]
    chunk.keep = np.packbits(kept, axis=1, bitorder="little")[:, 0]
    return chunk.select(np.flatnonzero(~emptied | keeps_state))
