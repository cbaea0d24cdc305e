"""``awsworld dev``'s terminal when a run fails: the run, the failing step, the original type and message, and the
tracebacks, as plain text (dev sets ``AWSWORLD_LOG_ERRORS=full``), with a ``dev`` process of its own."""

from __future__ import annotations

import textwrap

import pytest

from .test_cli import WORKFLOWS, Dev, Runner, _start


def test_the_dev_terminal_says_when_a_run_fails_with_its_traceback(tmp_path_factory: pytest.TempPathFactory) -> None:
    project = tmp_path_factory.mktemp("failures")
    (project / "clitest.py").write_text(textwrap.dedent(WORKFLOWS))
    runner = Runner(tmp_path_factory.mktemp("runner"))
    server = Dev(project, project / "state", [runner])
    try:
        run_id = _start(server, "clitest.fail", '["out of filters"]', "--wait", "30")
    finally:
        out = server.stop()
        runner.close()
    head = (f"run {run_id} (clitest.fail) failed [USER_ERROR]: StepError: step 'clitest.boom' failed: "
            "ValueError: out of filters")
    assert head in out.splitlines(), out
    report = out[out.index(head):]
    assert "  step clitest.boom (step_" in report and "raised ValueError: out of filters" in report
    assert "raise ValueError(why)" in report and "await boom(why)" in report
