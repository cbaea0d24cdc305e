"""The embedded default: awsworld on an AWS emulator on 127.0.0.1, with no account and no network.

``LocalAWS`` starts moto's server in-process (and, when asked, AWS's DynamoDB Local for DynamoDB, and
LocalStack for SQS, S3 and KMS), provisions the table, bucket, queue and DLQ exactly as ``template.yaml`` does,
and builds an ``AWSWorld`` on them::

    async with LocalAWS() as local:                      # or LocalAWS(dynamodb="dynamodb-local")
        world = local.world
        other = await local.new_world()                  # a second, isolated table/bucket/queue

    async with LocalAWS(dynamodb="dynamodb-local", sqs_s3="localstack"):   # no moto at all
        ...

Each engine is chosen per service group: ``dynamodb`` (moto or DynamoDB Local) and ``sqs_s3`` (moto or
LocalStack; KMS, for payload encryption, goes with it: it shares the SQS/S3 endpoint).

The emulators get dummy credentials through ``AWSConfig.client_options``; the process environment (and any
real AWS credentials in it) is left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Literal

from .._worker.dispatch import Worker
from ..aws.config import AWSConfig, ttl_limits, value_limits
from ..aws.world import AWSWorld
from ..client.client import Client, check_delivery_loop
from .dynamodb_local import DynamoDBLocal, DynamoDBLocalError
from .localstack_server import LocalStack, LocalStackError
from .moto_server import MotoServer
from .poller import LocalPoller
from .provision import Provisioner, deprovision, provision
from .server_starts import start_off_the_loop

__all__ = [
    "DUMMY_CREDENTIALS",
    "DynamoDBLocal",
    "DynamoDBLocalError",
    "LocalAWS",
    "LocalStack",
    "LocalStackError",
    "MotoServer",
    "Provisioner",
    "deprovision",
    "provision",
]

DynamoDBBackendName = Literal["moto", "dynamodb-local"]
BACKENDS: tuple[DynamoDBBackendName, ...] = ("moto", "dynamodb-local")
SqsS3BackendName = Literal["moto", "localstack"]
SQS_S3_BACKENDS: tuple[SqsS3BackendName, ...] = ("moto", "localstack")
Server = MotoServer | DynamoDBLocal | LocalStack


def _stop_server(server: Server) -> None:
    """Stop a server whose start was abandoned (``server_starts``)."""
    server.stop()


# Emulators accept any credentials. Region and keys are fixed so DynamoDB Local (which keeps data per access
# key and region) always shows one client what another wrote.
DUMMY_CREDENTIALS: dict[str, object] = {"aws_access_key_id": "awsworldlocal", "aws_secret_access_key": "local"}
REGION = "us-east-1"


class LocalAWS:
    """Emulators on loopback plus freshly provisioned resources; an async context manager.

    ``dynamodb`` picks DynamoDB's engine, ``sqs_s3`` the one for SQS, S3 and KMS. Servers passed in (``moto=``,
    ``dynamodb_local=``, ``localstack=``) are shared and left running on exit; servers it starts itself are
    stopped, and it starts only those its engines need (moto not at all on DynamoDB Local plus LocalStack).
    ``world`` is the World built on entry (unless ``initial_world=False``); every World from ``new_world()`` is
    closed on exit too.

    Every emulator it starts listens on 127.0.0.1, checks no credentials and answers this machine's programs only:
    a request addressed to a name that is not loopback (a web page through DNS rebinding) or sent with a browser's
    ``Origin`` of another site gets a 403 (``_http/loopback.py``; moto's ``local/moto_server.py``, LocalStack's
    ``local/localstack_launch.py``, DynamoDB Local's ``local/java/LoopbackDynamoDBLocal.java``).
    """

    def __init__(
        self,
        dynamodb: DynamoDBBackendName = "moto",
        *,
        sqs_s3: SqsS3BackendName = "moto",
        moto: MotoServer | None = None,
        dynamodb_local: DynamoDBLocal | None = None,
        localstack: LocalStack | None = None,
        initial_world: bool = True,
        name_prefix: str = "awsworld-local",
        deployment_id: str | None = None,
        run_workflows: bool = True,
        encrypt_payloads: bool = False,
    ) -> None:
        if dynamodb not in BACKENDS:
            raise ValueError(f"dynamodb must be one of {BACKENDS}, not {dynamodb!r}")
        if sqs_s3 not in SQS_S3_BACKENDS:
            raise ValueError(f"sqs_s3 must be one of {SQS_S3_BACKENDS}, not {sqs_s3!r}")
        self.dynamodb = dynamodb
        self.sqs_s3 = sqs_s3
        self._moto = moto
        self._dynamodb_local = dynamodb_local
        self._localstack = localstack
        self._owned: list[Server] = []
        self._initial_world = initial_world
        self.name_prefix = name_prefix
        self.deployment_id = deployment_id
        self._worlds: list[AWSWorld] = []
        self._world: AWSWorld | None = None
        self._provisioner: Provisioner | None = None
        self._run_workflows = run_workflows
        self.encrypt_payloads = encrypt_payloads
        self.poller: LocalPoller | None = None
        self.client: Client | None = None
        self._delivering_on: asyncio.AbstractEventLoop | None = None  # the loop the poller's task runs on

    # -- servers ---------------------------------------------------------------------------------------

    async def start(self) -> LocalAWS:
        if self._moto is None and "moto" in (self.dynamodb, self.sqs_s3):
            self._moto = MotoServer()
            self._owned.append(self._moto)
        if self.dynamodb == "dynamodb-local" and self._dynamodb_local is None:
            self._dynamodb_local = DynamoDBLocal()
            self._owned.append(self._dynamodb_local)
        if self.sqs_s3 == "localstack" and self._localstack is None:
            self._localstack = LocalStack()
            self._owned.append(self._localstack)
        for shared in self._used():
            if shared not in self._owned and not shared.running:
                raise RuntimeError(f"a shared {type(shared).__name__} must be started by its owner first")
        try:
            # Each start() blocks (DynamoDB Local and LocalStack take seconds to boot): run them off the event loop,
            # and let every one finish before reporting a failure so none is left starting in the background. A
            # cancellation (a Ctrl-C of ``awsworld demo``) does not wait for them: each stops what it started once
            # its start is done (``server_starts``).
            results = await asyncio.gather(*(start_off_the_loop(server.start, _stop_server) for server in self._owned),
                                           return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException):
                    raise result
            self._provisioner = await Provisioner(self.base_config("unused")).__aenter__()
        except BaseException:
            await self.stop()
            raise
        return self

    async def stop(self) -> None:
        poller, self.poller, self._delivering_on = self.poller, None, None
        if poller is not None:
            await poller.stop()
        worlds, self._worlds, self._world = self._worlds, [], None
        try:
            for world in worlds:
                await world.close()
        finally:
            provisioner, self._provisioner = self._provisioner, None
            if provisioner is not None:
                await provisioner.__aexit__(None, None, None)
            await self._stop_servers()

    async def _stop_servers(self) -> None:
        owned, self._owned = self._owned, []
        await asyncio.gather(*(asyncio.to_thread(server.stop) for server in owned), return_exceptions=True)

    def _used(self) -> list[Server]:
        """The servers this LocalAWS's engines run on (those not needed are ignored, even if passed in)."""
        used: list[Server | None] = [self._moto if self.dynamodb == "moto" else self._dynamodb_local,
                                     self._moto if self.sqs_s3 == "moto" else self._localstack]
        return [server for server in dict.fromkeys(used) if server is not None]

    @staticmethod
    def _endpoint(server: Server | None) -> str:
        if server is None or not server.running:
            raise RuntimeError("LocalAWS is not started")
        return server.endpoint_url

    @property
    def endpoint_url(self) -> str:
        """The SQS, S3 and KMS endpoint: moto's or LocalStack's (``sqs_s3``)."""
        return self._endpoint(self._moto if self.sqs_s3 == "moto" else self._localstack)

    @property
    def dynamodb_endpoint_url(self) -> str:
        """DynamoDB's endpoint: moto's or DynamoDB Local's (``dynamodb``)."""
        return self._endpoint(self._moto if self.dynamodb == "moto" else self._dynamodb_local)

    # -- resources and worlds --------------------------------------------------------------------------

    def base_config(self, name: str | None = None) -> AWSConfig:
        """A config for this emulator with unique resource names (nothing provisioned yet); its value limits
        and TTL limits are the environment's (``AWSWORLD_INLINE_VALUE_LIMIT``, ``AWSWORLD_MAX_VALUE_BYTES``,
        ``AWSWORLD_RETENTION_DAYS``, ``AWSWORLD_MAX_RUN_DAYS``), as the deployed functions read them."""
        name = name or f"{self.name_prefix}-{uuid.uuid4().hex[:12]}"
        return AWSConfig(
            table_name=name,
            bucket_name=name,
            region_name=REGION,
            endpoint_url=self.endpoint_url,
            dynamodb_endpoint_url=self.dynamodb_endpoint_url,
            deployment_id=self.deployment_id,
            client_options=dict(DUMMY_CREDENTIALS),
            **value_limits(),
            **ttl_limits(),
        )

    async def new_config(self, name: str | None = None, *, encrypt_payloads: bool | None = None) -> AWSConfig:
        """Provision a fresh table, bucket, queue and DLQ (and a KMS key when payloads are encrypted, by
        default as this LocalAWS was made); return their config."""
        if self._provisioner is None:
            raise RuntimeError("LocalAWS is not started")
        encrypt = self.encrypt_payloads if encrypt_payloads is None else encrypt_payloads
        return await self._provisioner.provision(self.base_config(name), encrypt_payloads=encrypt)

    async def drop(self, config: AWSConfig) -> None:
        """Delete a table, bucket and queues made by ``new_config`` (best effort)."""
        if self._provisioner is not None:
            await self._provisioner.deprovision(config)

    async def new_world(self, name: str | None = None) -> AWSWorld:
        """An ``AWSWorld`` on freshly provisioned resources, closed when this LocalAWS exits."""
        world = AWSWorld(await self.new_config(name))
        self._worlds.append(world)
        return world

    @property
    def world(self) -> AWSWorld:
        """The ``AWSWorld`` built on entry, on the resources provisioned for it."""
        if self._world is None:
            raise RuntimeError("no World yet: enter `async with LocalAWS()` (with initial_world=True) first")
        return self._world

    @property
    def config(self) -> AWSConfig:
        """``world``'s configuration: resource names and endpoints (``awsworld dev`` exports them)."""
        return self.world.config

    async def __aenter__(self) -> LocalAWS:
        await self.start()
        if self._initial_world:
            try:
                self._world = await self.new_world()
                worker = Worker(self._world)
                self.client = Client(self._world, registry=worker.registry, waiting=self._waiting)
                if self._run_workflows:
                    # Deliveries go to the same delivery path the Lambda flow handler runs, with its deadline.
                    self.poller = LocalPoller(self._world, worker)
                    self.poller.start()
                    self._delivering_on = asyncio.get_running_loop()
            except BaseException:
                await self.stop()
                raise
        return self

    def _waiting(self, run_id: str | None, *, hook_token: str | None = None) -> AbstractContextManager[None]:
        """``client``'s waits: refused on another event loop than the poller's, which would never deliver."""
        check_delivery_loop(self._delivering_on, "this LocalAWS")
        return contextlib.nullcontext()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
