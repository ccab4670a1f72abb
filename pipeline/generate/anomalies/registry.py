"""What an anomaly kind is, and the kinds registered by the family modules as they load.

It knows no family: `catalog` imports them all and orders their kinds for a run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

Injector = TypeVar("Injector")  # what a kind's function injects with: the run's injector, or its replica faults


@dataclass(frozen=True)
class Kind(Generic[Injector]):
    """An anomaly: the finding it must raise (rule code, severity), the codes it legitimately raises too
    (consequences), and the function that injects it. `at_finish` kinds change files when the run ends;
    `limit` caps how many a run gets."""

    name: str
    rule_code: str
    severity: str
    function: Callable[[Injector, Kind[Injector]], bool]
    consequences: tuple[str, ...] = ()
    at_finish: bool = False
    limit: int | None = None

    @property
    def family(self) -> str:
        return self.rule_code.split("-")[0]

    def run(self, injector: Injector) -> bool:
        """Inject once; False when there is no target yet (the injector retries later)."""
        return self.function(injector, self)


_REGISTERED: list[Kind] = []


def anomaly(name: str, rule_code: str, severity: str, consequences=(), at_finish=False, limit=None):
    """Register the decorated function as the injector of an anomaly kind."""

    def register(function):
        _REGISTERED.append(Kind(name, rule_code, severity, function, tuple(consequences), at_finish, limit))
        return function

    return register


def registered() -> tuple[Kind, ...]:
    """Every kind registered so far, in the order the family modules registered them."""
    return tuple(_REGISTERED)
