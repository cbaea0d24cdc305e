"""A workflow whose step calls an outside service (docs: Get started / Your first test, "Replacing an outside
service")."""

import asyncio
import json
import urllib.request

from awsworld import step, workflow


async def call_carrier(parcel: str, weight_kg: float) -> str:
    """The outside service: a real HTTP call (the standard library's, in a thread; httpx or aiohttp in your code),
    which a test replaces."""
    request = urllib.request.Request("https://carrier.example/labels", method="POST",
                                     data=json.dumps({"parcel": parcel, "weightKg": weight_kg}).encode(),
                                     headers={"content-type": "application/json"})

    def post() -> str:
        with urllib.request.urlopen(request, timeout=10) as response:
            return str(json.load(response)["label"])

    return await asyncio.to_thread(post)


@step(name="shipping.book", max_retries=2)
async def book(parcel: str, weight_kg: float) -> str:
    return await call_carrier(parcel, weight_kg)  # looked up when the step runs: a test's patch is seen


@workflow(name="shipping.ship")
async def ship(parcel: str, weight_kg: float) -> str:
    label = await book(parcel, weight_kg)
    return f"{parcel} ships with {label}"
