"""The one registry of audit rules: code, name, severity, spec section and description.

Rule modules register their rules here with `rule(...)`; the rule catalog in docs/rules.md is generated
from this registry (`python -m pipeline.audit.catalog`), and findings take their name from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SEVERITIES = ("INFO", "WARN", "ERROR", "CRITICAL")
SEVERITY_RANK = {name: rank for rank, name in enumerate(SEVERITIES)}


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    severity: str  # the rule's main severity; `also` lists the others it can take
    section: str
    description: str
    also: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        for severity in (self.severity, *self.also):
            if severity not in SEVERITY_RANK:
                raise ValueError(f"{self.code}: unknown severity {severity}")

    @property
    def severities(self) -> tuple[str, ...]:
        return (self.severity, *self.also)


RULES: dict[str, Rule] = {}


def rule(code: str, name: str, severity: str, section: str, description: str, also: tuple[str, ...] = ()) -> Rule:
    """Register a rule once; registering the same code twice is a programming error."""
    if code in RULES:
        raise ValueError(f"rule {code} registered twice")
    registered = Rule(code, name, severity, section, description, tuple(also))
    RULES[code] = registered
    return registered


def severity_at_least(threshold: str) -> tuple[str, ...]:
    """Severities that reach `threshold` (for --fail-on)."""
    return tuple(s for s in SEVERITIES if SEVERITY_RANK[s] >= SEVERITY_RANK[threshold])
