"""The pytest plugin the package registers (entry point ``pytest11``): fixtures for testing workflows.

- ``awsworld_env``: a started ``WorkflowTestEnv`` (in memory, time skipping), fresh per test.
- ``awsworld_local``: a ``LocalAWS`` on the AWS emulator (moto's server, one per test session and xdist
  worker, on 127.0.0.1) with a fresh table, bucket and queue per test and its local poller running the
  deliveries: for integration tests of what the AWS World itself does. Needs ``awsworld[local]``.

Both are function-scoped, and start on the event loop the test runs in, whatever its scope (a test's ``loop_scope``,
the project's ``asyncio_default_test_loop_scope``): each dispatches to one of its async fixtures declared once per
loop scope (``_on_each_loop``), since deliveries run as tasks of one loop and a fixture on a loop of its own would
leave them on a loop that does not run while the test does. A test anyio's plugin runs (``@pytest.mark.anyio``) gets
them on anyio's loop, and one pytest-asyncio runs though anyio would take its async fixtures (an anyio test under
``asyncio_mode = "auto"``) on pytest-asyncio's (``_start_on_the_tests_loop``). The emulator's server is a thread
and shared by the whole session.

pytest-asyncio (which ``awsworld[testing]`` installs) warns at every session start while its
``asyncio_default_fixture_loop_scope`` option is unset. That is a question about the user's own async fixtures, which
awsworld's fixtures do not depend on, so a project that never chose cannot be left with the noise: when the option is
unset, ``pytest_configure`` silences that one warning, and pytest-asyncio keeps its present default (a fixture's loop
is its own scope). Setting the option (``function``, say) chooses for real.
"""

from __future__ import annotations

import asyncio
import inspect
import types
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
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


def _require_a_runner(request: pytest.FixtureRequest, fixture: str) -> None:
    """Fail an ``async def`` test that asks for ``fixture`` and that no plugin will run: in pytest-asyncio's default
    strict mode a test without ``@pytest.mark.asyncio`` (a test copied from a project in auto mode, a module without
    ``pytestmark``) is left to pytest, whose failure ("async def functions are not natively supported ... install a
    plugin") points at an install the project has, not at the missing mark."""
    item = request.node
    if (pytest_asyncio is None or not inspect.iscoroutinefunction(getattr(item, "obj", None))
            or pytest_asyncio.is_async_test(item) or _anyio_runs(item)):
        return
    pytest.fail(f"{fixture}: no plugin runs {item.name}, an async def test: pytest-asyncio (installed) runs only "
                "the tests marked @pytest.mark.asyncio in its default strict mode. Mark the test, or its module "
                "(pytestmark = pytest.mark.asyncio), or set asyncio_mode = \"auto\" in your pytest configuration",
                pytrace=False)


def _require_a_test_it_can_serve(request: pytest.FixtureRequest, fixture: str) -> None:
    """What both fixtures check of the test that asks for them, before anything starts: pytest-asyncio installed,
    an ``async def`` test, and one that a plugin runs."""
    if pytest_asyncio is None:
        _need_pytest_asyncio()
    _require_async_test(request, fixture)
    _require_a_runner(request, fixture)


LOOP_SCOPES = ("function", "class", "module", "package", "session")
"""pytest's scopes, each a possible scope of the event loop a pytest-asyncio test runs in."""


def _test_loop_scope(request: pytest.FixtureRequest) -> str:
    """The scope of the event loop the test runs in, as pytest-asyncio decides it (its ``asyncio`` marker's
    ``loop_scope``, else ``asyncio_default_test_loop_scope``, else ``function``): the loop the fixture must start its
    deliveries on, since they run as tasks of that loop. A test no ``asyncio`` marker names (anyio's, say) keeps
    ``function``."""
    marker = request.node.get_closest_marker("asyncio")
    if marker is None:
        return "function"
    scope = marker.kwargs.get("loop_scope") or marker.kwargs.get("scope")
    if scope is None:
        try:
            scope = request.config.getini("asyncio_default_test_loop_scope")
        except ValueError:  # a pytest-asyncio older than the option: its tests' loops are their own scope's
            scope = None
    return scope if scope in LOOP_SCOPES else "function"


async def _env_body() -> AsyncGenerator[WorkflowTestEnv]:
    async with WorkflowTestEnv() as made:
        yield made


async def _local_body(awsworld_moto_server: MotoServer) -> AsyncGenerator[LocalAWS]:
    from ..local import LocalAWS

    async with LocalAWS("moto", moto=awsworld_moto_server) as made:
        yield made


_BODIES: dict[str, Callable[[pytest.FixtureRequest], AsyncGenerator[object]]] = {
    "awsworld_env": lambda request: _env_body(),
    "awsworld_local": lambda request: _local_body(request.getfixturevalue("awsworld_moto_server")),
}
"""Each fixture's body given the test's request (which hands ``awsworld_local`` the session's moto server), for
``_start_on_the_tests_loop`` to run on a pytest-asyncio runner itself."""


def _on_each_loop() -> None:
    """Register the fixtures' bodies once per loop scope, as function-scoped async fixtures
    (``_awsworld_env_on_session_loop``...): each runs on the loop of its name, so ``awsworld_env`` can start the
    environment on the loop its test runs on whatever the project's ``asyncio_default_test_loop_scope`` or a test's
    ``loop_scope`` say (a fixture on a loop of its own would leave its deliveries on a loop that does not run while
    the test does). A function object each: pytest-asyncio marks the function with its loop scope. Plus
    ``_awsworld_env_on_anyio_loop`` (and ``_local``), plain async fixtures, which anyio's plugin runs on the loop it
    runs its tests on."""
    for name, body in (("awsworld_env", _env_body), ("awsworld_local", _local_body)):
        globals()[f"_{name}_on_anyio_loop"] = pytest.fixture(_copy(body), name=f"_{name}_on_anyio_loop")
        if pytest_asyncio is None:
            continue
        for scope in LOOP_SCOPES:
            fixture_name = f"_{name}_on_{scope}_loop"
            globals()[fixture_name] = pytest_asyncio.fixture(_copy(body), name=fixture_name, loop_scope=scope)


def _copy(body: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
    """A new function object running ``body`` with its signature (pytest asks for fixtures by its parameter names):
    pytest-asyncio marks the function it is given with a loop scope, so each registration needs its own."""
    return types.FunctionType(body.__code__, body.__globals__, body.__name__, body.__defaults__, body.__closure__)


_on_each_loop()


def _anyio_runs(item: pytest.Item) -> bool:
    """Whether anyio's pytest plugin runs this test on its own loop: a coroutine test that asks for ``anyio_backend``
    (``@pytest.mark.anyio``, or anyio's ``anyio_mode = "auto"``) and that pytest-asyncio did not take over (in its
    auto mode it takes every coroutine test, anyio's too, and runs it on its own loop)."""
    return ("anyio_backend" in getattr(item, "fixturenames", ()) and pytest_asyncio is not None
            and not pytest_asyncio.is_async_test(item)
            and inspect.iscoroutinefunction(getattr(item, "obj", None)))


def _start_on_the_tests_loop(request: pytest.FixtureRequest, name: str) -> object:
    """``name``'s value started on the event loop the test runs in, whichever plugin runs it:

    - anyio runs the test: the fixture body as a plain async fixture, which anyio's plugin runs on the loop it runs
      the test on (pytest-asyncio in strict mode leaves plain async fixtures alone);
    - pytest-asyncio runs it, and anyio would take the fixture: in asyncio_mode = "auto" a ``@pytest.mark.anyio``
      test is run by pytest-asyncio, while anyio's plugin runs every async fixture of a test that asks for
      ``anyio_backend`` on anyio's own loop (a loop that does not run while the test does). The body then runs on
      pytest-asyncio's runner for the test's loop scope, from this sync fixture, where anyio does not reach;
    - otherwise the body as a pytest-asyncio fixture of the test's loop scope (``_on_each_loop``)."""
    item = request.node
    if _anyio_runs(item):
        return request.getfixturevalue(f"_{name}_on_anyio_loop")
    scope = _test_loop_scope(request)
    if "anyio_backend" not in getattr(item, "fixturenames", ()):
        return request.getfixturevalue(f"_{name}_on_{scope}_loop")
    try:  # pytest-asyncio >= 1.0 runs a scope's tests and fixtures on one asyncio.Runner, a fixture of that name
        runner: asyncio.Runner = request.getfixturevalue(f"_{scope}_scoped_runner")
    except pytest.FixtureLookupError:
        pytest.fail(f"{name} cannot start on the loop of {item.name}: pytest-asyncio (asyncio_mode = \"auto\") runs "
                    "this test while anyio's plugin would run the fixture on a loop of its own. Upgrade pytest-asyncio "
                    "to 1.0 or later, or drop @pytest.mark.anyio from tests that use awsworld", pytrace=False)
    made = _BODIES[name](request)
    value = runner.run(made.__anext__())
    request.addfinalizer(lambda: _finish(runner, made))
    return value


def _finish(runner: asyncio.Runner, made: AsyncGenerator[object]) -> None:
    """Run the rest of a fixture body started by ``_start_on_the_tests_loop`` (its ``async with`` exit) on its
    runner: the body yields once, so its next step ends it."""
    try:
        runner.run(made.__anext__())
    except StopAsyncIteration:
        return
    raise RuntimeError("an awsworld fixture body yielded twice")


@pytest.fixture
def awsworld_env(request: pytest.FixtureRequest) -> WorkflowTestEnv:
    """An in-memory test environment with time skipping (see ``awsworld.testing.WorkflowTestEnv``), started on the
    event loop the test runs in."""
    _require_a_test_it_can_serve(request, "awsworld_env")
    env = _start_on_the_tests_loop(request, "awsworld_env")
    assert isinstance(env, WorkflowTestEnv)
    return env


@pytest.fixture
def awsworld_local(request: pytest.FixtureRequest) -> LocalAWS:
    """``LocalAWS`` on the session's moto server: fresh resources, deliveries run by its local poller on the event
    loop the test runs in."""
    _require_a_test_it_can_serve(request, "awsworld_local")
    local: LocalAWS = _start_on_the_tests_loop(request, "awsworld_local")  # type: ignore[assignment]
    return local
