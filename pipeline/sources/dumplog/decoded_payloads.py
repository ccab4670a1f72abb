"""Records printed by `--transaction-log-decoder` (`__transaction_state`) and `--offsets-decoder`
(`__consumer_offsets`), in the text of 0.11-3.x and the JSON of 3.5+/4.x, as transaction-log and offset-commit
fields; what the text does not decode becomes a `decode_error`, never an exception.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from pipeline.sources.dumplog.grammar import INT
from pipeline.sources.dumplog.rows import in_range
from schemas.offset_commits import GROUP_METADATA_KEY_VERSION
from schemas.transaction_log import (
    TRANSACTION_STATES,
    V1_TAGGED_FIELD_DEFAULTS,
)

DELETED_VALUE = "<DELETE>"  # the payload the decoders print for a tombstone
_KEY_PREFIX = " key: "
_PAYLOAD_PREFIX = " payload: "
_JSON = json.JSONDecoder()
_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
# 2.5-3.x text; 0.11-2.4 printed no `transaction_metadata::` prefix and the partitions as `Set(t-0, u-1)`.
_TXN_LOG_TEXT_KEY = re.compile(r"(?:transaction_metadata::)?transactionalId=(?P<transactional_id>.*)")
_TXN_LOG_TEXT_VALUE = re.compile(
    rf"producerId:(?P<producer_id>{INT}),producerEpoch:(?P<producer_epoch>{INT}),state=(?P<state>\w+)"
    rf",partitions=(?:\[(?P<list>[^\]]*)\]|Set\((?P<set>[^)]*)\))"
    rf",txnLastUpdateTimestamp=(?P<last_update>{INT}),txnTimeoutMs=(?P<timeout>{INT})"
)
# 2.5-3.4 `offset_commit::group=G,partition=T-P` / `offset=N[,metadata=M]`; 0.11-2.4 `offset::G:T:P` / `N[:M]`.
_OFFSET_COMMIT_TEXT_KEY = re.compile(r"offset_commit::group=(?P<group>.*),partition=(?P<topic>.+)-(?P<partition>\d+)")
_OFFSET_COMMIT_TEXT_VALUE = re.compile(rf"offset=(?P<offset>{INT})(?:,metadata=(?P<metadata>.*))?")
_OLD_OFFSET_TEXT_KEY = re.compile(r"offset::(?P<group>.*):(?P<topic>[^:]+):(?P<partition>\d+)")
_OLD_OFFSET_TEXT_VALUE = re.compile(rf"(?P<offset>{INT})(?::(?P<metadata>.*))?")
_GROUP_METADATA_TEXT_KEY = re.compile(r"group_metadata::group=.*")
_UNKNOWN_KEY_TEXT = re.compile(
    rf"unknown::version=(?P<version>{INT})|Unknown record type (?P<type>{INT}) at offset {INT}, skipping\."
)
_DECODER_ERROR_TEXT = re.compile(rf"Error at offset {INT}, skipping\. (?P<reason>.*)")
_TOPIC_PARTITION = re.compile(r"(?P<topic>.+)-(?P<partition>\d+)")


class _TextError(ValueError):
    """A printed key or payload that does not say what the decoder prints; the message becomes decode_error."""


def key_and_payload(tail: str) -> tuple[str | None, str | None]:
    """The printed key and payload of a record line's tail; None for what is not printed.

    A JSON key ends where its JSON ends, so a ` payload: ` inside it does not split it.
    """
    if tail.startswith(_PAYLOAD_PREFIX):
        return None, tail[len(_PAYLOAD_PREFIX) :]
    if not tail.startswith(_KEY_PREFIX):
        return None, None
    text = tail[len(_KEY_PREFIX) :]
    if text.startswith("{"):
        try:
            end = _JSON.raw_decode(text)[1]
        except ValueError:
            end = None
        if end == len(text):
            return text, None
        if end is not None and text.startswith(_PAYLOAD_PREFIX, end):
            return text[:end], text[end + len(_PAYLOAD_PREFIX) :]
    key, separator, payload = text.partition(_PAYLOAD_PREFIX)
    return key, payload if separator else None


def decoded_text(
    fields_of: Callable[[str, str | None, dict[str, Any]], None], key: str | None, payload: str | None
) -> dict[str, Any]:
    """The columns `fields_of` reads from a printed key and payload; a fault keeps what came before it."""
    fields: dict[str, Any] = {}
    try:
        if key is None and payload is None:
            raise _TextError("the dump does not print the record (no --print-data-log or decoder option)")
        if key is None:
            raise _TextError("record has no key")
        unknown = _UNKNOWN_KEY_TEXT.fullmatch(key)
        if unknown:
            fields["key_version"] = _checked(unknown.group("version") or unknown.group("type"), "int16", "key")
            raise _TextError(f"kafka-dump-log printed {key!r}")
        error = _DECODER_ERROR_TEXT.fullmatch(key)
        if error:
            raise _TextError(f"kafka-dump-log could not decode the record: {error.group('reason')}")
        fields_of(key, payload, fields)
    except _TextError as exc:
        fields["decode_error"] = str(exc)
    return fields


def _checked(value: Any, kind: str, name: str) -> int:
    """An integer of a Kafka type from text or JSON; anything else is a decode error, not a crash later."""
    bits = _INT_BITS[kind]
    bounds = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if isinstance(value, str) and re.fullmatch(INT, value):
        if not in_range(value, bounds):
            raise _TextError(f"{name} {value[:60]} is not an {kind}")
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not bounds[0] <= value <= bounds[1]:
        raise _TextError(f"{name} {value!r} is not an {kind}")
    return value


def _json_object(text: str, name: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise _TextError(f"{name} is not JSON: {exc}") from None
    if not isinstance(value, dict) or not isinstance(value.get("data"), dict):
        raise _TextError(f"{name} is not a decoder JSON object with a `data` object")
    return value


def _json_field(data: dict[str, Any], name: str, kind: str) -> Any:
    if name not in data:
        raise _TextError(f"{name} is not printed")
    value = data[name]
    if kind == "string":
        if not isinstance(value, str):
            raise _TextError(f"{name} {value!r} is not a string")
        return value
    return _checked(value, kind, name)


def _printed_version(wrapper: dict[str, Any], name: str) -> int:
    """The version a decoder JSON wrapper prints: `version` for values (`type` before apache/kafka#18505)."""
    return _checked(wrapper.get("version", wrapper.get("type")), "int16", f"{name} version")


def _state(value: Any) -> tuple[int, str | None]:
    """(state id, name) from a printed state: its name, or the id 4.x printed before KAFKA-20712."""
    if isinstance(value, str) and value in TRANSACTION_STATES:
        return TRANSACTION_STATES.index(value), value
    state = _checked(value, "int8", "state")
    return state, TRANSACTION_STATES[state] if 0 <= state < len(TRANSACTION_STATES) else None


def _text_partitions(printed: str) -> list[dict[str, Any]]:
    """`[t-0,u-1]` / `Set(t-0, u-1)` as the `partitions` column: one entry per topic, in printed order."""
    by_topic: dict[str, list[int]] = {}
    for item in filter(None, (part.strip() for part in printed.split(","))):
        topic_partition = _TOPIC_PARTITION.fullmatch(item)
        if topic_partition is None:
            raise _TextError(f"partition {item!r} is not <topic>-<partition>")
        partition = _checked(topic_partition.group("partition"), "int32", "partition")
        by_topic.setdefault(topic_partition.group("topic"), []).append(partition)
    return [{"topic": topic, "partitions": partitions} for topic, partitions in by_topic.items()]


def transaction_log_fields(key: str, payload: str | None, fields: dict[str, Any]) -> None:
    if key.startswith("{"):
        _json_transaction_log_fields(key, payload, fields)
        return
    printed_key = _TXN_LOG_TEXT_KEY.fullmatch(key)
    if printed_key is None:
        raise _TextError("key is not --transaction-log-decoder output")
    fields.update(key_version=0, transactional_id=printed_key.group("transactional_id"))
    fields["is_tombstone"] = payload == DELETED_VALUE
    if payload == DELETED_VALUE:
        return
    value = _TXN_LOG_TEXT_VALUE.fullmatch(payload or "")
    if value is None:
        raise _TextError("payload is not --transaction-log-decoder output")
    state, state_name = _state(value.group("state"))
    fields.update(
        producer_id=_checked(value.group("producer_id"), "int64", "producerId"),
        producer_epoch=_checked(value.group("producer_epoch"), "int16", "producerEpoch"),
        state=state,
        state_name=state_name,
        partitions=_text_partitions(value.group("list") if value.group("set") is None else value.group("set")),
        last_update_timestamp_ms=_checked(value.group("last_update"), "int64", "txnLastUpdateTimestamp"),
        transaction_timeout_ms=_checked(value.group("timeout"), "int32", "txnTimeoutMs"),
    )


def _json_transaction_log_fields(key: str, payload: str | None, fields: dict[str, Any]) -> None:
    """4.x JSON: `{"type":"0","data":{"transactionalId":...}}` and `{"version":"1","data":{...}}`."""
    printed_key = _json_object(key, "key")
    fields["key_version"] = _checked(printed_key.get("type"), "int16", "key type")
    if fields["key_version"] != 0:
        raise _TextError(f"key type {fields['key_version']} is not a TransactionLogKey (0)")
    fields["transactional_id"] = _json_field(printed_key["data"], "transactionalId", "string")
    fields["is_tombstone"] = payload == DELETED_VALUE
    if payload == DELETED_VALUE:
        return
    value = _json_object(payload or "", "payload")
    data = value["data"]
    version = fields["value_version"] = _printed_version(value, "value")
    if version >= 1:
        fields.update(V1_TAGGED_FIELD_DEFAULTS)
    fields["producer_id"] = _json_field(data, "producerId", "int64")
    fields["producer_epoch"] = _json_field(data, "producerEpoch", "int16")
    fields["transaction_timeout_ms"] = _json_field(data, "transactionTimeoutMs", "int32")
    if "transactionStatus" not in data:
        raise _TextError("transactionStatus is not printed")
    fields["state"], fields["state_name"] = _state(data["transactionStatus"])
    fields["partitions"] = _json_partitions(data.get("transactionPartitions"))
    fields["last_update_timestamp_ms"] = _json_field(data, "transactionLastUpdateTimestampMs", "int64")
    fields["start_timestamp_ms"] = _json_field(data, "transactionStartTimestampMs", "int64")
    for column, name, kind in (
        ("previous_producer_id", "previousProducerId", "int64"),
        ("next_producer_id", "nextProducerId", "int64"),
        ("client_transaction_version", "clientTransactionVersion", "int16"),
        ("next_producer_epoch", "nextProducerEpoch", "int16"),
    ):
        if name in data:
            fields[column] = _json_field(data, name, kind)


def _json_partitions(printed: Any) -> list[dict[str, Any]] | None:
    if printed is None:
        return None
    if not isinstance(printed, list) or not all(isinstance(entry, dict) for entry in printed):
        raise _TextError("transactionPartitions is not a list of objects")
    partitions = []
    for entry in printed:
        ids = entry.get("partitionIds")
        if not isinstance(ids, list):
            raise _TextError("partitionIds is not a list")
        partitions.append(
            {
                "topic": _json_field(entry, "topic", "string"),
                "partitions": [_checked(partition, "int32", "partition id") for partition in ids],
            }
        )
    return partitions


def offset_commit_fields(key: str, payload: str | None, fields: dict[str, Any]) -> None:
    if key.startswith("{"):
        _json_offset_commit_fields(key, payload, fields)
        return
    if _GROUP_METADATA_TEXT_KEY.fullmatch(key):
        fields["key_version"] = GROUP_METADATA_KEY_VERSION
        return
    printed_key = _OFFSET_COMMIT_TEXT_KEY.fullmatch(key)
    value_pattern = _OFFSET_COMMIT_TEXT_VALUE
    if printed_key is None:
        printed_key, value_pattern = _OLD_OFFSET_TEXT_KEY.fullmatch(key), _OLD_OFFSET_TEXT_VALUE
    if printed_key is None:
        raise _TextError("key is not --offsets-decoder output")
    fields.update(
        group=printed_key.group("group"),
        committed_topic=printed_key.group("topic"),
        committed_partition=_checked(printed_key.group("partition"), "int32", "partition"),
        is_tombstone=payload == DELETED_VALUE,
    )
    if payload == DELETED_VALUE:
        return
    value = value_pattern.fullmatch(payload or "")
    if value is None:
        raise _TextError("payload is not --offsets-decoder output")
    # The decoders print the metadata only when it is not empty.
    fields.update(
        committed_offset=_checked(value.group("offset"), "int64", "offset"), metadata=value.group("metadata") or ""
    )


def _json_offset_commit_fields(key: str, payload: str | None, fields: dict[str, Any]) -> None:
    """3.5+ JSON: `{"type":"1","data":{"group","topic","partition"}}` and `{"version":"3","data":{...}}`;
    0.11-2.4 printed a group metadata key as `{"metadata":"<group>"}`."""
    try:
        legacy_group_key = json.loads(key)
    except ValueError:
        legacy_group_key = None
    if isinstance(legacy_group_key, dict) and set(legacy_group_key) == {"metadata"}:
        fields["key_version"] = GROUP_METADATA_KEY_VERSION
        return
    printed_key = _json_object(key, "key")
    version = fields["key_version"] = _checked(printed_key.get("type"), "int16", "key type")
    if version == GROUP_METADATA_KEY_VERSION:
        return
    if version not in (0, 1):
        raise _TextError(f"key type {version} is not an OffsetCommitKey (0, 1) or GroupMetadataKey (2)")
    data = printed_key["data"]
    fields["group"] = _json_field(data, "group", "string")
    fields["committed_topic"] = _json_field(data, "topic", "string")
    fields["committed_partition"] = _json_field(data, "partition", "int32")
    fields["is_tombstone"] = payload == DELETED_VALUE
    if payload == DELETED_VALUE:
        return
    value = _json_object(payload or "", "payload")
    data = value["data"]
    version = fields["value_version"] = _printed_version(value, "value")
    fields["committed_offset"] = _json_field(data, "offset", "int64")
    if version >= 3:
        fields["leader_epoch"] = _json_field(data, "leaderEpoch", "int32")
    fields["metadata"] = _json_field(data, "metadata", "string")
    fields["commit_timestamp"] = _json_field(data, "commitTimestamp", "int64")
    if version == 1:
        fields["expire_timestamp"] = _json_field(data, "expireTimestamp", "int64")
