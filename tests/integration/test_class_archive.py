"""The JVM class archive: sessions map it only when it exists, and `produce-audit prepare`'s archive fits the JVM
that Spark starts (same Java, same classpath), which is what makes the JVM use it rather than ignore it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline import class_archive
from pipeline.class_archive import archive_path, recording, with_archive

SHIPPED = "-XX:TieredStopAtLevel=1"


def test_options_name_the_archive_only_when_it_exists(tmp_path, monkeypatch):
    monkeypatch.setattr(class_archive, "ARCHIVE_DIR", tmp_path)
    assert with_archive(SHIPPED) == SHIPPED

    archive_path().write_bytes(b"archive")
    options = with_archive(SHIPPED)

    assert options.startswith(SHIPPED) and f"-XX:SharedArchiveFile={archive_path()}" in options.split()
    assert "-Xshare:auto" in options.split()  # a JVM the archive does not fit starts without it


def test_options_that_name_an_archive_already_are_left_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(class_archive, "ARCHIVE_DIR", tmp_path)
    archive_path().write_bytes(b"archive")
    own = f"{SHIPPED} -XX:SharedArchiveFile=/elsewhere.jsa"
    recording_options = recording(SHIPPED, tmp_path / "new.jsa")

    assert with_archive(own) == own
    assert with_archive(recording_options) == recording_options
    assert f"-XX:ArchiveClassesAtExit={tmp_path / 'new.jsa'}" in recording_options.split()


def test_archives_are_kept_per_java_runtime(tmp_path, monkeypatch):
    monkeypatch.setattr(class_archive, "ARCHIVE_DIR", tmp_path)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk-a"))
    first = archive_path()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk-b"))

    assert archive_path() != first and archive_path().parent == first.parent == tmp_path


def test_the_prepared_archive_maps_in_a_jvm_with_sparks_classpath(spark):
    archive = archive_path()
    if not archive.is_file():
        pytest.skip(f"no class archive at {archive}: `produce-audit prepare` writes it (.ci/run runs it)")
    jvm = spark._jvm.java.lang.System
    java = f"{jvm.getProperty('java.home')}/bin/java"
    classpath = jvm.getProperty("java.class.path")

    # -Xshare:on fails instead of ignoring an archive that does not fit this Java or this classpath.
    mapped = subprocess.run(
        [java, "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-cp", classpath, "-version"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert mapped.returncode == 0, mapped.stderr[-2000:]


def test_prepare_writes_the_bytecode_no_process_would_write(tmp_path, monkeypatch):
    from pipeline.prepare import compile_bytecode

    module = tmp_path / "package" / "module.py"
    module.parent.mkdir()
    module.write_text("VALUE = 1\n")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # as PYTHONDONTWRITEBYTECODE sets it

    compile_bytecode([str(module.parent)])

    assert Path(importlib.util.cache_from_source(str(module))).is_file()
