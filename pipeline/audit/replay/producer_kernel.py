"""The broker's per-producer state machine (spec §6.0), compiled: one pass over a producer's batches.

`ProducerAppendInfo` keeps, per (partition, producer id), the fencing epoch, the last five batches of the
current epoch (the duplicate window), the open transaction and the last coordinator epoch. This kernel keeps
the same state while it walks the rows of each producer in offset order and writes, per row, the state the
broker held before appending it. The rows arrive grouped by producer (`starts` marks each group's first row)
and sorted by (base offset, segment, position) inside a group; rows whose `producer_row` is false carry no
producer state and get none. They arrive a stretch at a time: what the walk holds between stretches (one
producer's state, like one entry of the broker's map) is a `ProducerCarry`, so memory does not grow with the
number of rows.

Sequences are unwrapped into int64 (a large backwards step between batches, or a batch whose last sequence is
below its base, is a wrap) so that "highest sequence written" is a running maximum. Sequence state lives in an
epoch run (the rows that share one fencing epoch, i.e. the running maximum of epochs) and in it separately for
the rows that take part in sequence checks (`seq_row`: client data at the run's epoch) and for the others, so
markers and fenced batches never take a slot of the duplicate window.
"""

from __future__ import annotations

import numba
import numpy as np

from pipeline.audit.core.columns import SEQ_SPAN
from pipeline.audit.replay.arrow_columns import NONE
from pipeline.sources.jit import CACHE_KERNELS
from schemas.batches import CONTROL_ABORT, CONTROL_COMMIT

DUPLICATE_WINDOW = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN
WRAP_JUMP = 1 << 30  # a backwards step larger than this between batches is a wrap, not a retry

# transaction_version codes (labels in pipeline.audit.replay.producer_arrow.version_labels)
(
    VERSION_NONE,
    VERSION_ASSUMED_1,
    VERSION_INFERRED_1,
    VERSION_INFERRED_2,
    VERSION_CONFIGURED,
    VERSION_COORDINATOR_1,
    VERSION_COORDINATOR_2,
) = range(7)

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
    NEXT_DATA_EPOCH,
) = range(22)
LONG_OUTPUTS = 22
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
# sequence state of an epoch run, one row for the rows outside the sequence checks and one for seq rows
RING_LEN, RING_HEAD, RUN_COUNT, PREV_LAST, WRAPS_BETWEEN, WRAPS_INSIDE, MAX_U_LAST, MIN_U_BASE = range(8)
SEQ_FIELDS = 8
# the scalars that carry from one stretch to the next
(
    S_ACTIVE,  # a group is being walked; it may continue in the next stretch
    S_PRODUCER,  # that group's rows carry producer state
    S_PID_ROW,
    S_EPOCH_MAX,
    S_COORDINATOR_MAX,
    S_MARKERS,
    S_SEEN_TXN,
    S_SEEN_PLAIN,
    S_FIRST_OFFSET,
    S_FIRST_TIMESTAMP,
    S_GROUP_MAX_EPOCH,
    S_RUN_EPOCH,
    S_RUN_FIRST,
    S_TV2_BEFORE,
    S_PREV_TIMESTAMP,
    S_PREV_MARKER,
    S_PREV_CONTROL_TYPE,
    S_PREV_EPOCH,
    S_SAW_TV2,  # the transaction-version evidence so far (spec §6.9)
    S_SAW_TV1,
    S_SAW_TRANSACTIONAL,
    S_SAW_COORDINATOR_TV2,  # the coordinator recorded one of the group's transactions as TV2
    S_SAW_COORDINATOR_TV1,  # ... as TV0/TV1
    S_TXN_COORDINATOR_VERSION,  # the coordinator's version of the open transaction (NONE: not recorded)
    S_CARRIED_ENDED,  # output: the group that began in an earlier stretch ended in this one
    S_CARRIED_VERSION,  # output: that group's transaction version
    S_OPEN_FROM,  # output: the first row of this stretch's last group, which may continue in the next one
    S_ENDED,  # output: the groups that ended in this stretch
    S_AWAIT,  # a TV2 abort of the group in an earlier stretch waits for its next data epoch
    S_AWAIT_FILLED,  # output: the next data epoch that it gets (NONE: not in this stretch)
    S_AWAIT_AT,  # output: the row of this stretch whose TV2 abort still waits at its end (NONE: none)
    S_KEPT_AWAIT,  # a TV2 abort an earlier walk wrote waits for the next data epoch (1), which this walk met (2)
) = range(32)
STATE_FIELDS = 32
# a carry kept as one int64 row: the scalars, the two sequence states, the two duplicate windows, and where it ended
SEQ_END = STATE_FIELDS + 2 * SEQ_FIELDS
RING_END = SEQ_END + 2 * DUPLICATE_WINDOW * 5
ENDED_ROW = RING_END
CARRY_WIDTH = RING_END + 1


class ProducerCarry:
    """What the walk holds between stretches: the scalars of the group being walked and its sequence windows."""

    def __init__(self) -> None:
        self.state = np.zeros(STATE_FIELDS, dtype=np.int64)
        self.seq = np.zeros((2, SEQ_FIELDS), dtype=np.int64)
        self.ring = np.zeros((2, DUPLICATE_WINDOW, 5), dtype=np.int64)

    def final_version(self, version_mode: int) -> int:
        """The transaction version of the group still being walked when the rows end."""
        return transaction_version(self.state, version_mode) if self.state[S_ACTIVE] else NONE

    def kept(self) -> np.ndarray:
        """The carry of the group still being walked as one row (CARRY_WIDTH), for a later walk to go on from."""
        row = np.zeros(CARRY_WIDTH, dtype=np.int64)
        _keep_carry(self.state, self.seq, self.ring, row)
        return row


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def replay_producers(
    starts, flags, marker, epoch, control_type, coordinator_epoch, base_offset, timestamp, base_seq, last_seq,
    coordinator_version, expiration_ms, version_mode, state, seq, ring, resume, earlier, ended,
):  # fmt: skip
    """Per-row producer state of one stretch of rows; returns (int64 outputs, int8 flags), one row per output.

    `state`, `seq` and `ring` are a ProducerCarry, updated in place. A group's transaction version is a
    conclusion over all its rows (spec §6.9), known when the group ends: its rows in this stretch get it then,
    and the caller gives S_CARRIED_VERSION to its rows of earlier stretches. `version_mode` 0 takes the version
    the coordinator recorded for the row (`coordinator_version` 1 or 2, NONE when it did not) and otherwise
    infers it from the markers (`auto`); 1 or 2 is the configured one, which wins over both.

    A group that begins at row i goes on from the carry `earlier[resume[i]]` (an earlier walk's end of that
    group, ProducerEnds) instead of from nothing when `resume[i]` is not -1. Every group that ends in the stretch
    leaves its carry in `ended` (rows in the order the groups end; ProducerEnds.ENDED_ROW: the row before which it
    ended), and the count of them is S_ENDED.

    NEXT_DATA_EPOCH of a TV2 ABORT one above the data it closes is the epoch of the group's next data row (spec
    §3.4: it tells a fence by a new instance from a client abort). The walk fills it once that row comes; an abort
    of an earlier stretch still waiting then gets S_AWAIT_FILLED from the caller, and S_AWAIT_AT names the row of
    this stretch that waits at its end. One an earlier walk wrote is written already: S_KEPT_AWAIT says when this
    walk met its next data.
    """
    n = starts.shape[0]
    longs = np.full((LONG_OUTPUTS, n), NONE, dtype=np.int64)
    bools = np.full((FLAG_OUTPUTS, n), -1, dtype=np.int8)
    carried = state[S_ACTIVE] == 1
    carried_ended = 0
    carried_version = NONE
    group_start = 0
    count_ended = 0
    await_row = -1
    await_filled = NONE
    for i in range(n):
        if starts[i]:
            if state[S_ACTIVE] == 1:
                code = transaction_version(state, version_mode)
                longs[VERSION, group_start:i] = code
                if carried:
                    carried_ended = 1
                    carried_version = code
                _keep_carry(state, seq, ring, ended[count_ended])
                ended[count_ended, ENDED_ROW] = i
                count_ended += 1
            carried = False
            group_start = i
            await_row = -1
            if resume[i] >= 0:
                _load_carry(earlier[resume[i]], state, seq, ring)
                if state[S_AWAIT] == 1:  # an earlier walk's markers are written already
                    state[S_KEPT_AWAIT] = 1
                state[S_AWAIT] = 0
            else:
                _start_group(state, seq, flags[i] & PRODUCER_ROW != 0)
        if state[S_PRODUCER] == 1:
            _append(
                i, flags[i], marker[i], epoch[i], control_type[i], coordinator_epoch[i], base_offset[i],
                timestamp[i], base_seq[i], last_seq[i], coordinator_version[i], expiration_ms, version_mode, state,
                seq, ring, longs, bools,
            )  # fmt: skip
            if flags[i] & IS_CONTROL == 0:
                if await_row >= 0:
                    longs[NEXT_DATA_EPOCH, await_row] = epoch[i]
                if carried and state[S_AWAIT] == 1:
                    await_filled = epoch[i]
                state[S_AWAIT] = 0
                if state[S_KEPT_AWAIT] == 1:
                    state[S_KEPT_AWAIT] = 2
                await_row = -1
            elif (
                marker[i] == 1
                and control_type[i] == CONTROL_ABORT
                and bools[TXN_OPEN, i] == 1
                and bools[IS_TV2, i] == 1
                and epoch[i] - longs[TXN_MAX_EPOCH, i] == 1
            ):
                await_row = i
    if await_row >= 0:
        state[S_AWAIT] = 1
    state[S_AWAIT_FILLED] = await_filled
    state[S_AWAIT_AT] = await_row if await_row >= 0 else NONE
    state[S_CARRIED_ENDED] = carried_ended
    state[S_CARRIED_VERSION] = carried_version
    state[S_OPEN_FROM] = group_start
    state[S_ENDED] = count_ended
    return longs, bools


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def _keep_carry(state, seq, ring, out):
    """A carry as one row of int64 (CARRY_WIDTH): the scalars, the sequence state, the duplicate windows."""
    out[:STATE_FIELDS] = state
    out[STATE_FIELDS:SEQ_END] = seq.ravel()
    out[SEQ_END:RING_END] = ring.ravel()


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def _load_carry(row, state, seq, ring):
    state[:] = row[:STATE_FIELDS]
    seq[:] = row[STATE_FIELDS:SEQ_END].reshape(seq.shape)
    ring[:] = row[SEQ_END:RING_END].reshape(ring.shape)


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def _start_group(state, seq, producer_row):
    state[:] = NONE
    state[S_ACTIVE] = 1
    state[S_PRODUCER] = 1 if producer_row else 0
    for field in (S_PID_ROW, S_MARKERS, S_SEEN_TXN, S_SEEN_PLAIN, S_RUN_FIRST, S_TV2_BEFORE, S_AWAIT, S_KEPT_AWAIT):
        state[field] = 0
    for field in (S_SAW_TV2, S_SAW_TV1, S_SAW_TRANSACTIONAL, S_SAW_COORDINATOR_TV2, S_SAW_COORDINATOR_TV1):
        state[field] = 0
    seq[:] = 0


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def _append(
    i, flags, marker, e, control_type, coordinator_epoch, base_offset, timestamp, bseq, lseq, recorded_version,
    expiration_ms, version_mode, state, seq, ring, longs, bools,
):  # fmt: skip
    """Write row `i`'s state before it, then append the row to the state, as ProducerAppendInfo does."""
    state[S_PID_ROW] += 1
    pid_row = state[S_PID_ROW]
    epoch_max = state[S_EPOCH_MAX]
    is_control = flags & IS_CONTROL != 0
    is_data = not is_control
    is_marker = marker == 1
    txn_data = is_data and flags & IS_TRANSACTIONAL != 0
    state[S_SAW_TRANSACTIONAL] |= 1 if flags & IS_TRANSACTIONAL != 0 else 0

    # fencing epoch: running max of earlier epochs; the epoch run is the max including this row
    if pid_row > 1:
        longs[STATE_EPOCH, i] = epoch_max
        longs[PREV_TIMESTAMP, i] = state[S_PREV_TIMESTAMP]
        bools[PREV_IS_MARKER, i] = state[S_PREV_MARKER]
        longs[PREV_CONTROL_TYPE, i] = state[S_PREV_CONTROL_TYPE]
        longs[PREV_EPOCH, i] = state[S_PREV_EPOCH]
        bools[SEEN_TXN_DATA, i] = state[S_SEEN_TXN]
        bools[SEEN_PLAIN_DATA, i] = state[S_SEEN_PLAIN]
    new_epoch_max = e if epoch_max == NONE or e > epoch_max else epoch_max
    longs[EPOCH_RUN, i] = new_epoch_max
    longs[STATE_COORDINATOR_EPOCH, i] = state[S_COORDINATOR_MAX]
    longs[TXN_GROUP, i] = state[S_MARKERS]

    # the open transaction: the earliest transactional data since the last marker, and its highest epoch
    first_offset = state[S_FIRST_OFFSET]
    group_max_epoch = state[S_GROUP_MAX_EPOCH]
    txn_open = first_offset != NONE
    longs[TXN_FIRST_OFFSET, i] = first_offset
    longs[TXN_START_TIMESTAMP, i] = state[S_FIRST_TIMESTAMP]
    longs[TXN_MAX_EPOCH, i] = group_max_epoch
    bools[TXN_OPEN, i] = txn_open
    # expired: silent for producer.id.expiration.ms with no transaction open
    previous_timestamp = state[S_PREV_TIMESTAMP]
    timed = pid_row > 1 and timestamp != NONE and previous_timestamp != NONE
    bools[STATE_EXPIRED, i] = timed and not txn_open and timestamp - previous_timestamp >= expiration_ms
    if new_epoch_max != state[S_RUN_EPOCH]:
        state[S_RUN_EPOCH] = new_epoch_max
        state[S_RUN_FIRST] = pid_row
        for s in range(2):
            seq[s, RING_LEN] = 0
            seq[s, RING_HEAD] = 0
            seq[s, RUN_COUNT] = 0
            seq[s, WRAPS_BETWEEN] = 0
            seq[s, WRAPS_INSIDE] = 0
    longs[RUN_FIRST_PID_ROW, i] = state[S_RUN_FIRST]
    seq_row = is_data and e == new_epoch_max and flags & IS_COORDINATOR_TOPIC == 0
    bools[SEQ_ROW, i] = seq_row

    # transaction version: the configured one; else the coordinator's for the row's transaction (a closing
    # marker's is the one of the data it closes); else inferred: a commit that bumps the epoch of its data, or a
    # transaction the coordinator recorded as TV2, makes later rows TV2 (clients never move back)
    closing = is_marker and txn_open
    bump = e - group_max_epoch if closing else 0
    tv2_commit = closing and control_type == CONTROL_COMMIT and bump == 1
    if closing and state[S_TXN_COORDINATOR_VERSION] != NONE:
        recorded_version = state[S_TXN_COORDINATOR_VERSION]
    if version_mode != 0:
        bools[IS_TV2, i] = version_mode == 2
    elif recorded_version != NONE:
        bools[IS_TV2, i] = recorded_version == 2
    else:
        bools[IS_TV2, i] = state[S_TV2_BEFORE] == 1
    if tv2_commit:
        state[S_TV2_BEFORE] = 1
        state[S_SAW_TV2] = 1
    if closing and bump == 0:
        state[S_SAW_TV1] = 1
    if recorded_version == 2:
        state[S_TV2_BEFORE] = 1
        state[S_SAW_COORDINATOR_TV2] = 1
    elif recorded_version != NONE:
        state[S_SAW_COORDINATOR_TV1] = 1

    # the sequence window of the row's part of the epoch run
    s = 1 if seq_row else 0
    seq[s, RUN_COUNT] += 1
    run_count = seq[s, RUN_COUNT]
    longs[RUN_POS, i] = run_count
    wrap_between = 0
    if run_count > 1:
        longs[PREV_LAST_SEQUENCE, i] = seq[s, PREV_LAST]
        if bseq < seq[s, PREV_LAST] - WRAP_JUMP:
            wrap_between = 1
    wrap_inside = 1 if lseq < bseq else 0
    longs[WRAP_INSIDE, i] = wrap_inside
    seq[s, WRAPS_BETWEEN] += wrap_between
    wraps_before = seq[s, WRAPS_BETWEEN] + seq[s, WRAPS_INSIDE]
    u_base = bseq + wraps_before * SEQ_SPAN
    u_last = lseq + (wraps_before + wrap_inside) * SEQ_SPAN
    longs[U_BASE, i] = u_base
    longs[U_LAST, i] = u_last
    if run_count > 1:
        longs[POSITION_BEFORE, i] = seq[s, MAX_U_LAST]
        longs[MIN_BASE_BEFORE, i] = seq[s, MIN_U_BASE]
    # the duplicate window, newest first: an exact repeat, the newest same-base batch, any overlap
    exact = False
    overlaps = False
    head = seq[s, RING_HEAD]
    for k in range(seq[s, RING_LEN]):
        slot = (head - 1 - k) % DUPLICATE_WINDOW
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
    ring[s, head, BASE] = bseq
    ring[s, head, LAST] = lseq
    ring[s, head, U_BASE_SLOT] = u_base
    ring[s, head, U_LAST_SLOT] = u_last
    ring[s, head, OFFSET] = base_offset
    seq[s, RING_HEAD] = (head + 1) % DUPLICATE_WINDOW
    if seq[s, RING_LEN] < DUPLICATE_WINDOW:
        seq[s, RING_LEN] += 1
    if run_count == 1 or u_last > seq[s, MAX_U_LAST]:
        seq[s, MAX_U_LAST] = u_last
    if run_count == 1 or u_base < seq[s, MIN_U_BASE]:
        seq[s, MIN_U_BASE] = u_base
    seq[s, PREV_LAST] = lseq
    seq[s, WRAPS_INSIDE] += wrap_inside

    state[S_EPOCH_MAX] = new_epoch_max
    if is_marker:
        if coordinator_epoch != NONE and (
            state[S_COORDINATOR_MAX] == NONE or coordinator_epoch > state[S_COORDINATOR_MAX]
        ):
            state[S_COORDINATOR_MAX] = coordinator_epoch
        state[S_MARKERS] += 1
        state[S_FIRST_OFFSET] = NONE
        state[S_FIRST_TIMESTAMP] = NONE
        state[S_GROUP_MAX_EPOCH] = NONE
        state[S_TXN_COORDINATOR_VERSION] = NONE
    elif txn_data:
        if recorded_version != NONE:
            state[S_TXN_COORDINATOR_VERSION] = recorded_version
        if first_offset == NONE or base_offset < first_offset:
            state[S_FIRST_OFFSET] = base_offset
            state[S_FIRST_TIMESTAMP] = timestamp
        elif base_offset == first_offset and timestamp > state[S_FIRST_TIMESTAMP]:
            state[S_FIRST_TIMESTAMP] = timestamp
        if group_max_epoch == NONE or e > group_max_epoch:
            state[S_GROUP_MAX_EPOCH] = e
    if txn_data:
        state[S_SEEN_TXN] = 1
    if is_data and not txn_data:
        state[S_SEEN_PLAIN] = 1
    state[S_PREV_TIMESTAMP] = timestamp
    state[S_PREV_MARKER] = marker
    state[S_PREV_CONTROL_TYPE] = control_type
    state[S_PREV_EPOCH] = e


@numba.njit(nogil=True, cache=CACHE_KERNELS)
def transaction_version(state, version_mode):
    """The walked group's transaction version from its evidence (spec §6.9); NONE for rows without state.

    Configured, else recorded by the coordinator (TV2 when any of the group's transactions was), else inferred.
    """
    if state[S_PRODUCER] != 1:
        return NONE
    if version_mode != 0:
        return VERSION_CONFIGURED if state[S_SAW_TRANSACTIONAL] == 1 else VERSION_NONE
    if state[S_SAW_COORDINATOR_TV2] == 1:
        return VERSION_COORDINATOR_2
    if state[S_SAW_COORDINATOR_TV1] == 1:
        return VERSION_COORDINATOR_1
    if state[S_SAW_TV2] == 1:
        return VERSION_INFERRED_2
    if state[S_SAW_TV1] == 1:
        return VERSION_INFERRED_1
    if state[S_SAW_TRANSACTIONAL] == 1:
        return VERSION_ASSUMED_1
    return VERSION_NONE
