"""Replacing an outside service in a test, on the in-memory World and the emulator (docs: Get started / Your first
test)."""

import pytest
import shipping

from awsworld import Client

pytestmark = pytest.mark.asyncio


# --8<-- [start:both]
@pytest.fixture(params=["memory", "emulator"])
def client(request: pytest.FixtureRequest) -> Client:
    """Each test that takes ``client`` runs twice: in memory, and on the emulator (needs awsworld[local])."""
    if request.param == "memory":
        return request.getfixturevalue("awsworld_env").client
    client = request.getfixturevalue("awsworld_local").client
    assert client is not None
    return client
# --8<-- [end:both]


# --8<-- [start:replace]
async def test_a_parcel_ships_with_the_carriers_label(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    booked: list[tuple[str, float]] = []

    async def fake_carrier(parcel: str, weight_kg: float) -> str:
        booked.append((parcel, weight_kg))
        return "LBL-1"

    monkeypatch.setattr(shipping, "call_carrier", fake_carrier)  # what the step calls, not the step
    run = await client.start(shipping.ship, "P-9", 2.5)

    assert await run.result(timeout=60) == "P-9 ships with LBL-1"
    assert booked == [("P-9", 2.5)]
    [booked_step] = await run.steps()  # which steps ran, with what
    assert booked_step.step_name == "shipping.book" and booked_step.status == "completed"
    assert booked_step.input == {"args": ["P-9", 2.5], "kwargs": {}} and booked_step.output == "LBL-1"
# --8<-- [end:replace]
