"""`snapshot_states` (a scratch table of each run): the replay's state of a snapshot entry's producer at the
snapshot offset, one row per (partition, producer, snapshot offset, open transaction) the snapshots name.

The `replay_*` columns are what the producer-state snapshot holds, from the batches below the offset, with the
file's "none" values (last sequence -1, last offset -1, offset delta 0, coordinator epoch -1); all are null for a
producer without batches in the partition. `pipeline.audit.replay.snapshot_states` writes it; the SNP checks read it.
"""

from pyspark.sql import types as T

SNAPSHOT_STATES = T.StructType(
    [
        T.StructField("cluster_id", T.StringType(), True),
        T.StructField("topic", T.StringType(), True),
        T.StructField("partition", T.IntegerType(), True),
        T.StructField("producer_id", T.LongType(), True),
        T.StructField("snapshot_offset", T.LongType(), True),
        T.StructField("current_txn_first_offset", T.LongType(), True),  # the entry's open transaction
        T.StructField("replayed_batches", T.LongType(), True),  # the producer's batches below the offset
        T.StructField("replay_producer_epoch", T.IntegerType(), True),  # highest epoch among them
        T.StructField("replay_last_sequence", T.IntegerType(), True),  # of the last accepted data batch
        T.StructField("replay_last_offset", T.LongType(), True),
        T.StructField("replay_offset_delta", T.IntegerType(), True),
        T.StructField("replay_coordinator_epoch", T.IntegerType(), True),  # of the last marker
        T.StructField("replay_current_txn_first_offset", T.LongType(), True),  # open after the last batch
        T.StructField("txn_starts_at_f", T.BooleanType(), True),  # transactional data starts at the entry's offset
        T.StructField("marker_between_f_and_x", T.BooleanType(), True),  # a marker at or after it, below the offset
        T.StructField("marker_after_x", T.BooleanType(), True),  # a marker at or after the snapshot offset
    ]
)
