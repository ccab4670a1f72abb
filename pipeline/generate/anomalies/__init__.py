"""Anomalies injected into a generated log, each with the finding the audit must raise for it.

`registry` defines a kind and collects the kinds; one module per rule family registers its kinds there;
`catalog` imports every family and orders their kinds for a run; `injector` schedules them into a run and records
the ground truth; `targets` has what the families share; `replicas` faults follower copies once a run is written.
"""
