"""Workflows and steps registered by a stable name, so a delivery in another process finds the same code.

The name is ``module.qualname`` unless given; it is what the event log and queue names record, so renaming
a function is a breaking change for runs in flight (pass ``name=`` to keep the old one).
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import inspect
import logging
import math
import sys
from collections.abc import Callable, Coroutine, Generator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from types import EllipsisType, ModuleType
from typing import Any, Literal, ParamSpec, Protocol, TypeVar, cast, get_args, overload

from ..durable.codecs import Codec, check_positional
from ..schedules.declared import declare_all
from ..schedules.model import Schedule
from ..settings import SETTINGS, Settings
from ..world.events import MAX_DEFINITION_NAME_LENGTH
from ..world.queue import DEFAULT_QUEUE_PREFIX, MAX_QUEUE_NAME_LENGTH
from .arguments import check_call
from .durations import Duration, parse_duration, seconds
from .limits import Concurrency, LimitDecl, RateLimit, declare
from .names import InvalidNameError
from .retry import DEFAULT_MAX_ATTEMPTS, RetryPolicy, shorthand
from .runtime import call_step, call_workflow, current_runtime, made

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

log = logging.getLogger("awsworld.registry")
_warned_main = False

DEFAULT_MAX_RETRIES = DEFAULT_MAX_ATTEMPTS - 1
StepSemantics = Literal["at_least_once", "at_most_once"]
"""How often one attempt of a step may run its body: ``at_least_once`` (the default: a step whose attempt was cut
off by a crash runs again, as its next attempt, which the retry policy's ``max_attempts`` counts) or
``at_most_once`` (the cut-off attempt is recorded failed with ``StepInterruptedError`` instead, and retried only
as its policy says: the SDK's ``AT_MOST_ONCE_PER_RETRY``)."""
MODULES_ENV = Settings.modules.env
"""The modules a deployment imports so their decorators register its workflows (the Lambda handler, the CLI)."""
MAX_MODULES_NAMED = 12  # an unknown workflow's error names at most this many of the modules that were loaded


@dataclass(frozen=True)
class StepDef:
    name: str
    fn: Callable[..., Coroutine[Any, Any, Any]]
    retry: RetryPolicy = field(default_factory=lambda: shorthand(None, None))
    timeout: float | None = None  # seconds one attempt may run before it is cancelled
    codec: Codec[Any] | None = None  # the result's (``codecs``); None: serde's envelopes
    semantics: StepSemantics = "at_least_once"
    args_codec: Codec[tuple[Any, ...]] | None = None  # the arguments', as one tuple (``durable.codecs.store_call``)
    limit: LimitDecl | None = None  # its concurrency and rate across runs (``authoring.limits``)

    @property
    def at_most_once(self) -> bool:
        return self.semantics == "at_most_once"

    @property
    def max_retries(self) -> int:
        return self.retry.max_retries


RETENTION_CONTEXT_KEY = "retentionSeconds"
"""Where a run's ``run_created`` carries its workflow's retention (``executionContext``, whole seconds): the
World reads it when it makes the run (the AWS World sets its items' TTL from it, ``aws/retention.py``)."""


@dataclass(frozen=True)
class WorkflowDef:
    name: str
    fn: Callable[..., Coroutine[Any, Any, Any]]
    retention: timedelta | None = None  # how long a finished run stays readable (None: the deployment's default)
    codec: Codec[Any] | None = None  # the result's (``codecs``): the run's output, a parent's child result
    args_codec: Codec[tuple[Any, ...]] | None = None  # the run's input, as one tuple (``durable.codecs.store_call``)
    validate_args: bool = True  # arguments checked against the annotations (``authoring.arguments``)
    pinned: bool = True  # a run stays on the deployment that started it (``_deployments.pins``); False: the newest
    limit: LimitDecl | None = None  # how many of its runs may run at once, per key (``authoring.limits``)

    @property
    def label(self) -> str:
        """How an argument's refusal names the workflow: ``workflow 'shop.order'``."""
        return f"workflow {self.name!r}"

    def check_arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """The ``TypeError`` a start with these arguments must raise, now (``authoring.arguments``): Python's for
        a call that does not bind, and, unless ``validate_args=False`` or an ``args_codec`` checks them, pydantic's
        strict check of each annotated parameter."""
        check_call(self.fn, self.label, args, kwargs, types=self.validate_args and self.args_codec is None)

    def execution_context(self) -> dict[str, Any]:
        """What a run of this workflow adds to its ``run_created`` executionContext."""
        if self.retention is None:
            return {}
        return {RETENTION_CONTEXT_KEY: math.ceil(self.retention.total_seconds())}


class Registry:
    """The workflows and steps one version of the code registers, by name. ``@workflow`` and ``@step`` register
    into the process's (``REGISTRY``) unless a ``capture()`` block is open: a test defines a second version of a
    workflow that way and deploys it beside the first (``WorkflowTestEnv.deploy``; importable from
    ``awsworld.testing``)."""

    def __init__(self) -> None:
        self.workflows: dict[str, WorkflowDef] = {}
        self.steps: dict[str, StepDef] = {}
        self.class_modules: dict[str, ModuleType] = {}
        """A snapshot's module objects by name (``snapshot(modules=)``): where the classes its values name are
        looked up while it runs (``durable.class_paths.kept_modules``); empty: in ``sys.modules``."""

    @contextlib.contextmanager
    def capture(self) -> Generator[Registry]:
        """While inside, ``@workflow`` and ``@step`` register into this registry instead of the process's: two
        versions of one workflow (the same name) can then live side by side, one registry each, as two
        deployments of it do (``WorkflowTestEnv.deploy``)."""
        token = _CAPTURING.set(self)
        try:
            yield self
        finally:
            _CAPTURING.reset(token)

    def snapshot(self, modules: Mapping[str, ModuleType] | None = None) -> Registry:
        """A registry holding what this one holds now (the same definitions, so the same code): what stays of a
        deployment when the process's registry is reloaded with new code (``awsworld dev``). ``modules``: the module
        objects of that code, about to be replaced in ``sys.modules``: its values' classes are resolved in them."""
        copy = Registry()
        copy.workflows.update(self.workflows)
        copy.steps.update(self.steps)
        copy.class_modules.update(modules or self.class_modules)
        return copy

    def add_workflow(self, definition: WorkflowDef) -> None:
        _check_unique(self.workflows, definition.name, definition.fn, "workflow")
        self.workflows[definition.name] = definition

    def add_step(self, definition: StepDef) -> None:
        _check_unique(self.steps, definition.name, definition.fn, "step")
        self.steps[definition.name] = definition

    def workflow(self, name: str) -> WorkflowDef:
        try:
            return self.workflows[name]
        except KeyError:
            raise WorkflowNotRegisteredError(name, self.modules(), registered=list(self.workflows)) from None

    def modules(self) -> list[str]:
        """The modules whose workflows this registry holds, sorted: what an unknown workflow's error names, so
        a typo is told from a module that was never imported."""
        return sorted({definition.fn.__module__ for definition in self.workflows.values()})

    def step(self, name: str) -> StepDef:
        try:
            return self.steps[name]
        except KeyError:
            raise StepNotRegisteredError(name, registered=list(self.steps)) from None


MAX_SUGGESTIONS = 3


def nearest(name: str, registered: Sequence[str]) -> list[str]:
    """The registered names a typo of ``name`` most likely meant (``difflib``'s ratio at least 0.6), best first: at
    most ``MAX_SUGGESTIONS``, and only those about as near as the best (names sharing a long prefix, such as a
    module's, all look alike to the ratio: ``clitest.summ`` means ``clitest.sum``, not ``clitest.slow``)."""
    found = difflib.get_close_matches(name, list(registered), n=MAX_SUGGESTIONS)
    if not found:
        return []
    best = difflib.SequenceMatcher(None, name, found[0]).ratio()
    return [match for match in found if difflib.SequenceMatcher(None, name, match).ratio() >= best - 0.1]


def did_you_mean(suggestions: Sequence[str]) -> str:
    """``; did you mean 'shop.order'?`` for the ``nearest`` names (or nothing, when none is near)."""
    return "; did you mean " + " or ".join(repr(s) for s in suggestions) + "?" if suggestions else ""


class StepNotRegisteredError(LookupError):
    """A step name a registry lacks (``name``): a step message for a step this deployment does not have, or a
    workflow calling one (a deployment built from a registry that missed the step's module: ``Registry.capture``
    around an import that found the module imported already). ``suggestions``: the nearest registered names. A
    ``LookupError``, as a missing name always was; typed so a delivery tells it from any ``KeyError`` the code
    raised and treats it as code this deployment lacks (``_worker/delivery.py``, ``DeliveryPath._unknown``)."""

    def __init__(self, name: str, *, registered: Sequence[str] = ()) -> None:
        self.name = name
        self.suggestions = nearest(name, registered)
        super().__init__(f"no step named {name!r} is registered in this process{self.did_you_mean()}")

    def did_you_mean(self) -> str:
        """``; did you mean 'shop.charge'?`` (or nothing, when no registered name is near)."""
        return did_you_mean(self.suggestions)


class WorkflowNotRegisteredError(LookupError):
    """The workflow named is registered nowhere that would run it: ``client.start("shop.ordr", ...)`` by a name
    the client's registry lacks (a test environment's, the local emulator's), or that no deployment consuming the
    queue publishes (``_published.model``), raises it and nothing is started; ``awsworld start`` exits 2 with it.
    Exported as ``awsworld.WorkflowNotRegisteredError``; a ``LookupError``.

    A workflow name a registry lacks: ``name``, and ``modules``, the modules that did register workflows there
    (with ``env_modules``, the ``AWSWORLD_MODULES`` that loaded them: ``...``, the default, reads this process's).
    ``registered``: the names it holds, from which ``suggestions`` are the nearest (``difflib``), so a typo shows
    next to what was meant. ``where`` says whose registry (``in this process``; a deployment's, for a refusal by
    its published names: ``_published.model``) and ``hint`` what to do."""

    def __init__(self, name: str, modules: list[str], *, registered: Sequence[str] = (),
                 env_modules: str | EllipsisType | None = ..., where: str = "in this process",
                 hint: str = ("import the module that defines it (a test: in the test module; a deployment or "
                              f"dev: {MODULES_ENV} / awsworld dev MODULE)")) -> None:
        self.name = name
        self.modules = modules
        self.env_modules = SETTINGS.modules if isinstance(env_modules, EllipsisType) else env_modules
        self.where = where
        self.suggestions = nearest(name, registered)
        super().__init__(f"no workflow named {name!r} is registered {where} (loaded: {self.loaded()})"
                         f"{self.did_you_mean()}; {hint}")

    def did_you_mean(self) -> str:
        """``; did you mean 'shop.order'?`` (or nothing, when no registered name is near)."""
        return did_you_mean(self.suggestions)

    def loaded(self) -> str:
        """Which modules registered workflows here, for a person: a typo shows next to the real names."""
        if not self.modules:
            text = "no module has registered a workflow"
        else:
            named = [m.strip() for m in (self.env_modules or "").split(",") if m.strip()]
            # The deployment's own modules first: in a process that imported many (a test run, a notebook),
            # the ones AWSWORLD_MODULES names must not fall past the cut.
            ordered = sorted(self.modules, key=lambda m: not any(m == n or m.startswith(f"{n}.") for n in named))
            shown = ", ".join(ordered[:MAX_MODULES_NAMED])
            more = len(self.modules) - MAX_MODULES_NAMED
            text = f"workflows from {shown}" + (f" and {more} more modules" if more > 0 else "")
        return text if self.env_modules is None else f"{text}; {MODULES_ENV}={self.env_modules!r}"


def _check_unique(table: dict[str, Any], name: str, fn: Any, kind: str) -> None:
    """Refuse a second, different ``kind`` under a taken name (the same code registering again, as a function
    defined inside another does on every call, replaces the first). Two defined inside functions are most often
    two tests each defining its own version under one name: the error says so."""
    existing = table.get(name)
    if existing is not None and existing.fn is not fn and (existing.fn.__code__ is not fn.__code__):
        where = f"{existing.fn.__module__}.{existing.fn.__qualname__} and {fn.__module__}.{fn.__qualname__}"
        local = "<locals>" in existing.fn.__qualname__ and "<locals>" in fn.__qualname__
        hint = " (both are defined inside functions, tests perhaps, and one process registry holds both: give " \
            "each its own name=)" if local else ""
        if not local and _in_a_test(fn) and not _in_a_test(existing.fn):
            raise ValueError(
                f"two different {kind}s are named {name!r} ({where}): a test cannot replace a {kind} by defining "
                f"another under its name (the workflow calls the one it imported). Patch what the {kind}'s body calls "
                "instead, with pytest's monkeypatch (docs: Get started > Your first test, \"Replacing an outside "
                f"service\"), or give the test's own {kind} another name=")
        raise ValueError(f"two different {kind}s are named {name!r} ({where}): pass name= to one of them{hint}")


def _in_a_test(fn: Any) -> bool:
    """Whether ``fn`` is defined in a pytest test module (named test_* or *_test) or a conftest."""
    module = str(getattr(fn, "__module__", "")).rsplit(".", 1)[-1]
    return module.startswith("test_") or module.endswith("_test") or module == "conftest"


REGISTRY = Registry()
_CAPTURING: ContextVar[Registry | None] = ContextVar("awsworld_registering", default=None)


def _registering() -> Registry:
    """Where a decorator registers: the registry a ``Registry.capture()`` block names, else the process's."""
    return _CAPTURING.get() or REGISTRY


MAX_WORKFLOW_NAME_LENGTH = MAX_QUEUE_NAME_LENGTH - len(DEFAULT_QUEUE_PREFIX)
"""The longest workflow name: its runs' queue is ``__wkf_workflow_<name>``, at most ``MAX_QUEUE_NAME_LENGTH``."""
MAX_STEP_NAME_LENGTH = MAX_DEFINITION_NAME_LENGTH
"""The longest step name: a ``step_created``'s ``stepName``."""


def _stable_name(fn: Callable[..., Any], name: str | None, kind: Literal["workflow", "step"]) -> str:
    """The name a workflow or step registers under, refused here (``InvalidNameError``, a ``ValueError``) when the
    World could not take it: a longer one used to register, and then every start of the workflow failed (its
    queue name refused after its ``run_created`` was written), or a run calling the step hung, the World refusing
    the step's declaration at every redelivery."""
    result = name or f"{fn.__module__}.{fn.__qualname__}"
    if any(c.isspace() for c in result) or "<" in result:
        raise InvalidNameError(f"{result!r} cannot name a workflow or step (no whitespace, no <locals>): pass name=")
    limit = MAX_WORKFLOW_NAME_LENGTH if kind == "workflow" else MAX_STEP_NAME_LENGTH
    if len(result) > limit:
        raise InvalidNameError(f"a {kind}'s name is at most {limit} characters (it names the {kind} in every run's "
                               f"log and queue message), got {len(result)}: {result[:40]!r}...; pass a shorter name=")
    return result


def _warn_if_main(fn: Callable[..., Any], name: str | None) -> None:
    """A workflow defined in a script run as ``python script.py`` is named ``__main__.x`` by default; the same
    code imported as a module (by the Lambda handler, by ``awsworld dev``) is ``script.x``, so its runs would
    not find it. Said once per process, as a log warning: it is legal, only fragile."""
    global _warned_main
    if name is None and fn.__module__ == "__main__" and not _warned_main:
        _warned_main = True
        log.warning("workflow %r is registered from __main__, so its default name is %r; imported as a module "
                    "it would be named after that module instead. Pass @workflow(name=...) to keep it stable.",
                    fn.__qualname__, f"__main__.{fn.__qualname__}")


def _require_async(fn: Callable[..., Any], kind: str) -> None:
    """Refuse what ``@step`` or ``@workflow`` cannot make one of, where it is decorated, saying what it is and what
    to write instead: a name given without ``name=`` (``@step("shop.charge")``), a class, a plain ``def``, an
    ``async def`` that yields, and a method, whose ``self`` would be an argument stored in the log (the run failed
    at its first call with ``cannot serialize <class 'Svc'>``, naming neither the method nor the fix)."""
    if isinstance(fn, str):
        raise TypeError(f"@{kind} takes its name as a keyword: @{kind}(name={fn!r})")
    if not inspect.iscoroutinefunction(fn):
        code = getattr(fn, "__code__", None)
        where = f" ({code.co_filename}, line {code.co_firstlineno})" if code is not None else ""
        what = (f"the class {fn.__qualname__}" if inspect.isclass(fn) else
                f"{fn.__qualname__}{where}, an async def that yields (an async generator): return the values "
                "as a list, or write them to a stream (get_writable)" if inspect.isasyncgenfunction(fn) else
                f"{getattr(fn, '__qualname__', repr(fn))}{where}, a plain def: write `async def`"
                if inspect.isfunction(fn) else repr(fn))
        raise TypeError(f"@{kind} needs an async def function, got {what}")
    _refuse_method(fn, kind)


def _refuse_method(fn: Callable[..., Any], kind: str) -> None:
    """A function defined in a class body (``Svc.charge``, its qualname's last dot not after ``<locals>``) whose
    first parameter is ``self`` or ``cls`` is a method: refused, since a step's or workflow's arguments are what its
    call records, and ``self`` is one of them."""
    owner, _, _ = getattr(fn, "__qualname__", "").rpartition(".")
    if not owner or owner.endswith("<locals>"):
        return
    parameters = list(inspect.signature(fn).parameters)
    if parameters and parameters[0] in ("self", "cls"):
        code = fn.__code__
        raise TypeError(
            f"@{kind} cannot decorate the method {fn.__qualname__} ({code.co_filename}, line {code.co_firstlineno}): "
            f"a {kind}'s arguments are recorded in the run's log, and `{parameters[0]}` would be one of them. Make it "
            f"a module-level async def taking what it needs from {owner} (or a @staticmethod without "
            f"`{parameters[0]}`), and call it from the method")


class _Decorator(Protocol):
    """What ``@step(...)`` returns: a decorator that keeps the function's signature."""

    def __call__(self, fn: Callable[P, Coroutine[Any, Any, R]], /) -> Callable[P, Coroutine[Any, Any, R]]: ...


class _CodecDecorator(Protocol[T]):
    """What ``@step(codec=...)`` returns: the decorated function must return what the codec decodes to
    (``Codec[T]``), and keeps its signature."""

    def __call__(self, fn: Callable[P, Coroutine[Any, Any, T]], /) -> Callable[P, Coroutine[Any, Any, T]]: ...


class Workflow(Protocol[P, R_co]):
    """What ``@workflow`` makes of an ``async def`` taking ``P`` and returning ``R_co``, to a type checker: the
    function's own signature (calling it returns its coroutine, a child run inside a workflow) and the definition
    the decorator attached. ``Client.start``, ``start_child`` and ``child_options().start``/``.call`` take one, so
    passing them a ``@step`` (or an undecorated function), which has no ``__awsworld_workflow__``, is a type error
    before it is ``not_a_workflow``'s runtime one (tests/typing/sample_usage.py)."""

    __awsworld_workflow__: WorkflowDef

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R_co]: ...


class _WorkflowDecorator(Protocol):
    """What ``@workflow(...)`` returns: a decorator that keeps the function's signature."""

    def __call__(self, fn: Callable[P, Coroutine[Any, Any, R]], /) -> Workflow[P, R]: ...


class _CodecWorkflowDecorator(Protocol[T]):
    """What ``@workflow(codec=...)`` returns: the decorated function must return what the codec decodes to
    (``Codec[T]``), and keeps its signature."""

    def __call__(self, fn: Callable[P, Coroutine[Any, Any, T]], /) -> Workflow[P, T]: ...


def _mark(fn: Callable[..., Any], attribute: str, definition: WorkflowDef | StepDef) -> None:
    """Attach the definition to the function object (``vars``: a typed ``Callable`` declares no such
    attribute, and this keeps the assignment checked rather than silenced)."""
    vars(fn)[attribute] = definition


@overload
def workflow(fn: Callable[P, Coroutine[Any, Any, R]], /) -> Workflow[P, R]: ...


@overload
def workflow(*, name: str | None = None, retention: Duration | None = None, codec: Codec[T],
             schedule: Schedule | Sequence[Schedule] | None = None,
             args_codec: Codec[tuple[Any, ...]] | None = None, validate_args: bool = True,
             pinned: bool = True,
             concurrency: int | Concurrency | None = None) -> _CodecWorkflowDecorator[T]: ...


@overload
def workflow(*, name: str | None = None, retention: Duration | None = None, codec: None = None,
             schedule: Schedule | Sequence[Schedule] | None = None,
             args_codec: Codec[tuple[Any, ...]] | None = None, validate_args: bool = True,
             pinned: bool = True,
             concurrency: int | Concurrency | None = None) -> _WorkflowDecorator: ...


def workflow(fn: Callable[..., Coroutine[Any, Any, Any]] | None = None, /, *, name: str | None = None,
             retention: Duration | None = None, codec: Codec[Any] | None = None,
             schedule: Schedule | Sequence[Schedule] | None = None,
             args_codec: Codec[tuple[Any, ...]] | None = None, validate_args: bool = True, pinned: bool = True,
             concurrency: int | Concurrency | None = None,
             ) -> Workflow[..., Any] | _WorkflowDecorator | _CodecWorkflowDecorator[Any]:
    """Mark an ``async def`` as a durable workflow. Start it with ``Client.start``.

    ``@workflow`` and ``@workflow(name=...)`` keep the function's parameters and return type. Called inside
    another workflow, it runs as a child run of its own (``awsworld.start_child``, awaited at once); called
    anywhere else (a unit test, a step), it is the plain function.

    ``retention``: how long a finished run of this workflow stays readable (any duration, e.g. ``"30d"``);
    default: the deployment's (``RunRetentionDays``). It is fixed when a run starts (recorded in its
    ``run_created``), so changing it affects new runs only.

    ``codec``: how the workflow's result is stored (``awsworld.Codec``; default: awsworld's JSON envelopes):
    ``run.result()`` and a parent awaiting it as a child decode it with the same codec. ``args_codec``: how a
    run's input is stored (``Client.start``'s, a schedule's, a parent's child call's arguments), a codec of the
    tuple of the workflow's parameters (``PydanticCodec(tuple[Order, int])``; ``durable.codecs.store_call``).

    ``schedule``: a ``Schedule`` (or several) on which the workflow starts itself, once per tick, in the
    deployments that name its module (docs/how-to/schedules.md). Its arguments are checked against the workflow's
    parameters here, when the decorator runs (a ``TypeError`` naming the schedule).

    ``validate_args``: whether a start checks its arguments against the workflow's annotations (pydantic, strict
    mode: ``authoring.arguments``); ``False`` keeps only Python's check of the call's shape.

    ``pinned``: a run stays on the deployment that started it, whatever is deployed after (the default:
    docs/how-to/changing-code.md, "Runs stay on the code that started them"); ``False`` lets every delivery of
    its runs take the newest code, for short runs where pinning buys nothing.

    ``concurrency``: how many runs may run at once (a number), or per key (``Concurrency(1, key=lambda order:
    order.customer_id)``, with ``total=``, ``on_busy=``): the others wait ``pending`` and start in priority, then
    arrival order as slots free (docs/how-to/flow-control.md). A run's clock starts when its slot came: ``now()``
    before its first call is its ``run_started`` time, so a ``sleep("10m")`` first thing sleeps ten minutes from
    then, however long the run waited."""
    if isinstance(retention, int | float) and not isinstance(retention, bool) and retention > 0:
        # A number is seconds to every other duration (sleep(30)) and days to RunRetentionDays: retention=30 meant as
        # a month would delete the run's items 30 s after it ends, so the unit is asked for.
        raise TypeError(f"a workflow's retention takes a unit: retention={retention!r} would be {retention!r} "
                        f"seconds (a number is days in RunRetentionDays); write '{retention:g}d' for days, "
                        f"'{retention:g}s' for seconds, or a timedelta")
    kept = None if retention is None else parse_duration(retention, what="retention")
    if kept is not None and kept <= timedelta(0):
        raise ValueError("a workflow's retention must be positive")

    def decorate(f: Callable[P, Coroutine[Any, Any, R]]) -> Workflow[P, R]:
        _require_async(f, "workflow")
        _warn_if_main(f, name)
        # the body a run replays: ``f``, not the wrapper
        if args_codec is not None:
            check_positional(f, "workflow")
        stable = _stable_name(f, name, "workflow")
        definition = WorkflowDef(stable, f, kept, codec, args_codec, validate_args, pinned,
                                 declare("workflow", stable, concurrency, None))
        _registering().add_workflow(definition)
        declare_all(definition.name, f.__module__, schedule, definition.check_arguments)

        @functools.wraps(f)
        def call(*args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
            runtime = current_runtime.get()
            if runtime is None:
                return f(*args, **kwargs)
            child = cast("Coroutine[Any, Any, R]", call_workflow(runtime, definition, args, kwargs))  # a child run
            return made(runtime, child, "child workflow", definition.name)

        _mark(f, "__awsworld_workflow__", definition)
        _mark(call, "__awsworld_workflow__", definition)
        return cast("Workflow[P, R]", _coroutine_function(call))  # _mark gave it the attribute Workflow declares

    return decorate(fn) if fn is not None else decorate


@overload
def step(fn: Callable[P, Coroutine[Any, Any, R]], /) -> Callable[P, Coroutine[Any, Any, R]]: ...


@overload
def step(*, max_retries: int | None = None, name: str | None = None, retry_delay: Duration | None = None,
         retry: RetryPolicy | None = None, timeout: Duration | None = None, codec: Codec[T],
         semantics: StepSemantics = "at_least_once",
         args_codec: Codec[tuple[Any, ...]] | None = None, concurrency: int | Concurrency | None = None,
         rate: str | RateLimit | None = None) -> _CodecDecorator[T]: ...


@overload
def step(*, max_retries: int | None = None, name: str | None = None, retry_delay: Duration | None = None,
         retry: RetryPolicy | None = None, timeout: Duration | None = None, codec: None = None,
         semantics: StepSemantics = "at_least_once",
         args_codec: Codec[tuple[Any, ...]] | None = None, concurrency: int | Concurrency | None = None,
         rate: str | RateLimit | None = None) -> _Decorator: ...


def step(fn: Callable[..., Coroutine[Any, Any, Any]] | None = None, /, *, max_retries: int | None = None,
         name: str | None = None, retry_delay: Duration | None = None, retry: RetryPolicy | None = None,
         timeout: Duration | None = None, codec: Codec[Any] | None = None,
         semantics: StepSemantics = "at_least_once", args_codec: Codec[tuple[Any, ...]] | None = None,
         concurrency: int | Concurrency | None = None, rate: str | RateLimit | None = None,
         ) -> Callable[..., Coroutine[Any, Any, Any]] | _Decorator | _CodecDecorator[Any]:
    """Mark an ``async def`` as a step: inside a workflow a call is durable (run once, retried, recorded);
    outside a workflow it is a plain function call. The decorated step keeps the function's parameters and
    return type.

    ``retry``: a ``RetryPolicy`` (attempts, back-off, jitter, which errors retry; default: 6 attempts, 5 s
    doubling to 60 s, full jitter). ``max_retries`` (the attempts after the first) and ``retry_delay`` (a fixed
    delay: no back-off, no jitter) are its shorthand; give one or the other, not both, so a policy never
    silently loses a field. ``timeout``: how long one attempt may run (a duration: ``"30s"``, seconds, a
    timedelta); a longer one is cancelled and fails as a retryable ``StepTimeoutError``. ``codec``: how the
    step's result is stored (``awsworld.Codec``; default: awsworld's JSON envelopes); one that fails is a
    ``CodecError``, never retried. ``args_codec``: how a call's arguments are stored, a codec of the tuple of
    the step's parameters (``PydanticCodec(tuple[Order, int])``): encoded where the workflow calls the step,
    decoded where its body runs (``durable.codecs.store_call``).

    ``semantics``: ``"at_least_once"`` (the default) or ``"at_most_once"``, for a side effect that must never
    run twice (a payment): each attempt's start is durable before its body runs, and an attempt cut off before
    its outcome was recorded is failed with ``StepInterruptedError`` (retried as its policy says, as a new
    attempt) instead of running its body again.

    ``concurrency`` and ``rate``: limits across all runs: at most that many attempts at once (``20``, or
    ``Concurrency(2, key=lambda customer, amount: customer)``), at most that many starts per period (``"50/s"``,
    or ``RateLimit("50/s", burst=10, key=...)``); ``name=`` on either shares one limit between steps. An
    attempt beyond the limit waits without holding a container (docs/how-to/flow-control.md). The polls of
    ``poll_until(this_step, ...)`` do not take them (they run inside the flow): pace those with ``interval=``
    (docs/how-to/polling.md)."""
    if semantics not in get_args(StepSemantics):
        raise ValueError(f"@step semantics must be one of {', '.join(map(repr, get_args(StepSemantics)))}, "
                         f"not {semantics!r}")
    if retry is not None and (max_retries is not None or retry_delay is not None):
        raise TypeError("@step takes retry=RetryPolicy(...) or its shorthand max_retries=/retry_delay=, not both "
                        "(put max_attempts and initial_delay in the policy)")
    policy = retry if retry is not None else shorthand(max_retries, retry_delay)
    limit = None if timeout is None else seconds(timeout, what="timeout")
    if limit is not None and limit <= 0:
        raise ValueError("a step's timeout must be positive")

    def decorate(f: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, Coroutine[Any, Any, R]]:
        _require_async(f, "step")
        if args_codec is not None:
            check_positional(f, "step")
        stable = _stable_name(f, name, "step")
        definition = StepDef(stable, f, policy, limit, codec, semantics, args_codec,
                             declare("step", stable, concurrency, rate))
        _registering().add_step(definition)

        @functools.wraps(f)
        def call(*args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
            runtime = current_runtime.get()
            if runtime is None:
                return f(*args, **kwargs)
            step_call = cast("Coroutine[Any, Any, R]", call_step(runtime, definition, args, kwargs))
            return made(runtime, step_call, "step", definition.name)

        _mark(call, "__awsworld_step__", definition)
        return _coroutine_function(call)

    return decorate(fn) if fn is not None else decorate


def _coroutine_function(call: F) -> F:
    """A step's or workflow's wrapper, a plain function that returns the call's coroutine (so the engine sees a
    call the body never awaits: ``runtime.made``), marked as a coroutine function where Python can
    (``inspect.markcoroutinefunction``, 3.12 and later; on 3.11 ``inspect.iscoroutinefunction`` of it is False)."""
    if sys.version_info >= (3, 12):
        inspect.markcoroutinefunction(call)
    return call


def workflow_definition(fn: Any) -> WorkflowDef:
    definition = getattr(fn, "__awsworld_workflow__", None)
    if not isinstance(definition, WorkflowDef):
        raise not_a_workflow(fn)
    return definition


def not_a_workflow(fn: Any, purpose: str = "") -> TypeError:
    """The error for a function given where a ``@workflow`` is needed (a client's start, a child run): a ``@step``
    is named as one, since starting a step on its own is the likely slip, and what to do instead is said."""
    step_definition = getattr(fn, "__awsworld_step__", None)
    if isinstance(step_definition, StepDef):
        return TypeError(f"{step_definition.name!r} is a @step, not a @workflow{purpose}: a step runs inside a "
                         "workflow; start a @workflow that awaits it")
    return TypeError(f"{fn!r} is not a @workflow{purpose}: decorate it with @workflow")


def workflow_name(fn: Any) -> str:
    return workflow_definition(fn).name
