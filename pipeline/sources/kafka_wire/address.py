"""`kafka://HOST:PORT[,HOST:PORT...]` inputs: the bootstrap servers of a cluster read over the Kafka protocol.

The URI names brokers only. Topics come from `kafka.topics`, and credentials never go in it: a URI is written to
the `runs` table and to every row's `source_file`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.errors import InputError

SCHEME = "kafka://"
USAGE = "expected kafka://HOST:PORT[,HOST:PORT...] (topics are chosen with kafka.topics in the config)"
_SERVER = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})")


@dataclass(frozen=True)
class Bootstrap:
    uri: str  # as given, without a trailing slash
    servers: tuple[str, ...]  # HOST:PORT


def is_kafka_uri(path: str) -> bool:
    return path[: len(SCHEME)].lower() == SCHEME


def parse_bootstrap(uri: str) -> Bootstrap:
    """The servers of a `kafka://` input; InputError for credentials, a path, or a server without a valid port."""
    rest = uri[len(SCHEME) :].rstrip("/")
    if "@" in rest:
        raise InputError(
            uri, "credentials do not go in the URI: set kafka.sasl_username and kafka.sasl_password_env (or _file)"
        )
    if any(mark in rest for mark in "/?#"):
        raise InputError(uri, USAGE)
    servers = tuple(server.strip() for server in rest.split(","))
    for server in servers:
        match = _SERVER.fullmatch(server)
        if match is None or not 0 < int(match.group(1)) < 65536:
            raise InputError(uri, f"{server or '(empty)'} is not HOST:PORT; {USAGE}")
    return Bootstrap(uri[: len(SCHEME)].lower() + rest, servers)
