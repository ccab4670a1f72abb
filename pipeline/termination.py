"""SIGTERM as an error: a scheduler's timeout or a `kill` unwinds the run like a failure, so it rolls back."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# How often a SIGTERM that arrived during a call into the JVM is looked at again.
RECHECK_SECONDS = 0.05


class Terminated(BaseException):
    """SIGTERM (a scheduler's timeout, `kill`): unwinds like an error, so the run rolls back and unlocks."""


@contextmanager
def terminated_as_error(enabled: bool) -> Iterator[None]:
    """Turn SIGTERM into Terminated while this process owns its Spark session (not inside a notebook).

    Terminated is raised outside calls into the JVM only. Raised inside one, it would leave the JVM's answer to
    that call unread on the thread's py4j connection, which then hands each later call the answer of the one
    before: the roll-back's calls would read wrong versions and a write could not find its commit, while the
    interrupted call went on committing behind the roll-back. A signal that arrives during a call is looked at
    again every RECHECK_SECONDS and raised once the call has returned.
    """
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: Any) -> None:
        if _inside_jvm_call(frame):
            signal.signal(signal.SIGALRM, terminate)
            signal.setitimer(signal.ITIMER_REAL, RECHECK_SECONDS)
            return
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second signal must not cut the roll-back short
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        raise Terminated(signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, terminate)
    previous_alarm = signal.getsignal(signal.SIGALRM)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_alarm)
        signal.signal(signal.SIGTERM, previous)


def _inside_jvm_call(frame: Any) -> bool:
    """Whether py4j, which carries every call into the JVM, is on the stack that `frame` runs in."""
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith("py4j."):
            return True
        frame = frame.f_back
    return False
