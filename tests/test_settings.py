"""One settings object reads every ``AWSWORLD_*`` variable, and the docs' settings page is generated from it.

The page (``docs/reference/settings.md``) asks for the table with a marker the docs build replaces with
``settings_table()`` (``docs/hooks/generated.py``; ``tests/docs/test_site.py`` checks the built page). This file
fails when a module outside ``settings.py`` names a variable itself (so it would read it on its own), or when the
docs, the README, the code or the SAM templates mention a variable ``Settings`` lacks.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path
from unittest.mock import patch

import pytest

from awsworld.aws.config import AWSConfig
from awsworld.settings import SETTINGS, Settings, settings_table
from awsworld.world.watch import horizon_seconds

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
SRC = ROOT / "src" / "awsworld"
NAME = re.compile(r"\bAWSWORLD_[A-Z][A-Z0-9_]*[A-Z0-9]\b")


def test_the_settings_page_asks_for_the_generated_table() -> None:
    assert "<!-- awsworld:settings -->" in (DOCS / "reference" / "settings.md").read_text(encoding="utf-8")
    table = settings_table()
    assert all(f"| `{var.env}` |" in table for var in Settings.variables())


def test_no_module_but_settings_names_a_variable() -> None:
    """A variable's name as a string of its own (an environment key) appears only in settings.py: every other
    module reads (or sets) it through ``Settings`` (``SETTINGS.x``, ``Settings.x.env``)."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "settings.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.fullmatch(node.value):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value}")
    assert offenders == []


def test_every_variable_mentioned_anywhere_is_declared() -> None:
    declared = {var.env for var in Settings.variables()}
    places = [README, *DOCS.rglob("*.md"), *SRC.rglob("*.py"), *SRC.rglob("*.yaml"), ROOT / "template.yaml",
              *(ROOT / "tests").rglob("*.py"), *(ROOT / "examples").rglob("*.py")]
    mentioned = {name: path for path in places for name in NAME.findall(path.read_text(encoding="utf-8"))}
    assert {name: str(path.relative_to(ROOT)) for name, path in mentioned.items() if name not in declared} == {}
    assert len(declared) == len(Settings.variables())  # no name declared twice


def test_the_variables_the_page_says_the_stack_sets_are_the_ones_it_sets() -> None:
    """The settings page's first group is titled "set by the SAM template and ``awsworld dev``": each of its
    variables is in the template's function environment or ``awsworld dev``'s export lines, and every variable the
    template sets is on the page under a group. ``AWSWORLD_INLINE_VALUE_LIMIT``, ``AWSWORLD_STREAM_FLUSH_MS`` and
    ``AWSWORLD_DEDUP_LEASE_SECONDS`` were listed there, and neither sets them (a reader looked for the template
    parameter that moves the inline limit)."""
    from awsworld.cli.dev import environment
    from awsworld.deploy import template_text

    template = template_text()
    functions = template[template.index("    Environment:\n      Variables:"):template.index("\n    Tags:")]
    set_by_template = set(NAME.findall(functions))
    where = AWSConfig.from_env({Settings.table.env: "t", Settings.bucket.env: "b", Settings.queue_url.env: "q",
                                Settings.dlq_url.env: "d"})
    exported = {name for name in environment(where, "http://127.0.0.1:1") if name.startswith("AWSWORLD_")}
    stack = {var.env for var in Settings.variables() if var.group == "stack"}
    assert len(set_by_template) >= 10 and len(exported) >= 5
    assert sorted(stack - set_by_template - exported) == []
    assert set_by_template <= {var.env for var in Settings.variables()}


def test_a_value_is_read_when_it_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWSWORLD_WATCH_HORIZON_SECONDS", raising=False)
    assert horizon_seconds() == 300.0 == SETTINGS.watch_horizon_seconds
    monkeypatch.setenv("AWSWORLD_WATCH_HORIZON_SECONDS", "42")
    assert horizon_seconds() == 42.0
    monkeypatch.setenv("AWSWORLD_WATCH_HORIZON_SECONDS", "-5")
    assert horizon_seconds() == 0.0  # clamped, as before
    monkeypatch.setenv("AWSWORLD_WATCH_HORIZON_SECONDS", "")
    assert horizon_seconds() == 300.0  # blank is unset


def test_the_process_environment_is_read_at_each_access_however_it_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """``SETTINGS`` reads the dict ``os.environ`` keeps (``settings._process_text``), not ``os.environ.get``: every
    way a test or ``awsworld dev`` changes the environment is seen at the next read, as ``os.environ.get`` sees it."""
    name = Settings.table.env
    monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(Settings.modules.env, raising=False)
    assert SETTINGS.table is None
    os.environ[name] = "set"  # (monkeypatch restores the variable after the test: it was deleted through it)
    assert SETTINGS.table == "set"
    os.environb[name.encode()] = b"through-bytes"
    assert SETTINGS.table == "through-bytes"
    with patch.dict(os.environ, {name: "patched \udcff"}):
        assert SETTINGS.table == "patched \udcff" == os.environ.get(name)  # (a byte no encoding decodes: kept)
    assert SETTINGS.table == "through-bytes"
    del os.environ[name]
    assert SETTINGS.table is None
    os.environ[name] = ""
    assert SETTINGS.table is None and SETTINGS.modules is None  # blank is unset; unset is unset even for modules
    monkeypatch.setenv(Settings.modules.env, "")
    assert SETTINGS.modules == ""


def test_a_snapshot_and_a_mapping_of_your_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWSWORLD_ON_DIVERGENCE", " PARK ")
    snapshot = Settings.from_env()
    monkeypatch.setenv("AWSWORLD_ON_DIVERGENCE", "fail")
    assert snapshot.on_divergence == "park" and SETTINGS.on_divergence == "fail"
    mine = Settings({"AWSWORLD_MODULES": "", "AWSWORLD_LOG_ERRORS": "Full", "AWSWORLD_FLOW_BUDGET_MS": "0"})
    assert mine.modules == ""  # AWSWORLD_MODULES keeps a blank value: an unknown workflow's error names it
    assert mine.log_errors == "full" and mine.flow_budget_ms == 0 and mine.max_events_per_run == 10_000
    with pytest.raises(AttributeError):
        mine.modules = "x"  # frozen


def test_a_bad_value_is_refused_naming_the_variable() -> None:
    with pytest.raises(ValueError, match="AWSWORLD_MAX_VALUE_BYTES must be a positive number of bytes"):
        _ = Settings({"AWSWORLD_MAX_VALUE_BYTES": "lots"}).max_value_bytes
    with pytest.raises(ValueError, match="AWSWORLD_PARK_SECONDS='soon'"):
        Settings({"AWSWORLD_PARK_SECONDS": "soon"}).check()
    assert Settings({}).check()["max_value_bytes"] == 64 * 1024 * 1024


def test_aws_config_reads_through_settings() -> None:
    config = AWSConfig.from_env({"AWSWORLD_TABLE": "t", "AWSWORLD_BUCKET": "b", "AWSWORLD_QUEUE_URL": "",
                                 "AWSWORLD_KMS_KEY_ID": "", "AWSWORLD_RETENTION_DAYS": "1.5",
                                 "AWSWORLD_INLINE_VALUE_LIMIT": "100"})
    assert (config.table_name, config.bucket_name, config.queue_url, config.kms_key_id) == ("t", "b", None, None)
    assert config.retention_seconds == 129_600 and config.max_run_seconds == 365 * 86_400
    assert config.inline_value_limit == 100
    with pytest.raises(RuntimeError, match="AWSWORLD_BUCKET is not set"):
        AWSConfig.from_env({"AWSWORLD_TABLE": "t", "AWSWORLD_BUCKET": ""})

