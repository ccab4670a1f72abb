"""How the records of a window of batches become rows of a coordinator topic's table, as columns."""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pipeline.sources.records.api import RecordError, window_records

LOG_APPEND_TIME = 1  # `timestamp_type` of a batch whose timestamps the broker set

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
# The header fields of a batch that its rows take (`kafka_format.DECODED_SCHEMA` names).
BATCH_FIELDS = (
    "base_offset",
    "position",
    "size_bytes",
    "partition_leader_epoch",
    "base_timestamp",
    "max_timestamp",
    "timestamp_type",
    "is_transactional",
    "compression",
    "producer_id",
    "producer_epoch",
)


@dataclass(frozen=True)
class CoordinatorRecords:
    """How the records of a coordinator topic become rows of its table (`schema`): `decode` gives the `decoded`
    columns of a record's key and value; `batch_columns` are (table column, header field) pairs taken from its
    batch.

    Called with one batch entry it gives that entry's rows (for callers outside Spark); the executors make the
    rows of a whole window at once (`window`), as lists per column rather than a dict per row.
    """

    schema: pa.Schema
    decode: Callable[[bytes | None, bytes | None], tuple]
    decoded: tuple[str, ...]
    batch_columns: tuple[tuple[str, str], ...]
    with_timestamp: bool

    def __call__(self, entry: bytes, batch: dict[str, Any]) -> list[dict[str, Any]]:
        """The rows of the records of one batch entry (whole entry, header included), without provenance; `batch`
        holds the header fields of the entry (`kafka_format.DECODED_SCHEMA` names)."""
        batches = {field: [batch[field]] for field in BATCH_FIELDS}
        return self.window(memoryview(entry), [0], [len(entry)], batches, {}).to_pylist()

    def window(
        self,
        view: memoryview,
        starts: list[int],
        ends: list[int],
        batches: dict[str, list[Any]],
        provenance: dict[str, Any],
    ) -> pa.RecordBatch:
        """The rows of the records of the batch entries at [starts, ends) of `view`, whose header fields are the
        lists of `batches`; `provenance` holds the columns every row shares. A batch whose records Kafka's reader
        would reject gives one row whose `decode_error` says why.

        Python's cycle collector is off meanwhile: the rows are thousands of small containers in no cycle, and
        every few thousand of them it would walk the worker's whole heap (pyspark, pyarrow, numba), which doubled
        the CPU of the decode. They are gone when it is back on.
        """
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._window(view, starts, ends, batches, provenance)
        finally:
            if enabled:
                gc.enable()

    def _window(
        self,
        view: memoryview,
        starts: list[int],
        ends: list[int],
        batches: dict[str, list[Any]],
        provenance: dict[str, Any],
    ) -> pa.RecordBatch:
        of_batch: list[int] = []  # the batch of each row
        offsets: list[int | None] = []
        timestamps: list[int | None] = []
        decoded: list[tuple] = []
        unreadable = (None,) * (len(self.decoded) - 1)
        for index, records in enumerate(window_records(view, starts, ends)):
            if isinstance(records, RecordError):
                of_batch.append(index)
                offsets.append(None)
                timestamps.append(None)
                decoded.append(
                    (*unreadable, f"records unreadable at byte {records.position} of the batch: {records.reason}")
                )
                continue
            base_offset, base_timestamp = batches["base_offset"][index], batches["base_timestamp"][index]
            log_append_time = batches["timestamp_type"][index] == LOG_APPEND_TIME
            for record in records:
                of_batch.append(index)
                offsets.append(_int64(base_offset + record.offset_delta))
                # `DefaultRecord.timestamp`: in a LogAppendTime batch every record has the batch's max timestamp.
                if log_append_time:
                    timestamps.append(batches["max_timestamp"][index])
                else:
                    timestamps.append(_int64(base_timestamp + record.timestamp_delta))
                decoded.append(self.decode(record.key, record.value))
        rows = len(of_batch)
        columns = {column: [value] * rows for column, value in provenance.items()}
        columns.update((column, [batches[field][index] for index in of_batch]) for column, field in self.batch_columns)
        columns["record_offset"] = offsets
        if self.with_timestamp:
            columns["record_timestamp"] = timestamps
        if decoded:
            columns.update(zip(self.decoded, zip(*decoded, strict=True), strict=True))
        arrays = [
            pa.array(columns[field.name], field.type) if field.name in columns else pa.nulls(rows, field.type)
            for field in self.schema
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _int64(value: int) -> int | None:
    """Offsets and timestamps computed from file values; a sum that leaves int64 has no meaning."""
    return value if _INT64_MIN <= value <= _INT64_MAX else None
