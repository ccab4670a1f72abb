"""Which pyarrow filesystem opens an input location, on the driver and on the executors alike.

Local paths open on the local filesystem. `s3://`, `s3a://` and `s3n://` URIs open on pyarrow's S3FileSystem,
configured like Hadoop's s3a connector from the `fs.s3a.*` properties of the Spark session (the
`spark.hadoop.fs.s3a.*` a Spark user already sets, or core-site.xml) over the AWS_* environment variables, so no
Hadoop S3 jar is needed. Other URIs go to `pyarrow.fs.FileSystem.from_uri`. Executors can read neither the
session's properties nor the driver's environment, so the driver's S3 settings travel with the tasks
(`shipped`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any

from pyarrow import fs as pafs
from pyspark.sql import SparkSession

S3_SCHEMES = ("s3", "s3a", "s3n")
_URI_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):")  # two letters at least, so C:\ stays a local path
_HADOOP_DEFAULTS = ["core-default.xml"]
_S3A_PROPERTIES = (
    "fs.s3a.endpoint",
    "fs.s3a.endpoint.region",
    "fs.s3a.connection.ssl.enabled",
    "fs.s3a.path.style.access",
    "fs.s3a.access.key",
    "fs.s3a.secret.key",
    "fs.s3a.session.token",
    "fs.s3a.aws.credentials.provider",
)


def uri_scheme(location: str) -> str | None:
    """The lower-case scheme of a URI, None for a local path."""
    match = _URI_SCHEME.match(location)
    return match.group(1).lower() if match else None


@dataclass(frozen=True)
class S3Settings:
    """What pyarrow's S3FileSystem needs; None leaves pyarrow's default (its AWS credential chain, its region)."""

    endpoint: str | None = None  # host[:port]
    scheme: str = "https"
    region: str | None = None
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    anonymous: bool = False
    # pyarrow sends path-style requests to an endpoint; Hadoop's default is virtual-host ones, so only an
    # explicit `fs.s3a.path.style.access=false` asks for those.
    virtual_addressing: bool = False

    @classmethod
    def of(cls, hadoop: Mapping[str, str], environ: Mapping[str, str]) -> S3Settings:
        """Hadoop's `fs.s3a.*` properties first (as s3a reads them), then the AWS_* environment variables."""
        endpoint = hadoop.get("fs.s3a.endpoint") or environ.get("AWS_ENDPOINT_URL_S3", environ.get("AWS_ENDPOINT_URL"))
        region = hadoop.get("fs.s3a.endpoint.region") or environ.get("AWS_REGION", environ.get("AWS_DEFAULT_REGION"))
        scheme = "http" if hadoop.get("fs.s3a.connection.ssl.enabled", "").lower() == "false" else "https"
        if endpoint and "://" in endpoint:
            scheme, endpoint = endpoint.split("://", 1)
        if hadoop.get("fs.s3a.access.key"):
            keys = ("fs.s3a.access.key", "fs.s3a.secret.key", "fs.s3a.session.token")
            credentials = [hadoop.get(key) or None for key in keys]
        else:
            keys = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
            credentials = [environ.get(key) or None for key in keys]
        access_key, secret_key, session_token = credentials
        return cls(
            endpoint=endpoint.rstrip("/") if endpoint else None,
            scheme=scheme.lower(),
            region=region or None,
            access_key=access_key if secret_key else None,
            secret_key=secret_key if access_key else None,
            session_token=session_token if access_key and secret_key else None,
            anonymous="Anonymous" in hadoop.get("fs.s3a.aws.credentials.provider", ""),
            virtual_addressing=hadoop.get("fs.s3a.path.style.access", "").lower() == "false",
        )

    def filesystem(self) -> pafs.S3FileSystem:
        return _s3_filesystem(self)


@cache
def _s3_filesystem(settings: S3Settings) -> pafs.S3FileSystem:
    """One client per process and settings: creating one starts the AWS SDK."""
    options: dict[str, Any] = {
        "endpoint_override": settings.endpoint,
        "scheme": settings.scheme,
        "region": settings.region,
        "access_key": settings.access_key,
        "secret_key": settings.secret_key,
        "session_token": settings.session_token,
    }
    options = {name: value for name, value in options.items() if value is not None}
    return pafs.S3FileSystem(
        **options, anonymous=settings.anonymous, force_virtual_addressing=settings.virtual_addressing
    )


# The settings of this process: set on the driver by `configure`, on an executor by the task (`shipped`).
_configured: S3Settings | None = None


def s3_settings() -> S3Settings:
    """The settings configured in this process, else those of its environment."""
    return _configured if _configured is not None else S3Settings.of({}, os.environ)


def configure(spark: SparkSession) -> S3Settings:
    """Driver side: S3 settings from the session's Hadoop properties and this process's environment."""
    global _configured
    _configured = S3Settings.of(_s3a_properties(spark), os.environ)
    return _configured


def shipped(spark: SparkSession, function: Callable[..., Any]) -> Callable[..., Any]:
    """`function` (for mapInArrow) running on the executors with the driver's S3 settings."""
    return partial(_with_settings, configure(spark), function)


def _with_settings(settings: S3Settings, function: Callable[..., Any], *args: Any) -> Any:
    global _configured
    _configured = settings
    return function(*args)


def _s3a_properties(spark: SparkSession) -> dict[str, str]:
    """The `fs.s3a.*` properties someone set (Spark's `spark.hadoop.*`, core-site.xml), not Hadoop's defaults."""
    hadoop = spark._jsc.hadoopConfiguration()
    found = {}
    for key in _S3A_PROPERTIES:
        value = hadoop.getTrimmed(key)
        sources = hadoop.getPropertySources(key)
        if value and (sources is None or list(sources) != _HADOOP_DEFAULTS):
            found[key] = value
    return found


def resolve(location: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem and path of a local path or URI."""
    scheme = uri_scheme(location)
    if scheme is None:
        return pafs.LocalFileSystem(), os.path.abspath(location)
    if scheme in S3_SCHEMES:
        return s3_settings().filesystem(), location.split("://", 1)[1].rstrip("/")
    return pafs.FileSystem.from_uri(location)
