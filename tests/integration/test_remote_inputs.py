"""Inputs on an S3 API endpoint (moto on loopback) are listed, read and audited as their local copy is.

The CLI audits the sample log root and a dump text file from `s3a://` and `s3://` URIs, with the endpoint, path
style and keys given only as `spark.hadoop.fs.s3a.*` properties, which the executors (Python workers without the
driver's environment or the session's Hadoop configuration) must receive from the driver; its tables must equal
the golden outputs of the same inputs audited from local paths (tests/golden/sample-and-dump, written by
`compare --update-golden` from a local run). Listing and decoding through `AWS_ENDPOINT_URL` alone run without
Spark.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
import yaml
from deltalake import DeltaTable
from moto.server import ThreadedMotoServer

from pipeline.cli import main
from pipeline.config import load_settings
from pipeline.errors import InputError
from pipeline.sources import filesystems
from pipeline.sources.segments import decode_file, discover_segments

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "basic"
# A published dump of an aborted transaction, when the shared real data is there.
DUMP = REPO.parent / "shared" / "realdata" / "dumplog-text" / "ableasdale-kafka-transactions-README-02.txt"
CLI = Path(sys.executable).with_name("produce-audit")
BUCKET = "kafka-logs"
LOG_ROOT = f"s3a://{BUCKET}/clusters/basic"
DUMP_URI = f"s3://{BUCKET}/dumps/{DUMP.name}"
KEYS = {"aws_access_key_id": "audit-key", "aws_secret_access_key": "audit-secret"}
GOLDEN = REPO / "tests" / "golden" / ("sample-and-dump" if DUMP.exists() else "sample")


@pytest.fixture(scope="module")
def endpoint():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    client = boto3.client("s3", endpoint_url=url, region_name="us-east-1", **KEYS)
    client.create_bucket(Bucket=BUCKET)
    for path in sorted(SAMPLE.rglob("*")):
        if path.is_file():
            client.upload_file(str(path), BUCKET, f"clusters/basic/{path.relative_to(SAMPLE).as_posix()}")
    if DUMP.exists():
        client.upload_file(str(DUMP), BUCKET, f"dumps/{DUMP.name}")
    yield url
    server.stop()


def _environment() -> dict[str, str]:
    """This environment without any AWS setting, so only what a test gives reaches the S3 client."""
    environment = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    return {**environment, "AWS_EC2_METADATA_DISABLED": "true", "PRODUCE_AUDIT_LOG_LEVEL": "WARNING"}


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(CLI), *args], cwd=cwd, env=_environment(), capture_output=True, text=True, timeout=600, check=False
    )


@pytest.fixture(scope="module")
def s3a_conf(endpoint, tmp_path_factory) -> Path:
    conf = tmp_path_factory.mktemp("conf") / "s3a.yaml"
    properties = {
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.access.key": KEYS["aws_access_key_id"],
        "spark.hadoop.fs.s3a.secret.key": KEYS["aws_secret_access_key"],
    }
    conf.write_text(yaml.safe_dump({"spark": {"conf": properties}}))
    return conf


def _inputs(log_root: str, dump: str) -> list[str]:
    return ["--input", log_root, *(["--input", dump] if DUMP.exists() else [])]


@pytest.fixture(scope="module")
def remote_run(tmp_path_factory, s3a_conf) -> Path:
    workdir = tmp_path_factory.mktemp("remote")
    args = ["run", *_inputs(LOG_ROOT, DUMP_URI), "--conf", str(s3a_conf), "--warehouse", "wh", "--fail-on", "never"]
    done = _cli(*args, cwd=workdir)
    assert done.returncode == 0, done.stderr
    return workdir / "wh"


def test_remote_inputs_audit_as_their_local_copy(spark, remote_run):
    """Every compared table equals the local run's golden rows; input roots are `{inputN}` in both."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["compare", "--actual", str(remote_run), "--golden", str(GOLDEN)])
    assert code == 0, out.getvalue() + err.getvalue()[-3000:]
    verdicts = [line.split(": ", 1) for line in out.getvalue().splitlines()]
    assert [table for table, _ in verdicts] == ["findings", "transactions", "producer_state", "partition_summary"]
    assert all(verdict.startswith("equal (") for _, verdict in verdicts), out.getvalue()


def test_the_remote_run_read_every_input(remote_run):
    sources = {row["source_file"] for row in DeltaTable(str(remote_run / "batches")).to_pyarrow_table().to_pylist()}
    expected_dumps = {DUMP_URI} if DUMP.exists() else set()
    assert {source for source in sources if not source.startswith(LOG_ROOT)} == expected_dumps
    assert len(sources - expected_dumps) == len(list(SAMPLE.rglob("*.log")))


def test_a_missing_bucket_exits_2_naming_the_uri(s3a_conf, tmp_path):
    missing = "s3a://no-such-bucket/kafka"
    done = _cli("run", "--input", missing, "--conf", str(s3a_conf), "--warehouse", "wh", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert errors == [f"produce-audit run: error: {missing}: does not exist"]


@pytest.fixture
def endpoint_from_environment(endpoint, monkeypatch):
    """AWS_ENDPOINT_URL and keys in the environment, as a user without Spark properties gives them."""
    for name in [name for name in os.environ if name.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEYS["aws_access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", KEYS["aws_secret_access_key"])
    monkeypatch.setattr(filesystems, "_configured", None)


@pytest.mark.parametrize("scheme", ["s3", "s3a"])
def test_segments_list_and_decode_through_the_environment_endpoint(endpoint_from_environment, scheme):
    root = f"{scheme}://{BUCKET}/clusters/basic"
    remote = discover_segments([root], load_settings().ingest).segments
    local = discover_segments([str(SAMPLE)], load_settings().ingest).segments
    assert [(s.location.removeprefix(root), s.topic, s.partition, s.broker_id, s.size) for s in remote] == [
        (s.location.removeprefix(str(SAMPLE)), s.topic, s.partition, s.broker_id, s.size) for s in local
    ]
    for remote_segment, local_segment in zip(remote, local, strict=True):
        remote_rows = [batch.drop_columns(["source_file"]) for batch in decode_file(remote_segment)]
        local_rows = [batch.drop_columns(["source_file"]) for batch in decode_file(local_segment)]
        assert remote_rows == local_rows


def test_a_missing_prefix_is_an_input_error_naming_the_uri(endpoint_from_environment):
    missing = f"s3://{BUCKET}/clusters/none"
    with pytest.raises(InputError, match=f"^{missing}: log root does not exist$"):
        discover_segments([missing], load_settings().ingest)


def test_s3a_properties_come_before_the_environment():
    hadoop = {
        "fs.s3a.endpoint": "minio:9000",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.access.key": "hadoop-key",
        "fs.s3a.secret.key": "hadoop-secret",
    }
    environ = {"AWS_ENDPOINT_URL": "https://elsewhere", "AWS_ACCESS_KEY_ID": "b", "AWS_SECRET_ACCESS_KEY": "c"}
    settings = filesystems.S3Settings.of(hadoop, environ)
    assert (settings.endpoint, settings.scheme) == ("minio:9000", "http")
    assert (settings.access_key, settings.secret_key) == ("hadoop-key", "hadoop-secret")
    assert "hadoop-secret" not in repr(settings)
    from_environment = filesystems.S3Settings.of({}, environ)
    assert (from_environment.endpoint, from_environment.scheme, from_environment.secret_key) == (
        "elsewhere",
        "https",
        "c",
    )
