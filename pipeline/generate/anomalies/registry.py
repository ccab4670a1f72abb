"""What an anomaly kind is, and the catalog of them in the order a run takes them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import chain, zip_longest
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.generate.anomalies.injector import AnomalyInjector


@dataclass(frozen=True)
class Kind:
    """An anomaly: the finding it must raise (rule code, severity), the codes it legitimately raises too
    (consequences), and the function that injects it. `at_finish` kinds change files when the run ends;
    `limit` caps how many a run gets."""

    name: str
    rule_code: str
    severity: str
    function: Callable[[AnomalyInjector, Kind], bool]
    consequences: tuple[str, ...] = ()
    at_finish: bool = False
    limit: int | None = None

    @property
    def family(self) -> str:
        return self.rule_code.split("-")[0]

    def run(self, injector: AnomalyInjector) -> bool:
        """Inject once; False when there is no target yet (the injector retries later)."""
        return self.function(injector, self)


_REGISTERED: list[Kind] = []


def anomaly(name: str, rule_code: str, severity: str, consequences=(), at_finish=False, limit=None):
    """Register the decorated function as the injector of an anomaly kind."""

    def register(function):
        _REGISTERED.append(Kind(name, rule_code, severity, function, tuple(consequences), at_finish, limit))
        return function

    return register


def catalog() -> tuple[Kind, ...]:
    """Every kind, one of each family in turn, so that a few dozen anomalies already cover every family."""
    from pipeline.generate.anomalies import (  # noqa: F401 (registering the kinds)
        batch_format,
        coordinator,
        epochs,
        segment_files,
        sequences,
        snapshots,
        transactions,
        txnindex,
    )

    families: dict[str, list[Kind]] = {}
    for item in _REGISTERED:
        families.setdefault(item.family, []).append(item)
    return tuple(item for item in chain.from_iterable(zip_longest(*families.values())) if item is not None)
