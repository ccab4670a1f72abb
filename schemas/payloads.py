"""`payloads`: one row per data record of the v2 batches, written only by a deep ingest (`--deep`).

A record's payload is summarised by a hash of its key, value and headers, computed where the segment is decoded,
so the payload rules (§6.11) compare records without the bytes ever leaving the decode task. Control batches,
batches whose CRC does not match and batches whose records do not parse (FMT-004/FMT-006) have no rows.
"""

from pyspark.sql import types as T

PAYLOADS = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("producer_id", T.LongType(), False),
        T.StructField("base_offset", T.LongType(), False),
        T.StructField("offset", T.LongType(), False),
        T.StructField("producer_epoch", T.IntegerType(), False),
        T.StructField("sequence", T.IntegerType(), False),
        T.StructField("is_transactional", T.BooleanType(), False),
        T.StructField("payload_hash", T.BinaryType(), True),
        T.StructField("source_file", T.StringType(), False),
        T.StructField("position", T.LongType(), False),
        T.StructField("broker_id", T.IntegerType(), True),
        T.StructField("cluster_id", T.StringType(), True),
    ]
)

PAYLOADS_PARTITION_BY = ["cluster_id", "topic"]

# What each column means, one line each; docs/tables.md shows them (`python -m pipeline.tables.catalog`).
COLUMN_MEANINGS = {
    "topic": "the partition's topic",
    "partition": "the partition number",
    "producer_id": "producerId of the record's batch (-1: none)",
    "base_offset": "first offset of the record's batch",
    "offset": "the record's offset: base offset + offset delta",
    "producer_epoch": "producerEpoch of the record's batch (-1: none)",
    "sequence": "the record's sequence: baseSequence + offset delta, wrapping past 2147483647 (-1: none)",
    "is_transactional": "the record's batch is part of a transaction",
    "payload_hash": "16-byte BLAKE2b of the key, value and headers (each length-prefixed, null as -1); null for a "
    "record with no key, no value and no headers",
    "source_file": "path of the segment the record was read from",
    "position": "byte position of the record's batch in the segment",
    "broker_id": "broker id of the log dir the record was read from (`meta.properties`); null when unknown",
    "cluster_id": '`cluster.id` of the log dir (`meta.properties`), else `ingest.cluster_id`; "" when unknown',
}
