"""Segments against `__transaction_state` (spec §6.8): producer ids, epochs and markers against the coordinator."""

from pipeline.audit.rules.cross_checks import epochs, markers, producers  # noqa: F401
