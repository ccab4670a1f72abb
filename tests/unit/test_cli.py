"""The `produce-audit` command-line contract: arguments, exit codes and messages (the end-to-end run is
tests/integration/test_cli_run.py)."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from pipeline.arguments import parse_reference_time
from pipeline.cli import (
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_USAGE,
    check_writable,
    exit_code_for,
    main,
    new_run_id,
)
from pipeline.config import load_settings
from pipeline.session import PROGRESS_BAR, with_progress_bar

COMMANDS = ("run", "ingest", "audit", "report")
MAY_1_2024_MS = 1_714_521_600_000
SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "basic"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command, capsys):
    assert main([command, "--help"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith(f"usage: produce-audit {command}")
    assert "--warehouse" in out
    assert "exit codes:" in out


def test_top_level_help_lists_the_commands(capsys):
    assert main(["--help"]) == EXIT_OK
    out = capsys.readouterr().out
    for command in COMMANDS:
        assert command in out


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["run", "--bogus"],
        ["run", "--warehouse", "wh"],  # --input is required
        ["audit", "--fail-on", "LOUD"],
        ["audit", "--transaction-version", "3"],
        ["report", "--input", "logs"],
    ],
)
def test_usage_errors_exit_2(argv, capsys):
    assert main(argv) == EXIT_USAGE
    assert "usage: produce-audit" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["run", "ingest"])
def test_missing_input_exits_2_naming_the_path(command, tmp_path, capsys):
    missing = tmp_path / "no-such-log-root"
    assert main([command, "--input", str(missing), "--warehouse", str(tmp_path / "wh")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert str(missing) in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["audit", "report"])
def test_missing_warehouse_exits_2_naming_the_path(command, tmp_path, capsys):
    missing = tmp_path / "no-such-warehouse"
    assert main([command, "--warehouse", str(missing)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert str(missing) in err
    assert len(err.strip().splitlines()) == 1


def test_unreadable_config_exits_2_naming_the_file(tmp_path, capsys):
    missing = tmp_path / "missing.yaml"
    assert main(["audit", "--conf", str(missing), "--warehouse", str(tmp_path)]) == EXIT_USAGE
    assert str(missing) in capsys.readouterr().err


def test_invalid_config_exits_2_naming_the_file(tmp_path, capsys):
    conf = tmp_path / "bad.yaml"
    conf.write_text("audit:\n  transaction_version: 7\n")
    assert main(["audit", "--conf", str(conf), "--warehouse", str(tmp_path)]) == EXIT_USAGE
    assert str(conf) in capsys.readouterr().err


@pytest.mark.parametrize("value", ["yesterday", "2024-13-01", "1.5e12", "-5"])
def test_bad_reference_time_exits_2(value, tmp_path, capsys):
    assert main(["audit", "--warehouse", str(tmp_path), f"--reference-time={value}"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--reference-time" in err
    assert "ISO-8601" in err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1714521600000", MAY_1_2024_MS),
        ("0", 0),
        ("2024-05-01T00:00:00Z", MAY_1_2024_MS),
        ("2024-05-01T00:00:00", MAY_1_2024_MS),  # naive means UTC
        ("2024-05-01 00:00:00", MAY_1_2024_MS),
        ("2024-05-01T02:00:00+02:00", MAY_1_2024_MS),
        ("2024-05-01T00:00:00.123Z", MAY_1_2024_MS + 123),
        ("2024-05-01", MAY_1_2024_MS),
        (" 2024-05-01T00:00:00Z ", MAY_1_2024_MS),
    ],
)
def test_parse_reference_time(text, expected):
    assert parse_reference_time(text) == expected


@pytest.mark.parametrize("text", ["", "now", "1.5", "-1", "2024-05-01T25:00:00", "01/05/2024"])
def test_parse_reference_time_rejects(text):
    with pytest.raises(ValueError, match="ISO-8601"):
        parse_reference_time(text)


def test_run_id_is_a_sortable_utc_timestamp_with_a_random_suffix():
    earlier = datetime(2024, 5, 1, 23, 59, 59, tzinfo=UTC)
    later = earlier + timedelta(seconds=1)
    run_id = new_run_id(earlier)
    assert re.fullmatch(r"20240501T235959Z-[0-9a-f]{6}", run_id)
    assert run_id < new_run_id(later)
    assert new_run_id(earlier) != new_run_id(earlier)
    assert re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{6}", new_run_id())


def test_run_id_converts_other_zones_to_utc():
    in_paris_summer = datetime(2024, 5, 1, 4, 0, tzinfo=timezone(timedelta(hours=2)))
    assert new_run_id(in_paris_summer).startswith("20240501T020000Z-")


@pytest.mark.parametrize(
    ("counts", "fail_on", "expected"),
    [
        ({}, "INFO", EXIT_OK),
        ({"INFO": 0, "WARN": 0, "ERROR": 0, "CRITICAL": 0}, "INFO", EXIT_OK),
        ({"INFO": 3}, "INFO", EXIT_FINDINGS),
        ({"INFO": 3}, "WARN", EXIT_OK),
        ({"WARN": 1}, "WARN", EXIT_FINDINGS),
        ({"WARN": 1}, "ERROR", EXIT_OK),
        ({"ERROR": 1}, "ERROR", EXIT_FINDINGS),
        ({"CRITICAL": 1}, "ERROR", EXIT_FINDINGS),
        ({"ERROR": 5}, "CRITICAL", EXIT_OK),
        ({"CRITICAL": 1}, "CRITICAL", EXIT_FINDINGS),
        ({"CRITICAL": 9, "ERROR": 9}, "never", EXIT_OK),
    ],
)
def test_exit_code_for_fail_on_threshold(counts, fail_on, expected):
    assert exit_code_for(counts, fail_on) == expected


@pytest.fixture
def no_spark(monkeypatch):
    """Fail the test if the command gets as far as starting Spark."""

    def refuse(settings):
        raise AssertionError("Spark was started")

    monkeypatch.setattr("pipeline.session.build_session", refuse)


@pytest.mark.parametrize("command", ["run", "ingest"])
@pytest.mark.parametrize("place", ["a file", "under /proc"])
def test_unwritable_warehouse_exits_2_before_spark(command, place, tmp_path, capsys, no_spark):
    if place == "a file":
        warehouse = tmp_path / "wh"
        warehouse.write_text("not a directory")
    else:
        warehouse = Path("/proc") / f"produce-audit-{tmp_path.name}" / "wh"
    assert main([command, "--input", str(SAMPLE), "--warehouse", str(warehouse)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert str(warehouse) in err
    assert "warehouse" in err
    assert len(err.strip().splitlines()) == 1


def test_the_writability_check_leaves_nothing_behind(tmp_path):
    warehouse = tmp_path / "new" / "wh"
    check_writable(warehouse)
    assert not (tmp_path / "new").exists()
    existing = tmp_path / "existing"
    existing.mkdir()
    check_writable(existing)
    assert list(existing.iterdir()) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("audit:\n  transaction_versoin: 2\n", "audit.transaction_versoin: Extra inputs are not permitted"),
        ("audit:\n  transaction_version: 7\n", "audit.transaction_version: Input should be"),
        ("audit: [1\n", "line "),
    ],
)
def test_config_errors_are_one_line_naming_the_key(text, expected, tmp_path, capsys, no_spark):
    conf = tmp_path / "bad.yaml"
    conf.write_text(text)
    assert main(["audit", "--conf", str(conf), "--warehouse", str(tmp_path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"{conf}: {expected}" in err
    assert len(err.strip().splitlines()) == 1


def test_an_unknown_log_level_exits_2_before_spark(tmp_path, capsys, monkeypatch, no_spark):
    """Not 1, which says the data failed: a typo in a scheduler's environment is the call's error."""
    monkeypatch.setenv("PRODUCE_AUDIT_LOG_LEVEL", "verbose")
    assert main(["run", "--input", str(SAMPLE), "--warehouse", str(tmp_path / "wh")]) == EXIT_USAGE
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "PRODUCE_AUDIT_LOG_LEVEL='verbose' is not one of DEBUG, INFO, WARNING, ERROR" in line
    assert not (tmp_path / "wh").exists()


def test_a_reference_time_past_year_9999_exits_2(tmp_path, capsys, no_spark):
    assert main(["audit", "--warehouse", str(tmp_path), "--reference-time=99999999999999999999"]) == EXIT_USAGE
    assert "past year 9999" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["run", "ingest"])
def test_an_input_without_files_exits_2_before_spark_and_writes_nothing(command, tmp_path, capsys, no_spark):
    empty = tmp_path / "logs"
    (empty / "orders-0").mkdir(parents=True)
    (empty / "orders-0" / "00000000000000000000.log").touch()
    warehouse = tmp_path / "wh"
    assert main([command, "--input", str(empty), "--warehouse", str(warehouse)]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(empty) in err[0] and "no Kafka log entries found" in err[0]
    assert not warehouse.exists() or list(warehouse.iterdir()) == []


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_is_on_on_a_terminal_and_off_otherwise():
    assert with_progress_bar({}, _Terminal())[PROGRESS_BAR] == "true"
    assert with_progress_bar({}, io.StringIO())[PROGRESS_BAR] == "false"
    assert with_progress_bar({PROGRESS_BAR: "false"}, _Terminal())[PROGRESS_BAR] == "false"  # the config wins
    assert PROGRESS_BAR not in load_settings(None).spark.conf  # so the shipped config leaves it to the terminal
