"""`transaction_log`: one row per record of the `__transaction_state` partitions (spec §5.1).

Each row holds the decoded TransactionLogKey/TransactionLogValue, the record's offset and timestamp, and the
fields of its batch that the §6.7/§6.8 rules need (leader epoch for coordinator epochs, timestamp for expiry,
the transactional flag, compression and producer id that TSL-015 checks). A tombstone (null value) has
`is_tombstone` true and null value fields. `state` is the stored status byte, also when it is not a known
state; `state_name` is null then. Tagged fields of value version 1 that the record does not carry hold their
defaults (-1, -1, 0, -1); version 0 has no such fields, so they are null.

A record that cannot be decoded (unknown key or value version, short buffer, a length past the end, or a
batch whose records cannot be read) keeps what was decoded before the fault and names it in
`decode_error`. Rows from kafka-dump-log text leave null what the text does not print (the value version
and start timestamp of the pre-4.0 text format, for instance); that format prints an empty set for both a
null and an empty partition array, read as an empty array.
"""

from pyspark.sql import types as T

TRANSACTION_STATE_TOPIC = "__transaction_state"

# TransactionState ids (spec §5.2); the index is the id.
TRANSACTION_STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)
EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD, PREPARE_EPOCH_FENCE = (
    TRANSACTION_STATES.index(name) for name in TRANSACTION_STATES
)
PREPARE_STATES = (PREPARE_COMMIT, PREPARE_ABORT)
COMPLETE_STATES = (COMPLETE_COMMIT, COMPLETE_ABORT)

# What a version-1 value means when it does not carry a tagged field (TransactionLogValue.json defaults).
V1_TAGGED_FIELD_DEFAULTS = {
    "previous_producer_id": -1,
    "next_producer_id": -1,
    "client_transaction_version": 0,
    "next_producer_epoch": -1,
}

TRANSACTION_PARTITIONS = T.ArrayType(
    T.StructType(
        [
            T.StructField("topic", T.StringType(), True),
            T.StructField("partitions", T.ArrayType(T.IntegerType(), True), True),
        ]
    ),
    True,
)

TRANSACTION_LOG = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("transactional_id", T.StringType(), True),
        T.StructField("producer_id", T.LongType(), True),
        T.StructField("producer_epoch", T.IntegerType(), True),
        T.StructField("state", T.IntegerType(), True),
        T.StructField("state_name", T.StringType(), True),
        T.StructField("record_offset", T.LongType(), True),
        T.StructField("record_timestamp", T.LongType(), True),
        T.StructField("key_version", T.IntegerType(), True),
        T.StructField("value_version", T.IntegerType(), True),
        T.StructField("is_tombstone", T.BooleanType(), True),
        T.StructField("previous_producer_id", T.LongType(), True),
        T.StructField("next_producer_id", T.LongType(), True),
        T.StructField("next_producer_epoch", T.IntegerType(), True),
        T.StructField("transaction_timeout_ms", T.IntegerType(), True),
        T.StructField("partitions", TRANSACTION_PARTITIONS, True),
        T.StructField("last_update_timestamp_ms", T.LongType(), True),
        T.StructField("start_timestamp_ms", T.LongType(), True),
        T.StructField("client_transaction_version", T.IntegerType(), True),
        T.StructField("batch_base_offset", T.LongType(), True),
        T.StructField("batch_timestamp", T.LongType(), True),  # the batch's max timestamp
        T.StructField("partition_leader_epoch", T.IntegerType(), True),
        T.StructField("batch_is_transactional", T.BooleanType(), True),
        T.StructField("batch_compression", T.IntegerType(), True),
        T.StructField("batch_producer_id", T.LongType(), True),
        T.StructField("decode_error", T.StringType(), True),
        T.StructField("segment_base_offset", T.LongType(), True),
        T.StructField("position", T.LongType(), True),  # of the batch in the segment
        T.StructField("source_file", T.StringType(), False),
        T.StructField("source_format", T.StringType(), False),
        T.StructField("broker_id", T.IntegerType(), True),
        T.StructField("cluster_id", T.StringType(), True),
    ]
)

TRANSACTION_LOG_PARTITION_BY = ["cluster_id", "topic"]

# What each column means, one line each; docs/tables.md shows them (`python -m pipeline.tables.catalog`).
COLUMN_MEANINGS = {
    "topic": "the `__transaction_state` topic",
    "partition": "the `__transaction_state` partition",
    "transactional_id": "key: the transactional id",
    "producer_id": "ProducerId",
    "producer_epoch": "ProducerEpoch",
    "state": "TransactionStatus byte as stored",
    "state_name": "name of the state; null for an unknown id",
    "record_offset": "offset of the record",
    "record_timestamp": "timestamp of the record",
    "key_version": "key version",
    "value_version": "value version (0 or 1); null for a tombstone",
    "is_tombstone": "null value: the id expired",
    "previous_producer_id": "PreviousProducerId (v1 tagged field)",
    "next_producer_id": "NextProducerId (v1 tagged field)",
    "next_producer_epoch": "NextProducerEpoch (v1 tagged field)",
    "transaction_timeout_ms": "TransactionTimeoutMs",
    "partitions": "TransactionPartitions: topics with partition ids",
    "last_update_timestamp_ms": "TransactionLastUpdateTimestampMs",
    "start_timestamp_ms": "TransactionStartTimestampMs",
    "client_transaction_version": "ClientTransactionVersion (v1 tagged field)",
    "batch_base_offset": "base offset of the record's batch",
    "batch_timestamp": "the batch's max timestamp",
    "partition_leader_epoch": "leader epoch of the batch (the coordinator epoch)",
    "batch_is_transactional": "the batch's transactional flag",
    "batch_compression": "the batch's codec id",
    "batch_producer_id": "the batch's producer id",
    "decode_error": "why the record could not be decoded fully; null when it could",
    "segment_base_offset": "base offset of the segment holding the entry (its file name)",
    "position": "byte position of the batch in the segment",
    "source_file": "path of the file the row was read from, as given under --input",
    "source_format": "how the input was read: `segment` (log dir), `dumplog` (kafka-dump-log text) or `columnar`",
    "broker_id": "broker id of the log dir the row was read from (`meta.properties`); null when unknown",
    "cluster_id": '`cluster.id` of the log dir (`meta.properties`), else `ingest.cluster_id`; "" when unknown',
}
