"""botocore clients made awaitable: every request runs on a thread pool, the event loop awaits its future.

Why not aioboto3 or aiobotocore: measured on the built flow function (bench/cold_start.py,
docs/operate/cold-starts.md), their HTTP stack (aiohttp and its dependencies) cost more to import than botocore
itself and ~10 MB of RSS, and they pin a botocore of their own, so the function had to bundle all of it (26 MB of
botocore, 7 of aiohttp). botocore is preinstalled in Lambda's Python runtime; with a thread pool the artifact
carries none of it, and a request's latency is the same (the hop to a worker thread is tens of microseconds against
the milliseconds of a request).

What callers see is what aiobotocore gave them, so the World's code and its tests did not change shape:

- ``await client.put_item(...)``: each operation runs ``client.put_item`` on a worker thread, in a copy of
  the caller's ``contextvars`` context (a botocore event handler sees the task's context variables, as
  ``asyncio.to_thread`` does);
- a response's streaming ``Body`` is read to the end on the worker thread and handed back as ``Body``, which
  supports ``async with response["Body"] as body: await body.read()`` (awsworld reads every object whole);
- ``get_paginator(name).paginate(...)`` is an async iterator of pages;
- ``meta`` (its event system: ``meta.events.register``) and ``exceptions`` are the botocore client's own;
- a failure is raised as the client's ``errors`` says: the AWS World's raise a connection, credentials or
  missing-resource failure as awsworld's own error, the botocore one its cause (``request_errors``).

botocore clients are thread-safe; their connection pool (``max_pool_connections``) bounds concurrent requests
together with the pool's workers, which are started only as requests need them (a cold start starts one).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import Executor
from types import TracebackType
from typing import Any


class Body:
    """An S3 object's bytes, read on the worker thread; ``read()`` and ``async with`` as aiobotocore's body."""

    __slots__ = ("_data",)

    def __init__(self, data: bytes) -> None:
        self._data = data

    async def read(self, amount: int | None = None) -> bytes:
        if amount is None:
            data, self._data = self._data, b""
        else:
            data, self._data = self._data[:amount], self._data[amount:]
        return data

    async def __aenter__(self) -> Body:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        return None


def _read_body(response: Any) -> Any:
    body = response.get("Body") if isinstance(response, dict) else None
    if body is not None and hasattr(body, "read") and not isinstance(body, Body):
        try:
            response["Body"] = Body(body.read())
        finally:
            body.close()
    return response


def _call(method: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    return _read_body(method(**kwargs))


async def _in_pool(executor: Executor, function: Callable[..., Any], *args: Any) -> Any:
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(executor, functools.partial(context.run, function, *args))


Errors = Callable[[str, Mapping[str, Any], BaseException], BaseException | None]
"""What a client raises instead of a failure of one of its operations (by its API name, ``Query``, and its
parameters, which name the table, bucket or queue it was for): None to raise the failure itself
(``request_errors.translated``)."""


def _passed(operation: str, params: Mapping[str, Any], error: BaseException) -> BaseException | None:
    return None


async def _request(executor: Executor, errors: Errors, operation: str, params: Mapping[str, Any],
                   function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` on the pool; a failure raised as ``errors`` has it (the original is its cause)."""
    try:
        return await _in_pool(executor, function, *args)
    except Exception as error:
        instead = errors(operation, params, error)
        if instead is None:
            raise
        raise instead from error


class AsyncPaginator:
    """``paginate(**kwargs)`` as an async iterator; each page is fetched on the pool."""

    def __init__(self, paginator: Any, executor: Executor, operation: str = "", errors: Errors = _passed) -> None:
        self._paginator = paginator
        self._executor = executor
        self._operation = operation
        self._errors = errors

    async def _pages(self, kwargs: dict[str, Any]) -> AsyncIterator[Any]:
        pages = await _in_pool(self._executor, lambda: iter(self._paginator.paginate(**kwargs)))
        done = object()
        while (page := await _request(self._executor, self._errors, self._operation, kwargs, next, pages,
                                      done)) is not done:
            yield page

    def paginate(self, **kwargs: Any) -> AsyncIterator[Any]:
        return self._pages(kwargs)


class AsyncClient:
    """A botocore client whose operations are coroutines (see the module doc)."""

    def __init__(self, client: Any, executor: Executor, errors: Errors = _passed) -> None:
        """``errors``: what an operation raises instead of its failure (default: the failure itself)."""
        self.client = client
        self.meta = client.meta
        self.exceptions = client.exceptions
        self._executor = executor
        self._errors = errors

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.client, name)
        if name not in self.client.meta.method_to_api_mapping:
            return attribute
        executor, errors, api_name = self._executor, self._errors, self.client.meta.method_to_api_mapping[name]

        async def operation(**kwargs: Any) -> Any:
            return await _request(executor, errors, api_name, kwargs, _call, attribute, kwargs)

        operation.__name__ = name
        setattr(self, name, operation)  # once per operation: later lookups skip __getattr__
        return operation

    def get_paginator(self, name: str) -> AsyncPaginator:
        return AsyncPaginator(self.client.get_paginator(name), self._executor,
                              self.client.meta.method_to_api_mapping.get(name, name), self._errors)

    def close(self) -> None:
        self.client.close()
