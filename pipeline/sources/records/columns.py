"""The record columns of a decode window: the walk over every uncompressed batch in one compiled loop, and per batch
after decompression for compressed ones.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from pipeline.sources.records.decompression import Undecodable, decompress_section
from pipeline.sources.records.layout import CODEC_MASK, MAX_RECORDS_BYTES, RECORD_BATCH_OVERHEAD
from pipeline.sources.records.walk import (
    ATTRIBUTES_BYTE,
    BASE_TIMESTAMP,
    BATCH_COLUMNS,
    COMPRESSED,
    COUNT,
    EXTRA,
    LAST_OFFSET_DELTA,
    MAX_DELTA,
    MAX_TIMESTAMP,
    NO_FILL,
    OK,
    PROBLEM,
    UNDECODABLE,
    describe,
    position_wording,
    read_only_view,
    walk_batches,
    walk_records,
)

_LOG_APPEND_TIME = 0x08


def record_columns(view, starts: np.ndarray, ends: np.ndarray, verify: bool) -> dict[str, pa.Array]:
    """`record_problem` and `max_record_timestamp` of the v2 batches at [starts, ends) of the window `view`.

    The problem is null when the records parse (or were not checked: verification off, a negative record count,
    an unknown codec); the timestamp is null when there are no records or they do not parse. For LogAppendTime
    batches it is the batch's maxTimestamp, as Kafka gives every record that timestamp.
    """
    rows = len(starts)
    if not verify:
        return {"record_problem": pa.nulls(rows, pa.string()), "max_record_timestamp": pa.nulls(rows, pa.int64())}
    raw = read_only_view(np.frombuffer(view, dtype=np.uint8))
    out = np.zeros((rows, BATCH_COLUMNS), dtype=np.int64)
    walk_batches(raw, np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64), out)
    undecodable: dict[int, str] = {}
    for row in np.flatnonzero(out[:, PROBLEM] == COMPRESSED).tolist():
        batch = out[row]
        section = view[int(starts[row]) + RECORD_BATCH_OVERHEAD : int(ends[row])]
        try:
            buffer = decompress_section(section, int(batch[ATTRIBUTES_BYTE]) & CODEC_MASK, MAX_RECORDS_BYTES)
        except Undecodable as exc:
            batch[PROBLEM] = UNDECODABLE
            undecodable[row] = exc.reason
            continue
        walk_records(buffer, 0, len(buffer), batch[COUNT], batch[LAST_OFFSET_DELTA], *NO_FILL, batch)
    problem = out[:, PROBLEM]
    texts = {row: undecodable.get(row) or _describe_row(out[row]) for row in np.flatnonzero(problem > OK).tolist()}
    has_timestamp = (problem == OK) & (out[:, COUNT] > 0)
    log_append_time = (out[:, ATTRIBUTES_BYTE] & _LOG_APPEND_TIME) != 0
    max_record_timestamp = np.where(log_append_time, out[:, MAX_TIMESTAMP], out[:, BASE_TIMESTAMP] + out[:, MAX_DELTA])
    return {
        "record_problem": _text_column(texts, rows),
        "max_record_timestamp": pa.array(max_record_timestamp, pa.int64(), mask=~has_timestamp),
    }


def _describe_row(batch: np.ndarray) -> str:
    problem, field, position, index, detail, extra = batch[PROBLEM : EXTRA + 1].tolist()
    codec = int(batch[ATTRIBUTES_BYTE]) & CODEC_MASK
    return describe(problem, field, position, index, detail, extra, int(batch[COUNT]), position_wording(codec))


def _text_column(texts: dict[int, str], rows: int) -> pa.Array:
    if not texts:
        return pa.nulls(rows, pa.string())
    values: list[str | None] = [None] * rows
    for row, text in texts.items():
        values[row] = text
    return pa.array(values, pa.string())
