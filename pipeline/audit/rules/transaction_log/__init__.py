"""`__transaction_state` alone (spec §6.7): each record on its own, and each record against the one before it."""

from pipeline.audit.rules.transaction_log import records, transitions  # noqa: F401
