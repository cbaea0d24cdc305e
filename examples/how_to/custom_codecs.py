"""Codecs: your own serialization for one place (docs: How-to / Codecs)."""

import asyncio
import json
from dataclasses import dataclass
from decimal import Decimal

from pydantic import BaseModel

import awsworld
from awsworld import Codec, CodecError, Place, PydanticCodec, child_options, create_hook, poll_until, step, workflow


@dataclass
class Ledger:
    owner: str
    entries: list[int]


class Quote(BaseModel):
    sku: str
    price: Decimal


class Order(BaseModel):
    sku: str
    quantity: int


class Progress(BaseModel):
    n: int


# --8<-- [start:codec]
class LedgerCodec:  # a Codec[Ledger]: any object with these two methods
    def encode(self, value: Ledger, place: Place, /) -> str | bytes:
        return json.dumps({"owner": value.owner, "entries": value.entries})

    def decode(self, data: str | bytes, place: Place, /) -> Ledger:
        try:
            fields = json.loads(data)
            return Ledger(fields["owner"], fields["entries"])
        except (ValueError, KeyError) as error:
            raise CodecError(f"{place}: not a ledger ({error})") from error  # str(place) names the value
# --8<-- [end:codec]


LEDGER: Codec[Ledger] = LedgerCodec()  # the type checker holds the class to the protocol


# --8<-- [start:places]
@step(name="codecs.build", codec=LedgerCodec())  # the step's result
async def build(owner: str) -> Ledger:  # the checker requires it to return a Ledger
    return Ledger(owner, [5, 7])


@workflow(name="codecs.quoted", codec=PydanticCodec(Quote))  # the run's result: run.result() decodes it
async def quoted(sku: str) -> Quote:
    return Quote(sku=sku, price=Decimal("9.90"))


@step(name="codecs.quote", codec=PydanticCodec(Quote), args_codec=PydanticCodec(tuple[Order, int]))
async def quote(order: Order, discount: int = 0) -> Quote:  # result and arguments
    return Quote(sku=order.sku, price=Decimal(12 * order.quantity - discount))


@workflow(name="codecs.checkout", args_codec=PydanticCodec(tuple[Order, int]))  # the run's input
async def checkout(order: Order, discount: int) -> Quote:
    return await quote(order, discount)


@workflow(name="codecs.legacy")
async def legacy(sku: str) -> dict[str, str]:  # a child without a codec of its own
    return {"sku": sku, "price": "3.50"}


@step(name="codecs.check")
async def check(state: Progress) -> Progress:
    return Progress(n=state.n + 1)


@workflow(name="codecs.tour")
async def tour(token: str, orders: list[Order]) -> dict[str, object]:
    ledger = await build("dana")  # a Ledger, decoded on every replay
    async with create_hook(token, codec=PydanticCodec(Order)) as hook:  # a Hook[Order]
        order = await hook  # the sender sent the encoded text: resume_hook(token, order.model_dump_json())
    quotes = await awsworld.map(quote, orders)  # a BatchResult[Quote]: items and results are quote's
    legacy_quote = await child_options(codec=PydanticCodec(Quote)).call(legacy, "kettle")  # a Quote
    done = await poll_until(check, initial_state=Progress(n=0), predicate=lambda p: p.n >= 3,
                            interval="1s", codec=PydanticCodec(Progress))  # each poll's state
    return {"ledger": ledger.entries, "order": order.sku, "quotes": [q.price for q in quotes.values()],
            "legacy": legacy_quote.price, "polls": done.n}
# --8<-- [end:places]


async def main() -> None:
    from awsworld.testing import WorkflowTestEnv

    async with WorkflowTestEnv() as env:
        client = env.client
        assert await (await client.start(quoted, "kettle")).result() == Quote(sku="kettle", price=Decimal("9.90"))
        run = await client.start(checkout, Order(sku="mug", quantity=2), 4)
        assert await run.result() == Quote(sku="mug", price=Decimal(20))
        run = await client.start(tour, "order:1", [Order(sku="mug", quantity=1), Order(sku="cup", quantity=3)])
        await run.wait_for_hook("order:1")
        await client.resume_hook("order:1", Order(sku="tea", quantity=1).model_dump_json())
        assert await run.result() == {"ledger": [5, 7], "order": "tea", "quotes": [Decimal(12), Decimal(36)],
                                      "legacy": Decimal("3.50"), "polls": 3}


if __name__ == "__main__":
    asyncio.run(main())
