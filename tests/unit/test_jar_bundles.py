"""Jar bundles: a bundle holds only jars Spark lacks, counts as installed only when verified against the current
lock, and `produce-audit prepare` goes on without Maven unless --require-jars. No Spark, no network: Maven is a
stand-in script here."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pyspark
import pytest

from pipeline import cli, jar_bundles, local_fs, prepare
from pipeline.cli import EXIT_OK, EXIT_USAGE

SPARK_JARS = Path(pyspark.__file__).parent / "jars"
VERSION = re.compile(r"-\d[\w.]*(-\d+)?\.jar$")  # what follows the artifact name in a Maven jar's file name


def artifact(jar: str) -> str:
    return VERSION.sub("", jar)


@pytest.fixture
def install_root(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "installed"
    monkeypatch.setattr(jar_bundles, "INSTALL_ROOT", root)
    return root


@pytest.fixture
def maven(tmp_path, monkeypatch):
    """A stand-in `mvn` on PATH: `maven(script)` sets what it does (a Python body; argv as `sys.argv`)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))

    def install(body: str) -> None:
        mvn = folder / "mvn"
        mvn.write_text(f"#!{sys.executable}\nimport sys\n{body}\n")
        mvn.chmod(0o755)

    return install


def copying(jars: dict[str, bytes]) -> str:
    """A stand-in Maven body that writes `jars` into -DoutputDirectory."""
    return (
        "from pathlib import Path\n"
        "out = Path(next(a for a in sys.argv if a.startswith('-DoutputDirectory=')).split('=', 1)[1])\n"
        f"for name, data in {jars!r}.items():\n"
        "    (out / name).write_bytes(data)\n"
    )


def test_the_delta_bundle_holds_no_jar_spark_ships():
    shipped = {artifact(jar.name) for jar in SPARK_JARS.glob("*.jar")}
    locked = {artifact(jar) for jar in jar_bundles.lock("delta-spark")}

    assert "delta-spark_4.2_2.13" in locked
    assert locked.isdisjoint(shipped), sorted(locked & shipped)
    assert jar_bundles.coordinates("delta-spark") == ["io.delta:delta-spark_4.2_2.13:4.4.0"]


def test_every_bundle_is_found():
    assert "delta-spark" in jar_bundles.names()
    assert all((jar_bundles.BUNDLES / name / "jars.sha256").is_file() for name in jar_bundles.names())


def test_a_fetch_is_installed_only_while_it_matches_the_lock(install_root, maven, tmp_path, monkeypatch):
    bundles = tmp_path / "bundles"
    (bundles / "demo").mkdir(parents=True)
    (bundles / "demo" / "pom.xml").write_text("<project/>")
    monkeypatch.setattr(jar_bundles, "BUNDLES", bundles)
    maven(copying({"a-1.0.jar": b"a", "b-2.0.jar": b"b"}))
    assert jar_bundles.installed("demo") is None

    folder = jar_bundles.fetch("demo", update_lock=True)

    assert jar_bundles.installed("demo") == folder
    assert jar_bundles.classpath("demo") == [str(folder / "a-1.0.jar"), str(folder / "b-2.0.jar")]
    (bundles / "demo" / "jars.sha256").write_text("0" * 64 + "  a-1.1.jar\n")  # the project moved on
    assert jar_bundles.installed("demo") is None and jar_bundles.classpath("demo") == []
    with pytest.raises(jar_bundles.BundleError, match=r"a-1\.1\.jar is missing; a-1\.0\.jar is not in the lock"):
        jar_bundles.fetch("demo")


def test_a_jar_that_differs_from_the_lock_is_refused(install_root, maven):
    maven(copying({name: b"not the real jar" for name in jar_bundles.lock("delta-spark")}))

    with pytest.raises(jar_bundles.BundleError, match="does not match pipeline/jars/delta-spark/jars.sha256"):
        jar_bundles.fetch("delta-spark")
    assert jar_bundles.installed("delta-spark") is None
    assert not any(install_root.iterdir())  # the staging folder is gone


def test_a_maven_failure_is_one_line_naming_the_root_cause(install_root, maven):
    maven(
        "print('[ERROR] Failed to read artifact descriptor: Could not transfer artifact: "
        "Unknown host repo.example: Temporary failure in name resolution -> [Help 1]')\n"
        "print('[ERROR] To see the full stack trace of the errors, re-run Maven with the -e switch.')\n"
        "sys.exit(1)"
    )

    failed = jar_bundles.fetch_all()

    assert set(failed) == set(jar_bundles.names())
    message = str(failed["delta-spark"])
    assert message == (
        "Maven could not fetch jar bundle 'delta-spark' (exit 1): Failed to read artifact descriptor: Could not "
        "transfer artifact: Unknown host repo.example: Temporary failure in name resolution"
    )
    assert "-e switch" in failed["delta-spark"].detail


def test_prepare_goes_on_without_maven_and_says_so_once_per_bundle(install_root, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn
    recorded = []
    monkeypatch.setattr(prepare, "record_class_archive", lambda settings, run_id: recorded.append(run_id) or tmp_path)
    monkeypatch.setattr(local_fs, "ARCHIVE_DIR", tmp_path)  # a local file system jar, if compiled, lands here

    assert cli.main(["prepare"]) == EXIT_OK

    assert len(recorded) == 1  # the archive is recorded all the same, for the embedded backend
    warnings = [
        record.getMessage()
        for record in caplog.records
        if record.levelname == "WARNING" and record.getMessage().startswith("jar bundle")
    ]
    assert len(warnings) == len(jar_bundles.names())
    assert any("'delta-spark' needs Maven (mvn) on PATH" in line and "embedded backend" in line for line in warnings)


def test_prepare_require_jars_exits_2_with_one_line(install_root, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(prepare, "record_class_archive", lambda *args: pytest.fail("recorded without the jars"))

    assert cli.main(["prepare", "--require-jars"]) == EXIT_USAGE

    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("produce-audit prepare: error: pipeline/jars/delta-spark: jar bundle 'delta-spark' needs")
