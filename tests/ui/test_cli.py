"""``awsworld ui``'s refusals, in-process (the server itself is exercised by the browser test)."""

from __future__ import annotations

import pytest

from awsworld.cli import main


def test_ui_refuses_a_non_loopback_host(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AWSWORLD_TABLE", "t")
    monkeypatch.setenv("AWSWORLD_BUCKET", "b")
    for variable in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
        monkeypatch.delenv(variable, raising=False)
    assert main(["ui", "--ui-host", "0.0.0.0"]) == 2
    assert "loopback only" in capsys.readouterr().err


def test_ui_needs_a_configured_stack(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("AWSWORLD_TABLE", raising=False)
    assert main(["ui"]) == 2
    assert "AWSWORLD_TABLE" in capsys.readouterr().err
