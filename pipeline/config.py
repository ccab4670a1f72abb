"""Run configuration: YAML files validated with pydantic, layered over built-in defaults.

Only facts the log does not hold live here (spec §6.0): expiry and timeout settings, which topics are
compacted or coordinator-written, the transaction version, and where to read and write.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

DEFAULT_CONF = Path(__file__).resolve().parent.parent / "conf" / "local.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SparkSettings(_Strict):
    master: str | None = "local[*]"
    app_name: str = "produce-audit"
    conf: dict[str, str] = Field(default_factory=dict)
    small_input_batches: int = Field(50_000, ge=0)  # pipeline.small_inputs; 0 = always Spark's own settings
    optimising_compiler_batches: int = Field(4_000_000, ge=0)  # pipeline.compilers; 0 = the shipped options always


class DeltaSettings(_Strict):
    backend: Literal["auto", "native", "embedded"] = "auto"


class IngestSettings(_Strict):
    skip_dir_suffixes: list[str] = Field(default_factory=lambda: ["-delete", "-future", "-stray"])
    segment_split_bytes: int = 128 * 1024 * 1024
    # Skip the `.log` segments that `ingest_manifest` shows unchanged since an earlier ingest (`--full`: False).
    incremental: bool = True
    # Walk every record of every v2 batch (FMT-006 record structure, FMT-008 max timestamp). Off, those columns
    # stay null and those rules are silent; decoding is then faster, compressed batches most of all.
    verify_records: bool = True
    # Also hash every data record's key, value and headers into `payloads` for the payload rules (§6.11): a second
    # pass over the segments (`--deep`). Off, nothing of it runs and those rules are skipped.
    deep: bool = False
    # The cluster of the inputs that name none (dump text, columnar exports, a log dir without `cluster.id` in its
    # meta.properties; `--cluster-id`): partitions are told apart by (cluster, topic, partition). "": unknown.
    cluster_id: str = ""
    # The cluster of each input given with one (`--cluster-input ID PATH`), by the input as given: its dump text,
    # columnar exports and log dirs without `cluster.id` are that cluster's; other inputs get `cluster_id`.
    input_clusters: dict[str, str] = Field(default_factory=dict)

    def cluster_of(self, path: str) -> str:
        """The cluster of the rows of input `path` that name none."""
        return self.input_clusters.get(path, self.cluster_id)


class AuditSettings(_Strict):
    producer_id_expiration_ms: int = 86_400_000
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    transaction_version: Literal["auto", "1", "2"] = "auto"
    broker_version: str | None = None
    compacted_topics: list[str] = Field(default_factory=list)
    coordinator_topics: list[str] = Field(
        default_factory=lambda: ["__consumer_offsets", "__transaction_state", "__share_group_state"]
    )
    kraft_topics: list[str] = Field(default_factory=lambda: ["__cluster_metadata"])
    replica_choice: Literal["leader_epoch", "broker_id"] = "leader_epoch"

    def broker_older_than(self, version: str) -> bool:
        """Whether the configured broker version is below `version`; unknown means a current broker."""
        if not self.broker_version:
            return False
        return _version_tuple(self.broker_version) < _version_tuple(version)


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:2] if part.isdigit())


class KafkaSettings(_Strict):
    """How `kafka://` inputs are read over the Kafka protocol (pipeline/sources/kafka_wire). Secrets are never
    settings: a password is named by the environment variable or file that holds it, read where it is used (the
    driver and each executor), so the `runs` table, which records the settings, never holds one."""

    topics: list[str] = Field(default_factory=lambda: ["*"])  # globs; internal topics only when a glob names them
    # Where each partition's read starts and ends: the log start and the high watermark by default, or the first
    # offset at or after an ISO-8601 time ("2026-12-01T00:00:00Z") or epoch milliseconds.
    start: str | None = None
    end: str | None = None
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password_env: str | None = None  # the environment variable holding the password
    sasl_password_file: str | None = None  # or a file holding it (its first line)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_check_hostname: bool = True
    # One Fetch asks the leader for at most this many bytes; a larger batch still comes whole (KIP-74).
    max_fetch_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    # Each task reads at most this many bytes a second (0: no cap), so an audit never crowds out the consumers.
    max_fetch_bytes_per_second: int = Field(0, ge=0)
    # A task reads a byte range of about this size (the partition's size from DescribeLogDirs, where allowed).
    range_bytes: int = Field(128 * 1024 * 1024, ge=1024)
    request_timeout_ms: int = Field(30_000, ge=1000)
    connect_timeout_ms: int = Field(10_000, ge=100)  # a bootstrap that does not answer within it is an input error
    retries: int = Field(8, ge=0)  # leader changes, NOT_LEADER_OR_FOLLOWER, throttling; backoff doubles from 100 ms


class ReportSettings(_Strict):
    top_findings: int = 20


class Settings(_Strict):
    warehouse: str = "./warehouse"
    spark: SparkSettings = Field(default_factory=SparkSettings)
    delta: DeltaSettings = Field(default_factory=DeltaSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    audit: AuditSettings = Field(default_factory=AuditSettings)
    report: ReportSettings = Field(default_factory=ReportSettings)
    fail_on: Literal["INFO", "WARN", "ERROR", "CRITICAL", "never"] = "ERROR"


class ConfigError(ValueError):
    """A config file that cannot be read or does not validate; the message names the file."""


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: {_yaml_problem(exc)}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def load_settings(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> Settings:
    """Defaults from conf/local.yaml (when present), then `path`, then `overrides`."""
    data: dict[str, Any] = _read_yaml(DEFAULT_CONF) if DEFAULT_CONF.exists() else {}
    source = str(DEFAULT_CONF)
    if path is not None:
        data = _merge(data, _read_yaml(Path(path)))
        source = str(path)
    data = _merge(data, overrides or {})
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_validation_problems(exc)}") from exc


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """The parser's complaint on one line, with the line and column it points at."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + " ".join(f"not YAML: {problem}".split())


def _validation_problems(exc: ValidationError) -> str:
    """Every invalid key on one line: `audit.transaction_version: Input should be 'auto', '1' or '2'; ...`."""
    problems = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"]) or "(top level)"
        problems.append(f"{key}: {' '.join(error['msg'].split())}")
    return "; ".join(problems)
