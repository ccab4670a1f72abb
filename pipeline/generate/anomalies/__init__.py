"""Anomalies injected into a generated log, each with the finding the audit must raise for it.

`injector` schedules them into a run and records the ground truth; `registry` defines a kind and the
catalog; one module per rule family holds the kinds; `targets` has what they share.
"""
