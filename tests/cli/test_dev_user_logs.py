"""``awsworld dev``'s terminal shows the user's own log lines (``logging.getLogger(...)`` in a step or workflow
body) with the run and step that wrote them, in dev's text line (``cli/dev.py``, ``text_line``), and leaves out
INFO lines of code outside any run, as the deployed function does (``lambda_host/observability.py``)."""

from __future__ import annotations

import pytest

from .test_cli import _start
from .test_dev_failures import dev_of

SHOP = '''
import logging

from awsworld import step, workflow

log = logging.getLogger("shop.orders")
log.info("imported: outside any run, below WARNING")


@step(name="shop.charge")
async def charge(order: str) -> str:
    log.info("charging %s", order)
    return f"charged {order}"


@workflow(name="shop.checkout")
async def checkout(order: str) -> str:
    log.info("checkout of %s", order)
    return await charge(order)
'''


def test_the_dev_terminal_shows_a_steps_own_line_with_its_run_and_step(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    _, runner, server = dev_of(tmp_path_factory, "shop", SHOP)
    try:
        run_id = _start(server, "shop.checkout", '"A-17"', "--wait", "30")
    finally:
        out = server.stop()
        runner.close()
    [charging] = [line for line in out.splitlines() if "charging A-17" in line]
    assert " INFO    charging A-17  (" in charging, charging
    assert f"runId={run_id}" in charging and "stepName=shop.charge" in charging and "stepAttempt=1" in charging
    [checkout] = [line for line in out.splitlines() if "checkout of A-17" in line and "replaying" not in line]
    assert f"runId={run_id}" in checkout and "stepName" not in checkout, checkout
    assert "imported: outside any run" not in out
