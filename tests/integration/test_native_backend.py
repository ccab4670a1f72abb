"""The native Delta backend (delta-spark), tested in a pytest of its own.

A Python process has one JVM, and this suite's session has no delta-spark so that `auto` stays the embedded
backend everywhere else. The native checks therefore run in one more pytest, started here, whose session loads
the bundle `produce-audit prepare` installed (conftest.NATIVE_SESSION): the table store tests with the native
backend and across the two backends and delta-rs. Every command-line test runs native too (the installed bundle
makes `auto` native); tests/integration/test_spark_submit.py checks what a native run of the sample publishes.
(BENCHMARKS.md, "Delta backends", compares a native run's tables with an embedded run's.)
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pipeline import jar_bundles
from pipeline.delta_jars import BUNDLE
from tests.conftest import NATIVE_SESSION, REPO

INNER_SECONDS = 900
# The native cases of the table store tests and those across backends.
K = "(native or other_backend or both_backends) and not without_delta_jars"


def test_native_backend_checks_pass_in_a_session_with_delta_spark():
    if jar_bundles.installed(BUNDLE) is None:
        pytest.skip("the delta-spark jars are not installed: `produce-audit prepare` fetches them with Maven")
    inner = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", K,
         "tests/integration/test_table_store.py"],
        cwd=REPO, env={**os.environ, NATIVE_SESSION: "1"}, capture_output=True, text=True,
        timeout=INNER_SECONDS, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    report = inner.stdout[-6000:]
    assert inner.returncode == 0, report
    assert " passed" in report and "skipped" not in report.splitlines()[-1], report
