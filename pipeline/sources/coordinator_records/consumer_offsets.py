"""`__consumer_offsets` records: OffsetCommitKey and OffsetCommitValue; group metadata records are only named."""

from __future__ import annotations

from typing import Any

from pyspark.sql.pandas.types import to_arrow_schema

from pipeline.sources.coordinator_records.primitives import DecodeError, Reader
from pipeline.sources.coordinator_records.rows import CoordinatorRecords
from schemas.offset_commits import GROUP_METADATA_KEY_VERSION, OFFSET_COMMITS

OFFSET_COMMIT_KEY_VERSIONS = (0, 1)


def decode_offset_commit(key: bytes | None, value: bytes | None) -> dict[str, Any]:
    """OffsetCommitKey v0/v1 and OffsetCommitValue v0..v4 (null value: tombstone) as `offset_commits` columns.

    A GroupMetadataKey (version 2) gives only `key_version`: it is not an offset commit and the caller drops it.
    Fields decoded before a fault are kept; the fault is in `decode_error`.
    """
    row: dict[str, Any] = {}
    try:
        if key is None:
            raise DecodeError("record has no key")
        reader = Reader(key, "key")
        version = row["key_version"] = reader.int16("key version")
        if version == GROUP_METADATA_KEY_VERSION:
            return row
        if version not in OFFSET_COMMIT_KEY_VERSIONS:
            raise reader.fail(f"key version {version} is not an OffsetCommitKey (0, 1) or GroupMetadataKey (2)", 0)
        row["group"] = reader.string("group")
        row["committed_topic"] = reader.string("topic")
        row["committed_partition"] = reader.int32("partition")
        row["is_tombstone"] = value is None
        if value is not None:
            _decode_offset_commit_value(Reader(value, "value"), row)
    except DecodeError as exc:
        row["decode_error"] = str(exc)
    return row


def _decode_offset_commit_value(reader: Reader, row: dict[str, Any]) -> None:
    version = row["value_version"] = reader.int16("value version")
    if not 0 <= version <= 4:
        raise reader.fail(f"value version {version} is not an OffsetCommitValue version (0 to 4)", 0)
    row["committed_offset"] = reader.int64("offset")
    if version >= 3:
        row["leader_epoch"] = reader.int32("leader epoch")
    row["metadata"] = reader.compact_string("metadata") if version >= 4 else reader.string("metadata")
    row["commit_timestamp"] = reader.int64("commit timestamp")
    if version == 1:
        row["expire_timestamp"] = reader.int64("expire timestamp")
    if version >= 4:
        reader.tagged_fields({}, row)


OFFSET_COMMIT_DECODED = (
    "key_version",
    "group",
    "committed_topic",
    "committed_partition",
    "is_tombstone",
    "value_version",
    "committed_offset",
    "leader_epoch",
    "metadata",
    "commit_timestamp",
    "expire_timestamp",
    "decode_error",
)


def _offset_commit_values(key: bytes | None, value: bytes | None) -> tuple:
    return tuple(map(decode_offset_commit(key, value).get, OFFSET_COMMIT_DECODED))


# Group metadata records (key version 2) included, so the caller can count what it drops.
offset_commit_rows = CoordinatorRecords(
    to_arrow_schema(OFFSET_COMMITS),
    _offset_commit_values,
    OFFSET_COMMIT_DECODED,
    (
        ("batch_base_offset", "base_offset"),
        ("producer_id", "producer_id"),
        ("producer_epoch", "producer_epoch"),
        ("position", "position"),
    ),
    with_timestamp=False,
)
