"""``patched(change_id)``: one test where a run recorded on the old code takes the old branch and a run started on
the new code takes the new one, the answer recorded once (one attr_set per change id) so it never flips."""

from __future__ import annotations

import uuid
from typing import Any

from awsworld import create_hook, patched, step, workflow
from awsworld.client.replay import read_run, replay_events

from .conftest import deployed


@step
async def reserve(order: str) -> str:
    return f"reserved {order}"


@step
async def charge_old(order: str) -> str:
    return f"charged {order}"


@step
async def charge_with_tax(order: str, rate: float) -> str:
    return f"charged {order} with tax {rate}"


@workflow
async def checkout(order: str) -> dict[str, Any]:
    """The code as first deployed."""
    reservation = await reserve(order)
    await create_hook(token=f"pay:{order}")
    receipt = await charge_old(order)
    await create_hook(token=f"ship:{order}")
    return {"reservation": reservation, "receipt": receipt}


async def checkout_v2(order: str) -> dict[str, Any]:
    """The change, as docs/how-to/changing-code.md shows it (examples/how_to/patched_checkout.py)."""
    reservation = await reserve(order)
    await create_hook(token=f"pay:{order}")
    if patched("charge-with-tax"):
        receipt = await charge_with_tax(order, 0.2)
    else:
        receipt = await charge_old(order)
    await create_hook(token=f"ship:{order}")
    if patched("charge-with-tax"):  # asked again later: the same answer, no second write
        receipt += " (v2)"
    return {"reservation": reservation, "receipt": receipt}


async def test_patched_takes_the_old_branch_for_old_history_and_the_new_one_for_new_runs(e2e) -> None:
    old_order, new_order = f"O-{uuid.uuid4().hex[:6]}", f"N-{uuid.uuid4().hex[:6]}"
    old_run = await e2e.start(checkout, old_order)
    await e2e.hook_ready(f"pay:{old_order}", old_run)
    await e2e.client.resume_hook(f"pay:{old_order}", "paid")
    await e2e.hook_ready(f"ship:{old_order}", old_run)  # charged on the old code, in flight
    with deployed(checkout, checkout_v2):  # the deploy
        new_run = await e2e.start(checkout, new_order)
        await e2e.hook_ready(f"pay:{new_order}", new_run)
        await e2e.client.resume_hook(f"pay:{new_order}", "paid")
        await e2e.hook_ready(f"ship:{new_order}", new_run)
        await e2e.client.resume_hook(f"ship:{old_order}", "shipped")
        await e2e.client.resume_hook(f"ship:{new_order}", "shipped")
        old_result = await old_run.result(timeout=30)
        new_result = await new_run.result(timeout=30)
        old_log = await read_run(e2e.world, old_run.run_id)
        new_log = await read_run(e2e.world, new_run.run_id)
        # Both logs replay on the new code (what `awsworld replay` checks before a deploy).
        assert replay_events(old_log).ok and replay_events(new_log).ok
    assert old_result == {"reservation": f"reserved {old_order}", "receipt": f"charged {old_order}"}
    assert new_result == {"reservation": f"reserved {new_order}",
                          "receipt": f"charged {new_order} with tax 0.2 (v2)"}
    markers = [e for e in new_log if e.event_type == "attr_set"]
    assert len(markers) == 1, "one small write per change id per run"
    assert markers[0].event_data["changes"][0]["key"] == "awsworld.patched.charge-with-tax"
    assert not [e for e in old_log if e.event_type == "attr_set"], "nothing recorded for the old run"
    # The old run's log replays on the *old* code too: patched() left nothing in it that the old code misses.
    assert replay_events(old_log).ok
