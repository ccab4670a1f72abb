"""Clients of kafka-python for a `kafka://` input, built the same way on the driver and in the executors' tasks.

The password is read where the client is made, from the environment variable or file the settings name (on a
cluster: `spark.executorEnv.NAME`, or a file present on every executor), so it never travels in a task, a plan or
the `runs` table. A broker that does not answer, or refuses the credentials, is an InputError naming it: the run
ends with exit 2 and one line.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pipeline.config import KafkaSettings
from pipeline.errors import InputError
from pipeline.sources.kafka_wire.address import Bootstrap

CLIENT_ID = "produce-audit"
# Above the Fetch size a response may carry one batch larger than it (KIP-74): up to a topic's max.message.bytes.
LARGEST_BATCH_BYTES = 128 * 1024 * 1024
AUTHENTICATION_FAILED = "SaslAuthenticationFailedError"
DISCONNECTED = "socket disconnected"
# `Connection failed: KafkaConnectionError: 111 ECONNREFUSED`, `Abort ([Error 58] SaslAuthenticationFailedError: ...)`
_REASON = re.compile(r"(?:failed: |lost: |\] )(\w+Error: [^()]*?)\)?(?: \(backoff [^)]*\))?$")


def password(settings: KafkaSettings) -> str | None:
    """The SASL password from the variable or file the settings name; None when they name neither."""
    if settings.sasl_password_env:
        value = os.environ.get(settings.sasl_password_env)
        if value is None:
            raise InputError(
                "kafka.sasl_password_env", f"the environment variable {settings.sasl_password_env} is not set"
            )
        return value
    if settings.sasl_password_file:
        try:
            lines = Path(settings.sasl_password_file).read_text().splitlines()
        except OSError as exc:
            raise InputError(
                settings.sasl_password_file, f"cannot read the password file: {exc.strerror or exc}"
            ) from None
        return lines[0] if lines else ""
    return None


def client_config(bootstrap: Bootstrap, settings: KafkaSettings) -> dict[str, Any]:
    """kafka-python's settings for a client of `bootstrap`; the password is read here, never stored."""
    config: dict[str, Any] = {
        "bootstrap_servers": list(bootstrap.servers),
        "client_id": CLIENT_ID,
        "security_protocol": settings.security_protocol,
        "request_timeout_ms": settings.request_timeout_ms,
        "bootstrap_timeout_ms": settings.connect_timeout_ms,
        "reconnect_backoff_max_ms": 1000,
        "ssl_check_hostname": settings.ssl_check_hostname,
        "receive_message_max_bytes": settings.max_fetch_bytes + LARGEST_BATCH_BYTES,
    }
    if settings.security_protocol.startswith("SASL"):
        if not settings.sasl_mechanism or not settings.sasl_username:
            raise InputError(
                bootstrap.uri, f"{settings.security_protocol} needs kafka.sasl_mechanism and kafka.sasl_username"
            )
        config.update(
            sasl_mechanism=settings.sasl_mechanism,
            sasl_plain_username=settings.sasl_username,
            sasl_plain_password=password(settings) or "",
        )
    for key in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
        if getattr(settings, key):
            config[key] = getattr(settings, key)
    return config


@contextmanager
def admin_client(bootstrap: Bootstrap, settings: KafkaSettings) -> Iterator[Any]:
    """A KafkaAdminClient of the cluster, closed after; connection and authentication failures are InputErrors."""
    from kafka import KafkaAdminClient

    config = client_config(bootstrap, settings)
    with refused_as_input_error(bootstrap, settings):
        client = KafkaAdminClient(**config)
    try:
        with refused_as_input_error(bootstrap, settings):
            yield client
    finally:
        client.close()


class _Failures(logging.Handler):
    """Why kafka-python's connections failed while it retried: its bootstrap retries until the timeout and then
    says only that it could not bootstrap, so the reason (refused credentials, a closed port) is in its log."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.reasons: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        found = _REASON.search(record.getMessage())
        if found and not found.group(1).startswith("KafkaTimeoutError"):  # the outcome, not a reason
            name, _, why = found.group(1).partition(": ")
            self.reasons.append(why if why.startswith(f"{name}: ") else found.group(1))

    def reason(self) -> str | None:
        refused = [reason for reason in self.reasons if reason.startswith(AUTHENTICATION_FAILED)]
        return (refused or self.reasons or [None])[-1]


@contextmanager
def refused_as_input_error(bootstrap: Bootstrap, settings: KafkaSettings) -> Iterator[None]:
    """kafka-python's errors for a broker that could not be reached or would not talk to us (rather than for a request
    that failed) as InputErrors naming the bootstrap. Imported on use, as is kafka-python: runs without a `kafka://`
    input never load it."""
    import kafka.errors as kafka_errors

    unreachable = (kafka_errors.KafkaConnectionError, kafka_errors.KafkaTimeoutError, kafka_errors.NodeNotReadyError)
    refused = (
        kafka_errors.SaslAuthenticationFailedError,
        kafka_errors.AuthorizationError,
        kafka_errors.UnsupportedVersionError,
    )
    failures = _Failures()
    logger = logging.getLogger("kafka")
    logger.addHandler(failures)
    try:
        yield
    except unreachable as exc:
        reason = failures.reason()
        if reason is not None and reason.startswith(AUTHENTICATION_FAILED):
            raise InputError(bootstrap.uri, f"the broker refused the credentials: {reason}") from None
        if reason is not None and DISCONNECTED in reason and settings.security_protocol.startswith("SASL"):
            # A broker that refuses SASL credentials may close the connection before kafka-python reads why; one
            # that cannot be reached refuses or times out the connection instead of closing it.
            raise InputError(
                bootstrap.uri,
                f"the broker refused the credentials: it closed the connection during {settings.sasl_mechanism} "
                f"authentication of {settings.sasl_username} ({reason})",
            ) from None
        raise InputError(
            bootstrap.uri,
            f"no broker of {', '.join(bootstrap.servers)} answered within {settings.connect_timeout_ms} ms "
            f"({reason or f'{type(exc).__name__}: {exc}'})",
        ) from None
    except refused as exc:
        raise InputError(bootstrap.uri, f"the broker refused the client: {type(exc).__name__}: {exc}") from None
    finally:
        logger.removeHandler(failures)
