"""The pytest plugin the package registers (entry point ``pytest11``): fixtures for testing workflows.

- ``awsworld_env``: a started ``WorkflowTestEnv`` (in memory, time skipping), fresh per test.
- ``awsworld_local``: a ``LocalAWS`` on the AWS emulator (moto's server, one per test session and xdist
  worker, on 127.0.0.1) with a fresh table, bucket and queue per test and its local poller running the
  deliveries: for integration tests of what the AWS World itself does. Needs ``awsworld[local]``.

Both are function-scoped async fixtures, so they run in whichever event loop the test runs in (any
pytest-asyncio loop scope); the emulator's server is a thread and shared by the whole session.

pytest-asyncio (which ``awsworld[testing]`` installs) warns at every session start while its
``asyncio_default_fixture_loop_scope`` option is unset. That is a question about the user's own async fixtures, which
awsworld's fixtures do not depend on, so a project that never chose cannot be left with the noise: when the option is
unset, ``pytest_configure`` silences that one warning, and pytest-asyncio keeps its present default (a fixture's loop
is its own scope). Setting the option (``function``, say) chooses for real.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from .env import WorkflowTestEnv

if TYPE_CHECKING:
    from ..local import LocalAWS, MotoServer

try:
    import pytest_asyncio
except ImportError:  # the fixtures then explain what is missing instead of breaking every test session
    pytest_asyncio = None


FIXTURE_LOOP_SCOPE_OPTION = "asyncio_default_fixture_loop_scope"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Before pytest-asyncio's own ``pytest_configure`` warns that ``asyncio_default_fixture_loop_scope`` is unset,
    ignore that warning, when it is unset. pytest runs every ``pytest_configure`` inside one ``catch_warnings``
    block, so the filter ends with it and hides nothing else."""
    if pytest_asyncio is not None and not config.getini(FIXTURE_LOOP_SCOPE_OPTION):
        warnings.filterwarnings("ignore", message=f'The configuration option "{FIXTURE_LOOP_SCOPE_OPTION}" is unset',
                                category=pytest.PytestDeprecationWarning)


def _need_pytest_asyncio() -> None:
    pytest.fail("the awsworld fixtures are async: install pytest-asyncio (pip install 'awsworld[testing]')",
                pytrace=False)


@pytest.fixture(scope="session")
def awsworld_moto_server() -> Iterator[MotoServer]:
    """moto's server for ``awsworld_local``, started on first use and stopped at the end of the session."""
    try:
        from ..local import MotoServer
    except ImportError as missing:
        pytest.fail(f"awsworld_local needs the emulator: pip install 'awsworld[local]' ({missing})", pytrace=False)
    server = MotoServer().start()
    yield server
    server.stop()


def _async_fixture(fn: Any) -> Any:
    """``pytest_asyncio.fixture`` (so the fixtures work in strict and auto mode alike), or, without
    pytest-asyncio, a fixture that says what to install."""
    if pytest_asyncio is not None:
        return pytest_asyncio.fixture(fn)

    @pytest.fixture(name=fn.__name__)
    def missing() -> None:
        _need_pytest_asyncio()

    missing.__doc__ = fn.__doc__
    return missing


def _require_async_test(request: pytest.FixtureRequest, fixture: str) -> None:
    """Fail a plain ``def`` test that asks for ``fixture``: the fixture's deliveries run as tasks of the loop it was
    set up in, which does not run while a sync test does, so a run the test starts (``asyncio.run(...)`` on a loop
    of its own) would be recorded and never delivered, and the test would pass having checked nothing."""
    test = getattr(request.node, "obj", None)
    if callable(test) and not inspect.iscoroutinefunction(test):
        pytest.fail(f"{fixture} needs an async test: {request.node.name} is a plain def, and the runs it starts would "
                    "never be delivered (the fixture's deliveries run on the event loop of an async test). Make it "
                    "`async def` (with @pytest.mark.asyncio, or asyncio_mode = \"auto\"), or, in a sync test, use "
                    "`asyncio.run(main())` with `async with WorkflowTestEnv() as env:` inside main", pytrace=False)


@_async_fixture
async def awsworld_env(request: pytest.FixtureRequest) -> AsyncIterator[WorkflowTestEnv]:
    """An in-memory test environment with time skipping (see ``awsworld.testing.WorkflowTestEnv``)."""
    _require_async_test(request, "awsworld_env")
    async with WorkflowTestEnv() as env:
        yield env


@_async_fixture
async def awsworld_local(request: pytest.FixtureRequest, awsworld_moto_server: MotoServer) -> AsyncIterator[LocalAWS]:
    """``LocalAWS`` on the session's moto server: fresh resources, deliveries run by its local poller."""
    from ..local import LocalAWS

    _require_async_test(request, "awsworld_local")

    async with LocalAWS("moto", moto=awsworld_moto_server) as local:
        yield local
