"""`replay` (a scratch table of each run): the columns the replay adds to every batch row.

FILE_ORDER_COLUMNS: what the entry's neighbours in its replica's files were (the §6.1 order checks).

PRODUCER_STATE_COLUMNS: each is the state the broker held for the row's producer before appending the row
(spec §6.0); rows that carry no producer state (`is_producer_row` false) have them null.

`pipeline.audit.replay.plan` writes them; the FMT/IDX and SEQ/EPO/TXN/SNP checks read them.
"""

from pyspark.sql import types as T

FILE_ORDER_COLUMNS = T.StructType(
    [
        T.StructField("previous_readable_last_offset", T.LongType(), True),  # of the previous entry, if readable
        T.StructField("max_last_offset_before", T.LongType(), True),  # highest readable last offset before
        T.StructField("max_leader_epoch_before", T.IntegerType(), True),  # highest v2 leader epoch before
        T.StructField("readable_bytes_before", T.LongType(), True),  # bytes of the readable entries before
        T.StructField("is_segment_first", T.BooleanType(), True),
        T.StructField("next_entry_segment_base_offset", T.LongType(), True),
    ]
)

PRODUCER_STATE_COLUMNS = T.StructType(
    [
        T.StructField("state_epoch", T.IntegerType(), True),  # highest epoch before the row: the fencing epoch
        T.StructField("epoch_run", T.IntegerType(), True),  # highest epoch up to and with the row
        T.StructField("prev_timestamp", T.LongType(), True),
        T.StructField("prev_is_marker", T.BooleanType(), True),
        T.StructField("prev_control_type", T.IntegerType(), True),
        T.StructField("prev_epoch", T.IntegerType(), True),
        # of a TV2 ABORT one above the data it closes: the epoch of the producer's next data (a fence if two above)
        T.StructField("next_data_epoch", T.IntegerType(), True),
        T.StructField("state_coordinator_epoch", T.IntegerType(), True),  # highest marker coordinator epoch
        T.StructField("txn_group", T.LongType(), True),  # markers before the row
        T.StructField("seen_txn_data", T.BooleanType(), True),
        T.StructField("seen_plain_data", T.BooleanType(), True),
        T.StructField("txn_first_offset", T.LongType(), True),  # the open transaction's first offset
        T.StructField("txn_max_epoch", T.IntegerType(), True),  # the open transaction's highest data epoch
        T.StructField("txn_start_timestamp", T.LongType(), True),
        T.StructField("run_first_pid_row", T.IntegerType(), True),  # the producer's row that began the epoch run
        T.StructField("seq_row", T.BooleanType(), True),  # client data at the run's epoch: sequence-checked
        T.StructField("txn_open", T.BooleanType(), True),
        T.StructField("state_expired", T.BooleanType(), True),  # silent past producer.id.expiration.ms
        # the producer's version and its source: 1/assumed, 2/inferred, 2/coordinator, 2/configured, ...
        T.StructField("transaction_version", T.StringType(), True),
        # judged as TV2: configured, recorded by the coordinator for the row's transaction, or TV2 before it
        T.StructField("is_tv2", T.BooleanType(), True),
        T.StructField("run_pos", T.IntegerType(), True),  # position in its part of the epoch run, from 1
        T.StructField("prev_last_sequence", T.IntegerType(), True),
        T.StructField("wrap_inside", T.LongType(), True),  # 1 when the batch's own range wraps
        T.StructField("u_base", T.LongType(), True),  # sequences unwrapped into int64
        T.StructField("u_last", T.LongType(), True),
        T.StructField("position_before", T.LongType(), True),  # highest unwrapped sequence written in the run
        T.StructField("min_base_before", T.LongType(), True),
        # against the duplicate window (the run's last five batches before the row):
        T.StructField("prev_run_offset", T.LongType(), True),  # offset of the newest of them
        T.StructField("exact_in_window", T.BooleanType(), True),  # one has the same (base, last) sequences
        T.StructField("original_offset", T.LongType(), True),  # offset of the newest with the same base sequence
        T.StructField("overlaps_window", T.BooleanType(), True),  # one's unwrapped range overlaps the row's
    ]
)
