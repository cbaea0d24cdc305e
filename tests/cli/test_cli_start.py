"""What an ``awsworld`` command loads before it does its work. Every command builds the whole parser (each
command's arguments and help), so whatever a command module imports at its top is paid by ``--version``,
``--help`` and every other command: the World's pydantic models, the engine and the client, boto3 and botocore,
Starlette and uvicorn are imported inside the commands that use them (``awsworld.cli``), and ``import awsworld``
imports its public names on first use (``awsworld/__init__.py``).

Pinned on the modules the console script's process imports (``PYTHONPROFILEIMPORTTIME`` lists every one on
stderr), not on time: bench/cli_start.py prints the time."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from awsworld import __version__

AWSWORLD = str(Path(sys.executable).with_name("awsworld"))

NOT_AT_START = (
    # what the commands' work needs: the SDK, the models, the emulator, the viewer and the server, cron and ids
    "boto3", "botocore", "pydantic", "pydantic_core", "aws_lambda_powertools", "cryptography", "ulid", "cronsim",
    "moto", "starlette", "uvicorn", "httpx",
    # awsworld's layers below the CLI
    "awsworld.world", "awsworld.durable", "awsworld.authoring", "awsworld.schedules", "awsworld._engine",
    "awsworld._published", "awsworld._deployments", "awsworld._memory", "awsworld.aws", "awsworld._worker",
    "awsworld.client", "awsworld._timeline", "awsworld.local", "awsworld.lambda_host", "awsworld.ui",
    "awsworld._http", "awsworld.testing",
)

WORDS_ONLY = {"awsworld.schedules", "awsworld.schedules.policies"}
"""Below the CLI, yet no cost: the schedules' policies as words (``schedules create``'s choices), and their package."""


def imported_by(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``awsworld ARGS`` as a process of the console script, and every module it imported."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AWS", "AWSWORLD"))}
    done = subprocess.run([AWSWORLD, *args], env={**env, "PYTHONPROFILEIMPORTTIME": "1"}, capture_output=True,
                          text=True, timeout=60, check=False)
    modules = {match.group(1) for match in re.finditer(r"^import time:.*\|\s*(\S+)$", done.stderr, re.MULTILINE)}
    assert len(modules) > 20, done.stderr  # the listing is there (the interpreter's own imports at least)
    return done, modules


def loaded(modules: set[str]) -> list[str]:
    return sorted(name for name in modules - WORDS_ONLY
                  if any(name == heavy or name.startswith(heavy + ".") for heavy in NOT_AT_START))


@pytest.mark.parametrize("args", [
    ("--version",), ("--help",), ("runs", "--help"), ("describe", "--help"), ("schedules", "create", "--help"),
    ("upgrade", "--help"), ("limits", "--help"), ("dev", "--help"), ("ui", "--help"),
])
def test_help_and_version_import_none_of_what_the_commands_use(args: tuple[str, ...]) -> None:
    done, modules = imported_by(*args)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "awsworld.cli" in modules and "awsworld.cli.runs" in modules  # the parser was built, every command
    assert loaded(modules) == []
    if args == ("--version",):
        assert done.stdout == f"awsworld {__version__}\n"
    else:
        assert done.stdout.startswith("usage: awsworld")


def test_a_usage_error_is_said_before_anything_is_imported() -> None:
    done, modules = imported_by("runs", "--limit", "many")
    assert done.returncode == 2
    assert "awsworld runs: error: argument --limit: invalid int value: 'many'" in done.stderr
    assert loaded(modules) == []


def test_a_command_imports_what_it_uses() -> None:
    """The check above sees imports: ``runs`` on a stack that is not configured reads the World's errors, and its
    message is the one it always was."""
    done, modules = imported_by("runs")
    assert done.returncode == 2
    assert "awsworld runs: AWSWORLD_TABLE and AWSWORLD_BUCKET not set" in done.stderr
    assert {"awsworld.world", "pydantic"} <= set(loaded(modules))
