"""The unknown-workflow error names the modules that registered workflows, the deployment's own first: in a
process that imported many (a test session, a notebook), the ones ``AWSWORLD_MODULES`` names must not fall past
the cut of the list."""

from __future__ import annotations

import pytest

from awsworld.authoring.definitions import MAX_MODULES_NAMED, MODULES_ENV, WorkflowNotRegisteredError


def test_the_deployments_modules_come_first_in_a_long_list(monkeypatch: pytest.MonkeyPatch) -> None:
    others = [f"aaa.mod{i:02d}" for i in range(MAX_MODULES_NAMED + 5)]
    monkeypatch.setenv(MODULES_ENV, "zapp, zapp2")
    error = WorkflowNotRegisteredError("zapp.missing", [*others, "zapp.flows", "zapp2", "zapp_other"])
    text = str(error)
    assert "workflows from zapp.flows, zapp2, aaa.mod00" in text, text
    assert "zapp_other" not in text  # not one of the named modules (a prefix of a name is not its module)
    assert f"and {len(others) + 3 - MAX_MODULES_NAMED} more modules" in text
    assert f"{MODULES_ENV}='zapp, zapp2'" in text
