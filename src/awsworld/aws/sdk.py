"""botocore's session and client configuration: the one heavy import of the AWS World.

``botocore.session`` (its client, credential and documentation machinery, urllib3, the XML and HTML parsers)
is about a quarter of the flow function's import (bench/cold_start.py). A delivery needs it for its first
request, not at import, so ``clients`` imports this module when it makes its first client: a plain
``import awsworld`` (a workflow module, the CLI, the in-memory test World) never loads it. Under SnapStart the
first clients are made before the snapshot (``lambda_host.snapstart``), so a restored environment has it loaded.

botocore is not bundled into the Lambda artifact: the function uses the one Lambda's Python runtime
preinstalls. The code keeps to what every botocore from ``MIN_BOTOCORE`` on knows (tests/deploy runs a
delivery on that version), and ``check_botocore`` says what to do when an older one is found. Outside Lambda,
``awsworld[aws-sdk]`` installs boto3 and botocore.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

try:
    import botocore
    import botocore.session
    from botocore.config import Config
except ImportError as missing:  # pragma: no cover - every supported environment has it
    raise ImportError("awsworld needs botocore: Lambda's Python runtime provides it; elsewhere install "
                      "'awsworld[aws-sdk]' (boto3 and botocore)") from missing

MIN_BOTOCORE = (1, 34, 0)
"""The oldest botocore that knows every operation and parameter the AWS World sends."""


class BotocoreTooOldError(ImportError):
    """The botocore found is older than ``MIN_BOTOCORE``."""


def check_botocore(version: str) -> None:
    """Refuse a botocore older than ``MIN_BOTOCORE`` with what to do, rather than fail on a first request
    whose parameters it does not know."""
    try:
        found = tuple(int(part) for part in version.split(".")[:3])
    except ValueError:
        return  # a development build: trust it
    if found < MIN_BOTOCORE:
        floor = ".".join(map(str, MIN_BOTOCORE))
        raise BotocoreTooOldError(
            f"awsworld needs botocore >= {floor}, found {version}: add boto3>={floor} to the function's "
            "requirements.txt (a bundled boto3 takes precedence over the runtime's), or pip install -U boto3")


_models: Any = None
"""The process's one botocore data loader: every session shares it, so a service's JSON model (tens of
milliseconds to load and parse; S3's is the largest) is read once per process, not once per World."""


def new_session() -> Any:
    """A botocore session of its own (credentials, clients) that shares the process's loaded service models."""
    global _models
    check_botocore(botocore.__version__)
    session = botocore.session.Session()
    if _models is None:
        _models = session.get_component("data_loader")
    else:
        session.register_component("data_loader", _models)
    return session


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
"""Hosts of an emulator on this machine (``awsworld.local``: moto, DynamoDB Local, LocalStack)."""

LOOPBACK_USER_AGENT = "awsworld-local"


def is_loopback(endpoint_url: str | None) -> bool:
    """Whether ``endpoint_url`` is an emulator on this machine (never AWS itself)."""
    return endpoint_url is not None and urlsplit(endpoint_url).hostname in LOOPBACK_HOSTS


def client_config(pool_connections: int, *, loopback: bool = False) -> Any:
    """The clients' botocore config. On a ``loopback`` endpoint (an emulator) the User-Agent is a fixed string:
    botocore otherwise rebuilds and sanitizes its User-Agent (SDK, OS, language, feature and config metadata,
    some twenty components) for every request, a seventh of the CPU a request costs the client
    (``bench/emulator_cpu.py``), for a header no emulator reads (moto takes a region from it only when its
    in-process mock adds ``region/...``; the signature carries the region here)."""
    return Config(
        **({"user_agent": LOOPBACK_USER_AGENT} if loopback else {}),
        retries={"max_attempts": 8, "mode": "adaptive"},
        max_pool_connections=pool_connections,
        connect_timeout=5,
        read_timeout=30,
        # Requests are built by this package, not typed by users: botocore's client-side validation only
        # costs CPU (about a tenth of it per request, measured); the service still validates.
        parameter_validation=False,
    )
