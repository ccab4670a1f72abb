"""The `.txnindex` and `.snapshot` rows of `kafka-dump-log` text, in the form the binary readers give them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.sources.dumplog.grammar import SOURCE_FORMAT as DUMPLOG_FORMAT
from pipeline.sources.partition_files.entries import SNAPSHOT_VERSION, STATUS_OK
from schemas.producer_snapshots import PRODUCER_SNAPSHOTS
from schemas.txn_index import TXN_INDEX


def txn_index_from_dumplog(entries: DataFrame) -> DataFrame:
    """TXN_INDEX rows of dumped `.txnindex` entries (dumplog's TXN_INDEX_ENTRIES), source_format 'dumplog'.

    A dump that does not name its file gets segment_base_offset -1, as dumplog does for batches.
    """
    return entries.mapInArrow(partial(_convert_rows, _txn_index_row_from_dump, to_arrow_schema(TXN_INDEX)), TXN_INDEX)


def snapshots_from_dumplog(entries: DataFrame) -> DataFrame:
    """PRODUCER_SNAPSHOTS rows of dumped snapshot entries (dumplog's SNAPSHOT_ENTRIES), source_format 'dumplog'.

    The values become the ones the file holds: the tool prints only snapshots that passed the broker's
    version and CRC checks (version 1, crc_valid true); an entry printed without a cached batch had
    last_sequence -1, last_offset -1 and offset_delta 0 in the file; the file's timestamp is the producer's
    last timestamp where the dump prints one, else the cached batch's (the same field when the file is
    read). A snapshot dumped without producer lines keeps its one row of null producer fields, as the file
    without entries gives it. A dump that does not name its file gets snapshot_offset -1.
    """
    schema = PRODUCER_SNAPSHOTS
    return entries.mapInArrow(partial(_convert_rows, _snapshot_row_from_dump, to_arrow_schema(schema)), schema)


def _convert_rows(
    convert: Callable[[dict[str, Any]], dict[str, Any]], arrow_schema: pa.Schema, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield pa.RecordBatch.from_pylist([convert(row) for row in batch.to_pylist()], schema=arrow_schema)


def _txn_index_row_from_dump(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        **entry,
        "segment_base_offset": _coalesce(entry["segment_base_offset"], -1),
        "entry_status": STATUS_OK,
        "source_format": DUMPLOG_FORMAT,
        "broker_id": None,
        "cluster_id": None,
    }


def _snapshot_row_from_dump(entry: dict[str, Any]) -> dict[str, Any]:
    common = {
        "snapshot_offset": _coalesce(entry["snapshot_offset"], -1),
        "version": SNAPSHOT_VERSION,
        "crc_valid": True,
        "file_status": STATUS_OK,
        "file_note": None,
        "source_format": DUMPLOG_FORMAT,
        "broker_id": None,
        "cluster_id": None,
    }
    if entry["producer_id"] is None:  # a snapshot without entries
        return {**entry, **common}
    return {
        **entry,
        **common,
        "last_sequence": _coalesce(entry["last_sequence"], -1),
        "last_offset": _coalesce(entry["last_offset"], -1),
        "offset_delta": _coalesce(entry["offset_delta"], 0),
        "timestamp": _coalesce(entry["last_timestamp"], entry["timestamp"]),
    }


def _coalesce(value: Any, default: Any) -> Any:
    return default if value is None else value
