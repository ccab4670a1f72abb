"""The registry's contract, checked without Spark: every check is a function of the audit context registered on a
known frame, and the checks of the row-local frames, which the replay's tasks evaluate, are row expressions."""

from __future__ import annotations

import inspect

import pipeline.audit.rules  # noqa: F401  (registers every rule, frame and check)
from pipeline.audit.core.context import AuditContext
from pipeline.audit.core.registry import CHECKS, FRAMES, RULES
from pipeline.audit.core.row_checks import RowCheck
from pipeline.config import AuditSettings


def test_every_check_is_a_function_of_the_context_on_a_registered_frame():
    for frame, checks in CHECKS.items():
        assert frame in FRAMES
        for check in checks:
            assert list(inspect.signature(check.function).parameters) == ["ctx"], check.function
            assert RULES[check.rule.code] is check.rule and check in check.rule.checks


def test_the_row_local_checks_are_row_expressions():
    ctx = AuditContext(AuditSettings())
    row_local = [check for frame, checks in CHECKS.items() if FRAMES[frame].row_local for check in checks]
    assert len(row_local) >= 30
    for check in row_local:
        RowCheck.of(check.rule, check.function(ctx))  # refuses a Spark column
