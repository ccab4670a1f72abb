"""The registry's contract, checked without Spark: every check is a function of the audit context registered on a
known frame, and the checks of the row-local frames, which the replay's tasks evaluate, are row expressions."""

from __future__ import annotations

import inspect
from pathlib import Path

import pipeline.audit
from pipeline.audit.core.context import AuditContext
from pipeline.audit.core.registry import CHECKS, FRAMES, RULES
from pipeline.audit.core.row_checks import RowCheck
from pipeline.audit.replay.kept import audit_sources
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


def test_the_kept_replay_is_voided_by_a_change_in_any_layer_of_the_audit():
    """A kept replay is gone on from only under the code that made it: every module of every layer counts."""
    hashed = {name for name, _ in audit_sources()}
    audit = Path(pipeline.audit.__file__).parent
    assert {f"audit/{path.relative_to(audit).as_posix()}" for path in audit.rglob("*.py")} <= hashed
    assert {"audit/rules/sequences.py", "audit/core/registry.py", "schemas/findings.py"} <= hashed
