"""Which sessions get the installed delta-spark jars: built ones (session_conf) and spark-submit.sh's
(submit_options). No Spark is started; the bundle is a stand-in folder."""

from __future__ import annotations

import pytest

from pipeline import delta_jars, jar_bundles
from pipeline.delta_jars import CATALOG, EXTENSION, session_conf, submit_options

OWN_DELTA = "io.delta:delta-spark_4.2_2.13:4.4.0"


@pytest.fixture
def bundle(tmp_path, monkeypatch) -> list[str]:
    jars = [str(tmp_path / name) for name in ("delta-spark_4.2_2.13-4.4.0.jar", "delta-storage-4.4.0.jar")]
    monkeypatch.setattr(jar_bundles, "classpath", lambda name: jars if name == delta_jars.BUNDLE else [])
    return jars


def test_auto_and_native_sessions_get_the_jars_extension_and_catalog(bundle):
    """auto then finds delta-spark in the session and picks the native backend."""
    for backend in ("auto", "native"):
        conf = session_conf({"spark.driver.memory": "1g"}, backend)
        assert conf == {
            "spark.driver.memory": "1g",
            "spark.jars": ",".join(bundle),
            "spark.sql.extensions": EXTENSION,
            "spark.sql.catalog.spark_catalog": CATALOG,
        }


def test_what_the_session_has_is_kept(bundle):
    conf = session_conf({"spark.jars": "/opt/udfs.jar", "spark.sql.extensions": "com.example.Ext"}, "native")

    assert conf["spark.jars"] == ",".join(["/opt/udfs.jar", *bundle])
    assert conf["spark.sql.extensions"] == f"com.example.Ext,{EXTENSION}"
    assert session_conf(conf, "native") == conf  # applied twice, nothing is added twice


@pytest.mark.parametrize(
    "conf",
    [{"spark.jars.packages": OWN_DELTA}, {"spark.jars": "/opt/delta-spark_2.13-4.0.0.jar"}],
    ids=["packages", "jars"],
)
def test_a_session_bringing_its_own_delta_gets_nothing(bundle, conf):
    assert session_conf(conf, "native") == conf


def test_embedded_or_no_bundle_gets_nothing(bundle, monkeypatch):
    assert session_conf({}, "embedded") == {}
    monkeypatch.setattr(jar_bundles, "classpath", lambda name: [])
    assert session_conf({}, "native") == {}


def test_spark_submit_gets_the_jars_merged_with_its_own(bundle, tmp_path):
    properties = tmp_path / "spark-defaults.conf"
    properties.write_text("# comment\nspark.jars   /opt/a.jar\nspark.sql.extensions=com.example.Ext\n")

    options = submit_options(str(properties), ["--master", "yarn", "--jars=/opt/b.jar"], ["--input", "in"])

    assert options == [
        "--jars",
        ",".join(["/opt/b.jar", *bundle]),
        "--conf",
        f"spark.sql.extensions=com.example.Ext,{EXTENSION}",
        "--conf",
        f"spark.sql.catalog.spark_catalog={CATALOG}",
    ]


def test_spark_submit_of_an_embedded_job_or_with_packages_gets_nothing(bundle, tmp_path):
    config = tmp_path / "embedded.yaml"
    config.write_text("delta:\n  backend: embedded\n")
    properties = str(tmp_path / "absent.conf")

    assert submit_options(properties, [], ["--input", "in", "--conf", str(config)]) == []
    assert submit_options(properties, ["--packages", OWN_DELTA], []) == []
    assert submit_options(properties, [], ["--conf", str(tmp_path / "missing.yaml")]) == []  # the job says why
