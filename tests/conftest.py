"""Shared fixtures: one moto server, one DynamoDB Local and one LocalStack for the whole session, fresh resources
per test.

The AWS World has three backends (``AWS_BACKENDS`` and ``LOCALSTACK``): ``[moto]`` (moto for everything),
``[dynamodb-local]`` (DynamoDB on AWS's DynamoDB Local, SQS and S3 on moto) and ``[localstack]`` (DynamoDB Local
plus LocalStack's own SQS, S3 and KMS: no moto in the path). ``world`` runs a test on the first two, each time on
a freshly provisioned table, bucket, queue and DLQ; the suites about SQS and S3 add ``[localstack]`` through
``SQS_S3_BACKENDS``. ``world_factory`` makes more Worlds on the same backend for tests that need several.
DynamoDB Local and LocalStack start on first use (a ``-k moto`` run starts neither); when one is not installed
the test fails with the command that installs it, never skips.

``storage_world`` / ``storage_world_factory`` run a contract test on every backend of the ``World`` protocol:
the two above and the in-memory World (``[memory]``, ``awsworld._memory.MemoryWorld``), which needs no
emulator at all (a ``-k memory`` run starts neither).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest

from awsworld._memory import MemoryWorld
from awsworld.aws import AWSWorld
from awsworld.local import DynamoDBLocal, DynamoDBLocalError, LocalAWS, LocalStack, LocalStackError, MotoServer

# typing/sample_usage.py is read by pyright only (typing/test_typing.py): never collected or imported. (Said here,
# not in a typing/conftest.py: a second top-level module named ``conftest`` would shadow this one for the test
# modules that import its names, whenever typing/ happened to be collected first.) testing/user_suites/ holds the
# user's test files that testing/test_user_suites.py copies out and runs in a pytest of their own: its conftest.py,
# collected here, was that second ``conftest`` (``pytest tests/testing tests/schedules`` failed to import
# schedules/test_aws.py's ``from conftest import WorldFactory``).
collect_ignore = ["typing/sample_usage.py", "testing/user_suites"]

AWS_BACKENDS = ["moto", "dynamodb-local"]
BACKENDS = AWS_BACKENDS  # the AWS World's emulators: ``backend``, ``world``, ``world_factory``
LOCALSTACK = "localstack"  # DynamoDB Local + LocalStack's SQS, S3 and KMS (no moto): the suites about SQS and S3
SQS_S3_BACKENDS = ["moto", LOCALSTACK]  # one per SQS/S3 engine, for the tests about SQS and S3 themselves
MEMORY = "memory"
# The session fixture holding each AWS backend's LocalAWS.
LOCAL_FIXTURES = {"moto": "local_moto", "dynamodb-local": "local_dynamodb_local", LOCALSTACK: "local_localstack"}
STORAGE_BACKENDS = [*AWS_BACKENDS, MEMORY]  # every World backend: ``storage_backend``, ``storage_world``

# ``-n 3 --dist loadfile`` (.ci/run) hands a worker one file at a time, in collection order (xdist's own reorder,
# by number of tests, is turned off below): the longest files go first, so the run does not end with one worker
# on a long file while the others idle. A file is never split (its tests share module fixtures). The order is
# that of a measured run (files of 25 s or more under ``-n 3`` beside other work, longest first; a file new since
# placed by its own time); files not named keep their place after these.
LONGEST_FILES_FIRST = (
    "tests/chaos/test_chaos.py",
    "tests/cli/test_cli.py",
    "tests/cli/test_dev_reload.py",
    "tests/cli/test_dev_blocking.py",  # dev as a process twice (a kill -9, a restart): 19 s alone, 50-60 s loaded
    "tests/testing/test_user_suites.py",
    "tests/deploy/test_build.py",  # sam build: CPU-bound, so longest when the other workers are busy too
    "tests/cli/test_limits_cli.py",
    "tests/local/test_localstack.py",
    "tests/deploy/test_packaging.py",
    "tests/runtime/test_e2e_values.py",
    "tests/conformance/test_queue.py",
    "tests/docs/test_transcripts.py",  # demo, dev and init as processes
    "tests/cli/test_display.py",
    "tests/cli/test_deployments_cli.py",
    "tests/cli/test_schedules_cli.py",
    "tests/chaos/test_chaos_limits.py",
    "tests/cli/test_skip_cli.py",
    "tests/cli/test_dev_failures.py",
    "tests/cli/test_serve_cli.py",
    "tests/conformance/test_queue_delivery.py",
    "tests/deploy/test_init.py",
    "tests/cli/test_dev_child_cancel.py",  # dev as a process, 30 children, kill -9, a restart: 15-40 s
    "tests/conformance/test_hooks.py",
    "tests/runtime/test_e2e_run_limits.py",
    "tests/cli/test_cli_why.py",
    "tests/conformance/test_slots_and_races.py",
    "tests/bench/test_bill.py",
    "tests/runtime/test_e2e_step_limits.py",
    "tests/cli/test_dev_values.py",
    "tests/conformance/test_streams.py",
    "tests/conformance/test_run_end.py",
    "tests/docs/test_examples.py",
    "tests/cli/test_dlq_cli.py",
    "tests/runtime/test_e2e_far_timers.py",
    "tests/docs/test_site.py",
    "tests/runtime/test_pinning.py",
    "tests/conformance/test_streams_batching.py",
    "tests/runtime/test_e2e_parked_far.py",
    "tests/runtime/test_e2e_batches.py",
    "tests/cli/test_dev_names_and_types.py",
    "tests/conformance/test_large_values.py",
    "tests/docs/test_example_tests.py",
    "tests/conformance/test_queue_dead_letters.py",
    "tests/conformance/test_batch.py",
    "tests/runtime/test_e2e_children.py",
    "tests/runtime/test_client_helpers.py",
    "tests/conformance/test_streams_races.py",
    "tests/runtime/test_e2e_parked.py",
    "tests/conformance/test_bad_input.py",
    "tests/conformance/test_steps.py",
    "tests/ui/test_dev_ui.py",
    "tests/runtime/test_e2e_error_causes.py",
    "tests/runtime/test_e2e_push.py",
    "tests/conformance/test_runs.py",
    "tests/runtime/test_e2e_codec_places.py",
    "tests/runtime/test_e2e_caught_errors.py",
    "tests/ui/test_browser.py",
    "tests/test_import_graph.py",
    "tests/runtime/test_e2e_encryption.py",
)


LAMBDA_TESTS = ("tests/deploy/", "tests/runtime/test_e2e_lost_messages.py")
"""The Lambda functions' tests: the handlers, the tick, the template's wiring, on memory and moto. ``.ci/run`` runs
them on the functions' Python (3.13) with ``--lambda-tests=only`` while the SAM steps run, and the 3.11 run
leaves them out with ``--lambda-tests=skip`` (it still runs their SAM, packaging, DynamoDB Local and LocalStack
cases): each case runs once, on the interpreter it is about."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--lambda-tests", choices=["only", "skip"], default=None,
                     help="only: run just the Lambda functions' tests on memory and moto (tests/conftest.py "
                          "LAMBDA_TESTS); skip: everything else (.ci/run's two interpreters)")


def is_lambda_test(item: pytest.Item) -> bool:
    path = item.path.relative_to(item.config.rootpath).as_posix()
    if not path.startswith(LAMBDA_TESTS):
        return False
    if item.get_closest_marker("sam") or item.get_closest_marker("packaging"):
        return False
    return "dynamodb-local" not in item.nodeid and LOCALSTACK not in item.nodeid


def select_lambda_tests(config: pytest.Config, items: list[pytest.Item]) -> None:
    choice = config.getoption("--lambda-tests")
    if choice is None:
        return
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        (keep if is_lambda_test(item) == (choice == "only") else dropped).append(item)
    config.hook.pytest_deselected(items=dropped)
    items[:] = keep


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist: keep the order below
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = config.rootpath
    missing = [name for name in LONGEST_FILES_FIRST if not (root / name).is_file()]
    if missing:
        raise pytest.UsageError(f"tests/conftest.py LONGEST_FILES_FIRST names files that do not exist: {missing}")
    rank = {name: i for i, name in enumerate(LONGEST_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.relative_to(root).as_posix(), len(rank)))
    for item in items:
        mark_sweep_cases(item)
    select_lambda_tests(config, items)


def mark_sweep_cases(item: pytest.Item) -> None:
    """``@pytest.mark.sweep_on(AWS)``: this test, on those e2e backends, is a case of a long sweep: marked
    ``sweep``, so ``.ci/run`` (``-m "not sweep"``) runs its other backends and ``bench/sweeps.py`` all of it. (A
    module-scoped backend is a fixture parameter, which a mark on the test cannot select by itself.)"""
    marker = item.get_closest_marker("sweep_on")
    callspec = getattr(item, "callspec", None)
    if marker is not None and callspec is not None and callspec.params.get("e2e_backend") in marker.args:
        item.add_marker(pytest.mark.sweep)


WorldFactory = Callable[[], Awaitable[AWSWorld]]
AnyWorld = AWSWorld | MemoryWorld
AnyWorldFactory = Callable[[], Awaitable[AnyWorld]]


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    server = MotoServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def dynamodb_local() -> Iterator[DynamoDBLocal]:
    server = DynamoDBLocal()
    try:
        server.start()
    except DynamoDBLocalError as error:
        pytest.fail(f"DynamoDB Local is required for the [dynamodb-local] tests: {error}", pytrace=False)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def localstack() -> Iterator[LocalStack]:
    server = LocalStack()
    try:
        server.start()
    except LocalStackError as error:
        pytest.fail(f"LocalStack is required for the [localstack] tests: {error}", pytrace=False)
    yield server
    server.stop()


def local_aws_options(request: pytest.FixtureRequest, backend: str) -> dict[str, Any]:
    """``LocalAWS`` keyword arguments for ``backend`` on the session's servers (started on first use): for a
    test module that needs a LocalAWS of its own (its own settings, its own poller) on one of the backends."""
    if backend == "moto":
        return {"dynamodb": "moto", "moto": request.getfixturevalue("moto_server")}
    if backend == "dynamodb-local":
        return {"dynamodb": "dynamodb-local", "moto": request.getfixturevalue("moto_server"),
                "dynamodb_local": request.getfixturevalue("dynamodb_local")}
    if backend == LOCALSTACK:
        return {"dynamodb": "dynamodb-local", "sqs_s3": "localstack",
                "dynamodb_local": request.getfixturevalue("dynamodb_local"),
                "localstack": request.getfixturevalue("localstack")}
    raise ValueError(f"no AWS backend {backend!r}: one of {list(LOCAL_FIXTURES)}")


@pytest.fixture(scope="session")
async def local_moto(moto_server: MotoServer) -> AsyncIterator[LocalAWS]:
    local = LocalAWS("moto", moto=moto_server, initial_world=False)
    await local.start()
    yield local
    await local.stop()


@pytest.fixture
async def moto_world(local_moto: LocalAWS) -> AsyncIterator[AWSWorld]:
    """A fresh AWSWorld on moto only (table, bucket, queue, DLQ): for tests about moto itself."""
    world = AWSWorld(await local_moto.new_config())
    yield world
    await world.close()
    await local_moto.drop(world.config)


@pytest.fixture(scope="session")
async def local_dynamodb_local(moto_server: MotoServer, dynamodb_local: DynamoDBLocal) -> AsyncIterator[LocalAWS]:
    local = LocalAWS("dynamodb-local", moto=moto_server, dynamodb_local=dynamodb_local, initial_world=False)
    await local.start()
    yield local
    await local.stop()


@pytest.fixture(scope="session")
async def local_localstack(dynamodb_local: DynamoDBLocal, localstack: LocalStack) -> AsyncIterator[LocalAWS]:
    local = LocalAWS("dynamodb-local", sqs_s3="localstack", dynamodb_local=dynamodb_local, localstack=localstack,
                     initial_world=False)
    await local.start()
    yield local
    await local.stop()


@pytest.fixture(params=BACKENDS, ids=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Which DynamoDB the test runs on: ``moto`` or ``dynamodb-local``."""
    return str(request.param)


@pytest.fixture
def local_aws(request: pytest.FixtureRequest, backend: str) -> LocalAWS:
    """The session's ``LocalAWS`` for this test's backend (started lazily)."""
    return local_aws_of(request, backend)


@pytest.fixture
async def world_factory(local_aws: LocalAWS) -> AsyncIterator[WorldFactory]:
    """``await world_factory()``: another AWSWorld on fresh resources; all are closed and dropped after."""
    made: list[AWSWorld] = []

    async def make() -> AWSWorld:
        world = AWSWorld(await local_aws.new_config())
        made.append(world)
        return world

    yield make
    for world in made:
        await world.close()
        await local_aws.drop(world.config)


@pytest.fixture
async def world(world_factory: WorldFactory) -> AWSWorld:
    """A fresh AWSWorld on its own table, bucket and queue; runs once per backend."""
    return await world_factory()


def local_aws_of(request: pytest.FixtureRequest, backend: str) -> LocalAWS:
    """The session's ``LocalAWS`` for an AWS backend (started on first use)."""
    return request.getfixturevalue(LOCAL_FIXTURES[backend])


@pytest.fixture(params=STORAGE_BACKENDS, ids=STORAGE_BACKENDS)
def storage_backend(request: pytest.FixtureRequest) -> str:
    """Which World the test runs on: ``moto``, ``dynamodb-local`` (the AWS World) or ``memory``."""
    return str(request.param)


@pytest.fixture
def storage_local(request: pytest.FixtureRequest, storage_backend: str) -> LocalAWS | None:
    """The session's ``LocalAWS`` for an AWS backend, None for memory. A sync fixture: the session's LocalAWS
    fixtures are async, and requesting one from inside an async fixture (a running loop) cannot set it up."""
    return None if storage_backend == MEMORY else local_aws_of(request, storage_backend)


@pytest.fixture
async def storage_world_factory(storage_local: LocalAWS | None) -> AsyncIterator[AnyWorldFactory]:
    """``await storage_world_factory()``: another World on this test's backend, on fresh (empty) storage."""
    made: list[AnyWorld] = []
    local = storage_local

    async def make() -> AnyWorld:
        world: AnyWorld = MemoryWorld() if local is None else AWSWorld(await local.new_config())
        made.append(world)
        return world

    yield make
    for world in made:
        await world.close()
        if local is not None and isinstance(world, AWSWorld):
            await local.drop(world.config)


@pytest.fixture
async def storage_world(storage_world_factory: AnyWorldFactory) -> AnyWorld:
    """A fresh World on empty storage; runs once per backend of ``STORAGE_BACKENDS``."""
    return await storage_world_factory()
