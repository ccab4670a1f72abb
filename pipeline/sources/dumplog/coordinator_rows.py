"""A record line of a coordinator topic as a `transaction_log` or `offset_commits` row, with the fields the
decoders printed for its key and value."""

from __future__ import annotations

import re
from typing import Any

from pipeline.sources.dumplog.decoded_payloads import (
    decoded_text,
    key_and_payload,
    offset_commit_fields,
    transaction_log_fields,
)
from pipeline.sources.dumplog.grammar import SOURCE_FORMAT, Section
from pipeline.sources.dumplog.rows import control_fields, printed_timestamp
from schemas.offset_commits import CONSUMER_OFFSETS_TOPIC
from schemas.transaction_log import TRANSACTION_STATE_TOPIC


def coordinator_record_row(
    section: Section, source_file: str, match: re.Match[str], batch: dict[str, Any] | None
) -> dict[str, Any] | None:
    """A data record of `__transaction_state`, or of a transactional `__consumer_offsets` batch, as a row; None
    for any other record line.

    `batch` is the row of the batch holding the record, None when no batch line was printed for it.
    """
    if section.skipped or section.topic not in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC):
        return None
    if control_fields(match)[0] is not None:
        return None
    if section.topic == CONSUMER_OFFSETS_TOPIC and (batch is None or not batch["is_transactional"]):
        return None
    key, payload = key_and_payload(match.group("tail"))
    row: dict[str, Any] = {
        "topic": section.topic,
        "partition": section.partition,
        "record_offset": int(match.group("offset")),
        "segment_base_offset": section.base_offset,
        "source_file": source_file,
        "source_format": SOURCE_FORMAT,
    }
    if batch is not None:
        row.update(batch_base_offset=batch["base_offset"], position=batch["position"])
    if section.topic == TRANSACTION_STATE_TOPIC:
        row["record_timestamp"] = printed_timestamp(match)
        if batch is not None:
            row.update(
                batch_timestamp=batch["max_timestamp"],
                partition_leader_epoch=batch["partition_leader_epoch"],
                batch_is_transactional=batch["is_transactional"],
                batch_compression=batch["compression"],
                batch_producer_id=batch["producer_id"],
            )
        row.update(decoded_text(transaction_log_fields, key, payload))
    else:
        row.update(producer_id=batch["producer_id"], producer_epoch=batch["producer_epoch"])
        row.update(decoded_text(offset_commit_fields, key, payload))
    return row
