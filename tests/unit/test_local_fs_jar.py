"""The local file system classes' jar: sessions name it only when it exists and their driver is local, it is named
after the classes' sources, and a build keeps a jar built before or, without javac, says so (compiling it, and the
classes in the JVM: tests/integration/test_local_fs.py)."""

from __future__ import annotations

import os
import shutil

import pytest

from pipeline import local_fs
from pipeline.local_fs import CLASS_PATH, CLASSES, FILE_SYSTEM, build, installed, jar_path, with_local_fs

SHIPPED = {"spark.driver.memory": "1g"}


@pytest.fixture
def fake_jar(tmp_path, monkeypatch):
    monkeypatch.setattr(local_fs, "ARCHIVE_DIR", tmp_path)
    jar = jar_path()
    jar.parent.mkdir(parents=True)
    jar.write_bytes(b"jar")
    return jar


def test_a_local_session_gets_the_jar_and_the_classes(fake_jar):
    conf = with_local_fs(SHIPPED, "local[*]")

    assert conf[CLASS_PATH] == str(fake_jar)
    assert {key: conf[key] for key in CLASSES} == CLASSES
    assert conf["spark.driver.memory"] == "1g"


def test_the_jar_joins_a_class_path_given(fake_jar):
    conf = with_local_fs({CLASS_PATH: "/opt/own.jar"}, "local[2]")

    assert conf[CLASS_PATH] == f"/opt/own.jar{os.pathsep}{fake_jar}"


@pytest.mark.parametrize("master", ["yarn", "spark://host:7077", "k8s://https://host", ""])
def test_a_driver_elsewhere_keeps_hadoops_classes(fake_jar, master):
    assert with_local_fs(SHIPPED, master) == SHIPPED


def test_a_file_system_the_config_names_is_kept(fake_jar):
    own = {**SHIPPED, FILE_SYSTEM: "org.apache.hadoop.fs.RawLocalFileSystem"}

    assert with_local_fs(own, "local[*]") == own


def test_without_the_jar_nothing_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(local_fs, "ARCHIVE_DIR", tmp_path)

    assert installed() is None
    assert with_local_fs(SHIPPED, "local[*]") == SHIPPED


def test_the_jar_is_named_after_its_sources(tmp_path, monkeypatch):
    first = jar_path()
    sources = tmp_path / "java"
    shutil.copytree(local_fs.SOURCES, sources)
    monkeypatch.setattr(local_fs, "SOURCES", sources)
    assert jar_path() == first
    next(sources.rglob("*.java")).write_text("// changed\n", encoding="utf-8")

    assert jar_path() != first  # a jar compiled from older sources is never used


def test_a_jar_built_before_is_kept_as_it_is(fake_jar):
    """Rewriting it would stop the class archive recorded with it from mapping (the JVM checks the jar's file)."""
    assert build() == fake_jar
    assert fake_jar.read_bytes() == b"jar"


def test_without_javac_build_says_so_and_writes_nothing(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(local_fs, "ARCHIVE_DIR", tmp_path)
    monkeypatch.setattr(local_fs, "_javac", lambda: None)

    assert build() is None
    assert "no javac" in caplog.text and not jar_path().exists()
