"""The one registry of audit rules, the checks that fire them, and the frames the checks read.

A rule (`rule(...)`) is a code, a name, severities, a spec section, a description, why a finding matters
(`impact`) and what an operator does about it (`action`). Its checks are plain functions registered with
`@check(RULE, on=FRAME)`: each returns a `Fires` (the condition, the message and the evidence, as row expressions
(pipeline.audit.core.expr) or Spark columns) evaluated on every row of one frame. A frame (`@frame(name)`) builds
the DataFrame those rows come from, out of the audit's materialised state. The engine iterates this registry:
it builds each frame once, evaluates all checks registered on it in one projection, and writes the findings.
Nothing here is wired by hand per family, so adding a rule is adding a function.

The rule catalog in docs/rules.md is generated from this registry (`python -m pipeline.audit.catalog`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from pyspark.sql import Column, DataFrame

from schemas.findings import SEVERITY_RANK

if TYPE_CHECKING:
    from pipeline.audit.core.context import AuditContext, AuditInputs


class Fires(NamedTuple):
    """What a check returns: when it fires on a row, what it says, and the evidence it keeps.

    `severity` overrides the rule's main severity per row (one of the rule's declared severities);
    `producer_epoch` overrides the epoch the finding is filed under.
    """

    when: Column
    message: Column
    evidence: Mapping[str, Column]
    severity: Column | None = None
    producer_epoch: Column | None = None


CheckFunction = Callable[["AuditContext"], Fires]


@dataclass(frozen=True)
class Check:
    rule: Rule
    frame: str
    function: CheckFunction


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    severity: str  # the rule's main severity; `also` lists the others it can take
    section: str
    description: str
    impact: str  # why a finding matters: what consumers or operators suffer
    action: str  # the operator's next step: what to check, which tool to run
    also: tuple[str, ...] = field(default=())
    # its INFO findings are normal behaviour that repeats at scale: one per (partition, producer), counted
    # (pipeline.audit.engine.repeats)
    per_producer: bool = False
    checks: list[Check] = field(default_factory=list, compare=False, repr=False)

    def __post_init__(self) -> None:
        for severity in (self.severity, *self.also):
            if severity not in SEVERITY_RANK:
                raise ValueError(f"{self.code}: unknown severity {severity}")
        if not self.impact.strip() or not self.action.strip():
            raise ValueError(f"{self.code}: a rule says why it matters (impact) and what to do (action)")

    @property
    def severities(self) -> tuple[str, ...]:
        return (self.severity, *self.also)

    @property
    def frames(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.frame for c in self.checks))


FrameBuilder = Callable[["AuditInputs", "AuditContext"], DataFrame | None]


@dataclass(frozen=True)
class Frame:
    """Rows that checks run on. `build` returns None when an input it needs was not given.

    `rows_of` names the input (an AuditInputs table: a side table as ingested, or state the engine wrote) every row
    of the frame comes from (an inner join of its rows): when the run knows that table holds no rows for the audited
    topics (from the Delta log, or from the footers of the state's files), the frame is not built at all, which
    spares a plan that could only come out empty. `of_copies`: every row is of a partition two or more replicas
    hold, so a run whose partitions each have one replica (the Delta log says which log dirs its files came from,
    pipeline.tables.files_per_partition) does not build it either. `row_local`: every row is a replay row and its
    findings depend on that row alone, so the replay's tasks check the rows they write
    (pipeline.audit.core.row_checks; its checks are row expressions), and a run that went on from a kept replay
    keeps the earlier findings of the other rows (pipeline.audit.engine.kept_findings). `coordinator_local`: every row
    is a coordinator record and its findings depend on the records of its `__transaction_state` partition alone, so
    a run that took some partitions' records over from a kept replay evaluates the frame on the others only
    (pipeline.audit.state.kept_coordinator).
    """

    name: str
    build: FrameBuilder
    description: str
    rows_of: str | None = None
    row_local: bool = False
    coordinator_local: bool = False
    of_copies: bool = False


RULES: dict[str, Rule] = {}
FRAMES: dict[str, Frame] = {}
CHECKS: dict[str, list[Check]] = {}  # by frame name, in registration order


def rule(
    code: str,
    name: str,
    severity: str,
    section: str,
    description: str,
    also: tuple[str, ...] = (),
    *,
    impact: str,
    action: str,
    per_producer: bool = False,
) -> Rule:
    """Register a rule once; registering the same code twice is a programming error."""
    if code in RULES:
        raise ValueError(f"rule {code} registered twice")
    registered = Rule(code, name, severity, section, description, impact, action, tuple(also), per_producer)
    RULES[code] = registered
    return registered


def frame(
    name: str,
    rows_of: str | None = None,
    row_local: bool = False,
    coordinator_local: bool = False,
    of_copies: bool = False,
) -> Callable[[FrameBuilder], Frame]:
    """Register a frame builder under `name`; its docstring describes the rows (`rows_of`, `row_local`,
    `coordinator_local`, `of_copies`: see Frame)."""

    def register(build: FrameBuilder) -> Frame:
        if name in FRAMES:
            raise ValueError(f"frame {name} registered twice")
        description = (build.__doc__ or "").strip().split("\n\n")[0]
        registered = Frame(name, build, description, rows_of, row_local, coordinator_local, of_copies)
        FRAMES[name] = registered
        CHECKS.setdefault(name, [])
        return registered

    return register


def check(target: Rule, on: Frame) -> Callable[[CheckFunction], CheckFunction]:
    """Register `function` as a check of `target`, evaluated on each row of frame `on`."""

    def register(function: CheckFunction) -> CheckFunction:
        registered = Check(target, on.name, function)
        target.checks.append(registered)
        CHECKS[on.name].append(registered)
        return function

    return register
