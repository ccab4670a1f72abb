"""The local file system classes: javac compiles them into their jar, and in the JVM they set permissions and report
link status as Hadoop's own local file system does, without spawning a process (which sessions name them:
tests/unit/test_local_fs_jar.py)."""

from __future__ import annotations

import os
import stat
import zipfile

import pytest
from pyspark import SparkContext

from pipeline import local_fs
from pipeline.local_fs import CLASSES, FILE_SYSTEM, build, installed, jar_path


@pytest.mark.skipif(local_fs._javac() is None, reason="no javac: a JDK compiles the classes")
def test_build_compiles_every_class_into_the_jar(tmp_path, monkeypatch):
    monkeypatch.setattr(local_fs, "ARCHIVE_DIR", tmp_path)

    jar = build()

    assert jar == jar_path() and installed() == jar
    with zipfile.ZipFile(jar) as archive:
        names = set(archive.namelist())
    expected = {f"org/produceaudit/localfs/{source.stem}.class" for source in local_fs.SOURCES.rglob("*.java")}
    assert expected and expected <= names
    assert not list(jar.parent.glob(".*"))  # no partial jar left beside it


@pytest.fixture
def hadoop(spark):
    """The `file:` file system and file context of the test session, which starts as build_session does."""
    if installed() is None:
        pytest.skip(f"no local file system jar at {jar_path()}: `produce-audit prepare` builds it (.ci/run runs it)")
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    uri = jvm.java.net.URI.create("file:///")
    context = jvm.org.apache.hadoop.fs.FileContext.getLocalFSFileContext(conf)
    return jvm, jvm.org.apache.hadoop.fs.FileSystem.get(uri, conf), context


def test_the_session_uses_the_classes(hadoop):
    jvm, fs, context = hadoop

    assert fs.getClass().getName() == CLASSES[FILE_SYSTEM]
    assert fs.getRawFileSystem().getClass().getName() == "org.produceaudit.localfs.NioRawLocalFileSystem"
    assert context.getDefaultFileSystem().getClass().getName() == CLASSES[local_fs.FILE_CONTEXT]


def test_permissions_are_set_as_hadoop_sets_them(hadoop, tmp_path):
    jvm, fs, _ = hadoop
    target = tmp_path / "file"
    target.write_bytes(b"x")
    path = jvm.org.apache.hadoop.fs.Path(f"file://{target}")

    for mode in (0o640, 0o755, 0o600, 0o444):
        fs.setPermission(path, jvm.org.apache.hadoop.fs.permission.FsPermission(mode))
        assert stat.S_IMODE(target.stat().st_mode) == mode
        assert fs.getFileStatus(path).getPermission().toShort() == mode

    missing = jvm.org.apache.hadoop.fs.Path(f"file://{tmp_path}/missing")
    with pytest.raises(Exception, match="FileNotFoundException"):
        fs.setPermission(missing, jvm.org.apache.hadoop.fs.permission.FsPermission(0o644))


def test_created_files_and_dirs_get_the_umasked_defaults(hadoop, tmp_path):
    jvm, fs, _ = hadoop
    umask = os.umask(0)
    os.umask(umask)
    directory = jvm.org.apache.hadoop.fs.Path(f"file://{tmp_path}/a/b")
    assert fs.mkdirs(directory)
    fs.create(jvm.org.apache.hadoop.fs.Path(f"file://{tmp_path}/a/b/file")).close()

    assert stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) == 0o777 & ~umask
    assert stat.S_IMODE((tmp_path / "a" / "b" / "file").stat().st_mode) == 0o666 & ~umask


def test_link_status_is_hadoops(hadoop, tmp_path):
    """As Hadoop's own: a link (named without a scheme) is a link with its target, a file is a file; Hadoop reads a
    `file:` URI's link as the file it points to, and so do the classes."""
    jvm, fs, context = hadoop
    target = tmp_path / "target"
    target.write_bytes(b"12345")
    (tmp_path / "link").symlink_to(target)
    Path = jvm.org.apache.hadoop.fs.Path
    stock = jvm.org.apache.hadoop.fs.RawLocalFileSystem()
    stock.initialize(jvm.java.net.URI.create("file:///"), jvm.org.apache.hadoop.conf.Configuration())

    def described(status):
        return status.isSymlink(), status.getSymlink().toString() if status.isSymlink() else None, status.getLen()

    for name in (str(target), f"file://{target}", f"{tmp_path}/link", f"file://{tmp_path}/link"):
        assert described(fs.getFileLinkStatus(Path(name))) == described(stock.getFileLinkStatus(Path(name)))
    assert described(fs.getFileLinkStatus(Path(f"{tmp_path}/link"))) == (True, f"file:{target}", 5)

    assert described(context.getFileLinkStatus(Path(f"{tmp_path}/link")))[:2] == (True, f"file:{target}")
    assert described(context.getFileLinkStatus(Path(str(target)))) == (False, None, 5)
    with pytest.raises(Exception, match="FileNotFoundException"):
        context.getFileLinkStatus(Path(f"{tmp_path}/missing"))


def test_file_context_renames_without_overwriting(hadoop, tmp_path):
    """Delta's log store commits a version by such a rename: it must fail when the version exists."""
    jvm, _, context = hadoop
    Path = jvm.org.apache.hadoop.fs.Path
    (tmp_path / "staged").write_bytes(b"new")
    (tmp_path / "taken").write_bytes(b"old")
    renames = SparkContext._gateway.new_array(jvm.org.apache.hadoop.fs.Options.Rename, 1)
    renames[0] = jvm.org.apache.hadoop.fs.Options.Rename.NONE

    with pytest.raises(Exception, match="FileAlreadyExistsException"):
        context.rename(Path(f"file://{tmp_path}/staged"), Path(f"file://{tmp_path}/taken"), renames)
    context.rename(Path(f"file://{tmp_path}/staged"), Path(f"file://{tmp_path}/free"), renames)

    assert (tmp_path / "free").read_bytes() == b"new" and (tmp_path / "taken").read_bytes() == b"old"
    assert not (tmp_path / "staged").exists()
