"""The broker's per-producer state machine (spec §6.0), compiled: one pass over a producer's batches.

`ProducerAppendInfo` keeps, per (partition, producer id), the fencing epoch, the last five batches of the
current epoch (the duplicate window), the open transaction and the last coordinator epoch. This kernel keeps
the same state while it walks the rows of each producer in offset order and writes, per row, the state the
broker held before appending it. The rows arrive grouped by producer (`starts` marks each group's first row)
and sorted by (base offset, segment, position) inside a group; rows whose `producer_row` is false carry no
producer state and get none.

Sequences are unwrapped into int64 (a large backwards step between batches, or a batch whose last sequence is
below its base, is a wrap) so that "highest sequence written" is a running maximum. Sequence state lives in an
epoch run (the rows that share one fencing epoch, i.e. the running maximum of epochs) and in it separately for
the rows that take part in sequence checks (`seq_row`: client data at the run's epoch) and for the others, so
markers and fenced batches never take a slot of the duplicate window.
"""

from __future__ import annotations

import numba
import numpy as np

from pipeline.audit.arrow_columns import NONE
from pipeline.audit.columns import SEQ_SPAN
from pipeline.sources.jit import CACHE_KERNELS

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
DUPLICATE_WINDOW = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN
WRAP_JUMP = 1 << 30  # a backwards step larger than this between batches is a wrap, not a retry

# transaction_version codes (labels in pipeline.audit.replay)
VERSION_NONE, VERSION_ASSUMED_1, VERSION_INFERRED_1, VERSION_INFERRED_2, VERSION_CONFIGURED = range(5)

# row flags (`flags` input): bit set = true
IS_CONTROL, IS_TRANSACTIONAL, IS_COORDINATOR_TOPIC, PRODUCER_ROW = 1, 2, 4, 8
# `marker` input: 1 marker, 0 not a marker, -1 unknown (a control batch whose record did not decode)

# int64 outputs, one column each (NONE = null)
(
    STATE_EPOCH,
    EPOCH_RUN,
    PREV_TIMESTAMP,
    PREV_CONTROL_TYPE,
    PREV_EPOCH,
    STATE_COORDINATOR_EPOCH,
    TXN_GROUP,
    TXN_FIRST_OFFSET,
    TXN_MAX_EPOCH,
    TXN_START_TIMESTAMP,
    RUN_FIRST_PID_ROW,
    RUN_POS,
    PREV_LAST_SEQUENCE,
    WRAP_INSIDE,
    U_BASE,
    U_LAST,
    POSITION_BEFORE,
    MIN_BASE_BEFORE,
    PREV_RUN_OFFSET,
    ORIGINAL_OFFSET,
    VERSION,
) = range(21)
LONG_OUTPUTS = 21
# boolean outputs as int8 (-1 = null)
(
    PREV_IS_MARKER,
    SEEN_TXN_DATA,
    SEEN_PLAIN_DATA,
    SEQ_ROW,
    TXN_OPEN,
    STATE_EXPIRED,
    IS_TV2,
    EXACT_IN_WINDOW,
    OVERLAPS_WINDOW,
) = range(9)
FLAG_OUTPUTS = 9
# a duplicate-window slot: base, last, unwrapped base and last, offset
BASE, LAST, U_BASE_SLOT, U_LAST_SLOT, OFFSET = range(5)


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def replay_producers(
    starts, flags, marker, epoch, control_type, coordinator_epoch, base_offset, timestamp, base_seq, last_seq,
    expiration_ms, version_mode,
):  # fmt: skip
    """Per-row producer state; returns (int64 outputs, int8 flags), one row per output.

    `version_mode` 0 infers the transaction version from the markers (`auto`), 1 or 2 is the configured one.
    """
    n = starts.shape[0]
    longs = np.full((LONG_OUTPUTS, n), NONE, dtype=np.int64)
    bools = np.full((FLAG_OUTPUTS, n), -1, dtype=np.int8)
    # sequence state per epoch run, [0] for rows outside the sequence checks and [1] for seq rows
    ring = np.empty((2, DUPLICATE_WINDOW, 5), dtype=np.int64)
    ring_len = np.zeros(2, dtype=np.int64)
    ring_head = np.zeros(2, dtype=np.int64)
    run_count = np.zeros(2, dtype=np.int64)
    prev_last = np.zeros(2, dtype=np.int64)
    wraps_between = np.zeros(2, dtype=np.int64)
    wraps_inside = np.zeros(2, dtype=np.int64)
    max_u_last = np.zeros(2, dtype=np.int64)
    min_u_base = np.zeros(2, dtype=np.int64)

    group_start = 0
    i = 0
    while i < n:
        if flags[i] & PRODUCER_ROW == 0:
            i += 1
            continue
        if starts[i]:
            group_start = i
            pid_row = 0
            epoch_max = NONE
            coordinator_max = NONE
            markers = 0
            seen_txn = False
            seen_plain = False
            first_offset = NONE
            first_timestamp = NONE
            group_max_epoch = NONE
            run_epoch = NONE
            run_first = 0
            tv2_before = False
        pid_row += 1
        e = epoch[i]
        is_control = flags[i] & IS_CONTROL != 0
        is_data = not is_control
        is_marker = marker[i] == 1
        txn_data = is_data and flags[i] & IS_TRANSACTIONAL != 0

        # fencing epoch: running max of earlier epochs; the epoch run is the max including this row
        if pid_row > 1:
            longs[STATE_EPOCH, i] = epoch_max
            longs[PREV_TIMESTAMP, i] = timestamp[i - 1]
            bools[PREV_IS_MARKER, i] = marker[i - 1]
            longs[PREV_CONTROL_TYPE, i] = control_type[i - 1]
            longs[PREV_EPOCH, i] = epoch[i - 1]
            bools[SEEN_TXN_DATA, i] = seen_txn
            bools[SEEN_PLAIN_DATA, i] = seen_plain
        new_epoch_max = e if epoch_max == NONE or e > epoch_max else epoch_max
        longs[EPOCH_RUN, i] = new_epoch_max
        longs[STATE_COORDINATOR_EPOCH, i] = coordinator_max
        longs[TXN_GROUP, i] = markers

        # the open transaction: the earliest transactional data since the last marker, and its highest epoch
        txn_open = first_offset != NONE
        longs[TXN_FIRST_OFFSET, i] = first_offset
        longs[TXN_START_TIMESTAMP, i] = first_timestamp
        longs[TXN_MAX_EPOCH, i] = group_max_epoch
        bools[TXN_OPEN, i] = txn_open
        # expired: silent for producer.id.expiration.ms with no transaction open
        timed = pid_row > 1 and timestamp[i] != NONE and timestamp[i - 1] != NONE
        bools[STATE_EXPIRED, i] = timed and not txn_open and timestamp[i] - timestamp[i - 1] >= expiration_ms
        if new_epoch_max != run_epoch:
            run_epoch = new_epoch_max
            run_first = pid_row
            for s in range(2):
                ring_len[s] = 0
                ring_head[s] = 0
                run_count[s] = 0
                wraps_between[s] = 0
                wraps_inside[s] = 0
        longs[RUN_FIRST_PID_ROW, i] = run_first
        seq_row = is_data and e == new_epoch_max and flags[i] & IS_COORDINATOR_TOPIC == 0
        bools[SEQ_ROW, i] = seq_row

        # transaction version (auto): a commit that bumps the epoch of its data makes later rows TV2
        closing = is_marker and txn_open
        bump = e - group_max_epoch if closing else 0
        tv2_commit = closing and control_type[i] == CONTROL_COMMIT and bump == 1
        bools[IS_TV2, i] = tv2_before if version_mode == 0 else version_mode == 2
        tv2_before = tv2_before or tv2_commit

        # the sequence window of the row's part of the epoch run
        s = 1 if seq_row else 0
        bseq = base_seq[i]
        lseq = last_seq[i]
        run_count[s] += 1
        longs[RUN_POS, i] = run_count[s]
        wrap_between = 0
        if run_count[s] > 1:
            longs[PREV_LAST_SEQUENCE, i] = prev_last[s]
            if bseq < prev_last[s] - WRAP_JUMP:
                wrap_between = 1
        wrap_inside = 1 if lseq < bseq else 0
        longs[WRAP_INSIDE, i] = wrap_inside
        wraps_between[s] += wrap_between
        wraps_before = wraps_between[s] + wraps_inside[s]
        u_base = bseq + wraps_before * SEQ_SPAN
        u_last = lseq + (wraps_before + wrap_inside) * SEQ_SPAN
        longs[U_BASE, i] = u_base
        longs[U_LAST, i] = u_last
        if run_count[s] > 1:
            longs[POSITION_BEFORE, i] = max_u_last[s]
            longs[MIN_BASE_BEFORE, i] = min_u_base[s]
        # the duplicate window, newest first: an exact repeat, the newest same-base batch, any overlap
        exact = False
        overlaps = False
        for k in range(ring_len[s]):
            slot = (ring_head[s] - 1 - k) % DUPLICATE_WINDOW
            if k == 0:
                longs[PREV_RUN_OFFSET, i] = ring[s, slot, OFFSET]
            if ring[s, slot, BASE] == bseq:
                exact = exact or ring[s, slot, LAST] == lseq
                if longs[ORIGINAL_OFFSET, i] == NONE:
                    longs[ORIGINAL_OFFSET, i] = ring[s, slot, OFFSET]
            overlaps = overlaps or (ring[s, slot, U_BASE_SLOT] <= u_last and u_base <= ring[s, slot, U_LAST_SLOT])
        bools[EXACT_IN_WINDOW, i] = exact
        bools[OVERLAPS_WINDOW, i] = overlaps

        # append the row to the state
        slot = ring_head[s]
        ring[s, slot, BASE] = bseq
        ring[s, slot, LAST] = lseq
        ring[s, slot, U_BASE_SLOT] = u_base
        ring[s, slot, U_LAST_SLOT] = u_last
        ring[s, slot, OFFSET] = base_offset[i]
        ring_head[s] = (slot + 1) % DUPLICATE_WINDOW
        if ring_len[s] < DUPLICATE_WINDOW:
            ring_len[s] += 1
        if run_count[s] == 1 or u_last > max_u_last[s]:
            max_u_last[s] = u_last
        if run_count[s] == 1 or u_base < min_u_base[s]:
            min_u_base[s] = u_base
        prev_last[s] = lseq
        wraps_inside[s] += wrap_inside

        epoch_max = new_epoch_max
        if is_marker:
            if coordinator_epoch[i] != NONE and (coordinator_max == NONE or coordinator_epoch[i] > coordinator_max):
                coordinator_max = coordinator_epoch[i]
            markers += 1
            first_offset = NONE
            first_timestamp = NONE
            group_max_epoch = NONE
        elif txn_data:
            if first_offset == NONE or base_offset[i] < first_offset:
                first_offset = base_offset[i]
                first_timestamp = timestamp[i]
            elif base_offset[i] == first_offset and timestamp[i] > first_timestamp:
                first_timestamp = timestamp[i]
            if group_max_epoch == NONE or e > group_max_epoch:
                group_max_epoch = e
        seen_txn = seen_txn or txn_data
        seen_plain = seen_plain or (is_data and not txn_data)

        i += 1
        if i == n or starts[i]:
            _fill_version(longs, bools, flags, marker, epoch, control_type, group_start, i, version_mode)
    return longs, bools


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def _fill_version(longs, bools, flags, marker, epoch, control_type, lo, hi, version_mode):
    """The producer's transaction version, a conclusion over all its rows (spec §6.9)."""
    tv2 = False
    tv1 = False
    transactional = False
    for i in range(lo, hi):
        transactional = transactional or flags[i] & IS_TRANSACTIONAL != 0
        if marker[i] == 1 and bools[TXN_OPEN, i] == 1:
            bump = epoch[i] - longs[TXN_MAX_EPOCH, i]
            tv2 = tv2 or (control_type[i] == CONTROL_COMMIT and bump == 1)
            tv1 = tv1 or bump == 0
    if version_mode != 0:
        code = VERSION_CONFIGURED if transactional else VERSION_NONE
    elif tv2:
        code = VERSION_INFERRED_2
    elif tv1:
        code = VERSION_INFERRED_1
    elif transactional:
        code = VERSION_ASSUMED_1
    else:
        code = VERSION_NONE
    for i in range(lo, hi):
        longs[VERSION, i] = code
