"""A workflow whose step calls an outside service (docs: Get started / Your first test, "Replacing an outside
service")."""

import httpx

from awsworld import step, workflow


async def call_carrier(parcel: str, weight_kg: float) -> str:
    """The outside service: a real HTTP call, which a test replaces."""
    async with httpx.AsyncClient(base_url="https://carrier.example") as http:
        response = await http.post("/labels", json={"parcel": parcel, "weightKg": weight_kg})
        response.raise_for_status()
        return str(response.json()["label"])


@step(name="shipping.book", max_retries=2)
async def book(parcel: str, weight_kg: float) -> str:
    return await call_carrier(parcel, weight_kg)  # looked up when the step runs: a test's patch is seen


@workflow(name="shipping.ship")
async def ship(parcel: str, weight_kg: float) -> str:
    label = await book(parcel, weight_kg)
    return f"{parcel} ships with {label}"
