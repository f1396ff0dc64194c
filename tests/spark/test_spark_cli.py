"""`tidelog archive` argument handling (the Spark job itself is covered in test_spark_archive)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from tidelog.cli.archive import parse_duration_ms
from tidelog.cli.main import main


@pytest.mark.parametrize(
    ("text", "expected"),
    [("500ms", 500), ("90s", 90_000), ("15m", 900_000), ("12h", 43_200_000), ("7d", 604_800_000)],
)
def test_durations(text: str, expected: int) -> None:
    assert parse_duration_ms(text) == expected


@pytest.mark.parametrize("text", ["", "7", "7w", "-1d", "1.5h"])
def test_bad_durations_are_usage_errors(text: str) -> None:
    with pytest.raises(click.BadParameter):
        parse_duration_ms(text)


@pytest.mark.parametrize(
    "args",
    [
        ["--topic", "t", "--to", "/tmp/x"],
        ["--topic", "t", "--to", "/tmp/x", "--before", "5", "--older-than", "1d"],
        ["--topic", "t", "--to", "/tmp/x", "--before", "-5"],
    ],
)
def test_archive_needs_exactly_one_cutoff(args: list[str]) -> None:
    result = CliRunner().invoke(main, ["archive", *args])
    assert result.exit_code == 2, result.output


def test_archive_reports_an_unreachable_broker() -> None:
    result = CliRunner().invoke(
        main, ["archive", "-b", "127.0.0.1:1", "--topic", "t", "--before", "5", "--to", "/tmp/x"]
    )
    assert result.exit_code == 1 and "cannot reach a broker" in result.output
