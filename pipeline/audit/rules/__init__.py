"""The audit rules of spec §6, one module per family; importing this package registers every rule, frame and check.

The families are imported in one fixed order, so the checks of a frame are evaluated in the same order in every
process: the driver and every Python worker.
"""

from pipeline.audit.rules import (  # noqa: F401
    cross_checks,
    epochs,
    files,
    format,
    leader_epochs,
    live_producers,
    log_order,
    payloads,
    replicas,
    sequences,
    snapshots,
    transaction_log,
    transactions,
    txnindex,
    visibility,
)
