"""The audit of spec §6: every rule in one registry, complete once this package is imported, and the engine.

The package is laid out in layers, each importing only the ones above it:

- `core`: the registry, what frames and checks are given, row expressions, aggregates in parts that merge;
- `replay`: the one pass over each partition's batches (spec §6.0), run in Spark's tasks;
- `state`: what the replay's outputs become: segments, transactions, partitions, hanging causes, derived tables;
- `rules`: one module per family of spec §6, each rule with the checks that fire it;
- `kept`: what a run keeps in the warehouse for the next one;
- `engine`: the plans of one run, in order.
"""

import pipeline.audit.rules  # noqa: F401  (registers every rule, frame and check)
from pipeline.audit.core.registry import CHECKS, FRAMES, RULES, Rule

__all__ = ["CHECKS", "FRAMES", "RULES", "Rule"]
