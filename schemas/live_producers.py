"""`live_producers`: what each partition's leader reported of its producers (DescribeProducers, KIP-664) when a
`kafka://` input was planned: the leader's `ProducerStateManager` at the end of its log.

One row per producer the leader reports; a partition it reports none for has one row with null producer fields, so
every partition described is visible (a producer the log holds but the leader forgot shows only that way). The
leader's -1 for no open transaction is null in `current_txn_start_offset`, as in `producer_snapshots`.
`settled` says the partition's high watermark was the same before and after the request: its state then belongs
to exactly the batches the run read, and the rules compare it field by field.
"""

from pyspark.sql import types as T

LIVE_PRODUCERS = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("producer_id", T.LongType(), True),
        T.StructField("producer_epoch", T.IntegerType(), True),
        T.StructField("last_sequence", T.IntegerType(), True),
        T.StructField("last_timestamp", T.LongType(), True),
        T.StructField("coordinator_epoch", T.IntegerType(), True),
        T.StructField("current_txn_start_offset", T.LongType(), True),
        T.StructField("described_at", T.LongType(), False),
        T.StructField("log_end_offset", T.LongType(), False),
        T.StructField("read_end_offset", T.LongType(), False),
        T.StructField("settled", T.BooleanType(), False),
        T.StructField("source", T.StringType(), False),
        T.StructField("broker_id", T.IntegerType(), True),
        T.StructField("cluster_id", T.StringType(), True),
    ]
)

LIVE_PRODUCERS_PARTITION_BY = ["cluster_id", "topic"]

# What each column means, one line each; docs/tables.md shows them (`python -m pipeline.tables.catalog`).
COLUMN_MEANINGS = {
    "topic": "the partition's topic",
    "partition": "the partition number",
    "producer_id": "a producer id the leader holds state for; null: the leader reported none for the partition",
    "producer_epoch": "its epoch, as the leader holds it",
    "last_sequence": "the last sequence the leader accepted from it",
    "last_timestamp": "max timestamp of its last batch, as the leader holds it",
    "coordinator_epoch": "coordinator epoch of its last marker (-1: none)",
    "current_txn_start_offset": "first offset of its open transaction; null when none",
    "described_at": "wall-clock time of the request on the machine that sent it, epoch milliseconds",
    "log_end_offset": "the partition's high watermark when it was described",
    "read_end_offset": "where the run's read of the partition ended (the high watermark, or `kafka.end`'s offset)",
    "settled": "the high watermark was the same before and after the request: the state is that of the batches read",
    "source": "the `kafka://` input the leader was asked through",
    "broker_id": "the leader's broker id",
    "cluster_id": "the cluster id the brokers report (or the one `--cluster-input` gave)",
}
